"""Fed-HT's Simulation I: federated hard thresholding against distributed IHT.

Tong, Liang, Zhu, Bi, "Federated Nonconvex Sparse Learning", arXiv:2101.00052, Section V:
on ℓ0-constrained least squares with non-IID synthetic data (Simulation I,
:func:`fedcomp.data.tong_sparse_regression`), Fed-HT (local SGD, the server hard-thresholds
the average) and FedIter-HT (every local step thresholded too) decrease the objective
faster per communication round than distributed IHT (one gradient step per round).

Rule (final objective at round 100, medians over seeds): both Fed-HT and FedIter-HT end
below distributed IHT: reproduced; one of them: partly; neither: not reproduced.
"""

from __future__ import annotations

from typing import Any

from .._verdict import Comparisons, baseline, cannot_judge, entry, noted, value

PROPOSED = ("fed_ht", "fediter_ht")
BASELINE = "distributed_iht"

CLAIM = ("Tong et al., Simulation I: Fed-HT and FedIter-HT reach a lower objective than "
         "distributed IHT after the same 100 communication rounds.")


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """Reproduced / partly / not reproduced from the final objectives."""
    rule = ("final objective: fed_ht and fediter_ht both below distributed_iht: reproduced; "
            "one: partly")
    proposed = {name: entry(finals, name) for name in PROPOSED}
    baselines = {BASELINE: entry(finals, BASELINE)}
    failed = cannot_judge(proposed, baselines, "objective")
    if failed:
        return failed, rule
    target = baseline(baselines[BASELINE], "objective")
    compared = Comparisons()
    below = [name for name, run in proposed.items()
             if compared.beats(run, baselines[BASELINE], "objective", name, BASELINE)]
    detail = ", ".join(f"{name} {value(run, 'objective'):.3g}" for name, run in proposed.items())
    level = ("reproduced" if len(below) == len(PROPOSED) else "partly" if below
             else "not reproduced")
    return noted(f"{level} ({detail} vs distributed_iht {target:.3g})", baselines,
                 "objective"), compared.rule(rule)
