"""The ℓq mirror map of high-dimensional dual averaging, its restricted form, top-s output.

Liang, Peng, Zhang, "Gradient Tracking for High Dimensional Federated Optimization"
(arXiv 2023), Section 2.2 and eq. (3): ``h(w) = ‖w‖_q² / (2(q−1))`` with ``q = p/(p−1)``,
``∇h(w) = ‖w‖_q^{2−q} sign(w)|w|^{q−1} / (q−1)`` and its inverse
``∇h*(z) = ‖z‖_p^{2−p} sign(z)|z|^{p−1} / (p−1)``.

Both maps are evaluated after dividing by ``max|·|`` (they are 1-homogeneous): with
``t = |z| / max|z| ∈ [0, 1]``, ``∇h*(z) = max|z| · ‖t‖_p^{2−p} · t^{p−1} · sign(z)/(p−1)``,
where ``‖t‖_p ∈ [1, d^{1/p}]``, so nothing overflows for any ``p``, small entries underflow
harmlessly to 0, and ``z = 0`` maps to exactly 0 (no NaN). Every function works on a block
``(B, *shape)``, reducing over all but the leading axis.
"""

from __future__ import annotations

import math
from typing import Any

from .._array import Array, namespace
from ..regularizers._sparse import keep_largest


def default_p(dim: int) -> float:
    """``p = 2 ln d`` (Theorem 4.1), at least 2 so that ``q ∈ (1, 2]``."""
    return max(2.0, 2.0 * math.log(max(int(dim), 1)))


def check_p(owner: str, p: Any) -> None:
    if p is not None and not (isinstance(p, int | float) and not isinstance(p, bool) and p >= 2):
        raise ValueError(f"{owner}: p must be a number >= 2 (q = p/(p-1) in (1, 2]) or None "
                         f"for 2 ln d (got p={p!r})")
    if p is not None and not math.isfinite(p):
        # p = ∞ is q = 1: ∇h = ‖w‖_1 sign(w)/(q−1) divides by zero (NaN), h is not smooth
        raise ValueError(f"{owner}: p must be finite (got p={p!r}; q = 1 makes the mirror map "
                         f"undefined); use a large finite p such as 2 ln d (p=None) or 12")


def resolve_p(p: float | None, dim: int) -> float:
    return default_p(dim) if p is None else float(p)


def _power(t: Array, e: float) -> Array:
    """``t**e`` for ``t ≥ 0``; integer ``e`` by repeated squaring.

    A float power costs a log and an exp per entry; with the paper's integer ``p`` (12)
    the dual-to-primal map needs ``t^{p−1}`` at every local step, and a handful of
    multiplications is several times faster.
    """
    if float(e).is_integer() and 1 <= e <= 64:
        n = int(e)
        result = None
        base = t
        while n:
            if n & 1:
                result = base if result is None else result * base
            n >>= 1
            if n:
                base = base * base
        return result
    return t**e


def _axes(x: Array) -> tuple[int, ...]:
    return tuple(range(1, x.ndim))


def _scaled_power(x: Array, r: float) -> Array:
    """``‖x‖_r^{2−r} sign(x)|x|^{r−1}`` per row, computed on ``x / max|x|`` (see module)."""
    xp = namespace(x)
    axes = _axes(x)
    top = xp.max(xp.abs(x), axis=axes, keepdims=True)
    nonzero = top > 0
    u = x / xp.where(nonzero, top, xp.ones_like(top))  # signed, |u| ≤ 1
    if float(r - 1.0).is_integer() and int(r - 1.0) % 2 == 1 and r <= 65:
        # odd integer r − 1 (e.g. the paper's p = 12): u^{r−1} keeps the sign of u and
        # u^{r−1}·u = |u|^r, so no abs/sign passes are needed
        signed_pow = _power(u, r - 1.0)
        total = xp.sum(signed_pow * u, axis=axes, keepdims=True)
    else:
        t = xp.abs(u)
        t_pow = _power(t, r - 1.0)
        total = xp.sum(t_pow * t, axis=axes, keepdims=True)
        signed_pow = t_pow * xp.sign(u)
    norm = xp.where(nonzero, total ** (1.0 / r), xp.ones_like(total))  # ‖u‖_r ≥ 1 if nonzero
    return (top * norm ** (2.0 - r)) * signed_pow


