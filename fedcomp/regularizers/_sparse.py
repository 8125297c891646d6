"""ℓ0 sparsity: the ℓ0-ball constraint (keep the ``s`` largest entries) and the ℓ0 penalty.

Neither is convex nor weakly convex: ``g + ρ‖·‖²/2`` is nonconvex for every finite ``ρ``
(the indicator of a union of subspaces, a jump at zero), so ``weak_convexity`` is
``+inf``. Their prox is still a closed-form global minimiser of ``s·g(u) + ½‖u − v‖²`` for
every step; it is set-valued only at ties, which both classes break deterministically
(stated on each). The centralized reference solver refuses them
(:func:`fedcomp.reference.solve_reference`): a prox-gradient fixed point is only a local
minimiser, and the global one is NP-hard in general (Natarajan 1995).

References
----------
Blumensath, T. and Davies, M. E. "Iterative hard thresholding for compressed sensing."
Applied and Computational Harmonic Analysis 27(3), 2009 (the hard-thresholding operator
``H_s`` and IHT).

Blumensath, T. and Davies, M. E. "Iterative thresholding for sparse approximations."
Journal of Fourier Analysis and Applications 14, 2008 (the ℓ0-penalised threshold
``sqrt(2·s·λ)``).

Natarajan, B. K. "Sparse approximate solutions to linear systems." SIAM J. Comput. 24(2),
1995.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

from .._array import Array, check_step, namespace, per_client
from ._base import check_nonnegative, check_param_ndim, flatten_models, model_axes


def keep_largest(x: Array, s: int, param_ndim: int) -> Array:
    """``H_s``: keep the ``s`` largest-magnitude entries of each model, zero the rest.

    Ties in magnitude are broken by position, the lower flat (C-order) index first (a
    stable sort of ``−|x|``), so exactly ``min(s, n)`` entries survive; zeros among them
    stay zero. All leading axes of ``x`` are batch axes.

    Examples
    --------
    >>> import numpy as np
    >>> keep_largest(np.array([[0.5, -2.0, 1.0, -1.0]]), 2, 1).tolist()
    [[0.0, -2.0, 1.0, 0.0]]
    """
    xp = namespace(x)
    flat = flatten_models(x, param_ndim)
    n = flat.shape[-1]
    if s >= n:
        return x
    batch = tuple(flat.shape[:-1])
    rows = xp.reshape(flat, (-1, n))
    order = xp.argsort(-xp.abs(rows), axis=1, stable=True)
    rank = xp.argsort(order, axis=1, stable=True)  # rank[j]: place of entry j by magnitude
    kept = xp.where(rank < s, rows, xp.zeros_like(rows))
    return xp.reshape(kept, (*batch, *x.shape[x.ndim - param_ndim:]))


def count_nonzero(x: Array, param_ndim: int) -> Array:
    """``‖x‖₀`` of each model, in the dtype of ``x`` (shape ``x.shape[:-param_ndim]``)."""
    xp = namespace(x)
    return xp.sum(xp.astype(x != 0, x.dtype), axis=model_axes(x, param_ndim))


@dataclass(frozen=True)
class L0Ball:
    """Indicator of the ℓ0 ball ``{x : ‖x‖₀ ≤ sparsity}`` (entrywise for matrices).

    Parameters
    ----------
    sparsity : int, default 1
        ``s ≥ 1``, the number of nonzero entries a model may keep.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    The prox is the projection ``H_s(v)`` for every step: keep the ``s`` entries of largest
    magnitude, zero the others (:func:`keep_largest`). Any ``s`` largest entries give a
    nearest point (the distance is the energy of the dropped entries), so the projection is
    set-valued only when the ``s``-th and ``(s+1)``-th magnitudes tie; then the entry of
    lower flat (C-order) index is kept. Not convex, not weakly convex
    (``weak_convexity = inf``): see the module docstring.

    Examples
    --------
    >>> import numpy as np
    >>> reg = L0Ball(sparsity=2)
    >>> reg.prox(np.array([[0.5, -2.0, 1.0, 0.1]]), 1.0)
    array([[ 0., -2.,  1.,  0.]])
    >>> reg.value(np.array([[0.5, -2.0, 1.0, 0.0], [0.0, 0.0, 3.0, 0.0]]))
    array([inf,  0.])
    """

    sparsity: int = 1
    param_ndim: int = 1
    convex: ClassVar[bool] = False

    def __post_init__(self) -> None:
        s = self.sparsity
        if not (isinstance(s, int) and not isinstance(s, bool) and s >= 1):
            raise ValueError(f"L0Ball: sparsity must be an integer >= 1 (got sparsity={s!r}); "
                             "it is the number of nonzero entries a model keeps")
        check_param_ndim(self.param_ndim, "L0Ball")

    @property
    def weak_convexity(self) -> float:
        return math.inf

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        nnz = count_nonzero(x, self.param_ndim)
        return xp.where(nnz <= self.sparsity, xp.zeros_like(nnz), xp.full_like(nnz, math.inf))

    def prox(self, x: Array, step: Any) -> Array:
        check_step(step)  # a projection ignores the step, but a bad one is still a bug
        return keep_largest(x, self.sparsity, self.param_ndim)


@dataclass(frozen=True)
class L0:
    """ℓ0 penalty ``g(x) = alpha·‖x‖₀``: ``alpha`` per nonzero entry.

    Parameters
    ----------
    alpha : float, default 1.0
        Price ``λ ≥ 0`` of one nonzero entry.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    The problem separates by coordinate: ``min_u s·λ·[u ≠ 0] + ½(u − v)²`` costs ``½v²``
    at ``u = 0`` and ``s·λ`` at its best nonzero point ``u = v``, so ::

        prox_{s g}(v)_j = v_j   if |v_j| > sqrt(2·s·λ)   (v_j² > 2sλ)
                        = 0     otherwise

    (hard thresholding). At ``|v_j| = sqrt(2·s·λ)`` both points are minimisers; the prox
    returns 0, the sparser one. The comparison is ``|v_j| > sqrt(2sλ)`` in the model's
    dtype rather than ``v_j² > 2sλ``, which would underflow to ``0 > 0`` for tiny
    ``v_j`` at ``sλ = 0`` and zero them (the prox at ``s = 0`` is the identity). Not
    convex, not weakly convex (``weak_convexity = inf``): see the module docstring.

    Examples
    --------
    >>> import numpy as np
    >>> reg = L0(alpha=0.5)
    >>> reg.prox(np.array([[0.9, -1.1, 1.0, 0.0]]), 1.0)  # threshold sqrt(2·1·0.5) = 1
    array([[ 0. , -1.1,  0. ,  0. ]])
    >>> reg.value(np.array([[0.9, -1.1, 1.0, 0.0]]))
    array([1.5])
    """

    alpha: float = 1.0
    param_ndim: int = 1
    convex: ClassVar[bool] = False

    def __post_init__(self) -> None:
        check_nonnegative("alpha", self.alpha, "L0")
        check_param_ndim(self.param_ndim, "L0")

    @property
    def weak_convexity(self) -> float:
        return math.inf

    def value(self, x: Array) -> Array:
        return self.alpha * count_nonzero(x, self.param_ndim)

    def prox(self, x: Array, step: Any) -> Array:
        s = per_client(step, x, self.param_ndim)
        xp = namespace(x)
        threshold = (2.0 * self.alpha * s) ** 0.5
        return xp.where(xp.abs(x) > threshold, x, xp.zeros_like(x))
