"""Generalised linear losses on vector models: least squares, logistic regression and the
squared violation of half-spaces (polyhedron feasibility).

Each optionally carries a ridge term ``(l2/2)‖x‖²`` *inside the smooth part* — that is how
seed 000 (Zhang, Hu, Johansson 2024, eq. 6) makes each ``f_i`` strongly convex, while the
ℓ1 term is the regularizer ``g``.
"""

from __future__ import annotations

from dataclasses import dataclass

import array_api_compat
import numpy as np

from .._array import Array, namespace
from ..data._client_data import Batch
from ..data._sparse import SparseBlock
from ._base import check_l2, check_signed_labels


def _margins(x: Array, features: Array) -> Array:
    """``a_bjᵀ x_b`` for every sample: (B, m, d) × (B, d) → (B, m), one batched matmul.

    The ``@`` operator is the Array API's ``matmul`` without a namespace lookup and the
    compat wrapper's call: at small sizes (30 clients × 60 features) a round is Python
    dispatch, and these two run at every local step. Sparse features
    (:class:`~fedcomp.data._sparse.SparseBlock`) take one sparse product for the block.
    """
    if isinstance(features, SparseBlock):
        return features.margins(x)
    return (features @ x[..., None])[..., 0]


def _back(features: Array, coef: Array) -> Array:
    """``Σ_j coef_bj a_bj``: (B, m, d) × (B, m) → (B, d)."""
    if isinstance(features, SparseBlock):
        return features.back(coef)
    return (coef[:, None, :] @ features)[:, 0, :]


def _weighted_gram(features: Array, coef: Array) -> Array:
    """``Σ_j c_bj a_bj a_bjᵀ``: (B, m, d) with (B, m) → (B, d, d), one batched matmul."""
    if isinstance(features, SparseBlock):
        return features.weighted_gram(coef)
    xp = namespace(features)
    return xp.matmul(xp.matrix_transpose(features) * coef[:, None, :], features)


def _add_ridge(hess: Array, l2: float) -> Array:
    """``H + l2·I`` on every matrix of the block."""
    if not l2:
        return hess
    xp = namespace(hess)
    eye = xp.eye(hess.shape[-1], dtype=hess.dtype, device=array_api_compat.device(hess))
    return hess + l2 * eye


def _penalty_slope(x: Array) -> Array:
    """Gradient of ``Σ_k x_k²/(1 + x_k²)``: ``2x/(1 + x²)²`` elementwise."""
    sq = 1.0 + x * x
    return 2.0 * x / (sq * sq)


def _gram_max_eig(batch: Batch) -> Array:
    """Largest eigenvalue of ``Σ_j w_j a_j a_jᵀ`` for each client, shape (B,)."""
    if isinstance(batch.features, SparseBlock):
        return batch.features.max_eigenvalues(batch.weights)
    xp = namespace(batch.features)
    a = batch.features
    gram = xp.matmul(xp.matrix_transpose(a) * batch.weights[:, None, :], a)
    return xp.linalg.eigvalsh(gram)[..., -1]


class _VectorModel:
    """What the losses of a linear model on vector features share: the model has the
    features' shape, and the loss computes on sparse features (its products are
    :func:`_margins` and :func:`_back`)."""

    takes_sparse = True

    @property
    def param_ndim(self) -> int:
        return 1

    def param_shape(self, feature_shape: tuple[int, ...], n_classes: int | None = None
                    ) -> tuple[int, ...]:
        return feature_shape


