"""The loss protocol: the smooth part ``f_i`` of each client, evaluated on a block.

A loss is a frozen dataclass of hyperparameters with pure, batched functions:

* ``value(x, batch)`` → ``(B,)``: ``Σ_j w_bj ℓ(x_b; a_bj, y_bj)`` (+ ridge) for each client b;
* ``grad(x, batch)`` → ``(B, *param_shape)``: its gradient in ``x_b``;
* ``smoothness(batch)`` → ``(B,)``: an upper bound on each client's Lipschitz constant L_i;
* ``param_shape(feature_shape, n_classes)`` → the shape of one model.

Optional, for exact local solvers (FedDR's exact ``prox_{ηf_i}``, FedADMM, ...):

* ``hessian(x, batch)`` → ``(B, D, D)`` with ``D = prod(param_shape)``: each client's Hessian
  in the row-major flattening of its model;
* ``quadratic`` (bool): the loss is quadratic in ``x``, so one Newton step is exact.

Optional, checked once when a :class:`fedcomp.Problem` is built:

* ``check_targets(targets, n_classes)``: raise a ``ValueError`` naming the labels found when
  the real (unpadded) targets, a NumPy array, are not what the loss is defined on.

``x`` has shape ``(B, *param_shape)`` (one model per client of the block) and ``batch`` is
a :class:`fedcomp.data.Batch` with a leading axis of the same B.
"""

from __future__ import annotations

import math
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .._array import Array
from ..data._client_data import Batch


@runtime_checkable
class Loss(Protocol):
    """Protocol every smooth loss satisfies (see module docstring)."""

    def value(self, x: Array, batch: Batch) -> Array: ...

    def grad(self, x: Array, batch: Batch) -> Array: ...

    def smoothness(self, batch: Batch) -> Array: ...

    def param_shape(self, feature_shape: tuple[int, ...], n_classes: int | None = None
                    ) -> tuple[int, ...]: ...

    @property
    def param_ndim(self) -> int: ...


def check_l2(l2: Any, owner: str, name: str = "l2") -> None:
    """A penalty strength inside the smooth loss must be a finite number ``>= 0``, naming it."""
    if not (l2 >= 0 and math.isfinite(l2)):
        what = "the ridge strength" if name == "l2" else "the strength of a penalty"
        raise ValueError(f"{owner}: {name} must be >= 0 and finite (got {name}={l2!r}); "
                         f"it is {what} inside the smooth loss")


def _shown(labels: np.ndarray, limit: int = 8) -> str:
    """The first distinct labels, for an error message."""
    head = ", ".join(f"{v:g}" for v in labels[:limit])
    return f"[{head}{', ...' if len(labels) > limit else ''}] ({len(labels)} distinct)"


def check_signed_labels(owner: str, targets: np.ndarray) -> None:
    """Binary labels must be −1 and +1: with 0/1 or 1/2 the margins ``y aᵀx`` are wrong and
    training quietly fits something else."""
    found = np.unique(targets)
    if not np.isin(found, (-1.0, 1.0)).all():
        raise ValueError(f"{owner} needs labels -1 and +1, found {_shown(found)}; map the two "
                         "classes to -1/+1 (e.g. y = 2 * (y == positive) - 1; libsvm_file(..., "
                         "labels='binary') does it for LIBSVM files)")


def check_class_ids(owner: str, targets: np.ndarray, n_classes: int | None) -> None:
    """Class ids must be integers in ``0 … n_classes − 1`` (a larger id would silently get an
    all-zero one-hot row, or index past the logits)."""
    if n_classes is None:
        return
    found = np.unique(targets)
    bad = (found != np.round(found)) | (found < 0) | (found >= n_classes)
    if bad.any():
        raise ValueError(f"{owner} needs class ids 0..{n_classes - 1}, found {_shown(found)}; "
                         "renumber the classes from 0 (LIBSVM files number them from 1: "
                         "libsvm_file(..., labels='classes') does it) or raise n_classes")
