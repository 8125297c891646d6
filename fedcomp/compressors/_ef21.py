"""EF21 error feedback: a biased compressor made to converge by compressing differences.

Reference
---------
Richtárik, P., Sokolov, I., Fatkhullin, I. "EF21: A New, Simpler, Theoretically Better, and
Practically Faster Error Feedback." NeurIPS 2021, arXiv:2106.05203 (Algorithm 1).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._array import Array
from ._base import Compressor


def ef21_step(compressor: Compressor, x: Array, g: Array, seed: int, round_: int,
              client_ids: Any, purpose: int = 0) -> tuple[Array, Array, np.ndarray]:
    """One EF21 message of a block of clients: ``c_i = C(x_i − g_i)``, ``g_i ← g_i + c_i``.

    Parameters
    ----------
    compressor : Compressor
        ``C``, typically a biased contractive one (top-k).
    x : array, shape (B, ...)
        What each client would send uncompressed (EF21: its gradient ``∇f_i(x^t)``).
    g : array, shape (B, ...)
        Each client's current estimate ``g_i``, known to the server as well.
    seed, round_, client_ids, purpose
        The keys of the compressor's draws (:meth:`Compressor.compress`).

    Returns
    -------
    c : array, shape (B, ...)
        The decoded messages (what is sent).
    g : array, shape (B, ...)
        The updated estimates ``g_i + c_i``; the server adds the same ``c_i`` to its copy
        (or to their average ``g = (1/n) Σ g_i``, EF21's server state).
    bits : numpy int64 array, shape (B,)
        The encoded size of each ``c_i``.

    Notes
    -----
    Algorithm 1 of Richtárik et al.: ``c_i^t = C(∇f_i(x^{t+1}) − g_i^t)``,
    ``g_i^{t+1} = g_i^t + c_i^t``, ``g^{t+1} = g^t + (1/n) Σ_i c_i^t``. For a message that
    stops changing, the error ``x_i − g_i`` of a contractive ``C``
    (``‖C(v) − v‖² ≤ (1 − α)‖v‖²``) shrinks geometrically: with top-k it is exactly 0 after
    ``⌈d/k⌉`` messages. With the identity ``c_i = x_i − g_i`` exactly, and ``g_i`` becomes
    ``x_i`` up to the rounding of ``g_i + (x_i − g_i)``.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.compressors import TopK
    >>> x, g = np.array([[3.0, -1.0, 2.0]]), np.zeros((1, 3))
    >>> for r in range(2):
    ...     c, g, bits = ef21_step(TopK(k=2), x, g, seed=0, round_=r, client_ids=[0])
    >>> g.tolist()
    [[3.0, -1.0, 2.0]]
    """
    c, bits = compressor.compress(x - g, seed, round_, client_ids, purpose)
    return c, g + c, bits