@dataclass(frozen=True)
class LeastSquares(_VectorModel):
    """``f_i(x) = ½ Σ_j w_ij (a_ijᵀx − y_ij)² + (l2/2)‖x‖²`` (½ mean squared residual).

    Parameters
    ----------
    l2 : float, default 0.0
        Ridge strength inside the smooth part.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import Batch
    >>> a = np.array([[[1.0, 0.0], [0.0, 2.0]]])
    >>> b = Batch(a, np.array([[1.0, 2.0]]), np.array([[0.5, 0.5]]))
    >>> LeastSquares().grad(np.zeros((1, 2)), b)
    array([[-0.5, -2. ]])
    """

    l2: float = 0.0

    def __post_init__(self) -> None:
        check_l2(self.l2, "LeastSquares")

    def value(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        r = _margins(x, batch.features) - batch.targets
        return 0.5 * xp.sum(batch.weights * r * r, axis=1) + 0.5 * self.l2 * xp.sum(x * x, axis=1)

    def grad(self, x: Array, batch: Batch) -> Array:
        r = _margins(x, batch.features) - batch.targets
        g = _back(batch.features, batch.weights * r)
        return g + self.l2 * x if self.l2 else g

    def smoothness(self, batch: Batch) -> Array:
        return _gram_max_eig(batch) + self.l2

    #: The loss is a quadratic: one Newton step from anywhere is its exact minimiser.
    quadratic = True

    def hessian(self, x: Array, batch: Batch) -> Array:
        """``Σ_j w_j a_j a_jᵀ + l2·I`` for each client, shape ``(B, d, d)`` (constant in x)."""
        return _add_ridge(_weighted_gram(batch.features, batch.weights), self.l2)


@dataclass(frozen=True)
class Logistic(_VectorModel):
    """``f_i(x) = Σ_j w_ij log(1 + exp(−y_ij a_ijᵀx)) + (l2/2)‖x‖² + nonconvex·Σ_k x_k²/(1 + x_k²)``
    with labels ``y ∈ {−1, +1}``.

    Parameters
    ----------
    l2 : float, default 0.0
        Ridge strength inside the smooth part (seed 000: ϑ₂ = 0.01).
    nonconvex : float, default 0.0
        ``α`` of the smooth nonconvex penalty ``α Σ_k x_k²/(1 + x_k²)`` (the "nonconvex
        logistic regression" of the nonconvex proximal-gradient literature, e.g. Reddi et al.
        2016): its second derivative ``2α(1 − 3x²)/(1 + x²)³`` lies in ``[−α/2, 2α]``, so the
        loss is nonconvex once ``α/2`` exceeds the data term's curvature along some direction
        (for instance with ``l2 < α/2`` on separable or high-dimensional data).

    Notes
    -----
    The gradient uses ``σ(−t) = (1 − tanh(t/2))/2``, which never overflows; the value uses
    ``logaddexp(0, −t)``. Smoothness bound: ``λ_max(Σ_j w_j a_j a_jᵀ)/4 + l2 + 2·nonconvex``.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import Batch
    >>> b = Batch(np.array([[[1.0, 0.0]]]), np.array([[1.0]]), np.array([[1.0]]))
    >>> Logistic().grad(np.zeros((1, 2)), b)
    array([[-0.5,  0. ]])
    """

    l2: float = 0.0
    nonconvex: float = 0.0

    def __post_init__(self) -> None:
        check_l2(self.l2, "Logistic")
        check_l2(self.nonconvex, "Logistic", name="nonconvex")

    @property
    def convex(self) -> bool:
        """Whether every ``f_i`` is convex (no nonconvex penalty)."""
        return not self.nonconvex

    def __repr__(self) -> str:
        # without the penalty, the repr (and so the problem fingerprint that keys cached
        # reference solutions) is the one the loss had before the penalty existed
        extra = f", nonconvex={self.nonconvex!r}" if self.nonconvex else ""
        return f"Logistic(l2={self.l2!r}{extra})"

    def check_targets(self, targets: np.ndarray, n_classes: int | None = None) -> None:
        check_signed_labels("Logistic", targets)

    def value(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        t = batch.targets * _margins(x, batch.features)
        loss = xp.sum(batch.weights * xp.logaddexp(xp.zeros_like(t), -t), axis=1)
        loss = loss + 0.5 * self.l2 * xp.sum(x * x, axis=1)
        if self.nonconvex:
            loss = loss + self.nonconvex * xp.sum(x * x / (1.0 + x * x), axis=1)
        return loss

    def grad(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        t = batch.targets * _margins(x, batch.features)
        coef = -0.5 * batch.weights * batch.targets * (1.0 - xp.tanh(0.5 * t))
        g = _back(batch.features, coef)
        if self.l2:
            g = g + self.l2 * x
        if self.nonconvex:
            g = g + self.nonconvex * _penalty_slope(x)
        return g

    def smoothness(self, batch: Batch) -> Array:
        return 0.25 * _gram_max_eig(batch) + self.l2 + 2.0 * self.nonconvex

    quadratic = False

    def hessian(self, x: Array, batch: Batch) -> Array:
        """``Σ_j w_j σ(t_j)σ(−t_j) a_j a_jᵀ + l2·I``, ``t_j = y_j a_jᵀx``: shape ``(B, d, d)``.

        ``σ(t)σ(−t) = (1 − tanh²(t/2))/4`` never overflows.
        """
        xp = namespace(x)
        th = xp.tanh(0.5 * _margins(x, batch.features))  # the sign of y_j drops out
        hess = _add_ridge(_weighted_gram(batch.features, 0.25 * batch.weights * (1.0 - th * th)),
                          self.l2)
        if self.nonconvex:
            sq = x * x
            curvature = self.nonconvex * 2.0 * (1.0 - 3.0 * sq) / (1.0 + sq) ** 3
            eye = xp.eye(x.shape[-1], dtype=x.dtype, device=array_api_compat.device(x))
            hess = hess + curvature[..., None] * eye
        return hess


@dataclass(frozen=True)
class HalfspaceViolation(_VectorModel):
    """``f_i(x) = Σ_j w_ij max(a_ijᵀx − b_ij, 0)² + (l2/2)‖x‖²``: the mean squared violation
    of the half-spaces ``a_ijᵀx ≤ b_ij``, zero exactly on their intersection.

    The loss of polyhedron feasibility (Jiang, Rodomanov, Stich, NeurIPS 2024, Section 5;
    ``polyhedron_loss`` of their code ``mlolab/S-DANE``, ``src/metrics.py``): the targets
    are the right-hand sides ``b``. It has no ``½``, as the code's has none, so that
    their step sizes carry over.

    Parameters
    ----------
    l2 : float, default 0.0
        Ridge strength inside the smooth part.

    Notes
    -----
    Gradient ``2 Σ_j w_j max(r_j, 0) a_j + l2·x`` with ``r_j = a_jᵀx − b_j``; it is
    Lipschitz with constant at most ``2 λ_max(Σ_j w_j a_j a_jᵀ) + l2`` (every half-space
    violated), the smoothness returned. Convex and piecewise quadratic: ``hessian`` is the
    Hessian of the piece ``x`` lies in (the violated half-spaces' rows).

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import Batch
    >>> a = np.array([[[1.0, 0.0], [0.0, 1.0]]])
    >>> b = Batch(a, np.array([[1.0, -1.0]]), np.array([[0.5, 0.5]]))
    >>> HalfspaceViolation().value(np.zeros((1, 2)), b)  # only x₂ ≤ −1 is violated, by 1
    array([0.5])
    >>> HalfspaceViolation().grad(np.zeros((1, 2)), b)
    array([[0., 1.]])
    """

    l2: float = 0.0

    def __post_init__(self) -> None:
        check_l2(self.l2, "HalfspaceViolation")

    def _violations(self, x: Array, batch: Batch) -> Array:
        r = _margins(x, batch.features) - batch.targets
        return namespace(r).where(r > 0, r, 0.0 * r)

    def value(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        v = self._violations(x, batch)
        return xp.sum(batch.weights * v * v, axis=1) + 0.5 * self.l2 * xp.sum(x * x, axis=1)

    def grad(self, x: Array, batch: Batch) -> Array:
        g = _back(batch.features, 2.0 * batch.weights * self._violations(x, batch))
        return g + self.l2 * x if self.l2 else g

    def smoothness(self, batch: Batch) -> Array:
        return 2.0 * _gram_max_eig(batch) + self.l2

    quadratic = False

    def hessian(self, x: Array, batch: Batch) -> Array:
        """``2 Σ_{j: r_j > 0} w_j a_j a_jᵀ + l2·I`` for each client, shape ``(B, d, d)``."""
        r = _margins(x, batch.features) - batch.targets
        xp = namespace(r)
        active = xp.where(r > 0, 2.0 * batch.weights, 0.0 * r)
        return _add_ridge(_weighted_gram(batch.features, active), self.l2)


__all__ = ["HalfspaceViolation", "LeastSquares", "Logistic"]
