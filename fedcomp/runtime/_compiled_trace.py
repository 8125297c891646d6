"""What a compiled call traces: a block's data, oracle and counts.

The pieces of :mod:`fedcomp.runtime._compiled` that run inside ``jax.jit`` (jax itself and
its checks are :mod:`fedcomp.runtime._jax`'s): the counting calls recorded while tracing
(:class:`CounterLog`, replayed after every call), the counter-based minibatch indices
computed in the trace (:func:`traced_minibatch_indices`: :mod:`fedcomp._random`'s own on
jax's namespace), and a block's data and oracle as the traced ``client_update`` sees them
(:class:`DataArrays`, :class:`Rows`, :class:`TracedOracle`).
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like
from .._random import minibatch_indices
from ..algorithms._steps import unrolled_steps
from ..data import Batch
from ..oracle import Counters, Oracle
from ..problem import Problem
from ._jax import Uncompilable, require_jax

#: Whether a traced block's local steps (:func:`~fedcomp.algorithms._steps.repeat_local_steps`)
#: run as one ``jax.lax.fori_loop`` (:meth:`TracedOracle.roll_steps`) or unrolled, one copy
#: of the step per ``k``; tests and benchmarks flip it. Rolled by measurement on a busy
#: 2-core CPU (benchmarks/jax_networks.py's rounds in float32, CPU seconds, rolled vs
#: unrolled): compiling feddr_mlp took 0.9 vs 1.7 s at K = 10 and 0.8 vs 4.3 s at K = 40,
#: fedcanon_nn's CNN 1.8 vs 4.7 s and 2.0 vs 14.4 s; a round took 2.4 vs 3.2 ms and 4.5
#: vs 5.4 ms (MLP), 235 vs 256 ms and 990 vs 1070 ms (CNN, whose wall-clock rounds were
#: within the machine's noise either way).
ROLLED_STEPS = True

# --- counters --------------------------------------------------------------------------------

class CounterLog:
    """The counts of one traced call, replayed after every call of its compilation.

    A traced call counts into the same :class:`~fedcomp.oracle.Counters` vocabulary as
    every engine, in two ways. The regularizer's prox is counted by
    :func:`~fedcomp.runtime._round.counted_prox` into :attr:`counters` while tracing (its
    count is the block's size, a Python constant of the trace). An oracle's counting calls
    (``count_grad``, ``count_value``, ``count_hessian`` of
    :class:`~fedcomp.oracle.Oracle`) need its clients' sample counts, which a traced block
    of sampled clients does not have: they are recorded in :attr:`calls` (``(method,
    args)``, ``args`` host values: an ``active`` mask must be a NumPy array while tracing)
    and replayed on a host oracle of the call's block.
    """

    def __init__(self) -> None:
        self.counters = Counters()
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def record(self, method: str, *args: Any) -> None:
        self.calls.append((method, args))

    def delta(self, oracle: Oracle | None) -> Counters:
        """The counters one call adds (``oracle``: a host oracle of the call's block, whose
        client sample counts the gradient counts need; ``None`` where nothing was
        recorded, a server step)."""
        counters = Counters()
        _add(counters, self.counters)
        if self.calls:
            assert oracle is not None
            oracle.counters = counters
            for method, args in self.calls:
                getattr(oracle, method)(*args)
        return counters


def _add(counters: Counters, delta: Counters) -> None:
    for name, value in delta.as_dict().items():
        if value:
            setattr(counters, name, getattr(counters, name) + value)


class _Mark(NamedTuple):
    """Where a :class:`CounterLog` stood before a rolled loop: its calls and counters."""

    calls: int
    counters: dict[str, int]

    @classmethod
    def of(cls, log: CounterLog) -> _Mark:
        return cls(len(log.calls), log.counters.as_dict())

    def rewind(self, log: CounterLog) -> None:
        """``log`` as it was at the mark (a body traced again starts from there)."""
        del log.calls[self.calls:]
        for name, value in self.counters.items():
            setattr(log.counters, name, value)

    def repeat(self, log: CounterLog, times: int) -> None:
        """What ``log`` gained since the mark (one step's), gained ``times`` in all."""
        log.calls.extend(log.calls[self.calls:] * (times - 1))
        for name, value in self.counters.items():
            gained = getattr(log.counters, name) - value
            setattr(log.counters, name, value + gained * times)


# --- counter-based minibatches, traced --------------------------------------------------------

def traced_minibatch_indices(seed: int, round_: Any, client_ids: Any, counts: Any, draw: Any,
                             batch_size: int, replace: bool, max_samples: int) -> Any:
    """:func:`fedcomp._random.minibatch_indices` inside ``jax.jit``: the same function on
    jax's namespace, so the same indices.

    ``round_``, ``client_ids``, ``counts`` and ``draw`` (the draw counter of rolled local
    steps, :meth:`TracedOracle.roll_steps`) may be traced; ``seed`` and the sizes are
    Python ints (``max_samples``: the data's padded sample axis).
    """
    return minibatch_indices(seed, round_, client_ids, counts, draw, batch_size, replace,
                             xp=require_jax().numpy, max_samples=max_samples)


# --- a block's data and oracle inside the trace ----------------------------------------------

class DataArrays(NamedTuple):
    """Every client's data as the compiled calls take it (arguments, never constants)."""

    features: Array      # (n, m, *feature_shape)
    targets: Array       # (n, m)
    sample_weights: Array  # (n, m): 1/n_i on real rows
    counts: Array        # (n,) int64
    weights: Array       # (n,) π_i in the data's dtype

    @classmethod
    def of(cls, problem: Problem) -> DataArrays:
        data, like = problem.data, problem.data.like
        jnp = require_jax().numpy
        return cls(data.features, data.targets, data.sample_weights(),
                   jnp.asarray(np.asarray(data.counts, dtype=np.int64)),
                   asarray_like(problem.weights, like))


class Rows(NamedTuple):
    """Which rows of the data a block holds: a static range, or traced ids."""

    start: int | None  # a range start..stop (static), or None for traced ``ids``
    stop: int | None
    ids: Any            # the block's client ids (traced int64, shape (B,))

    def take(self, x: Array) -> Array:
        if self.start is not None:
            return x[self.start:self.stop, ...]
        return require_jax().numpy.take(x, self.ids, axis=0)

    def put(self, full: Array, rows: Array) -> Array:
        """``full`` with this block's rows replaced by ``rows`` (a new array)."""
        if self.start is not None:
            if self.start == 0 and self.stop == full.shape[0]:
                return rows.astype(full.dtype)
            return full.at[self.start:self.stop, ...].set(rows)
        return full.at[self.ids, ...].set(rows)


class TracedOracle(Oracle):
    """The :class:`~fedcomp.oracle.Oracle` of a block inside ``jax.jit``.

    The host oracle's gradients, draws and counting calls; only where they go differs. Its
    batches come from the traced data arrays (the minibatch indices are
    :func:`fedcomp._random.minibatch_indices` on jax's namespace, the host oracle's own
    draw); its counting calls are recorded in a :class:`CounterLog`, to be replayed on a
    host oracle of the block after each call.
    """

    def __init__(self, problem: Problem, arrays: DataArrays, rows: Rows, round_: Any,
                 seed: int, batch_size: int | None, log: CounterLog, size: int) -> None:
        self.problem, self.loss = problem, problem.loss
        self.arrays, self.rows, self.log, self._size = arrays, rows, log, size
        self.client_ids = rows.ids
        self.round, self.seed, self.batch_size = round_, seed, batch_size
        self._draws = 0
        self._full: Batch | None = None
        # the draws of the host's oracle, on jax's namespace inside the trace
        self.xp, self.max_samples = require_jax().numpy, int(arrays.features.shape[1])

    @property
    def size(self) -> int:
        return self._size

    @property
    def counts(self) -> Any:  # traced: host code that needs them runs eagerly instead
        return self.rows.take(self.arrays.counts)

    def full_batch(self) -> Batch:
        if self._full is None:
            a, take = self.arrays, self.rows.take
            self._full = Batch(take(a.features), take(a.targets), take(a.sample_weights))
        return self._full

    def streamed_batch(self, draw: int) -> Batch:
        raise Uncompilable("streaming samples are drawn on the host each call")

    def minibatch(self, index: Any) -> Batch:
        """The block's rows at ``index``, gathered from the traced data arrays."""
        jnp = require_jax().numpy
        a, max_samples = self.arrays, self.max_samples
        b, m = index.shape
        rows = (jnp.arange(self.rows.start, self.rows.stop) if self.rows.start is not None
                else self.rows.ids)
        flat = jnp.reshape(rows[:, None] * max_samples + index, (-1,))
        feature_shape = tuple(a.features.shape[2:])
        feats = jnp.take(jnp.reshape(a.features, (-1, *feature_shape)), flat, axis=0)
        targs = jnp.take(jnp.reshape(a.targets, (-1,)), flat, axis=0)
        if self.problem.data.sample_weight is not None:
            # the importance weights of ClientData.minibatch, taken from the normalised rows
            # (sample_weights, s_ij / Σ_j s_ij): n_i s_ij / (m Σ_j s_ij)
            normalised = jnp.take(jnp.reshape(a.sample_weights, (-1,)), flat, axis=0)
            counts = jnp.asarray(self.counts, dtype=a.features.dtype)
            weights = jnp.reshape(normalised, (b, m)) * counts[:, None] / m
        else:
            weights = jnp.full((b, m), 1.0 / m, dtype=a.features.dtype)
        return Batch(jnp.reshape(feats, (b, m, *feature_shape)), jnp.reshape(targs, (b, m)),
                     weights)

    def roll_steps(self, count: int, body: Any, carry: Any) -> Any:
        """:func:`~fedcomp.algorithms._steps.repeat_local_steps` as one
        ``jax.lax.fori_loop``: ``body`` traced once, whatever ``count``.

        Its minibatch draw counter is carried through the loop (a traced integer from
        then on), so step ``k`` draws the indices the unrolled loop's step ``k`` draws;
        the counting calls and prox counts of the body's trace are repeated ``count``
        times in the :class:`CounterLog`, as the unrolled loop records them. Unrolled
        where :data:`ROLLED_STEPS` is off or there is a single step.
        """
        if not ROLLED_STEPS or count < 2:
            return unrolled_steps(count, body, carry)
        jax = require_jax()
        jnp = jax.numpy
        # made outside the loop: a batch cached inside its trace would leak that trace's values
        self.full_batch()
        mark = _Mark.of(self.log)

        def step(k: Any, state: tuple[Any, Any]) -> tuple[Any, Any]:
            mark.rewind(self.log)  # jax may trace a loop's body more than once
            inner, self._draws = state
            inner = body(k, inner)
            return inner, jnp.asarray(self._draws, dtype=jnp.int64)

        carry, self._draws = jax.lax.fori_loop(
            0, count, step, (carry, jnp.asarray(self._draws, dtype=jnp.int64)))
        mark.repeat(self.log, count)
        return carry

    def _host(self, active: Any) -> Any:
        if active is None or isinstance(active, np.ndarray):
            return active
        raise Uncompilable("the clients still at work (an `active` mask) depend on the data")

    def count_grad(self, full: bool, active: Any) -> None:
        self.log.record("count_grad", full, self._host(active))

    def count_value(self, active: Any) -> None:
        self.log.record("count_value", self._host(active))

    def count_hessian(self, active: Any) -> None:
        self.log.record("count_hessian", self._host(active))
