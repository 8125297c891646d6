"""Weakly convex folded-concave penalties: MCP and SCAD.

Both are separable, ``g(x) = Σ_i p(x_i)``, and ``ρ``-weakly convex (``g + ρ‖·‖²/2`` is
convex), so ``u ↦ s·g(u) + ½‖u − v‖²`` is strongly convex and the prox is single-valued
exactly when ``s < 1/ρ``. Outside that range the prox raises instead of returning one of
several minimisers.

References
----------
Zhang, C.-H. "Nearly unbiased variable selection under minimax concave penalty." Annals of
Statistics 38(2), 2010.

Fan, J. and Li, R. "Variable selection via nonconcave penalized likelihood and its oracle
properties." Journal of the American Statistical Association 96(456), 2001.

Breheny, P. and Huang, J. "Coordinate descent algorithms for nonconvex penalized regression,
with applications to biological feature selection." Annals of Applied Statistics 5(1), 2011
(the thresholding operators for a general step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .._array import Array, namespace, per_client
from ._base import check_nonnegative, check_param_ndim, check_real, max_step, model_axes


def _gap(gap: Any, x: Array) -> Any:
    """``1/ρ − s`` as the prox divides by it: at least the smallest normal of ``x``'s dtype.

    The step is checked against ``1/ρ`` in float64, but a per-model step cast to float32
    can round up to ``1/ρ`` itself; the clamp turns the resulting ``0/0`` into the limit
    ``s → 1/ρ`` (hard thresholding at the end of the concave part) instead of NaN: the
    quotient overflows to ``±inf`` (NumPy warns) and the clip that follows absorbs it. A
    Python float gap is positive already and is left alone.
    """
    if isinstance(gap, float):
        return gap
    xp = namespace(x)
    return xp.maximum(gap, xp.finfo(x.dtype).smallest_normal)


@dataclass(frozen=True)
class MCP:
    """Minimax concave penalty ``g(x) = Σ_i p(x_i)`` (Zhang 2010).

    ``p(t) = alpha·|t| − t²/(2·gamma)`` for ``|t| ≤ gamma·alpha`` and ``gamma·alpha²/2``
    beyond: the ℓ1 penalty near zero, flattening out so large coefficients are not shrunk.

    Parameters
    ----------
    alpha : float, default 1.0
        Strength ``λ ≥ 0``.
    gamma : float, default 3.0
        Concavity ``γ > 1``; ``γ → ∞`` recovers the ℓ1 penalty. The penalty is
        ``1/γ``-weakly convex, so the prox needs ``step < γ``.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    For ``s < γ`` the prox is firm thresholding, coordinate by coordinate::

        prox_{s g}(v) = 0                                  if |v| ≤ s·alpha
                      = sign(v)·(|v| − s·alpha)/(1 − s/γ)   if s·alpha < |v| ≤ γ·alpha
                      = v                                  if |v| > γ·alpha

    (the middle piece reaches ``γ·alpha`` at ``|v| = γ·alpha``, so the map is continuous).
    It is computed as ``sign(v)·min(max(m, 0), |v|)`` with ``m`` the middle piece.

    References
    ----------
    Zhang, Ann. Statist. 2010; Breheny and Huang, Ann. Appl. Stat. 2011.

    Examples
    --------
    >>> import numpy as np
    >>> reg = MCP(alpha=1.0, gamma=3.0)
    >>> reg.prox(np.array([[0.5, 2.0, -5.0]]), 1.0)
    array([[ 0. ,  1.5, -5. ]])
    >>> reg.value(np.array([[0.5, 2.0, -5.0]]))
    array([3.29166667])
    """

    alpha: float = 1.0
    gamma: float = 3.0
    param_ndim: int = 1
    convex: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_nonnegative("alpha", self.alpha, "MCP")
        check_real("gamma", self.gamma, "MCP")
        if not 1 < self.gamma < float("inf"):
            raise ValueError(f"MCP needs gamma > 1 (got gamma={self.gamma!r}); gamma = 3 is "
                             "the usual choice, large gamma approaches the l1 penalty")
        check_param_ndim(self.param_ndim, "MCP")

    @property
    def weak_convexity(self) -> float:
        return 1.0 / self.gamma

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        # p(t) = q(min(|t|, γα)) with q(a) = αa − a²/(2γ): q peaks at γα with value γα²/2
        mag = xp.minimum(xp.abs(x), self.gamma * self.alpha)
        return xp.sum(self.alpha * mag - mag * mag / (2.0 * self.gamma),
                      axis=model_axes(x, self.param_ndim))

    def prox(self, x: Array, step: Any) -> Array:
        s = per_client(step, x, self.param_ndim)
        largest = max_step(step)
        if largest is not None and not largest < self.gamma:
            raise ValueError(f"MCP prox needs step < gamma (got step={largest!r}, "
                             f"gamma={self.gamma!r}); lower the learning rate or raise gamma")
        xp = namespace(x)
        mag = xp.abs(x)
        # (|v| − sα)/(1 − s/γ) written as |v| − s(γα − |v|)/(γ − s): exactly |v| at s = 0.
        # It is ≤ 0 below sα and ≥ |v| exactly when |v| ≥ γα, so clipping to [0, |v|]
        # selects the right piece without a comparison per piece
        middle = mag - s * (self.gamma * self.alpha - mag) / _gap(self.gamma - s, x)
        return xp.sign(x) * xp.minimum(xp.maximum(middle, 0.0), mag)


@dataclass(frozen=True)
class SCAD:
    """Smoothly clipped absolute deviation ``g(x) = Σ_i p(x_i)`` (Fan and Li 2001).

    ``p(t) = alpha·|t|`` for ``|t| ≤ alpha``, ``(2·a·alpha·|t| − t² − alpha²)/(2(a − 1))``
    for ``alpha < |t| ≤ a·alpha``, and ``(a + 1)·alpha²/2`` beyond.

    Parameters
    ----------
    alpha : float, default 1.0
        Strength ``λ ≥ 0``.
    a : float, default 3.7
        Shape ``a > 2`` (3.7 is Fan and Li's recommendation). The penalty is
        ``1/(a − 1)``-weakly convex, so the prox needs ``step < a − 1``.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    For ``s < a − 1`` the prox is, coordinate by coordinate (``λ = alpha``)::

        prox_{s g}(v) = sign(v)·max(|v| − s·λ, 0)                  if |v| ≤ (1 + s)·λ
                      = sign(v)·((a − 1)|v| − s·a·λ)/(a − 1 − s)    if (1 + s)·λ < |v| ≤ a·λ
                      = v                                         if |v| > a·λ

    Derivation: on ``0 < u ≤ λ`` the stationarity condition ``u − v + s·λ = 0`` gives the
    soft threshold, valid for ``s·λ < v ≤ (1 + s)·λ``; on ``λ < u ≤ a·λ`` it reads
    ``u − v + s·(a·λ − u)/(a − 1) = 0``, i.e. the middle piece, whose solution lies in
    ``(λ, a·λ]`` exactly for ``(1 + s)·λ < v ≤ a·λ``; beyond ``a·λ`` the penalty is flat and
    ``u = v``. The objective is strongly convex (modulus ``1 − s/(a − 1)``), so this
    stationary point is the unique minimiser. At ``s = 1`` it is Fan and Li's thresholding
    rule ``((a − 1)v − sign(v)·a·λ)/(a − 2)``.

    References
    ----------
    Fan and Li, JASA 2001; Breheny and Huang, Ann. Appl. Stat. 2011.

    Examples
    --------
    >>> import numpy as np
    >>> reg = SCAD(alpha=1.0, a=3.0)
    >>> reg.prox(np.array([[0.5, 1.5, 2.5, -4.0]]), 1.0)
    array([[ 0. ,  0.5,  2. , -4. ]])
    >>> reg.value(np.array([[0.5, 1.5, 2.5, -4.0]]))
    array([5.875])
    """

    alpha: float = 1.0
    a: float = 3.7
    param_ndim: int = 1
    convex: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_nonnegative("alpha", self.alpha, "SCAD")
        check_real("a", self.a, "SCAD")
        if not 2 < self.a < float("inf"):
            raise ValueError(f"SCAD needs a > 2 (got a={self.a!r}); a = 3.7 is Fan and Li's "
                             "recommended value")
        check_param_ndim(self.param_ndim, "SCAD")

    @property
    def weak_convexity(self) -> float:
        return 1.0 / (self.a - 1.0)

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        lam, a = self.alpha, self.a
        mag = xp.abs(x)
        # the quadratic piece evaluated at min(|t|, aλ) equals (a + 1)λ²/2 beyond aλ
        clipped = xp.minimum(mag, a * lam)
        quadratic = (2.0 * a * lam * clipped - clipped * clipped - lam * lam) / (2.0 * (a - 1.0))
        return xp.sum(xp.where(mag <= lam, lam * mag, quadratic),
                      axis=model_axes(x, self.param_ndim))

    def prox(self, x: Array, step: Any) -> Array:
        s = per_client(step, x, self.param_ndim)
        largest = max_step(step)
        if largest is not None and not largest < self.a - 1.0:
            raise ValueError(f"SCAD prox needs step < a - 1 (got step={largest!r}, "
                             f"a - 1={self.a - 1.0!r}); lower the learning rate or raise a")
        xp = namespace(x)
        lam, a = self.alpha, self.a
        mag = xp.abs(x)
        soft = xp.maximum(mag - s * lam, 0.0)
        # ((a − 1)|v| − s·a·λ)/(a − 1 − s) written as |v| − s(aλ − |v|)/(a − 1 − s): exactly
        # |v| at s = 0 and at |v| = aλ, where the piece meets the identity. Its exact value
        # lies in [λ, |v|] wherever it is selected; the clip keeps it there when a step
        # just below a − 1 makes the division amplify rounding (to ±inf at worst)
        middle = mag - s * (a * lam - mag) / _gap((a - 1.0) - s, x)
        middle = xp.minimum(xp.maximum(middle, lam), mag)
        shrunk = xp.where(mag <= (1.0 + s) * lam, soft, xp.where(mag <= a * lam, middle, mag))
        return xp.sign(x) * shrunk
