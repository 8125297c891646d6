"""``ClientData``: every client's samples, padded to a common length and stacked.

Client axis first: ``features`` has shape ``(n_clients, max_samples, *feature_shape)`` and
``targets`` ``(n_clients, max_samples)``. Clients with fewer samples are padded with zeros
and masked out through ``sample_weights`` (``1/n_i`` on a client's real rows, ``0`` on
padding), so a loss written as ``Σ_j w_ij ℓ(x_i; a_ij, y_ij)`` is the mean over client i's
own data whatever the padding — and minibatches use the very same code path.

An optional ``holdout`` carries pooled test samples that belong to no client (the test split
of an image data set), converted along with the client data by :meth:`ClientData.to`.

Sparse features (``scipy.sparse`` matrices given to :meth:`ClientData.from_lists`) are held
as :class:`~fedcomp.data._sparse.SparseFeatures` — the same padded layout with memory
proportional to the nonzeros — and a batch's ``features`` are then a
:class:`~fedcomp.data._sparse.SparseBlock`, whose sparse products the linear-model losses
use. Minibatches, client blocks, saving and moving between libraries work the same way.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like, namespace, take_rows
from ._checks import ARCHIVE_DAMAGE, check_compressed, check_memory, checked_lists, first_non_finite
from ._sparse import SparseFeatures, is_sparse_matrix

#: The file :meth:`ClientData.save` describes its arrays in, and its ``format`` tag.
METADATA_FILE = "client_data.json"
FORMAT, FORMAT_VERSION = "fedcomp.ClientData", 1
#: The arrays a saved directory may hold (``<name>.npy``); the holdout's are optional.
ARRAY_NAMES = ("features", "targets", "counts", "holdout_features", "holdout_targets",
               "sample_weight")
RESAVE = "write it again with ClientData.save(directory)"


class Batch(NamedTuple):
    """Samples of a block of clients: what a loss consumes.

    Attributes
    ----------
    features : array, shape (B, m, *feature_shape)
    targets : array, shape (B, m)
        Labels (±1 for logistic, class ids for softmax) or responses.
    weights : array, shape (B, m)
        Per-sample weights; each row sums to 1 (a mean), padding rows have weight 0.
    """

    features: Array
    targets: Array
    weights: Array


@dataclass(frozen=True, eq=False)
class ClientData:
    """Padded, masked, stacked data of all clients.

    Parameters
    ----------
    features : array, shape (n_clients, max_samples, *feature_shape), or SparseFeatures
        Dense arrays in any Array API namespace, or sparse features of shape
        ``(n_clients, max_samples, n_features)`` (build them with :meth:`from_lists` from
        ``scipy.sparse`` matrices).
    targets : array, shape (n_clients, max_samples)
    counts : numpy int array, shape (n_clients,)
        Number of real samples of each client (``1 <= counts[i] <= max_samples``).
    sample_weight : numpy array, shape (n_clients, max_samples), optional
        Nonnegative weights of the samples (0 on padding; each client's sum positive): a
        client's loss is then the weighted mean ``Σ_j s_ij ℓ_ij / Σ_j s_ij`` and, with
        ``weighting="samples"``, the client weighs ``Σ_j s_ij`` (scikit-learn's
        ``sample_weight``). ``None``: every sample the same. Minibatches stay uniform draws,
        each drawn sample weighted ``n_i s_ij / (m Σ_j s_ij)`` (unbiased). In-process
        simulation only (Ray actors and Flower nodes refuse it).
    holdout : (features, targets) or None, default None
        Pooled held-out samples of no client: features of shape
        ``(n_test, *feature_shape)`` and targets ``(n_test,)``, in the namespace and
        dtype conventions of ``features`` / ``targets`` (float features; class ids stay
        integer). Evaluation data only: losses, oracles and padding never see it.
    backend : BackendEntry or None, default None
        The backend (an entry of :data:`fedcomp.runtime._backends.BACKENDS`) the arrays were
        moved to, recorded by :meth:`to`: the runtime reads what the backend does (its
        engine, its blocks) from it. ``None``: data built or moved by hand, whose backend
        the runtime reads from the arrays.

    Examples
    --------
    >>> import numpy as np
    >>> data = ClientData.from_lists([np.ones((2, 3)), np.ones((1, 3))], [np.ones(2), -np.ones(1)])
    >>> data.features.shape, data.counts.tolist()
    ((2, 2, 3), [2, 1])
    >>> data.with_holdout(np.zeros((4, 3)), -np.ones(4)).holdout[0].shape
    (4, 3)
    """

    features: Array
    targets: Array
    counts: np.ndarray
    holdout: tuple[Array, Array] | None = None
    sample_weight: np.ndarray | None = None
    backend: Any = None

    def __post_init__(self) -> None:
        counts = np.asarray(self.counts, dtype=np.int64)
        object.__setattr__(self, "counts", counts)
        n, m = self.features.shape[:2]
        if self.targets.shape[:2] != (n, m):
            raise ValueError(f"ClientData: targets shape {tuple(self.targets.shape)} does not "
                             f"match features {tuple(self.features.shape)} on "
                             "(n_clients, max_samples)")
        if counts.shape != (n,):
            raise ValueError(f"ClientData: counts must have shape ({n},), got {counts.shape}")
        if n and (counts.min() < 1 or counts.max() > m):
            raise ValueError(f"ClientData: every client needs 1..{m} samples, got counts in "
                             f"[{counts.min()}, {counts.max()}]; drop empty clients first")
        self._check_finite()
        if self.holdout is not None:
            self._check_holdout(self.holdout)
        if self.sample_weight is not None:
            object.__setattr__(self, "sample_weight", self._checked_weights(self.sample_weight))

    def _checked_weights(self, weights: Any) -> np.ndarray:
        w = np.asarray(weights, dtype=np.float64)
        n, m = self.features.shape[:2]
        if w.shape != (n, m):
            raise ValueError(f"ClientData: sample_weight must have shape ({n}, {m}) (clients, "
                             f"max_samples), got {w.shape}")
        real = np.arange(m)[None, :] < self.counts[:, None]
        if not np.all(np.isfinite(w)) or (w < 0).any() or (w[~real] != 0).any():
            raise ValueError("ClientData: sample_weight must be finite and >= 0, and 0 on "
                             "the padding rows")
        empty = np.flatnonzero(w.sum(axis=1) <= 0)
        if empty.size:
            raise ValueError(f"ClientData: the samples of clients {empty.tolist()} all weigh "
                             "0; drop those clients or give them a positive weight")
        return w

    def sample_totals(self) -> np.ndarray:
        """What each client's samples weigh together: ``counts``, or the sums of the
        ``sample_weight`` rows (the ``weighting="samples"`` client weights, normalised)."""
        if self.sample_weight is None:
            return self.counts.astype(np.float64)
        return self.sample_weight.sum(axis=1)

    def __repr__(self) -> str:
        """One line: the shapes, not the arrays (a notebook prints it)."""
        holdout = "" if self.holdout is None else f", holdout={int(self.holdout[0].shape[0])}"
        return (f"ClientData(n_clients={self.n_clients}, samples={int(self.counts.sum())}, "
                f"feature_shape={self.feature_shape}, dtype={self.features.dtype}"
                f"{holdout})")

    def _check_finite(self) -> None:
        """NaN or inf in the data would surface far away ("Eigenvalues did not converge",
        "diverged ... try a smaller step"): name the client, sample and feature instead."""
        value: Any = None
        if self.sparse:
            where, value = self.features.first_non_finite()
        else:
            where = first_non_finite(self.features)
            value = None if where is None else float(self.features[where])
        if where is not None:
            client, sample, *feature = where
            index = feature[0] if len(feature) == 1 else tuple(feature)
            raise ValueError(f"ClientData: feature {index} of sample {sample} of client "
                             f"{client} is {value} (data must be "
                             "finite); fix or drop that sample in the data file")
        where = first_non_finite(self.targets)
        if where is not None:
            raise ValueError(f"ClientData: the target of sample {where[1]} of client "
                             f"{where[0]} is {float(self.targets[where])} (data must be "
                             "finite); fix or drop that sample in the data file")

    def _check_holdout(self, holdout: Any) -> None:
        if not (isinstance(holdout, tuple) and len(holdout) == 2):
            raise ValueError("ClientData: holdout must be a (features, targets) tuple or None "
                             f"(got {type(holdout).__name__})")
        feats, targs = holdout
        if tuple(feats.shape[1:]) != self.feature_shape or \
                tuple(targs.shape) != tuple(feats.shape[:1]):
            raise ValueError(f"ClientData: holdout features {tuple(feats.shape)} and targets "
                             f"{tuple(targs.shape)} must have shapes (n_test, "
                             f"*{self.feature_shape}) and (n_test,)")
        for name, values in (("features", feats), ("targets", targs)):
            # sparse: the stored values (a NaN of the holdout would make every test metric NaN)
            where = first_non_finite(values.data if is_sparse_matrix(values) else values)
            if where is not None:
                sample = "" if is_sparse_matrix(values) else f" of test sample {where[0]}"
                raise ValueError(f"ClientData: the holdout {name} hold a NaN or infinite value"
                                 f"{sample} (data must be finite); fix or drop that sample")

    def with_holdout(self, features: Any, targets: Any) -> ClientData:
        """The same client data with pooled held-out samples attached.

        ``features`` (shape ``(n_test, *feature_shape)``) take the dtype and namespace of
        the client features; float targets take the feature dtype, integer targets stay
        integer. A ``scipy.sparse`` holdout stays a SciPy CSR matrix on the host (it is
        evaluation data: the metrics read it there).
        """
        return replace(self, holdout=self._convert(features, targets, self.like,
                                                   self.dtype))

    @classmethod
    def from_lists(cls, features: list[Any], targets: list[Any], dtype: Any = np.float64,
                   sample_weight: list[Any] | None = None) -> ClientData:
        """Stack per-client NumPy arrays (any lengths) into padded arrays.

        ``features[i]`` has shape ``(n_i, *feature_shape)``, ``targets[i]`` and
        ``sample_weight[i]`` (optional) ``(n_i,)``. When every ``features[i]`` is a
        ``scipy.sparse`` matrix ``(n_i, d)`` the data stay sparse
        (:class:`~fedcomp.data._sparse.SparseFeatures`: memory proportional to the
        nonzeros); sparse and dense clients cannot be mixed.

        Examples
        --------
        >>> from scipy import sparse
        >>> data = ClientData.from_lists([sparse.eye(2, 5, format="csr"),
        ...                               sparse.eye(3, 5, format="csr")],
        ...                              [np.ones(2), np.ones(3)])
        >>> data.sparse, data.features.shape, data.features.nnz
        (True, (2, 3, 5), 5)
        """
        features, targets, sample_weight = checked_lists(features, targets, sample_weight)
        counts = np.array([f.shape[0] for f in features], dtype=np.int64)
        m = int(counts.max())
        feats: Any
        if is_sparse_matrix(features[0]):
            feats = SparseFeatures.from_matrices(features, m, dtype)
        else:
            shape = (len(features), m, *features[0].shape[1:])
            check_memory(int(np.prod(shape, dtype=np.float64)) * np.dtype(dtype).itemsize,
                         f"ClientData.from_lists: the padded features, {len(features)} "
                         f"clients x {m} samples (client {int(counts.argmax())}'s, every "
                         f"client padded to it) x {shape[2:]} of {np.dtype(dtype).name},",
                         "balance the clients' sample counts, use fewer features, or give "
                         "scipy.sparse matrices for sparse data")
            feats = np.zeros(shape, dtype=dtype)
        # every client's dtype counts: client 0's int labels would truncate another's 0.7
        targs = np.zeros((len(features), m), dtype=np.result_type(*(t.dtype for t in targets)))
        for i, (f, t) in enumerate(zip(features, targets, strict=True)):
            if not isinstance(feats, SparseFeatures):
                feats[i, : counts[i]] = f
            targs[i, : counts[i]] = t
        if np.issubdtype(targs.dtype, np.floating):
            targs = targs.astype(dtype)
        weights = None
        if sample_weight is not None:
            weights = np.zeros((len(features), m))
            for i, w in enumerate(sample_weight):
                weights[i, : counts[i]] = w
        return cls(feats, targs, counts, sample_weight=weights)

    # --- on disk -------------------------------------------------------------------------
    def save(self, directory: str | os.PathLike[str]) -> Path:
        """Write the data to ``directory`` as plain ``.npy`` files, for :meth:`load`.

        One file per array — ``features.npy``, ``targets.npy``, ``counts.npy`` and, with a
        holdout, ``holdout_features.npy`` and ``holdout_targets.npy`` — as NumPy arrays
        (torch or jax data are copied to the host); sparse features (and a sparse holdout)
        as ``features.npz``, the ``(n_clients·max_samples, n_features)`` CSR matrix of
        ``scipy.sparse.save_npz`` (row ``i·max_samples + j`` is sample ``j`` of client
        ``i``). Then ``client_data.json`` naming the
        files with their shapes and dtypes. The JSON is written last, so an interrupted
        save is refused by :meth:`load` instead of read half-written. Files of an earlier
        save are replaced (each through a temporary name: a reader that has the old file
        memory-mapped keeps reading the old data). Returns the directory.

        Examples
        --------
        >>> import tempfile
        >>> data = ClientData.from_lists([np.ones((2, 3)), np.ones((1, 3))],
        ...                              [np.ones(2), -np.ones(1)])
        >>> with tempfile.TemporaryDirectory() as tmp:
        ...     back = ClientData.load(data.save(tmp))
        ...     type(back.features).__name__, back.counts.tolist()
        ('memmap', [2, 1])
        """
        from .._array import to_numpy

        root = Path(directory)
        root.mkdir(parents=True, exist_ok=True)
        (root / METADATA_FILE).unlink(missing_ok=True)  # incomplete until written again
        arrays = {"features": self.features, "targets": self.targets, "counts": self.counts}
        if self.sample_weight is not None:
            arrays["sample_weight"] = self.sample_weight
        if self.holdout is not None:
            arrays.update(holdout_features=self.holdout[0], holdout_targets=self.holdout[1])
        described = {}
        for name, values in arrays.items():
            if isinstance(values, SparseFeatures) or is_sparse_matrix(values):
                described[name] = _save_sparse(root, name, values)
                continue
            values = to_numpy(values)
            partial = root / f"{name}.partial.npy"
            np.save(partial, values, allow_pickle=False)
            os.replace(partial, root / f"{name}.npy")
            described[name] = {"shape": list(values.shape), "dtype": values.dtype.str}
        for stale in ARRAY_NAMES:  # what an earlier save wrote and this one did not
            for suffix in (".npy", ".npz"):
                if stale not in arrays or suffix != described[stale].get("file", ".npy"):
                    (root / f"{stale}{suffix}").unlink(missing_ok=True)
        (root / METADATA_FILE).write_text(json.dumps(
            {"format": FORMAT, "version": FORMAT_VERSION, "arrays": described}, indent=1))
        return root

    @classmethod
    def load(cls, directory: str | os.PathLike[str], mmap: bool = True) -> ClientData:
        """The data :meth:`save` wrote to ``directory``.

        With ``mmap=True`` (the default) features, targets and the holdout are read-only
        memory maps of the files (``np.load(..., mmap_mode="r")``): the operating system
        pages in what is read and may drop it again, so data larger than memory load
        instantly. The checks of the constructor stream through them (the finiteness check
        reads every value once, in blocks, without copying the arrays into memory).
        ``counts`` and sparse features are always read into memory. With ``mmap=False``
        every array is read into memory.

        Raises ``FileNotFoundError`` for a missing directory or file and ``ValueError`` for
        a file that is not what ``client_data.json`` says, each naming the path.
        """
        root = Path(directory)
        described = _read_metadata(root)
        arrays = {name: _load_sparse(root / f"{name}.npz", spec) if "sparse" in spec else
                  _load_array(root / f"{name}.npy", spec,
                              mmap and name not in ("counts", "sample_weight"))
                  for name, spec in described.items()}
        if described["features"].get("sparse"):
            n, m = described["features"]["sparse"]
            arrays["features"] = SparseFeatures.from_scipy(arrays["features"], n, m)
        holdout = None
        if "holdout_features" in arrays:
            holdout = (arrays["holdout_features"], arrays["holdout_targets"])
        try:
            return cls(arrays["features"], arrays["targets"], arrays["counts"], holdout,
                       arrays.get("sample_weight"))
        except ValueError as exc:  # files that disagree with each other: name them
            raise ValueError(f"ClientData.load: {root}: {exc}") from None

    # --- shape information -------------------------------------------------------------
    @property
    def n_clients(self) -> int:
        return int(self.features.shape[0])

    @property
    def max_samples(self) -> int:
        return int(self.features.shape[1])

    @property
    def feature_shape(self) -> tuple[int, ...]:
        return tuple(int(s) for s in self.features.shape[2:])

    @property
    def n_samples(self) -> int:
        return int(self.counts.sum())

    @property
    def dtype(self) -> Any:
        return self.features.dtype

    @property
    def sparse(self) -> bool:
        """Whether the features are sparse (:class:`~fedcomp.data._sparse.SparseFeatures`)."""
        return isinstance(self.features, SparseFeatures)

    @property
    def like(self) -> Array:
        """An array of the data's namespace, dtype and device: what models and every array
        made for these data are created like (the features, or sparse features' values)."""
        return self.features.values if self.sparse else self.features

    # --- conversion --------------------------------------------------------------------
    def to(self, like: Any, dtype: Any = None) -> ClientData:
        """The same data in the namespace/device of ``like`` (float features cast to ``dtype``
        or to ``like.dtype``); integer targets stay integer. The holdout is converted too.

        ``like`` is an array, or a backend (an entry of
        :data:`fedcomp.runtime._backends.BACKENDS`, or a resolved one; anything with a
        ``like()`` method): the data then take its arrays and record its entry as their
        :attr:`backend`."""
        backend = None
        if callable(getattr(like, "like", None)):  # a backend: its empty array, its entry
            backend, like = getattr(like, "entry", like), like.like()
        feats, targs = self._convert(self.features, self.targets, like, dtype)
        holdout = None if self.holdout is None else self._convert(*self.holdout, like, dtype)
        return ClientData(feats, targs, self.counts, holdout, self.sample_weight, backend)

    @staticmethod
    def _convert(features: Array, targets: Array, like: Array, dtype: Any
                 ) -> tuple[Array, Array]:
        from .._array import to_numpy

        xp = namespace(like)
        feats: Any
        if isinstance(features, SparseFeatures):
            feats = features.to(like, dtype)
        elif is_sparse_matrix(features):  # a holdout: evaluation data, kept on the host
            from scipy import sparse

            host_dtype = to_numpy(asarray_like(np.zeros(1), like, dtype=dtype or like.dtype))
            feats = sparse.csr_array(features, dtype=host_dtype.dtype)
        else:
            feats = asarray_like(to_numpy(features), like, dtype=dtype or like.dtype)
        t = to_numpy(targets)
        float_targets = np.issubdtype(t.dtype, np.floating)
        targs = asarray_like(t, like, dtype=(dtype or like.dtype) if float_targets else xp.int64)
        return feats, targs

    def sample_weights(self, clients: slice | np.ndarray | None = None) -> Array:
        """``(B, max_samples)`` weights, each client's summing to 1: ``1/n_i`` on real rows
        (or the client's ``sample_weight`` row, normalised), 0 on padding. Rows of one
        array made once on the data's device (never to be written to)."""
        weights = self._weights_on_device
        if clients is None:
            return weights
        if isinstance(clients, slice):
            return weights[clients, ...]
        return take_rows(weights, clients)

    @cached_property
    def _weights_on_device(self) -> Array:
        """Every client's sample weights, made on the host and moved to the data's device
        once per ``ClientData``: made at every call, a GPU round copied ``n_clients x
        max_samples`` floats from the host at each of its full batches (ZA1 at 10^5 x 100
        x 20 on an H200: 20 ms a round instead of the hand-written round's 9). (A
        ``ClientData`` holds concrete arrays: its checks read them, so jax never traces
        one, and what is kept is never a tracer.)"""
        if self.sample_weight is not None:
            rows = self.sample_weight
            host = rows / rows.sum(axis=1, keepdims=True)
        else:
            counts = self.counts[:, None]
            host = (np.arange(self.max_samples)[None, :] < counts) / counts
        return asarray_like(host, self.like)

    # --- batches -----------------------------------------------------------------------
    def full_batch(self, clients: slice | np.ndarray | None = None) -> Batch:
        """All samples of the given clients (a contiguous slice costs no copy on NumPy)."""
        if self.sparse:
            return Batch(self.features.block(clients),
                         self.targets if clients is None else
                         self.targets[clients, ...] if isinstance(clients, slice) else
                         take_rows(self.targets, clients),
                         self.sample_weights(clients))
        if clients is None:
            return Batch(self.features, self.targets, self.sample_weights())
        if isinstance(clients, slice):
            return Batch(self.features[clients, ...], self.targets[clients, ...],
                         self.sample_weights(clients))
        return Batch(take_rows(self.features, clients), take_rows(self.targets, clients),
                     self.sample_weights(clients))

    def minibatch(self, clients: np.ndarray, sample_index: np.ndarray) -> Batch:
        """Rows ``sample_index[b, j]`` of client ``clients[b]``: shape ``(B, m, ...)``.

        Uses a flat ``take`` (portable across Array API backends), each sample weighted
        ``1/m`` (a uniform minibatch mean).
        """
        xp = namespace(self.targets)
        clients = np.asarray(clients)
        b, m = sample_index.shape
        flat = (clients[:, None] * self.max_samples + sample_index).reshape(-1)
        feats: Any
        if self.sparse:
            feats = self.features.minibatch(clients, np.asarray(sample_index))
        else:
            feats = xp.reshape(self.features, (-1, *self.feature_shape))
            feats = xp.reshape(take_rows(feats, flat), (b, m, *self.feature_shape))
        targs = xp.reshape(self.targets, (-1,))
        targs = xp.reshape(take_rows(targs, flat), (b, m))
        if self.sample_weight is None:
            weights = np.full((b, m), 1.0 / m)
        else:  # importance weights: a uniform draw, its weighted mean unbiased
            # in the order of the jax engine's traced minibatch: bit for bit the same
            rows = self.sample_weight[clients]
            normalised = rows / rows.sum(axis=1, keepdims=True)
            picked = np.take_along_axis(normalised, np.asarray(sample_index), axis=1)
            weights = picked * self.counts[clients][:, None].astype(np.float64) / m
        return Batch(feats, targs, asarray_like(weights, self.like))

    def subset(self, clients: slice | np.ndarray) -> ClientData:
        """The data of ``clients`` only (padding kept: it is masked; no holdout), sparse
        features staying sparse: what a Ray shard or a Flower node holds."""
        if isinstance(clients, slice):
            clients = np.arange(self.n_clients)[clients]
        clients = np.asarray(clients)
        features = self.features.subset(clients) if self.sparse else \
            take_rows(self.features, clients)
        return ClientData(features, take_rows(self.targets, clients), self.counts[clients],
                          sample_weight=None if self.sample_weight is None
                          else self.sample_weight[clients], backend=self.backend)

    def client_arrays(self, i: int) -> tuple[Any, np.ndarray]:
        """The real (unpadded) samples of client ``i`` as NumPy arrays (the features a SciPy
        CSR matrix when they are sparse)."""
        from .._array import to_numpy

        n = int(self.counts[i])
        if self.sparse:
            return self.features.client_matrix(i, n), to_numpy(self.targets[i, ...])[:n]
        return to_numpy(self.features[i, ...])[:n], to_numpy(self.targets[i, ...])[:n]

    def pooled(self) -> tuple[Any, np.ndarray, np.ndarray]:
        """All real samples stacked, with the owning client id of each: NumPy arrays (the
        features a SciPy CSR matrix when they are sparse)."""
        feats, targs, owner = [], [], []
        for i in range(self.n_clients):
            f, t = self.client_arrays(i)
            feats.append(f)
            targs.append(t)
            owner.append(np.full(len(t), i))
        if self.sparse:
            from scipy import sparse

            stacked = sparse.vstack(feats, format="csr")
        else:
            stacked = np.concatenate(feats)
        return stacked, np.concatenate(targs), np.concatenate(owner)


def _read_metadata(root: Path) -> dict[str, dict[str, Any]]:
    """The arrays ``root/client_data.json`` describes, checked: name -> {shape, dtype}."""
    if not root.is_dir():
        raise FileNotFoundError(f"ClientData.load: {root} is not a directory; {RESAVE} first "
                                "(on a cluster every machine needs it at this same path)")
    path = root / METADATA_FILE
    if not path.is_file():
        raise FileNotFoundError(f"ClientData.load: {path} is missing: {root} was not written "
                                f"by ClientData.save, or the save was interrupted; {RESAVE}")
    try:
        meta = json.loads(path.read_text())
        arrays = meta["arrays"]
        ok = meta["format"] == FORMAT and set(arrays) <= set(ARRAY_NAMES) and \
            {"features", "targets", "counts"} <= set(arrays) and \
            ("holdout_features" in arrays) == ("holdout_targets" in arrays) and \
            _is_count(meta["version"]) and \
            all(_spec_ok(name, spec) for name, spec in arrays.items())
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise ValueError(f"ClientData.load: {path} is not a ClientData description (corrupt "
                         f"or from another program); {RESAVE}")
    if meta["version"] > FORMAT_VERSION:
        raise ValueError(f"ClientData.load: {path} has format version {meta['version']}, "
                         f"newer than this fedcomp's {FORMAT_VERSION}; upgrade fedcomp")
    return dict(arrays)


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _spec_ok(name: str, spec: Any) -> bool:
    """Whether array ``name``'s entry of ``client_data.json`` is what :meth:`ClientData.save`
    writes: a shape of counts and a dtype string; a ``.npz`` (the features or the holdout's
    only) with its nonzeros and, for the features, their ``[n_clients, max_samples]``,
    which must tile the matrix's rows."""
    if not (isinstance(spec, dict) and isinstance(spec.get("dtype"), str)
            and isinstance(spec.get("shape"), list) and all(map(_is_count, spec["shape"]))):
        return False
    if spec.get("file", ".npy") == ".npy":
        return "sparse" not in spec
    blocks = spec.get("sparse")
    tiles = name == "features" and isinstance(blocks, list) and len(blocks) == 2 and \
        all(map(_is_count, blocks)) and blocks[0] * blocks[1] == spec["shape"][0]
    return spec["file"] == ".npz" and len(spec["shape"]) == 2 and _is_count(spec.get("nnz")) \
        and "sparse" in spec and (tiles or (name == "holdout_features" and blocks is None))


def _load_array(path: Path, spec: dict[str, Any], mmap: bool) -> np.ndarray:
    """``path`` (memory-mapped read-only when ``mmap``), checked against ``spec``."""
    if not path.is_file():
        raise FileNotFoundError(f"ClientData.load: {path} is missing (a partial copy of the "
                                f"directory?); copy it again or {RESAVE}")
    try:
        values = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (ValueError, OSError, EOFError) as error:
        raise ValueError(f"ClientData.load: {path} is not a readable .npy file ({error}); "
                         f"{RESAVE}") from None
    if list(values.shape) != list(spec.get("shape", [])) or values.dtype.str != spec.get("dtype"):
        raise ValueError(f"ClientData.load: {path} holds {values.dtype.str} of shape "
                         f"{list(values.shape)} but {path.parent / METADATA_FILE} says "
                         f"{spec.get('dtype')} of shape {spec.get('shape')} (files from "
                         f"different saves?); {RESAVE}")
    return values


def _save_sparse(root: Path, name: str, values: Any) -> dict[str, Any]:
    """Write sparse features (or a sparse holdout) as ``<name>.npz`` (SciPy's CSR file)."""
    from scipy import sparse

    matrix = values.to_scipy() if isinstance(values, SparseFeatures) else \
        sparse.csr_array(values)
    partial = root / f"{name}.partial.npz"
    sparse.save_npz(partial, matrix, compressed=False)
    os.replace(partial, root / f"{name}.npz")
    return {"shape": list(matrix.shape), "dtype": matrix.dtype.str, "file": ".npz",
            "nnz": int(matrix.nnz),
            "sparse": list(values.shape[:2]) if isinstance(values, SparseFeatures) else None}


#: The arrays of a CSR ``.npz`` (``scipy.sparse.save_npz``) that :func:`_load_sparse` reads.
CSR_KEYS = ("format", "shape", "data", "indices", "indptr")


def _load_sparse(path: Path, spec: dict[str, Any]) -> Any:
    """``path`` written by :func:`_save_sparse`, checked against ``spec``.

    Read as plain arrays and checked in full (:func:`~fedcomp.data._checks.check_compressed`)
    before SciPy sees them: ``scipy.sparse.load_npz`` trusts the index arrays, so a crafted
    or damaged file would crash the interpreter (a column index of 10^6 on 8 columns, a
    decreasing row pointer) or put a value in another client's columns. Unsorted or
    duplicate column indices are valid CSR: they are sorted and summed.
    """
    from scipy import sparse

    if not path.is_file():
        raise FileNotFoundError(f"ClientData.load: {path} is missing (a partial copy of the "
                                f"directory?); copy it again or {RESAVE}")
    where = f"ClientData.load: {path}"
    try:
        with np.load(path, allow_pickle=False) as archive:
            parts = {key: archive[key] for key in CSR_KEYS}
    except ARCHIVE_DAMAGE as error:
        # the first sentence only: NumPy's next one advises allow_pickle, never wanted here
        reason = str(error).strip("'").split(". ")[0]
        raise ValueError(f"{where} is not a readable sparse .npz file with the arrays "
                         f"{', '.join(CSR_KEYS)} ({type(error).__name__}: {reason}); "
                         f"{RESAVE}") from None
    if parts["format"].tobytes() != b"csr":
        raise ValueError(f"{where} holds a {parts['format'].tobytes()!r} matrix, not the CSR "
                         f"one ClientData.save writes; {RESAVE}")
    check_compressed(parts["data"], parts["indices"], parts["indptr"], parts["shape"], where,
                     RESAVE)
    matrix = sparse.csr_array((parts["data"], parts["indices"], parts["indptr"]),
                              shape=tuple(parts["shape"].tolist()))
    if list(matrix.shape) != list(spec.get("shape", [])) or matrix.dtype.str != spec.get(
            "dtype") or matrix.nnz != spec.get("nnz"):
        raise ValueError(f"{where} holds {matrix.dtype.str} of shape "
                         f"{list(matrix.shape)} with {matrix.nnz} nonzeros but "
                         f"{path.parent / METADATA_FILE} says otherwise (files from different "
                         f"saves?); {RESAVE}")
    matrix.sum_duplicates()  # canonical (sorted, no duplicates), as the data's layout needs
    return matrix
