"""FedDR supplement Fig. 12: FedDR vs asyncFedDR against simulated time.

Tran-Dinh, Pham, Phan, Nguyen, "FedDR", NeurIPS 2021. Configuration:
``fedcomp/configs/feddr_async.toml``; rule: :func:`fedcomp.experiments._feddr.async_verdict`.
"""

from __future__ import annotations

from ._feddr import async_verdict as verdict

NAME = "feddr_async"




__all__ = ["NAME", "verdict"]
