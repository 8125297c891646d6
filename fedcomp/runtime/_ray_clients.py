"""One simulation's clients on Ray actors: a population larger than one process holds.

:func:`ray_clients` gives a client executor for :func:`~fedcomp.runtime.simulate`
(``clients=ray_clients(shards=4)``). The clients are split into contiguous shards; each
shard lives on a Ray actor that keeps its clients' data and client states resident for the
whole run and runs ``client_update`` on them in vectorised blocks, exactly as the
in-process simulator does. The server loop — sampling, ``server_update``, counters,
evaluation, logging — stays in the calling process, unchanged. Every random draw is keyed
by ``(seed, round, global client id)``, so the iterates equal the single-process
simulator's (block sizes and shard boundaries change nothing but speed).

What stays in the calling process: the problem (for the metrics, which read all the data)
and, for the first round only, the initial client states it ships to the actors. A round
moves the message to every actor holding a participant and the uploads back.

Data on disk: when the problem's features and targets are whole ``.npy`` files mapped into
memory (:meth:`ClientData.load <fedcomp.data.ClientData.load>` with ``mmap=True``), each
actor is sent the two paths and its row range instead of its rows, opens the files itself
and copies its rows into memory. Pickling a slice of a memory map would read it through the
calling process and the object store; this way the calling process never reads the
clients' data for the actors, and every machine reads only its shard (the files must be
at the same path on every machine: a shared filesystem or a copy).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import take_rows
from .._extras import require
from ..algorithms._base import FederatedAlgorithm
from ..data._checks import whole_npy_file
from ..oracle import Counters
from ..problem import Problem
from ._clients import ClientSettings, LocalClients, concat_uploads
from ._ray_address import check_ray_address, ray_address
from ._round import counted_prox

#: Seconds to wait for every actor to find a CPU before giving up with an error.
PLACEMENT_TIMEOUT = 60.0



def shard_bounds(n_clients: int, shards: int) -> np.ndarray:
    """Start of each shard and the end, contiguous and as even as possible: ``(shards+1,)``.

    Examples
    --------
    >>> shard_bounds(10, 3).tolist()
    [0, 4, 7, 10]
    """
    sizes = [len(part) for part in np.array_split(np.arange(n_clients), shards)]
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _rows(states: Any, rows: slice) -> Any:
    return type(states)(*(f[rows] for f in states)) if len(states) else states


@dataclasses.dataclass(frozen=True)
class ShardOnDisk:
    """One shard's problem as sent to its actor when the data are ``.npy`` files: the
    problem's fields without its data, the two files (with the shape and dtype the caller
    saw in each), the shard's rows and their counts."""

    fields: dict[str, Any]
    files: tuple[tuple[str, tuple[int, ...], str], ...]
    rows: tuple[int, int]
    counts: np.ndarray
    sample_weight: np.ndarray | None = None

    def problem(self) -> Problem:
        """The shard's problem, its rows read from the files into memory (on the actor)."""
        from ..data import ClientData

        features, targets = (self._rows_of(*file) for file in self.files)
        return Problem(**self.fields, data=ClientData(features, targets, self.counts,
                                                      sample_weight=self.sample_weight))

    def _rows_of(self, path: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
        import socket

        where = f"ray_clients: the actor on {socket.gethostname()}"
        fix = ("every machine that runs an actor needs the data directory at the same path "
               "(a shared filesystem, or the same copy on every machine)")
        try:
            file = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as error:
            raise FileNotFoundError(f"{where} cannot read {path} ({error}); {fix}") from None
        if file.shape != tuple(shape) or file.dtype.str != dtype:
            raise ValueError(f"{where} finds {path} holding {file.dtype.str} of shape "
                             f"{list(file.shape)}, the caller's holds {dtype} of shape "
                             f"{list(shape)}; {fix}")
        # the rows read from the file (the map gave the header only): resident, as shipped
        # arrays would be, without the map's pages on top while they are copied
        start, stop = self.rows
        row_shape = file.shape[1:]
        per_row = int(np.prod(row_shape, dtype=np.int64))
        with open(path, "rb") as f:
            f.seek(file.offset + start * per_row * file.dtype.itemsize)
            rows = np.fromfile(f, dtype=file.dtype, count=(stop - start) * per_row)
        return rows.reshape(stop - start, *row_shape)


def shard_problem(problem: Problem, rows: slice) -> Problem | ShardOnDisk:
    """What an actor is sent for the clients ``rows``: the paths when the data are whole
    ``.npy`` files (:func:`~fedcomp.data._checks.whole_npy_file`), else the shard's
    problem with its rows.

    Either gives the actor the problem ``dataclasses.replace(problem, data=<its rows>)``
    (the holdout stays with the caller's metrics).
    """
    data = problem.data
    features = None if data.sparse else whole_npy_file(data.features)
    targets = whole_npy_file(data.targets)
    if features is None or targets is None:
        return dataclasses.replace(problem, data=_subset(problem, rows))
    fields = {f.name: getattr(problem, f.name) for f in dataclasses.fields(problem)
              if f.init and f.name != "data"}
    files = tuple((path, tuple(values.shape), values.dtype.str) for path, values in
                  ((features, data.features), (targets, data.targets)))
    return ShardOnDisk(fields, files, (rows.start, rows.stop), np.array(data.counts[rows]),
                       None if data.sample_weight is None else data.sample_weight[rows])


class ClientShard:
    """The body of one Ray actor: the clients ``first .. first + m − 1`` with their data,
    weights and client states, resident across rounds."""

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem | ShardOnDisk,
                 first: int, weights: np.ndarray, n_clients: int, states: Any, seed: int,
                 batch_size: int | None, block_size: int) -> None:
        if isinstance(problem, ShardOnDisk):
            problem = problem.problem()
        self.first = first
        self.counters = Counters()
        prox, _ = counted_prox(problem.regularizer, self.counters)
        ids = np.arange(first, first + problem.n_clients, dtype=np.int64)
        self.clients = LocalClients.of_clients(
            algorithm, problem, states, self.counters,
            ClientSettings(seed, batch_size, block_size, prox), client_ids=ids,
            weights=weights, n_clients=n_clients)

    def run_round(self, round_: int, message: Any, ids: np.ndarray
                  ) -> tuple[Any, dict[str, int]]:
        """The uploads of the participants ``ids`` (global, sorted) and the counts they cost."""
        before = self.counters.as_dict()
        upload = self.clients.run_round(round_, message, np.asarray(ids) - self.first)
        after = self.counters.as_dict()
        return upload, {k: after[k] - before[k] for k in after}

    def states(self) -> Any:
        return self.clients.client_states

    def ready(self) -> bool:
        """True once the actor is placed and built (its answer carries no data)."""
        return True

    def peak_memory_mb(self) -> float:
        """This actor's peak resident memory, MB."""
        from ._allocator import peak_memory_mb

        return peak_memory_mb()


