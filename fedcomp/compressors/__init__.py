"""Compressors: what a client's message becomes on the wire, and its exact size in bits.

Every compressor is a frozen dataclass holding validated parameters, with one pure function
over a block of clients, ``compress(x, seed, round_, client_ids, purpose=0)``, which returns
the decoded rows and the exact encoded size of each row in bits (each class's docstring
states its encoding). Draws are counter-based, keyed by ``(seed, round, client, purpose)``:
a client's compressed message does not depend on its block.

Use the classes directly, or build one by name (as configuration files do) with
:func:`make_compressor`; :data:`COMPRESSORS` lists them. :func:`ef21_step` is EF21 error
feedback for biased ones; :func:`fedcomp.algorithms.compressed` compresses an algorithm's
uploads.
"""

from __future__ import annotations

from typing import Any

from .._registry import Entry, Registry
from ._base import Compressor, Identity, index_bits
from ._ef21 import ef21_step
from ._pattern import PermS
from ._quantize import QSGD, Natural
from ._sparsify import RandK, TopK

#: Compressor classes by configuration name, with one line each for ``fedcomp list``.
COMPRESSORS: Registry[Entry] = Registry("compressor", [
    Entry("identity", Identity, "no compression: d values at the dtype's width"),
    Entry("rand_k", RandK, "k random coordinates scaled by d/k, unbiased; k values, indices "
                           "from the shared seed"),
    Entry("top_k", TopK, "k largest magnitudes, biased (use ef21); k values + k indices"),
    Entry("natural", Natural, "random rounding to a power of two, unbiased; sign + exponent "
                              "(Horvath et al.)"),
    Entry("qsgd", QSGD, "s levels of |x_j|/||x||, unbiased; norm + sign + level bits "
                        "(Alistarh et al. 2017)"),
    Entry("perm_s", PermS, "shared random pattern: each coordinate kept by exactly s of n "
                           "clients, scaled n/s; values only (Condat et al., TAMUNA)"),
])

#: One line per compressor, for ``fedcomp list``.
DESCRIPTIONS = COMPRESSORS.describe()


def make_compressor(name: str, **params: Any) -> Compressor:
    """Build the compressor registered as ``name`` with keyword ``params``.

    Raises
    ------
    ValueError
        For an unknown name or parameter (the message lists the valid ones) or an invalid
        value.

    Examples
    --------
    >>> make_compressor("top_k", k=5)
    TopK(k=5, fraction=None)
    >>> make_compressor("qsgd", levels=4).row_bits(10, 64)  # 64 + 10 x (1 + 3)
    104
    """
    compressor: Compressor = COMPRESSORS.make(name, **params)
    return compressor


__all__ = ["COMPRESSORS", "DESCRIPTIONS", "QSGD", "Compressor", "Identity", "Natural", "PermS",
           "RandK", "TopK", "ef21_step", "index_bits", "make_compressor"]
