"""Personalised composite FL: Ditto's personal ℓ1 models against the global one.

Li, Hu, Beirami, Smith, "Ditto: Fair and Robust Federated Learning Through
Personalization", ICML 2021: on heterogeneous clients the personal models fit each
client better than the global model, the more so the weaker the pull ``λ``. Here ``g =
ℓ1`` is in each personal objective (:func:`fedcomp.algorithms.ditto`) and the clients have
true models with private supports (:func:`fedcomp.data.personal_sparse_regression`), so
the question is also whether a client's personal sparse model finds *its own* support.
Configuration: ``fedcomp/configs/personal_sparse.toml``.
"""

from __future__ import annotations

from typing import Any

from ...config import load
from .._verdict import Comparisons, SeedFinals, cannot_judge, entry

NAME = "personal_sparse"

CLAIM = ("Ditto (Li et al. 2021), with g = l1: on clients with their own true supports, "
         "each client's personal sparse model fits its own data and recovers its own "
         "support better than the global model, and the gain shrinks as lam grows.")

#: The per-client medians a personalised run records (:mod:`fedcomp.experiments._execute`).
PERSONAL, GLOBAL = "personal_objective_median", "global_objective_median"
PERSONAL_F1, GLOBAL_F1 = "personal_support_f1_median", "global_support_f1_median"


def column(metrics: Any, name: str, as_name: str) -> Any:
    """``metrics``' column ``name`` as metric ``as_name``, each seed's too, so that two
    columns of one run can be compared seed by seed (:class:`Comparisons`)."""
    if metrics is None:
        return None
    by_seed = getattr(metrics, "by_seed", None)
    return SeedFinals({as_name: metrics.get(name, float("nan")),
                       **{k: metrics[k] for k in ("diverged", "seeds") if k in metrics}},
                      None if by_seed is None else
                      {seed: {as_name: m.get(name, float("nan"))} for seed, m in by_seed.items()})


def gain(metrics: Any) -> float:
    """The median client's relative gain of its personal model on its own objective."""
    return (metrics[GLOBAL] - metrics[PERSONAL]) / abs(metrics[GLOBAL])


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """Reproduced when, at the smallest λ, the personal models beat the global one on the
    clients' own objective *and* on their own supports' F1 (each a win by more than the
    seeds' spread) and the objective gain shrinks at every larger λ; partly when only the
    wins hold; not reproduced otherwise. A run that diverged makes it "not reproduced".
    """
    cfg = config or load(NAME)
    pulls = sorted((e["personalization"]["lam"], e.get("label", e["name"]))
                   for e in cfg["algorithms"] if "personalization" in e)
    labels = [label for _, label in pulls]
    runs = {label: entry(finals, label) for label in labels}
    rule = (f"at the smallest lam ({labels[0] if labels else '-'}): the median client's "
            "personal objective below the global model's and its personal support F1 above "
            "it (wins over seeds); the median relative gain decreasing in lam")
    failed = cannot_judge(runs, None, (PERSONAL, GLOBAL, PERSONAL_F1, GLOBAL_F1))
    if failed or not labels:
        return failed or "not reproduced (no personalised run)", rule
    compared = Comparisons()
    first = runs[labels[0]]
    fits = compared.beats(column(first, PERSONAL, "objective"),
                          column(first, GLOBAL, "objective"), "objective",
                          f"{labels[0]} personal", "global")
    recovers = compared.beats(column(first, PERSONAL_F1, "support_f1"),
                              column(first, GLOBAL_F1, "support_f1"), "support_f1",
                              f"{labels[0]} personal", "global", higher_is_better=True)
    gains = [gain(runs[label]) for label in labels]
    shrinks = all(a > b for a, b in zip(gains, gains[1:], strict=False))
    detail = "; gains " + ", ".join(f"{label} {g:.1%}" for label, g in zip(labels, gains,
                                                                            strict=True))
    if fits and recovers and shrinks:
        result = "reproduced"
    else:
        result = "partly" if fits and recovers else "not reproduced"
    return result, compared.rule(rule + detail)


__all__ = ["CLAIM", "NAME", "verdict"]
