"""FedDR supplement Figs. 2, 7-11: FedAvg, FedProx, FedPD, FedDR on Synthetic(α, β).

Tran-Dinh, Pham, Phan, Nguyen, "FedDR – Randomized Douglas-Rachford Splitting Algorithms for
Nonconvex Federated Composite Optimization", NeurIPS 2021. Configuration:
``fedcomp/configs/feddr_synthetic.toml``; rule:
:func:`fedcomp.experiments._feddr.synthetic_verdict`.
"""

from __future__ import annotations

from ._feddr import synthetic_verdict as verdict

NAME = "feddr_synthetic"




__all__ = ["NAME", "verdict"]
