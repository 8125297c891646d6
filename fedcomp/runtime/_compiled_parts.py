"""The client and server executors of the compiled engine, each a :class:`_Part`.

:class:`CompiledClients` runs a round's blocks of participants under ``jax.jit`` (a
block's states gathered and scattered inside the call, cut into measured sub-blocks:
:func:`sub_block_size`, :func:`even_part`) and replays each call's counting calls;
:class:`CompiledServer` runs ``server_update``. Each leaves to the eager path the calls
its part cannot trace (:mod:`fedcomp.runtime._compiled_fallback`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import Array, asarray_like
from ..algorithms._base import FederatedAlgorithm
from ..oracle import Counters, Oracle
from ..problem import Problem
from ._compiled_fallback import EAGER, _Part, _round
from ._compiled_trace import (
    CounterLog,
    DataArrays,
    Rows,
    TracedOracle,
    _add,
)
from ._jax import check_x64, require_jax
from ._round import EagerServer, client_context, count_uploads, counted_prox, server_context


def _block_ids(block: slice | np.ndarray) -> np.ndarray:
    """The client ids of a block (a slice of consecutive ids, or the ids)."""
    return np.arange(block.start, block.stop) if isinstance(block, slice) else block


def _block_key(block: slice | np.ndarray) -> tuple[int | None, int | None, tuple[Any, ...]]:
    """``(start, stop, key)``: a range block's static bounds (``None`` for traced ids) and
    the key of its counters (a range, or the ids: their sample counts differ)."""
    if isinstance(block, slice):
        start, stop = int(block.start), int(block.stop)
        return start, stop, (start, stop, stop - start)
    return None, None, (None, None, len(block), block.tobytes())


def _part_of(block: slice | np.ndarray, ids: np.ndarray, offset: int, length: int
             ) -> slice | np.ndarray:
    """Clients ``offset .. offset + length - 1`` of a block, as the block is (a range or
    ids)."""
    if isinstance(block, slice):
        return slice(block.start + offset, block.start + offset + length)
    return ids[offset:offset + length]


def even_part(size: int, most: int) -> int:
    """The sub-block of a block of ``size`` clients cut into parts of at most ``most``, as
    equal as can be: ``ceil(size / ceil(size / most))``.

    A lone remainder is one more call of another shape in the traced round (at 100 clients
    × 20 × 1024 on a 2-core CPU, sub-blocks of 32 and a rest of 4 took 6.9 ms a ZA1 round,
    four of 25 took 5.2 ms).

    Examples
    --------
    >>> even_part(100, 32), even_part(1000, 256), even_part(7, 10)
    (25, 250, 7)
    """
    parts = -(-size // max(1, min(most, size)))
    return -(-size // parts)


def sub_block_size(problem: Problem, batch_size: int | None) -> int:
    """Clients per sub-block of a compiled call: measured on a CPU (the jit-compiled
    gradient, :func:`~fedcomp.runtime._blocks.measured_block_size`), all of them on an
    accelerator."""
    from ._blocks import compiled_local_steps, measured_block_size
    from ._clients import cache_block_size

    devices = getattr(problem.data.like, "devices", None)
    if devices is not None and any(d.platform != "cpu" for d in devices()):
        return problem.n_clients
    return measured_block_size(problem, batch_size, "jax-compiled", rule=cache_block_size,
                               work=compiled_local_steps(problem.loss, problem.n_clients))


def _flatten(x: Array, rows: int) -> Array:
    """``(blocks, per block, ...)`` -> ``(rows, ...)``."""
    return require_jax().numpy.reshape(x, (rows, *x.shape[2:]))


def _concat_traced(parts: list[Any]) -> Any:
    """NamedTuples of arrays concatenated field by field along the clients' axis."""
    if len(parts) == 1:
        return parts[0]
    jnp = require_jax().numpy
    return type(parts[0])(*(jnp.concatenate(fields, axis=0)
                            for fields in zip(*parts, strict=True)))


def _device_ids(block: slice | np.ndarray) -> Any:
    return require_jax().numpy.asarray(_block_ids(block), dtype="int64")


def _bounded(cache: dict[Any, Any], key: Any, make: Callable[[], Any]) -> Any:
    """``cache[key]``, made on a miss; emptied past 64 entries (client sampling: a new
    set of participants most rounds)."""
    value = cache.get(key)
    if value is None:
        if len(cache) > 64:
            cache.clear()
        value = cache[key] = make()
    return value


