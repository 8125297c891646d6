"""Compressed local training reaches a target accuracy with fewer uploaded bits.

Condat, Agarský, Richtárik, "Provably Doubly Accelerated Federated Learning: The First
Theoretically Successful Combination of Local Training and Communication Compression"
(arXiv:2210.13277, CompressedScaffnew); Condat, Agarský, Malinovsky, Richtárik, "TAMUNA"
(arXiv:2302.09832); Condat, Maranjyan, Richtárik, "LoCoDL" (ICLR 2025, arXiv:2403.04348).
Their experiments plot the error of logistic regression on LIBSVM data against the bits
the clients upload: local training with compression reaches a given accuracy with fewer
bits than local training alone (Scaffnew/ProxSkip), which itself needs fewer than FedAvg.

fedcomp's ``condat_bits`` configuration runs them on the bundled breast-cancer set with a
``target`` (``‖x − x*‖ ≤ 10⁻⁶‖x*‖``), so each run reports ``bits_up_to_target``, the bits
uploaded up to the first evaluation that reached it (``inf`` if none did: FedAvg's client
drift keeps it above any such target).

Rule (on the medians over seeds): every compressed method (``compressed_scaffnew``,
``tamuna``, ``locodl``) reaches the target with fewer bits than Scaffnew and than FedAvg:
reproduced; some of them: partly; none: not reproduced.
"""

from __future__ import annotations

import math
from typing import Any

from .._verdict import Comparisons, baseline, cannot_judge, entry, noted, value

COMPRESSED = ("compressed_scaffnew", "tamuna", "locodl")
BASELINES = ("scaffnew", "fedavg")
METRIC = "bits_up_to_target"

CLAIM = ("Condat et al.: local training with compression (CompressedScaffnew, TAMUNA, LoCoDL) "
         "reaches a given accuracy with fewer uploaded bits than local training alone "
         "(Scaffnew/ProxSkip) and than FedAvg.")


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None
            ) -> tuple[str, str]:
    """Reproduced / partly / not reproduced from the bits uploaded to reach the target."""
    rule = ("every compressed method (compressed_scaffnew, tamuna, locodl) reaches the target "
            "with fewer bits_up than scaffnew and fedavg (never reached: infinitely many); "
            "some: partly")
    proposed = {name: entry(finals, name) for name in COMPRESSED}
    baselines = {name: entry(finals, name) for name in BASELINES}
    failed = cannot_judge(proposed, baselines, METRIC)
    if failed:
        return failed, rule
    best_baseline = min(baseline(b, METRIC) for b in baselines.values())
    compared = Comparisons()
    winners = [name for name, run in proposed.items()
               if all([compared.beats(run, rival, METRIC, name, rival_name)
                       for rival_name, rival in baselines.items()])
               and math.isfinite(value(run, METRIC))]
    ratios = ", ".join(f"{name} {value(run, METRIC) / best_baseline:.2f}x"
                       for name, run in proposed.items()) if math.isfinite(best_baseline) else ""
    level = ("reproduced" if len(winners) == len(COMPRESSED) else "partly" if winners
             else "not reproduced")
    detail = f" ({ratios} of the best baseline's bits)" if ratios else ""
    return noted(level + detail, baselines, METRIC), compared.rule(rule)
