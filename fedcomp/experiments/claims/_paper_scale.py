"""FedCanon's experiments at the paper's scale: judged on the real images, timed on a stand-in.

``fedcanon_fmnist`` (the CNN at Fashion-MNIST's shape) and ``fedcanon_resnet18`` (ResNet-18
at CIFAR-10's) read their data with :func:`~fedcomp.data.image_files_or_synthetic`: the real
files when the loader finds them, else labelled synthetic images of the same shape. On the
real images the claim is judged by ``fedcanon_nn``'s rule (test accuracy and wall time). On
the stand-in a round costs what it costs on the real images, but accuracies on random
prototypes say nothing of the claim: the verdict is "timing only (synthetic stand-in data)",
with every method's wall time, and never "reproduced" or "not reproduced".
"""

from __future__ import annotations

import math
from typing import Any

from ...data._stand_in import missing_image_files
from .fedcanon_nn import verdict as network_verdict

#: The verdict of a run on synthetic stand-in data: a level of no rule (never a claim's).
TIMING_ONLY = "timing only (synthetic stand-in data)"


def stand_in_reason(config: dict[str, Any]) -> str:
    """``""`` when the configuration's data set is read from its files, else why not (the
    loader's message: the run had synthetic stand-in images)."""
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
    first = reason.split(". ")[0]
    rule = (f"no verdict on synthetic data: the run had no real images ({first}), so it ran "
            "on labelled synthetic images of the same shape and sizes, whose accuracies say "
            f"nothing of the claim; wall times: {times}")
    return TIMING_ONLY, rule


def verdict_inputs(config: dict[str, Any]) -> dict[str, Any]:
    """Whether the runs had the real images, checked once before the verdict is applied to
    the medians and to every seed."""
    return {"stand_in": stand_in_reason(config)}


def verdict(finals: dict[tuple[str, ...], dict[str, float]], config: Any = None,
            stand_in: str | None = None) -> tuple[str, str]:
    """:data:`TIMING_ONLY` on synthetic stand-in data, else ``fedcanon_nn``'s rule.

    ``stand_in`` is :func:`stand_in_reason` (measured once by :func:`verdict_inputs`); when
    it is not given it is checked here from ``config``, and without either the data are
    taken to be real (a rule applied to hand-made finals).
    """
    if stand_in is None and config is not None:
        stand_in = stand_in_reason(config)
    if stand_in:
        return timing_only(finals, stand_in)
    return network_verdict(finals, config)


__all__ = ["TIMING_ONLY", "stand_in_reason", "timing_only", "verdict", "verdict_inputs"]
