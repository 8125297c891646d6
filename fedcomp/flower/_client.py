"""The ClientApp: one SuperNode runs ``client_update`` for the clients it hosts.

Two handlers:

``query`` (discovery)
    Receives the resolved fedcomp configuration (JSON), loads the node's clients from its
    ``node_config`` (:mod:`fedcomp.flower._data`), keeps the configuration in
    ``context.state`` and answers with the node's global client ids.
``train`` (one round)
    Receives the algorithm's broadcast message (one record entry per field) and, in a
    ConfigRecord, the run, the round, the seed, the batch size and the participating client
    ids with their weights. It runs ``client_update`` on those clients as one block,
    keeps their new client states in ``context.state`` (and, when ``node_config`` has a
    ``checkpoint-dir``, on disk) and replies with the upload and its gradient/prox counts.
    The first ``train`` message of a run also carries one row of the server's initial
    client states (``init(x⁰)``, ``x⁰`` the run's starting model), from which the node
    starts all its clients.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from .._array import asarray_like
from ..algorithms import rebuild_algorithm
from ..algorithms._base import setup_context
from ..oracle import Counters
from ..runtime._clients import ClientSettings, LocalClients, gather_states
from ..runtime._round import counted_prox
from ._codec import decode, encode
from ._data import NodeData, load_node_data

#: keys of the fedcomp records in messages and in ``context.state``
CONFIG_KEY = "fedcomp"
MESSAGE_KEY = "message"
UPLOAD_KEY = "upload"
COUNTS_KEY = "counts"
INITIAL_KEY = "initial"


def _node_options(context: Context) -> tuple[tuple[str, Any], ...]:
    return tuple(sorted((str(k), v) for k, v in context.node_config.items()))


def _node_data(context: Context, seed: int | None = None) -> NodeData:
    """The node's clients, their data drawn for the run seed ``seed`` where data follow it."""
    if CONFIG_KEY not in context.state:
        raise RuntimeError("this SuperNode has no fedcomp configuration for the run (it was "
                           "restarted or joined late); the server sends it on discovery")
    config_json = str(context.state.config_records[CONFIG_KEY]["config"])
    return load_node_data(config_json, _node_options(context), seed)


def handle_query(msg: Message, context: Context) -> Message:
    """Discovery: store the configuration, load the node's data, report its client ids."""
    config_json = str(msg.content.config_records[CONFIG_KEY]["config"])
    context.state[CONFIG_KEY] = ConfigRecord({"config": config_json})
    node = load_node_data(config_json, _node_options(context))
    options = dict(context.node_config)
    reply = ConfigRecord({
        "client-ids": [int(i) for i in node.client_ids],
        "n-clients": int(node.n_clients),
        "partition-id": int(options.get("partition-id", -1)),
        "num-partitions": int(options.get("num-partitions", 0)),
        "pid": os.getpid(),
    })
    return Message(RecordDict({CONFIG_KEY: reply}), reply_to=msg)


def _checkpoint_path(context: Context, run: str, ids: np.ndarray) -> Path | None:
    directory = context.node_config.get("checkpoint-dir")
    if not directory:
        return None
    import hashlib

    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in run)
    # keyed by the Flower run (a new run never starts from an old run's states) and by
    # the node's clients ``ids`` (nodes may share a directory)
    clients = hashlib.sha1(ids.tobytes()).hexdigest()[:10]
    return Path(str(directory)) / f"fedcomp-run{context.run_id}-{safe}-clients{clients}.npz"


class StateLostError(RuntimeError):
    """A rejoining SuperNode has no (usable) checkpoint of its clients' states."""


def _load_states(context: Context, run: str, template: Any, like: Any, round_: int,
                 resume: bool, ids: np.ndarray) -> Any:
    """The node's client states for ``run`` before round ``round_``.

    From ``context.state`` while the node lives; after a restart (``resume``: the server
    says these clients have trained before) from the checkpoint, which holds the states
    before and after the last round the node ran — so a round whose reply was lost is
    recomputed from the same states. Rounds the node sat out (client sampling, or the
    other clients' arrivals of an asynchronous run) left its states unchanged, so any
    earlier round's "after" states are current. A fresh start uses ``template``: the
    server's initial states (:func:`_initial_states`).
    """
    key = f"{CONFIG_KEY}.state.{run}"
    if len(template) == 0:
        return template
    if key in context.state:
        return decode(context.state.array_records[key], like, type(template))
    if not resume:
        return template
    path = _checkpoint_path(context, run, ids)
    if path is None or not path.exists():
        raise StateLostError(
            f"this SuperNode lost the client states of {run} (restarted without a checkpoint) "
            f"and cannot rejoin in round {round_ + 1}; give it a checkpoint-dir in its "
            "node_config to make restarts resumable")
    with np.load(path, allow_pickle=False) as npz:
        done = int(npz["round"])
        if done < round_:
            prefix = "after."
        elif done == round_:
            prefix = "before."
        else:
            raise StateLostError(f"the checkpoint {path} holds {run} after round {done + 1}; "
                                 f"it cannot resume round {round_ + 1}")
        return type(template)(*(asarray_like(npz[prefix + f], like) for f in template._fields))


