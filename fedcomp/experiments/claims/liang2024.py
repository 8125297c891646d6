"""Liang, Peng, Zhang (2023), Section 7: decentralized sparse linear / logistic regression.

"Gradient Tracking for High Dimensional Federated Optimization", Figures 1 and 2: M = 16
nodes on a chain (σ₂ ≈ 0.987), d = 1024, s = 16, p = 12, K = 10, minibatch 10, fresh
samples every step; every client's optimum is dense and distinct while the optimum of the
average objective is 16-sparse. Configurations: ``fedcomp/configs/liang2024_linear.toml`` and
``fedcomp/configs/liang2024_logistic.toml``.

Claim: the gradient-tracking methods (DFedDA-GT, DReFedDA-GT, MReFedDA-GT) lead in ℓ1
error over DFedMiD, DFedDA, Fast-FedDA and C-FedDA.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from .._verdict import Comparisons, SeedFinals, cannot_judge, entry, noted

CLAIM = "the GT methods (DFedDA-GT, DReFedDA-GT, MReFedDA-GT) lead in l1 error"

#: "Below" means lower by at least this fraction; a smaller gap is a tie (the quick-size
#: logistic run had DFedDA-GT 0.9961 vs DFedDA 0.9977, a 0.16 % "win").
MARGIN = 0.02

#: Run labels of the two groups in the configurations.
GT_METHODS = ("dfedda_gt", "drefedda_gt", "mrefedda_gt")
BASELINES = ("dfedmid", "dfedda", "fast_fedda", "c_fedda")

#: The ℓ1 error of one node's model (``evaluate_on = ["node"]``), e.g. ``node0_l1_error``.
NODE_L1 = re.compile(r"node\d+_l1_error")


def evaluated(metrics: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """The final metrics with ``l1_error`` of the model the run evaluates.

    A gossip run evaluated at one node only (``[topology] evaluate_on = ["node"]``, as the
    authors' code evaluates node 0: pengyang7881187/DFedDA-GT, ``train.py`` line 422) has no
    node-average ``l1_error``; its ``node{n}_l1_error`` is then the run's ℓ1 error. Runs
    with an ``l1_error`` (the node average, or a centralized model) are left as they are.

    Examples
    --------
    >>> evaluated({"node0_l1_error": 0.5, "node0_l1_error_sparse": 0.4})["l1_error"]
    0.5
    >>> evaluated({"l1_error": 0.2, "node0_l1_error": 0.5})["l1_error"]
    0.2
    """
    if metrics is None or "l1_error" in metrics:
        return metrics
    node = [key for key in metrics if NODE_L1.fullmatch(key)]
    if len(node) != 1:
        return metrics
    by_seed = getattr(metrics, "by_seed", None)  # each seed's, for the paired margins
    return SeedFinals({**metrics, "l1_error": metrics[node[0]]}, None if by_seed is None else
                      {seed: {**m, "l1_error": m[node[0]]} for seed, m in by_seed.items()})


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """Reproduced / partly / not reproduced, from the final ℓ1 error per run label.

    Reproduced when every GT method ends with an ``l1_error`` at least :data:`MARGIN` (2 %)
    below every baseline's, a win by more than the seeds' spread too (the median paired
    difference, :class:`~fedcomp.experiments._verdict.Comparisons`); partly when some GT
    method wins so over every baseline. A GT method that diverged or
    is missing makes it "not reproduced"; a diverged or missing baseline counts as infinitely
    bad, and with no baseline at all there is nothing to compare
    (:mod:`fedcomp.experiments._verdict`). A gossip run evaluated at one node counts that
    node's error (:func:`evaluated`).
    """
    rule = (f"l1 error: every GT method at least {MARGIN:.0%} below every baseline (partly: "
            "some GT method that far below every baseline)")
    proposed = {label: evaluated(entry(finals, label)) for label in GT_METHODS}
    baselines = {label: evaluated(entry(finals, label)) for label in BASELINES}
    failed = cannot_judge(proposed, baselines, "l1_error")
    if failed:
        return failed, rule
    compared = Comparisons()

    def far_below(gt: str, rival: str) -> bool:  # a win, and by at least MARGIN
        margin = compared.margin(proposed[gt], baselines[rival], "l1_error", gt, rival)
        # exactly MARGIN below is not below it (the ratio's last bit aside)
        return margin.outcome == "win" and margin.median > MARGIN + 1e-12

    below_all = {gt: all([far_below(gt, b) for b in baselines]) for gt in proposed}
    if all(below_all.values()):
        result = "reproduced"
    else:
        result = "partly" if any(below_all.values()) else "not reproduced"
    return noted(result, baselines, "l1_error"), compared.rule(rule)
