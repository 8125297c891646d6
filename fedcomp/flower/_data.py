"""A SuperNode's own clients: which global client ids it hosts and their data.

A node is configured by its ``node_config`` (``flower-supernode --node-config``):

``partition-id``, ``num-partitions``
    The node hosts the ``partition-id``-th of ``num-partitions`` contiguous, nearly equal
    groups of the configuration's clients (``numpy.array_split`` of ``0..n-1``; one client
    per node when ``num-partitions`` equals ``n_clients``). Its data come from the same
    generator and partitioner the simulator uses, built from the fedcomp configuration,
    keeping only the node's rows.
``data-path``
    Alternatively, an ``.npz`` file with the node's own ``features`` (clients, samples,
    ...), ``targets``, ``counts`` and the global ``client_ids`` of its rows (see
    :func:`save_partition`): data that exist only on that machine.

Minibatch draws are keyed by the *global* client id, so a node draws exactly the samples
the simulator draws for the same client. With ``streaming = true`` the minibatches are
fresh samples of the configuration's generator (its sampler, built from the generator's
parameters on every node, ``data-path`` ones included), again keyed by global client id.
"""

from __future__ import annotations

import json
import zipfile
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..data import ClientData
from ..data._checks import ARCHIVE_DAMAGE
from ..experiments import build_components, build_problem, build_sampler, resolve
from ..problem import Problem


class NodeData(NamedTuple):
    """The clients one node hosts.

    Attributes
    ----------
    problem : Problem
        A problem over the node's clients only (rows in ``client_ids`` order).
    client_ids : numpy int array
        Global ids of the rows.
    n_clients : int
        Clients in the whole federation.
    """

    problem: Problem
    client_ids: np.ndarray
    n_clients: int


def partition_clients(n_clients: int, partition_id: int, num_partitions: int) -> np.ndarray:
    """Global client ids of partition ``partition_id`` of ``num_partitions``.

    Examples
    --------
    >>> partition_clients(10, 1, 3).tolist()
    [4, 5, 6]
    """
    if not (1 <= num_partitions <= n_clients):
        raise ValueError(f"num-partitions must be in 1..{n_clients} (the configuration's "
                         f"clients); got num-partitions={num_partitions}")
    if not (0 <= partition_id < num_partitions):
        raise ValueError(f"partition-id must be in 0..{num_partitions - 1} "
                         f"(got partition-id={partition_id})")
    return np.array_split(np.arange(n_clients), num_partitions)[partition_id]


def subset(data: ClientData, rows: np.ndarray) -> ClientData:
    """The clients ``rows`` of ``data`` (padding kept: it is masked)."""
    return data.subset(rows)


def save_partition(problem: Problem, client_ids: Any, path: str | Path) -> Path:
    """Write the data of ``client_ids`` to an ``.npz`` a node can load with ``data-path``."""
    from .._array import to_numpy

    if problem.data.sparse:
        raise ValueError("save_partition writes dense arrays; sparse data reach a node "
                         "through its configuration (each node builds its own clients) or "
                         "ClientData.save(directory) of data.subset(client_ids)")
    ids = np.asarray(client_ids, dtype=np.int64)
    part = subset(problem.data, ids)
    path = Path(path)
    np.savez(path, features=to_numpy(part.features), targets=to_numpy(part.targets),
             counts=part.counts, client_ids=ids)
    return path


def node_integer(options: dict[str, Any], key: str, default: Any = None) -> int:
    """``node_config[key]`` (or ``default``) as an integer: Flower parses ``K`` as one, and
    a string of digits is taken too; anything else (``1.5``, ``"two"``) is refused, not
    truncated or left to ``int()``'s words.

    Examples
    --------
    >>> node_integer({"partition-id": "2"}, "partition-id")
    2
    """
    value = options.get(key, default)
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise ValueError(f"node_config {key}={value!r} is not an integer; start the SuperNode "
                         f"with --node-config '{key}=K' (an integer K)")
    return int(value)


#: The arrays of a node's ``data-path`` file, as :func:`save_partition` writes them.
NODE_FILE_KEYS = ("features", "targets", "counts", "client_ids")


def node_file(path: Path, options: dict[str, Any]) -> str:
    """The node's ``data-path`` file and its other ``node_config`` keys, for messages."""
    others = {k: v for k, v in options.items() if k != "data-path"}
    return f"the SuperNode's data-path {str(path)!r}" + (
        f" (node_config {others})" if others else "")


