"""The shared claim of Bao et al. 2022's synthetic recovery figures and its verdict rule.

Bao, Crawshaw, Luo, Liu, "Fast Composite Optimization and Statistical Recovery in
Federated Learning", ICML 2022, Section 4, Figures 1 and 2: "Our proposed three algorithms
show faster numerical convergence", and every method but FedMiD recovers the support
(Fig. 1) or the true rank (Fig. 2).
"""

from __future__ import annotations

from .._verdict import Comparisons, cannot_judge, entry, noted, problem, value

PROPOSED = ("fast_fedda", "c_fedda", "mc_fedda")
BASELINES = ("fedda", "fedmid")


def verdict(finals: dict[tuple[str, ...], dict[str, float]], error: str,
            recovered: str, target: float) -> tuple[str, str]:
    """Reproduced / partly / not reproduced from the final metrics (median over seeds).

    ``finals`` maps ``(label, mode)`` to final metrics. *Faster*: each proposed method ends
    with a lower ``error`` than both baselines at the same number of rounds. *Recovery*:
    ``recovered`` reaches ``target`` (F1 ≥ 0.9, or the true rank) for FedDA and the
    proposed methods. *Lower* is a win by more than the seeds' spread
    (:class:`~fedcomp.experiments._verdict.Comparisons`). Reproduced when both hold, partly
    when one does. A proposed method
    that diverged or is missing makes it "not reproduced"; a diverged or missing baseline
    counts as infinitely bad (:mod:`fedcomp.experiments._verdict`): every proposed method
    is faster than it, and a FedDA that diverged recovers nothing.
    """
    proposed = {p: entry(finals, p) for p in PROPOSED}
    baselines = {b: entry(finals, b) for b in BASELINES}
    if recovered == "support_f1":
        what = f"{recovered} >= {target:g}"

        def reaches(v: float) -> bool:
            return v >= target
    else:
        what = f"{recovered} == {target:g}"

        def reaches(v: float) -> bool:
            return v == target
    rule = (f"faster: Fast-FedDA, C-FedDA and MC-FedDA end with a lower {error} than FedDA "
            f"and FedMiD; recovery: FedDA and the three proposed methods end with {what}")
    failed = cannot_judge(proposed, baselines, (error, recovered))
    if failed:
        return failed, rule
    runs = Comparisons()
    faster = all([runs.beats(proposed[p], baselines[b], error, p, b)
                  for p in PROPOSED for b in BASELINES])
    fedda = baselines["fedda"]
    recovers = not problem(fedda, recovered) and all(
        reaches(value(m, recovered)) for m in (fedda, *proposed.values()))
    if faster and recovers:
        result = "reproduced"
    else:
        result = "partly" if faster or recovers else "not reproduced"
    return noted(result, baselines, error), runs.rule(rule)
