"""Constraints as regularizers: indicators of an ℓ2 ball, an ℓ1 ball and a box, and the
exact prox of ℓ1 + ℓ2-ball.

The value of an indicator is 0 on the set (up to a relative slack of 1e-9, or 64 ulps in
float32, so projected points count as feasible) and ``+inf`` outside; its prox is the
Euclidean projection, whatever the step.

References
----------
Duchi, J., Shalev-Shwartz, S., Singer, Y. and Chandra, T. "Efficient projections onto the
ℓ1-ball for learning in high dimensions." ICML 2008.

Parikh, N. and Boyd, S. "Proximal Algorithms." Foundations and Trends in Optimization,
2014 (projections, §6.2).

Yu, Y.-L. "On decomposing the proximal map." NeurIPS 2013 (prox of a sum as a composition).
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

import array_api_compat

from .._array import Array, check_step, expand_to, model_norm, namespace, per_client
from ._base import (
    check_nonnegative,
    check_param_ndim,
    check_positive,
    check_real,
    feasibility_rtol,
    flatten_models,
    indicator_value,
    model_axes,
)
from ._convex import soft_threshold


def _project_l2_ball(x: Array, radius: float, param_ndim: int) -> Array:
    """Radial projection: ``x · radius / max(‖x‖, radius)`` (exactly ``x`` inside)."""
    xp = namespace(x)
    norm = model_norm(x, param_ndim)
    return x * expand_to(radius / xp.maximum(norm, radius), x.ndim)


@dataclass(frozen=True)
class L2Ball:
    """Indicator of the Euclidean ball ``{x : ‖x‖₂ ≤ radius}`` (Frobenius for matrices).

    Parameters
    ----------
    radius : float, default 1.0
        Radius ``r > 0``.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    The prox ignores the step and projects radially::

        prox_{s g}(v) = v · min(1, r / ‖v‖₂).

    Examples
    --------
    >>> import numpy as np
    >>> ball = L2Ball(radius=1.0)
    >>> ball.prox(np.array([[3.0, 4.0], [0.3, 0.4]]), 1.0)
    array([[0.6, 0.8],
           [0.3, 0.4]])
    >>> ball.value(np.array([[3.0, 4.0], [0.3, 0.4]]))
    array([inf,  0.])
    """

    radius: float = 1.0
    param_ndim: int = 1
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_positive("radius", self.radius, "L2Ball", "pass the radius of the ball, e.g. 1.0")
        check_param_ndim(self.param_ndim, "L2Ball")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def value(self, x: Array) -> Array:
        norm = model_norm(x, self.param_ndim)
        return indicator_value(norm <= self.radius * (1.0 + feasibility_rtol(x)), norm)

    def prox(self, x: Array, step: Any) -> Array:
        check_step(step)
        return _project_l2_ball(x, self.radius, self.param_ndim)


@dataclass(frozen=True)
class L1Ball:
    """Indicator of the ℓ1 ball ``{x : ‖x‖₁ ≤ radius}`` (entrywise for matrices).

    Parameters
    ----------
    radius : float, default 1.0
        Radius ``r > 0``.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    The prox ignores the step and projects (Duchi et al. 2008)::

        prox_{s g}(v) = sign(v) · max(|v| − θ, 0),   θ = max(0, max_j (Σ_{i≤j} μ_i − r)/j),

    with ``μ`` the magnitudes ``|v|`` sorted in decreasing order. The maximum over ``j`` is
    attained at Duchi et al.'s index ``ρ`` (``θ ≥ (Σ_{i≤j} μ_i − r)/j`` for every ``j``
    because ``Σ_i max(μ_i − θ, 0) = r``), which avoids a gather; ``θ ≤ 0`` exactly when
    ``v`` is inside the ball. One sort and one cumulative sum per model, batched, then one
    Newton step on ``Σ_i max(|v_i| − θ, 0) = r`` to remove the rounding of long cumulative
    sums (so float32 projections of long vectors stay inside the ball).

    It is computed in the variables ``gap = max|v| − |v|`` and ``τ = max|v| − θ``
    (``τ = min_j (Σ_{i≤j} gap_(i) + r)/j`` with ``gap`` sorted increasingly, and
    ``|v| − θ = τ − gap``): every quantity is then at most ``r`` for the entries kept, so
    they are accurate to ulps of ``r`` even when ``r ≪ max|v|`` (where ``|v| − θ`` would
    cancel to ulps of ``max|v|``), and no sum overflows. A final rescaling by
    ``min(1, r/‖p‖₁)`` absorbs the rounding that is left, so every projection is feasible.

    References
    ----------
    Duchi, Shalev-Shwartz, Singer and Chandra, ICML 2008.

    Examples
    --------
    >>> import numpy as np
    >>> ball = L1Ball(radius=1.0)
    >>> ball.prox(np.array([[2.0, -1.0, 0.1], [0.2, -0.3, 0.1]]), 1.0)
    array([[ 1. ,  0. ,  0. ],
           [ 0.2, -0.3,  0.1]])
    """

    radius: float = 1.0
    param_ndim: int = 1
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_positive("radius", self.radius, "L1Ball", "pass the radius of the ball, e.g. 1.0")
        check_param_ndim(self.param_ndim, "L1Ball")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        norm = xp.sum(xp.abs(x), axis=model_axes(x, self.param_ndim))
        return indicator_value(norm <= self.radius * (1.0 + feasibility_rtol(x)), norm)

    def prox(self, x: Array, step: Any) -> Array:
        check_step(step)
        xp = namespace(x)
        flat = flatten_models(x, self.param_ndim)
        mag = xp.abs(flat)
        peak = xp.max(mag, axis=-1, keepdims=True)
        # gap and τ rather than |v| and θ (see Notes): |v| − θ cancels to an ulp of max|v|,
        # which with r ≪ max|v| in float32 is far beyond the feasibility slack, while the
        # kept entries τ − gap are accurate to an ulp of τ ≤ r. gap itself is exact for
        # |v| ≥ max|v|/2 (Sterbenz), which covers every kept entry unless r > max|v|/2
        gap = peak - mag
        partial = xp.cumulative_sum(xp.sort(gap, axis=-1), axis=-1)
        counts = xp.arange(1, flat.shape[-1] + 1, dtype=flat.dtype,
                           device=array_api_compat.device(flat))
        tau = xp.min((partial + self.radius) / counts, axis=-1, keepdims=True)
        # one Newton step on Σ max(τ − gap, 0) = r with the (now known) active set: a long
        # cumulative sum is sequential in NumPy and leaves τ off by ~n ulps in float32, so
        # the projection could land outside the ball; the reductions below are pairwise
        active = xp.astype(gap < tau, flat.dtype)
        excess = xp.sum(xp.maximum(tau - gap, 0.0), axis=-1, keepdims=True) - self.radius
        tau = tau - excess / xp.maximum(xp.sum(active, axis=-1, keepdims=True), 1.0)
        kept = xp.maximum(tau - gap, 0.0)
        # 0 − kept, not −kept: a dropped negative entry becomes +0.0 as soft thresholding gives
        projected = xp.where(flat < 0, 0.0 - kept, kept)
        # the rounding left can still put ‖p‖₁ a few ulps above r; rescaling onto the
        # sphere moves each entry by about as much and makes every projection feasible.
        # Models inside the ball (θ ≤ 0, i.e. τ ≥ max|v|) are returned exactly as they are
        total = xp.sum(kept, axis=-1, keepdims=True)
        over = total > self.radius
        shrink = xp.where(over, self.radius / xp.where(over, total, xp.ones_like(total)),
                          xp.ones_like(total))
        projected = xp.where(tau >= peak, flat, projected * shrink)
        return xp.reshape(projected, x.shape)


@dataclass(frozen=True)
class Box:
    """Indicator of the box ``{x : lower ≤ x_i ≤ upper for every i}``.

    Parameters
    ----------
    lower, upper : float, default -1.0 and 1.0
        Bounds with ``lower ≤ upper``; infinite bounds are allowed (``lower=0.0,
        upper=inf`` is the nonnegative orthant).
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    The prox ignores the step and clips: ``prox_{s g}(v) = min(max(v, lower), upper)``.

    Examples
    --------
    >>> import numpy as np
    >>> Box(lower=-0.5, upper=1.0).prox(np.array([[-2.0, 0.3, 4.0]]), 1.0)
    array([[-0.5,  0.3,  1. ]])
    """

    lower: float = -1.0
    upper: float = 1.0
    param_ndim: int = 1
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        for name in ("lower", "upper"):
            bound = getattr(self, name)
            if isinstance(bound, numbers.Integral) and not isinstance(bound, bool):
                check_real(name, bound, "Box")  # an int beyond a float's range
            if isinstance(bound, bool) or not isinstance(bound, numbers.Real) or math.isnan(bound):
                raise ValueError(f"Box: {name} must be a real number (got {name}={bound!r})")
            object.__setattr__(self, name, float(bound))
        if not (self.lower <= self.upper and self.lower < math.inf and self.upper > -math.inf):
            raise ValueError(f"Box: needs lower <= upper with lower < inf and upper > -inf "
                             f"(got lower={self.lower!r}, upper={self.upper!r}); swap or "
                             "widen the bounds")
        check_param_ndim(self.param_ndim, "Box")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        rtol = feasibility_rtol(x)
        finite = [abs(b) for b in (self.lower, self.upper) if math.isfinite(b)]
        slack = rtol * max([1.0, *finite])
        # largest violation of either bound; ±inf bounds give -inf, never a violation
        violation = xp.max(xp.maximum(self.lower - x, x - self.upper),
                           axis=model_axes(x, self.param_ndim))
        return indicator_value(violation <= slack, violation)

    def prox(self, x: Array, step: Any) -> Array:
        check_step(step)
        xp = namespace(x)
        return xp.minimum(xp.maximum(x, self.lower), self.upper)


@dataclass(frozen=True)
class L1L2Ball:
    """``g(x) = alpha · ‖x‖₁ + indicator(‖x‖₂ ≤ radius)``: a lasso inside a Euclidean ball.

    Parameters
    ----------
    alpha : float, default 1.0
        ℓ1 strength ``λ ≥ 0``.
    radius : float, default 1.0
        Radius ``r > 0`` of the ℓ2 ball.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    The prox is exact as a composition: soft threshold, then radial projection::

        prox_{s g}(v) = P_r(S_{s·alpha}(v)),   P_r(w) = w · min(1, r / ‖w‖₂).

    Proof: with ``w = S_{s·alpha}(v)`` and ``u = c·w`` (``0 < c ≤ 1``), ``v − w`` lies in
    ``s·alpha·∂‖w‖₁ = s·alpha·∂‖u‖₁`` (same signs) and ``w − u = (1/c − 1)·u`` lies in the
    normal cone of the ball at ``u``; their sum ``v − u`` is the optimality condition.

    References
    ----------
    Yu, "On decomposing the proximal map", NeurIPS 2013.

    Examples
    --------
    >>> import numpy as np
    >>> reg = L1L2Ball(alpha=1.0, radius=1.0)
    >>> reg.prox(np.array([[4.0, 5.0, 0.5]]), 1.0)
    array([[0.6, 0.8, 0. ]])
    >>> reg.value(np.array([[0.6, 0.8, 0.0]]))
    array([1.4])
    """

    alpha: float = 1.0
    radius: float = 1.0
    param_ndim: int = 1
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_nonnegative("alpha", self.alpha, "L1L2Ball")
        check_positive("radius", self.radius, "L1L2Ball",
                       "pass the radius of the ball, e.g. 1.0 (use L1 for no constraint)")
        check_param_ndim(self.param_ndim, "L1L2Ball")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        l1 = xp.sum(xp.abs(x), axis=model_axes(x, self.param_ndim))
        norm = model_norm(x, self.param_ndim)
        inside = norm <= self.radius * (1.0 + feasibility_rtol(x))
        return self.alpha * l1 + indicator_value(inside, norm)

    def prox(self, x: Array, step: Any) -> Array:
        shrunk = soft_threshold(x, per_client(step, x, self.param_ndim) * self.alpha)
        return _project_l2_ball(shrunk, self.radius, self.param_ndim)
