"""Generic encoding of an algorithm's NamedTuples of arrays as Flower records.

One :class:`flwr.app.Array` per field, under the field's name, in an
:class:`flwr.app.ArrayRecord`. Arrays travel as ``.npy`` bytes (``numpy.save``), so float64
values arrive bit for bit; the adapter never looks at what the fields mean.

Uploads go **compact** (``encode(upload, compact=True)``): a floating field is sent in the
smallest of three exact forms — dense; sparse (``NAME.idx`` int32 flat positions of the
nonzeros and ``NAME.val`` their values, for rand-k and top-k uploads); or a codebook
(``NAME.book`` the distinct values and ``NAME.code`` uint8/uint16 positions in it, for
QSGD and natural compression, whose uploads take few distinct values) — with
``NAME.shape``. Each decodes to the very same array, so a compressed upload crosses the
network in a fraction of the dense bytes and the run stays bit for bit the simulator's.
The bytes sent are more than the compressor's ``bits_up`` (which counts an ideal encoding:
``log2(d)``-bit indices, sign bits): this is what NumPy arrays carry, not an entropy coder.
"""

from __future__ import annotations

from collections import namedtuple
from functools import lru_cache
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord

from .._array import asarray_like, to_numpy

#: The suffixes of a field sent in a compact form (field names are identifiers: no dots).
COMPACT_PARTS = (".shape", ".idx", ".val", ".book", ".code")
#: The bytes of an ``.npy`` header (``numpy.save`` pads it to a multiple of 64).
NPY_HEADER = 128


def compact_parts(x: np.ndarray) -> dict[str, np.ndarray]:
    """The smallest exact form of a floating array: ``{"": x}`` (dense), sparse
    (``.idx``, ``.val``) or a codebook (``.book``, ``.code``), with ``.shape``.

    Examples
    --------
    >>> x = np.zeros((2, 100)); x[0, 3], x[1, 50] = 1.5, -2.0
    >>> sorted(compact_parts(x))
    ['.idx', '.shape', '.val']
    >>> sorted(compact_parts(np.array([0.5, -0.5, 0.25] * 40)))
    ['.book', '.code', '.shape']
    >>> list(compact_parts(np.arange(5.0)))
    ['']
    """
    if not np.issubdtype(x.dtype, np.floating) or x.size < 16:
        return {"": x}
    flat = x.reshape(-1)
    # bit patterns, so that -0.0 (and a NaN's payload) survive: exact means bit for bit
    bits = flat.view(np.dtype(f"u{x.itemsize}"))
    shape = np.asarray(x.shape, dtype=np.int64)
    forms = [{"": x}]
    nonzero = np.flatnonzero(bits)
    if nonzero.size * (4 + x.itemsize) < x.nbytes and x.size < 2**31:
        forms.append({".shape": shape, ".idx": nonzero.astype(np.int32),
                      ".val": flat[nonzero]})
    if nonzero.size > x.size // 8:  # dense-ish: few distinct values? (QSGD, natural)
        book, code = np.unique(bits, return_inverse=True)
        if book.size <= 2**16:
            width = np.uint8 if book.size <= 2**8 else np.uint16
            forms.append({".shape": shape, ".book": book.view(x.dtype),
                          ".code": code.reshape(-1).astype(width)})
    # each part travels as .npy bytes with a header of about 128 bytes
    return min(forms, key=lambda form: sum(v.nbytes + NPY_HEADER for v in form.values()))


def expand_parts(parts: dict[str, np.ndarray]) -> np.ndarray:
    """The array :func:`compact_parts` encoded, exactly."""
    if "" in parts:
        return parts[""]
    shape = tuple(int(n) for n in parts[".shape"])
    if ".idx" in parts:
        flat = np.zeros(int(np.prod(shape)), dtype=parts[".val"].dtype)
        flat[parts[".idx"]] = parts[".val"]
        return flat.reshape(shape)
    return parts[".book"][parts[".code"]].reshape(shape)


def encode(values: Any, compact: bool = False) -> ArrayRecord:
    """A NamedTuple of arrays as an ArrayRecord (one entry per field, in field order; with
    ``compact``, a floating field in its smallest exact form: :func:`compact_parts`)."""
    record = {}
    for name, v in zip(values._fields, values, strict=True):
        # order="C", not ascontiguousarray: that would turn 0-d fields into shape (1,)
        x = np.asarray(to_numpy(v), order="C")
        for suffix, part in (compact_parts(x) if compact else {"": x}).items():
            record[name + suffix] = Array.from_numpy_ndarray(np.asarray(part, order="C"))
    return ArrayRecord(record)


def _fields(record: ArrayRecord) -> dict[str, np.ndarray]:
    """The record's fields as arrays, compact forms expanded, in the record's order."""
    grouped: dict[str, dict[str, np.ndarray]] = {}
    for key in record.keys():
        name, dot, suffix = key.partition(".")
        grouped.setdefault(name, {})[dot + suffix] = record[key].numpy()
    return {name: expand_parts(parts) for name, parts in grouped.items()}


@lru_cache(maxsize=64)
def _tuple_type(name: str, names: tuple[str, ...]) -> Any:
    return namedtuple(name, names)  # noqa: PYI024 - a record's fields are only known at runtime


def decode(record: ArrayRecord, like: Any, cls: Any = None, name: str = "Record") -> Any:
    """An ArrayRecord back as a NamedTuple of arrays in the namespace/device of ``like``.

    ``cls`` is the NamedTuple class when the receiver knows it (client states); otherwise
    a NamedTuple with the record's field names is built (algorithms read messages and
    uploads by field name only).
    """
    fields = _fields(record)
    names = tuple(fields)
    if cls is None:
        cls = _tuple_type(name, names)
    elif set(cls._fields) == set(names):
        names = tuple(cls._fields)  # by name: never rely on the record's key order
    else:
        raise ValueError(f"received fields {list(names)} but {cls.__name__} has "
                         f"{list(cls._fields)}: the SuperNode and the server run different "
                         "fedcomp versions or algorithms")
    # floats follow the receiver's dtype/device (asarray_like); integer fields keep theirs
    return cls(*(asarray_like(fields[key], like) for key in names))
