"""The constrained proximal operator of C-FedDA for ℓ1, solved exactly.

Bao, Crawshaw, Luo, Liu (ICML 2022, ``shared/papers/seed001_*``) define, after dividing by
the common factor E,

    CProx(b) = argmin_w ⟨w, b⟩ + (c/2)‖w‖² + κ‖w‖₁
               subject to ‖w − w0‖₁ ≤ ε  and  ‖w‖₂ ≤ ρ,

with ``b = z/E − γ_r w0``, ``c = μA_r/2 + γ_r`` and ``κ = A_r λ``. With multipliers ν (ℓ1
ball around w0) and η (ℓ2 ball) the Lagrangian separates per coordinate into the convex
piecewise quadratic ``(c + η)w²/2 + b w + κ|w| + ν|w − w0_j|`` whose minimiser is one of
six candidates (the stationary point of each sign pattern, or a kink). The constraint
values are nonincreasing in each multiplier, so both are found by bisection: ν inside,
η outside (only when the ℓ2 ball is active). The answer is exact up to the bisection
tolerance (relative 1e-15 on the multipliers).
"""

from __future__ import annotations

from typing import Any

import array_api_compat

from .._array import Array, namespace

_BISECTION_STEPS = 200


def _coordinate_argmin(b: Array, q: Array, kappa: float, nu: Array, a: Array) -> Array:
    """Per-coordinate minimiser of ``q w²/2 + b w + κ|w| + ν|w − a|`` (all broadcastable)."""
    xp = namespace(b)

    def phi(w: Array) -> Array:
        return 0.5 * q * w * w + b * w + kappa * xp.abs(w) + nu * xp.abs(w - a)

    best = xp.zeros_like(b + a)
    best_value = phi(best)
    candidates = [a + xp.zeros_like(b)]
    for s1 in (-1.0, 1.0):
        for s2 in (-1.0, 1.0):
            w = -(b + kappa * s1 + nu * s2) / q
            valid = (s1 * w >= 0) & (s2 * (w - a) >= 0)
            candidates.append(xp.where(valid, w, best))
    for w in candidates:
        value = phi(w)
        better = value < best_value
        best = xp.where(better, w, best)
        best_value = xp.where(better, value, best_value)
    return best


def _solve_l1(b: Array, q: Array, kappa: float, a: Array, radius_l1: float) -> Array:
    """``argmin q‖w‖²/2 + ⟨b, w⟩ + κ‖w‖₁`` s.t. ``‖w − a‖₁ ≤ ε``, rows independent."""
    xp = namespace(b)
    zeros = xp.zeros(b.shape[:-1] + (1,), dtype=b.dtype, device=array_api_compat.device(b))

    def excess(nu: Array) -> tuple[Array, Array]:
        w = _coordinate_argmin(b, q, kappa, nu, a)
        return w, xp.sum(xp.abs(w - a), axis=-1, keepdims=True) - radius_l1

    w, gap = excess(zeros)
    if not bool(xp.any(gap > 0)):
        return w
    lo, hi = zeros, xp.ones_like(zeros)
    for _ in range(_BISECTION_STEPS):  # grow the bracket until every row is feasible
        _, gap_hi = excess(hi)
        if not bool(xp.any(gap_hi > 0)):
            break
        hi = xp.where(gap_hi > 0, 2.0 * hi, hi)
    for _ in range(_BISECTION_STEPS):
        # rows freeze once converged, so a row's answer never depends on its block-mates
        running = hi - lo > 1e-15 * hi
        if not bool(xp.any(running)):
            break
        mid = 0.5 * (lo + hi)
        _, gap_mid = excess(mid)
        lo = xp.where(running & (gap_mid > 0), mid, lo)
        hi = xp.where(running & (gap_mid <= 0), mid, hi)
    nu = xp.where(gap > 0, hi, zeros)  # hi is always feasible
    return _coordinate_argmin(b, q, kappa, nu, a)


