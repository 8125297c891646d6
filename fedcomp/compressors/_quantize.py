"""Stochastic quantisers: natural compression and QSGD (both unbiased).

References
----------
Horváth, S., Ho, C.-Y., Horváth, Ľ., Sahu, A. N., Canini, M., Richtárik, P. "Natural
Compression for Distributed Deep Learning." MSML 2022, arXiv:1905.10988 (``C_nat``).
Alistarh, D., Grubic, D., Li, J., Tomioka, R., Vojnovic, M. "QSGD: Communication-Efficient
SGD via Gradient Quantization and Encoding." NeurIPS 2017 (the quantiser ``Q_s``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ._base import Compressor, index_bits


def exponent_bits(width: int) -> int:
    """Exponent bits of the IEEE float of ``width`` bits (5, 8, 11 for 16, 32, 64)."""
    return {16: 5, 32: 8, 64: 11}[width]


@dataclass(frozen=True)
class Natural(Compressor):
    """Natural compression: each entry rounded at random to a neighbouring power of two.

    ``C(t) = sign(t) 2^⌊log2|t|⌋`` with probability ``(2^⌈log2|t|⌉ − |t|) / 2^⌊log2|t|⌋``,
    else ``sign(t) 2^⌈log2|t|⌉`` (Horváth et al. 2022, eq. (2)): unbiased, with
    ``E(C(t) − t)² ≤ t²/8``. Powers of two are kept exactly; 0 stays 0.

    Notes
    -----
    Encoding: the sign bit and the exponent field of the dtype per entry, no mantissa:
    ``1 + 8 = 9`` bits for float32 (the paper's count), ``1 + 11 = 12`` for float64 (its
    exponents need the wider field), ``d (1 + e)`` bits a row. Zero is the reserved
    exponent code, as in IEEE floats. Entries below the smallest normal number ``m`` are
    rounded at random to ``0`` or ``m`` (probability ``|t|/m``), which keeps the
    estimate unbiased with only normal powers of two on the wire. An entry above the
    largest power of two of the dtype could round up to infinity: the runner stops long
    before (its divergence check).

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[1.0, -4.0, 0.0, 3.0]])
    >>> decoded, bits = Natural().compress(x, seed=0, round_=0, client_ids=[0])
    >>> decoded[0, :3].tolist(), decoded[0, 3] in (2.0, 4.0), bits.tolist()
    ([1.0, -4.0, 0.0], True, [48])
    """

    unbiased: ClassVar[bool] = True
    random: ClassVar[bool] = True
    name: ClassVar[str] = "natural"

    def row_bits(self, d: int, width: int) -> int:
        return d * (1 + exponent_bits(width))

    def _decode(self, rows: np.ndarray, u: Any) -> np.ndarray:
        size = np.abs(rows)
        _, exponent = np.frexp(size)  # size = m 2^e, m in [1/2, 1): 2^(e-1) <= size < 2^e
        low = np.ldexp(np.ones_like(size), exponent - 1)
        tiny = np.finfo(rows.dtype).tiny
        low = np.where(size < tiny, 0.0, low).astype(rows.dtype)
        # P(up) = (size − low) / low: exact, low being a power of two
        gap = np.where(size < tiny, tiny, low).astype(rows.dtype)
        up = u < (size - low) / gap
        return (np.sign(rows) * np.where(up, low + gap, low)).astype(rows.dtype)


@dataclass(frozen=True)
class QSGD(Compressor):
    """QSGD's stochastic quantiser with ``s`` levels (unbiased).

    ``Q_s(x)_j = ‖x‖₂ sign(x_j) ξ_j / s`` with ``ξ_j = l + 1`` with probability
    ``s|x_j|/‖x‖₂ − l`` else ``l``, ``l = ⌊s|x_j|/‖x‖₂⌋`` (Alistarh et al. 2017, Sec. 3.1),
    so ``E[Q_s(x)] = x`` and ``E‖Q_s(x) − x‖² ≤ min(d/s², √d/s) ‖x‖²``. The norm is of the
    whole row (one client's message field).

    Parameters
    ----------
    levels : int, default 1
        ``s >= 1``, the quantisation levels of ``|x_j|/‖x‖₂`` in ``{0, 1/s, ..., 1}``.

    Notes
    -----
    Encoding, plain fixed width (not the paper's Elias integer coding, which is shorter for
    sparse level vectors): the norm at the dtype's width ``w``, and per entry a sign bit and
    the level ``ξ_j ∈ {0..s}`` in ``⌈log2(s + 1)⌉`` bits: ``w + d (1 + ⌈log2(s+1)⌉)`` bits.

    Examples
    --------
    >>> import numpy as np
    >>> x = np.array([[3.0, -4.0]])
    >>> decoded, bits = QSGD(levels=1).compress(x, seed=0, round_=0, client_ids=[0])
    >>> set(np.abs(decoded[0]).tolist()) <= {0.0, 5.0}, bits.tolist()  # 64 + 2 x (1 + 1)
    (True, [68])
    """

    levels: int = 1
    unbiased: ClassVar[bool] = True
    random: ClassVar[bool] = True
    name: ClassVar[str] = "qsgd"

    def __post_init__(self) -> None:
        if not (isinstance(self.levels, int | np.integer) and not isinstance(self.levels, bool)
                and self.levels >= 1):
            raise ValueError(f"qsgd: levels must be an integer >= 1 (got "
                             f"levels={self.levels!r})")

    def row_bits(self, d: int, width: int) -> int:
        return width + d * (1 + index_bits(int(self.levels) + 1))

    def _decode(self, rows: np.ndarray, u: Any) -> np.ndarray:
        s = int(self.levels)
        norm = np.linalg.norm(rows, axis=1, keepdims=True)
        safe = np.where(norm > 0, norm, 1.0)
        scaled = np.minimum(s * np.abs(rows) / safe, s)  # rounding can pass s by an ulp
        level = np.floor(scaled)
        level = level + (u < scaled - level)
        return (np.sign(rows) * level * (norm / s)).astype(rows.dtype)
