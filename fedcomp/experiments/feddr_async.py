"""FedDR supplement Fig. 12: FedDR vs asyncFedDR against simulated time.

Tran-Dinh, Pham, Phan, Nguyen, "FedDR", NeurIPS 2021. Configuration:
``configs/feddr_async.toml``; rule: :func:`fedcomp.experiments._feddr.async_verdict`.
"""

from __future__ import annotations

from typing import Any

from ._feddr import async_verdict as verdict
from ._feddr import load_config

NAME = "feddr_async"


def __getattr__(name: str) -> Any:
    if name == "CONFIG":
        return load_config(NAME)
    raise AttributeError(name)


__all__ = ["NAME", "verdict"]
