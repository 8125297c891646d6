"""The ServerApp: the simulator's round loop with the client updates sent to SuperNodes.

``main(grid, context)`` (Flower's Message API):

1. waits until SuperNodes covering every client of the configuration are connected
   (``node-timeout``; the error names the missing partitions), sending each new node the
   resolved configuration in a ``query`` message;
2. runs :func:`fedcomp.experiments.run_experiment` — the very code behind ``fedcomp run``
   (seeded sampling, ``broadcast``/``server_update`` with the simulator's
   :class:`~fedcomp.algorithms.ServerContext`, counters, evaluation, ``results.csv`` /
   ``config.json``) — with a client executor that sends each round's message to the nodes
   hosting the participants (``train`` messages: ``grid.push_messages`` /
   ``pull_messages`` with a bounded wait, see :func:`exchange`) and stacks
   their uploads in the participants' order.

Server state never leaves this loop; aggregation is the algorithm's own
``server_update``, never a Flower strategy.
"""

from __future__ import annotations

import inspect
import json
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
from flwr.serverapp import Grid, ServerApp

from .._array import take_rows
from ..algorithms._base import message_floats
from ..config import to_jsonable
from ..runtime._clients import concat_uploads, gather_states
from ._client import CONFIG_KEY, INITIAL_KEY, MESSAGE_KEY
from ._codec import encode
from ._replies import BadReply, checked_uploads

#: run-config keys and defaults of the fedcomp Flower app
RUN_CONFIG_DEFAULTS: dict[str, Any] = {
    "fedcomp-config": "",     # the fedcomp configuration as JSON (required)
    "out-dir": "",            # where results.csv / config.json go ("" = a temporary dir)
    "num-nodes": 0,           # SuperNodes to wait for (0 = num-partitions the nodes report)
    "node-timeout": 120.0,    # seconds to wait for them
    "round-timeout": 300.0,   # seconds to wait for a round's replies
    "rejoin-timeout": 0.0,    # seconds to wait for a silent node to come back (0 = fail)
}

#: Flower error codes meaning "the node is gone", not "the ClientApp failed": message or
#: reply unavailable, node unavailable, ClientApp process crashed (flwr.common.constant)
_NODE_LOST = {3, 4, 5, 8}

#: written to out-dir at the end: {"status": "ok" | "failed", "error": ...}
STATUS_FILE = "flower_status.json"


class FlowerRunError(RuntimeError):
    """A SuperNode is missing, failed, or did not answer in time (the message names it)."""


def _describe(node_id: int, info: dict[str, Any]) -> str:
    part = (f"partition-id={info['partition-id']} of {info['num-partitions']}"
            if info.get("num-partitions", 0) else "data-path node")
    return f"SuperNode {node_id} ({part}, clients {info['client-ids']})"


def pull_replies(grid: Grid, message_ids: Iterable[str]) -> Iterable[Message]:
    """``grid.pull_messages`` for the replies to ``message_ids`` (never none: every caller
    waits on some), by keyword: Flower 1.43 renames the argument ``reply_to_message_ids``,
    where ``None`` means every message, and 1.41–1.42 call it ``message_ids``."""
    ids = list(message_ids)
    if not ids:
        raise ValueError("pull_replies needs the ids of the messages whose replies it pulls; "
                         "an empty list would ask Flower 1.43 for every message")
    accepted = inspect.signature(grid.pull_messages).parameters
    keyword = "reply_to_message_ids" if "reply_to_message_ids" in accepted else "message_ids"
    return grid.pull_messages(**{keyword: ids})


