"""A separable penalty restricted to some coordinates: ``g(x) = Σ_{j ∈ M} p(x_j)``.

Neural-network papers penalise the weights and kernels but not the biases (the FCO code
of Yuan, Zaheer, Reddi, ICML 2021, regularizes kernels only; FedCanon's SCAD experiments
likewise). :class:`Masked` wraps any coordinate-separable penalty with a boolean mask over
the flat model, e.g. ``TorchModel.layout().weight_mask()``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._array import Array, asarray_like, namespace
from ._convex import L1, ElasticNet, Zero
from ._nonconvex import MCP, SCAD

#: Penalties ``Σ_j p(x_j)`` with ``p(0) = 0``: masking them keeps the prox exact.
SEPARABLE = (Zero, L1, ElasticNet, MCP, SCAD)


def require_separable(owner: str, base: Any, kinds: tuple[type, ...], fix: str = "") -> None:
    """Refuse a ``base`` penalty that is not one of the coordinate-separable ``kinds`` (a
    wrapper that acts coordinate by coordinate: :class:`Masked`, ``Scaled``)."""
    if not isinstance(base, kinds):
        names = ", ".join(c.__name__ for c in kinds)
        raise ValueError(f"{owner} needs a coordinate-separable penalty ({names}); got "
                         f"{type(base).__name__}, whose prox does not split by "
                         f"coordinate{fix}")


@dataclass(frozen=True, eq=False)
class Masked:
    """``g(x) = Σ_{j : mask_j} p(x_j)`` for a separable penalty ``Σ_j p(x_j)``.

    Parameters
    ----------
    base : L1, ElasticNet, MCP, SCAD or Zero
        The penalty on the selected coordinates.
    mask : array of bool, shape ``param_shape``
        Which coordinates of a model are penalised: ``(d,)`` for a vector model; for a
        matrix model (a base built with ``param_ndim=2``, e.g. a softmax model whose last
        feature row is a bias) a ``(d, k)`` mask.

    Notes
    -----
    Because the base is separable with ``p(0) = 0``, the prox splits exactly::

        prox_{s g}(v)_j = prox_{s p}(v_j)   if mask_j,      v_j   otherwise,

    and ``g(x) = base(mask ⊙ x)``. Weak convexity, convexity and the step rule are the
    base's (a coordinate that is not penalised adds nothing).

    Examples
    --------
    >>> import numpy as np
    >>> reg = Masked(L1(alpha=1.0), np.array([True, False, True]))
    >>> reg.prox(np.array([[2.0, 2.0, 0.5]]), 1.0)
    array([[1., 2., 0.]])
    >>> reg.value(np.array([[2.0, 2.0, 0.5]]))
    array([2.5])
    """

    base: Any
    mask: Any
    param_ndim: int = field(default=1, init=False)

    def __post_init__(self) -> None:
        require_separable("Masked", self.base, SEPARABLE)
        ndim = int(self.base.param_ndim)
        mask = np.asarray(self.mask)
        if mask.ndim != ndim or mask.dtype != bool:
            raise ValueError(f"Masked: mask must be a {ndim}-D boolean array over the model's "
                             f"coordinates, as the base has param_ndim={ndim} (got dtype "
                             f"{mask.dtype}, shape {mask.shape})")
        object.__setattr__(self, "mask", mask)
        object.__setattr__(self, "param_ndim", ndim)

    @property
    def convex(self) -> bool:
        return bool(self.base.convex)

    @property
    def weak_convexity(self) -> float:
        return float(self.base.weak_convexity)

    def _mask_like(self, x: Array) -> Array:
        shape = tuple(x.shape[x.ndim - self.param_ndim:])
        if shape != self.mask.shape:
            raise ValueError(f"Masked: the mask has shape {self.mask.shape} but the models "
                             f"have shape {shape}")
        return asarray_like(self.mask, x, dtype=namespace(x).bool)

    def value(self, x: Array) -> Array:
        xp = namespace(x)
        return self.base.value(xp.where(self._mask_like(x), x, xp.zeros_like(x)))

    def prox(self, x: Array, step: Any) -> Array:
        return namespace(x).where(self._mask_like(x), self.base.prox(x, step), x)

    def __repr__(self) -> str:
        # the fingerprint of a problem hashes repr(regularizer): say which coordinates
        digest = hashlib.sha256(np.packbits(self.mask).tobytes()).hexdigest()[:16]
        selected = f"{int(self.mask.sum())}/{self.mask.size}"
        if self.param_ndim != 1:
            selected += f" of {'x'.join(map(str, self.mask.shape))}"
        return f"Masked(base={self.base!r}, mask=<{selected} {digest}>)"


__all__ = ["SEPARABLE", "Masked"]
