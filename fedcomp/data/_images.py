"""Image classification data sets: the standard file formats and an offline bundled set.

Every loader returns pooled training images split among clients by a partitioner
(:func:`~fedcomp.data.federate`) and attaches held-out test images
(:attr:`ClientData.holdout <fedcomp.data.ClientData>`):

* :func:`digits` — scikit-learn's bundled 8×8 handwritten digits (1,797 images, 10
  classes): real images that need no download (CI, offline machines), with writer-like
  groups for the partitions by writer;
* :func:`mnist` / :func:`fashion_mnist` — the IDX files (:func:`load_idx`), raw or gzip;
* :func:`femnist` — LEAF's JSON files (:func:`load_leaf`), one natural client per writer;
* :func:`cifar10` — the "python version" pickled batches (:func:`load_cifar10_batch`).

Conventions shared by all loaders: features are pixel values scaled to ``[0, 1]`` (grey
level / maximum level; no standardization, so a model or a transform can choose its own),
shaped ``(n, channels, height, width)`` (channel first, as PyTorch's convolutions want) or
``(n, channels·height·width)`` with ``flatten=True`` (for the linear ``softmax`` loss);
targets are class ids ``0..k-1`` (int64). Randomness other than the partition (the test
split of digits, subsampling, writer sampling) comes from its own stream
``np.random.default_rng([seed, k])``, so changing ``n_clients`` or the partition never
changes which samples are kept.

References
----------
LeCun, Bottou, Bengio, Haffner, "Gradient-based learning applied to document recognition",
Proc. IEEE 1998 (MNIST; the IDX format at http://yann.lecun.com/exdb/mnist/).
Xiao, Rasul, Vollgraf, "Fashion-MNIST: a Novel Image Dataset for Benchmarking Machine
Learning Algorithms", arXiv:1708.07747, 2017.
Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", tech. report 2009
(CIFAR-10).
Caldas et al., "LEAF: A Benchmark for Federated Settings", arXiv:1812.01097, 2018 (FEMNIST).
Alpaydin, Kaynak, "Optical Recognition of Handwritten Digits", UCI ML repository, 1998
(scikit-learn's digits).
"""

from __future__ import annotations

import gzip
import json
import math
import pickle
import struct
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from .._extras import require
from ._checks import check_memory
from ._client_data import ClientData
from ._download import manual_download_hint
from ._federate import federate
from ._sources import _resolve

# Random streams of ``np.random.default_rng([seed, stream])``, one per use.
_SPLIT, _SUBSAMPLE_TRAIN, _SUBSAMPLE_TEST, _SAMPLE_WRITERS = 1, 2, 3, 4

#: IDX type codes (the third byte of the magic number) → big-endian NumPy dtypes.
IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


