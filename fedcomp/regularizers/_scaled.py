"""A separable penalty written in scaled coordinates: ``g̃(v) = g(v / scale)``.

Solving ``min f(x) + g(x)`` in the coordinates ``v = scale ⊙ x`` (a diagonal
preconditioner, what glmnet's standardization does) keeps the problem: the smooth part
takes the scaled features, and the penalty, to stay the same function of ``x``, becomes
``g̃(v) = g(v / scale)``. For ``g = alpha‖·‖₁`` that is the weighted ℓ1 norm
``Σ_j (alpha / scale_j)|v_j|``.

References
----------
Friedman, J., Hastie, T. and Tibshirani, R. "Regularization Paths for Generalized Linear
Models via Coordinate Descent." Journal of Statistical Software 33(1), 2010 (glmnet: the
solver standardizes, the coefficients are returned on the original scale).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._array import Array, asarray_like, namespace, per_client
from ._base import model_axes
from ._convex import L1, ElasticNet, Zero, soft_threshold
from ._masked import SEPARABLE, Masked, require_separable

#: Penalties whose prox splits by coordinate, so that a coordinate's scale enters its own
#: prox only: the separable ones, and those restricted to some coordinates.
SCALABLE = (*SEPARABLE, Masked)


@dataclass(frozen=True, eq=False)
class Scaled:
    """``g̃(v) = g(v / scale)`` for a coordinate-separable penalty ``g = Σ_j p_j(x_j)``.

    Parameters
    ----------
    base : L1, ElasticNet, MCP, SCAD, Zero or Masked
        The penalty ``g`` in the original coordinates ``x = v / scale``.
    scale : array of float, shape ``param_shape``
        Positive, finite scale of each coordinate: ``(d,)`` for a vector model, ``(d, k)``
        for a matrix model (a base built with ``param_ndim=2``).

    Notes
    -----
    With ``u = scale_j·w`` the prox's objective ``t·p_j(u/scale_j) + ½(u − z_j)²`` is
    ``scale_j²`` times ``(t/scale_j²)·p_j(w) + ½(w − z_j/scale_j)²``, so coordinate by
    coordinate::

        prox_{t g̃}(z)_j = scale_j · prox_{(t/scale_j²) g}(z_j / scale_j)_j,

    the base's own prox with a step per coordinate. ``g̃`` is convex when ``g`` is; a
    ``ρ``-weakly convex ``g`` makes ``g̃`` ``ρ / min_j scale_j²``-weakly convex (the step
    bound of MCP and SCAD tightens by ``scale_j²``).

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.regularizers import L1
    >>> reg = Scaled(L1(alpha=1.0), np.array([1.0, 2.0]))   # |v₀| + |v₁|/2
    >>> reg.prox(np.array([[3.0, 3.0]]), 1.0)
    array([[2. , 2.5]])
    >>> reg.value(np.array([[3.0, 3.0]]))
    array([4.5])
    """

    base: Any
    scale: Any
    param_ndim: int = field(default=1, init=False)
    #: (ℓ1 weights, ℓ2 weights) of the penalty in the scaled coordinates, when the base is
    #: an elastic net of some kind (Zero, L1, ElasticNet, masked or not); None otherwise
    _weights: Any = field(default=None, init=False, repr=False)
    #: those weights as NumPy arrays of each dtype asked for (a prox per local step)
    _host: dict[Any, Any] = field(default_factory=dict, init=False, repr=False)
    _shrinks: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        require_separable("Scaled", self.base, SCALABLE, ": solve that problem unscaled")
        ndim = int(self.base.param_ndim)
        scale = np.asarray(self.scale, dtype=np.float64)
        if scale.ndim != ndim:
            raise ValueError(f"Scaled: scale must be a {ndim}-D array over the model's "
                             f"coordinates, as the base has param_ndim={ndim} (got shape "
                             f"{scale.shape})")
        if scale.size and not (np.all(np.isfinite(scale)) and scale.min() > 0):
            bad = scale.flat[int(np.argmin(np.where(np.isfinite(scale), scale, -np.inf)))]
            raise ValueError(f"Scaled: every scale must be > 0 and finite (got {float(bad)!r}); "
                             "give a constant column the scale 1")
        object.__setattr__(self, "scale", scale)
        object.__setattr__(self, "param_ndim", ndim)
        weights = _elastic_net_weights(self.base, scale)
        object.__setattr__(self, "_weights", weights)
        object.__setattr__(self, "_shrinks", weights is not None and bool(weights[1].any()))

    @property
    def convex(self) -> bool:
        return bool(self.base.convex)

    @property
    def weak_convexity(self) -> float:
        rho = float(self.base.weak_convexity)
        return rho / float(self.scale.min()) ** 2 if rho and self.scale.size else rho

    def _like(self, name: str, x: Array) -> Array:
        """The per-coordinate ``scale``, ``l1`` or ``l2`` in ``x``'s namespace and dtype,
        with ``x``'s leading (client) axes as singletons: a per-coordinate step then has
        ``x``'s number of axes, which a prox takes as it is (a step with fewer axes is one
        value per client)."""
        shape = tuple(x.shape[x.ndim - self.param_ndim:])
        if shape != self.scale.shape:
            raise ValueError(f"Scaled: the scale has shape {self.scale.shape} but the models "
                             f"have shape {shape}")
        values = self.scale if name == "scale" else self._weights[name == "l2"]
        values = values.reshape((1,) * (x.ndim - self.param_ndim) + shape)
        if not isinstance(x, np.ndarray):
            return asarray_like(values, x, dtype=x.dtype)
        key = (name, x.dtype, values.shape)  # the usual case: made once, not at every prox
        if key not in self._host:
            self._host[key] = values.astype(x.dtype)
        return self._host[key]

    def value(self, x: Array) -> Array:
        if self._weights is None:
            return self.base.value(x / self._like("scale", x))
        xp = namespace(x)
        l1, l2 = self._like("l1", x), self._like("l2", x)
        return xp.sum(l1 * xp.abs(x) + 0.5 * l2 * x * x, axis=model_axes(x, self.param_ndim))

    def prox(self, x: Array, step: Any) -> Array:
        step = per_client(step, x, self.param_ndim)
        if self._weights is None:
            scale = self._like("scale", x)
            return scale * self.base.prox(x / scale, step / (scale * scale))
        # the weighted elastic net Σ_j l1_j|v_j| + l2_j v_j²/2: soft thresholding at step·l1_j,
        # then the shrinkage 1/(1 + step·l2_j) where some l2_j is not 0
        l1, l2 = self._like("l1", x), self._like("l2", x)
        shrunk = soft_threshold(x, step * l1)
        return shrunk / (1.0 + step * l2) if self._shrinks else shrunk

    def __repr__(self) -> str:
        # the fingerprint of a problem hashes repr(regularizer): say which scales
        digest = hashlib.sha256(np.ascontiguousarray(self.scale).tobytes()).hexdigest()[:16]
        shape = "x".join(map(str, self.scale.shape))
        return f"Scaled(base={self.base!r}, scale=<{shape} {digest}>)"


def _elastic_net_weights(base: Any, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """``(l1_j, l2_j)`` with ``g(v / scale) = Σ_j l1_j|v_j| + l2_j v_j²/2`` when the base is
    ``l1‖x‖₁ + l2‖x‖²/2`` on some coordinates (:class:`Zero`, :class:`L1`,
    :class:`ElasticNet`, each possibly :class:`Masked`), else None."""
    mask = np.ones(scale.shape)
    if isinstance(base, Masked):
        base, mask = base.base, base.mask.astype(np.float64)
    if isinstance(base, Zero):
        l1, l2 = 0.0, 0.0
    elif isinstance(base, L1):
        l1, l2 = float(base.alpha), 0.0
    elif isinstance(base, ElasticNet):
        l1, l2 = float(base.l1), float(base.l2)
    else:
        return None
    return l1 * mask / scale, l2 * mask / (scale * scale)


__all__ = ["SCALABLE", "Scaled"]
