"""Sparsifiers: rand-k (unbiased, scaled) and top-k (biased).

References
----------
Stich, S. U., Cordonnier, J.-B., Jaggi, M. "Sparsified SGD with Memory." NeurIPS 2018
(rand-k and top-k). Beznosikov, A., Horváth, S., Richtárik, P., Safaryan, M. "On Biased
Compression for Distributed Learning." JMLR 24, 2023 (the scaled, unbiased rand-k
``(d/k)·rand_k``; top-k as a contractive biased compressor).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._base import Compressor, index_bits


def _is_int(value: Any) -> bool:
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


@dataclass(frozen=True)
class _KOfD(Compressor):
    """Shared parameters of the sparsifiers: ``k`` entries kept, or a ``fraction`` of d."""

    k: int | None = None
    fraction: float | None = None

    def __post_init__(self) -> None:
        if (self.k is None) == (self.fraction is None):
            raise ValueError(f"{self.name}: give exactly one of k (entries kept) or fraction "
                             f"(of the model size) (got k={self.k!r}, "
                             f"fraction={self.fraction!r})")
        if self.k is not None and not (_is_int(self.k) and self.k >= 1):
            raise ValueError(f"{self.name}: k must be an integer >= 1 (got k={self.k!r})")
        if self.fraction is not None and not (
                isinstance(self.fraction, int | float) and not isinstance(self.fraction, bool)
                and 0 < self.fraction <= 1):
            raise ValueError(f"{self.name}: fraction must be a number in (0, 1] (got "
                             f"fraction={self.fraction!r})")

    def k_of(self, d: int) -> int:
        """Entries kept of a row of ``d``: ``k``, or ``⌈fraction · d⌉`` (at least 1)."""
        if self.k is not None:
            return int(self.k)
        return max(1, math.ceil(float(self.fraction) * d))  # type: ignore[arg-type]

    def check_size(self, d: int) -> None:
        if self.k_of(d) > d:
            raise ValueError(f"{self.name}: k={self.k} exceeds the size of a message row "
                             f"(d={d}); lower k, or give fraction= instead")


@dataclass(frozen=True)
class RandK(_KOfD):
    """Rand-k: ``k`` uniformly random coordinates, scaled by ``d/k`` (unbiased).

    ``C(x) = (d/k) Σ_{j∈S} x_j e_j`` with ``S`` a uniformly random k-subset of
    ``{1..d}``, so ``E[C(x)] = x`` and ``E‖C(x) − x‖² = (d/k − 1)‖x‖²``.

    Parameters
    ----------
    k : int, optional
        Coordinates kept per row.
    fraction : float in (0, 1], optional
        Or the kept share of the row: ``k = ⌈fraction · d⌉``. Exactly one of the two.

    Notes
    -----
    Encoding: the ``k`` values at the dtype's width ``w``, **no indices**: ``k · w`` bits.
    The subset is a pure function of ``(seed, round, client id, purpose)`` (counter-based:
    the ``k`` smallest of ``d`` uniform keys), which the server knows as well as the client
    (the seed is part of the run, shared at set-up), so it regenerates ``S`` itself. This
    shared-randomness convention is the usual one for rand-k; with indices sent, add
    ``k ⌈log2 d⌉`` bits (what :class:`TopK` pays, whose indices depend on the data).
    The ``d/k`` scale is applied by the receiver, so it costs nothing either.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.arange(1.0, 9.0).reshape(2, 4)
    >>> decoded, bits = RandK(k=1).compress(x, seed=0, round_=0, client_ids=[0, 1])
    >>> (decoded != 0).sum(axis=1).tolist(), bits.tolist()  # 1 value of 64 bits per row
    ([1, 1], [64, 64])
    """

    unbiased: ClassVar[bool] = True
    random: ClassVar[bool] = True
    name: ClassVar[str] = "rand_k"

    def row_bits(self, d: int, width: int) -> int:
        return self.k_of(d) * width

    def _decode(self, rows: np.ndarray, u: Any) -> np.ndarray:
        d = rows.shape[1]
        k = self.k_of(d)
        chosen = np.argsort(u, axis=1, kind="stable")[:, :k]
        out = np.zeros_like(rows)
        picked = np.take_along_axis(rows, chosen, axis=1)
        # k == d keeps x itself (scale 1): rand-d is the identity, bit for bit
        np.put_along_axis(out, chosen, picked if k == d else picked * (d / k), axis=1)
        return out


@dataclass(frozen=True)
class TopK(_KOfD):
    """Top-k: the ``k`` entries of largest magnitude (biased, contractive).

    ``C(x) = Σ_{j∈T} x_j e_j`` with ``T`` the ``k`` largest ``|x_j|`` (ties: the lower
    index first), so ``‖C(x) − x‖² ≤ (1 − k/d)‖x‖²``. Deterministic; use it with error
    feedback (:func:`fedcomp.compressors.ef21_step`, or ``compressed(..., ef21=True)``).

    Parameters
    ----------
    k : int, optional
        Entries kept per row.
    fraction : float in (0, 1], optional
        Or ``k = ⌈fraction · d⌉``. Exactly one of the two.

    Notes
    -----
    Encoding: ``k`` values at the dtype's width ``w`` and their ``k`` indices at
    ``⌈log2 d⌉`` bits each (fixed width): ``k (w + ⌈log2 d⌉)`` bits.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[0.5, -3.0, 1.0, 2.0]])
    >>> decoded, bits = TopK(k=2).compress(x, seed=0, round_=0, client_ids=[0])
    >>> decoded.tolist(), bits.tolist()  # 2 x (64 + 2) bits
    ([[0.0, -3.0, 0.0, 2.0]], [132])
    """

    name: ClassVar[str] = "top_k"

    def row_bits(self, d: int, width: int) -> int:
        return self.k_of(d) * (width + index_bits(d))

    def _decode(self, rows: np.ndarray, u: Any) -> np.ndarray:
        chosen = np.argsort(-np.abs(rows), axis=1, kind="stable")[:, :self.k_of(rows.shape[1])]
        out = np.zeros_like(rows)
        np.put_along_axis(out, chosen, np.take_along_axis(rows, chosen, axis=1), axis=1)
        return out
