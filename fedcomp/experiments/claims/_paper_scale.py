"""FedCanon's experiments at the paper's scale: judged on the real images, timed on a stand-in.

``fedcanon_fmnist`` (the CNN at Fashion-MNIST's shape) and ``fedcanon_resnet18`` (ResNet-18
at CIFAR-10's) read their data with :func:`~fedcomp.data.image_files_or_synthetic`: the real
files when the loader finds them, else labelled synthetic images of the same shape. On the
real images the claim is judged by ``fedcanon_nn``'s rule (test accuracy and wall time). On
the stand-in a round costs what it costs on the real images, but accuracies on random
prototypes say nothing of the claim: the verdict is "timing only (synthetic stand-in data)",
with every method's wall time, and never "reproduced" or "not reproduced".

Which data a run had is what the run recorded in its summary row (the ``stand_in`` column,
:func:`~fedcomp.data._stand_in.data_origin`), never whether the files are there when the
verdict is made: a report reuses finished runs, and runs made on the stand-in stay "timing
only" after the files appear. Runs that recorded nothing (made before the column) are too.
"""

from __future__ import annotations

import math
from typing import Any

from ...data._stand_in import STAND_IN, missing_image_files
from .fedcanon_nn import verdict as network_verdict

#: The verdict of a run on synthetic stand-in data: a level of no rule (never a claim's).
TIMING_ONLY = "timing only (synthetic stand-in data)"

#: Why runs that did not record their data are not judged either.
UNRECORDED = ("the runs did not record whether they had the real images (made before fedcomp "
              "recorded it): delete the experiment's folder to run them again")


def stand_in_reason(config: dict[str, Any]) -> str:
    """``""`` when the configuration's data set is read from its files now, else why not (the
    loader's message: a run now would have synthetic stand-in images). The verdict reads
    what the runs recorded instead (:func:`recorded_stand_in`)."""
    data = config.get("data") or {}
    return missing_image_files(str(data.get("dataset")), data.get("path")) or ""


def timing_only(finals: dict[tuple[str, ...], dict[str, float]], reason: str
                ) -> tuple[str, str]:
    """:data:`TIMING_ONLY` and, as its rule, why and every method's wall time per round."""
    rounds = {key: metrics.get("round", math.nan) for key, metrics in finals.items()}
    times = ", ".join(
        f"{'/'.join(key[:1] + key[2:])} {metrics.get('wall_s', math.nan):.2f} s"
        + (f" ({metrics['wall_s'] / rounds[key]:.3f} s a round)"
           if rounds[key] and rounds[key] == rounds[key] else "")
        for key, metrics in finals.items())
    why = f"no verdict: {reason}" if reason == UNRECORDED else (
        f"no verdict on synthetic data: the run had no real images ({reason.split('. ')[0]}), "
        "so it ran on labelled synthetic images of the same shape and sizes, whose "
        "accuracies say nothing of the claim")
    return TIMING_ONLY, f"{why}; wall times: {times}"


def recorded_stand_in(summary: list[dict[str, Any]]) -> str:
    """``""`` when every run recorded the real images, else why not: the first stand-in's
    reason, or :data:`UNRECORDED` when a run recorded nothing (its row has no ``stand_in``)."""
    reasons = [row.get(STAND_IN) for row in summary]
    if not reasons or not all(isinstance(reason, str) for reason in reasons):
        return UNRECORDED
    return next((reason for reason in reasons if reason), "")


def run_inputs(summary: list[dict[str, Any]]) -> dict[str, Any]:
    """Whether the runs had the real images, as their rows recorded, read once before the
    verdict is applied to the medians and to every seed."""
    return {"stand_in": recorded_stand_in(summary)}


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None,
            stand_in: str | None = None) -> tuple[str, str]:
    """:data:`TIMING_ONLY` on synthetic stand-in data, else ``fedcanon_nn``'s rule.

    ``stand_in`` is :func:`recorded_stand_in` of the runs (read by :func:`run_inputs`);
    without it the data are taken to be real (a rule applied to hand-made finals).
    """
    if stand_in:
        return timing_only(finals, stand_in)
    return network_verdict(finals, config)


__all__ = ["TIMING_ONLY", "UNRECORDED", "recorded_stand_in", "run_inputs", "stand_in_reason",
           "timing_only", "verdict"]
