"""Trace regression: a linear model on matrix features, ``y = ⟨X, W⟩ + ε``.

The smooth part of low-rank matrix estimation with a nuclear-norm regularizer, as in the
statistical-recovery experiments of Bao, Crawshaw, Luo, Liu, "Fast Composite Optimization and
Statistical Recovery in Federated Learning", ICML 2022 (Fast-FedDA), and the trace
regression model of Negahban and Wainwright, "Estimation of (near) low-rank matrices with
noise and high-dimensional scaling", Annals of Statistics 2011.
"""

from __future__ import annotations

from dataclasses import dataclass

from .._array import Array, namespace
from ..data._client_data import Batch
from ._base import check_l2
from ._linear import _add_ridge, _back, _margins, _weighted_gram


def _flat(features: Array) -> Array:
    """(B, m, p1, p2) → (B, m, p1·p2): the vectorised features (row-major, like ``W``)."""
    xp = namespace(features)
    b, m = features.shape[:2]
    return xp.reshape(features, (b, m, -1))


def _weighted_gram_max_eig(a: Array, weights: Array) -> Array:
    """``λ_max(Σ_j w_j a_j a_jᵀ)`` per client, through the smaller of the two Gram matrices.

    With ``S = diag(√w) A`` the nonzero spectra of ``SᵀS`` (D×D) and ``S Sᵀ`` (m×m) agree, so
    a client with fewer samples than entries of ``W`` pays for an m×m eigenproblem only.
    """
    xp = namespace(a)
    s = xp.sqrt(weights)[..., None] * a                                          # (B, m, D)
    m, dim = a.shape[1], a.shape[2]
    gram = (xp.matmul(s, xp.matrix_transpose(s)) if m < dim
            else xp.matmul(xp.matrix_transpose(s), s))
    return xp.linalg.eigvalsh(gram)[..., -1]


@dataclass(frozen=True)
class TraceRegression:
    r"""``f_i(W) = ½ Σ_j w_ij (⟨X_ij, W⟩ − y_ij)² + (l2/2)‖W‖_F²`` on matrix features.

    Parameters
    ----------
    l2 : float, default 0.0
        Ridge strength inside the smooth part (Frobenius norm).

    Notes
    -----
    Features ``X_j`` and the model ``W`` share the shape ``(p1, p2)`` (``param_ndim = 2``;
    a block of B clients is ``(B, p1, p2)``), ``⟨X, W⟩ = tr(XᵀW)``. It is least squares on
    the vectorised features:

    .. math::

        \nabla f(W) = \sum_j w_j (\langle X_j, W\rangle - y_j)\, X_j + l_2 W,
        \qquad L = \lambda_{\max}\Big(\sum_j w_j \operatorname{vec}(X_j)
        \operatorname{vec}(X_j)^\top\Big) + l_2 .

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import Batch
    >>> X = np.array([[[[1.0, 2.0], [3.0, 4.0]]]])          # one client, one 2x2 sample
    >>> b = Batch(X, np.array([[1.0]]), np.array([[1.0]]))
    >>> loss = TraceRegression()
    >>> loss.param_shape((2, 2))
    (2, 2)
    >>> loss.grad(np.zeros((1, 2, 2)), b)
    array([[[-1., -2.],
            [-3., -4.]]])
    >>> loss.value(np.zeros((1, 2, 2)), b), loss.smoothness(b)     # ½·1², ‖X‖_F²
    (array([0.5]), array([30.]))
    """

    l2: float = 0.0

    def __post_init__(self) -> None:
        check_l2(self.l2, "TraceRegression")

    @property
    def param_ndim(self) -> int:
        return 2

    def param_shape(self, feature_shape: tuple[int, ...], n_classes: int | None = None
                    ) -> tuple[int, ...]:
        if len(feature_shape) != 2:
            raise ValueError(f"TraceRegression needs matrix features (p1, p2), got feature_shape "
                             f"{tuple(feature_shape)}")
        return tuple(int(s) for s in feature_shape)

    def _residuals(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        w = xp.reshape(x, (x.shape[0], -1))
        return _margins(w, _flat(batch.features)) - batch.targets

    def value(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        r = self._residuals(x, batch)
        loss = 0.5 * xp.sum(batch.weights * r * r, axis=1)
        return loss + 0.5 * self.l2 * xp.sum(x * x, axis=(1, 2)) if self.l2 else loss

    def grad(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        r = self._residuals(x, batch)
        g = xp.reshape(_back(_flat(batch.features), batch.weights * r), x.shape)
        return g + self.l2 * x if self.l2 else g

    def smoothness(self, batch: Batch) -> Array:
        return _weighted_gram_max_eig(_flat(batch.features), batch.weights) + self.l2

    quadratic = True

    def hessian(self, x: Array, batch: Batch) -> Array:
        """``Σ_j w_j vec(X_j) vec(X_j)ᵀ + l2·I``, shape ``(B, p1·p2, p1·p2)`` (row-major vec)."""
        return _add_ridge(_weighted_gram(_flat(batch.features), batch.weights), self.l2)


__all__ = ["TraceRegression"]
