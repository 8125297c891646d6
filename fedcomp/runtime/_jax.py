"""jax for the compiled engine, in one leaf module: the import and its checks.

Every module of the runtime that touches jax imports it through :func:`require_jax` (jax
is an extra: ``pip install 'fedcomp[jax]'``), and :func:`simulate` validates its
``compile`` argument with :func:`check_compile` before any work. Nothing here imports
another module of :mod:`fedcomp.runtime` but the compilation cache's policy
(:mod:`fedcomp.runtime._jax_cache`, itself a leaf), which :func:`jax_like` and
:func:`check_x64` switch on.
"""

from __future__ import annotations

from typing import Any

from .._array import Array, is_jax
from ._jax_cache import use_compilation_cache

#: ``simulate``'s ``compile`` values.
COMPILE_CHOICES = ("auto", True, False)


class Uncompilable(Exception):
    """Raised while tracing by the engine itself: a value only the host has."""


def require_jax() -> Any:
    """The ``jax`` module, or one error naming the extra to install."""
    from .._extras import require

    return require("jax", "the jax backend (the compiled engine)")


def jax_like(dtype: str = "float64") -> Array:
    """An empty jax array of ``dtype``: pass it to ``ClientData.to`` to move data to jax.

    This switches on ``jax_enable_x64`` for the whole process, as the compiled engine
    needs: its counter-based minibatch draws are uint64 hashes, and the ``float64``
    backend holds float64 arrays (jax makes float32 ones without it). Arrays created as
    float32 stay float32, so ``dtype="float32"`` runs in float32 all the same.

    It also points jax's persistent compilation cache at ``~/.cache/fedcomp/jax`` (moved by
    ``$FEDCOMP_JAX_CACHE``, ``off`` switches it off; a cache set up in jax is left alone),
    so a round compiled once is read back by later runs and processes
    (:mod:`fedcomp.runtime._jax_cache`).

    Parameters
    ----------
    dtype : {"float64", "float32"}

    Returns
    -------
    jax.Array
        Shape ``(0,)``, on jax's default device.

    Examples
    --------
    >>> import numpy as np, fedcomp
    >>> from fedcomp.runtime import jax_like
    >>> data = fedcomp.ClientData.from_lists([np.ones((3, 2))], [np.ones(3)])
    >>> data.to(jax_like()).features.dtype  # doctest: +SKIP
    dtype('float64')
    """
    if dtype not in ("float64", "float32"):
        raise ValueError(f"jax_like: dtype must be 'float64' or 'float32' (got {dtype!r})")
    jax = require_jax()
    jax.config.update("jax_enable_x64", True)
    use_compilation_cache()  # compile each round once per machine, not per process
    return jax.numpy.zeros(0, dtype=getattr(jax.numpy, dtype))


def check_x64() -> None:
    """Raise unless ``jax_enable_x64`` is on (the engine hashes in uint64)."""
    jax = require_jax()
    if not jax.config.read("jax_enable_x64"):
        raise ValueError("the jax engine needs 64-bit types (its counter-based minibatch "
                         "draws are uint64 hashes): call jax.config.update('jax_enable_x64', "
                         "True) before creating the arrays, or build them with "
                         "fedcomp.runtime.jax_like(), which does")
    use_compilation_cache()  # also for jax arrays made without jax_like


def check_compile(compile_: Any, data: Any, sparse: bool = False) -> None:
    """Validate ``simulate``'s ``compile`` argument against the data's namespace (and
    sparsity: sparse jax data run eagerly, ``compile='auto'`` choosing so)."""
    if not any(compile_ is c or (compile_ == c and isinstance(c, str)) for c in
               COMPILE_CHOICES):
        raise ValueError(f"compile must be 'auto', True or False (got {compile_!r})")
    if compile_ is True and not is_jax(data):
        raise ValueError("compile=True runs the rounds under jax.jit: it needs the data on "
                         "jax arrays (backend = 'jax', or problem.data.to(fedcomp.runtime."
                         "jax_like()))")
    if compile_ is True and sparse:
        raise ValueError("compile=True: the compiled engine runs dense features only; sparse "
                         "jax data (BCOO) run eagerly with compile='auto' or compile=False")
