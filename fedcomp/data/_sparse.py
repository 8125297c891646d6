"""Sparse client features: every client's rows as one sparse matrix, memory ∝ nonzeros.

The layout is :class:`~fedcomp.data.ClientData`'s padded layout, made sparse. The features
of ``n`` clients with up to ``m`` samples of ``d`` features are one CSR matrix with ``n·m``
rows — row ``i·m + j`` is sample ``j`` of client ``i``; a padding row is empty and costs one
index pointer — and ``n·d`` columns: feature ``k`` of client ``i`` is column ``i·d + k``.
That block-diagonal matrix ``A = diag(A_1, …, A_n)`` turns the batched margins and
gradients of a block of clients into one sparse product each: with the block's models
stacked as ``x = (x_1; …; x_B) ∈ R^{B·d}``

.. math::

    (A x)_{i m + j} = a_{ij}^\\top x_i, \\qquad (A^\\top c)_{i d + k} = \\sum_j c_{ij} a_{ijk},

which is what :func:`fedcomp.losses._linear._margins` and ``_back`` compute on dense
blocks. Each library's own sparse format runs the product: ``scipy.sparse`` CSR on NumPy,
torch's sparse CSR (its transpose a free CSC view, on CPU and GPU), and
``jax.experimental.sparse.BCOO`` on jax. The block of all clients is the stored matrix
itself (no copy); a contiguous block of clients ``a … b−1`` slices it and shifts its
columns by ``a·d``; any other rows (a sampled block, a minibatch) are gathered.

Index bookkeeping — the row pointers, which rows a block or minibatch takes — is host
NumPy, like every other index of a round; the values and column indices live in the
data's namespace and on its device.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from .._array import (
    Array,
    asarray_like,
    is_jax,
    is_numpy,
    is_torch,
    namespace,
    take_rows,
    to_numpy,
)
from .._extras import require
from ._checks import check_compressed, check_memory, first_non_finite, is_sparse_matrix

#: The largest ``min(samples, features)`` of a client whose Gram matrix
#: :meth:`SparseBlock.max_eigenvalues` forms densely; larger clients use Lanczos.
DENSE_GRAM_SIDE = 2048

#: Sparse features run on these namespaces (array-api-strict has no sparse arrays).
SPARSE_LIBRARIES = "NumPy (scipy.sparse), torch or jax"


def index_dtype(n_columns: int, nnz: int) -> Any:
    """int32 when every column index and row pointer fits, else int64 (as SciPy chooses)."""
    return np.int32 if max(n_columns, nnz) < 2**31 - 1 else np.int64


#: What a malformed sparse matrix of a user should be built with instead.
REBUILD = ("build it with scipy.sparse.csr_array((data, indices, indptr), shape=(rows, "
           "columns)) from valid parts, or from a dense array")


def checked_csr(matrix: Any, dtype: Any, where: str) -> Any:
    """``matrix`` (any ``scipy.sparse`` format) as a canonical CSR array of ``dtype``.

    Its index arrays are checked before SciPy converts or sorts it: SciPy's compiled
    conversions trust them, and a column index past the width aborts the interpreter
    ("double free or corruption") or lands in another client's block
    (:func:`~fedcomp.data._checks.check_compressed`; errors name ``where``). Unsorted
    and duplicate indices are valid: they are sorted and summed on a copy (the caller's
    matrix is never rewritten in place).
    """
    from scipy import sparse

    shape = tuple(int(s) for s in matrix.shape)
    if matrix.format in ("csr", "csc"):
        check_compressed(matrix.data, matrix.indices, matrix.indptr, shape, where, REBUILD,
                         ("row", "column") if matrix.format == "csr" else ("column", "row"))
    elif matrix.format == "bsr":  # the block pointers and block columns, on the block grid
        rows, columns = matrix.blocksize
        check_compressed(np.zeros(len(matrix.indices)), matrix.indices, matrix.indptr,
                         (shape[0] // rows, shape[1] // columns), where, REBUILD,
                         ("block row", "block column"))
    elif matrix.format == "coo":
        for axis, (name, index) in enumerate((("row", matrix.row), ("column", matrix.col))):
            index = np.asarray(index)
            outside = np.flatnonzero((index < 0) | (index >= shape[axis]))
            if outside.size:
                raise ValueError(f"{where}: {name} index {index[outside[0]]} of value "
                                 f"{int(outside[0])} is outside 0..{shape[axis] - 1} (the "
                                 f"matrix has {shape[axis]} {name}s); {REBUILD}")
    rows = sparse.csr_array(matrix, dtype=dtype)
    check_compressed(rows.data, rows.indices, rows.indptr, shape, where, REBUILD)
    if not rows.has_canonical_format:  # safe now: the structure is valid
        rows = rows.copy()
        rows.sum_duplicates()
    return rows


def _check_library(like: Array) -> None:
    xp = namespace(like)
    if not (is_numpy(xp) or is_torch(xp) or is_jax(like)):
        raise ValueError(f"sparse features run on {SPARSE_LIBRARIES}, not on "
                         f"{getattr(xp, '__name__', xp)}; densify small data first with "
                         "ClientData.from_lists([m.toarray() for m in matrices], ...)")


def gather_positions(indptr: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The nonzeros of ``rows`` of a CSR matrix: ``(positions, new_indptr)``.

    ``positions`` indexes the stored values (and column indices) row after row;
    ``new_indptr`` are the row pointers of the gathered rows.

    Examples
    --------
    >>> gather_positions(np.array([0, 2, 2, 5]), np.array([2, 0]))
    (array([2, 3, 4, 0, 1]), array([0, 3, 5]))
    """
    starts = indptr[rows]
    lengths = indptr[rows + 1] - starts
    new_indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=new_indptr[1:])
    positions = np.arange(new_indptr[-1], dtype=np.int64) + np.repeat(
        starts - new_indptr[:-1], lengths)
    return positions, new_indptr