def exchange(grid: Grid, messages: list[Message], timeout: float,
             enough: Callable[[list[Message]], bool] | None = None
             ) -> dict[int, Message]:
    """Push ``messages`` and pull their replies until all arrived or ``timeout`` s passed
    (or, given ``enough``, as soon as ``enough(replies)`` holds); the replies by the node
    each message went to.

    Replies are matched to their messages by id, not by sender: an error the SuperLink
    returns for a node (``Node Unavailable`` once its heartbeat lapsed) comes from the
    SuperLink's own node id. ``Grid.send_and_receive`` of Flower's deployment grid (1.41, 1.42)
    sleeps 3 s between pulls, which would add up to 3 s to every round; this polls every
    20 ms at first, backing off to 0.5 s, so a round costs what the nodes take.
    """
    destination = {i: m.metadata.dst_node_id
                   for i, m in zip(grid.push_messages(messages), messages, strict=True) if i}
    pending = set(destination)
    replies: dict[int, Message] = {}
    deadline = time.monotonic() + timeout
    delay = 0.02
    while pending:
        for reply in pull_replies(grid, pending):
            replies[destination[reply.metadata.reply_to_message_id]] = reply
            pending.discard(reply.metadata.reply_to_message_id)
        if not pending or time.monotonic() >= deadline or (
                enough and enough(list(replies.values()))):
            break
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(1.5 * delay, 0.5)
    return replies


def query_nodes(grid: Grid, node_ids: list[int], config_json: str, n_clients: int,
                timeout: float, enough: Callable[[list[Message]], bool] | None = None
                ) -> dict[int, dict[str, Any]]:
    """Send the configuration to ``node_ids`` (``query``); the reports of those that answer.

    A node the SuperLink reports unavailable (:data:`_NODE_LOST`: a node that died and is
    still listed until its heartbeat lapses, or one not up yet) is left out, not an error:
    the callers ask again until their own timeout (``node-timeout``, ``rejoin-timeout``).
    """
    content = RecordDict({CONFIG_KEY: ConfigRecord({"config": config_json})})
    messages = [Message(content, dst_node_id=n, message_type=MessageType.QUERY)
                for n in node_ids]
    nodes = {}
    for src, reply in exchange(grid, messages, timeout, enough).items():
        if reply.has_error() and reply.error.code in _NODE_LOST:
            continue
        if reply.has_error():
            raise FlowerRunError(f"SuperNode {src} failed to load its data: "
                                 f"{reply.error.reason}")
        info: dict[str, Any] = dict(reply.content.config_records[CONFIG_KEY])
        info["client-ids"] = [int(c) for c in info["client-ids"]]
        if int(info["n-clients"]) != n_clients:
            raise FlowerRunError(f"{_describe(src, info)} reports n_clients="
                                 f"{info['n-clients']}, the configuration has {n_clients}")
        nodes[src] = info
    return nodes


def connect_nodes(grid: Grid, config_json: str, n_clients: int, num_nodes: int,
                  timeout: float, poll: float = 0.5) -> dict[int, dict[str, Any]]:
    """Wait until connected SuperNodes host every client exactly once; their reports.

    Each new node gets the configuration in a ``query`` message and answers with its
    client ids. Fails after ``timeout`` seconds naming what is missing, instead of starting
    with whichever nodes happen to be there.
    """
    deadline = time.monotonic() + timeout
    nodes: dict[int, dict[str, Any]] = {}
    while True:
        new = [n for n in grid.get_node_ids() if n not in nodes]
        if new:
            nodes.update(query_nodes(grid, new, config_json, n_clients,
                                     max(1.0, deadline - time.monotonic())))
        owners: dict[int, int] = {}
        for node_id, info in nodes.items():
            for c in info["client-ids"]:
                if c in owners:
                    raise FlowerRunError(
                        f"client {c} is hosted by both {_describe(owners[c], nodes[owners[c]])}"
                        f" and {_describe(node_id, info)}; give every SuperNode a distinct "
                        "partition-id")
                owners[c] = node_id
        expected = num_nodes or max((int(i.get("num-partitions", 0)) for i in nodes.values()),
                                    default=0)
        if len(owners) == n_clients and (not expected or len(nodes) >= expected):
            return nodes
        if time.monotonic() > deadline:
            missing = sorted(set(range(n_clients)) - set(owners))
            parts = sorted({int(i["num-partitions"]) for i in nodes.values()} - {0})
            hint = ""
            if len(parts) == 1:
                have = {int(i["partition-id"]) for i in nodes.values()}
                absent = sorted(set(range(parts[0])) - have)
                hint = (f"; missing partition-id {absent} of num-partitions={parts[0]} "
                        f"(start them with --node-config 'partition-id=K "
                        f"num-partitions={parts[0]}')")
            connected = ", ".join(_describe(n, i) for n, i in nodes.items()) or "none"
            raise FlowerRunError(
                f"waited {timeout:g} s for SuperNodes hosting all {n_clients} clients "
                f"(expected {expected or '?'} nodes) but clients {missing} have no node"
                f"{hint}. Connected: {connected}. Start the missing SuperNodes or raise "
                "node-timeout")
        time.sleep(poll)


