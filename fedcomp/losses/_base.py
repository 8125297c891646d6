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

``x`` has shape ``(B, *param_shape)`` (one model per client of the block) and ``batch`` is
a :class:`fedcomp.data.Batch` with a leading axis of the same B.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

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


def check_l2(l2: Any, owner: str) -> None:
    if not l2 >= 0:
        raise ValueError(f"{owner}: l2 must be >= 0 (got l2={l2!r}); it is the ridge strength "
                         "inside the smooth loss")
