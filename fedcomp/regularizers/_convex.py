"""Separable convex penalties: zero, ℓ1 (lasso) and elastic net.

References
----------
Parikh, N. and Boyd, S. "Proximal Algorithms." Foundations and Trends in Optimization,
2014 (soft thresholding, §6.5.2; elastic net, §6.5.3).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from .._array import Array, check_step, namespace, per_client
from ._base import check_nonnegative, check_param_ndim, model_axes


def soft_threshold(x: Array, threshold: Any) -> Array:
    """``sign(x) · max(|x| − threshold, 0)`` elementwise (``threshold`` broadcastable).

    Computed as ``x − clip(x, −threshold, threshold)``: bit-identical away from the dead
    zone, ``+0.0`` (never ``−0.0``) inside it, and 1.5–4× faster than sign·max on NumPy and
    torch (four elementwise passes instead of five, no ``sign``).
    """
    xp = namespace(x)
    return x - xp.minimum(xp.maximum(x, -threshold), threshold)


@dataclass(frozen=True)
class Zero:
    """``g(x) = 0``: the smooth problem; prox is the identity.

    Parameters
    ----------
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    ``prox_{s g}(v) = v`` for every step ``s``.

    Examples
    --------
    >>> import numpy as np
    >>> Zero().prox(np.array([[1.0, -2.0]]), 3.0)
    array([[ 1., -2.]])
    """

    param_ndim: int = 1
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_param_ndim(self.param_ndim, "Zero")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        return xp.sum(xp.zeros_like(x), axis=model_axes(x, self.param_ndim))

    def prox(self, x: Array, step: Any) -> Array:
        check_step(step)
        return x


@dataclass(frozen=True)
class L1:
    """``g(x) = alpha · ‖x‖₁``; prox is soft thresholding at ``step · alpha``.

    Parameters
    ----------
    alpha : float, default 1.0
        Strength ``λ ≥ 0``.
    param_ndim : int, default 1
        Trailing axes forming one model (the ℓ1 norm sums over all of them).

    Notes
    -----
    Soft thresholding, coordinate by coordinate::

        prox_{s g}(v) = sign(v) · max(|v| − s·alpha, 0).

    References
    ----------
    Parikh and Boyd, Proximal Algorithms, 2014, §6.5.2.

    Examples
    --------
    >>> import numpy as np
    >>> L1(alpha=0.5).prox(np.array([[1.0, -0.2, -3.0]]), 1.0)
    array([[ 0.5,  0. , -2.5]])
    """

    alpha: float = 1.0
    param_ndim: int = 1
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_nonnegative("alpha", self.alpha, "L1")
        check_param_ndim(self.param_ndim, "L1")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        return self.alpha * xp.sum(xp.abs(x), axis=model_axes(x, self.param_ndim))

    def prox(self, x: Array, step: Any) -> Array:
        return soft_threshold(x, per_client(step, x, self.param_ndim) * self.alpha)


@dataclass(frozen=True)
class ElasticNet:
    """``g(x) = l1 · ‖x‖₁ + (l2 / 2) · ‖x‖²``.

    Parameters
    ----------
    l1, l2 : float, default 1.0
        Nonnegative strengths of the ℓ1 and squared-ℓ2 parts.
    param_ndim : int, default 1
        Trailing axes forming one model.

    Notes
    -----
    The prox is soft thresholding followed by shrinkage::

        prox_{s g}(v) = S_{s·l1}(v) / (1 + s·l2).

    References
    ----------
    Parikh and Boyd, Proximal Algorithms, 2014, §6.5.3.

    Examples
    --------
    >>> import numpy as np
    >>> ElasticNet(l1=1.0, l2=1.0).prox(np.array([[3.0, -0.5]]), 1.0)
    array([[1., 0.]])
    """

    l1: float = 1.0
    l2: float = 1.0
    param_ndim: int = 1
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_nonnegative("l1", self.l1, "ElasticNet")
        check_nonnegative("l2", self.l2, "ElasticNet")
        check_param_ndim(self.param_ndim, "ElasticNet")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        axes = model_axes(x, self.param_ndim)
        return self.l1 * xp.sum(xp.abs(x), axis=axes) + 0.5 * self.l2 * xp.sum(x * x, axis=axes)

    def prox(self, x: Array, step: Any) -> Array:
        s = per_client(step, x, self.param_ndim)
        return soft_threshold(x, s * self.l1) / (1.0 + s * self.l2)
