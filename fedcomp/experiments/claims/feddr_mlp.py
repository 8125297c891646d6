"""FedDR supplement, the network experiments: FedDR vs FedAvg, FedProx, FedPD on MLPs.

Tran-Dinh, Pham, Phan, Nguyen, "FedDR – Randomized Douglas-Rachford Splitting Algorithms
for Nonconvex Federated Composite Optimization", NeurIPS 2021, Figs. 2-4: the 60-32-10 MLP
on Synthetic(α, β) and the 784-128-10 MLP on MNIST / FEMNIST, with ``g = 0.01‖x‖₁``.
Configuration: ``fedcomp/configs/feddr_mlp.toml`` (Synthetic(1,1) and bundled digits here; MNIST
and FEMNIST from files).
"""

from __future__ import annotations

from typing import Any

from .._verdict import Comparisons, cannot_judge, entry, noted

NAME = "feddr_mlp"
BASELINES = ("fedavg", "fedprox", "fedpd")


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """FedDR's final objective is the lowest in every variant (reproduced), in some (partly);
    lowest by more than the seeds' spread (:class:`~fedcomp.experiments._verdict.Comparisons`).

    A diverged or missing FedDR run makes it "not reproduced"; a diverged or missing
    baseline counts as infinitely bad (:mod:`fedcomp.experiments._verdict`), but a variant
    where no baseline ran is not won.
    """
    variants = sorted({key[-1] for key in finals if len(key) > 2}) or [""]

    def name(label: str, variant: str) -> str:
        return f"{label}_{variant}" if variant else label

    def run(label: str, variant: str) -> Any:
        return entry(finals, label, variant=variant or None)

    proposed = {name("feddr", v): run("feddr", v) for v in variants}
    baselines = {name(b, v): run(b, v) for v in variants for b in BASELINES}
    rule = "final objective of feddr < fedavg, fedprox and fedpd in every variant"
    failed = cannot_judge(proposed, baselines, "objective")
    if failed:
        return failed, rule

    compared = Comparisons()

    def lowest_in(v: str) -> bool:
        others = [name(b, v) for b in BASELINES]
        return any(baselines[b] is not None for b in others) and all([
            compared.beats(proposed[name("feddr", v)], baselines[b], "objective",
                           name("feddr", v), b) for b in others])

    lowest = [v for v in variants if lowest_in(v)]
    if len(lowest) == len(variants):
        result = "reproduced"
    elif lowest:
        result = f"partly (lowest in {', '.join(lowest)} only)"
    else:
        result = "not reproduced"
    return noted(result, baselines, "objective"), compared.rule(rule)




__all__ = ["NAME", "verdict"]