def grad_h_conj(z: Array, p: float) -> Array:
    """``∇h*(z) = ‖z‖_p^{2−p} sign(z)|z|^{p−1} / (p−1)``: dual → primal, per row of a block.

    Examples
    --------
    >>> import numpy as np
    >>> grad_h_conj(np.array([[3.0, -4.0], [0.0, 0.0]]), 2.0).tolist()
    [[3.0, -4.0], [0.0, 0.0]]
    """
    return _scaled_power(z, p) / (p - 1.0)


def grad_h(w: Array, p: float) -> Array:
    """``∇h(w) = ‖w‖_q^{2−q} sign(w)|w|^{q−1} / (q−1)``, ``q = p/(p−1)``: primal → dual."""
    q = p / (p - 1.0)
    return _scaled_power(w, q) / (q - 1.0)


def lp_norm(x: Array, p: float) -> Array:
    """``‖x‖_p`` of each row of a block (max-normalised, no overflow): shape ``(B,)``."""
    xp = namespace(x)
    axes = _axes(x)
    a = xp.abs(x)
    top = xp.max(a, axis=axes)
    safe = xp.where(top > 0, top, xp.ones_like(top))
    t = a / xp.reshape(safe, (-1,) + (1,) * (x.ndim - 1))
    return top * xp.sum(t**p, axis=axes) ** (1.0 / p)


def h_value(w: Array, p: float) -> Array:
    """``h(w) = ‖w‖_q² / (2(q−1))`` of each row, shape ``(B,)``."""
    q = p / (p - 1.0)
    return lp_norm(w, q) ** 2 / (2.0 * (q - 1.0))


def restricted_primal(w0: Array, z: Array, p: float, radius_sq: float | None) -> Array:
    """``argmin_{‖w − w0‖_q² ≤ Q} ⟨w − w0, −z⟩ + h(w − w0)`` in closed form (eq. 3).

    ``w = w0 + ∇h*(z)/(1 + λ)`` with ``λ = max(‖z‖_p/((p−1)√Q) − 1, 0)``: the unconstrained
    minimiser ``w0 + ∇h*(z)`` has ``‖∇h*(z)‖_q = ‖z‖_p/(p−1)``, and ``∇h*`` is
    1-homogeneous, so the ball constraint only shrinks it radially. ``radius_sq=None`` is
    ``Q = ∞``. Note the sign: the paper's Algorithm 2, line 7, passes ``z`` as the linear
    term where its text and code use ``g = z_0 − z = −z`` (ALGORITHMS.md, Family 4).

    Examples
    --------
    >>> import numpy as np
    >>> restricted_primal(np.zeros((1, 2)), np.array([[3.0, 4.0]]), 2.0, 1.0).tolist()
    [[0.6, 0.8]]
    """
    w = grad_h_conj(z, p)
    if radius_sq is None:
        return w0 + w
    xp = namespace(z)
    norm = lp_norm(z, p)
    shrink = xp.maximum(norm / ((p - 1.0) * math.sqrt(radius_sq)), xp.ones_like(norm))
    return w0 + w / xp.reshape(shrink, (-1,) + (1,) * (z.ndim - 1))


def top_s(x: Array, s: int | None) -> Array:
    """``Sparse(x; s)``: keep the ``s`` largest entries of each row in magnitude, zero the rest.

    Ties are broken by position (a stable sort), so exactly ``s`` entries survive.
    ``s=None`` returns ``x``.

    Examples
    --------
    >>> import numpy as np
    >>> top_s(np.array([[0.5, -2.0, 1.0, 0.1]]), 2).tolist()
    [[0.0, -2.0, 1.0, 0.0]]
    """
    if s is None:
        return x
    # the l0_ball regularizer's projection, each row one model
    return keep_largest(x, s, x.ndim - 1)


def check_sparsity(owner: str, s: Any) -> None:
    if s is not None and not (isinstance(s, int) and not isinstance(s, bool) and s >= 1):
        raise ValueError(f"{owner}: sparsity must be a positive integer or None (got {s!r})")


def check_radius(owner: str, radius_sq: Any) -> None:
    if radius_sq is not None and not (isinstance(radius_sq, int | float)
                                      and not isinstance(radius_sq, bool) and radius_sq > 0):
        raise ValueError(f"{owner}: radius_sq (Q) must be a positive number or None for "
                         f"Q = infinity (got {radius_sq!r})")