def cprox_l1(b: Array, c: float, kappa: float, w0: Array, radius_l1: float,
             radius_l2: float | None = None) -> Array:
    """Exact ``CProx`` for ℓ1 on a block of rows ``b (B, d)`` (see the module docstring).

    Parameters
    ----------
    b : array, shape (B, d)
        Linear term of each row.
    c : float
        Quadratic coefficient (> 0).
    kappa : float
        ℓ1 penalty weight ``A_r λ`` (≥ 0).
    w0 : array, shape (d,) or (B, d)
        Centre of the ℓ1 ball.
    radius_l1 : float
        ``ε``.
    radius_l2 : float, optional
        ``ρ``, the radius of the domain ``W`` (the whole space when ``None``).

    Raises
    ------
    ValueError
        When the two balls do not intersect (``dist(0, ℓ1-ball(w0, ε)) > ρ``).
    """
    xp = namespace(b)
    q = xp.full(b.shape[:-1] + (1,), c, dtype=b.dtype, device=array_api_compat.device(b))
    w = _solve_l1(b, q, kappa, w0, radius_l1)
    if radius_l2 is None:
        return w
    norms = xp.sqrt(xp.sum(w * w, axis=-1, keepdims=True))
    if not bool(xp.any(norms > radius_l2)):
        return w
    closest = _solve_l1(xp.zeros_like(b), q, 0.0, w0, radius_l1)  # min ‖w‖ on the ℓ1 ball
    if bool(xp.any(xp.sum(closest * closest, axis=-1) > radius_l2**2 * (1 + 1e-12))):
        raise ValueError(f"CProx: the l1 ball of radius {radius_l1} around w0 does not meet the "
                         f"l2 ball of radius {radius_l2}; enlarge the radii or move w0")
    active = norms > radius_l2
    lo, hi = xp.zeros_like(norms), xp.full_like(norms, c)
    for _ in range(_BISECTION_STEPS):  # bracket the ℓ2 multiplier η
        w_hi = _solve_l1(b, q + hi, kappa, w0, radius_l1)
        over = xp.sqrt(xp.sum(w_hi * w_hi, axis=-1, keepdims=True)) > radius_l2
        if not bool(xp.any(over & active)):
            break
        hi = xp.where(over & active, 2.0 * hi, hi)
    for _ in range(_BISECTION_STEPS):
        running = active & (hi - lo > 1e-15 * hi)
        if not bool(xp.any(running)):
            break
        mid = 0.5 * (lo + hi)
        w_mid = _solve_l1(b, q + mid, kappa, w0, radius_l1)
        over = xp.sqrt(xp.sum(w_mid * w_mid, axis=-1, keepdims=True)) > radius_l2
        lo = xp.where(running & over, mid, lo)
        hi = xp.where(running & ~over, mid, hi)
    eta = xp.where(active, hi, xp.zeros_like(hi))
    return _solve_l1(b, q + eta, kappa, w0, radius_l1)


def cprox_l1_objective(w: Any, b: Any, c: float, kappa: float) -> Any:
    """The CProx objective ``⟨w, b⟩ + c‖w‖²/2 + κ‖w‖₁`` of each row (for checks)."""
    xp = namespace(w)
    return xp.sum(w * b, axis=-1) + 0.5 * c * xp.sum(w * w, axis=-1) + kappa * xp.sum(
        xp.abs(w), axis=-1)


# --- nuclear norm -------------------------------------------------------------------------
#: Douglas–Rachford iterations allowed for a nuclear-norm CProx whose ball is off-centre
#: (a well-separated instance needs a few hundred; nearly tangent balls, where the
#: intersection is a sliver, tens of thousands).
_DR_MAX_ITER = 50000
#: Relative stopping tolerance of those iterations (‖W − Y‖_F ≤ tol · max(1, ‖W‖_F)).
_DR_TOL = 1e-13


def _svd(x: Array) -> tuple[Array, Array, Array]:
    return namespace(x).linalg.svd(x, full_matrices=False)


def _compose(u: Array, s: Array, vh: Array) -> Array:
    return (u * namespace(s).expand_dims(s, axis=-2)) @ vh


def _frobenius(x: Array) -> Array:
    xp = namespace(x)
    return xp.sqrt(xp.sum(x * x, axis=(-2, -1)))


def _nuclear(x: Array) -> Array:
    return namespace(x).sum(_svd(x)[1], axis=-1)


def _radial(w: Array, radius: float | None) -> Array:
    if radius is None:
        return w
    xp = namespace(w)
    scale = radius / xp.maximum(_frobenius(w), radius)
    return w * scale[..., None, None]


def _project_nuclear_ball(v: Array, centre: Array, radius: float) -> Array:
    """``argmin_{‖W − centre‖_* ≤ ε} ‖W − v‖_F``: ℓ1-ball projection of the singular values."""
    from ..regularizers import L1Ball

    u, s, vh = _svd(v - centre)
    return centre + _compose(u, L1Ball(radius).prox(s, 1.0), vh)


