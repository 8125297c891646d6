"""Seed 001, Figs. 3-4: federated sparse multiclass logistic regression on (F)EMNIST.

Bao, Crawshaw, Luo, Liu, "Fast Composite Optimization and Statistical Recovery in Federated
Learning", ICML 2022, Section 4 and Appendix F: ℓ1 softmax regression, one client per
writer, FedMiD and FedDA against Fast-FedDA, C-FedDA and MC-FedDA. Configuration:
``configs/bao2022_emnist.toml`` (bundled digits here, FEMNIST from LEAF files).
"""

from __future__ import annotations

from typing import Any

from ._bao2022 import BASELINES, PROPOSED
from ._toml import toml_config

NAME = "bao2022_emnist"

#: Test accuracy within this of the best baseline counts as "at least as accurate".
ACCURACY_TOL = 0.005


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """A proposed method *wins* when it ends with a lower training loss than both baselines
    and a test accuracy ≥ the best baseline's − 0.005; reproduced when all three win,
    partly when some do (the paper's own figures single out two of the three)."""
    final = {key[0]: m for key, m in finals.items()}

    def value(label: str, metric: str) -> float:
        return final.get(label, {}).get(metric, float("nan"))

    best_loss = min(value(b, "training_loss") for b in BASELINES)
    best_accuracy = max(value(b, "test_accuracy") for b in BASELINES)
    winners = [p for p in PROPOSED if value(p, "training_loss") < best_loss
               and value(p, "test_accuracy") >= best_accuracy - ACCURACY_TOL]
    rule = ("a proposed method wins with a lower training_loss than fedda and fedmid and a "
            f"test_accuracy >= the best baseline's - {ACCURACY_TOL}; all of fast_fedda, "
            "c_fedda, mc_fedda win: reproduced; some: partly")
    if len(winners) == len(PROPOSED):
        return "reproduced", rule
    if winners:
        return f"partly ({', '.join(winners)} {'wins' if len(winners) == 1 else 'win'})", rule
    return "not reproduced", rule


__getattr__ = toml_config(NAME)


__all__ = ["NAME", "verdict"]
