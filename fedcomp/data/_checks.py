"""Checks of client data before they are used: memory, finiteness, memory-mapped files.

Kept apart from the containers (dense :class:`~fedcomp.data.ClientData` and
:mod:`fedcomp.data._sparse`), which both use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from .._array import namespace


def physical_memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def check_memory(n_bytes: int, what: str, fix: str) -> None:
    """Refuse, before allocating, an array of ``n_bytes`` larger than physical memory.

    NumPy would raise a bare ``MemoryError`` (or the OS kill the process) after trying:
    ``n_features = 1_000_000_000`` or one LIBSVM feature index 99999999999 asks for TiBs.
    The ``ValueError`` says how many GiB ``what`` needs, how many the machine has, and
    ``fix``.

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
        raise ValueError(f"{what} need {n_bytes / 2**30:.1f} GiB, more than this machine's "
                         f"{memory / 2**30:.1f} GiB of memory; {fix}")


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
