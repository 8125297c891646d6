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

from typing import Any, ClassVar, Protocol, runtime_checkable

from .._array import Array, expand_to, namespace


@runtime_checkable
class Regularizer(Protocol):
    """Protocol every regularizer satisfies (see module docstring)."""

    param_ndim: int
    convex: ClassVar[bool]

    def value(self, x: Array) -> Array: ...

    def prox(self, x: Array, step: Any) -> Array: ...

    @property
    def weak_convexity(self) -> float: ...


def check_nonnegative(name: str, value: float, owner: str) -> None:
    """Raise ``ValueError`` naming the parameter and the fix when ``value < 0``."""
    if not value >= 0:
        raise ValueError(f"{owner}: {name} must be >= 0 (got {name}={value!r}); "
                         f"use {name}=0 for no penalty")


def check_param_ndim(param_ndim: int, owner: str) -> None:
    if param_ndim not in (1, 2):
        raise ValueError(f"{owner}: param_ndim must be 1 (vector model) or 2 (matrix model), "
                         f"got {param_ndim!r}")


def max_step(step: Any) -> float:
    """Largest prox step in ``step`` (scalar or array) as a Python float, for validation."""
    if isinstance(step, int | float):
        return float(step)
    from .._array import to_numpy

    arr = to_numpy(step)
    return float(arr.max()) if arr.size else 0.0


def model_axes(x: Array, param_ndim: int) -> tuple[int, ...]:
    """The trailing axes of ``x`` that form one model."""
    return tuple(range(x.ndim - param_ndim, x.ndim))


def check_positive(name: str, value: float, owner: str, fix: str) -> None:
    """Raise ``ValueError`` naming the parameter and ``fix`` unless ``0 < value < inf``."""
    if not 0 < value < float("inf"):
        raise ValueError(f"{owner}: {name} must be > 0 and finite (got {name}={value!r}); {fix}")


def euclidean_norm(x: Array, ndim: int) -> Array:
    """``‖·‖₂`` over the trailing ``ndim`` axes of ``x``, free of overflow and underflow.

    ``sqrt(Σ x²)`` overflows once an entry exceeds ``sqrt(max)`` (1e154 in float64, 2e19 in
    float32) and underflows to 0 below ``sqrt(tiny)``. Scaling each model by a power of
    two ``2^k`` near ``max |x|`` first (as LAPACK's ``nrm2`` scales) avoids both, and since
    multiplying by a power of two is exact the result is bit for bit the unscaled one
    wherever that neither overflows nor underflows. That path runs only where the plain
    ``sqrt(Σ x²)`` overflowed or lost precision (one host-side check per call).
    """
    xp = namespace(x)
    axes = tuple(range(x.ndim - ndim, x.ndim))
    finfo = xp.finfo(x.dtype)
    sum_sq = xp.sum(x * x, axis=axes)
    # the common case, at the plain cost: nothing overflowed and no sum lost precision in
    # the subnormal range (a sum of exactly 0, whether x is 0 or its squares all underflowed,
    # is harmless to every caller: such a model is inside any ball and below any threshold)
    if bool(xp.all(xp.isfinite(sum_sq) & ((sum_sq >= finfo.smallest_normal) | (sum_sq == 0)))):
        return xp.sqrt(sum_sq)
    # max and min reduce without a temporary the size of x (unlike abs), and the square is
    # taken in place: each large temporary costs more than a pass over x on NumPy
    peak = xp.maximum(xp.max(x, axis=axes), -xp.min(x, axis=axes))
    # clipped so that scale and 1/scale are finite (log2 of the largest float rounds up to
    # the exponent limit); a zero model stays 0, an infinite one inf and a NaN NaN
    scale = 2.0 ** xp.floor(xp.log2(xp.clip(peak, finfo.smallest_normal, 0.5 * finfo.max)))
    scaled = x * expand_to(1.0 / scale, x.ndim)
    scaled *= scaled
    return scale * xp.sqrt(xp.sum(scaled, axis=axes))


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
