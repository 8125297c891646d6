"""Seed 002, Fig. 3 and TABLE V with a network: FedCanon vs FedMiD, FedDA, ZA1, CNN + SCAD.

Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with Efficient
Proximal Operation on Heterogeneous Data", Section IV-B: 10 clients, i.i.d., Dir(1) and
Dir(0.2), a CNN with the SCAD penalty, test accuracy against training time (Fig. 3) and the
total time per method for K ∈ {10, 20, 40, 80} (TABLE V). Configuration:
``fedcomp/configs/fedcanon_nn.toml`` (bundled digits at reduced scale; FMNIST from files). The rule
is :func:`fedcomp.experiments.fedcanon_vs_composite.verdict`'s, on test accuracy.
"""

from __future__ import annotations

from typing import Any

from .fedcanon_vs_composite import verdict as composite_verdict

NAME = "fedcanon_nn"

#: Its verdict compares the runs' wall times: the report runs them one at a time
#: (:func:`fedcomp.report.jobs_for`), never beside each other on shared cores.
TIMED = True

#: Test accuracy within this of the best other method counts as "at least the accuracy".
ACCURACY_TOL = 0.01


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """:func:`fedcomp.experiments.fedcanon_vs_composite.verdict` on test accuracy (within
    :data:`ACCURACY_TOL`) and the single runs' wall times (a ratio within ±10 % is a tie).

    The linear experiment times every method again (best of 5); the networks' runs are
    not re-timed, so a tie band keeps run-to-run noise from deciding the time part.
    """
    return composite_verdict(finals, times=None, accuracy="test_accuracy",
                             accuracy_tol=ACCURACY_TOL)




__all__ = ["NAME", "verdict"]
