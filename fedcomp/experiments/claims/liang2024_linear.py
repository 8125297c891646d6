"""Liang, Peng, Zhang (2023), Section 7, Figure 1: decentralized sparse linear regression.

The configuration is ``fedcomp/configs/liang2024_linear.toml``; the claim and its verdict rule
are in :mod:`fedcomp.experiments.liang2024`.
"""

from .liang2024 import CLAIM, verdict

__all__ = ["CLAIM", "verdict"]