class CompiledClients:
    """The client executor of the jax engine (the clients of :func:`simulate`).

    Same ``run_round`` and ``client_states`` as
    :class:`~fedcomp.runtime._clients.LocalClients`, which runs the calls the compiled
    part leaves to the eager path.
    """

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                 counters: Counters, settings: Any) -> None:
        check_x64()
        self.algorithm, self.problem, self.counters, self.settings = (
            algorithm, problem, counters, settings)
        self.client_states = client_states
        self.arrays = DataArrays.of(problem)
        #: per traced block: its pieces ``(offset, clients, counting calls)``
        self.logs: dict[Any, list[tuple[int, int, CounterLog]]] = {}
        self.deltas: dict[Any, Counters] = {}
        self.ids: dict[Any, Any] = {}
        self.part = _Part(self.block, algorithm.name, "client update", settings.compile,
                          static=("start", "stop"))
        self.sub_block = sub_block_size(problem, settings.batch_size)

    def block(self, round_: Any, message: Any, states: Any, ids: Any, arrays: DataArrays, *,
              low: int | None, start: int | None, stop: int | None) -> tuple[Any, Any]:
        """The traced local work of one block, its states gathered and scattered inside.

        A block larger than :attr:`sub_block` runs as a ``lax.map`` over sub-blocks of at
        most that many clients, as equal as can be (:func:`even_part`; one call for the
        rest where they cannot be equal), each doing all its local steps
        before the next starts: its data stay in cache across the steps, as the NumPy
        engine's blocks do (at 1000 clients x 20 x 100, 2.5x faster than the whole block
        at each step). Clients never interact within ``client_update``, so the cut
        changes no value.
        """
        jax = require_jax()
        rows = Rows(start, stop, ids)
        size = int(ids.shape[0])
        data = DataArrays(*(rows.take(f) for f in arrays))
        gathered = type(states)(*(rows.take(f) for f in states))
        sub = even_part(size, self.sub_block)
        whole = size // sub * sub
        pieces: list[tuple[int, int, CounterLog]] = []
        uploads: list[Any] = []
        news: list[Any] = []
        if whole > sub:  # lax.map over the sub-blocks of the first `whole` clients
            def one(part: tuple[Any, Any, Any]) -> tuple[Any, Any]:
                upload, new, log = self.local(round_, message, *part, low=low)
                logs.append(log)
                return upload, new

            logs: list[CounterLog] = []

            def cut(x: Array) -> Array:
                return jax.numpy.reshape(x[:whole], (whole // sub, sub, *x.shape[1:]))

            upload, new = jax.lax.map(one, jax.tree.map(cut, (gathered, ids, data)))
            pieces += [(offset, sub, logs[0]) for offset in range(0, whole, sub)]
            uploads.append(jax.tree.map(lambda x: _flatten(x, whole), upload))
            news.append(jax.tree.map(lambda x: _flatten(x, whole), new))
            done = whole
        else:
            done = 0
        if done < size:  # the rest (or the whole block) in one call
            def rest(x: Array) -> Array:
                return x[done:] if done else x

            upload, new, log = self.local(round_, message, *jax.tree.map(
                rest, (gathered, ids, data)), low=low)
            pieces.append((done, size - done, log))
            uploads.append(upload)
            news.append(new)
        upload, new = (_concat_traced(uploads), _concat_traced(news))
        # published once the whole call is traced: a failed trace leaves no partial log
        self.logs[(start, stop, size, low)] = pieces
        return upload, type(states)(*(rows.put(f, r) for f, r in zip(states, new, strict=True)))

    def local(self, round_: Any, message: Any, states: Any, ids: Any, data: DataArrays, *,
              low: int | None) -> tuple[Any, Any, CounterLog]:
        """``client_update`` of the clients ``ids`` on their own ``data`` rows (traced):
        ``(upload, new states, its counting calls)``."""
        size = int(ids.shape[0])
        log = CounterLog()
        oracle = TracedOracle(self.problem, data, Rows(0, size, ids), round_,
                              self.settings.seed, self.settings.batch_size, log, size)
        prox, _ = counted_prox(self.problem.regularizer, log.counters)
        ctx = client_context(oracle, prox, _round(round_, low), data.weights,
                             self.problem.n_clients)
        upload, new = self.algorithm.client_update(message, states, ctx)
        return upload, new, log

    def run_round(self, round_: int, message: Any, participants: np.ndarray) -> Any:
        from ._clients import client_blocks, concat_uploads

        uploads = []
        for block in client_blocks(participants, self.settings.block_size):
            start, stop, key = _block_key(block)
            ids = _bounded(self.ids, key, functools.partial(_device_ids, block))
            out = self.part(round_, message, self.client_states, ids, self.arrays,
                            start=start, stop=stop)
            if out is EAGER:
                uploads.append(self.run_eager(round_, message, block))
                continue
            upload, self.client_states = out
            uploads.append(upload)
            _add(self.counters, self.delta(key, block, round_, self.part.low))
        return concat_uploads(uploads)

    def run_eager(self, round_: int, message: Any, participants: np.ndarray | slice) -> Any:
        """One call of ``client_update`` run eagerly (the NumPy engine's executor)."""
        from ._clients import LocalClients

        local = LocalClients(self.algorithm, self.problem, self.client_states, self.counters,
                             self.settings._replace(block_size=self.problem.n_clients))
        upload = local.run_round(round_, message, _block_ids(participants))
        self.client_states = local.client_states
        return upload

    def delta(self, key: tuple[Any, ...], block: Any, round_: int, low: int | None
              ) -> Counters:
        """What one call of this block, traced with ``low``, adds to the counters (cached
        per block): each sub-block's counting calls replayed on a host oracle of its
        clients."""
        def make() -> Counters:
            total = Counters()
            ids = _block_ids(block)
            for offset, length, log in self.logs[(*key[:3], low)]:
                oracle = Oracle(self.problem, _part_of(block, ids, offset, length), round_,
                                self.settings.seed, self.settings.batch_size, Counters())
                _add(total, log.delta(oracle))
            return total

        return _bounded(self.deltas, (*key, low), make)


class CompiledServer:
    """``server_update`` under ``jax.jit`` (eagerly where it cannot be traced): the
    compiled server step of :func:`~fedcomp.runtime._round.star_round`, whose
    :meth:`update` is :class:`~fedcomp.runtime._round.EagerServer`'s."""

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, counters: Counters,
                 seed: int, compile_: Any, server_prox: Callable[[Array, Any], Array]) -> None:
        self.algorithm, self.problem, self.counters, self.seed = (
            algorithm, problem, counters, seed)
        self.eager = EagerServer(algorithm, problem, server_prox, counters, seed)
        self.logs: dict[int | None, CounterLog] = {}
        self.contexts: dict[Any, tuple[Any, Any, Any]] = {}
        self.part = _Part(self.update_traced, algorithm.name, "server update", compile_)

    def update_traced(self, round_: Any, state: Any, uploads: Any, ids: Any, weights: Any,
                      pi: Any, *, low: int | None) -> Any:
        """The traced server step (its prox calls counted in :attr:`logs`)."""
        log = CounterLog()
        _, prox = counted_prox(self.problem.regularizer, log.counters)
        ctx = server_context(prox, _round(round_, low), ids, weights, pi,
                             self.problem.n_clients, self.seed)
        new = self.algorithm.server_update(state, uploads, ctx)
        self.logs[low] = log
        return new

    def update(self, state: Any, uploads: Any, round_: int, participants: np.ndarray) -> Any:
        """The new server state after the uploads of ``participants`` (counted)."""
        out = self.part(round_, state, uploads, *self.context(participants))
        if out is EAGER:
            return self.eager.update(state, uploads, round_, participants)
        count_uploads(self.counters, uploads, len(participants))
        _add(self.counters, self.logs[self.part.low].delta(None))
        return out

    def context(self, participants: np.ndarray, block: slice | np.ndarray | None = None
                ) -> tuple[Any, Any, Any]:
        """``(ids, weights, pi)`` of the participants as device arrays (cached per set).

        ``block``: the participants as :func:`~fedcomp.runtime._clients.client_blocks`
        found them; a range is keyed by its bounds, where the ids' bytes would copy and
        hash 8 bytes a client every round (0.3 s a round at 10^7 clients)."""
        key = ((block.start, block.stop) if isinstance(block, slice)
               else participants.tobytes())
        return _bounded(self.contexts, key,
                        functools.partial(participant_context, self.problem, participants))


def participant_context(problem: Problem, ids: np.ndarray) -> tuple[Any, Any, Any]:
    """``(ids, π_i / Σπ, π_i)`` of a round's participants ``ids``, shape ``(B,)``, or of
    several rounds' stacked, ``(rounds, B)``, as device arrays."""
    pi = problem.weights[ids]
    # row by row: each round's weights are summed as one round's alone would be
    weights = pi / pi.sum() if pi.ndim == 1 else np.stack([row / row.sum() for row in pi])
    like = problem.data.like
    return (require_jax().numpy.asarray(ids, dtype="int64"), asarray_like(weights, like),
            asarray_like(pi, like))