def _store_states(context: Context, run: str, round_: int, before: Any, after: Any,
                  ids: np.ndarray) -> None:
    if len(after) == 0:
        return
    context.state[f"{CONFIG_KEY}.state.{run}"] = encode(after)
    path = _checkpoint_path(context, run, ids)
    if path is not None:
        from .._array import to_numpy

        arrays: dict[str, Any] = {"round": np.asarray(round_)}
        for prefix, states in (("before.", before), ("after.", after)):
            arrays.update({prefix + f: to_numpy(v)
                           for f, v in zip(states._fields, states, strict=True)})
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.stem + ".tmp.npz")
        np.savez(tmp, **arrays)
        os.replace(tmp, path)  # atomic: a crash never leaves a half-written checkpoint


def _initial_states(msg: Message, template: Any, like: Any, run: str) -> Any:
    """The node's client states before their first round: the server's row repeated.

    The server sends one row of the states its ``init(x⁰, ...)`` built, ``x⁰`` being the
    run's starting model — ``problem.initial_model()`` (a network's seeded parameters, not
    zeros) or the ``x0`` given to ``simulate`` — which the node cannot know by itself.
    ``init`` does not depend on which client a row belongs to, so that row, repeated,
    is the simulator's initial state of every client the node hosts. ``template`` (the
    node's own ``init`` output) gives the states' type and row count only.
    """
    if len(template) == 0:
        return template
    if INITIAL_KEY not in msg.content.array_records:
        raise ValueError(f"the first train message of {run} has no initial client state "
                         f"('{INITIAL_KEY}' record): the server runs an older fedcomp; run "
                         "the same fedcomp version on the server and the SuperNodes")
    row = decode(msg.content.array_records[INITIAL_KEY], like, type(template))
    return gather_states(row, np.zeros(template[0].shape[0], dtype=np.int64))


def handle_train(msg: Message, context: Context) -> Message:
    """One round of ``client_update`` for the node's participating clients."""
    spec: dict[str, Any] = dict(msg.content.config_records[CONFIG_KEY])
    return train_clients(msg, context, _node_data(context, int(spec["seed"])))


def train_clients(msg: Message, context: Context, node: NodeData) -> Message:
    """The reply to a ``train`` message: ``client_update`` of the participants it names
    among ``node``'s clients, their new states kept in ``context.state``.

    Shared by fedcomp's own ClientApp (:func:`handle_train`, the node's clients built
    from the configuration) and by a user's ClientApp (:func:`fedcomp.flower.client_train`,
    one client on the user's own arrays).
    """
    spec: dict[str, Any] = dict(msg.content.config_records[CONFIG_KEY])
    problem = node.problem
    like = problem.data.like
    algorithm = rebuild_algorithm(json.loads(str(spec["recipe"])))
    # as the simulator does: algorithms whose constants come from the problem (C-FedDA's
    # norm, FedCanon II's evaluation prox) are placeholders until prepared. The node's set-up
    # context is the server's but for what only the server knows: the participation (the
    # server checked it) and the smoothness of the other nodes' clients (the server sent the
    # values its prepare resolved on all the data, smoothness and λ, as hyperparameters).
    setup = setup_context(problem)._replace(n_clients=int(spec["n-clients"]))
    algorithm = algorithm.prepare(setup) or algorithm
    run = str(spec["run"])
    round_ = int(spec["round"])
    batch_size = int(spec["batch-size"]) or None
    ids = np.asarray(spec["client-ids"], dtype=np.int64)
    position = {int(c): i for i, c in enumerate(node.client_ids)}
    missing = [int(c) for c in ids if int(c) not in position]
    if missing:
        raise ValueError(f"this SuperNode hosts clients {node.client_ids.tolist()}, not {missing}")
    rows = np.array([position[int(c)] for c in ids], dtype=np.int64)

    # client states of all the node's clients, updated only for the participants; a fresh
    # start uses the server's initial states (see _initial_states)
    _, template = algorithm.init(problem.zeros(), len(node.client_ids))
    resume = bool(spec.get("resume", False))
    if not resume:
        template = _initial_states(msg, template, like, run)
    states = _load_states(context, run, template, like, round_, resume, node.client_ids)
    counters = Counters()
    prox, _ = counted_prox(problem.regularizer, counters)
    # the participants' weights π, sent by the server, at their rows (one block of them)
    weights = np.zeros(len(node.client_ids))
    weights[rows] = np.asarray(spec["pi"], dtype=np.float64)
    clients = LocalClients.of_clients(
        algorithm, problem, states, counters,
        ClientSettings(int(spec["seed"]), batch_size, max(1, len(rows)), prox),
        client_ids=node.client_ids, weights=weights, n_clients=int(spec["n-clients"]))
    message = decode(msg.content.array_records[MESSAGE_KEY], like, name="Message")
    upload = clients.run_round(round_, message, rows)
    _store_states(context, run, round_, states, clients.client_states, node.client_ids)
    counts = MetricRecord({k: int(v) for k, v in counters.as_dict().items()})
    # compact: a compressed upload crosses the network in its sparse or codebook form
    return Message(RecordDict({UPLOAD_KEY: encode(upload, compact=True), COUNTS_KEY: counts}),
                   reply_to=msg)


def make_client_app() -> ClientApp:
    """A Flower ClientApp running any registered fedcomp algorithm (see the module docstring).

    Examples
    --------
    >>> app = make_client_app()
    >>> type(app).__name__
    'ClientApp'
    """
    app = ClientApp()
    app.query()(handle_query)
    app.train()(handle_train)
    return app