@dataclass(frozen=True, eq=False)
class _BlockDiagonalCSR:
    """The CSR parts of a block-diagonal matrix of clients' rows (module docstring): what
    :class:`SparseBlock` and :class:`SparseFeatures` share."""

    values: Array
    columns: Array
    indptr: np.ndarray
    shape: tuple[int, int, int]

    @property
    def dtype(self) -> Any:
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return 3

    def client_matrix(self, i: int, n_rows: int | None = None) -> Any:
        """Client ``i``'s first ``n_rows`` rows (all ``m`` by default) as a SciPy CSR
        matrix ``(n_rows, d)``, its columns shifted back to ``0 … d−1`` (a host copy)."""
        from scipy import sparse

        _, m, d = self.shape
        n_rows = m if n_rows is None else n_rows
        lo, hi = int(self.indptr[i * m]), int(self.indptr[i * m + n_rows])
        return sparse.csr_array(
            (to_numpy(self.values[lo:hi]), to_numpy(self.columns[lo:hi]) - i * d,
             self.indptr[i * m:i * m + n_rows + 1] - lo), shape=(n_rows, d))


@dataclass(frozen=True, eq=False)
class SparseBlock(_BlockDiagonalCSR):
    """The sparse features of a block of B clients: a ``Batch``'s ``features``.

    ``values``, ``columns`` and ``indptr`` are the CSR parts of the block-diagonal
    ``(B·m, B·d)`` matrix of the module docstring (``columns`` already shifted to the
    block's own positions). :attr:`shape` is the dense block's ``(B, m, d)``.
    """

    @cached_property
    def matrix(self) -> Any:
        """The block-diagonal matrix in the values' own library (built once per block)."""
        b, m, d = self.shape
        size = (b * m, b * d)
        xp = namespace(self.values)
        if is_jax(self.values):
            jsparse = require("jax.experimental.sparse", "sparse features on jax")

            rows = np.repeat(np.arange(b * m, dtype=self.indptr.dtype), np.diff(self.indptr))
            index = xp.stack([asarray_like(rows, self.columns, dtype=self.columns.dtype),
                              self.columns], axis=1)
            return jsparse.BCOO((self.values, index), shape=size, indices_sorted=True,
                                unique_indices=True)
        if is_torch(xp):
            torch = require("torch", "sparse features on torch")

            pointers = asarray_like(self.indptr, self.columns, dtype=self.columns.dtype)
            with warnings.catch_warnings():  # "in beta state": said once per process, to us
                warnings.filterwarnings("ignore", "Sparse CSR tensor support is in beta")
                return torch.sparse_csr_tensor(pointers, self.columns, self.values, size=size,
                                               check_invariants=False)
        from scipy import sparse  # NumPy data: SciPy is a dependency

        return sparse.csr_array((self.values, self.columns,
                                 self.indptr.astype(self.columns.dtype)), shape=size)

    @cached_property
    def transposed(self) -> Any:
        """``Aᵀ`` (a view: CSC on SciPy and torch, swapped indices on BCOO)."""
        m = self.matrix
        return m.t() if is_torch(namespace(self.values)) else m.T

    # --- the products the losses need ---------------------------------------------------
    def margins(self, x: Array) -> Array:
        """``a_bjᵀ x_b`` for every sample: ``x`` of shape (B, d) → (B, m)."""
        xp = namespace(x)
        b, m, _ = self.shape
        return xp.reshape(self.matrix @ xp.reshape(x, (-1,)), (b, m))

    def back(self, coef: Array) -> Array:
        """``Σ_j coef_bj a_bj``: ``coef`` of shape (B, m) → (B, d)."""
        xp = namespace(coef)
        b, _, d = self.shape
        return xp.reshape(self.transposed @ xp.reshape(coef, (-1,)), (b, d))

    def logits(self, w: Array) -> Array:
        """``a_bjᵀ W_b``: ``w`` of shape (B, d, k) → (B, m, k)."""
        xp = namespace(w)
        b, m, d = self.shape
        k = w.shape[-1]
        return xp.reshape(self.matrix @ xp.reshape(w, (b * d, k)), (b, m, k))

    def back_matrix(self, coef: Array) -> Array:
        """``Σ_j a_bj coef_bjᵀ``: ``coef`` of shape (B, m, k) → (B, d, k)."""
        xp = namespace(coef)
        b, m, d = self.shape
        k = coef.shape[-1]
        return xp.reshape(self.transposed @ xp.reshape(coef, (b * m, k)), (b, d, k))

    # --- Gram matrices (set-up and exact local solvers), on the host ----------------------
    def client_matrices(self) -> list[Any]:
        """Each client's ``(m, d)`` rows as a SciPy CSR matrix (host copies)."""
        return [self.client_matrix(i) for i in range(self.shape[0])]

    def max_eigenvalues(self, weights: Array) -> Array:
        """``λ_max(Σ_j w_bj a_bj a_bjᵀ)`` of each client, shape (B,), in the weights' namespace.

        The Gram matrix of the smaller side (``S Sᵀ`` or ``Sᵀ S`` with ``S = diag(√w) A_b``,
        the same nonzero eigenvalues) is formed densely up to :data:`DENSE_GRAM_SIDE`;
        beyond it Lanczos (``scipy.sparse.linalg.eigsh``) finds the largest eigenvalue
        without forming either. Computed on the host: a set-up quantity, once per run.
        """
        from scipy.sparse.linalg import LinearOperator, eigsh

        w = to_numpy(weights)
        out = np.zeros(self.shape[0])
        for i, rows in enumerate(self.client_matrices()):
            scaled = rows.multiply(np.sqrt(w[i])[:, None]).tocsr()
            side = min(scaled.shape)
            if scaled.nnz == 0:
                continue
            if side <= DENSE_GRAM_SIDE:
                gram = scaled @ scaled.T if scaled.shape[0] <= scaled.shape[1] else \
                    scaled.T @ scaled
                out[i] = np.linalg.eigvalsh(gram.toarray())[-1]
            else:
                operator = LinearOperator((scaled.shape[1],) * 2, dtype=np.float64,
                                          matvec=lambda v, s=scaled: s.T @ (s @ v))
                out[i] = eigsh(operator, k=1, which="LA", tol=1e-12,
                               return_eigenvectors=False)[0]
        return asarray_like(out, weights)

    def weighted_gram(self, coef: Array) -> Array:
        """``Σ_j c_bj a_bj a_bjᵀ`` of each client, shape (B, d, d), dense.

        The exact local solvers' Hessians: dense by nature, so only for moderate ``d``
        (refused before allocating past the machine's memory). Formed on the host.
        """
        b, _, d = self.shape
        check_memory(b * d * d * 8, "the clients' dense Hessians",
                     "use local_solver='sgd' (gradients only) on high-dimensional data")
        c = to_numpy(coef)
        out = np.zeros((b, d, d))
        for i, rows in enumerate(self.client_matrices()):
            out[i] = (rows.T @ rows.multiply(c[i][:, None]).tocsr()).toarray()
        return asarray_like(out, coef)