def portable_recipe(algorithm: Any, setup: Any) -> str:
    """The prepared ``algorithm``'s recipe as JSON, checked to rebuild it on a node.

    Nodes rebuild the algorithm from its recipe (its base algorithm's name and
    hyperparameters, and the transforms around it: :class:`~fedcomp.algorithms.Recipe`)
    and prepare it on their own clients (``setup``, the server's set-up context, stands in
    for theirs): the rebuilt algorithm must have the very same recipe, or a node would run
    another algorithm than the server's.
    """
    from ..algorithms import rebuild_algorithm, recipe_of

    recipe = json.dumps(to_jsonable(recipe_of(algorithm).to_json()))
    try:  # nodes rebuild the (prepared) algorithm from its recipe
        rebuilt = rebuild_algorithm(json.loads(recipe))
        rebuilt = rebuilt.prepare(setup) or rebuilt
    except (TypeError, ValueError) as exc:
        raise FlowerRunError(f"{algorithm.name}: its recipe {recipe} does not rebuild it on a "
                             f"node ({exc})") from exc
    again = json.dumps(to_jsonable(recipe_of(rebuilt).to_json()))
    if again != recipe:  # prepare must record what it resolved
        raise FlowerRunError(f"{algorithm.name}: rebuilt from its recipe {recipe} and "
                             f"prepared, it is {again}; its prepare must record every value "
                             "it resolves in its hyperparameters")
    return recipe


