"""Client-level differential privacy: the utility each ε costs FedAvg, FedDA and ZA1.

McMahan, Ramage, Talwar, Zhang, "Learning Differentially Private Recurrent Language Models",
ICLR 2018 (arXiv:1710.06963): with enough clients, a model trained with client-level DP
(each upload clipped to norm ``C``, Gaussian noise ``σC`` on the sum, the privacy spent
counted by a moments / RDP accountant) reaches nearly the utility of the non-private model,
and the gap closes as the privacy budget ``ε`` grows. fedcomp's ``dp_utility``
configuration asks it of three composite methods on ℓ1-regularized logistic regression:
each runs without privacy and at several target ``ε`` (:mod:`fedcomp.privacy`), every
client in every round.

The rule compares final objectives (the median over seeds): for each algorithm, the excess
``F(ε) − F(not private)`` at the largest ``ε`` is at most :data:`NEAR` of ``F(not private)``
and at most :data:`CLOSING` of the excess at the smallest ``ε``. Reproduced when every
algorithm shows it, partly when some do.
"""

from __future__ import annotations

from typing import Any

from ...config import load
from .._verdict import cannot_judge, entry, value

#: The excess at the largest ε, relative to the non-private objective, that counts as near.
NEAR = 0.05
#: The share of the smallest ε's excess that may remain at the largest ε.
CLOSING = 0.25

CLAIM = ("McMahan et al. (ICLR 2018): with enough clients, the utility of a client-level "
         "private model approaches the non-private model's as epsilon grows.")


def private_runs(config: dict[str, Any]) -> dict[str, tuple[str | None, dict[str, float]]]:
    """Per registered algorithm: its non-private run's label and ``{label: target ε}``."""
    out: dict[str, tuple[str | None, dict[str, float]]] = {}
    for item in config["algorithms"]:
        name, label = item["name"], item.get("label", item["name"])
        plain, private = out.get(name, (None, {}))
        if "privacy" in item:
            private = {**private, label: float(item["privacy"]["target_epsilon"])}
        else:
            plain = label
        out[name] = (plain, private)
    return out


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """Reproduced / partly / not reproduced from the final objectives (see the module)."""
    rule = (f"per algorithm: final objective at the largest epsilon within {NEAR:.0%} of the "
            f"non-private run's, and its excess over it at most {CLOSING:.0%} of the smallest "
            "epsilon's; every algorithm: reproduced; some: partly")
    runs = private_runs(config or load("dp_utility"))
    held, notes = [], []
    for name, (plain, private) in runs.items():
        if plain is None or len(private) < 2:
            continue
        labels = [plain, *private]
        found = {lab: entry(finals, lab) for lab in labels}
        failed = cannot_judge(found, None, "objective")
        if failed:
            notes.append(f"{name}: {failed}")
            continue
        base = value(found[plain], "objective")
        smallest = min(private, key=lambda lab: private[lab])
        largest = max(private, key=lambda lab: private[lab])
        excess_small = value(found[smallest], "objective") - base
        excess_large = value(found[largest], "objective") - base
        ok = excess_large <= NEAR * abs(base) and excess_large <= CLOSING * max(excess_small, 0)
        notes.append(f"{name}: excess {excess_small:.3g} at eps {private[smallest]:g}, "
                     f"{excess_large:.3g} at eps {private[largest]:g} "
                     f"({excess_large / abs(base):.1%} of {base:.4g})")
        if ok:
            held.append(name)
    judged = [n for n in runs if runs[n][0] is not None and len(runs[n][1]) >= 2]
    if not judged:
        return "not reproduced (no algorithm with private and non-private runs)", rule
    level = ("reproduced" if len(held) == len(judged) else "partly" if held
             else "not reproduced")
    return f"{level} ({'; '.join(notes)})", rule
