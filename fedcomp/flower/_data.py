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
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from ..data import ClientData
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
        with np.load(path, allow_pickle=False) as npz:
            ids = np.asarray(npz["client_ids"], dtype=np.int64)
            order = np.argsort(ids, kind="stable")  # rows in global-id order, like participants
            ids = ids[order]
            data = ClientData(npz["features"][order], npz["targets"][order],
                              npz["counts"][order])
        n_clients = int(options.get("num-clients", cfg["data"].get("n_clients", 0)))
        if n_clients <= int(ids.max(initial=-1)):
            raise ValueError(f"data-path {str(path)!r} holds client ids up to {ids.max()}, but "
                             f"the federation has n_clients={n_clients}; set node_config "
                             "num-clients or data.n_clients")
    else:
        missing = [k for k in ("partition-id", "num-partitions") if k not in options]
        if missing:
            raise ValueError(f"SuperNode node_config lacks {missing}: start it with "
                             "--node-config 'partition-id=K num-partitions=N' (or data-path=...)")
        full = _full_problem(config_json, seed)  # the simulator's generator and partitioner
        n_clients = full.n_clients
        ids = partition_clients(n_clients, int(options["partition-id"]),
                                int(options["num-partitions"]))
        data = subset(full.data, ids)
    loss, regularizer, n_classes = build_components(setting)
    # streaming (``streaming = true``): minibatches are fresh draws of the generator keyed by
    # the global client id, as in the simulator; the node's data then only fix shapes
    problem = Problem(loss, regularizer, data, n_classes=n_classes, name=setting.name,
                      sampler=build_sampler(setting, seed),
                      minibatch=setting.problem.get("minibatch", "with_replacement"))
    return NodeData(problem, ids, n_clients)
