"""Seed 002, Fig. 3 and TABLE V with a network: FedCanon vs FedMiD, FedDA, ZA1, CNN + SCAD.

Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with Efficient
Proximal Operation on Heterogeneous Data", Section IV-B: 10 clients, i.i.d., Dir(1) and
Dir(0.2), a CNN with the SCAD penalty, test accuracy against training time (Fig. 3) and the
total time per method for K ∈ {10, 20, 40, 80} (TABLE V). Configuration:
``configs/fedcanon_nn.toml`` (bundled digits at reduced scale; FMNIST from files). The rule
is :func:`fedcomp.experiments.fedcanon_vs_composite.verdict`'s, on test accuracy.
"""

from __future__ import annotations

from typing import Any

from ._toml import toml_config

NAME = "fedcanon_nn"

#: Test accuracy within this of the best other method counts as "at least the accuracy".
ACCURACY_TOL = 0.01


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """In every variant: FedCanon's final test accuracy ≥ the best other − 0.01 and its
    total wall time the smallest; partly when one of the two holds in every variant."""
    def variant_of(key: tuple[str, ...]) -> str:
        return key[2] if len(key) > 2 else ""

    accurate = fastest = True
    for variant in sorted({variant_of(key) for key in finals}):
        rows = {key[0]: m for key, m in finals.items() if variant_of(key) == variant}
        if "fedcanon" not in rows or len(rows) < 2:
            return "not reproduced", "FedCanon or every baseline missing"
        others = [m for name, m in rows.items() if name != "fedcanon"]
        ours = rows["fedcanon"]
        accurate &= ours["test_accuracy"] >= max(m["test_accuracy"] for m in others) \
            - ACCURACY_TOL
        fastest &= ours["wall_s"] <= min(m["wall_s"] for m in others)
    rule = (f"every variant: FedCanon test accuracy >= best other - {ACCURACY_TOL} and "
            "FedCanon wall time lowest")
    if accurate and fastest:
        return "reproduced", rule
    detail = (f" (accuracy part {'holds' if accurate else 'fails'}, time part "
              f"{'holds' if fastest else 'fails'})")
    return ("partly" if accurate or fastest else "not reproduced"), rule + detail


__getattr__ = toml_config(NAME)


__all__ = ["NAME", "verdict"]
