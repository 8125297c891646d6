"""Seed 001, Figs. 3-4: federated sparse multiclass logistic regression on (F)EMNIST.

Bao, Crawshaw, Luo, Liu, "Fast Composite Optimization and Statistical Recovery in Federated
Learning", ICML 2022, Section 4 and Appendix F: ℓ1 softmax regression, one client per
writer, FedMiD and FedDA against Fast-FedDA, C-FedDA and MC-FedDA. Configuration:
``fedcomp/configs/bao2022_emnist.toml`` (bundled digits here, FEMNIST from LEAF files).
"""

from __future__ import annotations

from typing import Any

from .._verdict import Comparisons, cannot_judge, entry, noted, problem
from ._bao2022 import BASELINES, PROPOSED

NAME = "bao2022_emnist"

#: The proposed methods each figure's caption names, by the number of classes.
#: Fig. 4 (EMNIST-10, K = 40: what the bundled digits stand in for): "Our proposed
#: algorithms Fast-FedDA and C-FedDA reach a lower loss and higher accuracy than the two
#: baselines from (Yuan et al., 2021)"; Fig. 3 (EMNIST-62): "Our proposed algorithms
#: Fast-FedDA and MC-FedDA reach a lower loss and higher accuracy than the two baselines".
NAMED = {10: ("fast_fedda", "c_fedda"), 62: ("fast_fedda", "mc_fedda")}
FIGURE = {10: "Fig. 4", 62: "Fig. 3"}


def named(config: Any = None) -> tuple[int, tuple[str, ...]]:
    """``(classes, methods)``: the figure's class count (62 for a 62-class run, else 10)
    and the proposed methods its caption names."""
    classes = ((config or {}).get("data") or {}).get("n_classes", 10)
    key = 62 if classes == 62 else 10
    return key, NAMED[key]


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """The captions' claim: the named proposed methods end with a lower training loss and a
    higher test accuracy than both baselines.

    A proposed method *wins* when its final training loss is below both baselines' and its
    test accuracy above both, each by more than the seeds' spread (the captions say
    "higher", and a tie is not higher; :class:`~fedcomp.experiments._verdict.Comparisons`).
    Reproduced when every method the caption names wins (Fig. 4's Fast-FedDA and C-FedDA;
    Fig. 3's Fast-FedDA and MC-FedDA for a 62-class run); partly when some proposed method
    wins; not reproduced otherwise. A named method that diverged or is missing makes it
    "not reproduced"; a diverged or missing baseline counts as infinitely bad
    (:mod:`fedcomp.experiments._verdict`).
    """
    classes, claimed = named(config)
    metrics = ("training_loss", "test_accuracy")
    runs = {p: entry(finals, p) for p in PROPOSED}
    baselines = {b: entry(finals, b) for b in BASELINES}
    rule = (f"a proposed method wins with a lower training_loss and a higher test_accuracy "
            f"than fedda and fedmid; {FIGURE[classes]} names {' and '.join(claimed)}: both "
            "win: reproduced; some proposed method wins: partly")
    failed = cannot_judge({p: runs[p] for p in claimed}, baselines, metrics)
    if failed:
        return failed, rule
    compared = Comparisons()

    def wins(p: str) -> bool:  # every comparison made, so that each margin is shown
        return all([compared.beats(runs[p], baselines[b], metric, p, b,
                                   higher_is_better=metric == "test_accuracy")
                    for metric in metrics for b in BASELINES])

    winners = [p for p in PROPOSED if not problem(runs[p], metrics) and wins(p)]
    if all(p in winners for p in claimed):
        result = "reproduced"
    elif winners:
        result = f"partly ({', '.join(winners)} {'wins' if len(winners) == 1 else 'win'})"
    else:
        result = "not reproduced"
    return noted(result, baselines, metrics), compared.rule(rule)




__all__ = ["NAME", "NAMED", "verdict"]