class RayClients:
    """A client executor whose clients live on Ray actors (see the module doc).

    Built by :func:`simulate` with the same arguments as
    :class:`~fedcomp.runtime._clients.LocalClients`; :func:`ray_clients` binds the shard
    count and the cluster.
    """

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
                 counters: Counters, settings: Any, *, shards: int = 2,
                 address: str | None = None) -> None:
        if settings.state_dir is not None:
            raise ValueError("client_state='disk' is the in-process simulator's; on Ray each "
                             "actor holds its shard's states in memory: add shards instead")
        ray = require("ray", "fedcomp.runtime.ray_clients")
        self.counters = counters
        self.started_here = not ray.is_initialized()
        if self.started_here:
            check_ray_address(address)
            ray.init(address=ray_address(address), include_dashboard=False,
                     log_to_driver=False, configure_logging=False)
        self.ray = ray
        self.actors: list[Any] = []
        self.bounds = shard_bounds(problem.n_clients, min(shards, problem.n_clients))
        actor = ray.remote(num_cpus=1)(ClientShard)
        shared = ray.put(algorithm)
        for start, stop in zip(self.bounds[:-1], self.bounds[1:], strict=True):
            rows = slice(int(start), int(stop))
            self.actors.append(actor.remote(
                shared, shard_problem(problem, rows), int(start),
                np.asarray(problem.weights[rows]), problem.n_clients,
                _rows(client_states, rows), settings.seed, settings.batch_size,
                settings.block_size))
        self._wait_until_placed(PLACEMENT_TIMEOUT)

    def _wait_until_placed(self, timeout: float) -> None:
        """Every actor started, or a clear error: an actor needs a free CPU, and Ray waits
        forever for one that a busy or small cluster does not have."""
        calls = [actor.ready.remote() for actor in self.actors]
        ready, _ = self.ray.wait(calls, num_returns=len(calls), timeout=timeout)
        try:  # an actor that failed to start (its data unreadable) says why here
            self.ray.get(ready)
        except Exception:
            self.close()
            raise
        if len(ready) < len(calls):
            total = int(self.ray.cluster_resources().get("CPU", 0))
            self.close()
            raise RuntimeError(f"ray_clients: {len(calls) - len(ready)} of {len(calls)} actors "
                               f"found no free CPU within {timeout:g} s (the cluster has "
                               f"{total} CPUs in all): lower shards or add nodes")

    def run_round(self, round_: int, message: Any, participants: np.ndarray) -> Any:
        """The participants' uploads, stacked in the participants' order."""
        order = np.argsort(participants, kind="stable")
        ids = np.asarray(participants)[order]
        cuts = np.searchsorted(ids, self.bounds)
        shipped = self.ray.put(message)
        calls = [(self.actors[k].run_round.remote(round_, shipped, ids[cuts[k]:cuts[k + 1]]))
                 for k in range(len(self.actors)) if cuts[k + 1] > cuts[k]]
        parts = []
        for upload, counts in self.ray.get(calls):
            parts.append(upload)
            for key, value in counts.items():
                setattr(self.counters, key, getattr(self.counters, key) + value)
        stacked = concat_uploads(parts)  # in sorted-id order: back to the participants' order
        if not np.array_equal(order, np.arange(len(order))):
            back = np.argsort(order, kind="stable")
            stacked = type(stacked)(*(take_rows(f, back) for f in stacked))
        return stacked

    def peak_memory_mb(self) -> list[float]:
        """Each actor's peak resident memory in MB (for benchmarks)."""
        return list(self.ray.get([a.peak_memory_mb.remote() for a in self.actors]))

    @property
    def client_states(self) -> Any:
        """Every client's state, gathered from the actors (for :class:`RunResult`)."""
        return concat_uploads(self.ray.get([a.states.remote() for a in self.actors]))

    def close(self) -> None:
        """End the actors (and the Ray instance when this executor started it)."""
        for actor in self.actors:
            self.ray.kill(actor)
        self.actors = []
        if self.started_here:
            self.ray.shutdown()


def _subset(problem: Problem, rows: slice) -> Any:
    return problem.data.subset(rows)


def ray_clients(shards: int = 2, address: str | None = None) -> Callable[..., RayClients]:
    """A client executor for :func:`~fedcomp.runtime.simulate` on ``shards`` Ray actors.

    Parameters
    ----------
    shards : int, default 2
        Actors (one CPU each), each holding a contiguous range of clients.
    address : str, optional
        The Ray cluster to join (default ``$RAY_ADDRESS``, else a Ray instance on this
        machine, stopped when the run ends).

    Examples
    --------
    >>> clients = ray_clients(shards=4)   # simulate(..., options=RunOptions(clients=clients))
    """
    if not (isinstance(shards, int) and not isinstance(shards, bool) and shards >= 1):
        raise ValueError(f"ray_clients: shards must be an integer >= 1 (got shards={shards!r})")

    def build(algorithm: FederatedAlgorithm, problem: Problem, client_states: Any,
              counters: Counters, settings: Any) -> RayClients:
        return RayClients(algorithm, problem, client_states, counters, settings,
                          shards=shards, address=address)

    return build
