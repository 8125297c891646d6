"""The correlated sparsifier of CompressedScaffnew and TAMUNA: a random pattern shared by
the clients of a round, keeping every coordinate at exactly ``s`` of them.

References
----------
Condat, L., Agarský, I., Richtárik, P. "Provably Doubly Accelerated Federated Learning: The
First Theoretically Successful Combination of Local Training and Communication Compression"
(CompressedScaffnew), arXiv:2210.13277. Condat, L., Agarský, I., Malinovsky, G., Richtárik,
P. "TAMUNA: Doubly Accelerated Distributed Optimization with Local Training, Compression, and
Partial Participation", arXiv:2302.09832. Szlendak, R., Tyurin, A., Richtárik, P.
"Permutation Compressors for Provably Faster Distributed Nonconvex Optimization", ICLR 2022
(PermK, the case ``s = 1``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from .._array import Array, asarray_like, bit_width, to_numpy
from .._random import STREAM_PATTERN, client_keys, uniform
from ._base import Compressor


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def round_order(seed: int, round_: int, n: int, purpose: int = 0) -> np.ndarray:
    """A uniformly random permutation of ``0..n-1`` common to every client of a round.

    Keyed by ``(seed, round, purpose)`` only (:data:`fedcomp._random.STREAM_PATTERN`), so
    every client and the server draw the same one whatever block they run in.

    Examples
    --------
    >>> sorted(round_order(0, 3, 5).tolist())
    [0, 1, 2, 3, 4]
    """
    keys = client_keys(seed, STREAM_PATTERN, round_, np.zeros(1, dtype=np.uint64))
    return np.argsort(uniform(keys, purpose, n)[0], kind="stable")


def template_mask(d: int, n: int, s: int, columns: np.ndarray) -> np.ndarray:
    """Rows ``columns`` of the ``n × d`` template pattern (transposed): bool ``(B, d)``.

    The template holds, for every coordinate ``j``, ``s`` ones: with ``d ≥ n/s`` in the
    columns ``(j s + t) mod n``, ``t = 0..s-1`` (the ones run cyclically through the
    columns, so each column gets ``⌊ds/n⌋`` or ``⌈ds/n⌉`` coordinates), with ``d < n/s``
    in the columns ``j + t d`` (each of the first ``sd`` columns one coordinate, the others
    none).

    Examples
    --------
    >>> template_mask(3, 4, 2, np.arange(4)).astype(int).tolist()
    [[1, 0, 1], [1, 0, 1], [0, 1, 0], [0, 1, 0]]
    >>> template_mask(3, 4, 2, np.arange(4)).sum(axis=0).tolist()  # every coordinate twice
    [2, 2, 2]
    """
    c = np.asarray(columns, dtype=np.int64)[:, None]
    j = np.arange(d, dtype=np.int64)[None, :]
    if d * s >= n:
        return np.asarray((c - j * s) % n < s)
    return np.asarray((c < s * d) & (c % d == j))


@dataclass(frozen=True)
class PermS(Compressor):
    """A random pattern over ``n`` clients keeping each coordinate at exactly ``s`` of them.

    Client ``i`` keeps the coordinates of column ``σ(i)`` of a fixed ``d × n`` binary
    template (every row has ``s`` ones; :func:`template_mask`), ``σ`` a uniformly random
    permutation of the ``n`` columns drawn once per round for all clients
    (:func:`round_order`). Decoded, ``C_i(x) = (n/s) q_i ⊙ x`` is unbiased
    (``P(q_ij = 1) = s/n``), and the average of the ``n`` clients' messages is
    ``(1/s) Σ_i q_i ⊙ x_i``: each coordinate averaged over the ``s`` clients that sent it,
    the aggregation of CompressedScaffnew and TAMUNA. ``s = 1`` is PermK (Szlendak et al.);
    ``s = n`` keeps everything and returns the rows themselves, bit for bit.

    Parameters
    ----------
    s : int, default 2
        How many clients keep each coordinate, ``1 <= s <= n``.
    n : int, default 2
        The clients sharing the pattern; client ``i`` takes position ``i``, so ids must be
        ``< n`` (with :func:`fedcomp.algorithms.compressed`: ``n = n_clients`` and full
        participation).

    Notes
    -----
    Encoding: the kept values at the dtype's width ``w``, **no indices**: the pattern is a
    pure function of ``(seed, round, purpose)``, which the server knows (the shared-seed
    convention of rand-k). A client sends ``⌊ds/n⌋`` or ``⌈ds/n⌉`` values (``d < n/s``:
    one or none), and the ``n`` clients together exactly ``d s`` values: ``s/n`` of the
    uncompressed upload. The pattern follows the construction the papers describe (a
    template with ``s`` ones a row, its columns permuted at random) as the coauthors'
    Flower baseline of TAMUNA writes it (``baselines/tamuna``, ``create_pattern``); the
    papers' own text could not be read completely here.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(1.0, 13.0).reshape(4, 3)
    >>> decoded, bits = PermS(s=2, n=4).compress(x, seed=0, round_=0, client_ids=[0, 1, 2, 3])
    >>> int(bits.sum()) == 3 * 2 * 64, (decoded != 0).sum(axis=0).tolist()
    (True, [2, 2, 2])
    """

    s: int = 2
    n: int = 2

    unbiased: ClassVar[bool] = True
    random: ClassVar[bool] = True
    name: ClassVar[str] = "perm_s"

    def __post_init__(self) -> None:
        if not (_is_int(self.n) and self.n >= 1):
            raise ValueError(f"perm_s: n (the clients sharing the pattern) must be an integer "
                             f">= 1 (got n={self.n!r})")
        if not (_is_int(self.s) and 1 <= self.s <= self.n):
            raise ValueError(f"perm_s: s (the clients keeping each coordinate) must be an "
                             f"integer in 1..n={self.n} (got s={self.s!r})")

    def row_bits(self, d: int, width: int) -> int:
        """The largest encoded row: ``⌈ds/n⌉`` values (``min(1, ...)`` for ``d < n/s``)."""
        return -(-d * self.s // self.n) * width

    def mask(self, d: int, seed: int, round_: int, positions: Any, purpose: int = 0
             ) -> np.ndarray:
        """The kept coordinates ``q_i`` (bool ``(B, d)``) of the clients at ``positions``."""
        positions = np.asarray(positions, dtype=np.int64)
        if positions.size and (positions.min() < 0 or positions.max() >= self.n):
            raise ValueError(f"perm_s: positions must be in 0..n-1={self.n - 1} (got "
                             f"{positions.tolist()}); set n to the number of clients that "
                             "share the pattern")
        order = round_order(seed, round_, self.n, purpose)
        columns = np.empty(self.n, dtype=np.int64)
        columns[order] = np.arange(self.n)  # the client at order[k] takes column k
        return template_mask(d, self.n, self.s, columns[positions])

    def compress(self, x: Array, seed: int, round_: int, client_ids: Any, purpose: int = 0
                 ) -> tuple[Array, np.ndarray]:
        client_ids = np.asarray(client_ids)
        if x.ndim < 1 or x.shape[0] != len(client_ids):
            raise ValueError(f"{self.name}: x must have one row per client: got shape "
                             f"{tuple(x.shape)} for {len(client_ids)} client ids")
        d = int(np.prod(x.shape[1:]))
        q = self.mask(d, seed, round_, client_ids, purpose)
        bits = q.sum(axis=1).astype(np.int64) * bit_width(x)
        if self.s == self.n:  # every coordinate at every client: nothing to drop or scale
            return x, bits
        rows = to_numpy(x).reshape(len(client_ids), d)
        decoded = np.where(q, rows * (self.n / self.s), 0.0).astype(rows.dtype)
        return asarray_like(decoded.reshape(x.shape), x), bits
