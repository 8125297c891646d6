"""Generic encoding of an algorithm's NamedTuples of arrays as Flower records.

One :class:`flwr.app.Array` per field, under the field's name, in an
:class:`flwr.app.ArrayRecord`. Arrays travel as ``.npy`` bytes (``numpy.save``), so float64
values arrive bit for bit; the adapter never looks at what the fields mean.
"""

from __future__ import annotations

from collections import namedtuple
from functools import lru_cache
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord

from .._array import asarray_like, to_numpy


def encode(values: Any) -> ArrayRecord:
    """A NamedTuple of arrays as an ArrayRecord (one entry per field, in field order)."""
    # order="C", not ascontiguousarray: that would turn 0-d fields into shape (1,)
    return ArrayRecord({name: Array.from_numpy_ndarray(np.asarray(to_numpy(v), order="C"))
                        for name, v in zip(values._fields, values, strict=True)})


@lru_cache(maxsize=64)
def _tuple_type(name: str, names: tuple[str, ...]) -> Any:
    return namedtuple(name, names)  # noqa: PYI024 - a record's fields are only known at runtime


def decode(record: ArrayRecord, like: Any, cls: Any = None, name: str = "Record") -> Any:
    """An ArrayRecord back as a NamedTuple of arrays in the namespace/device of ``like``.

    ``cls`` is the NamedTuple class when the receiver knows it (client states); otherwise
    a NamedTuple with the record's field names is built (algorithms read messages and
    uploads by field name only).
    """
    names = tuple(record.keys())
    if cls is None:
        cls = _tuple_type(name, names)
    elif set(cls._fields) == set(names):
        names = tuple(cls._fields)  # by name: never rely on the record's key order
    else:
        raise ValueError(f"received fields {list(names)} but {cls.__name__} has "
                         f"{list(cls._fields)}: the SuperNode and the server run different "
                         "fedcomp versions or algorithms")
    # floats follow the receiver's dtype/device (asarray_like); integer fields keep theirs
    return cls(*(asarray_like(record[key].numpy(), like) for key in names))
