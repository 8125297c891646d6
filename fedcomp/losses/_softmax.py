"""Multiclass logistic (softmax) regression on matrix models ``W ∈ R^{d×k}``.

The loss of FedProx's synthetic and MNIST/FEMNIST convex experiments (Li, Sahu, Zaheer,
Sanjabi, Talwalkar, Smith, "Federated Optimization in Heterogeneous Networks", MLSys 2020)
and of the multiclass experiments of the composite FL papers (e.g. FedDA, Yuan, Zaheer,
Reddi, "Federated Composite Optimization", ICML 2021), without a bias term: append a
constant feature for one.
"""

from __future__ import annotations

from dataclasses import dataclass

import array_api_compat
import numpy as np

from .._array import Array, namespace
from ..data._client_data import Batch
from ..data._sparse import SparseBlock
from ._base import check_class_ids, check_l2
from ._linear import _gram_max_eig


def _logits(x: Array, features: Array) -> Array:
    """``a_bjᵀ W_b`` for every sample: (B, m, d) × (B, d, k) → (B, m, k), one batched matmul."""
    if isinstance(features, SparseBlock):
        return features.logits(x)
    return namespace(x).matmul(features, x)


def _back_matrix(features: Array, coef: Array) -> Array:
    """``Σ_j a_bj coef_bjᵀ``: (B, m, d) × (B, m, k) → (B, d, k)."""
    if isinstance(features, SparseBlock):
        return features.back_matrix(coef)
    xp = namespace(coef)
    return xp.matmul(xp.matrix_transpose(features), coef)


def _one_hot(targets: Array, n_classes: int, dtype: object) -> Array:
    """``[y_bj == c]`` as ``dtype``, shape (B, m, k).

    The comparison runs in the targets' own dtype (an ``arange`` of class ids as integers or
    floats), so float-typed class ids such as ``2.0`` match exactly and nothing is truncated.
    """
    xp = namespace(targets)
    classes = xp.arange(n_classes, dtype=targets.dtype, device=array_api_compat.device(targets))
    return xp.astype(targets[..., None] == classes, dtype)


@dataclass(frozen=True)
class Softmax:
    r"""Softmax cross-entropy ``Σ_j w_ij (logsumexp(a_ijᵀW) − (a_ijᵀW)_{y_ij}) + (l2/2)‖W‖²``.

    Parameters
    ----------
    l2 : float, default 0.0
        Ridge strength inside the smooth part (Frobenius norm).

    Notes
    -----
    A model is a matrix ``W`` of shape ``(d, k)`` (``param_ndim = 2``); a block of B clients
    is ``(B, d, k)``. Targets are class ids ``0 … k−1`` (integer or float arrays). With
    logits ``z_j = W ᵀ a_j`` and ``p_j = softmax(z_j)``

    .. math::

        f(W) = \sum_j w_j \Big(\log \sum_c e^{z_{jc}} - z_{j y_j}\Big) + \tfrac{l_2}{2}\|W\|_F^2,
        \qquad
        \nabla f(W) = \sum_j w_j\, a_j (p_j - e_{y_j})^\top + l_2 W .

    The log-sum-exp subtracts the row maximum, so large logits never overflow. The Hessian
    of one sample is ``(diag(p) − p pᵀ) ⊗ a aᵀ`` and ``λ_max(diag(p) − p pᵀ) ≤ 1/2``, hence
    the smoothness bound ``½ λ_max(Σ_j w_j a_j a_jᵀ) + l2``.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import Batch
    >>> b = Batch(np.array([[[1.0, 0.0], [0.0, 1.0]]]), np.array([[0, 2]]), np.array([[0.5, 0.5]]))
    >>> loss = Softmax()
    >>> loss.param_shape((2,), 3)
    (2, 3)
    >>> w = np.zeros((1, 2, 3))
    >>> bool(np.isclose(loss.value(w, b)[0], np.log(3)))     # uniform prediction
    True
    >>> loss.grad(w, b)[0].round(4)
    array([[-0.3333,  0.1667,  0.1667],
           [ 0.1667,  0.1667, -0.3333]])
    """

    l2: float = 0.0

    takes_sparse = True

    def __post_init__(self) -> None:
        check_l2(self.l2, "Softmax")

    @property
    def param_ndim(self) -> int:
        return 2

    def check_targets(self, targets: np.ndarray, n_classes: int | None = None) -> None:
        check_class_ids("Softmax", targets, n_classes)

    def param_shape(self, feature_shape: tuple[int, ...], n_classes: int | None = None
                    ) -> tuple[int, ...]:
        if n_classes is None or n_classes < 2:
            raise ValueError(f"Softmax needs n_classes >= 2 to shape its (d, n_classes) model "
                             f"(got n_classes={n_classes!r}); pass n_classes to the Problem")
        if len(feature_shape) != 1:
            raise ValueError(f"Softmax needs vector features (d,), got feature_shape "
                             f"{tuple(feature_shape)}; flatten the features first")
        return (int(feature_shape[0]), int(n_classes))

    def _parts(self, x: Array, batch: Batch) -> tuple[Array, Array, Array]:
        """Shifted logits ``z − max z``, their log-sum-exp and the one-hot targets."""
        xp = namespace(x)
        z = _logits(x, batch.features)
        z = z - xp.max(z, axis=-1, keepdims=True)
        lse = xp.log(xp.sum(xp.exp(z), axis=-1))
        return z, lse, _one_hot(batch.targets, x.shape[-1], z.dtype)

    def value(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        z, lse, onehot = self._parts(x, batch)
        per_sample = lse - xp.sum(onehot * z, axis=-1)  # shift cancels: lse(z) − z_y
        loss = xp.sum(batch.weights * per_sample, axis=1)
        return loss + 0.5 * self.l2 * xp.sum(x * x, axis=(1, 2)) if self.l2 else loss

    def grad(self, x: Array, batch: Batch) -> Array:
        xp = namespace(x)
        z, lse, onehot = self._parts(x, batch)
        coef = batch.weights[..., None] * (xp.exp(z - lse[..., None]) - onehot)   # (B, m, k)
        g = _back_matrix(batch.features, coef)                                     # (B, d, k)
        return g + self.l2 * x if self.l2 else g

    def smoothness(self, batch: Batch) -> Array:
        return 0.5 * _gram_max_eig(batch) + self.l2


__all__ = ["Softmax"]
