"""Polyhedron feasibility: half-spaces that all contain a planted point.

The data of S-DANE's polyhedron experiment (Jiang, Rodomanov, Stich, "Stabilized
Proximal-Point Methods for Federated Optimization", NeurIPS 2024, Section 5; the official
code ``mlolab/S-DANE``, ``src/datasets.py``, ``polyhedron_dataset``, read 2026-11-26 and
written here anew): rows ``a_j`` uniform in ``[-1, 1]^d``, a point ``x*`` of norm
``radius`` and right-hand sides ``b_j = a_jᵀx* + s_j`` with small slacks ``s_j ≥ 0``, so
that ``x*`` lies in every half-space ``a_jᵀx ≤ b_j`` and the squared violation
(:class:`fedcomp.losses.HalfspaceViolation`) has minimum 0. The slacks are tiny against
``‖x*‖``: the polyhedron is a thin sliver around ``x*``, and near it about half the
half-spaces are violated along any direction, which makes the problem behave like a
strongly convex one (the paper's "strongly convex polyhedron feasibility").
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._client_data import ClientData


def polyhedron_feasibility(n_clients: int = 10, samples_per_client: int = 1000,
                           n_features: int = 1000, radius: float = 1.0, slack: float = 3e-5,
                           seed: int = 0, dtype: Any = np.float64) -> ClientData:
    """Half-spaces ``a_jᵀx ≤ b_j`` around a planted point, split evenly among clients.

    Parameters
    ----------
    n_clients, samples_per_client, n_features : int
        ``n`` clients of ``m`` half-spaces each in dimension ``d`` (the official code:
        10 clients sharing 10 000 rows, d = 1000).
    radius : float, default 1.0
        ``‖x*‖``, the planted point's norm (the code: 0.95 · 10⁶).
    slack : float, default 3e-5
        The slacks ``s_j`` are uniform in ``[0, slack]``. The code draws them uniform in
        ``[0, k/10]`` with ``k`` the *index* of a row (it takes ``argmax``'s position where
        its comment asks for a value): for its seed ``k = 286``, slacks up to 28.6 against
        ``‖x*‖ = 0.95·10⁶``, a ratio of 3e-5, the default's at ``radius = 1``.
    seed : int
    dtype : numpy dtype, default float64

    Returns
    -------
    ClientData
        Features ``(n, m, d)``, targets ``b`` ``(n, m)``; the rows are i.i.d., so the
        clients differ only by their samples (the code's ``split = 'iid'``).

    Examples
    --------
    >>> data = polyhedron_feasibility(n_clients=3, samples_per_client=8, n_features=5)
    >>> data.features.shape, data.targets.shape
    ((3, 8, 5), (3, 8))
    >>> point = polyhedron_point(n_features=5)
    >>> bool(np.all(np.einsum("imd,d->im", data.features, point) <= data.targets))
    True
    """
    if not (radius > 0 and slack >= 0):
        raise ValueError(f"polyhedron_feasibility: radius must be > 0 and slack >= 0 (got "
                         f"radius={radius!r}, slack={slack!r})")
    point = polyhedron_point(n_features, radius, seed)
    rng = np.random.default_rng([seed, 0x726f7773])
    features = rng.uniform(-1.0, 1.0, size=(n_clients, samples_per_client, n_features))
    targets = features @ point + slack * rng.uniform(size=(n_clients, samples_per_client))
    return ClientData.from_lists(list(features.astype(dtype)), list(targets.astype(dtype)),
                                 dtype=dtype)


def polyhedron_point(n_features: int = 1000, radius: float = 1.0, seed: int = 0,
                     **_: Any) -> np.ndarray:
    """The planted point ``x*`` of :func:`polyhedron_feasibility` (the same seed): a Gaussian
    direction scaled to norm ``radius``.

    Examples
    --------
    >>> float(np.linalg.norm(polyhedron_point(n_features=7, radius=3.0)))
    3.0
    """
    direction = np.random.default_rng([seed, 0x706f696e]).standard_normal(n_features)
    return radius * direction / np.linalg.norm(direction)


__all__ = ["polyhedron_feasibility", "polyhedron_point"]