# --- file formats ----------------------------------------------------------------------------
def load_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (MNIST's format), raw or gzip-compressed.

    Parameters
    ----------
    path : str or Path
        The file; gzip compression is recognised by its magic bytes, not by the name.

    Returns
    -------
    ndarray
        Shape and type from the header, in native byte order.

    Raises
    ------
    ValueError
        Naming the file when the magic number, the type code or the data size is wrong.

    Notes
    -----
    The format: two zero bytes, a type code (0x08 ubyte, 0x09 byte, 0x0B short, 0x0C int,
    0x0D float, 0x0E double), the number of dimensions, one big-endian uint32 per
    dimension, then the values, big-endian, last index fastest.

    Examples
    --------
    >>> import os, struct, tempfile
    >>> with tempfile.NamedTemporaryFile(suffix=".idx", delete=False) as f:
    ...     _ = f.write(struct.pack(">4B2I", 0, 0, 0x08, 2, 2, 3) + bytes(range(6)))
    >>> load_idx(f.name).tolist()
    [[0, 1, 2], [3, 4, 5]]
    >>> os.remove(f.name)
    """
    try:
        with open(path, "rb") as f:
            compressed = f.read(2) == b"\x1f\x8b"
        opener: Any = gzip.open if compressed else open
        with opener(path, "rb") as f:
            return _read_idx(f, path)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:  # a cut or damaged .gz
        raise ValueError(f"{path}: damaged or truncated gzip file ({exc or type(exc).__name__})"
                         "; download it again (fedcomp data download NAME)") from None


def _read_idx(f: Any, path: str | Path) -> np.ndarray:
    """The array of an open IDX stream (decompressed as it is read), read no further than
    its header announces: a ``.gz`` that inflates beyond that is refused, not expanded."""
    magic = f.read(4)
    if len(magic) < 4 or magic[:2] != b"\x00\x00":
        raise ValueError(f"{path}: not an IDX file (magic number {magic.hex() or 'missing'}; "
                         "expected 0000 followed by a type code and the number of dimensions)")
    code, ndim = magic[2], magic[3]
    if code not in IDX_DTYPES:
        raise ValueError(f"{path}: unknown IDX type code 0x{code:02x}; valid: "
                         + ", ".join(f"0x{c:02x}" for c in IDX_DTYPES))
    header = 4 + 4 * ndim
    shape = f.read(4 * ndim)
    if len(shape) < 4 * ndim:
        raise ValueError(f"{path}: truncated IDX header ({ndim} dimensions need {header} bytes, "
                         f"the file has {4 + len(shape)})")
    dims = struct.unpack(f">{ndim}I", shape)
    dtype = np.dtype(IDX_DTYPES[code])
    count = math.prod(dims)
    size = count * dtype.itemsize
    check_memory(size, f"{path}: the IDX header's {dims} values of {dtype.name}",
                 "the file is damaged or not IDX; download it again")
    raw = f.read(size)
    extra = len(f.read(1))  # one byte more than announced is enough to refuse the file
    if len(raw) != size or extra:
        got = f"{len(raw)}" if not extra else f"more than {size}"
        raise ValueError(f"{path}: the header announces {dims} values of {dtype.name} "
                         f"({size} bytes) but {got} bytes follow; the file is truncated or "
                         "not IDX")
    values = np.frombuffer(raw, dtype=dtype, count=count).reshape(dims)
    return values.astype(dtype.newbyteorder("="))


def load_leaf(path: str | Path, dtype: Any = np.float32
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Read LEAF JSON files (FEMNIST's format): samples with the writer of each.

    Parameters
    ----------
    path : str or Path
        A JSON file, or a folder whose ``*.json`` files are read in name order. Each holds
        ``{"users": [...], "num_samples": [...], "user_data": {user: {"x": [[...], ...],
        "y": [...]}}}``.
    dtype : numpy dtype, default float32
        Of the features.

    Returns
    -------
    features : ndarray, shape (n_samples, n_features)
    labels : ndarray of int64, shape (n_samples,)
    writers : ndarray of str, shape (n_samples,)
        The user (writer) of each sample; users in the order the files list them.

    Raises
    ------
    FileNotFoundError
        When the folder holds no JSON file.
    ValueError
        Naming the file and user of malformed data.

    Examples
    --------
    >>> import json, os, tempfile
    >>> blob = {"users": ["w1"], "num_samples": [2],
    ...         "user_data": {"w1": {"x": [[0.0, 1.0], [0.5, 0.25]], "y": [3, 7]}}}
    >>> with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    ...     json.dump(blob, f)
    >>> X, y, w = load_leaf(f.name)
    >>> X.tolist(), y.tolist(), w.tolist()
    ([[0.0, 1.0], [0.5, 0.25]], [3, 7], ['w1', 'w1'])
    >>> os.remove(f.name)
    """
    path = Path(path)
    files = [path] if path.is_file() else sorted(path.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"load_leaf: no LEAF JSON file (*.json) in {path}")
    features, labels, writers = [], [], []
    for file in files:
        try:
            with open(file, encoding="utf-8") as f:
                blob = json.load(f)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError: name the file
            raise ValueError(f"{file}: not LEAF JSON ({exc})") from None
        if not (isinstance(blob, dict) and isinstance(blob.get("users"), list)
                and isinstance(blob.get("user_data"), dict)):
            raise ValueError(f"{file}: not LEAF JSON (needs a list 'users' and a table "
                             "'user_data')")
        users = blob["users"]
        counts = blob.get("num_samples") or [None] * len(users)
        if not isinstance(counts, list) or len(counts) != len(users):
            raise ValueError(f"{file}: num_samples must list one count per user ({len(users)} "
                             f"users; got {counts!r:.80})")
        for user, count in zip(users, counts, strict=True):
            try:
                x, y = _leaf_user(blob["user_data"], user, count, dtype)
            except (KeyError, TypeError, ValueError) as exc:
                raise ValueError(f"{file}: user {user!r}: {exc}") from exc
            if len(y) == 0:
                continue
            features.append(x)
            labels.append(y)
            writers.append(np.full(len(y), str(user)))
    if not features:
        raise ValueError(f"load_leaf: the files in {path} hold no samples")
    widths = {x.shape[1] for x in features}
    if len(widths) > 1:
        raise ValueError(f"load_leaf: samples of different lengths {sorted(widths)} in {path}")
    return np.concatenate(features), np.concatenate(labels), np.concatenate(writers)


def _leaf_user(user_data: dict[str, Any], user: Any, count: Any, dtype: Any
               ) -> tuple[np.ndarray, np.ndarray]:
    """One LEAF user's ``(x, y)``, checked; a ValueError says what is wrong (no file name)."""
    entry = user_data.get(user)
    if entry is None:
        raise ValueError("listed in 'users' but has no user_data")
    if not (isinstance(entry, dict) and "x" in entry and "y" in entry):
        keys = sorted(entry) if isinstance(entry, dict) else type(entry).__name__
        raise ValueError(f"user_data needs the keys 'x' and 'y' (got {keys})")
    rows = entry["x"]
    if isinstance(rows, list) and rows and isinstance(rows[0], list):
        lengths = sorted({len(r) if isinstance(r, list) else -1 for r in rows})
        if len(lengths) > 1:  # NumPy's own message names neither the user nor the lengths
            raise ValueError(f"samples in x have different lengths {lengths}")
    try:
        x = np.asarray(rows, dtype=dtype)
        y = np.asarray(entry["y"], dtype=np.int64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"x must be a list of equal-length number lists and y a list of "
                         f"integer labels ({exc})") from exc
    if len(y) and (x.ndim != 2 or len(x) != len(y) or (count is not None and count != len(y))):
        raise ValueError(f"x of shape {x.shape}, {len(y)} labels and num_samples={count}; "
                         "they must agree")
    return x, y


class _ArrayUnpickler(pickle.Unpickler):
    """Unpickles containers of NumPy arrays and refuses every other global (no code runs)."""

    # _codecs.encode: how protocol 2 writes bytes under Python 3 (a pure str -> bytes call)
    ALLOWED = {("numpy._core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "scalar"),
               ("numpy._core.numeric", "_frombuffer"), ("numpy", "ndarray"), ("numpy", "dtype"),
               ("_codecs", "encode")}

    def find_class(self, module: str, name: str) -> Any:
        if module.startswith("numpy.core"):  # written by NumPy 1 (and Python 2, as CIFAR-10)
            module = "numpy._core" + module.removeprefix("numpy.core")
        if (module, name) not in self.ALLOWED:
            raise pickle.UnpicklingError(f"{module}.{name} is not allowed in a data batch")
        return super().find_class(module, name)


def load_cifar10_batch(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read one batch file of CIFAR-10's "python version" (``data_batch_1``, ``test_batch``).

    Parameters
    ----------
    path : str or Path
        A pickled dict with ``b"data"`` (uint8, shape ``(n, 3072)``: the red, green, blue
        32×32 planes of each image, row-major) and ``b"labels"`` (n ints in 0..9).

    Returns
    -------
    images : ndarray of uint8, shape (n, 3, 32, 32)
    labels : ndarray of int64, shape (n,)

    Raises
    ------
    ValueError
        When the file is not such a batch.

    Notes
    -----
    Only NumPy arrays and plain containers are unpickled; any other object in the file is
    refused rather than constructed (pickle can run code).

    Examples
    --------
    >>> import os, pickle, tempfile
    >>> batch = {b"data": np.arange(2 * 3072, dtype=np.uint8).reshape(2, 3072),
    ...          b"labels": [6, 9]}
    >>> with tempfile.NamedTemporaryFile(delete=False) as f:
    ...     pickle.dump(batch, f, protocol=2)
    >>> images, labels = load_cifar10_batch(f.name)
    >>> images.shape, labels.tolist()
    ((2, 3, 32, 32), [6, 9])
    >>> os.remove(f.name)
    """
    try:
        with open(path, "rb") as f:
            batch = _ArrayUnpickler(f, encoding="bytes").load()
    except (pickle.UnpicklingError, EOFError) as exc:
        raise ValueError(f"{path}: not a CIFAR-10 python batch ({exc})") from exc
    if not (isinstance(batch, dict) and b"data" in batch and b"labels" in batch):
        raise ValueError(f"{path}: not a CIFAR-10 python batch (needs the keys b'data' and "
                         "b'labels')")
    data, labels = np.asarray(batch[b"data"]), np.asarray(batch[b"labels"], dtype=np.int64)
    if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3072 or (
            len(labels) != len(data)):
        raise ValueError(f"{path}: expected uint8 data of shape (n, 3072) and n labels, got "
                         f"{data.dtype} {data.shape} and {len(labels)} labels")
    return data.reshape(-1, 3, 32, 32), labels


# --- shared preparation -------------------------------------------------------------------------
def _float_dtype(dtype: Any) -> np.dtype:
    out = np.dtype(dtype)
    if out.kind != "f":
        raise ValueError(f"dtype must be a float type such as 'float32' (got {dtype!r})")
    return out


def _check_classes(name: str, n_classes: int, expected: int) -> None:
    if n_classes != expected:
        raise ValueError(f"{name} has {expected} classes (got n_classes={n_classes}); the "
                         "parameter only tells a configuration the softmax model's shape")


def _subsample(n: int, keep: int | None, seed: int, stream: int, what: str) -> np.ndarray:
    """Sorted indices of ``keep`` of ``n`` samples (all when ``keep`` is None), seeded."""
    if keep is None:
        return np.arange(n)
    if not 1 <= keep <= n:
        raise ValueError(f"{what} must be in 1..{n} (got {keep}); None keeps every sample")
    rng = np.random.default_rng([seed, stream])
    return np.sort(rng.choice(n, size=keep, replace=False))


def _pixels(images: np.ndarray, levels: float | None, dtype: np.dtype, flatten: bool
            ) -> np.ndarray:
    """``images / levels`` in ``dtype`` (computed in ``dtype``), optionally flattened."""
    out = images.astype(dtype)
    if levels is not None:
        out /= dtype.type(levels)
    return out.reshape(len(out), -1) if flatten else out


def _image_data(train: tuple[np.ndarray, np.ndarray], test: tuple[np.ndarray, np.ndarray] | None,
                levels: float | None, n_clients: int | None, partition: Any, seed: int,
                flatten: bool, n_samples: int | None, n_test: int | None, dtype: Any,
                groups: np.ndarray | None = None) -> ClientData:
    """Subsample, scale, partition (``federate``) and attach the test images as holdout."""
    dtype = _float_dtype(dtype)
    images, labels = train
    if n_samples is not None:  # (no copy of a full set otherwise)
        keep = _subsample(len(labels), n_samples, seed, _SUBSAMPLE_TRAIN, "n_samples")
        images, labels = images[keep], labels[keep]
        groups = None if groups is None else groups[keep]
    if n_clients is None:  # one client per writer (femnist's natural partition)
        if groups is None:
            raise ValueError("n_clients is needed: this data set has no writers to count")
        n_clients = len(np.unique(groups))
    data = federate(_pixels(images, levels, dtype, flatten), labels.astype(np.int64), n_clients,
                    partition, seed, dtype=dtype, groups=groups)
    if test is None:
        if n_test is not None:
            raise ValueError("n_test: this data set has no test samples to keep")
        return data
    keep = _subsample(len(test[1]), n_test, seed, _SUBSAMPLE_TEST, "n_test")
    return data.with_holdout(_pixels(test[0][keep], levels, dtype, flatten),
                             test[1][keep].astype(np.int64))


# --- scikit-learn's digits ------------------------------------------------------------------
def digit_forms(labels: Any) -> np.ndarray:
    """Form (writer-like group) of each sample of scikit-learn's digits, from the label order.

    Parameters
    ----------
    labels : array, shape (n_samples,)
        ``load_digits().target`` in file order.

    Returns
    -------
    ndarray of int64, shape (n_samples,)
        ``0, 0, ..., 1, 1, ...``: the form each sample was cut from.

    Notes
    -----
    scikit-learn ships no writer ids, but its file (the UCI ``optdigits`` test set) lists the
    digits form by form: every form starts with 0–9 written three times, followed by the
    same 100 digits (a few digits of some forms are missing). A form starts where a run
    ``0123456789`` begins more than 30 labels (the three-fold header) after the first run
    of the previous form, moved back while the labels before it keep counting up (a form
    whose leading 0 is missing). This finds 14 forms of 122–130 digits.

    Examples
    --------
    >>> header = list(range(10)) * 3
    >>> np.bincount(digit_forms(header + [5] * 10 + header + [7, 3])).tolist()
    [40, 32]
    """
    labels = np.asarray(labels, dtype=np.int64)
    if len(labels) < 10:
        return np.zeros(len(labels), dtype=np.int64)
    windows = np.lib.stride_tricks.sliding_window_view(labels, 10)
    runs = np.flatnonzero((windows == np.arange(10)).all(axis=1))
    starts = [0]
    last_run = -(10**9)
    for run in runs:
        if run - last_run <= 30:  # the second and third 0–9 of the same form
            continue
        last_run = start = int(run)
        while start > starts[-1] + 1 and labels[start - 1] == (labels[start] - 1) % 10:
            start -= 1
        if start > starts[-1]:
            starts.append(start)
    forms = np.zeros(len(labels), dtype=np.int64)
    forms[starts[1:]] = 1
    return np.cumsum(forms)


def digits(n_clients: int = 10, partition: Any = "iid", seed: int = 0, flatten: bool = False,
           test_fraction: float = 0.2, n_samples: int | None = None,
           dtype: str = "float64", n_classes: int = 10) -> ClientData:
    """scikit-learn's bundled 8×8 handwritten digits (1,797 images, 10 classes) among clients.

    Parameters
    ----------
    n_clients : int, default 10
    partition : str or dict, default "iid"
        See :func:`~fedcomp.data.federate`: ``{"name": "dirichlet", "concentration": 0.3}``
        gives label skew; ``"writers"`` deals whole writer-like groups (forms, see Notes)
        to the clients, ``{"name": "dirichlet_writers", "concentration": 0.5}`` gives
        clients ``Dir`` shares of them (at most 14 clients for both).
    seed : int, default 0
        Seeds the partition, the test split and the subsample (separate streams).
    flatten : bool, default False
        Features of shape ``(n, 64)`` instead of ``(n, 1, 8, 8)``.
    test_fraction : float, default 0.2
        Share of the images held out (uniformly at random) as the pooled
        :attr:`~fedcomp.data.ClientData.holdout`; 0 keeps none.
    n_samples : int, optional
        Keep this many training images (seeded subsample) for reduced-size runs.
    dtype : str, default "float64"
        Feature dtype: float64 like the other CPU data sets (the reference solver's
        accuracy); "float32" for networks.
    n_classes : int, default 10
        Fixed by the data; a configuration names it (``data.n_classes = 10``) to shape a
        ``softmax`` model. Another value is an error.

    Returns
    -------
    ClientData
        Features: grey levels / 16, in ``[0, 1]``; targets: digits 0..9 (int64).

    Notes
    -----
    The images are the test set of the UCI "Optical Recognition of Handwritten Digits" data:
    32×32 bitmaps of forms filled in by 13 writers (says scikit-learn's description), each
    pixel of the 8×8 image counting the ink pixels of a 4×4 block. No writer ids are
    shipped; the file lists the digits form by form (:func:`digit_forms` finds 14 forms),
    so forms are the writer-like groups. They are an honest proxy rather than the truth:
    14 forms for 13 described writers means at least one writer may span two forms.

    Examples
    --------
    >>> data = digits(n_clients=5, partition="writers")
    >>> data.n_clients, data.feature_shape, data.holdout[0].shape
    (5, (1, 8, 8), (359, 1, 8, 8))
    """
    _check_classes("digits", n_classes, 10)
    datasets = require("sklearn.datasets", "fedcomp.data.digits")
    bunch = datasets.load_digits()
    images = np.asarray(bunch.images).reshape(-1, 1, 8, 8)
    labels = np.asarray(bunch.target, dtype=np.int64)
    forms = digit_forms(labels)
    if not 0 <= test_fraction < 1:
        raise ValueError(f"digits: test_fraction must be in [0, 1) (got {test_fraction})")
    n_held = round(test_fraction * len(labels))
    perm = np.random.default_rng([seed, _SPLIT]).permutation(len(labels))
    test, train = np.sort(perm[:n_held]), np.sort(perm[n_held:])
    return _image_data((images[train], labels[train]),
                       (images[test], labels[test]) if n_held else None, 16.0, n_clients,
                       partition, seed, flatten, n_samples, None, dtype, groups=forms[train])


# --- MNIST and Fashion-MNIST (IDX) ----------------------------------------------------------
_IDX_STEMS = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _find_file(folder: Path, names: list[str], name: str, what: str) -> Path:
    for candidate in names:
        if (folder / candidate).is_file():
            return folder / candidate
    raise FileNotFoundError(f"{name}: no {what} in {folder}. "
                            + manual_download_hint(name, folder)
                            + f"; or pass path=FOLDER holding the {name} files")


def _idx_split(folder: Path, name: str, split: str) -> tuple[np.ndarray, np.ndarray]:
    arrays = []
    for stem in _IDX_STEMS[split]:
        dotted = stem.replace("-idx", ".idx")  # some copies name them train-images.idx3-ubyte
        names = [stem, stem + ".gz", dotted, dotted + ".gz"]
        arrays.append(load_idx(_find_file(folder, names, name, f"{stem}[.gz]")))
    images, labels = arrays
    if images.ndim != 3 or labels.ndim != 1 or len(images) != len(labels):
        raise ValueError(f"{name} ({split}): images of shape {images.shape} and labels of "
                         f"shape {labels.shape} do not form (n, rows, cols) and (n,)")
    return images[:, None], labels


def _idx_images(name: str, path: str, n_clients: int, partition: Any, seed: int,
                flatten: bool, n_samples: int | None, n_test: int | None, dtype: Any
                ) -> ClientData:
    folder = _resolve(path)
    return _image_data(_idx_split(folder, name, "train"), _idx_split(folder, name, "test"),
                       255.0, n_clients, partition, seed, flatten, n_samples, n_test, dtype)


def mnist(path: str = "mnist", n_clients: int = 10, partition: Any = "iid", seed: int = 0,
          flatten: bool = False, n_samples: int | None = None, n_test: int | None = None,
          dtype: str = "float32", n_classes: int = 10) -> ClientData:
    """MNIST handwritten digits (60,000 + 10,000 test images, 28×28) from its IDX files.

    Parameters
    ----------
    path : str, default "mnist"
        Folder of ``train-images-idx3-ubyte``, ``train-labels-idx1-ubyte``,
        ``t10k-images-idx3-ubyte`` and ``t10k-labels-idx1-ubyte``, each raw or ``.gz``; a
        relative name not found here is looked up in the data directory
        (``$FEDCOMP_DATA_DIR``). ``fedcomp data download mnist`` puts them there.
    n_clients : int, default 10
    partition : str or dict, default "iid"
        See :func:`~fedcomp.data.federate` (``{"name": "shards", "shards_per_client": 2}``
        is McMahan et al.'s pathological split).
    seed : int, default 0
        Seeds the partition and the subsamples.
    flatten : bool, default False
        Features of shape ``(n, 784)`` instead of ``(n, 1, 28, 28)``.
    n_samples, n_test : int, optional
        Keep this many training / test images (seeded subsamples) for reduced-size runs.
    dtype : str, default "float32"
        Feature dtype (float32: 60,000 images take 188 MB).
    n_classes : int, default 10
        Fixed by the data (see :func:`digits`).

    Returns
    -------
    ClientData
        Features: grey levels / 255 in ``[0, 1]``; targets 0..9 (int64); the 10,000 test
        images as the holdout.

    Raises
    ------
    FileNotFoundError
        Saying how to get the files when they are not in ``path``.
    """
    _check_classes("mnist", n_classes, 10)
    return _idx_images("mnist", path, n_clients, partition, seed, flatten, n_samples, n_test,
                       dtype)


def fashion_mnist(path: str = "fashion_mnist", n_clients: int = 10, partition: Any = "iid",
                  seed: int = 0, flatten: bool = False, n_samples: int | None = None,
                  n_test: int | None = None, dtype: str = "float32", n_classes: int = 10
                  ) -> ClientData:
    """Fashion-MNIST (Zalando's clothing images, MNIST's format and sizes) from its IDX files.

    Parameters
    ----------
    path : str, default "fashion_mnist"
        Folder of the four IDX files, named as MNIST's (see :func:`mnist`);
        ``fedcomp data download fashion_mnist`` puts them in the data directory.
    n_clients, partition, seed, flatten, n_samples, n_test, dtype, n_classes
        As in :func:`mnist`.

    Returns
    -------
    ClientData
        Features in ``[0, 1]``, shape ``(n, 1, 28, 28)`` (or ``(n, 784)``); targets 0..9
        (T-shirt/top, trouser, pullover, dress, coat, sandal, shirt, sneaker, bag, ankle
        boot); the 10,000 test images as the holdout.
    """
    _check_classes("fashion_mnist", n_classes, 10)
    return _idx_images("fashion_mnist", path, n_clients, partition, seed, flatten, n_samples,
                       n_test, dtype)


# --- CIFAR-10 (python batches) ---------------------------------------------------------------
def cifar10(path: str = "cifar10", n_clients: int = 10, partition: Any = "iid", seed: int = 0,
            flatten: bool = False, n_samples: int | None = None, n_test: int | None = None,
            dtype: str = "float32", n_classes: int = 10) -> ClientData:
    """CIFAR-10 (50,000 + 10,000 test colour images, 32×32, 10 classes) from its python batches.

    Parameters
    ----------
    path : str, default "cifar10"
        Folder of ``data_batch_1`` … ``data_batch_5`` and ``test_batch``, or of the
        ``cifar-10-batches-py/`` folder holding them (``fedcomp data download cifar10``
        unpacks it into the data directory).
    n_clients, partition, seed, n_samples, n_test, dtype, n_classes
        As in :func:`mnist`.
    flatten : bool, default False
        Features of shape ``(n, 3072)`` instead of ``(n, 3, 32, 32)``.

    Returns
    -------
    ClientData
        Features: RGB intensities / 255 in ``[0, 1]``; targets 0..9 (airplane, automobile,
        bird, cat, deer, dog, frog, horse, ship, truck); the test batch as the holdout.
    """
    _check_classes("cifar10", n_classes, 10)
    folder = _resolve(path)
    if not (folder / "data_batch_1").exists() and (folder / "cifar-10-batches-py").is_dir():
        folder = folder / "cifar-10-batches-py"

    def read(names: list[str]) -> tuple[np.ndarray, np.ndarray]:
        batches = [load_cifar10_batch(_find_file(folder, [n], "cifar10", n)) for n in names]
        return (np.concatenate([b[0] for b in batches]),
                np.concatenate([b[1] for b in batches]))

    train = read([f"data_batch_{i}" for i in range(1, 6)])
    return _image_data(train, read(["test_batch"]), 255.0, n_clients, partition, seed, flatten,
                       n_samples, n_test, dtype)


# --- FEMNIST (LEAF JSON) ---------------------------------------------------------------------
def femnist(path: str = "femnist", n_clients: int | None = None, partition: Any = "writers",
            seed: int = 0, flatten: bool = False, max_writers: int | None = None,
            n_samples: int | None = None, n_test: int | None = None,
            dtype: str = "float32", n_classes: int = 62) -> ClientData:
    """FEMNIST (LEAF's federated EMNIST: 62 classes, 28×28, grouped by writer) from LEAF JSON.

    Parameters
    ----------
    path : str, default "femnist"
        A folder with LEAF's ``train/`` and ``test/`` folders of JSON files (training
        samples for the clients, test samples as the holdout), or a folder of JSON files
        (no holdout). A relative name not found here is looked up in the data directory.
        LEAF's preprocessing script produces the files (``fedcomp data download femnist``
        explains how).
    n_clients : int, optional
        Default: one client per writer kept. With ``partition="writers"`` fewer clients
        get several whole writers each.
    partition : str or dict, default "writers"
        ``"writers"``: the natural partition, whole writers dealt to clients;
        ``{"name": "dirichlet_writers", "concentration": 0.5}``: ``Dir`` shares of the
        writers; any sample partition (``"iid"``, ``"dirichlet"`` over labels, ...) too.
    seed : int, default 0
        Seeds the partition, the writer sample and the subsamples.
    flatten : bool, default False
        Features of shape ``(n, 784)`` instead of ``(n, 1, 28, 28)``.
    max_writers : int, optional
        Keep this many writers (a seeded sample, as LEAF's ``--sf`` does) with all their
        samples; their test samples form the holdout.
    n_samples, n_test : int, optional
        Keep this many training / test samples (seeded subsamples).
    dtype : str, default "float32"
    n_classes : int, default 62
        Fixed by the data (see :func:`digits`).

    Returns
    -------
    ClientData
        Features as LEAF stores them (grey level / 255, in ``[0, 1]``); targets: LEAF's class
        ids 0..61 (digits, upper-case, lower-case letters).
    """
    _check_classes("femnist", n_classes, 62)
    folder = _resolve(path)
    train_dir = folder / "train" if (folder / "train").is_dir() else folder
    test_dir = folder / "test" if (folder / "test").is_dir() else None
    if not train_dir.is_dir() or not any(train_dir.glob("*.json")):
        raise FileNotFoundError(f"femnist: no LEAF JSON files in {train_dir}. "
                                + manual_download_hint("femnist", folder))
    features, labels, writers = load_leaf(train_dir, _float_dtype(dtype))
    subset = max_writers is not None
    if max_writers is not None:
        names = np.unique(writers)
        chosen = names[_subsample(len(names), max_writers, seed, _SAMPLE_WRITERS, "max_writers")]
        keep = np.isin(writers, chosen)
        features, labels, writers = features[keep], labels[keep], writers[keep]
    side = math.isqrt(features.shape[1])
    if side * side != features.shape[1]:
        raise ValueError(f"femnist: samples of length {features.shape[1]} are not square images")
    test = None
    if test_dir is not None and any(test_dir.glob("*.json")):
        tx, ty, tw = load_leaf(test_dir, _float_dtype(dtype))
        if tx.shape[1] != features.shape[1]:
            raise ValueError(f"femnist: test samples of length {tx.shape[1]}, training samples "
                             f"of length {features.shape[1]}")
        # LEAF's sample split (-t sample) gives every writer train and test samples; its
        # user split (-t user) holds out other writers. Only a writer subsample
        # (max_writers) restricts the test samples to the writers kept.
        keep = np.isin(tw, np.unique(writers)) if subset else np.ones(len(ty), dtype=bool)
        if not keep.any():
            raise ValueError(f"femnist: none of the {len(np.unique(tw))} test writers in "
                             f"{test_dir} is among the {max_writers} training writers kept "
                             "(max_writers); with LEAF's user split (-t user) the test "
                             "writers differ from the training ones: leave max_writers "
                             "unset, or use the sample split (-t sample)")
        test = (tx[keep].reshape(-1, 1, side, side), ty[keep])
    return _image_data((features.reshape(-1, 1, side, side), labels), test, None, n_clients,
                       partition, seed, flatten, n_samples, n_test, dtype, groups=writers)


__all__ = ["IDX_DTYPES", "cifar10", "digit_forms", "digits", "fashion_mnist", "femnist",
           "load_cifar10_batch", "load_idx", "load_leaf", "mnist"]
