"""FedDR supplement Figs. 2, 7-11: FedAvg, FedProx, FedPD, FedDR on Synthetic(α, β).

Tran-Dinh, Pham, Phan, Nguyen, "FedDR – Randomized Douglas-Rachford Splitting Algorithms for
Nonconvex Federated Composite Optimization", NeurIPS 2021. Configuration:
``configs/feddr_synthetic.toml``; rule: :func:`fedcomp.experiments._feddr.synthetic_verdict`.
"""

from __future__ import annotations

from typing import Any

from ._feddr import load_config
from ._feddr import synthetic_verdict as verdict

NAME = "feddr_synthetic"


def __getattr__(name: str) -> Any:
    if name == "CONFIG":
        return load_config(NAME)
    raise AttributeError(name)


__all__ = ["NAME", "verdict"]
