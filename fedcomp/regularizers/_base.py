"""The regularizer protocol shared by every penalty and constraint.

A regularizer is a frozen dataclass that stores its hyperparameters (validated at
construction) and exposes two pure functions over a *block* of models:

* ``value(x)`` — ``g`` of each model, shape ``x.shape[:-param_ndim]``;
* ``prox(x, step)`` — ``argmin_u step·g(u) + ½‖u − x‖²`` for each model, where ``step``
  is a scalar or one value per model (shape ``x.shape[:-param_ndim]``).

``param_ndim`` is the number of trailing axes that form one model (1 for a vector, 2 for
a softmax weight matrix or a matrix parameter); all leading axes are batch (client) axes.
"""

from __future__ import annotations

import numbers
from typing import Any, ClassVar, Protocol, runtime_checkable

from .._array import Array, namespace


@runtime_checkable
class Regularizer(Protocol):
    """Protocol every regularizer satisfies (see module docstring)."""

    param_ndim: int
    convex: ClassVar[bool]

    def value(self, x: Array) -> Array: ...

    def prox(self, x: Array, step: Any) -> Array: ...

    @property
    def weak_convexity(self) -> float: ...


def check_real(name: str, value: Any, owner: str) -> None:
    """Raise ``TypeError`` naming the parameter unless ``value`` is a real number, and
    ``ValueError`` for an integer too large for a float.

    Before any comparison: ``L1(alpha="0.1")`` would otherwise end in Python's own
    "'>=' not supported between instances of 'str' and 'int'", naming nothing, and
    ``L1(alpha=10**400)`` in an OverflowError at the first prox.
    """
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{owner}: {name} must be a real number (got {name}={value!r} of type "
                        f"{type(value).__name__}); pass a float such as {name}=0.1")
    try:
        float(value)
    except OverflowError:
        # no repr: an integer past 4300 digits has none
        raise ValueError(f"{owner}: {name} is too large for a float (beyond 1.8e308); pass a "
                         f"finite {name} such as {name}=0.1") from None


def check_nonnegative(name: str, value: float, owner: str) -> None:
    """Raise ``ValueError`` naming the parameter and the fix unless ``0 <= value < inf``
    (``TypeError`` unless a real number, :func:`check_real`).

    An infinite strength (``L1(alpha=float("inf"))``) would make every prox return zeros
    or NaNs silently; the registry refuses it for configurations, this for direct use.
    """
    check_real(name, value, owner)
    if not value >= 0:
        raise ValueError(f"{owner}: {name} must be >= 0 (got {name}={value!r}); "
                         f"use {name}=0 for no penalty")
    if value == float("inf"):
        raise ValueError(f"{owner}: {name} must be finite (got {name}={value!r}); "
                         f"pass a finite strength such as {name}=0.1")


def check_param_ndim(param_ndim: int, owner: str) -> None:
    # True == 1 and 1.0 == 1: a flag or a float is not a number of axes
    if (isinstance(param_ndim, bool) or not isinstance(param_ndim, numbers.Integral)
            or param_ndim not in (1, 2)):
        raise ValueError(f"{owner}: param_ndim must be 1 (vector model) or 2 (matrix model), "
                         f"got {param_ndim!r}")


def max_step(step: Any) -> float | None:
    """Largest prox step in ``step`` (scalar or array) as a Python float, for validation.

    ``None`` for a step traced inside ``jax.jit``, which has no value to read: the step
    bounds were checked by the algorithm's ``prepare`` before round 1, as they are for any
    step computed inside a compiled call.
    """
    if isinstance(step, int | float):
        return float(step)
    from .._array import is_traced, to_numpy

    if is_traced(step):
        return None
    arr = to_numpy(step)
    return float(arr.max()) if arr.size else 0.0


def model_axes(x: Array, param_ndim: int) -> tuple[int, ...]:
    """The trailing axes of ``x`` that form one model."""
    return tuple(range(x.ndim - param_ndim, x.ndim))


def check_positive(name: str, value: float, owner: str, fix: str) -> None:
    """Raise ``ValueError`` naming the parameter and ``fix`` unless ``0 < value < inf``
    (``TypeError`` unless a real number, :func:`check_real`)."""
    check_real(name, value, owner)
    if not 0 < value < float("inf"):
        raise ValueError(f"{owner}: {name} must be > 0 and finite (got {name}={value!r}); {fix}")


def flatten_models(x: Array, param_ndim: int) -> Array:
    """View each model of a block as a vector: shape ``(*x.shape[:-param_ndim], n)``."""
    if param_ndim == 1:
        return x
    batch = tuple(x.shape[: x.ndim - param_ndim])
    return namespace(x).reshape(x, (*batch, -1))


def indicator_value(inside: Array, like: Array) -> Array:
    """``0`` where ``inside`` holds and ``+inf`` elsewhere, in the dtype/device of ``like``.

    ``like`` is a floating array with the shape of ``inside`` (a per-model norm, say).
    """
    xp = namespace(like)
    return xp.where(inside, xp.zeros_like(like), xp.full_like(like, float("inf")))


def feasibility_rtol(x: Array) -> float:
    """Relative slack allowed by indicator values: 1e-9, or 64 ulps in low precision.

    Projections land on the boundary up to rounding; in float32 the rounding of an ℓ1 or
    ℓ2 norm alone exceeds 1e-9, and a projected model must still count as feasible.
    """
    return max(1e-9, 64.0 * float(namespace(x).finfo(x.dtype).eps))