def read_node_file(path: Path, options: dict[str, Any]) -> tuple[np.ndarray, ClientData]:
    """The global client ids (sorted) and the data of a node's ``data-path`` file.

    Raises one ``ValueError`` naming the file and the node (its ``node_config``) for a
    file that is not a readable ``.npz`` with :data:`NODE_FILE_KEYS`, or whose arrays do not
    hold one row per client id.
    """
    where = node_file(path, options)
    fix = "write it again with fedcomp.flower.save_partition"
    if not zipfile.is_zipfile(path):  # np.load would read a .npy, or try a pickle
        raise ValueError(f"{where} is not an .npz archive (truncated, damaged, or another "
                         f"kind of file); {fix}")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {key: npz[key] for key in NODE_FILE_KEYS}
    except ARCHIVE_DAMAGE as error:
        # the first sentence only: NumPy's next one advises allow_pickle, never wanted here
        reason = str(error).strip("'").split(". ")[0]
        raise ValueError(f"{where} is not a readable .npz with the arrays "
                         f"{', '.join(NODE_FILE_KEYS)} ({type(error).__name__}: {reason}); "
                         f"{fix}") from None
    ids = arrays["client_ids"]
    if ids.ndim != 1 or ids.dtype.kind not in "iu" or np.any(ids < 0) or (
            np.unique(ids).size != ids.size):
        raise ValueError(f"{where}: client_ids must be distinct nonnegative integers, one per "
                         f"row (got {ids.dtype} of shape {ids.shape}); {fix}")
    short = [k for k in NODE_FILE_KEYS[:3] if arrays[k].ndim == 0 or len(arrays[k]) != ids.size]
    if short:
        raise ValueError(f"{where}: {short} must hold one row per client id ({ids.size} rows; "
                         f"got shapes {[arrays[k].shape for k in short]}); {fix}")
    order = np.argsort(ids, kind="stable")  # rows in global-id order, like participants
    try:
        data = ClientData(*(arrays[k][order] for k in NODE_FILE_KEYS[:3]))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{where}: {error}") from None
    return ids[order].astype(np.int64), data


@lru_cache(maxsize=4)
def _full_problem(config_json: str, seed: int | None) -> Problem:
    return build_problem(resolve(json.loads(config_json)).base, seed)


@lru_cache(maxsize=8)
def load_node_data(config_json: str, node_config: tuple[tuple[str, Any], ...],
                   seed: int | None = None) -> NodeData:
    """The node's clients for a resolved fedcomp configuration (JSON) and its node_config.

    ``seed`` is the run's seed: data that follow it (no ``data.seed`` pinned) are drawn
    for it, as the simulator draws them. Cached per process: the simulation engine keeps
    ClientApps alive across rounds.
    """
    cfg = json.loads(config_json)
    setting = resolve(cfg).base
    options = dict(node_config)
    if "data-path" in options:
        path = Path(str(options["data-path"]))
        if not path.exists():
            raise FileNotFoundError(f"node_config data-path={str(path)!r} does not exist")
        ids, data = read_node_file(path, options)
        n_clients = node_integer(options, "num-clients", cfg["data"].get("n_clients", 0))
        if n_clients <= int(ids.max(initial=-1)):
            raise ValueError(f"data-path {str(path)!r} holds client ids up to {ids.max()}, but "
                             f"the federation has n_clients={n_clients}; set node_config "
                             "num-clients or data.n_clients")
    else:
        missing = [k for k in ("partition-id", "num-partitions") if k not in options]
        if missing:
            raise ValueError(f"SuperNode node_config lacks {missing}: start it with "
                             "--node-config 'partition-id=K num-partitions=N' (or data-path=...)")
        partition = (node_integer(options, "partition-id"),
                     node_integer(options, "num-partitions"))  # checked before the data
        full = _full_problem(config_json, seed)  # the simulator's generator and partitioner
        n_clients = full.n_clients
        ids = partition_clients(n_clients, *partition)
        data = subset(full.data, ids)
    loss, regularizer, n_classes = build_components(setting)
    # streaming (``streaming = true``): minibatches are fresh draws of the generator keyed by
    # the global client id, as in the simulator; the node's data then only fix shapes
    try:
        problem = Problem(loss, regularizer, data, n_classes=n_classes, name=setting.name,
                          sampler=build_sampler(setting, seed),
                          minibatch=setting.problem.get("minibatch", "with_replacement"))
    except ValueError as error:  # a file's labels or shapes the configuration's loss refuses
        if "data-path" not in options:
            raise
        raise ValueError(f"{node_file(path, options)}: {error}") from None
    return NodeData(problem, ids, n_clients)
