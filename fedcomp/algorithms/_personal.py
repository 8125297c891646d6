"""The personal step shared by the personalised algorithms (Ditto, pFedMe).

Both solve a client's strongly convex personal problem ``f_i + g + (λ/2)‖· − anchor‖²`` by
proximal gradient with a step ``ν``: a number, or ``"auto"``, ``1/(max_i L_i + λ)``, at
which every step decreases every client's personal objective. One step for all clients,
resolved from all of them before round 1, so a Flower node that hosts a few clients
rebuilds the same algorithm from the hyperparameters the server sends.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._base import SetupContext, check_positive


def check_personal_lr(owner: str, personal_lr: Any) -> Any:
    """``"auto"``, or a positive number (as a float)."""
    if personal_lr == "auto":
        return "auto"
    check_positive(owner, personal_lr=personal_lr)
    return float(personal_lr)


def resolve_personal_lr(owner: str, personal_lr: Any, lam: float, setup: SetupContext
                        ) -> float:
    """The personal step to run with: ``"auto"`` resolved to ``1/(max_i L_i + λ)``.

    Raises
    ------
    ValueError
        When the step reaches ``1/ρ`` of a weakly convex ``g`` (its prox is then not
        single-valued).
    """
    step = personal_lr
    if step == "auto":
        largest = float(np.max(np.asarray(setup.client_smoothness(), dtype=np.float64)))
        step = 1.0 / (largest + lam) if largest + lam > 0 else 1.0
    rho = setup.regularizer.weak_convexity
    if 0 < rho < np.inf and step * rho >= 1:
        raise ValueError(f"{owner}: the personal prox step {step:g} must be < 1/rho = "
                         f"{1 / rho:g} for this weakly convex regularizer; lower personal_lr")
    return float(step)


def ready_step(owner: str, step: Any) -> float:
    """The step of a round: a float (``"auto"`` must have been resolved by ``prepare``)."""
    if step == "auto":
        raise ValueError(f"{owner}: personal_lr='auto' is resolved by prepare() before round "
                         "1; run the algorithm through fedcomp.simulate (or call prepare)")
    return float(step)