class FlowerClients:
    """Client executor for :func:`fedcomp.runtime.simulate` that runs rounds on SuperNodes.

    Built by :func:`functools.partial` over the Flower-specific arguments; ``simulate``
    supplies ``(algorithm, problem, client_states, counters, settings)``. Each node keeps
    its clients' states; the server's copy (``init(x⁰)``) only seeds them: a node's first
    train message of the run carries one row of it, so the nodes start from the run's
    ``x⁰`` (a network's seeded parameters, or the ``x0`` given to ``simulate``).
    """

    def __init__(self, algorithm: Any, problem: Any, client_states: Any, counters: Any,
                 settings: Any, *, grid: Grid, nodes: dict[int, dict[str, Any]], run: str,
                 rounds: int, round_timeout: float, config_json: str = "",
                 rejoin_timeout: float = 0.0, log: Any = None) -> None:
        from ..algorithms._base import setup_context

        self.algorithm, self.problem, self.counters = algorithm, problem, counters
        self.settings, self.grid, self.nodes, self.run = settings, grid, nodes, run
        self.rounds, self.round_timeout, self.log = rounds, round_timeout, log
        self.config_json, self.rejoin_timeout = config_json, rejoin_timeout
        # not "client_states": the nodes' states move on without the server's copy
        self.initial_states = client_states
        self.trained: set[tuple[int, ...]] = set()  # partitions that ran a round of this run
        self.dead: set[int] = set()
        self.owner = {c: n for n, info in nodes.items() for c in info["client-ids"]}
        self.recipe = portable_recipe(algorithm, setup_context(problem))

    def _train_message(self, node_id: int, ids: list[int], record: Any, round_: int
                       ) -> Message:
        s = self.settings
        fresh = self._partition(node_id) not in self.trained
        spec = ConfigRecord({
            "run": self.run, "algorithm": self.algorithm.name,
            "recipe": self.recipe, "round": round_, "seed": s.seed,
            "batch-size": s.batch_size or 0, "client-ids": ids,
            "pi": [float(p) for p in self.problem.weights[ids]],
            "n-clients": self.problem.n_clients,
            # a node that restarts must restore these clients' states from its checkpoint
            "resume": not fresh})
        content = RecordDict({MESSAGE_KEY: record, CONFIG_KEY: spec})
        if fresh and len(self.initial_states):
            # the node's clients start from init(x⁰), whose rows are all alike: send one
            first = np.asarray(self._partition(node_id)[:1], dtype=np.int64)
            content[INITIAL_KEY] = encode(gather_states(self.initial_states, first))
        return Message(content, dst_node_id=node_id, message_type=MessageType.TRAIN,
                       group_id=f"{self.run}/round{round_}")

    def _partition(self, node_id: int) -> tuple[int, ...]:
        return tuple(self.nodes[node_id]["client-ids"])

    def run_round(self, round_: int, message: Any, participants: np.ndarray) -> Any:
        by_node: dict[int, list[int]] = {}
        for c in participants.tolist():
            by_node.setdefault(self.owner[c], []).append(c)
        record = encode(message)
        where = f"in round {round_ + 1} of {self.run}"
        pending = dict(by_node)
        replies: dict[tuple[int, ...], Message] = {}
        while pending:
            tic = time.monotonic()
            out = [self._train_message(n, ids, record, round_) for n, ids in pending.items()]
            got = exchange(self.grid, out, self.round_timeout)
            missing, reasons = {}, {}
            for node_id, ids in pending.items():
                reply = got.get(node_id)
                if reply is None or (reply.has_error() and reply.error.code in _NODE_LOST):
                    missing[node_id] = ids
                    if reply is not None:
                        reasons[node_id] = f" (SuperLink: {reply.error.reason})"
                elif reply.has_error():
                    raise FlowerRunError(f"{_describe(node_id, self.nodes[node_id])} failed "
                                         f"{where}: {reply.error.reason}")
                else:
                    replies[tuple(ids)] = reply
                    self.trained.add(self._partition(node_id))
            if missing and self.rejoin_timeout <= 0:
                node_id = next(iter(missing))
                raise FlowerRunError(
                    f"{_describe(node_id, self.nodes[node_id])} did not reply {where} within "
                    f"round-timeout={self.round_timeout:g} s (waited "
                    f"{time.monotonic() - tic:.1f} s){reasons.get(node_id, '')}: the node is "
                    "down or unreachable. "
                    "Restart it (with the same node_config) and rerun, or set rejoin-timeout "
                    "and a checkpoint-dir on the nodes to resume")
            pending = self._rejoin(missing, where, reasons) if missing else {}
        position = {c: i for i, c in enumerate(participants.tolist())}
        order = np.empty(len(participants), dtype=np.int64)
        parts, start = self._checked(by_node, replies, where), 0
        for ids in by_node.values():
            for k, c in enumerate(ids):
                order[position[c]] = start + k
            start += len(ids)
        stacked = concat_uploads(parts)
        if not np.array_equal(order, np.arange(len(order))):
            stacked = type(stacked)(*(take_rows(f, order) for f in stacked))
        if self.log is not None:
            self.log(f"{self.run}: round {round_ + 1}/{self.rounds} "
                     f"({len(participants)} clients on {len(by_node)} nodes, "
                     f"{message_floats(stacked, leading=1) * len(participants)} floats up)")
        return stacked

    def _checked(self, by_node: dict[int, list[int]], replies: dict[tuple[int, ...], Message],
                 where: str) -> list[Any]:
        """The nodes' uploads, each reply checked before any is used (:mod:`._replies`);
        their counts added."""
        nodes = list(by_node)
        try:
            parts, counts = checked_uploads(
                [replies[tuple(by_node[n])].content for n in nodes],
                [len(by_node[n]) for n in nodes], self.problem.data.like,
                tuple(self.problem.zeros().shape))
        except BadReply as exc:
            node_id = nodes[exc.index]
            raise FlowerRunError(f"{_describe(node_id, self.nodes[node_id])} sent a reply the "
                                 f"server refuses {where}: {exc}. Nothing of it was "
                                 "aggregated; the run stops") from exc
        for counted in counts:
            for key, value in counted.items():
                setattr(self.counters, key, getattr(self.counters, key) + value)
        return parts

    def _rejoin(self, missing: dict[int, list[int]], where: str,
                reasons: dict[int, str] | None = None) -> dict[int, list[int]]:
        """Wait for the nodes of ``missing`` to come back (same clients); their node ids.

        A restarted SuperNode usually gets a new node id, but one that keeps its identity
        (SuperNode authentication) comes back under the old id, so both are asked.
        """
        waiting = {self._partition(n): n for n in missing}
        for node_id in missing:
            if self.log is not None:
                self.log(f"{_describe(node_id, self.nodes[node_id])} did not reply {where}"
                         f"{(reasons or {}).get(node_id, '')}; "
                         f"waiting up to {self.rejoin_timeout:g} s for it to rejoin")
        deadline = time.monotonic() + self.rejoin_timeout
        found: dict[int, list[int]] = {}
        while waiting:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                absent = "; ".join(_describe(n, self.nodes[n]) for n in waiting.values())
                raise FlowerRunError(f"{absent} did not reply {where} and did not rejoin "
                                     f"within rejoin-timeout={self.rejoin_timeout:g} s")
            lost_ids = set(waiting.values())
            candidates = [n for n in self.grid.get_node_ids() if n not in self.dead
                          and (n not in self.nodes or n in lost_ids)]

            def covered(replies: list[Message]) -> bool:  # stop waiting for dead ids
                have = {tuple(r.content.config_records[CONFIG_KEY]["client-ids"])  # type: ignore[arg-type]
                        for r in replies if r.has_content()}
                return set(waiting) <= have

            # a query's reply is waited for as long as a round's: on a loaded machine a
            # node's ClientApp process takes seconds to start, and a shorter wait re-asks
            # forever, dropping each late reply (seen at load 20 with a 5 s wait)
            wait = min(remaining, max(5.0, self.round_timeout))
            reports = (query_nodes(self.grid, candidates, self.config_json,
                                   self.problem.n_clients, wait, covered)
                       if candidates else {})
            for node_id, info in reports.items():
                partition = tuple(info["client-ids"])
                if partition not in waiting:
                    raise FlowerRunError(f"{_describe(node_id, info)} joined {where}, but no "
                                         "missing node hosted these clients")
                old_id = waiting.pop(partition)
                del self.nodes[old_id]
                if old_id != node_id:
                    self.dead.add(old_id)  # never ask the old id again
                self.nodes[node_id] = info
                found[node_id] = missing[old_id]
            if waiting:
                time.sleep(0.5)
        self.owner = {c: n for n, info in self.nodes.items() for c in info["client-ids"]}
        return found


