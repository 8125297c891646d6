"""Simulation I of Fed-HT (Tong et al.): heterogeneous sparse linear regression.

Tong, Liang, Zhu, Bi, "Federated Nonconvex Sparse Learning", arXiv:2101.00052, Section V
(Simulation I). The paper's text could not be read through the search tool here; the
generator follows the description of Simulation I in the Flower baseline of the paper
(``flwrlabs/flower``, ``baselines/fedht``, README and ``fedht/dataset.py``, read
2026-11-25): client ``i`` has its own ``s``-sparse model and shifted features of decaying
variance, so the clients' optima differ (non-IID) while the problem stays an ℓ0-constrained
least-squares one.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._client_data import ClientData


def tong_sparse_regression(
    n_clients: int = 100,
    samples_per_client: int = 100,
    n_features: int = 1000,
    sparsity: int = 100,
    alpha: float = 0.1,
    beta: float = 0.1,
    seed: int = 0,
    dtype: Any = np.float64,
) -> ClientData:
    r"""Simulation I of Fed-HT: per-client sparse models, shifted decaying-variance features.

    Parameters
    ----------
    n_clients, samples_per_client, n_features : int
        ``N`` clients of ``n`` samples in dimension ``d`` (the paper: 100, 100, 1000).
    sparsity : int, default 100
        Nonzeros of every client's model (its first ``sparsity`` coordinates).
    alpha, beta : float, default 0.1
        Heterogeneity of the models and of the features (FedProx's Synthetic(α, β) knobs).
    seed : int
        Seed of the one generator that makes every draw.
    dtype : numpy dtype, default float64

    Returns
    -------
    ClientData
        Features ``(N, n, d)``, real targets ``(N, n)``.

    Notes
    -----
    For client ``i``: ``u_i ~ N(0.1, α²)``, ``B_i ~ N(0, β²)``; its model ``x_i`` has
    ``x_{i,j} ~ N(u_i, 1)`` for ``j < s`` and 0 after; the feature mean
    ``v_i ~ N(B_i, 1)`` per coordinate; samples ``z ~ N(v_i, Σ)`` with
    ``Σ = diag(1/(j+1)^{1.2})``; ``y = ⟨z, x_i⟩ + b`` with ``b ~ N(u_i, 1)``. Draw order per
    client: ``u_i``, ``B_i``, the ``s`` model entries, ``v_i``, the ``n × d`` samples, the
    ``n`` noises (the baseline's order; the mean 0.1 of ``u_i`` is its too).

    Examples
    --------
    >>> data = tong_sparse_regression(n_clients=3, samples_per_client=5, n_features=8,
    ...                               sparsity=2)
    >>> data.features.shape, data.targets.shape
    ((3, 5, 8), (3, 5))
    """
    rng = np.random.default_rng(seed)
    scale = np.sqrt(1.0 / np.arange(1, n_features + 1) ** 1.2)
    features, targets = [], []
    for _ in range(n_clients):
        u = rng.normal(0.1, alpha)
        b_shift = rng.normal(0.0, beta)
        model = np.zeros(n_features)
        model[:sparsity] = rng.normal(u, 1.0, size=sparsity)
        mean = rng.normal(b_shift, 1.0, size=n_features)
        z = mean + scale * rng.standard_normal((samples_per_client, n_features))
        y = z @ model + rng.normal(u, 1.0, size=samples_per_client)
        features.append(z)
        targets.append(y)
    return ClientData.from_lists(features, targets, dtype=dtype)
