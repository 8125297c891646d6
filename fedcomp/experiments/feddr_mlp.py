"""FedDR supplement, the network experiments: FedDR vs FedAvg, FedProx, FedPD on MLPs.

Tran-Dinh, Pham, Phan, Nguyen, "FedDR – Randomized Douglas-Rachford Splitting Algorithms
for Nonconvex Federated Composite Optimization", NeurIPS 2021, Figs. 2-4: the 60-32-10 MLP
on Synthetic(α, β) and the 784-128-10 MLP on MNIST / FEMNIST, with ``g = 0.01‖x‖₁``.
Configuration: ``configs/feddr_mlp.toml`` (Synthetic(1,1) and bundled digits here; MNIST
and FEMNIST from files).
"""

from __future__ import annotations

from typing import Any

from ._toml import toml_config

NAME = "feddr_mlp"
BASELINES = ("fedavg", "fedprox", "fedpd")


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """FedDR's final objective is the lowest in every variant (reproduced), in some (partly)."""
    variants = sorted({key[-1] for key in finals if len(key) > 2}) or [""]
    lowest = []
    for variant in variants:
        objective = {key[0]: m.get("objective", float("nan")) for key, m in finals.items()
                     if (key[-1] if len(key) > 2 else "") == variant}
        others = [objective[name] for name in BASELINES if name in objective]
        if "feddr" in objective and others and all(objective["feddr"] < v for v in others):
            lowest.append(variant)
    rule = "final objective of feddr < fedavg, fedprox and fedpd in every variant"
    if len(lowest) == len(variants):
        return "reproduced", rule
    if lowest:
        return f"partly (lowest in {', '.join(lowest)} only)", rule
    return "not reproduced", rule


__getattr__ = toml_config(NAME)


__all__ = ["NAME", "verdict"]
