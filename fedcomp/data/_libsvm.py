"""The LIBSVM/SVMlight text format: a reader, and any such file as federated client data.

:func:`load_libsvm` reads ``label index:value ...`` lines (through scikit-learn's compiled
reader where installed, else the reader here, which names the line at fault);
:func:`libsvm_file` / :func:`a9a` federate a file, e.g. the A9A (Adult) set of seed 002's
Fig. 1 (32,561 × 123, ±1 labels).

References
----------
Chang, C.-C., Lin, C.-J. "LIBSVM: A library for support vector machines." ACM TIST 2011
(the file format; A9A from https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ._checks import SERVER_MODELS, check_memory, models_bytes
from ._client_data import ClientData
from ._federate import _prepare, partition_spec, relabel
from ._partition import PARTITIONERS

#: Environment variable naming the directory of downloaded / user-provided data files.
from ._sources import SOURCES, _locate


# --- LIBSVM format -----------------------------------------------------------------------
def _read_with_scikit_learn(path: str | Path, n_features: int | None, zero_based: Any,
                            dtype: Any, sparse: bool = False) -> tuple[Any, np.ndarray] | None:
    """The file through scikit-learn's compiled ``load_svmlight_file`` where it is installed
    (2.7x faster than the reader below on a 50 000 x 123 file), densified unless
    ``sparse``; ``None`` when scikit-learn is missing or refuses the file, when a value is
    not finite, or when the dense array would not fit in memory — the reader below then
    reads it again and names the line at fault."""
    from .._extras import _installed

    if not _installed("sklearn"):
        return None
    datasets = require("sklearn.datasets", "fedcomp.data.load_libsvm")
    try:
        matrix, labels = datasets.load_svmlight_file(
            str(path), n_features=n_features, zero_based=zero_based, dtype=dtype)
    except (ValueError, UnicodeDecodeError, OverflowError):  # an index past int32, too
        return None
    if not (np.isfinite(matrix.data).all() and np.isfinite(labels).all()):
        return None
    try:  # too large: the reader below refuses it naming the widest line
        check_memory(_needed(matrix.shape, dtype, sparse), f"{path}", "")
    except ValueError:
        return None
    if sparse:
        return matrix, np.asarray(labels, dtype=np.float64)
    return matrix.toarray(), np.asarray(labels, dtype=np.float64)


def _needed(shape: tuple[int, int], dtype: Any, sparse: bool) -> int:
    """Bytes the features of ``shape`` will take at least: dense, the array; sparse, the
    models of one client's run on them (:func:`~fedcomp.data._checks.models_bytes`):
    cheap to hold, an index of 10^11 makes every model 745 GiB."""
    item = np.dtype(dtype).itemsize
    return models_bytes(1, (shape[1],), item) if sparse else shape[0] * shape[1] * item


def _is_pair(pair: list[str]) -> bool:
    """Whether ``index:value`` split at its colon reads as an integer and a number."""
    try:
        index, value = pair
        int(index), float(value)
    except ValueError:
        return False
    return True


def load_libsvm(path: str | Path, n_features: int | None = None, zero_based: Any = "auto",
                dtype: Any = np.float64, sparse: bool = False) -> tuple[Any, np.ndarray]:
    """Read a LIBSVM/SVMlight text file into dense arrays, or a sparse matrix.

    Parameters
    ----------
    path : str or Path
        One sample per line: ``label index:value index:value ...`` (indices increasing;
        ``#`` starts a comment; ``qid:`` tokens are ignored).
    n_features : int, optional
        Number of features (default: the largest index seen). Files of a split often
        omit the last features (A9A's training file has 123), so pass it when known.
    zero_based : bool or "auto", default "auto"
        Whether indices start at 0; ``"auto"`` treats them as 1-based (the format's
        convention) unless an index 0 occurs.
    dtype : numpy dtype, default float64
    sparse : bool, default False
        Keep the features sparse: a ``scipy.sparse`` CSR matrix, memory proportional to the
        nonzeros (rcv1's 20 242 x 47 236 at 0.16 % take 18 MB, densified 7.6 GB). What
        high-dimensional sets (rcv1, news20, real-sim, url) need.

    Returns
    -------
    features : ndarray or scipy.sparse CSR matrix, shape (n_samples, n_features)
    labels : ndarray, shape (n_samples,)
        As written in the file (e.g. ±1 for binary sets; ``"+1"`` parses as 1).

    Raises
    ------
    ValueError
        Naming the line of a malformed entry, or an index beyond ``n_features``.

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".svm", delete=False) as f:
    ...     _ = f.write("+1 1:0.5 3:2\\n-1 2:1\\n")
    >>> X, y = load_libsvm(f.name)
    >>> X.tolist(), y.tolist()
    ([[0.5, 0.0, 2.0], [0.0, 1.0, 0.0]], [1.0, -1.0])
    >>> os.remove(f.name)
    """
    fast = _read_with_scikit_learn(path, n_features, zero_based, dtype, sparse)
    if fast is not None and len(fast[1]):
        return fast
    labels: list[float] = []
    rows: list[np.ndarray] = []
    cols: list[np.ndarray] = []
    vals: list[np.ndarray] = []
    widest = (-1, 0)  # the largest feature index and its line
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); not a "
                         "LIBSVM file?") from None
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        tokens = line.split()
        # the message says where, never what: the file may not be a LIBSVM file at all
        where = f"{path}, line {number}: not LIBSVM format ('label index:value ...'): "
        try:
            labels.append(float(tokens[0]))
        except ValueError:
            raise ValueError(where + "its first token is not a number (the label)") from None
        pairs = [t.split(":", 1) for t in tokens[1:] if not t.startswith("qid:")]
        try:
            idx = np.array([int(i) for i, _ in pairs], dtype=np.int64)
            val = np.array([float(v) for _, v in pairs], dtype=np.float64)
        except ValueError:
            bad = next(k for k, pair in enumerate(pairs, start=2) if not _is_pair(pair))
            raise ValueError(where + f"token {bad} is not index:value (an integer index, a "
                             "number)") from None
        except OverflowError:  # an index past int64: no array of features could hold it
            raise ValueError(f"{path}, line {number}: a feature index is 2**63 or more "
                             f"({max(int(i) for i, _ in pairs)}); check that index") from None
        if not (math.isfinite(labels[-1]) and np.isfinite(val).all()):
            what = (f"label {labels[-1]}" if not math.isfinite(labels[-1]) else
                    f"feature {idx[~np.isfinite(val)][0]} = {val[~np.isfinite(val)][0]}")
            raise ValueError(f"{path}, line {number}: {what} is not finite; fix or drop "
                             "that line")
        if idx.size and idx.max() > widest[0]:
            widest = (int(idx.max()), number)
        rows.append(np.full(len(idx), len(labels) - 1))
        cols.append(idx)
        vals.append(val)
    if not labels:
        raise ValueError(f"{path}: no samples (the file is empty or holds only comments); "
                         "give a LIBSVM file, one 'label index:value ...' line per sample")
    col = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    base = 0 if (zero_based is True or (zero_based == "auto" and (col == 0).any())) else 1
    col = col - base
    if (col < 0).any():
        raise ValueError(f"{path}: negative feature index (zero_based={zero_based!r})")
    width = int(col.max()) + 1 if col.size else 0
    if n_features is not None:
        if width > n_features:
            raise ValueError(f"{path}: feature index {width - 1 + base} exceeds "
                             f"n_features={n_features}")
        width = n_features
    what = f"the {1 + SERVER_MODELS} models of a run on them" if sparse else "they"
    check_memory(_needed((len(labels), width), dtype, sparse),
                 f"{path}: {len(labels)} samples x {width} features (the largest index, "
                 f"{widest[0]}, is on line {widest[1]}): {what}",
                 "check that index, or pass n_features when the file is right")
    if sparse:
        from scipy import sparse as scipy_sparse

        row = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        value = np.concatenate(vals) if vals else np.zeros(0)
        matrix = scipy_sparse.csr_matrix((value.astype(dtype), (row, col)),
                                         shape=(len(labels), width))
        matrix.sum_duplicates()
        return matrix, np.asarray(labels, dtype=np.float64)
    features = np.zeros((len(labels), width), dtype=dtype)
    if col.size:
        features[np.concatenate(rows), col] = np.concatenate(vals)
    return features, np.asarray(labels, dtype=np.float64)


def libsvm_file(path: str, n_clients: int = 10, partition: Any = "iid", seed: int = 0,
                n_features: int | None = None, standardize: bool = False,
                unit_norm: bool = False, labels: str = "as_written",
                n_classes: int | None = None, sparse: bool = False,
                group_column: int | None = None) -> ClientData:
    """A LIBSVM-format file (:func:`load_libsvm`) split among clients (:func:`federate`).

    Parameters
    ----------
    path : str
        The file (``~`` and ``$FEDCOMP_DATA_DIR``-relative names are expanded: a bare
        file name is looked up in :func:`data_dir`).
    n_clients, partition, seed, standardize, unit_norm
        As in :func:`breast_cancer`.
    n_features : int, optional
        See :func:`load_libsvm`.
    labels : {"as_written", "binary", "classes"}, default "as_written"
        How to map the file's labels (:func:`relabel`): ``"binary"`` for logistic
        regression on a file with 0/1 or 1/2 labels, ``"classes"`` for softmax regression
        on one numbering its classes from 1.
    n_classes : int, optional
        The number of classes of a multiclass file (a configuration's ``data.n_classes``,
        which makes the problem a softmax regression); checked with ``labels="classes"``.
    sparse : bool, default False
        Keep the features sparse (:func:`load_libsvm`): the clients' data are then
        :class:`~fedcomp.data._sparse.SparseFeatures`, memory proportional to the nonzeros.
        ``standardize`` then scales without centering.
    group_column : int, optional
        Split by a column's value: the samples sharing the value of feature
        ``group_column`` (0-based, as stored) form a group, and a partition by groups
        (``"writers"``: whole groups dealt to clients; ``"dirichlet_writers"``) deals the
        groups. The column stays a feature.

    Returns
    -------
    ClientData

    Examples
    --------
    >>> import tempfile, os
    >>> with tempfile.NamedTemporaryFile("w", suffix=".svm", delete=False) as f:
    ...     _ = f.write("+1 1:1 3:2\\n-1 1:2 2:1\\n+1 1:1\\n-1 1:2 3:1\\n")
    >>> data = libsvm_file(f.name, n_clients=2, partition="writers", sparse=True,
    ...                    group_column=0)
    >>> data.sparse, data.counts.tolist()
    (True, [2, 2])
    >>> os.remove(f.name)
    """
    _check_group_column(group_column, partition)
    features, raw = load_libsvm(_locate(path), n_features=n_features, sparse=sparse)
    targets = relabel(raw, labels, n_classes)
    groups = None
    if group_column is not None:
        if not 0 <= group_column < features.shape[1]:
            raise ValueError(f"group_column={group_column} is not a feature of {path} (it has "
                             f"{features.shape[1]}, numbered from 0)")
        column = features[:, [group_column]]
        groups = (column.toarray() if hasattr(column, "toarray") else column).ravel()
    return _prepare(features, targets, n_clients, partition, seed, standardize, unit_norm,
                    groups)


def _check_group_column(group_column: int | None, partition: Any) -> None:
    """A ``group_column`` with a partition that does not split by groups would be ignored."""
    if group_column is None:
        return
    name, _ = partition_spec(partition)
    if PARTITIONERS.parameters(name)[0] != "groups":
        raise ValueError(f"group_column={group_column} gives each sample a group, but partition "
                         f"{name!r} does not split by groups and would ignore it; use partition "
                         "= 'writers' or 'dirichlet_writers', or drop group_column")


def a9a(path: str = "a9a", n_clients: int = 10, partition: Any = "iid", seed: int = 0,
        standardize: bool = False, unit_norm: bool = False) -> ClientData:
    """The A9A (Adult) training set of seed 002's Fig. 1, from a local LIBSVM file.

    Parameters
    ----------
    path : str, default "a9a"
        The file; a bare name is looked up in :func:`data_dir`. Get it with
        ``fedcomp.data.fetch("a9a")`` on a machine with internet.
    n_clients, partition, seed, standardize, unit_norm
        As in :func:`breast_cancer`.

    Returns
    -------
    ClientData
        32,561 samples × 123 binary features, labels ±1.
    """
    features, labels = load_libsvm(_locate(path, "a9a"),
                                   n_features=SOURCES["a9a"]["n_features"])
    return _prepare(features, labels, n_clients, partition, seed, standardize, unit_norm)


