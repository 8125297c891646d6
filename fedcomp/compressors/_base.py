"""The compressor interface and the identity compressor.

A compressor is a frozen dataclass of validated parameters with one pure function over a
block of clients, :meth:`Compressor.compress`: each row (one client's message field) is
encoded, and the decoded (dequantised) row is returned with the exact size of its encoding
in bits. Randomness is counter-based, keyed by ``(seed, round, client id, purpose)``
(:data:`fedcomp._random.STREAM_COMPRESSION`), so a client's compressed message never depends
on which other clients share its block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._array import Array, asarray_like, bit_width, to_numpy
from .._random import STREAM_COMPRESSION, client_keys, uniform


def index_bits(d: int) -> int:
    """``⌈log2 d⌉``: the bits of one coordinate index into a vector of ``d`` entries.

    Examples
    --------
    >>> [index_bits(d) for d in (1, 2, 3, 4, 5, 1024, 1025)]
    [0, 1, 2, 2, 3, 10, 11]
    """
    return (d - 1).bit_length()


@dataclass(frozen=True)
class Compressor:
    """Base class: encode each row of a block, return the decoded rows and their bits.

    Subclasses implement :meth:`row_bits` (the exact encoded size of one row) and
    ``_decode`` (what the receiver reconstructs, on NumPy rows ``(B, d)``).
    """

    #: ``E[C(x)] = x`` for every x (checked statistically by the tests).
    unbiased: ClassVar[bool] = False
    #: the registry name (for messages and ``fedcomp list``)
    name: ClassVar[str] = "compressor"

    def row_bits(self, d: int, width: int) -> int:
        """Exact encoded size in bits of one row of ``d`` entries of ``width`` bits."""
        raise NotImplementedError

    def _decode(self, rows: np.ndarray, u: Any) -> np.ndarray:
        raise NotImplementedError

    #: whether ``_decode`` reads uniform draws (``u``: ``(B, d)`` floats in [0, 1))
    random: ClassVar[bool] = False

    def compress(self, x: Array, seed: int, round_: int, client_ids: Any, purpose: int = 0
                 ) -> tuple[Array, np.ndarray]:
        """Compress each row of ``x`` (one client each); the decoded rows and their bits.

        Parameters
        ----------
        x : array, shape (B, ...)
            One message field per client (any trailing shape: a row is flattened).
        seed, round_ : int
            The run's seed and the round: with the client id and ``purpose`` they key the
            draws (:func:`fedcomp._random.client_keys` on ``STREAM_COMPRESSION``).
        client_ids : int array, shape (B,)
            The clients' global ids.
        purpose : int, default 0
            Keeps independent compressions of the same client in the same round apart
            (e.g. the number of the upload field).

        Returns
        -------
        decoded : array, shape (B, ...)
            What the receiver reconstructs, in the dtype and namespace of ``x``.
        bits : numpy int64 array, shape (B,)
            The exact encoded size of each row.
        """
        client_ids = np.asarray(client_ids)
        if x.ndim < 1 or x.shape[0] != len(client_ids):
            raise ValueError(f"{self.name}: x must have one row per client: got shape "
                             f"{tuple(x.shape)} for {len(client_ids)} client ids")
        d = math.prod(x.shape[1:])
        self.check_size(d)
        bits = np.full(len(client_ids), self.row_bits(d, bit_width(x)), dtype=np.int64)
        rows = to_numpy(x).reshape(len(client_ids), d)
        u = None
        if self.random:  # counter-based: client i's draws never depend on the block
            keys = client_keys(seed, STREAM_COMPRESSION, round_, client_ids)
            u = uniform(keys, purpose, d)
        decoded = self._decode(rows, u).reshape(x.shape)
        return asarray_like(decoded, x), bits

    def check_size(self, d: int) -> None:
        """Raise a ``ValueError`` naming the fix when rows of ``d`` entries cannot be coded."""


@dataclass(frozen=True)
class Identity(Compressor):
    """No compression: the row as it is, ``d`` values at the dtype's width.

    Encoding: ``d · w`` bits for ``d`` entries of ``w`` bits (64 for float64, 32 for
    float32), the size the runner counts for any uncompressed message. ``compress`` returns
    ``x`` itself, so a compressed algorithm with the identity is the plain one bit for bit.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(6.0).reshape(2, 3)
    >>> decoded, bits = Identity().compress(x, seed=0, round_=0, client_ids=[0, 1])
    >>> decoded is x, bits.tolist()
    (True, [192, 192])
    """

    unbiased: ClassVar[bool] = True
    name: ClassVar[str] = "identity"

    def row_bits(self, d: int, width: int) -> int:
        return d * width

    def compress(self, x: Array, seed: int, round_: int, client_ids: Any, purpose: int = 0
                 ) -> tuple[Array, np.ndarray]:
        n = len(np.asarray(client_ids))
        return x, np.full(n, self.row_bits(math.prod(x.shape[1:]), bit_width(x)), np.int64)
