"""The image sets' file formats: IDX (MNIST, Fashion-MNIST), LEAF's JSON (FEMNIST) and
CIFAR-10's pickled "python version" batches, each read without trusting the file (sizes
checked before allocation, no pickle beyond plain arrays).

References
----------
LeCun, Bottou, Bengio, Haffner, "Gradient-based learning applied to document recognition",
Proc. IEEE 1998 (the IDX format at http://yann.lecun.com/exdb/mnist/).
Caldas et al., "LEAF: A Benchmark for Federated Settings", arXiv:1812.01097, 2018.
Krizhevsky, "Learning Multiple Layers of Features from Tiny Images", tech. report 2009.
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

from ._checks import check_memory

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


__all__ = ["IDX_DTYPES", "load_cifar10_batch", "load_idx", "load_leaf"]
