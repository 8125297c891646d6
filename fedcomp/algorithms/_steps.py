"""A block's local steps as one loop an engine may roll: :func:`repeat_local_steps`.

An algorithm's ``K`` local steps are a Python loop, and on the host engines (NumPy, torch,
array-api-strict) they stay exactly that loop. Inside the compiled engine's trace a Python
loop is unrolled: the XLA program, its compile time and its kernels per round grow with
``K``. An oracle that can do better says so with a ``roll_steps(count, body, carry)``
method (the compiled engine's :class:`~fedcomp.runtime._compiled_trace.TracedOracle`: one
``jax.lax.fori_loop`` whose body is traced once, its minibatch draws and counts those of
the loop). This module names no engine: the algorithms layer never imports the runtime.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ._base import ClientContext

Carry = TypeVar("Carry")


def repeat_local_steps(ctx: ClientContext, count: int, body: Callable[[Any, Carry], Carry],
                       carry: Carry) -> Carry:
    """``carry`` after ``carry = body(k, carry)`` for ``k = 0 .. count - 1``.

    Parameters
    ----------
    ctx : ClientContext
        The block's context; its oracle decides how the loop runs.
    count : int
        Number of steps (a Python int: the same for every client of the block).
    body : callable
        ``body(k, carry) -> carry``: one local step, a pure function of the step index
        and the carry (a pytree of arrays of fixed shapes and dtypes) whose only effects
        are the oracle's and ``ctx.prox``'s calls. ``k`` is a Python int on the host and
        a traced integer where the loop is rolled: a body may compute with it (a step
        size ``(k + 1) η``), never branch on it.
    carry : pytree of arrays
        The state before the first step.

    Returns
    -------
    The state after the last step.

    Notes
    -----
    A body that needs a host value that changes from step to step (an ``active`` mask
    that varies with ``k``, a branch on ``k``) must stay a plain loop.

    Examples
    --------
    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> ctx = SimpleNamespace(oracle=object())  # a host oracle: a plain loop
    >>> float(repeat_local_steps(ctx, 3, lambda k, y: y + k, np.float64(1.0)))
    4.0
    """
    roll = getattr(ctx.oracle, "roll_steps", None)
    if roll is not None:
        return roll(count, body, carry)  # type: ignore[no-any-return]
    return unrolled_steps(count, body, carry)


def unrolled_steps(count: int, body: Callable[[Any, Carry], Carry], carry: Carry) -> Carry:
    """The Python loop of :func:`repeat_local_steps` (the host engines' and the unrolled
    trace's)."""
    for k in range(count):
        carry = body(k, carry)
    return carry