@dataclass(frozen=True, eq=False)
class SparseFeatures(_BlockDiagonalCSR):
    """The features of every client as one block-diagonal CSR matrix (module docstring).

    Parameters
    ----------
    values : array, shape (nnz,)
        The nonzero values, in the data's namespace, dtype and device.
    columns : array, shape (nnz,)
        Their columns ``i·d + k`` (client ``i``, feature ``k``), an integer array beside
        ``values``.
    indptr : numpy int array, shape (n_clients·max_samples + 1,)
        Row pointers (host).
    shape : (n_clients, max_samples, n_features)
        The shape of the dense features these stand for.
    """

    _blocks: dict[tuple[int, int], SparseBlock] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        _check_library(self.values)
        object.__setattr__(self, "indptr", np.asarray(self.indptr, dtype=np.int64))
        object.__setattr__(self, "shape", tuple(int(s) for s in self.shape))
        n, m, _ = self.shape
        if self.indptr.shape != (n * m + 1,) or self.indptr[-1] != self.values.shape[0] \
                or self.columns.shape != self.values.shape:
            raise ValueError(f"SparseFeatures: {self.values.shape[0]} values, "
                             f"{self.columns.shape[0]} columns and {self.indptr.shape[0]} row "
                             f"pointers do not describe {n} clients x {m} rows")

    # --- construction --------------------------------------------------------------------
    @classmethod
    def from_matrices(cls, matrices: list[Any], max_samples: int | None = None,
                      dtype: Any = np.float64) -> SparseFeatures:
        """Stack per-client SciPy sparse matrices (``(n_i, d)``, any format) into one.

        Each matrix's structure is checked first (:func:`checked_csr`, errors naming the
        client); duplicate entries are summed and each row's columns sorted (canonical
        CSR), on copies.
        """
        rows = [checked_csr(a, dtype, f"the sparse features of client {i}")
                for i, a in enumerate(matrices)]
        widths = {a.shape[1] for a in rows}
        if len(widths) != 1:
            raise ValueError(f"sparse client features have different widths {sorted(widths)}; "
                             "read every file with the same n_features")
        d = widths.pop()
        counts = [a.shape[0] for a in rows]
        m = max(counts) if max_samples is None else max_samples
        n = len(rows)
        lengths = np.zeros((n, m), dtype=np.int64)
        for i, a in enumerate(rows):
            lengths[i, :counts[i]] = np.diff(a.indptr)
        indptr = np.zeros(n * m + 1, dtype=np.int64)
        np.cumsum(lengths.reshape(-1), out=indptr[1:])
        kind = index_dtype(n * d, int(indptr[-1]))
        values = np.concatenate([a.data for a in rows]) if n else np.zeros(0, dtype)
        columns = np.concatenate([a.indices.astype(kind) + kind(i * d)
                                  for i, a in enumerate(rows)])
        return cls(values.astype(dtype, copy=False), columns, indptr, (n, m, d))

    # --- shape information -------------------------------------------------------------
    @property
    def nnz(self) -> int:
        return int(self.values.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes of the values, column indices and row pointers."""
        item = to_numpy(self.values[:1]).dtype.itemsize
        index = to_numpy(self.columns[:1]).dtype.itemsize
        return self.nnz * (item + index) + self.indptr.nbytes

    def __repr__(self) -> str:
        n, m, d = self.shape
        return (f"SparseFeatures(shape=({n}, {m}, {d}), nnz={self.nnz}, "
                f"{self.nbytes / 2**20:.1f} MiB, dtype={self.dtype})")

    # --- blocks and minibatches ----------------------------------------------------------
    def block(self, clients: slice | np.ndarray | None) -> SparseBlock:
        """All rows of a block of clients (a contiguous slice is cached: every round of a
        run takes the same blocks)."""
        n, m, d = self.shape
        if clients is None:
            clients = slice(0, n)
        if isinstance(clients, slice):
            start, stop, step = clients.indices(n)
            if step == 1:
                key = (start, stop)
                if key not in self._blocks:
                    self._blocks[key] = self._contiguous(start, stop)
                return self._blocks[key]
            clients = np.arange(start, stop, step)
        clients = np.asarray(clients)
        rows = (clients[:, None] * m + np.arange(m)[None, :]).reshape(-1)
        return self._gathered(rows, clients, m)

    def _contiguous(self, start: int, stop: int) -> SparseBlock:
        n, m, d = self.shape
        lo, hi = int(self.indptr[start * m]), int(self.indptr[stop * m])
        columns = self.columns[lo:hi]
        if start:  # the stored matrix's own columns are right only for a block from 0
            columns = columns - start * d
        return SparseBlock(self.values[lo:hi], columns,
                           self.indptr[start * m:stop * m + 1] - lo, (stop - start, m, d))

    def _gathered(self, rows: np.ndarray, clients: np.ndarray, per_client: int) -> SparseBlock:
        """Rows ``rows`` (``per_client`` of each of ``clients``, in order) as a block."""
        d = self.shape[2]
        positions, indptr = gather_positions(self.indptr, rows)
        # row r of client clients[b] moves its columns from clients[b]·d to b·d
        shift = (np.arange(len(clients)) - clients) * d
        shift = np.repeat(np.repeat(shift, per_client), np.diff(indptr))
        columns = take_rows(self.columns, positions) + asarray_like(
            shift.astype(to_numpy(self.columns[:1]).dtype), self.columns)
        return SparseBlock(take_rows(self.values, positions), columns, indptr,
                           (len(clients), per_client, d))

    def subset(self, clients: np.ndarray) -> SparseFeatures:
        """The features of ``clients`` only, as features of their own (their block)."""
        block = self.block(np.asarray(clients))
        return SparseFeatures(block.values, block.columns, block.indptr, block.shape)

    def minibatch(self, clients: np.ndarray, sample_index: np.ndarray) -> SparseBlock:
        """Rows ``sample_index[b, j]`` of client ``clients[b]``: a ``(B, mb, d)`` block."""
        m = self.shape[1]
        clients = np.asarray(clients)
        rows = (clients[:, None] * m + np.asarray(sample_index)).reshape(-1)
        return self._gathered(rows, clients, sample_index.shape[1])

    # --- host views ------------------------------------------------------------------------
    def to_scipy(self) -> Any:
        """All ``n·m`` rows (padding included) as a SciPy CSR ``(n·m, d)`` (host copy)."""
        from scipy import sparse

        n, m, d = self.shape
        owner = np.repeat(np.arange(n * m) // m, np.diff(self.indptr))
        columns = to_numpy(self.columns) - (owner * d).astype(to_numpy(self.columns[:1]).dtype)
        return sparse.csr_array((to_numpy(self.values), columns, self.indptr),
                                shape=(n * m, d))

    @classmethod
    def from_scipy(cls, matrix: Any, n_clients: int, max_samples: int) -> SparseFeatures:
        """The inverse of :meth:`to_scipy`: a ``(n·m, d)`` CSR in the padded row layout."""
        from scipy import sparse

        matrix = sparse.csr_array(matrix)
        matrix.sum_duplicates()
        n, m, d = n_clients, max_samples, matrix.shape[1]
        indptr = np.asarray(matrix.indptr, dtype=np.int64)
        kind = index_dtype(n * d, int(indptr[-1]))
        owner = np.repeat(np.arange(n * m) // m, np.diff(indptr))
        columns = matrix.indices.astype(kind) + (owner * d).astype(kind)
        return cls(np.asarray(matrix.data), columns, indptr, (n, m, d))

    def first_non_finite(self) -> tuple[tuple[int, int, int] | None, float]:
        """``(client, sample, feature)`` of the first NaN or ±inf value (None when all are
        finite), and that value."""
        where = first_non_finite(self.values)
        if where is None:
            return None, 0.0
        position = where[0]
        n, m, d = self.shape
        row = int(np.searchsorted(self.indptr, position, side="right")) - 1
        column = int(to_numpy(self.columns[position:position + 1])[0])
        value = float(to_numpy(self.values[position:position + 1])[0])
        return (row // m, row % m, column - (row // m) * d), value

    def to(self, like: Array, dtype: Any = None) -> SparseFeatures:
        """The same features in the namespace and on the device of ``like``, values cast to
        ``dtype`` (or ``like.dtype``); the column indices keep their integer width."""
        _check_library(like)
        xp = namespace(like)
        columns = to_numpy(self.columns)
        kind = xp.int32 if columns.dtype == np.int32 else xp.int64
        return SparseFeatures(asarray_like(to_numpy(self.values), like, dtype=dtype or like.dtype),
                              asarray_like(columns, like, dtype=kind), self.indptr, self.shape)

    def fingerprint_arrays(self) -> list[np.ndarray]:
        """The host arrays that determine the features (for a problem's fingerprint)."""
        return [to_numpy(self.values), to_numpy(self.columns), self.indptr]


__all__ = ["SparseBlock", "SparseFeatures", "is_sparse_matrix"]