def run_server(grid: Grid, config: dict[str, Any], out_dir: str | Path | None = None, *,
               num_nodes: int = 0, node_timeout: float = 120.0, round_timeout: float = 300.0,
               rejoin_timeout: float = 0.0,
               log: Any = print) -> list[dict[str, Any]]:
    """Connect the nodes and run every (seed, mode, algorithm) of ``config`` through them.

    Writes ``results.csv``, ``config.json``, ``models/``, ``summary.md`` like
    ``fedcomp run`` plus ``flower_status.json``. A node that does not answer a round
    within ``round_timeout`` fails the run — unless ``rejoin_timeout > 0``: then the server
    waits that long for a node with the same clients to (re)connect and resends it the
    round (it restores its clients' states from its ``checkpoint-dir``). A failure
    raises :class:`FlowerRunError` after recording it there, leaving the rows of
    completed evaluations in ``results.csv``.
    """
    from ..experiments import resolve, run_experiment

    experiment = resolve(config)
    cfg = experiment.config
    config_json = json.dumps(to_jsonable(cfg), sort_keys=True)
    out = Path(out_dir) if out_dir else Path(tempfile.mkdtemp(prefix="fedcomp-flower-"))
    out.mkdir(parents=True, exist_ok=True)
    status = out / STATUS_FILE
    status.unlink(missing_ok=True)
    try:
        _check_star_topology(experiment)
        n_clients = _n_clients(cfg)
        nodes = connect_nodes(grid, config_json, n_clients, num_nodes, node_timeout)
        log(f"fedcomp: {len(nodes)} SuperNodes connected, hosting {n_clients} clients; "
            f"results go to {out}")

        def clients(*, label: str, seed: int, batch_size: int | None, rounds: int) -> Any:
            run = f"{label}/seed{seed}"
            return partial(FlowerClients, grid=grid, nodes=nodes, run=run, rounds=rounds,
                           round_timeout=round_timeout, config_json=config_json,
                           rejoin_timeout=rejoin_timeout, log=log)

        summary = run_experiment(experiment, out, progress=False, stream=sys.stdout,
                                 clients=clients)
    except BaseException as exc:
        status.write_text(json.dumps({"status": "failed", "error": failure_text(exc),
                                      "type": type(exc).__name__}) + "\n")
        raise
    status.write_text(json.dumps({"status": "ok", "out_dir": str(out)}) + "\n")
    return summary


