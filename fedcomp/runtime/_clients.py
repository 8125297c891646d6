"""The in-process client executor: blocks of clients, their states, the server's context.

:class:`LocalClients` runs a round's participants in vectorised blocks in this process
(the executor of :func:`~fedcomp.runtime.simulate` on NumPy and torch, and the eager path
of the compiled engine); the helpers cut participants into blocks, gather and scatter their
stacked states, and build the :class:`~fedcomp.algorithms.ServerContext` of a step. The
asynchronous and decentralized runners and the Flower adapter share them.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._array import (
    bit_width,
    device_of,
    is_jax,
    namespace,
    replace_rows,
    squared_norm,
    take_rows,
    to_numpy,
    wait_for,
)
from ..algorithms._base import (
    ClientContext,
    FederatedAlgorithm,
)
from ..oracle import BlockMemo, Counters, Oracle
from ..problem import Problem
from ._round import client_context, consecutive, count_downloads, star_round

#: Target bytes of client data in one block (see :func:`~fedcomp.runtime.auto_block_size`).
BLOCK_BYTES = 4 << 20


def _cache_bytes() -> int:
    """Size of the last-level cache (sysfs on Linux, sysconf elsewhere; 8 MiB if unknown)."""
    folder = Path("/sys/devices/system/cpu/cpu0/cache")
    sizes = []
    for index in sorted(folder.glob("index*")):
        try:
            text = (index / "size").read_text().strip()
            units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
            sizes.append(int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text))
        except (OSError, ValueError, IndexError):
            continue
    if sizes:
        return max(sizes)
    for name in ("SC_LEVEL3_CACHE_SIZE", "SC_LEVEL2_CACHE_SIZE"):
        try:
            size = os.sysconf(name)
            if size and size > 0:
                return int(size)
        except (ValueError, OSError, AttributeError):
            pass
    return 8 << 20


def working_set(problem: Problem, batch_size: int | None) -> tuple[int, int]:
    """``(samples, bytes)`` of one client's data in a local step: all its samples with full
    gradients, one minibatch otherwise."""
    samples = problem.data.max_samples if batch_size is None else min(
        batch_size, problem.data.max_samples)
    data = problem.data
    if data.sparse:  # the nonzeros of an average sample, with their column indices
        return samples, samples * data.features.nbytes // max(1, data.n_samples)
    return samples, samples * math.prod(data.feature_shape) * (bit_width(data.like) // 8)


def cache_block_size(problem: Problem, batch_size: int | None = None) -> int:
    """Clients whose data fill about :data:`BLOCK_BYTES` (or a quarter of the last-level
    cache): a CPU's block (:func:`~fedcomp.runtime.auto_block_size`)."""
    _, per_client = working_set(problem, batch_size)
    target = min(BLOCK_BYTES, _cache_bytes() // 4)
    return int(max(1, min(problem.n_clients, target // max(per_client, 1))))


def client_blocks(participants: np.ndarray, block_size: int) -> list[slice | np.ndarray]:
    """Split distinct participant ids (sorted by the runners; a Flower node's rows follow
    its own order) into blocks; runs of consecutive increasing ids become slices (no data
    copy)."""
    out: list[slice | np.ndarray] = []
    for start in range(0, len(participants), block_size):
        chunk = participants[start:start + block_size]
        out.append(slice(int(chunk[0]), int(chunk[-1]) + 1) if consecutive(chunk) else chunk)
    return out


def gather_states(states: Any, clients: slice | np.ndarray) -> Any:
    if len(states) == 0:
        return states
    if isinstance(clients, slice):
        return type(states)(*(f[clients, ...] for f in states))
    return type(states)(*(take_rows(f, clients) for f in states))


def concat_uploads(parts: list[Any]) -> Any:
    first = parts[0]
    if len(first) == 0:
        return first
    if len(parts) == 1:
        return first
    xp = namespace(first[0])
    return type(first)(*(xp.concat([p[i] for p in parts], axis=0) for i in range(len(first))))


class _Stacked:
    """Blocks' results (NamedTuples of ``(B, ...)`` fields) stacked on the client axis as
    they arrive, for ``total`` clients in all.

    The first block is kept as it is (one block of every client is the result, no copy);
    from the second on, NumPy and torch fields are copied into one array of ``total`` rows
    per field and each block's own arrays are released: concatenating at the end would
    hold every block's result and their concatenation at once — twice the clients'
    uploads, 72 MiB instead of 36 for 100 clients of rcv1's 47 236 features. jax arrays
    (immutable) are concatenated at the end. Bit for bit the same values either way.
    """

    def __init__(self, total: int) -> None:
        self.total = total
        self.parts: list[Any] = []
        self.fields: list[Any] | None = None
        self.filled = 0

    def add(self, part: Any) -> None:
        if len(part) == 0 or is_jax(part[0]) or (not self.parts and self.fields is None):
            self.parts.append(part)
            return
        if self.fields is None:
            first = self.parts.pop()
            xp = namespace(first[0])
            self.kind = type(first)
            self.fields = [xp.empty((self.total, *f.shape[1:]), dtype=f.dtype,
                                    device=device_of(f)) for f in first]
            self._write(first)
        self._write(part)

    def _write(self, part: Any) -> None:
        assert self.fields is not None
        rows = int(part[0].shape[0])
        for out, values in zip(self.fields, part, strict=True):
            out[self.filled:self.filled + rows, ...] = values
        self.filled += rows

    def result(self) -> Any:
        if self.fields is None:
            return concat_uploads(self.parts)
        return self.kind(*self.fields)


def _scatter(full: Any, participants: np.ndarray, rows: Any) -> Any:
    if len(full) == 0:
        return full
    n = full[0].shape[0]
    if len(participants) == n and consecutive(participants):
        return rows  # full participation, clients 0..n-1 in order
    return type(full)(*(replace_rows(f, participants, r) for f, r in zip(full, rows, strict=True)))


class ClientSettings(NamedTuple):
    """What every client executor needs besides the algorithm and the problem."""

    seed: int
    batch_size: int | None
    block_size: int
    #: the counted client prox (``ClientContext.prox``)
    prox: Any
    #: directory of the memory-mapped client states (``None``: states stay in memory)
    state_dir: Any = None
    #: ``simulate``'s ``compile`` (the jax engine: "auto", True or False)
    compile: Any = "auto"


class LocalClients:
    """The simulator's client executor: participants run in vectorised blocks in-process.

    ``run_round(r, message, participants)`` gathers each block's client states, calls
    ``client_update`` on the block, scatters the new states back and returns the uploads
    stacked in the participants' order. Another executor with the same constructor and
    ``run_round`` (such as :mod:`fedcomp.flower`'s, which sends the message to SuperNodes)
    can replace it in :func:`simulate` without changing anything else of the run.

    :func:`simulate` runs each round of an executor through
    :func:`~fedcomp.runtime._round.star_round`. An executor may also offer fused rounds,
    an optional capability: ``chunk_length(clients_per_round, batch_size, eval_every)``
    (the most rounds it takes at once) and ``run_rounds(server_state, first,
    participants) -> (server_state, [Σ x² after each round])``, which then runs the
    rounds between two evaluation rows in one go (the compiled engine's:
    :class:`~fedcomp.runtime._compiled.CompiledEngine`).
    """

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                 counters: Counters, settings: ClientSettings, *,
                 shard: tuple[np.ndarray, np.ndarray, int] | None = None) -> None:
        self.algorithm, self.problem, self.counters, self.settings = (
            algorithm, problem, counters, settings)
        #: ``(global ids, global weights π, federation size)`` of the rows of ``problem``
        #: when it holds only some of the clients (a Ray actor's shard); ``None``: all
        self.shard = shard
        self.on_disk = settings.state_dir is not None
        #: block constants kept for the run (an exact solver's system: Oracle.constant)
        self.memo = BlockMemo()
        self.client_states, self.maps = (states_to_disk(client_states, settings.state_dir)
                                         if self.on_disk else (client_states, []))

    @classmethod
    def of_clients(cls, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                   counters: Counters, settings: ClientSettings, *, client_ids: Any,
                   weights: Any, n_clients: int) -> LocalClients:
        """The executor of some clients of a federation: ``problem``'s rows are the clients
        ``client_ids`` (global ids, which key their minibatch draws) of ``n_clients``, with
        the weights ``π`` ``weights`` (one per row). ``run_round`` then takes rows of
        ``problem``: a Ray actor's shard, a Flower SuperNode's clients."""
        return cls(algorithm, problem, client_states, counters, settings,
                   shard=(np.asarray(client_ids, dtype=np.int64),
                          np.asarray(weights), int(n_clients)))

    def _whole_block(self, participants: np.ndarray) -> bool:
        """Whether ``participants`` are every client, in order, as one block in memory: the
        round then needs no gathering, stacking or scattering of the block's rows."""
        n = len(participants)
        return (self.shard is None and not self.on_disk and n == self.problem.n_clients
                and n <= self.settings.block_size and consecutive(participants)
                and int(participants[0]) == 0)

    def _context(self, oracle: Oracle, block: slice | np.ndarray, round_: int) -> ClientContext:
        """The block's context: global ids, weights and federation size, even on a shard."""
        if self.shard is None:
            pi, n_clients = self.problem.weights[oracle.client_ids], self.problem.n_clients
        else:
            pi, n_clients = self.shard[1][block], self.shard[2]
        return client_context(oracle, self.settings.prox, round_, pi, n_clients,
                              self.problem.data.like)

    def run_round(self, round_: int, message: Any, participants: np.ndarray) -> Any:
        """``participants`` are rows of ``problem`` (the client ids unless on a shard)."""
        problem, s = self.problem, self.settings
        if self._whole_block(participants):
            # every client in one block (full participation, the usual small federation):
            # the block's states are the states, its uploads the stacked uploads
            oracle = Oracle(problem, slice(0, len(participants)), round_, s.seed,
                            s.batch_size, self.counters, memo=self.memo)
            upload, self.client_states = self.algorithm.client_update(
                message, self.client_states, self._context(oracle, oracle.clients, round_))
            return upload
        uploads, new_states = _Stacked(len(participants)), _Stacked(len(participants))
        for block in client_blocks(participants, s.block_size):
            ids = None if self.shard is None else self.shard[0][block]
            oracle = Oracle(problem, block, round_, s.seed, s.batch_size, self.counters,
                            client_ids=ids, memo=self.memo)
            ctx = self._context(oracle, block, round_)
            gathered = gather_states(self.client_states, block)
            if self.on_disk:  # one block in memory at a time; nothing aliases the files
                gathered = type(gathered)(*(np.array(f) for f in gathered))
            upload, states = self.algorithm.client_update(message, gathered, ctx)
            uploads.add(upload)
            if self.on_disk:
                # each client's state is read only by its own block, so writing a block back
                # before the next one runs gives the same result as scattering at the end
                _write_rows(self.client_states, block, states)
                _release(self.maps)
            else:
                new_states.add(states)
        if not self.on_disk:
            self.client_states = _scatter(self.client_states, participants,
                                          new_states.result())
        return uploads.result()


class FusedLocalClients(LocalClients):
    """:class:`LocalClients` with the run's server step: :func:`simulate`'s own executor,
    whose fused rounds (:meth:`run_rounds`) run the rounds between two rows of a small
    federation in one call."""

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                 counters: Counters, settings: ClientSettings, server: Any,
                 norm_limit: float = math.inf) -> None:
        super().__init__(algorithm, problem, client_states, counters, settings)
        #: the run's :class:`~fedcomp.runtime._round.EagerServer`
        self.server = server
        #: the run's ``max_norm``: fused rounds end at the first model past it or not
        #: finite, which the run's divergence check then reports, as after a single round
        self.norm_limit = norm_limit

    def chunk_length(self, clients_per_round: int | None, batch_size: int | None,
                     eval_every: int) -> int:
        """The most rounds one :meth:`run_rounds` call takes: the rounds up to the next row
        where every round is every client in one block of NumPy arrays in memory, with
        full local batches; else one."""
        problem = self.problem
        fused = (self.shard is None and not self.on_disk
                 and batch_size is None and problem.sampler is None
                 and (clients_per_round is None or clients_per_round >= problem.n_clients)
                 and problem.n_clients <= self.settings.block_size
                 and type(problem.data.like) is np.ndarray)
        return max(1, int(eval_every)) if fused else 1

    def run_rounds(self, server_state: Any, first: int, participants: list[np.ndarray]
                   ) -> tuple[Any, list[Any]]:
        """Rounds ``first, first + 1, ...`` (``participants[k]`` in round ``first + k``):
        ``(new server state, [Σ x² after each round])``, the counters advanced; fewer
        rounds than asked where a model diverged (its ``Σ x²`` is the last).

        Each round is :func:`~fedcomp.runtime._round.star_round`'s — broadcast, the
        clients' update, the downloads counted, the server's step — with what is the same
        in every round made once for the call (:meth:`chunk_length` says when): the
        block's oracle, whose full batches no round keys, and its context. The same
        calls in the same order as round by round: the same iterates and counters.
        """
        if not (self.settings.batch_size is None and self.problem.sampler is None
                and all(self._whole_block(p) for p in participants)):
            # minibatches are keyed by the round: an oracle of each round's own
            return self._round_by_round(server_state, first, participants)
        algorithm, counters, n = self.algorithm, self.counters, len(participants[0])
        oracle = Oracle(self.problem, slice(0, n), first, self.settings.seed, None, counters,
                        memo=self.memo)
        context = self._context(oracle, oracle.clients, first)
        sums, limit = [], self.norm_limit ** 2
        for k, who in enumerate(participants):
            round_ = first + k
            oracle.round = round_
            message = algorithm.broadcast(server_state)
            upload, self.client_states = algorithm.client_update(
                message, self.client_states, context._replace(round=round_))
            count_downloads(counters, message, n)
            server_state = self.server.update(server_state, upload, round_, who)
            wait_for(self.problem.data.like, server_state)  # NumPy: done already
            sums.append(squared_norm(algorithm.output(server_state)))
            if not (math.isfinite(float(sums[-1])) and float(sums[-1]) <= limit):
                break  # diverged: the run's check names this round, with this model
        return server_state, sums

    def _round_by_round(self, server_state: Any, first: int, participants: list[np.ndarray]
                        ) -> tuple[Any, list[Any]]:
        """:meth:`run_rounds` one :func:`~fedcomp.runtime._round.star_round` at a time."""
        sums = []
        for k, who in enumerate(participants):
            server_state = star_round(self.algorithm, self.server, self, self.counters,
                                      server_state, first + k, who)
            wait_for(self.problem.data.like, server_state)  # a GPU's round, done
            last = self.algorithm.output(server_state)
            sums.append(squared_norm(last) if len(participants) > 1 else None)
        return server_state, sums


def states_to_disk(states: Any, state_dir: Any) -> tuple[Any, list[Any]]:
    """The stacked client states as memory-mapped ``.npy`` files in ``state_dir``.

    Parameters
    ----------
    states : NamedTuple of NumPy arrays
        Client states stacked on axis 0, as ``algorithm.init`` returns them.
    state_dir : path
        Directory for one ``<field>.npy`` per state field (created if missing;
        existing files of the same names are overwritten).

    Returns
    -------
    states : NamedTuple of ndarray
        The same fields, as views of the files' memory maps.
    maps : list of mmap.mmap
        The maps, for :func:`_release` to drop their pages from the resident memory.
    """
    import mmap

    from numpy.lib.format import open_memmap

    if len(states) == 0:
        return states, []
    if not all(isinstance(f, np.ndarray) for f in states):
        raise ValueError("client_state='disk' needs NumPy client states; use the numpy backend "
                         "or client_state='memory'")
    folder = Path(state_dir)
    folder.mkdir(parents=True, exist_ok=True)
    fields, maps = [], []
    for name, field in zip(states._fields, states, strict=True):
        path = folder / f"{name}.npy"
        header = open_memmap(path, mode="w+", dtype=field.dtype, shape=field.shape)
        offset = header.offset
        del header
        # our own map (not np.memmap's private one), so that _release can madvise it
        with path.open("r+b") as fh:
            mapped = mmap.mmap(fh.fileno(), 0)
        view = np.ndarray(field.shape, dtype=field.dtype, buffer=mapped, offset=offset)
        view[...] = field
        # one field's pages at a time: releasing them all at the end would hold every
        # state array in resident memory at once, the peak the disk states are to avoid
        _release([mapped])
        fields.append(view)
        maps.append(mapped)
    return type(states)(*fields), maps


def _release(maps: list[Any]) -> None:
    """Write the maps' dirty pages to their files and drop them from the resident memory
    (the data stay in the files and the page cache; the next access reads them back)."""
    import mmap

    for mapped in maps:
        mapped.flush()
        if hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            mapped.madvise(mmap.MADV_DONTNEED)


def _write_rows(full: Any, clients: slice | np.ndarray, rows: Any) -> None:
    """Write a block's new states into the (file-backed) stacked states, in place."""
    for f, r in zip(full, rows, strict=True):
        f[clients, ...] = to_numpy(r)
