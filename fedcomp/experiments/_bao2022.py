"""The shared claim of Bao et al. 2022's synthetic recovery figures and its verdict rule.

Bao, Crawshaw, Luo, Liu, "Fast Composite Optimization and Statistical Recovery in
Federated Learning", ICML 2022, Section 4, Figures 1 and 2: "Our proposed three algorithms
show faster numerical convergence", and every method but FedMiD recovers the support
(Fig. 1) or the true rank (Fig. 2).
"""

from __future__ import annotations

PROPOSED = ("fast_fedda", "c_fedda", "mc_fedda")
BASELINES = ("fedda", "fedmid")


def verdict(finals: dict[tuple[str, ...], dict[str, float]], error: str,
            recovered: str, target: float) -> tuple[str, str]:
    """Reproduced / partly / not reproduced from the final metrics (median over seeds).

    ``finals`` maps ``(label, mode)`` to final metrics. *Faster*: each proposed method ends
    with a lower ``error`` than both baselines at the same number of rounds. *Recovery*:
    ``recovered`` reaches ``target`` (F1 ≥ 0.9, or the true rank) for FedDA and the
    proposed methods. Reproduced when both hold, partly when one does.
    """
    def final(label: str, metric: str) -> float:
        for (name, *_), values in finals.items():
            if name == label:
                return values.get(metric, float("nan"))
        return float("nan")

    best_baseline = min(final(b, error) for b in BASELINES)
    faster = all(final(p, error) < best_baseline for p in PROPOSED)
    if recovered == "support_f1":
        recovers = all(final(m, recovered) >= target for m in ("fedda", *PROPOSED))
        what = f"{recovered} >= {target:g}"
    else:
        recovers = all(final(m, recovered) == target for m in ("fedda", *PROPOSED))
        what = f"{recovered} == {target:g}"
    rule = (f"faster: Fast-FedDA, C-FedDA and MC-FedDA end with a lower {error} than FedDA "
            f"and FedMiD; recovery: FedDA and the three proposed methods end with {what}")
    if faster and recovers:
        return "reproduced", rule
    return ("partly" if faster or recovers else "not reproduced"), rule