def failure_text(exc: BaseException) -> str:
    """What ``flower_status.json`` says of a failed run: the error's own message, or for a
    run that was stopped (``flwr stop`` ends the ServerApp with ``SystemExit(0)``, whose
    text is "0") what happened.

    Examples
    --------
    >>> failure_text(SystemExit(0))
    'the run was stopped before it finished (flwr stop, or a signal to the ServerApp)'
    >>> failure_text(FlowerRunError("SuperNode 7 did not reply"))
    'SuperNode 7 did not reply'
    """
    if isinstance(exc, SystemExit | KeyboardInterrupt):
        return "the run was stopped before it finished (flwr stop, or a signal to the ServerApp)"
    return str(exc) or type(exc).__name__


def _check_star_topology(experiment: Any) -> None:
    """Fail before any node is contacted when the configuration has gossip algorithms."""
    gossip = sorted({spec.label for setting in experiment.settings
                     for spec in setting.algorithms if spec.execution == "decentralized"})
    if gossip:
        raise FlowerRunError(
            f"{gossip} are decentralized (gossip between nodes over the [topology] graph): "
            "fedcomp.flower runs the star-topology algorithms (a server and its clients) only. "
            "Remove their [[algorithms]] entries to run the others through Flower, and run "
            "the decentralized ones with 'fedcomp run'")


def _n_clients(cfg: dict[str, Any]) -> int:
    """Clients of the configuration (from data.n_clients, else by building the data)."""
    n = cfg["data"].get("n_clients")
    if isinstance(n, int):
        return n
    from ..experiments import build_problem, resolve

    return build_problem(resolve(cfg).base).n_clients


def _run_config(context: Context, overrides: dict[str, Any]) -> dict[str, Any]:
    values = {**RUN_CONFIG_DEFAULTS, **dict(context.run_config), **overrides}
    return values


def make_server_app(config: dict[str, Any] | None = None, **run_config: Any) -> ServerApp:
    """A Flower ServerApp running the fedcomp configuration ``config``.

    Parameters
    ----------
    config : dict, optional
        The fedcomp configuration; by default the app reads it (as JSON) from the run
        config key ``fedcomp-config`` (what ``fedcomp flower app`` writes).
    **run_config
        Overrides of :data:`RUN_CONFIG_DEFAULTS` with underscores for dashes
        (``out_dir=``, ``num_nodes=``, ``node_timeout=``, ``round_timeout=``).

    Examples
    --------
    >>> type(make_server_app()).__name__
    'ServerApp'
    """
    overrides = {k.replace("_", "-"): v for k, v in run_config.items()}
    unknown = sorted(set(overrides) - set(RUN_CONFIG_DEFAULTS))
    if unknown:
        raise ValueError(f"unknown run config {unknown}; accepted: "
                         f"{sorted(k.replace('-', '_') for k in RUN_CONFIG_DEFAULTS)}")
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        values = _run_config(context, overrides)
        cfg = config
        if cfg is None:
            if not values["fedcomp-config"]:
                raise FlowerRunError("the run config has no fedcomp-config; write the app "
                                     "with 'fedcomp flower app CONFIG.toml --out DIR'")
            cfg = json.loads(str(values["fedcomp-config"]))
        run_server(grid, cfg, values["out-dir"] or None, num_nodes=int(values["num-nodes"]),
                   node_timeout=float(values["node-timeout"]),
                   round_timeout=float(values["round-timeout"]),
                   rejoin_timeout=float(values["rejoin-timeout"]),
                   log=partial(print, flush=True))

    return app


__all__ = ["FlowerClients", "FlowerRunError", "connect_nodes", "make_server_app", "run_server"]
