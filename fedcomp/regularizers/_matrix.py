"""Nuclear norm (trace norm) of a matrix view of each model.

References
----------
Cai, J.-F., Candès, E. J. and Shen, Z. "A Singular Value Thresholding Algorithm for Matrix
Completion." SIAM Journal on Optimization 20(4), 2010.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any, ClassVar

from .._array import Array, check_step, namespace, per_client
from ._base import check_nonnegative, check_param_ndim


@dataclass(frozen=True)
class Nuclear:
    """``g(X) = alpha · ‖X‖_* = alpha · Σ_k σ_k(X)``, the sum of singular values.

    Parameters
    ----------
    alpha : float, default 1.0
        Strength ``λ ≥ 0``.
    shape : tuple of two ints, optional
        The matrix view ``(p1, p2)`` of each model. Required for vector models
        (``param_ndim=1``, ``p1·p2 = d``); for matrix models it reshapes the model (row-major)
        and defaults to the model's own shape.
    param_ndim : int, optional
        Trailing axes forming one model; defaults to 1 when ``shape`` is given (a vector
        model reshaped to ``shape``) and to 2 otherwise (the model is the matrix).

    Notes
    -----
    The prox is singular value soft thresholding, batched over the client axis::

        prox_{s g}(V) = U · diag(max(σ − s·alpha, 0)) · Vᵀ,   V = U · diag(σ) · Vᵀ,

    with the thin SVD (``full_matrices=False``) of every model of the block.

    References
    ----------
    Cai, Candès and Shen, SIAM J. Optim. 2010.

    Examples
    --------
    >>> import numpy as np
    >>> reg = Nuclear(alpha=1.0)
    >>> reg.prox(np.array([[[3.0, 0.0], [0.0, 0.5]]]), 1.0)
    array([[[2., 0.],
            [0., 0.]]])
    >>> Nuclear(alpha=1.0, shape=(2, 2)).value(np.array([[3.0, 0.0, 0.0, -0.5]]))
    array([3.5])
    """

    alpha: float = 1.0
    shape: tuple[int, int] | None = None
    param_ndim: int | None = None
    convex: ClassVar[bool] = True

    def __post_init__(self) -> None:
        check_nonnegative("alpha", self.alpha, "Nuclear")
        shape = self.shape
        if shape is not None:
            if (isinstance(shape, str | bytes) or not hasattr(shape, "__len__") or len(shape) != 2
                    or not all(isinstance(p, numbers.Integral) and not isinstance(p, bool)
                               and p > 0 for p in shape)):
                raise ValueError(f"Nuclear: shape must be two positive integers (p1, p2), the "
                                 f"matrix view of each model (got shape={shape!r})")
            object.__setattr__(self, "shape", (int(shape[0]), int(shape[1])))
        param_ndim = self.param_ndim
        if param_ndim is None:
            param_ndim = 1 if shape is not None else 2
            object.__setattr__(self, "param_ndim", param_ndim)
        check_param_ndim(param_ndim, "Nuclear")
        if param_ndim == 1 and shape is None:
            raise ValueError("Nuclear: vector models (param_ndim=1) need shape=(p1, p2), the "
                             "matrix each model is reshaped to (p1·p2 = d)")

    @property
    def weak_convexity(self) -> float:
        return 0.0

    def _matrices(self, x: Array) -> Array:
        """The matrix view of each model: shape ``(*batch, p1, p2)``."""
        assert self.param_ndim is not None
        if self.shape is None:
            return x
        batch = tuple(x.shape[: x.ndim - self.param_ndim])
        model = tuple(x.shape[x.ndim - self.param_ndim:])
        size = 1
        for n in model:
            size *= n
        p1, p2 = self.shape
        if p1 * p2 != size:
            raise ValueError(f"Nuclear: shape={self.shape} has {p1 * p2} entries but each model "
                             f"has {size} (model shape {model}); pass shape=(p1, p2) with "
                             f"p1·p2 = {size}")
        return namespace(x).reshape(x, (*batch, p1, p2))

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        return self.alpha * xp.sum(xp.linalg.svdvals(self._matrices(x)), axis=-1)

    def prox(self, x: Array, step: Any) -> Array:
        check_step(step)
        if isinstance(step, int | float) and step * self.alpha == 0:
            return x  # skip the SVD (whose round trip is exact only to rounding)
        xp = namespace(x)
        u, sigma, vh = xp.linalg.svd(self._matrices(x), full_matrices=False)
        sigma = xp.maximum(sigma - per_client(step, sigma, 1) * self.alpha, 0.0)
        return xp.reshape((u * xp.expand_dims(sigma, axis=-2)) @ vh, x.shape)
