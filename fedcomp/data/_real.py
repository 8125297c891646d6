"""Real data sets: the LIBSVM text format, a bundled offline set, checked downloads.

A *pooled* data set (features and labels of every sample) becomes federated client data by
a partitioner (:data:`fedcomp.data.PARTITIONERS`), named in a configuration as
``partition = "iid"`` or ``partition = {name = "dirichlet", concentration = 0.2}``
(:func:`federate`). The loaders here follow that pattern:

* :func:`breast_cancer` — scikit-learn's bundled Wisconsin breast-cancer set (569 × 30,
  binary): real data that needs no download (CI, offline machines);
* :func:`libsvm_file` / :func:`a9a` — any LIBSVM-format file, e.g. the A9A (Adult) set of
  seed 002's Fig. 1 (32,561 × 123, ±1 labels), read from a path;
* :func:`download` / :func:`fetch` — fetch a file over HTTP(S) into the data directory,
  verifying its SHA-256 (the test serves a small file from a local ``http.server``);
  :func:`fetch` knows the official sources of :data:`SOURCES` (also ``fedcomp data
  download NAME``).

The image sets (MNIST, Fashion-MNIST, CIFAR-10, FEMNIST, scikit-learn's digits) are read by
:mod:`fedcomp.data._images` and downloaded by :func:`fetch` like A9A.

References
----------
Chang, C.-C., Lin, C.-J. "LIBSVM: A library for support vector machines." ACM TIST 2011
(the file format; A9A from https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/).
Street, Wolberg, Mangasarian, "Nuclear feature extraction for breast tumor diagnosis", 1993.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import math
import os
import shutil
import tarfile
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath
from typing import Any

import numpy as np

from .._extras import require
from ._checks import check_memory
from ._client_data import ClientData
from ._partition import PARTITIONERS, add_feature_noise, split_to_clients

#: Environment variable naming the directory of downloaded / user-provided data files.
DATA_DIR_ENV = "FEDCOMP_DATA_DIR"

#: Where the files of a named data set come from (:func:`fetch`, ``fedcomp data download``).
#:
#: * one file (``url``, ``sha256``): saved as ``<data dir>/<name>``. ``sha256`` is pinned
#:   when known; A9A's is not (it could not be verified offline when this was written), so
#:   :func:`fetch` checks A9A's shape instead and records the digest of the first download
#:   next to the file;
#: * several files (``mirrors``: base addresses tried in order, the official one first;
#:   ``files``: file name → pinned sha256): saved in the folder ``<data dir>/<name>/``; an
#:   ``extract`` entry names the folder a downloaded ``.tar.gz`` is unpacked to. The
#:   publishers give MD5 sums (which torchvision pins); the SHA-256 digests here are of the
#:   same files, each cross-checked against several independent published copies (Keras
#:   pins CIFAR-10's);
#: * ``manual``: no single file to fetch; how to produce the data instead.
SOURCES: dict[str, dict[str, Any]] = {
    "a9a": {"url": "https://www.csie.ntu.edu.tw/~cjlin/libsvmtools/datasets/binary/a9a",
            "sha256": None, "n_samples": 32561, "n_features": 123},
    "mnist": {
        "mirrors": ("http://yann.lecun.com/exdb/mnist/",
                    "https://ossci-datasets.s3.amazonaws.com/mnist/",
                    "https://storage.googleapis.com/cvdf-datasets/mnist/"),
        "files": {
            "train-images-idx3-ubyte.gz":
                "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609",
            "train-labels-idx1-ubyte.gz":
                "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c",
            "t10k-images-idx3-ubyte.gz":
                "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6",
            "t10k-labels-idx1-ubyte.gz":
                "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6",
        },
    },
    "fashion_mnist": {
        "mirrors": ("http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",
                    "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/"
                    "data/fashion/"),
        "files": {
            "train-images-idx3-ubyte.gz":
                "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84",
            "train-labels-idx1-ubyte.gz":
                "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845",
            "t10k-images-idx3-ubyte.gz":
                "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073",
            "t10k-labels-idx1-ubyte.gz":
                "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5",
        },
    },
    "cifar10": {
        "mirrors": ("https://www.cs.toronto.edu/~kriz/",),
        "files": {"cifar-10-python.tar.gz":
                  "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce"},
        "extract": "cifar-10-batches-py",
    },
    "femnist": {
        "manual": (
            "FEMNIST has no single official file: LEAF's preprocessing script builds it from "
            "NIST Special Database 19. On a machine with internet run\n"
            "  git clone https://github.com/TalwalkarLab/leaf && cd leaf/data/femnist\n"
            "  ./preprocess.sh -s niid --sf 0.05 -k 0 -t sample   # --sf 1.0 for all writers\n"
            "then copy leaf/data/femnist/data/train/ and data/test/ (LEAF JSON files) into "
            "{folder}/train/ and {folder}/test/, or pass femnist(path=...) the folder that "
            "holds them"),
    },
}


# --- LIBSVM format -----------------------------------------------------------------------
def _read_with_scikit_learn(path: str | Path, n_features: int | None, zero_based: Any,
                            dtype: Any, sparse: bool = False) -> tuple[Any, np.ndarray] | None:
    """The file through scikit-learn's compiled ``load_svmlight_file`` where it is installed
    (2.7x faster than the reader below on a 50 000 x 123 file), densified unless
    ``sparse``; ``None`` when scikit-learn is missing or refuses the file, when a value is
    not finite, or when the dense array would not fit in memory — the reader below then
    reads it again and names the line at fault."""
    from .._extras import _installed, require

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
    if sparse:
        return matrix, np.asarray(labels, dtype=np.float64)
    try:  # too large to densify: the reader below refuses it naming the widest line
        check_memory(matrix.shape[0] * matrix.shape[1] * np.dtype(dtype).itemsize,
                     f"{path}", "")
    except ValueError:
        return None
    return matrix.toarray(), np.asarray(labels, dtype=np.float64)


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
    if sparse:
        from scipy import sparse as scipy_sparse

        row = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        value = np.concatenate(vals) if vals else np.zeros(0)
        matrix = scipy_sparse.csr_matrix((value.astype(dtype), (row, col)),
                                         shape=(len(labels), width))
        matrix.sum_duplicates()
        return matrix, np.asarray(labels, dtype=np.float64)
    check_memory(len(labels) * width * np.dtype(dtype).itemsize,
                 f"{path}: {len(labels)} samples x {width} features (the largest index, "
                 f"{widest[0]}, is on line {widest[1]})",
                 "check that index, or pass n_features when the file is right")
    features = np.zeros((len(labels), width), dtype=dtype)
    if col.size:
        features[np.concatenate(rows), col] = np.concatenate(vals)
    return features, np.asarray(labels, dtype=np.float64)


# --- pooled data → clients -----------------------------------------------------------------
def partition_spec(partition: Any) -> tuple[str, dict[str, Any]]:
    """``"iid"`` or ``{"name": "dirichlet", "concentration": 0.2}`` → (name, params), checked.

    The partitioner's ``n_clients``, ``seed`` and data arguments come from the data set;
    the spec names the scheme and its own parameters only.

    Examples
    --------
    >>> partition_spec({"name": "dirichlet", "concentration": 0.2})
    ('dirichlet', {'concentration': 0.2})
    """
    if isinstance(partition, str):
        name, params = partition, {}
    elif isinstance(partition, dict) and isinstance(partition.get("name"), str):
        # feature_noise applies to any scheme's split (partition_noise), not to the scheme
        params = {k: v for k, v in partition.items() if k not in ("name", FEATURE_NOISE)}
        name = partition["name"]
    else:
        raise ValueError(f"partition must be a name or a table with a 'name' key, e.g. "
                         f"{{name = \"dirichlet\", concentration = 0.2}} (got {partition!r})")
    PARTITIONERS.check_keys(name, params, f"partition {name!r}")
    return name, params


#: The partition key that adds feature skew to any scheme (:func:`add_feature_noise`).
FEATURE_NOISE = "feature_noise"


def partition_noise(partition: Any) -> float:
    """The ``feature_noise`` of a partition spec (0 without one): the last client's noise
    standard deviation, :func:`~fedcomp.data.add_feature_noise`.

    Examples
    --------
    >>> partition_noise({"name": "iid", "feature_noise": 0.1}), partition_noise("iid")
    (0.1, 0.0)
    """
    if not isinstance(partition, dict):
        return 0.0
    sigma = partition.get(FEATURE_NOISE, 0.0)
    if not (isinstance(sigma, int | float) and not isinstance(sigma, bool)
            and math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"partition: feature_noise must be a finite number >= 0, the last "
                         f"client's noise standard deviation (got {sigma!r})")
    return float(sigma)


def federate(features: Any, labels: Any, n_clients: int, partition: Any = "iid", seed: int = 0,
             dtype: Any = np.float64, groups: Any = None) -> ClientData:
    """Split a pooled data set among clients with a named partitioner.

    Parameters
    ----------
    features : array, shape (n_samples, *feature_shape)
    labels : array, shape (n_samples,)
    n_clients : int
    partition : str or dict, default "iid"
        A partitioner of :data:`fedcomp.data.PARTITIONERS` and its parameters
        (:func:`partition_spec`), e.g. ``{"name": "dirichlet", "concentration": 0.2}``;
        ``feature_noise = σ`` adds feature skew to any of them
        (:func:`~fedcomp.data.add_feature_noise`: client i's features get noise of standard
        deviation ``σ·i/(N − 1)``).
    seed : int, default 0
        Seeds the partition (and the noise).
    dtype : numpy dtype, default float64
    groups : array, shape (n_samples,), optional
        The writer (group) of each sample, for the partitioners by writer (``"writers"``,
        ``"dirichlet_writers"``).

    Returns
    -------
    ClientData

    Examples
    --------
    >>> X, y = np.arange(20.0).reshape(10, 2), np.array([1.0, -1.0] * 5)
    >>> federate(X, y, 3, {"name": "dirichlet", "concentration": 1.0}).n_clients
    3
    """
    name, params = partition_spec(partition)
    registry = PARTITIONERS
    fn = registry[name]
    labels = np.asarray(labels)
    first = registry.parameters(name)[0]  # what the partitioner splits: labels, groups, a count
    if first == "groups" and groups is None:
        raise ValueError(f"partition {name!r} splits by writer, but this data set has no writer "
                         "ids; use it with digits or femnist, or choose another partition")
    data_arg = {"labels": labels, "groups": groups}.get(first, len(labels))
    sigma = partition_noise(partition)
    parts = fn(data_arg, n_clients, seed=seed, **params)
    data = split_to_clients(features, labels, parts, dtype=dtype)
    return add_feature_noise(data, sigma, seed) if sigma else data


def _standardize(features: Any) -> Any:
    """Zero mean, unit variance per feature (constant features are left at zero).

    Sparse features are scaled to unit variance without centering (centering would fill
    every zero: scikit-learn's ``StandardScaler(with_mean=False)`` does the same).
    """
    from ._sparse import is_sparse_matrix

    if is_sparse_matrix(features):
        from scipy import sparse

        features = sparse.csr_array(features)
        mean = np.asarray(features.mean(axis=0)).ravel()
        variance = np.asarray(features.multiply(features).mean(axis=0)).ravel() - mean**2
        std = np.sqrt(np.clip(variance, 0.0, None))
        return features @ sparse.diags_array(1.0 / np.where(std > 0, std, 1.0))
    std = features.std(axis=0)
    return (features - features.mean(axis=0)) / np.where(std > 0, std, 1.0)


def breast_cancer(n_clients: int = 10, partition: Any = "iid", seed: int = 0,
                  standardize: bool = True, unit_norm: bool = False) -> ClientData:
    """scikit-learn's bundled breast-cancer set (569 samples, 30 features) split among clients.

    Parameters
    ----------
    n_clients : int, default 10
    partition : str or dict, default "iid"
        See :func:`federate` (``{"name": "dirichlet", "concentration": 0.2}`` gives label
        skew).
    seed : int, default 0
        Seeds the partition.
    standardize : bool, default True
        Scale every feature to zero mean and unit variance over the pooled set.
    unit_norm : bool, default False
        Then scale every sample to unit ℓ2 norm (so a logistic loss has ``L ≤ 1/4``).

    Returns
    -------
    ClientData
        Labels ±1 (+1 = benign), for the logistic loss.

    Examples
    --------
    >>> data = breast_cancer(n_clients=5, partition={"name": "dirichlet", "concentration": 1.0})
    >>> data.n_clients, data.n_samples, data.feature_shape
    (5, 569, (30,))
    """
    datasets = require("sklearn.datasets", "fedcomp.data.breast_cancer")
    bunch = datasets.load_breast_cancer()
    features = np.asarray(bunch.data, dtype=np.float64)
    labels = np.where(np.asarray(bunch.target) == 1, 1.0, -1.0)
    return _prepare(features, labels, n_clients, partition, seed, standardize, unit_norm)


def _prepare(features: Any, labels: np.ndarray, n_clients: int, partition: Any,
             seed: int, standardize: bool, unit_norm: bool, groups: Any = None) -> ClientData:
    from ._sparse import is_sparse_matrix

    if standardize:
        features = _standardize(features)
    if unit_norm and is_sparse_matrix(features):
        from scipy import sparse

        features = sparse.csr_array(features)
        norms = np.sqrt(np.asarray(features.multiply(features).sum(axis=1)).ravel())
        features = sparse.diags_array(1.0 / np.where(norms > 0, norms, 1.0)) @ features
    elif unit_norm:
        norms = np.linalg.norm(features, axis=1, keepdims=True)
        features = features / np.where(norms > 0, norms, 1.0)
    return federate(features, labels, n_clients, partition, seed, groups=groups)


LABELINGS = ("as_written", "binary", "classes")


def relabel(labels: np.ndarray, labeling: str = "as_written",
            n_classes: int | None = None) -> np.ndarray:
    """Map a file's labels to what the losses are defined on.

    Parameters
    ----------
    labels : ndarray, shape (n_samples,)
    labeling : {"as_written", "binary", "classes"}, default "as_written"
        ``"binary"``: exactly two distinct labels, the smaller → −1 and the larger → +1
        (LIBSVM's binary sets write ±1, 0/1 or 1/2; :class:`~fedcomp.losses.Logistic`
        needs ±1). ``"classes"``: the distinct labels in increasing order → ``0 … k−1``
        (multiclass sets number classes from 1; :class:`~fedcomp.losses.Softmax` needs ids
        from 0).
    n_classes : int, optional
        With ``"classes"``: the number of classes the model has; more distinct labels is an
        error.

    Examples
    --------
    >>> relabel(np.array([2.0, 1.0, 2.0]), "binary").tolist()
    [1.0, -1.0, 1.0]
    >>> relabel(np.array([3.0, 1.0, 2.0]), "classes").tolist()
    [2.0, 0.0, 1.0]
    """
    if labeling not in LABELINGS:
        raise ValueError(f"labels must be one of {LABELINGS} (got {labeling!r})")
    if labeling == "as_written":
        return labels
    found, ids = np.unique(labels, return_inverse=True)
    if labeling == "binary":
        if len(found) != 2:
            raise ValueError(f"labels='binary' needs exactly two distinct labels, found "
                             f"{len(found)}: {found[:8].tolist()}; use labels='classes' for a "
                             "multiclass file")
        return np.where(ids == 1, 1.0, -1.0)
    if n_classes is not None and len(found) > n_classes:
        raise ValueError(f"the file has {len(found)} distinct labels {found[:8].tolist()} but "
                         f"n_classes={n_classes}; raise n_classes")
    return ids.astype(np.float64)


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


# --- files and downloads -------------------------------------------------------------------
def data_dir() -> Path:
    """``$FEDCOMP_DATA_DIR``, else ``~/.cache/fedcomp/data``."""
    return Path(os.environ.get(DATA_DIR_ENV) or Path.home() / ".cache" / "fedcomp" / "data")


def _resolve(path: str | Path) -> Path:
    """``path`` with ``~`` expanded; a relative name missing here is taken in :func:`data_dir`."""
    candidate = Path(os.path.expanduser(path))
    if not candidate.is_absolute() and not candidate.exists():
        candidate = data_dir() / candidate
    return candidate


def _locate(path: str, name: str | None = None) -> Path:
    candidate = _resolve(path)
    if not candidate.exists():
        hint = (f"`fedcomp data download {name}` or fedcomp.data.fetch({name!r}) downloads it "
                f"(needs internet; --data-dir DIR or ${DATA_DIR_ENV} choose the directory)"
                if name else "pass the path of the file")
        raise FileNotFoundError(f"data file {path!r} not found (also looked in {data_dir()}, "
                                f"set ${DATA_DIR_ENV} to change it); {hint}")
    return candidate


def sha256_of(path: str | Path) -> str:
    """Hex SHA-256 digest of a file (read in 1 MiB chunks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def download(url: str, dest: str | Path, sha256: str | None, *, timeout: float = 60.0,
             max_bytes: int = 1 << 30) -> Path:
    """Download ``url`` to ``dest`` atomically, verifying its SHA-256.

    Parameters
    ----------
    url : str
        An ``http://`` or ``https://`` address.
    dest : path
        The file to create (its directory is created); written only after the checks pass.
    sha256 : str or None
        Expected hex digest; ``None`` skips the check (the caller then verifies the
        content itself, as :func:`fetch` does for files without a pinned digest).
    timeout : float, default 60
        Seconds for the whole download: the connection and every read share them (a
        server trickling bytes cannot hold it longer; a ``TimeoutError`` then).
    max_bytes : int, default 1 GiB
        Abort when the response grows beyond this.

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    ValueError
        For another URL scheme, a response over ``max_bytes`` or a checksum mismatch (the
        partial file is removed; ``dest`` is left untouched).
    """
    scheme = urllib.parse.urlparse(url).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"download: only http(s) URLs are fetched (got {url!r})")
    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    size = 0
    deadline = time.monotonic() + timeout
    fd, tmp = tempfile.mkstemp(dir=dest.parent, prefix=f".{dest.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:
            while chunk := _read_before(resp, deadline, url, timeout):
                size += len(chunk)
                if size > max_bytes:
                    raise ValueError(f"download: {url} is larger than max_bytes={max_bytes}")
                digest.update(chunk)
                out.write(chunk)
        if sha256 is not None and digest.hexdigest() != sha256.lower():
            raise ValueError(f"download: checksum mismatch for {url}: expected sha256 {sha256}, "
                             f"got {digest.hexdigest()}; the file was not saved")
        shutil.move(tmp, dest)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    return dest


def _read_before(resp: Any, deadline: float, url: str, timeout: float) -> bytes:
    """The next bytes of ``resp`` that arrive before ``deadline``.

    ``urlopen``'s timeout bounds each socket operation, not the download: a server sending
    a byte a second would hold ``read(65536)`` for hours. Here every read gets only the
    time left (``read1``: whatever one receive brings), so the whole download ends by the
    deadline.
    """
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(f"download: {url} took longer than timeout={timeout:g} s")
    sock = getattr(getattr(getattr(resp, "fp", None), "raw", None), "_sock", None)
    if sock is not None:  # the socket under http.client's buffered reader
        sock.settimeout(left)
    try:
        return bytes(resp.read1(1 << 16))
    except TimeoutError:
        raise TimeoutError(f"download: {url} took longer than timeout={timeout:g} s") from None


def fetch(name: str, directory: str | Path | None = None, *, url: str | None = None,
          timeout: float = 60.0) -> Path:
    """Download a named data set of :data:`SOURCES` into ``directory`` unless it is there.

    Parameters
    ----------
    name : str
        A key of :data:`SOURCES`: ``"a9a"``, ``"mnist"``, ``"fashion_mnist"``, ``"cifar10"``
        (``"femnist"`` explains how to produce its files instead).
    directory : path, optional
        The data directory (default :func:`data_dir`): a one-file set is saved as
        ``directory/<name>``, a set of files in the folder ``directory/<name>/``.
    url : str, optional
        Overrides the source (mirrors, tests): the file's address for a one-file set, the
        base address of the files (``url + "/" + file name``) otherwise.
    timeout : float, default 60
        Seconds for each file's whole download (connection and reads).

    Returns
    -------
    Path
        The file or folder, which the loader of the same name reads.

    Raises
    ------
    ConnectionError
        When no source can be reached; the message says where to put the files by hand.
    ValueError
        For an unknown name, a set that cannot be downloaded (FEMNIST), a checksum mismatch
        (nothing is saved) or a file already there that does not match its digest.

    Notes
    -----
    With a pinned ``sha256`` every download is verified against it. A9A has none: the file
    must parse as LIBSVM with the expected shape, and its digest is recorded in
    ``<name>.sha256`` beside it so a later replacement of the file is detected. Files of a
    set already present are checked against their digests and not downloaded again.
    """
    if name not in SOURCES:
        raise ValueError(f"fetch: unknown data set {name!r}; known: {sorted(SOURCES)}")
    source = SOURCES[name]
    root = Path(directory or data_dir())
    if "manual" in source:
        raise ValueError(f"fetch: {name} cannot be downloaded automatically. "
                         + manual_download_hint(name, root / name))
    if "files" in source:
        return _fetch_files(name, source, root / name, url, timeout)
    path = root / name
    record = path.with_suffix(".sha256")
    if path.exists():
        expected = source["sha256"] or (record.read_text().split()[0] if record.exists()
                                        else None)
        if expected is not None and sha256_of(path) != expected:
            raise ValueError(f"fetch: {path} does not match its recorded sha256 {expected}; "
                             "delete it to download again")
        return path
    _download_any(name, [url or source["url"]], path, source["sha256"], timeout)
    if source["sha256"] is None:
        try:
            features, _ = load_libsvm(path, n_features=source["n_features"])
        except ValueError as exc:
            path.unlink()
            raise ValueError(f"fetch: the download of {name} is not a LIBSVM file: {exc}"
                             ) from exc
        if features.shape[0] != source["n_samples"]:
            path.unlink()
            raise ValueError(f"fetch: {name} should have {source['n_samples']} samples, the "
                             f"download has {features.shape[0]}; not saved")
        record.write_text(f"{sha256_of(path)}  {name}\n")
    return path


def _fetch_files(name: str, source: dict[str, Any], folder: Path, url: str | None,
                 timeout: float) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    bases = [url] if url else list(source["mirrors"])
    for filename, sha256 in source["files"].items():
        dest = folder / filename
        if dest.exists():
            if sha256_of(dest) != sha256:
                raise ValueError(f"fetch: {dest} does not match its pinned sha256 {sha256}; "
                                 "delete it to download again")
            continue
        _download_any(name, [f"{b.rstrip('/')}/{filename}" for b in bases], dest, sha256,
                      timeout)
    if "extract" in source and not (folder / source["extract"]).is_dir():
        for filename in source["files"]:
            _extract_folder(folder / filename, folder, source["extract"])
    return folder


def _download_any(name: str, urls: list[str], dest: Path, sha256: str | None,
                  timeout: float) -> Path:
    """:func:`download` from the first address that answers with the right content."""
    unreachable, rejected = [], []
    for address in urls:
        try:
            return download(address, dest, sha256, timeout=timeout)
        except ValueError as exc:  # a checksum mismatch or an oversized answer: next mirror
            rejected.append(str(exc))
        except (OSError, http.client.HTTPException) as exc:
            unreachable.append(f"{address} ({exc})")
    if rejected:
        raise ValueError(f"fetch: no source of {name} gave the expected file: "
                         + "; ".join(rejected))
    raise ConnectionError(f"could not download {name}: " + "; ".join(unreachable)
                          + f". {manual_download_hint(name, dest.parent)}")


def manual_download_hint(name: str, folder: str | Path | None = None) -> str:
    """How to get data set ``name`` of :data:`SOURCES` onto a machine by hand.

    Parameters
    ----------
    name : str
        A key of :data:`SOURCES`.
    folder : path, optional
        Where the files belong (default: ``<data dir>/<name>``, the data directory itself
        for a one-file set).

    Returns
    -------
    str
        The command to run, the files and their addresses, the folder and the environment
        variable ``$FEDCOMP_DATA_DIR`` the loaders read.

    Examples
    --------
    >>> "FEDCOMP_DATA_DIR" in manual_download_hint("mnist")
    True
    """
    source = SOURCES[name]
    if folder is None:
        folder = data_dir() if "url" in source else data_dir() / name
    where = (f"Loaders look in the data directory ${DATA_DIR_ENV} (now {data_dir()}; default "
             "~/.cache/fedcomp/data) or take path=...")
    if "manual" in source:
        return source["manual"].format(folder=folder) + ". " + where
    if "files" in source:
        files, mirrors = ", ".join(source["files"]), source["mirrors"]
        origin = f"from {mirrors[0]}" + (f" (mirrors: {', '.join(mirrors[1:])})"
                                         if len(mirrors) > 1 else "")
    else:
        files, origin = name, f"from {source['url']}"
    return (f"Run `fedcomp data download {name}` on a machine with internet (--data-dir DIR "
            f"saves under DIR), or download {files} {origin} yourself into {folder}. {where}")


def _extract_folder(archive: Path, folder: Path, member_dir: str) -> None:
    """Unpack the plain files ``member_dir/*`` of a tar archive into ``folder/member_dir``.

    Only regular files directly inside ``member_dir`` are written (no links, no other
    paths, so a crafted archive cannot write elsewhere); the folder appears atomically.
    """
    tmp = Path(tempfile.mkdtemp(dir=folder, prefix=f".{member_dir}."))
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar.getmembers():
                parts = PurePosixPath(member.name).parts
                if (member.isfile() and len(parts) == 2 and parts[0] == member_dir
                        and parts[1] not in (".", "..")):
                    content = tar.extractfile(member)
                    if content is None:  # pragma: no cover - regular files have content
                        continue
                    with content, open(tmp / parts[1], "wb") as out:
                        shutil.copyfileobj(content, out)
        tmp.rename(folder / member_dir)
    except (tarfile.TarError, EOFError, OSError) as exc:  # a cut or damaged archive
        if isinstance(exc, OSError) and not isinstance(exc, gzip.BadGzipFile):
            raise
        raise ValueError(f"{archive}: damaged or truncated archive ({exc or type(exc).__name__})"
                         "; delete it and download it again") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)


def is_fetched(name: str, directory: str | Path | None = None) -> bool:
    """Whether the files of data set ``name`` are in ``directory`` (default :func:`data_dir`).

    Checks presence only (:func:`fetch` verifies the digests).
    """
    source = SOURCES[name]
    folder = Path(directory or data_dir()) / name
    if "manual" in source:
        return (folder / "train").is_dir()
    if "files" in source:
        if "extract" in source:
            return (folder / source["extract"]).is_dir()
        # the loaders also read the unpacked files (``gunzip`` leaves no .gz behind)
        return all((folder / f).exists() or (folder / f.removesuffix(".gz")).exists()
                   for f in source["files"])
    return folder.exists()
