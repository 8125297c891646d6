"""Checks of client data before they are used: memory, finiteness, memory-mapped files,
per-sample arrays against their samples, CSR structure, client ids.

Kept apart from the containers (dense :class:`~fedcomp.data.ClientData` and
:mod:`fedcomp.data._sparse`), which both use them, and the entries that build them (the
estimators' client ids, a Flower node's arrays).
"""

from __future__ import annotations

import numbers
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._array import namespace

#: What zipfile and NumPy raise for a damaged or foreign ``.npz`` archive: NotImplementedError
#: of a zip header naming an unknown version, method or encryption, zlib.error of a damaged
#: compressed member, ValueError of a NumPy header or of pickled (object) arrays, KeyError of
#: a missing array. ``ClientData.load`` and a Flower node's ``data-path`` catch these alike.
ARCHIVE_DAMAGE = (ValueError, OSError, EOFError, KeyError, NotImplementedError, zlib.error,
                  zipfile.BadZipFile)


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_memory(n_bytes: int, what: str, fix: str | Callable[[], str]) -> None:
    """Refuse, before allocating, an array of ``n_bytes`` larger than physical memory.

    NumPy would raise a bare ``MemoryError`` (or the OS kill the process) after trying:
    ``n_features = 1_000_000_000`` or one LIBSVM feature index 99999999999 asks for TiBs.
    The ``ValueError`` says how many GiB ``what`` needs, how many the machine has, and
    ``fix`` (a string, or a function that makes it: only called for the error, so a fix
    that reads the data costs nothing when the array fits).

    Examples
    --------
    >>> check_memory(8 * 10**3, "a small array", "none needed")
    >>> check_memory(8 * 10**18, "the features", "reduce n_features")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: the features need 7450580596.9 GiB, more than this machine's ... GiB ...
    """
    memory = physical_memory()
    if memory is not None and n_bytes > memory:
        fix = fix if isinstance(fix, str) else fix()
        raise ValueError(f"{what} need {n_bytes / 2**30:.1f} GiB, more than this machine's "
                         f"{memory / 2**30:.1f} GiB of memory; {fix}")


#: Models a run holds beyond one per client (the server's model and its step): the fewest
#: measured, FedAvg's, took n_clients + 2 to n_clients + 3 models of peak memory at 1 to 64
#: clients on sparse data of 10^6 columns; ZA1 and SCAFFOLD took 5-6 per client.
SERVER_MODELS = 2


def models_bytes(n_clients: int, param_shape: tuple[int, ...], item_bytes: int) -> int:
    """Bytes of the dense models every run holds at least: ``n_clients +``
    :data:`SERVER_MODELS` of ``param_shape``. Sparse data cost memory in their nonzeros,
    their models in their columns: what :func:`check_memory` is given for them."""
    size = int(np.prod(param_shape, dtype=np.float64))
    return (n_clients + SERVER_MODELS) * size * item_bytes


#: Bytes of a NumPy array :func:`first_non_finite` reads at a time (its temporaries stay
#: this small whatever the array, so a memory-mapped array streams through it).
FINITE_CHECK_BYTES = 64 * 2**20


def first_non_finite(values: Any) -> tuple[int, ...] | None:
    """The index of the first NaN or ±inf entry of ``values`` (any namespace), else None.

    A NumPy array (a memory-mapped one included) is read in blocks of leading-axis rows of
    about :data:`FINITE_CHECK_BYTES` (:func:`row_blocks`): ``isfinite`` of the whole array
    would allocate a boolean array an eighth of a float64 array's size.
    """
    xp = namespace(values)
    if values.dtype == bool or not xp.isdtype(values.dtype, ("real floating",
                                                            "complex floating")):
        return None  # integer or boolean arrays hold no NaN or inf
    if isinstance(values, np.ndarray) and values.ndim and len(values):
        for start, block in row_blocks(values, FINITE_CHECK_BYTES):
            if not np.isfinite(block).all():
                first = np.argwhere(~np.isfinite(block))[0]
                return (start + int(first[0]), *(int(i) for i in first[1:]))
        return None
    if bool(xp.all(xp.isfinite(values))):
        return None
    from .._array import to_numpy

    return tuple(int(i) for i in np.argwhere(~np.isfinite(to_numpy(values)))[0])


