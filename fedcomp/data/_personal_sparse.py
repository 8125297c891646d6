"""Sparse regression whose clients have different true supports: the data of personalised
composite FL.

Every client's true model shares a support of ``shared`` coordinates (with common values)
and adds ``private`` coordinates of its own, drawn from the other features: one sparse
model cannot be right for every client, and a personal sparse model can. (After the
heterogeneous sparse settings of personalised sparse FL, e.g. a hospital whose own
markers add to the shared ones.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._client_data import ClientData


def personal_sparse_truths(n_clients: int = 10, n_features: int = 100, shared: int = 5,
                           private: int = 5, seed: int = 0, **_: Any) -> np.ndarray:
    """Every client's true model, shape ``(n_clients, n_features)``.

    The shared support is the first ``shared`` entries of a permutation of the features,
    its values ``±(1 + U(0, 1))`` common to all clients; client i's private support is
    ``private`` of the remaining features, its values drawn the same way.

    Examples
    --------
    >>> truths = personal_sparse_truths(n_clients=3, n_features=20, shared=2, private=3)
    >>> truths.shape, [int(np.count_nonzero(t)) for t in truths]
    ((3, 20), [5, 5, 5])
    """
    rng = np.random.default_rng([seed, 0x70657273])
    if shared + private > n_features:
        raise ValueError(f"personal_sparse_regression: shared + private = {shared + private} "
                         f"supports cannot fit in n_features = {n_features}")
    order = rng.permutation(n_features)
    common, rest = order[:shared], order[shared:]

    def values(k: int) -> np.ndarray:
        return rng.choice([-1.0, 1.0], size=k) * (1.0 + rng.uniform(size=k))

    truths = np.zeros((n_clients, n_features))
    truths[:, common] = values(shared)
    for i in range(n_clients):
        truths[i, rng.choice(rest, size=private, replace=False)] = values(private)
    return truths


def personal_sparse_regression(n_clients: int = 10, samples_per_client: int = 50,
                               n_features: int = 100, shared: int = 5, private: int = 5,
                               noise: float = 0.1, seed: int = 0, dtype: Any = np.float64
                               ) -> ClientData:
    """Least-squares data of clients with shared and private supports.

    Parameters
    ----------
    n_clients, samples_per_client, n_features : int
    shared, private : int
        The sizes of the common support and of each client's own.
    noise : float
        The standard deviation of the targets' Gaussian noise.
    seed : int
    dtype : numpy dtype, default float64

    Returns
    -------
    ClientData
        Features ``a ~ N(0, I)`` (``(N, m, d)``), targets ``⟨a, w_i⟩ + noise``, with
        ``w_i`` from :func:`personal_sparse_truths` (the same seed).

    Examples
    --------
    >>> data = personal_sparse_regression(n_clients=3, samples_per_client=8, n_features=20,
    ...                                   shared=2, private=3)
    >>> data.features.shape
    (3, 8, 20)
    """
    truths = personal_sparse_truths(n_clients, n_features, shared, private, seed)
    rng = np.random.default_rng([seed, 0x64617461])
    features = rng.standard_normal((n_clients, samples_per_client, n_features))
    targets = np.einsum("imd,id->im", features, truths)
    targets += noise * rng.standard_normal(targets.shape)
    return ClientData.from_lists(list(features.astype(dtype)), list(targets.astype(dtype)),
                                 dtype=dtype)


__all__ = ["personal_sparse_regression", "personal_sparse_truths"]
