"""Synthetic statistical-recovery data sets of Fast-FedDA.

Examples 3.1 (sparse linear regression) and 3.2 (low-rank matrix estimation, trace
regression) and Section 4 of Bao, Crawshaw, Luo, Liu, "Fast Composite Optimization and
Statistical Recovery in Federated Learning", ICML 2022: 64 clients of 128 samples each,
heterogeneous through a per-client shift of the covariates, and a known true model
(:func:`sparse_regression_truth`, :func:`lowrank_truth`) for the recovery metrics
``l2_error``, ``l1_error``, ``support_f1``, ``operator_error`` and ``rank``.

Generators run on the host in NumPy and return a :class:`ClientData`; move it to another
backend with :meth:`ClientData.to`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._client_data import ClientData
from ._partition import check_integer

#: Correlation of neighbouring covariates in Example 3.1: ``Σ_ij = 0.5^|i−j|``.
AR_COEF = 0.5


def _check(name: str, **counts: int) -> None:
    # integers only: int(2.5) would quietly make 2 clients
    bad = {k: v for k, v in counts.items() if check_integer(name, k, v) < 1}
    if bad:
        raise ValueError(f"{name}: need positive counts (got {bad})")


def sparse_regression_truth(n_features: int = 1024, sparsity: int = 512,
                            dtype: Any = np.float64) -> np.ndarray:
    """The true coefficient ``w* = (1_s, 0_{p−s})`` of Example 3.1, shape ``(n_features,)``.

    Examples
    --------
    >>> sparse_regression_truth(5, 2).tolist()
    [1.0, 1.0, 0.0, 0.0, 0.0]
    """
    if not 0 <= int(sparsity) <= int(n_features):
        raise ValueError(f"sparse_regression_truth: need 0 <= sparsity <= n_features (got "
                         f"sparsity={sparsity}, n_features={n_features})")
    w = np.zeros(int(n_features), dtype=dtype)
    w[: int(sparsity)] = 1
    return w


def lowrank_truth(size: int = 32, rank: int = 16, dtype: Any = np.float64) -> np.ndarray:
    """The true matrix ``W* = diag(1_r, 0_{p−r})`` of Example 3.2, shape ``(size, size)``.

    Examples
    --------
    >>> lowrank_truth(3, 1).tolist()
    [[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]
    """
    if not 0 <= int(rank) <= int(size):
        raise ValueError(f"lowrank_truth: need 0 <= rank <= size (got rank={rank}, "
                         f"size={size})")
    diag = np.zeros(int(size), dtype=dtype)
    diag[: int(rank)] = 1
    return np.diag(diag)


def _ar1(standard: np.ndarray, coef: float = AR_COEF) -> np.ndarray:
    """Rows of ``N(0, Σ)`` with ``Σ_ij = coef^|i−j|`` from i.i.d. standard normal rows.

    The stationary AR(1) recursion ``z_0 = e_0``, ``z_j = coef·z_{j−1} + √(1−coef²)·e_j``
    keeps ``Var z_j = 1`` and gives ``Cov(z_i, z_j) = coef^|i−j|`` exactly — the law of
    ``rng.multivariate_normal(0, Σ)`` in O(p) per sample instead of a p×p factorisation.
    """
    z = np.empty_like(standard)
    z[:, 0] = standard[:, 0]
    scale = np.sqrt(1.0 - coef * coef)
    for j in range(1, standard.shape[1]):
        z[:, j] = coef * z[:, j - 1] + scale * standard[:, j]
    return z


def bao_sparse_regression(
    n_clients: int = 64,
    samples_per_client: int = 128,
    n_features: int = 1024,
    sparsity: int = 512,
    noise: float = 1.0,
    seed: int = 0,
    dtype: Any = np.float64,
) -> ClientData:
    r"""Example 3.1 of Fast-FedDA: heterogeneous sparse linear regression.

    Parameters
    ----------
    n_clients : int, default 64
        Number of clients K.
    samples_per_client : int, default 128
        Samples ``n_k`` of every client.
    n_features : int, default 1024
        Dimension p.
    sparsity : int, default 512
        Number s of ones at the start of ``w*`` (:func:`sparse_regression_truth`).
    noise : float, default 1.0
        Standard deviation of the response noise ε.
    seed : int, default 0
        Seed of the single ``np.random.default_rng`` that makes every draw.
    dtype : numpy dtype, default float64
        Dtype of features and targets.

    Returns
    -------
    ClientData
        Features ``(n_clients, samples_per_client, n_features)``, real targets
        ``(n_clients, samples_per_client)``.

    Notes
    -----
    .. math::

        w^* = (1_s, 0_{p-s}),\quad \delta_k \sim N(0, I_p),\quad
        x_i^k = \delta_k + z_i^k,\; z_i^k \sim N(0, \Sigma),\; \Sigma_{ij} = 0.5^{|i-j|},
        \quad y_i^k = \langle x_i^k, w^*\rangle + \text{noise}\cdot\varepsilon_i^k .

    p = 1024, s = 512 are Figure 1's setting (its caption); the text of Section 4 leaves
    them open. ``z`` comes from the AR(1)
    recursion ``z_0 = e_0``, ``z_j = 0.5 z_{j−1} + √0.75 e_j``, whose covariance is exactly
    Σ. Draw order, client by client: ``δ_k`` (p standard normals), then the ``(n_k, p)``
    standard normals ``e`` behind the ``z_i^k`` (row by row), then the ``n_k`` noise draws.

    References
    ----------
    Y. Bao, M. Crawshaw, S. Luo, M. Liu, "Fast Composite Optimization and Statistical Recovery
    in Federated Learning", ICML 2022, Example 3.1 and Section 4.

    Examples
    --------
    >>> data = bao_sparse_regression(n_clients=3, samples_per_client=10, n_features=20,
    ...                              sparsity=5)
    >>> data.features.shape, data.targets.shape, data.counts.tolist()
    ((3, 10, 20), (3, 10), [10, 10, 10])
    """
    _check("bao_sparse_regression", n_clients=n_clients,
           samples_per_client=samples_per_client, n_features=n_features)
    if not noise >= 0:
        raise ValueError(f"bao_sparse_regression: noise is a standard deviation, >= 0 "
                         f"(got {noise!r})")
    n, m, p = int(n_clients), int(samples_per_client), int(n_features)
    w_star = sparse_regression_truth(p, sparsity)
    rng = np.random.default_rng(seed)
    feats, targs = [], []
    for _ in range(n):
        shift = rng.standard_normal(p)                            # δ_k
        x = shift + _ar1(rng.standard_normal((m, p)))
        y = x @ w_star + noise * rng.standard_normal(m)
        feats.append(x)
        targs.append(y)
    return ClientData.from_lists(feats, targs, dtype=dtype)


def bao_lowrank_matrix(
    n_clients: int = 64,
    samples_per_client: int = 128,
    size: int = 32,
    rank: int = 16,
    noise: float = 1.0,
    seed: int = 0,
    dtype: Any = np.float64,
) -> ClientData:
    r"""Example 3.2 of Fast-FedDA: heterogeneous low-rank trace regression.

    Parameters
    ----------
    n_clients : int, default 64
        Number of clients K.
    samples_per_client : int, default 128
        Samples ``n_k`` of every client.
    size : int, default 32
        Side p of the square matrices ``W*`` and ``X``.
    rank : int, default 16
        Rank r of ``W* = diag(1_r, 0)`` (:func:`lowrank_truth`).
    noise : float, default 1.0
        Standard deviation of the response noise ε.
    seed : int, default 0
        Seed of the single ``np.random.default_rng`` that makes every draw.
    dtype : numpy dtype, default float64
        Dtype of features and targets.

    Returns
    -------
    ClientData
        Features ``(n_clients, samples_per_client, size, size)``, real targets
        ``(n_clients, samples_per_client)``; pair it with the ``trace_regression`` loss.

    Notes
    -----
    .. math::

        W^* = \operatorname{diag}(1_r, 0_{p-r}),\quad (Z_k)_{ab} \sim N(0, 1),\quad
        X_i^k = Z_k + A_i^k,\; (A_i^k)_{ab} \sim N(0, 1),\quad
        y_i^k = \langle X_i^k, W^*\rangle + \text{noise}\cdot\varepsilon_i^k .

    Every client draws its own heterogeneity matrix ``Z_k``, as Section 4 of the paper
    states. The authors' code accidentally builds one ``Z`` shared by all clients (which
    makes the clients identically distributed); that is not reproduced here. The sizes
    p = 32, r = 16 are Figure 2's setting (its caption). Draw order,
    client by client: ``Z_k`` (p×p, row-major), the ``(n_k, p, p)`` entries of the
    ``A_i^k``, then the ``n_k`` noise draws.

    References
    ----------
    Y. Bao, M. Crawshaw, S. Luo, M. Liu, "Fast Composite Optimization and Statistical Recovery
    in Federated Learning", ICML 2022, Example 3.2 and Section 4.

    Examples
    --------
    >>> data = bao_lowrank_matrix(n_clients=2, samples_per_client=5, size=4, rank=2)
    >>> data.features.shape, data.feature_shape
    ((2, 5, 4, 4), (4, 4))
    """
    _check("bao_lowrank_matrix", n_clients=n_clients, samples_per_client=samples_per_client,
           size=size)
    if not noise >= 0:
        raise ValueError(f"bao_lowrank_matrix: noise is a standard deviation, >= 0 "
                         f"(got {noise!r})")
    n, m, p = int(n_clients), int(samples_per_client), int(size)
    w_star = lowrank_truth(p, rank)
    rng = np.random.default_rng(seed)
    feats, targs = [], []
    for _ in range(n):
        shift = rng.standard_normal((p, p))                       # Z_k, one per client
        x = shift + rng.standard_normal((m, p, p))
        y = np.einsum("mab,ab->m", x, w_star) + noise * rng.standard_normal(m)
        feats.append(x)
        targs.append(y)
    return ClientData.from_lists(feats, targs, dtype=dtype)


__all__ = ["bao_lowrank_matrix", "bao_sparse_regression", "lowrank_truth",
           "sparse_regression_truth"]