def whole_npy_file(values: Any) -> str | None:
    """The ``.npy`` file ``values`` maps whole (``np.load(path, mmap_mode=...)``), else None.

    A memory map of only part of a file — a slice, a transposed or re-typed view — has
    another shape, dtype, layout or offset than the file and gives None: its rows are not
    the file's rows.
    """
    path = getattr(values, "filename", None)
    if not (isinstance(values, np.memmap) and path and str(path).endswith(".npy")
            and values.flags.c_contiguous):
        return None
    try:  # mapping the file again reads its header only
        file = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    whole = (isinstance(file, np.memmap) and file.shape == values.shape
             and file.dtype == values.dtype and file.flags.c_contiguous
             and file.offset == values.offset)
    return str(path) if whole else None


def row_blocks(values: np.ndarray, block_bytes: int) -> Iterator[tuple[int, np.ndarray]]:
    """``(start, values[start:start + k])`` for consecutive blocks of about ``block_bytes``.

    The blocks of a whole memory-mapped ``.npy`` file are read from the file
    (:func:`whole_npy_file`) rather than through the map: pages touched through a map stay
    in this process's resident memory until the OS needs them back, so checking a file
    through its map would make a process that never uses the data look as if it held
    all of it.
    """
    step = max(1, block_bytes // max(1, values[:1].nbytes))
    path = whole_npy_file(values)
    if path is None:
        for start in range(0, len(values), step):
            yield start, values[start:start + step]
        return
    row_shape = values.shape[1:]
    per_row = int(np.prod(row_shape, dtype=np.int64))
    with open(path, "rb") as f:
        f.seek(getattr(values, "offset", 0))
        for start in range(0, len(values), step):
            rows = min(step, len(values) - start)
            block = np.fromfile(f, dtype=values.dtype, count=rows * per_row)
            yield start, block.reshape(rows, *row_shape)


# --- per-sample arrays against their samples -----------------------------------------
def per_sample(values: Any, n_samples: int, where: str, what: str = "target") -> np.ndarray:
    """``values`` as a NumPy array of one number per sample of ``where`` (a client).

    Stacked into the padded layout, a 0-d target would be broadcast to every sample (one
    label for all of them, a run that "succeeds"), and one of another length would fail
    deep inside NumPy naming no client. One target per sample, shape ``(n_samples,)``, or
    a ``ValueError`` naming ``where``, the length expected and the shape given. Numbers
    only: an object array of numbers is converted to float64, strings (class names) are
    refused with the fix.

    Examples
    --------
    >>> per_sample([1, -1], 2, "client 0").tolist()
    [1, -1]
    >>> per_sample(-1.0, 6, "client 3")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: client 3 has 6 samples but its target is one value (-1.0); give one target ...
    """
    array = np.asarray(values)
    if array.ndim == 0:
        raise ValueError(f"{where} has {n_samples} samples but its {what} is one value "
                         f"({array.item()!r}); give one {what} per sample: an array of shape "
                         f"({n_samples},)")
    if array.shape != (n_samples,):
        column = (f" (np.ravel of the column {array.shape})"
                  if array.shape == (n_samples, 1) else "")
        raise ValueError(f"{where} has {n_samples} samples but {what}s of shape "
                         f"{array.shape}; give one {what} per sample: an array of shape "
                         f"({n_samples},){column}")
    return real_numbers(array, where, f"{what}s",
                        "class names as ids: np.unique(y, return_inverse=True)[1]")


def real_numbers(array: np.ndarray, where: str, what: str, fix: str) -> np.ndarray:
    """``array`` if it holds real numbers (bool, integer, float; an object array of numbers
    converted to float64), else a ``ValueError`` naming ``where`` and an entry that is not
    one: NumPy would fail naming no client on strings, or drop the imaginary part of
    complex values with only a ``ComplexWarning``."""
    if array.dtype.kind in "biuf":
        return array
    if array.dtype.kind == "O":
        try:
            return array.astype(np.float64)
        except (TypeError, ValueError):
            pass
    flat = array.reshape(-1).tolist()
    example = next((v for v in flat if not isinstance(v, numbers.Real)),
                   flat[0] if flat else None)
    raise ValueError(f"{where}: its {what} are not real numbers (dtype {array.dtype}, e.g. "
                     f"{example!r}); give numbers ({fix})")


# --- ClientData.from_lists's lists -----------------------------------------------------
def is_sparse_matrix(values: Any) -> bool:
    """True for a ``scipy.sparse`` matrix or array (without importing SciPy for others)."""
    return type(values).__module__.startswith("scipy.sparse")


def checked_lists(features: list[Any], targets: list[Any], sample_weight: list[Any] | None
                   ) -> tuple[list[Any], list[np.ndarray], list[np.ndarray] | None]:
    """:meth:`ClientData.from_lists`'s arguments checked client by client before anything
    is allocated: one kind of features (all dense or all ``scipy.sparse``), each client
    with samples of one shape, and one target (and weight) per sample
    (:func:`~fedcomp.data._checks.per_sample`: never broadcast). Dense features come back
    as arrays (nested lists converted), the targets and weights as NumPy arrays."""
    where = "ClientData.from_lists:"
    if len(features) == 0 or len(features) != len(targets) or (
            sample_weight is not None and len(sample_weight) != len(features)):
        weights = "" if sample_weight is None else f", {len(sample_weight)} sample weights"
        raise ValueError(f"{where} need one feature array, one target array (and one sample "
                         f"weight array) per client, for one client at least (got "
                         f"{len(features)} features, {len(targets)} targets{weights})")
    sparse = [is_sparse_matrix(f) for f in features]
    if any(sparse) and not all(sparse):
        dense = np.flatnonzero(~np.array(sparse)).tolist()
        raise ValueError(f"{where} clients {dense} are dense but others are scipy.sparse; give "
                         "every client the same kind (scipy.sparse.csr_array(x) of a dense "
                         "array)")
    features = [f if s else dense_features(f, f"{where} client {i}")
                for i, (f, s) in enumerate(zip(features, sparse, strict=True))]
    sample_shape = tuple(features[0].shape[1:])
    for i, f in enumerate(features):
        if len(f.shape) == 0 or tuple(f.shape[1:]) != sample_shape:
            raise ValueError(f"{where} client {i}'s features have shape {tuple(f.shape)} but "
                             f"client 0's samples have shape {sample_shape}; give every "
                             "client an array (n_samples, *feature_shape) of the same "
                             "feature_shape")
        if f.shape[0] == 0:
            empty = [k for k, g in enumerate(features) if g.shape[0] == 0]
            raise ValueError(f"{where} clients {empty} have no samples; drop them or "
                             "repartition")
    targets = [per_sample(t, int(f.shape[0]), f"{where} client {i}")
               for i, (f, t) in enumerate(zip(features, targets, strict=True))]
    if sample_weight is not None:
        sample_weight = [per_sample(w, int(f.shape[0]), f"{where} client {i}",
                                    "sample weight").astype(np.float64)
                         for i, (f, w) in enumerate(zip(features, sample_weight, strict=True))]
    return features, targets, sample_weight


def dense_features(values: Any, where: str) -> Any:
    """One client's dense features: an array of real numbers (a nested list converted; an
    array of another library, a torch tensor, kept as it is), else one error naming
    ``where``."""
    if hasattr(values, "shape") and not isinstance(values, np.ndarray):
        return values
    try:
        array = np.asarray(values)
    except ValueError as exc:  # rows of different lengths
        raise ValueError(f"{where}: its features are not an array of one shape ({exc}); give "
                         "an array (n_samples, *feature_shape)") from None
    return real_numbers(array, where, "features", "encode categories as numbers first")


# --- sparse structure ------------------------------------------------------------------
def check_compressed(data: Any, indices: Any, indptr: Any, shape: Any, where: str, fix: str,
                     axes: tuple[str, str] = ("row", "column")) -> None:
    """Refuse compressed-sparse parts (CSR; CSC with ``axes`` swapped) that do not describe
    a matrix of ``shape``, before SciPy or a product reads them.

    SciPy's compiled routines trust the index arrays: a column index past the width reads
    or writes outside the arrays (a segfault, "double free or corruption"), a decreasing
    row pointer makes a negative length, and a column inside the width but past the
    client's own features moves a value into another client's block of the block-diagonal
    matrix (:mod:`fedcomp.data._sparse`), silently. Checked fully, in O(nnz): integer
    index arrays, ``len(indptr) == rows + 1``, ``indptr`` from 0, non-decreasing, to
    ``nnz == len(indices) == len(data)``, every index in ``[0, columns)``. Unsorted or
    duplicate indices are valid (the callers sort and sum them on a copy). Each error
    names ``where`` (a file, a client) and ``fix``.

    Examples
    --------
    >>> check_compressed(np.ones(2), np.array([0, 2]), np.array([0, 1, 2]), (2, 3), "x", "")
    >>> check_compressed(np.ones(2), np.array([0, 9]), np.array([0, 1, 2]), (2, 3), "f.npz",
    ...                  "write it again")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: f.npz: column index 9 of row 1 is outside 0..2 (the matrix has 3 columns); ...
    """
    major, minor = axes
    shape = tuple(np.asarray(shape).tolist()) if np.ndim(shape) == 1 else ()
    if not (len(shape) == 2 and all(isinstance(s, int) and s >= 0 for s in shape)):
        raise ValueError(f"{where}: shape {shape!r} is not two sizes >= 0; {fix}")
    n_major, n_minor = shape if major == "row" else shape[::-1]
    parts = {"data": np.asarray(data), "indices": np.asarray(indices),
             "indptr": np.asarray(indptr)}
    for name, part in parts.items():
        kinds = "biuf" if name == "data" else "iu"
        if part.ndim != 1 or part.dtype.kind not in kinds:
            raise ValueError(f"{where}: its {name} are {part.dtype} of shape {part.shape}, not "
                             f"a 1-D array of {'numbers' if name == 'data' else 'integers'}; "
                             f"{fix}")
    values, index, pointers = parts["data"], parts["indices"], parts["indptr"]
    nnz = len(values)
    if len(pointers) != n_major + 1 or len(index) != nnz:
        raise ValueError(f"{where}: {len(pointers)} {major} pointers, {len(index)} indices and "
                         f"{nnz} values do not describe {n_major} {major}s ({n_major + 1} "
                         f"pointers, one index per value); {fix}")
    if pointers[0] != 0 or pointers[-1] != nnz:
        raise ValueError(f"{where}: the {major} pointers run from {pointers[0]} to "
                         f"{pointers[-1]}, not from 0 to the {nnz} values; {fix}")
    falls = np.flatnonzero(np.diff(pointers) < 0)
    if falls.size:
        r = int(falls[0])
        raise ValueError(f"{where}: the {major} pointers decrease at {major} {r} ({pointers[r]} "
                         f"then {pointers[r + 1]}); they must never decrease; {fix}")
    if nnz and (index.min() < 0 or index.max() >= n_minor):
        position = int(np.flatnonzero((index < 0) | (index >= n_minor))[0])
        row = int(np.searchsorted(pointers, position, side="right")) - 1
        raise ValueError(f"{where}: {minor} index {index[position]} of {major} {row} is outside "
                         f"0..{n_minor - 1} (the matrix has {n_minor} {minor}s); {fix}")


# --- client ids --------------------------------------------------------------------------
def _id_kind(value: Any) -> str | None:
    """"number" or "string", another type's name, None for None (refused on its own)."""
    if value is None:
        return None
    if isinstance(value, numbers.Number):
        return "number"
    return "string" if isinstance(value, str | bytes) else type(value).__name__


def distinct_ids(ids: Any, name: str, unit: str = "client", where: str = ""
                 ) -> tuple[np.ndarray, np.ndarray]:
    """``np.unique(ids, return_inverse=True)`` of ids of one type: numbers or strings.

    Mixed ids such as ``[0, "a", 1]`` are refused naming two of them: NumPy either turns
    them into text (where ``0`` and ``"0"`` become one ``unit``, silently) or, as objects,
    cannot sort them (a raw ``TypeError``). The error starts with ``where`` and names the
    argument ``name``.

    Examples
    --------
    >>> distinct_ids(["b", "a", "b"], "clients")[0].tolist()
    ['a', 'b']
    >>> distinct_ids([0, "a", 1], "clients")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: clients mixes ids of different types, e.g. 0 (int) and 'a' (str): ...
    """
    values = ids if isinstance(ids, np.ndarray) and ids.dtype != object else \
        np.asarray(ids, dtype=object)  # as objects, 0 and "0" stay apart
    if values.dtype == object:
        first: dict[str | None, Any] = {}
        for value in values.reshape(-1).tolist():
            first.setdefault(_id_kind(value), value)
        kinds = [kind for kind in first if kind is not None]
        if len(kinds) > 1:
            a, b = first[kinds[0]], first[kinds[1]]
            raise ValueError(f"{where}{name} mixes ids of different types, e.g. {a!r} "
                             f"({type(a).__name__}) and {b!r} ({type(b).__name__}): numbers "
                             "and strings do not sort together, and as text 0 and '0' would "
                             f"be one {unit}; give ids of one type, e.g. [str(c) for c in "
                             f"{name}]")
        if None not in first and set(kinds) <= {"number", "string"}:
            values = np.asarray(values.tolist())  # one type: NumPy's own dtype for it
    try:
        found, inverse = np.unique(values, return_inverse=True)
    except TypeError as exc:
        raise ValueError(f"{where}{name}: its ids cannot be sorted ({exc}); give numbers or "
                         "strings") from None
    return found, inverse.reshape(-1)
