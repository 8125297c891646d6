"""Communication graphs of decentralized optimization: symmetric doubly stochastic mixing.

A :class:`Topology` holds a gossip matrix ``U`` (Liang, Peng, Zhang, "Gradient Tracking for
High Dimensional Federated Optimization", 2023, Definition 1): symmetric, doubly stochastic,
nonnegative off the diagonal. Node ``m`` receives ``Σ_j u_jm v_j`` from its neighbours, i.e.
one gossip round maps the stacked node values ``v (n, ...)`` to ``Uᵀ v``. ``sigma2`` is
``σ₂ = ‖U − 11ᵀ/n‖₂``, the largest ``|λ|`` of ``U`` other than the Perron eigenvalue 1, and
``1 − σ₂`` the spectral gap (Assumption 5). Gossip contracts the disagreement by ``σ₂`` per
round, so a matrix with ``σ₂ ≥ 1`` (disconnected graph, periodic or divergent weights) is
rejected.

Graphs built from edges get Metropolis–Hastings weights ``u_ij = 1/(1 + max(deg_i, deg_j))``
on each edge and the rest on the diagonal; on the 16-node chain (the paper's default graph)
this gives ``σ₂ ≈ 0.987``, the value the paper reports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._array import Array, asarray_like, namespace, take_rows
from ._registry import Entry, Registry

#: Tolerance of the symmetry / stochasticity checks of a float64 user matrix (the floor of
#: :func:`matrix_tol`).
MATRIX_TOL = 1e-10

#: Rounding units per node a user matrix may be off by (:func:`matrix_tol`).
ROUNDING_UNITS = 200


def matrix_tol(mixing: Any, n: int) -> float:
    """The symmetry / stochasticity tolerance of a user matrix of ``n`` nodes.

    A row sum of ``n`` entries stored in a dtype of unit roundoff ``eps`` is exact only up
    to about ``n·eps`` (each stored entry is off by ``eps/2`` relative, each addition adds
    as much), so a matrix built in float32 (``eps ≈ 1.2e-7``) has rows summing to 1 within
    ``~1e-7``, not 1e-10. The tolerance is :data:`ROUNDING_UNITS` ``· n · eps`` of the
    matrix's own floating dtype (float64 for lists and integer arrays), and never below
    :data:`MATRIX_TOL`.

    Examples
    --------
    >>> matrix_tol([[1.0]], 1) == MATRIX_TOL
    True
    >>> 1e-5 < matrix_tol(np.eye(4, dtype=np.float32), 4) < 1e-3
    True
    """
    dtype = getattr(mixing, "dtype", None)
    try:
        eps = float(np.finfo(np.dtype(str(dtype).removeprefix("torch."))).eps)
    except (TypeError, ValueError):  # no dtype, an integer or another non-float one
        eps = float(np.finfo(np.float64).eps)
    return max(MATRIX_TOL, ROUNDING_UNITS * max(n, 1) * eps)


def _check_nodes(name: str, n: Any, minimum: int) -> int:
    if not (isinstance(n, int | np.integer) and not isinstance(n, bool) and n >= minimum):
        raise ValueError(f"{name}: n_nodes must be an integer >= {minimum} (got {n!r})")
    return int(n)


def metropolis(n_nodes: int, edges: Sequence[tuple[int, int]]) -> np.ndarray:
    """Metropolis–Hastings mixing matrix of an undirected graph.

    ``u_ij = 1/(1 + max(deg_i, deg_j))`` for every edge, ``u_ii = 1 − Σ_{j≠i} u_ij``:
    symmetric and doubly stochastic for any graph.

    Examples
    --------
    >>> metropolis(3, [(0, 1), (1, 2)]).round(3).tolist()
    [[0.667, 0.333, 0.0], [0.333, 0.333, 0.333], [0.0, 0.333, 0.667]]
    """
    adj = np.zeros((n_nodes, n_nodes), dtype=bool)
    for i, j in edges:
        if not (0 <= i < n_nodes and 0 <= j < n_nodes):  # a negative id would wrap around
            raise ValueError(f"metropolis: edge ({i}, {j}) names a node outside 0..{n_nodes - 1}")
        if i != j:
            adj[i, j] = adj[j, i] = True
    deg = adj.sum(axis=1)
    u = np.where(adj, 1.0 / (1.0 + np.maximum(deg[:, None], deg[None, :])), 0.0)
    u[np.diag_indices(n_nodes)] = 1.0 - u.sum(axis=1)
    return u


def _connected(adj: np.ndarray) -> bool:
    seen = np.zeros(len(adj), dtype=bool)
    stack = [0]
    seen[0] = True
    while stack:
        i = stack.pop()
        for j in np.flatnonzero(adj[i] & ~seen):
            seen[j] = True
            stack.append(int(j))
    return bool(seen.all())


def _sigma2(u: np.ndarray) -> float:
    """``σ₂ = ‖U − 11ᵀ/n‖₂`` of a symmetric doubly stochastic ``U``.

    ``U`` maps ``1`` to itself and ``1⊥`` to itself, so ``U − 11ᵀ/n`` has the eigenvalues of
    ``U`` on ``1⊥`` (and 0 on ``1``): σ₂ is the largest ``|λ|`` other than the Perron
    eigenvalue. Sorting ``|λ(U)|`` and taking the second would report 1 instead of 2 for
    eigenvalues ``{−2, 1}``.
    """
    n = len(u)
    return float(np.abs(np.linalg.eigvalsh(u - 1.0 / n)).max()) if n > 1 else 0.0


def _no_consensus(u: np.ndarray, sigma2: float) -> str:
    """Why a doubly stochastic ``U`` with ``σ₂ ≥ 1`` never reaches consensus, and the fix."""
    n = len(u)
    ev = np.linalg.eigvalsh(u - 1.0 / n)
    head = f"mixing matrix must have sigma2 = ||U - 11^T/n||_2 < 1 (got sigma2 = {sigma2:.6g})"
    off = u - np.diag(np.diag(u))
    if ev.max() >= -ev.min():  # a second eigenvalue 1: the graph falls apart
        if not _connected(off > 0):
            return (f"{head}: the graph of its positive off-diagonal entries is disconnected, "
                    "so gossip never mixes its components; connect them (add edges) and use "
                    "metropolis(n, edges)")
        return (f"{head}: its off-diagonal weights are too small to mix (spectral gap "
                f"{1.0 - ev.max():.3g}); use metropolis(n, edges)")
    return (f"{head}: it has the eigenvalue {ev.min():.6g} <= -1, so gossip oscillates "
            "(periodic, e.g. a bipartite graph with zero self-weights) or diverges (negative "
            "diagonal entries); use metropolis(n, edges) or the lazy weights (I + U)/2")


def check_mixing(mixing: Any) -> np.ndarray:
    """Validate a gossip matrix and return it as a float64 NumPy array.

    Raises ``ValueError`` naming the violated property (square, symmetric, doubly
    stochastic to :func:`matrix_tol` of the matrix's dtype, nonnegative off-diagonal,
    ``σ₂ = ‖U − 11ᵀ/n‖₂ < 1``) and the size of the violation. ``σ₂ < 1`` is what makes
    gossip reach consensus: it fails for a disconnected graph (a second eigenvalue 1), a
    periodic one (eigenvalue −1, e.g. ``[[0, 1], [1, 0]]``) and for
    negative diagonals with an eigenvalue below −1 (gossip diverges).

    Examples
    --------
    >>> check_mixing([[0.5, 0.5], [0.5, 0.5]]).tolist()
    [[0.5, 0.5], [0.5, 0.5]]
    >>> check_mixing(np.eye(2))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: mixing matrix must have sigma2 = ... < 1 (got sigma2 = 1): ... disconnected, ...
    """
    u = np.asarray(mixing, dtype=np.float64)
    if u.ndim != 2 or u.shape[0] != u.shape[1] or u.shape[0] < 1:
        raise ValueError(f"mixing matrix must be square n x n with n >= 1 (got shape {u.shape})")
    tol = matrix_tol(mixing, len(u))  # a float32 matrix is stochastic to float32's rounding
    if not np.isfinite(u).all():
        raise ValueError("mixing matrix has non-finite entries")
    asym = float(np.abs(u - u.T).max())
    if asym > tol:
        raise ValueError(f"mixing matrix must be symmetric (max |U - U^T| = {asym:.3g}); use "
                         "metropolis(n, edges) to build one from a graph")
    rows = float(np.abs(u.sum(axis=1) - 1.0).max())
    if rows > tol:
        raise ValueError(f"mixing matrix must be doubly stochastic (max |row sum - 1| = "
                         f"{rows:.3g}); put the missing mass on the diagonal")
    off = u - np.diag(np.diag(u))
    if off.min() < -tol:
        i, j = np.unravel_index(np.argmin(off), off.shape)
        raise ValueError(f"mixing matrix needs nonnegative off-diagonal entries (U[{i},{j}] = "
                         f"{off[i, j]:.3g})")
    sigma2 = _sigma2(u)
    if sigma2 >= 1.0 - tol:  # the tolerance absorbs eigvalsh rounding of an exact 1
        raise ValueError(_no_consensus(u, sigma2))
    return u


@dataclass(frozen=True, eq=False)
class Topology:
    """A communication graph with its gossip matrix.

    Parameters
    ----------
    mixing : array, shape (n, n)
        Symmetric, doubly stochastic, nonnegative off the diagonal, with ``σ₂ < 1``
        (validated by :func:`check_mixing`).
    name : str, default "custom"

    Attributes
    ----------
    n_nodes : int
    sigma2 : float
        ``σ₂ = ‖U − 11ᵀ/n‖₂``: the largest ``|λ|`` of ``U`` other than the Perron
        eigenvalue 1, in ``[0, 1)``.
    spectral_gap : float
        ``1 − σ₂``.

    Examples
    --------
    >>> t = chain(16)
    >>> round(t.sigma2, 3), t.n_nodes
    (0.987, 16)
    >>> round(complete(4).spectral_gap, 12)
    1.0
    """

    mixing: Any
    name: str = "custom"
    _neighbours: tuple[np.ndarray, np.ndarray] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        u = check_mixing(self.mixing)
        object.__setattr__(self, "mixing", u)
        # Padded neighbour table (node m: its in-neighbours j and weights u_jm, itself
        # first): gossip as max_degree+1 row gathers, which is what makes mixing cost
        # O(n·deg·d) instead of O(n²·d) on sparse graphs and stays in the Array API.
        n = len(u)
        lists = [[m] + [int(j) for j in np.flatnonzero(u[:, m]) if j != m] for m in range(n)]
        width = max(len(x) for x in lists)
        index = np.zeros((n, width), dtype=np.int64)
        weight = np.zeros((n, width))
        for m, nbrs in enumerate(lists):
            index[m, : len(nbrs)] = nbrs
            index[m, len(nbrs):] = m
            weight[m, : len(nbrs)] = u[nbrs, m]
        object.__setattr__(self, "_neighbours", (index, weight))

    @property
    def n_nodes(self) -> int:
        return int(self.mixing.shape[0])

    @property
    def sigma2(self) -> float:
        return _sigma2(self.mixing)

    @property
    def spectral_gap(self) -> float:
        return 1.0 - self.sigma2

    @property
    def max_degree(self) -> int:
        """Largest number of neighbours of a node (excluding itself)."""
        return int(self._neighbours[0].shape[1] - 1)

    @property
    def n_edges(self) -> int:
        """Directed edges ``j → m`` with ``u_jm > 0``, ``j ≠ m`` (messages per gossip)."""
        off = self.mixing - np.diag(np.diag(self.mixing))
        return int(np.count_nonzero(off > 0))

    def mixer(self, like: Array, sparse: Any = "auto") -> Callable[[Array], Array]:
        """A function ``v (n, ...) -> Uᵀ v`` in the namespace, dtype and device of ``like``.

        ``sparse="auto"`` gathers neighbours when the graph is sparse (``max_degree + 1``
        below ``n/2``) and uses one dense matrix product otherwise; ``True``/``False``
        force either. Both give the same result up to float rounding.
        """
        xp = namespace(like)
        n = self.n_nodes
        use_sparse = (self.max_degree + 1) * 2 < n if sparse == "auto" else bool(sparse)
        if use_sparse:
            index, weight = self._neighbours
            columns = [(index[:, k], asarray_like(weight[:, k], like))
                       for k in range(index.shape[1])]

            def mix_sparse(v: Array) -> Array:
                shape = (n,) + (1,) * (v.ndim - 1)
                out = xp.reshape(columns[0][1], shape) * v  # self term: index[:, 0] = m
                for idx, w in columns[1:]:
                    out = out + xp.reshape(w, shape) * take_rows(v, idx)
                return out

            return mix_sparse
        ut = asarray_like(self.mixing.T.copy(), like)

        def mix_dense(v: Array) -> Array:
            flat = xp.reshape(v, (n, -1))
            return xp.reshape(xp.matmul(ut, flat), v.shape)

        return mix_dense


def complete(n_nodes: int) -> Topology:
    """Complete graph with ``U = 11ᵀ/n`` (the server case: one gossip = exact average)."""
    n = _check_nodes("complete", n_nodes, 1)
    return Topology(np.full((n, n), 1.0 / n), "complete")


def chain(n_nodes: int) -> Topology:
    """Path graph ``0 − 1 − … − (n−1)`` with Metropolis weights (the paper's default)."""
    n = _check_nodes("chain", n_nodes, 1)
    return Topology(metropolis(n, [(i, i + 1) for i in range(n - 1)]), "chain")


def ring(n_nodes: int) -> Topology:
    """Cycle graph with Metropolis weights (1/3 to each neighbour and to itself)."""
    n = _check_nodes("ring", n_nodes, 3)
    return Topology(metropolis(n, [(i, (i + 1) % n) for i in range(n)]), "ring")


def grid(rows: int, cols: int) -> Topology:
    """2-D grid (4-neighbourhood, no wrap-around) with Metropolis weights; node = r·cols + c."""
    rows = _check_nodes("grid", rows, 1)
    cols = _check_nodes("grid", cols, 1)
    edges = [(r * cols + c, r * cols + c + 1) for r in range(rows) for c in range(cols - 1)]
    edges += [(r * cols + c, (r + 1) * cols + c) for r in range(rows - 1) for c in range(cols)]
    return Topology(metropolis(rows * cols, edges), "grid")


def _random_graph(name: str, n: int, adj: np.ndarray, fix: str) -> Topology:
    if not _connected(adj):
        raise ValueError(f"{name}: the sampled graph on {n} nodes is disconnected, so gossip "
                         f"cannot reach consensus; {fix}")
    i, j = np.nonzero(np.triu(adj, 1))
    return Topology(metropolis(n, list(zip(i.tolist(), j.tolist(), strict=True))), name)


def erdos_renyi(n_nodes: int, edge_prob: float = 0.3, seed: int = 0) -> Topology:
    """Erdős–Rényi graph ``G(n, edge_prob)`` with Metropolis weights (must be connected).

    Parameters
    ----------
    n_nodes : int
    edge_prob : float, default 0.3
        Probability of each edge, in ``(0, 1]``.
    seed : int, default 0
        Seeds the graph (with ``n_nodes``); a disconnected draw raises naming the fix.

    Returns
    -------
    Topology

    Examples
    --------
    >>> erdos_renyi(10, edge_prob=0.5, seed=1).n_nodes
    10
    """
    n = _check_nodes("erdos_renyi", n_nodes, 1)
    if not 0 < edge_prob <= 1:
        raise ValueError(f"erdos_renyi: edge_prob must be in (0, 1] (got {edge_prob!r})")
    rng = np.random.default_rng([seed, n])
    upper = np.triu(rng.random((n, n)) < edge_prob, 1)
    return _random_graph("erdos_renyi", n, upper | upper.T,
                         "raise edge_prob or try another seed")


def random_geometric(n_nodes: int, radius: float = 0.4, seed: int = 0) -> Topology:
    """Random geometric graph (uniform points in the unit square, edges within ``radius``).

    Parameters
    ----------
    n_nodes : int
    radius : float, default 0.4
        Points closer than this are neighbours.
    seed : int, default 0
        Seeds the points (with ``n_nodes``); a disconnected draw raises naming the fix.

    Returns
    -------
    Topology

    Examples
    --------
    >>> random_geometric(10, radius=0.6, seed=1).n_nodes
    10
    """
    n = _check_nodes("random_geometric", n_nodes, 1)
    if not radius > 0:
        raise ValueError(f"random_geometric: radius must be positive (got {radius!r})")
    pts = np.random.default_rng([seed, n]).random((n, 2))
    dist = np.linalg.norm(pts[:, None, :] - pts[None, :, :], axis=-1)
    adj = (dist <= radius) & ~np.eye(n, dtype=bool)
    return _random_graph("random_geometric", n, adj, "raise radius or try another seed")


def grid_of(n_nodes: int, rows: int | None = None) -> Topology:
    """The 2-D grid of ``n_nodes`` nodes in ``rows`` rows: :func:`grid` by node count.

    Parameters
    ----------
    n_nodes : int
        Number of nodes; ``rows`` must divide it.
    rows : int, optional
        Number of rows (default: the nearest integer to ``sqrt(n_nodes)``).

    Returns
    -------
    Topology

    Examples
    --------
    >>> grid_of(6, rows=2).n_nodes
    6
    """
    rows = int(round(np.sqrt(n_nodes))) if rows is None else int(rows)
    if rows < 1 or n_nodes % rows:
        raise ValueError(f"grid: rows={rows} does not divide n_nodes={n_nodes}")
    return grid(rows, n_nodes // rows)


def from_mixing(n_nodes: int, mixing: Any = None) -> Topology:
    """The topology of a given gossip matrix, checked against the number of nodes.

    Parameters
    ----------
    n_nodes : int
        Number of nodes the caller expects (the problem's clients).
    mixing : array, shape (n_nodes, n_nodes)
        Symmetric, doubly stochastic, nonnegative off the diagonal, with ``σ₂ < 1``
        (:func:`check_mixing`). Required: leaving it out raises naming the fix.

    Returns
    -------
    Topology

    Examples
    --------
    >>> from_mixing(2, [[0.5, 0.5], [0.5, 0.5]]).sigma2
    0.0
    """
    if mixing is None:
        raise ValueError(f"topology 'matrix' needs mixing=<{n_nodes} x {n_nodes} symmetric "
                         "doubly stochastic matrix> (in a config: [topology] mixing = "
                         "[[...], ...]); or use a named graph such as 'chain'")
    topo = Topology(mixing, "matrix")
    if topo.n_nodes != n_nodes:
        raise ValueError(f"the mixing matrix has {topo.n_nodes} nodes but the problem has "
                         f"{n_nodes} clients")
    return topo


#: Topology builders by configuration name: ``TOPOLOGIES[name](n_nodes, **params)``, with
#: one line each for ``fedcomp list``; the problem supplies ``n_nodes`` (its clients).
TOPOLOGIES: Registry[Entry] = Registry("topology", [
    Entry("complete", complete, "complete graph, U = 11^T/n: one gossip is the exact average"),
    Entry("chain", chain, "path graph with Metropolis weights (Liang et al.'s default graph)"),
    Entry("ring", ring, "cycle graph with Metropolis weights (1/3 to each neighbour and itself)"),
    Entry("grid", grid_of, "2-D grid, 4-neighbourhood, rows x (n_nodes / rows) nodes, "
                           "Metropolis weights"),
    Entry("erdos_renyi", erdos_renyi,
          "Erdos-Renyi G(n, edge_prob) with Metropolis weights; must be connected"),
    Entry("random_geometric", random_geometric,
          "random points in the unit square, edges within radius, Metropolis weights"),
    Entry("matrix", from_mixing, "a given symmetric doubly stochastic mixing matrix (mixing)"),
], supplied=("n_nodes",))


def make_topology(name: str, n_nodes: int, **params: Any) -> Topology:
    """Build the topology registered as ``name`` on ``n_nodes`` nodes.

    Parameters
    ----------
    name : str
        A name of :data:`TOPOLOGIES` (``"chain"``, ``"grid"`` (takes ``rows``), ``"matrix"``
        (takes ``mixing``), ...).
    n_nodes : int
    **params
        The builder's other parameters.

    Returns
    -------
    Topology

    Raises
    ------
    ValueError
        For an unknown name or parameter (:class:`~fedcomp._registry.UnknownNameError`,
        :class:`~fedcomp._registry.UnknownParameterError`, listing the valid ones) or an
        invalid graph.

    Examples
    --------
    >>> make_topology("ring", 5).name
    'ring'
    """
    topology: Topology = TOPOLOGIES.make(name, n_nodes=n_nodes, **params)
    return topology


__all__ = ["TOPOLOGIES", "Topology", "chain", "check_mixing", "complete", "erdos_renyi",
           "from_mixing", "grid", "grid_of", "make_topology", "metropolis", "random_geometric",
           "ring"]