def cprox_nuclear(b: Array, c: float, kappa: float, w0: Array, radius: float,
                  radius_l2: float | None = None) -> Array:
    r"""``CProx`` for the nuclear norm on a block of matrices ``b (B, p1, p2)``.

    Solves, row by row,

    .. math::

        \min_W \langle W, B\rangle + \tfrac c2\|W\|_F^2 + \kappa\|W\|_*
        \quad\text{s.t.}\quad \|W - W_0\|_* \le \varepsilon,\ \|W\|_F \le \rho .

    Centred ball (``W0 = 0``), exactly: every term but ``⟨W, B⟩`` is unitarily invariant,
    so by von Neumann's trace inequality the minimiser shares the singular vectors of
    ``−B = U diag(σ) Vᵀ`` and its singular values solve the vector problem with ``b = −σ``
    — :func:`cprox_l1` on the singular values (bisection on the ball multiplier, separable
    per singular value).

    Off-centre ball (``W0 ≠ 0``, MC-FedDA's later stages): the two nuclear norms have
    different centres and share no singular vectors, so no per-singular-value solution
    exists. When the ball is inactive the answer is the exact unconstrained one
    (singular value thresholding, then the radial projection); otherwise Douglas–Rachford
    splitting between ``f1 = ⟨·, B⟩ + c‖·‖²/2 + κ‖·‖_* + ι_{‖·‖_F ≤ ρ}`` (prox: thresholding
    plus radial projection, exact) and the indicator of the nuclear ball (projection:
    ℓ1-ball projection of singular values, exact), run per row until
    ``‖W − Y‖_F ≤ 1e-13 · max(1, ‖W‖_F)`` (rows stop independently, so a row's answer does
    not depend on its block-mates).

    Raises
    ------
    ValueError
        When the two balls do not intersect (the projection of 0 onto the nuclear ball lies
        outside the Frobenius ball), an input is not finite, or Douglas–Rachford does not
        converge (nearly tangent balls); the message gives the gap reached and the radii.
    """
    xp = namespace(b)
    w0 = w0 + xp.zeros_like(b)
    if not bool(xp.any(w0 != 0)):
        u, sigma, vh = _svd(-b)
        return _compose(u, cprox_l1(-sigma, c, kappa, xp.zeros_like(sigma), radius, radius_l2),
                        vh)
    if radius_l2 is not None:
        # the smallest Frobenius norm on the nuclear ball is that of the projection of 0
        closest = float(xp.max(_frobenius(_project_nuclear_ball(xp.zeros_like(w0), w0,
                                                                radius))))
        if closest > radius_l2 * (1 + 1e-12):
            raise ValueError(f"CProx: the nuclear ball of radius {radius} around w0 does not "
                             f"meet the Frobenius ball of radius {radius_l2} (its smallest "
                             f"Frobenius norm is {closest:.6g}); enlarge the radii or move w0")

    def prox_f1(v: Array) -> Array:  # prox of f1 with step 1/c
        u, s, vh = _svd((c * v - b) / (2 * c))
        return _radial(_compose(u, xp.maximum(s - kappa / (2 * c), 0.0), vh), radius_l2)

    u, s, vh = _svd(-b / c)
    free = _radial(_compose(u, xp.maximum(s - kappa / c, 0.0), vh), radius_l2)
    done = _nuclear(free - w0) <= radius * (1 + 1e-12)
    if bool(xp.all(done)):
        return free
    if not (bool(xp.all(xp.isfinite(b))) and bool(xp.all(xp.isfinite(w0)))):
        # fail now rather than after _DR_MAX_ITER iterations on NaNs
        raise ValueError("CProx (nuclear): the linear term or the centre w0 is not finite; "
                         "the iterates diverged (lower the step or raise smoothness)")
    z = _project_nuclear_ball(free, w0, radius)
    w = free
    gap = xp.zeros_like(_frobenius(w))
    for _ in range(_DR_MAX_ITER):
        w_new = prox_f1(z)
        y = _project_nuclear_ball(2 * w_new - z, w0, radius)
        gap = _frobenius(y - w_new)
        w = xp.where(done[..., None, None], w, w_new)
        z = xp.where(done[..., None, None], z, z + y - w_new)
        done = done | (gap <= _DR_TOL * xp.maximum(_frobenius(w_new), 1.0))
        if bool(xp.all(done)):
            return xp.where(_nuclear(free - w0)[..., None, None] <= radius * (1 + 1e-12),
                            free, w)
    raise ValueError(_no_convergence(float(xp.max(xp.where(done, xp.zeros_like(gap), gap))),
                                     w0, radius, radius_l2))


def _no_convergence(gap: float, w0: Array, radius: float, radius_l2: float | None) -> str:
    """The error of a Douglas–Rachford run that hit the cap: the gap reached and the radii."""
    message = (f"CProx (nuclear): Douglas-Rachford did not converge in {_DR_MAX_ITER} "
               f"iterations (gap ||W - Y||_F = {gap:.3g}, tolerance {_DR_TOL:g} relative) for "
               f"the nuclear ball of radius {radius} around w0")
    if radius_l2 is None:
        return message
    xp = namespace(w0)
    closest = float(xp.max(_frobenius(_project_nuclear_ball(xp.zeros_like(w0), w0, radius))))
    return (message + f" and the Frobenius ball of radius {radius_l2}: the nuclear ball's "
            f"smallest Frobenius norm is {closest:.6g}, so the balls barely overlap when that "
            "is close to the Frobenius radius; enlarge domain_radius or radius")


def cprox_nuclear_objective(w: Any, b: Any, c: float, kappa: float) -> Any:
    """The CProx objective ``⟨W, B⟩ + c‖W‖²/2 + κ‖W‖_*`` of each matrix (for checks)."""
    xp = namespace(w)
    return (xp.sum(w * b, axis=(-2, -1)) + 0.5 * c * xp.sum(w * w, axis=(-2, -1))
            + kappa * _nuclear(w))
