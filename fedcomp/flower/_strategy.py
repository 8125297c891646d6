"""A Flower ``Strategy`` running any fedcomp algorithm in a user's own ServerApp.

:class:`Strategy` is for Flower users who keep their own apps: their ServerApp calls
``Strategy(...).start(grid, initial_arrays, num_rounds)`` as it would Flower's ``FedAvg``,
and their ClientApp's ``train`` handler (and, for client-side evaluation, its ``evaluate``
handler) hands the message and the node's own arrays to :func:`client_train`
(:func:`client_evaluate`). One SuperNode is one client; its id is its ``partition-id``
(or the ``client_id`` its handler passes).

What happens in a run:

1. **Discovery** (in the first ``configure_train``): the strategy waits for ``num_clients``
   SuperNodes, sends each a ``train`` message of phase ``discover`` and gets back the
   node's client id, its sample total and its smoothness constant ``L_i``. From these it
   computes the weights ``π`` and prepares the algorithm (an ``"auto"`` step size resolves
   on every client's ``L_i``, as in the simulator).
2. **Rounds**: Flower round ``t`` is fedcomp round ``t − 1``. ``configure_train`` samples the
   participants (:func:`fedcomp._random.sample_clients`, keyed by the seed and the round,
   as the simulator) and sends each the algorithm's broadcast; the node runs
   ``client_update`` on its arrays and keeps its client state in ``context.state``;
   ``aggregate_train`` stacks the uploads in the participants' order and applies the
   algorithm's own ``server_update``. A warm-up phase (FedDR's ``x_i⁰ = prox_{ηf_i}(x⁰)``)
   runs before round 1.
3. **Evaluation** (``evaluate_every = k``): every ``k`` rounds each node reports ``f_i`` and
   its accuracy at the model, and ``aggregate_evaluate`` gives ``F = Σ π_i f_i + g``.

Every reply is checked before it is used (:mod:`fedcomp.flower._replies`): a discovery
report's client id, sample total and ``L_i``; each upload's fields, shapes (the model's, or
one scalar per client), dtype (floating), finiteness and counts; each evaluation's loss and
accuracy; and that it comes from a node of the federation. A reply that fails stops the
run with a :class:`~fedcomp.flower.FlowerRunError` naming the client, its SuperNode, the
round, the field and the fix — before anything of that round is aggregated or counted, so
the model stays the last good round's. (Dropping the node and going on would change the
participation the seed chose, and the run would no longer be the simulator's.)

The server state never leaves the strategy: the ``arrays`` Flower passes back in are the
model the strategy returned (``algorithm.output``), kept for Flower's ``Result``. Every
random draw is keyed by (seed, round, client id), so the run gives the simulator's iterates
on the same data, client by client.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

import numpy as np
from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Result
from flwr.serverapp.strategy import Strategy as FlowerStrategy

from .._extras import _installed
from .._random import sample_clients
from ..algorithms import DecentralizedAlgorithm, make_algorithm
from ..algorithms._base import SetupContext
from ..config import to_jsonable
from ..losses import LOSSES, make_loss
from ..oracle import Counters
from ..problem import MINIBATCH, normalised_weights
from ..regularizers import REGULARIZERS, make_regularizer
from ..regularizers._base import check_positive, check_real
from ..runtime._checks import (
    check_divergence,
    check_sampling,
    check_seed,
    is_int,
    norm_limit_of,
)
from ..runtime._clients import concat_uploads, gather_states
from ..runtime._round import count_downloads, counted_prox, server_step
from ..runtime._stopping import NonFiniteError
from ._client import CONFIG_KEY, INITIAL_KEY, MESSAGE_KEY
from ._codec import encode
from ._privacy import FedcompAccountant, private_noise
from ._replies import BadReply, check_evaluation, check_report, checked_uploads
from ._server import FlowerRunError, exchange, portable_recipe
from ._stopping import ShouldStop, StoppingRule, StopWatch, flower_stops

#: the ``phase`` of a strategy's ``train`` message: discovery, or a round
DISCOVER, TRAIN = "discover", "train"
#: the record of the model in a strategy's ``evaluate`` message (Flower's convention)
ARRAYS_KEY = "arrays"


def component_spec(component: Any, registry: Any, what: str) -> dict[str, Any]:
    """``{"name": ..., **parameters}`` of a loss or regularizer, as the nodes rebuild it.

    ``component`` is a registered name, such a table, or an instance of a registered class
    (its dataclass fields are its parameters). Raises :class:`ValueError` for what cannot
    travel as JSON (a loss holding a PyTorch module).

    Examples
    --------
    >>> from fedcomp.regularizers import L1, REGULARIZERS
    >>> component_spec(L1(0.01), REGULARIZERS, "regularizer")
    {'name': 'l1', 'alpha': 0.01, 'param_ndim': 1}
    >>> component_spec("logistic", LOSSES, "loss")
    {'name': 'logistic'}
    """
    if isinstance(component, str):
        spec: dict[str, Any] = {"name": component}
    elif isinstance(component, Mapping):
        spec = dict(component)
        if not isinstance(spec.get("name"), str):
            raise ValueError(f"the {what} table {spec!r} needs 'name', a registered {what} "
                             f"({', '.join(registry)}): e.g. {{'name': {next(iter(registry))!r}}}")
    elif dataclasses.is_dataclass(component) and not isinstance(component, type):
        names = [e.name for e in registry.entries() if e.factory is type(component)]
        if not names:
            raise ValueError(f"the {what} {component!r} is not of a registered class "
                             f"({', '.join(registry)}); the nodes rebuild it by name")
        spec = {"name": names[0], **{f.name: getattr(component, f.name)
                                     for f in dataclasses.fields(component) if f.init}}
    else:
        raise ValueError(f"{what} must be a registered name, a table with 'name', or an "
                         f"instance of a registered class (got {component!r})")
    try:
        json.dumps(to_jsonable(spec))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the {what} {spec.get('name')!r} has parameters that cannot travel to "
                         f"the nodes as JSON ({exc}); give it by name with plain values") from exc
    return spec


def build_component(spec: Mapping[str, Any], make: Callable[..., Any],
                    what: str = "component") -> Any:
    """The loss or regularizer a :func:`component_spec` describes.

    The factory's own error (an unknown name or parameter, a value of the wrong type) is
    raised as a ``ValueError`` or ``TypeError`` that also says which ``what`` it was.
    """
    params = {k: v for k, v in spec.items() if k != "name"}
    try:
        return make(str(spec["name"]), **params)
    except TypeError as exc:
        raise TypeError(f"{what}={dict(spec)!r}: {exc}") from exc
    except ValueError as exc:
        raise ValueError(f"{what}={dict(spec)!r}: {exc}") from exc


def _star_algorithm(algorithm: Any) -> Any:
    """``algorithm`` (or the registered one it names), refused unless it runs in rounds."""
    built = make_algorithm(algorithm) if isinstance(algorithm, str) else algorithm
    execution = ("gossip" if isinstance(built, DecentralizedAlgorithm)
                 else getattr(built, "execution", None))
    if execution is None:  # neither a name nor an algorithm
        raise TypeError(f"algorithm must be a fedcomp algorithm such as fedcomp.fedmid("
                        f"client_lr=0.1) or a registered name such as 'fedmid' (got "
                        f"algorithm={algorithm!r})")
    if execution != "rounds":
        raise ValueError(
            f"{getattr(built, 'name', algorithm)} runs "
            f"{'on an event clock' if execution == 'async' else 'by gossip between nodes'}"
            "; fedcomp.flower.Strategy runs the star-topology algorithms in rounds. Run it "
            "with fedcomp's own Flower app ('fedcomp flower app') or 'fedcomp run'")
    return built


def _check_counts(num_clients: Any, clients_per_round: Any, batch_size: Any,
                  evaluate_every: Any) -> None:
    """The integer arguments (Python or NumPy integers, not bools), the simulator's way."""
    if not (is_int(num_clients) and num_clients >= 1):
        raise ValueError(f"num_clients must be a positive integer (got {num_clients!r})")
    check_sampling(num_clients, clients_per_round, batch_size)
    if not (is_int(evaluate_every) and evaluate_every >= 0):
        raise ValueError(f"evaluate_every must be an integer >= 0 (got {evaluate_every!r})")


class Strategy(FlowerStrategy):
    """Any registered fedcomp algorithm as a Flower ``Strategy`` (see the module docstring).

    Parameters
    ----------
    algorithm : FederatedAlgorithm or str
        A star-topology algorithm (``fedcomp.fedmid(client_lr=0.1)``) or a registered name
        with its defaults. Asynchronous and decentralized algorithms are refused.
    loss : Loss, str or dict
        The smooth loss of every client, by name (``"logistic"``), as a table
        (``{"name": "logistic", "l2": 0.01}``) or as an instance (``Logistic(l2=0.01)``);
        the nodes rebuild it.
    regularizer : Regularizer, str or dict, default "zero"
        ``g``, given the same ways (``L1(0.01)``, ``{"name": "l1", "alpha": 0.01}``).
    num_clients : int
        The clients of the federation: SuperNodes whose client ids are ``0..num_clients-1``.
        The strategy waits for them before round 1 and never starts with fewer.
    clients_per_round : int, optional
        Participants per round, sampled uniformly without replacement (all by default).
    batch_size : int, optional
        Minibatch size of every gradient call (full local gradients by default).
    seed : int, default 0
        Keys the sampling and the minibatches, as ``simulate(seed=...)``.
    weighting : {"samples", "uniform"} or sequence, default "samples"
        Client weights ``π``, as :class:`fedcomp.Problem`'s ``weighting``.
    minibatch : {"with_replacement", "without_replacement"}, default "with_replacement"
        How a minibatch draws a client's samples (:class:`fedcomp.Problem`).
    n_classes : int, optional
        The classes, for a loss whose model shape depends on them (``softmax``).
    evaluate_every : int, default 0
        Ask every node for ``f_i`` and its accuracy at the model every this many rounds
        (``0``: never; the nodes then need no ``evaluate`` handler).
    node_timeout : float, default 120
        Seconds to wait for the SuperNodes (and their discovery replies).
    max_norm : float or None, default 1e12
        A model whose norm exceeds this counts as diverged (the run stops with an error
        naming the round), as in :func:`fedcomp.simulate`.

    Attributes
    ----------
    accountant : FedcompAccountant or None
        For a private algorithm (``private(..., noise_multiplier > 0)``): the run's ``ε``
        in Flower's ``PrivacyAccountant`` protocol, one release composed per round
        (fixed-size sampling, fedcomp's accountant); every round's metrics then hold its
        ``epsilon`` at ``δ = 1e-5``. ``None`` otherwise.

    Raises
    ------
    ValueError, TypeError
        One error naming the first bad argument, its value and the fix; nothing is sent.

    Examples
    --------
    >>> from fedcomp import fedmid
    >>> from fedcomp.regularizers import L1
    >>> strategy = Strategy(fedmid(client_lr=0.1), loss="logistic", regularizer=L1(0.01),
    ...                     num_clients=4)
    >>> strategy.algorithm.name
    'fedmid'
    """

    def __init__(self, algorithm: Any, *, loss: Any, regularizer: Any = "zero",
                 num_clients: int, clients_per_round: int | None = None,
                 batch_size: int | None = None, seed: int = 0, weighting: Any = "samples",
                 minibatch: str = "with_replacement", n_classes: int | None = None,
                 evaluate_every: int = 0, node_timeout: float = 120.0,
                 max_norm: float | None = 1e12) -> None:
        self.algorithm = _star_algorithm(algorithm)
        _check_counts(num_clients, clients_per_round, batch_size, evaluate_every)
        check_seed(seed)
        # the simulator's and Problem's own checks, on what the nodes will be sent
        normalised_weights(weighting, 1 if isinstance(weighting, str) else num_clients,
                           lambda: np.ones(1))  # a name's check allocates nothing per client
        if not (isinstance(minibatch, str) and minibatch in MINIBATCH):  # Problem's values
            raise ValueError(f"minibatch must be one of {MINIBATCH} (got minibatch={minibatch!r})")
        if n_classes is not None and not (is_int(n_classes) and n_classes >= 2):
            raise ValueError(f"n_classes must be an integer >= 2, the classes of a loss such "
                             f"as 'softmax', or None (got n_classes={n_classes!r})")
        check_positive("node_timeout", node_timeout, "Strategy",
                       "give the seconds to wait for the SuperNodes, e.g. node_timeout=120")
        if max_norm is not None:
            check_real("max_norm", max_norm, "Strategy")
        self.loss_spec = component_spec(loss, LOSSES, "loss")
        self.regularizer_spec = component_spec(regularizer, REGULARIZERS, "regularizer")
        # built here too: a bad name or parameter fails in the ServerApp, before any node
        build_component(self.loss_spec, make_loss, "loss")
        self.regularizer = build_component(self.regularizer_spec, make_regularizer, "regularizer")
        self.problem_json = json.dumps(to_jsonable({
            "loss": self.loss_spec, "regularizer": self.regularizer_spec,
            "minibatch": minibatch, "n_classes": n_classes}), sort_keys=True)
        self.num_clients, self.clients_per_round = num_clients, clients_per_round
        self.batch_size, self.seed, self.weighting = batch_size, int(seed), weighting
        self.evaluate_every, self.node_timeout = evaluate_every, float(node_timeout)
        self.norm_limit = norm_limit_of(max_norm)
        self.counters = Counters()
        self.client_prox, self.server_prox = counted_prox(self.regularizer, self.counters)
        self.run = f"strategy-{uuid.uuid4().hex[:12]}"  # keys the nodes' client states
        self.nodes: dict[int, int] = {}      # client id -> SuperNode id
        self.weights = np.empty(0)
        self.server_state: Any = None
        self.initial_states: Any = None      # init(x⁰)'s client states (rows alike)
        self.recipe = ""
        self.trained: set[int] = set()       # clients that have their state on their node
        self.participants = np.empty(0, dtype=np.int64)
        self.watch = StopWatch()             # should_stop where Flower's start lacks it
        #: ``(σ, local)`` of a private algorithm; its ε in Flower's PrivacyAccountant protocol
        self.noise = private_noise(self.algorithm)
        self.accountant = (None if self.noise is None
                           else FedcompAccountant(num_clients, local=self.noise[1]))

    # --- Flower's Strategy interface -------------------------------------------------------
    def summary(self) -> None:
        """Log the strategy's set-up (Flower calls it before round 1)."""
        from logging import INFO

        from flwr.common.logger import log

        log(INFO, "\t├── fedcomp %s on %d clients (%s per round), g = %s, seed %d",
            self.algorithm, self.num_clients, self.clients_per_round or "all",
            self.regularizer, self.seed)

    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """Round ``server_round``'s messages: the broadcast to each sampled participant."""
        if self.watch.stopped:
            return []
        if self.server_state is None:
            self._start(grid, arrays)
        round_ = server_round - 1
        self.participants = sample_clients(self.seed, round_, self.num_clients,
                                           self.clients_per_round)
        message = self.algorithm.broadcast(self.server_state)
        count_downloads(self.counters, message, len(self.participants))
        record = encode(message)
        return [self._train_message(int(c), record, round_, config)
                for c in self.participants]

    def aggregate_train(self, server_round: int, replies: Iterable[Message]
                        ) -> tuple[ArrayRecord | None, MetricRecord | None]:
        """The algorithm's ``server_update`` on the participants' uploads; the new model."""
        if self.watch.stopped:
            return None, None
        round_ = server_round - 1
        stacked = self._uploads(list(replies), self.participants, f"in round {server_round}")
        self._server_step(stacked, round_, self.participants)
        model = np.asarray(self.algorithm.output(self.server_state))
        try:
            check_divergence(model, self.norm_limit, self.algorithm, {},
                             f"in round {server_round}")
        except NonFiniteError as exc:
            raise FlowerRunError(str(exc)) from exc
        metrics = MetricRecord({"round": server_round, **self.counters.as_dict(),
                                **self._account()})
        return self.watch.trained(server_round, ArrayRecord([model]), metrics)

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        """Every ``evaluate_every`` rounds, the model to every node (none otherwise)."""
        if not self._evaluates(server_round) or self.watch.stopped:
            return []
        model = ArrayRecord([np.asarray(self.algorithm.output(self.server_state))])
        spec = ConfigRecord({"problem": self.problem_json})
        return [Message(RecordDict({ARRAYS_KEY: model, CONFIG_KEY: spec, "config": config}),
                        dst_node_id=node, message_type=MessageType.EVALUATE,
                        group_id=f"{self.run}/evaluate{server_round}")
                for node in self.nodes.values()]

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]
                           ) -> MetricRecord | None:
        """``F = Σ π_i f_i + g`` at the model, and the π-weighted accuracy."""
        if not self._evaluates(server_round) or self.watch.stopped:  # Flower asks every round
            return None
        where = f"evaluating round {server_round}"
        by_client = self._replies_by_client(list(replies), np.arange(self.num_clients), where)
        reported = []
        for c in range(self.num_clients):
            with self._naming(c, where):
                records = by_client[c].content.metric_records
                if "metrics" not in records:
                    raise BadReply("the reply has no 'metrics' record; its evaluate handler "
                                   "must return fedcomp.flower.client_evaluate(msg, context, "
                                   "features, targets)")
                reported.append(check_evaluation(dict(records["metrics"])))
        losses, accuracy = np.array(reported, dtype=np.float64).reshape(-1, 2).T
        model = self.algorithm.output(self.server_state)
        smooth = float(self.weights @ losses)
        values: dict[str, Any] = {"round": server_round, "loss": smooth,
                  "objective": smooth + float(self.regularizer.value(model[None])[0])}
        if np.isfinite(accuracy).all():
            values["accuracy"] = float(self.weights @ accuracy)
        return self.watch.evaluated(server_round, MetricRecord(values))

    def start(self, grid: Grid, initial_arrays: ArrayRecord, num_rounds: int = 3,
              timeout: float = 3600, train_config: ConfigRecord | None = None,
              evaluate_config: ConfigRecord | None = None,
              evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
              should_stop: ShouldStop | None = None) -> Result:
        """Flower's ``Strategy.start``; with ``should_stop`` ``num_rounds`` is a maximum.

        ``should_stop(server_round, result)`` (:meth:`stopping`, or any predicate) is called
        after every round; ``True`` ends the run. Flower 1.43's ``start`` takes it itself;
        on a Flower whose ``start`` lacks it (1.42) the strategy calls it after each round's
        ``evaluate_fn`` and the rounds after the stop send nothing, so the ``Result`` is
        the same.
        """
        options: dict[str, Any] = {"num_rounds": num_rounds, "timeout": timeout,
                                   "train_config": train_config,
                                   "evaluate_config": evaluate_config, "evaluate_fn": evaluate_fn}
        self.watch = StopWatch()
        if should_stop is None:
            return super().start(grid, initial_arrays, **options)
        if flower_stops(FlowerStrategy.start):  # by the signature, never the version
            result = super().start(grid, initial_arrays, **{**options,
                                                            "should_stop": should_stop})
        else:
            self.watch = StopWatch(should_stop, evaluate_fn, initial_arrays)
            result = super().start(grid, initial_arrays,
                                   **{**options, "evaluate_fn": self.watch.evaluate})
        if isinstance(should_stop, StoppingRule):
            should_stop.finish(max(result.train_metrics_clientapp, default=0))
        return result

    def stopping(self, tol: float | None = None, *, stop: str = "relative_change",
                 callbacks: Any = None) -> StoppingRule:
        """fedcomp's stopping rule as Flower's ``should_stop`` for :meth:`start`.

        Parameters
        ----------
        tol : float, optional
            Stop ("converged") once ``stop`` is at most ``tol`` at an evaluation row and
            the objective ``F`` the nodes report certifies it (not above its first and its
            previous row's), as :func:`fedcomp.simulate`'s ``tol``.
        stop : {"relative_change"}
            The measure: ``‖x_k − x_j‖ / ‖x_k‖`` between evaluation rows (the prox-step
            measures need ``∇f`` at the model, a round the Strategy does not run).
        callbacks : callable or list, optional
            Functions of a :class:`~fedcomp.runtime.RunView` after each evaluation row;
            one returning ``True`` stops the run ("stopped"), e.g.
            ``EarlyStopping("objective", patience=3)``.

        Returns
        -------
        StoppingRule
            ``should_stop(server_round, result)``; its ``status`` says why the run ended.
            The rule is checked every ``evaluate_every`` rounds (which must be ``>= 1``).
        """
        return StoppingRule(self, tol, stop, callbacks)

    def privacy_spent(self, delta: float | None = None) -> Any:
        """Flower's ``PrivacySpent`` of the rounds so far (``ε`` at ``delta``, by default
        ``1e-5``); ``None`` for a run that adds no noise. See :attr:`accountant`."""
        return None if self.accountant is None else self.accountant.get_privacy_spent(delta)

    # --- the fedcomp side ------------------------------------------------------------------
    def _account(self) -> dict[str, float]:
        """A private round's release composed (one event, this round's participants); its
        ``epsilon`` column, as the experiments' (none for a run without noise)."""
        if self.accountant is None or self.noise is None:
            return {}
        self.accountant.compose(self.accountant.event(self.noise[0], len(self.participants)))
        if not _installed("dp_accounting"):  # privacy_spent() then names the extra
            return {}
        return {"epsilon": self.accountant.get_epsilon(self.accountant.config.target_delta)}

    def _evaluates(self, server_round: int) -> bool:
        return bool(self.evaluate_every) and server_round % self.evaluate_every == 0

    def _start(self, grid: Grid, arrays: ArrayRecord) -> None:
        """Discovery, the weights, ``prepare``, ``init(x⁰)`` and the warm-up phase."""
        x0 = _initial_model(arrays)
        reports = self._discover(grid)
        totals = np.array([reports[c]["samples"] for c in range(self.num_clients)])
        smoothness = np.array([reports[c]["smoothness"] for c in range(self.num_clients)])
        self.weights = normalised_weights(self.weighting, self.num_clients, lambda: totals)
        setup = SetupContext(self.num_clients, self.clients_per_round, tuple(x0.shape),
                             x0.dtype, self.regularizer, lambda: smoothness)
        self.algorithm = self.algorithm.prepare(setup) or self.algorithm
        self.recipe = portable_recipe(self.algorithm, setup)
        self.server_state, self.initial_states = self.algorithm.init(x0, self.num_clients)
        if self.algorithm.warmup:  # round −1, every client (FedDR's x_i⁰ = prox_{ηf_i}(x⁰))
            everyone = np.arange(self.num_clients)
            message = self.algorithm.broadcast(self.server_state)
            count_downloads(self.counters, message, self.num_clients)
            record = encode(message)
            out = [self._train_message(int(c), record, -1, ConfigRecord()) for c in everyone]
            got = exchange(grid, out, self.node_timeout)
            stacked = self._uploads(list(got.values()), everyone, "in the warm-up round")
            self._server_step(stacked, -1, everyone)

    def _discover(self, grid: Grid) -> dict[int, dict[str, float]]:
        """Wait for the nodes; each one's client id, sample total and ``L_i``."""
        deadline = time.monotonic() + self.node_timeout
        while True:
            node_ids = sorted(grid.get_node_ids())
            if len(node_ids) >= self.num_clients or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        if len(node_ids) < self.num_clients:
            raise FlowerRunError(
                f"waited {self.node_timeout:g} s for {self.num_clients} SuperNodes (one per "
                f"client) but {len(node_ids)} connected; start the missing ones or raise "
                "node_timeout")
        spec = ConfigRecord({"phase": DISCOVER, "problem": self.problem_json,
                             "n-clients": self.num_clients})
        messages = [Message(RecordDict({CONFIG_KEY: spec}), dst_node_id=n,
                            message_type=MessageType.TRAIN, group_id=f"{self.run}/discover")
                    for n in node_ids]
        replies = exchange(grid, messages, max(1.0, deadline - time.monotonic()))
        reports: dict[int, dict[str, float]] = {}
        for node_id in node_ids:
            reply = replies.get(node_id)
            if reply is None:
                raise FlowerRunError(f"SuperNode {node_id} did not answer fedcomp's discovery "
                                     f"within node_timeout={self.node_timeout:g} s")
            if reply.has_error():
                raise FlowerRunError(
                    f"SuperNode {node_id} failed fedcomp's discovery: {reply.error.reason}. "
                    "Its ClientApp's train handler must return "
                    "fedcomp.flower.client_train(msg, context, features, targets)")
            try:
                client, samples, smoothness = check_report(
                    dict(reply.content.config_records.get(CONFIG_KEY, {})), self.num_clients)
            except BadReply as exc:
                raise FlowerRunError(f"SuperNode {node_id} sent a discovery reply the server "
                                     f"refuses: {exc}") from exc
            if client in self.nodes:
                raise FlowerRunError(f"SuperNodes {self.nodes[client]} and {node_id} are both "
                                     f"client {client}; give every SuperNode its own "
                                     "partition-id")
            self.nodes[client] = node_id
            reports[client] = {"samples": samples, "smoothness": smoothness}
        return reports

    def _train_message(self, client: int, record: ArrayRecord, round_: int,
                       config: ConfigRecord) -> Message:
        spec = ConfigRecord({
            "phase": TRAIN, "run": self.run, "problem": self.problem_json,
            "algorithm": self.algorithm.name, "recipe": self.recipe,
            "round": round_, "seed": self.seed, "batch-size": self.batch_size or 0,
            "client-ids": [client], "pi": [float(self.weights[client])],
            "n-clients": self.num_clients,
            # a client that trained before finds its state on its node (or fails clearly)
            "resume": client in self.trained})
        content = RecordDict({MESSAGE_KEY: record, CONFIG_KEY: spec, "config": config})
        if client not in self.trained and len(self.initial_states):
            # the client starts from init(x⁰), whose rows are all alike: send one
            content[INITIAL_KEY] = encode(gather_states(self.initial_states,
                                                  np.array([client], dtype=np.int64)))
        return Message(content, dst_node_id=self.nodes[client],
                       message_type=MessageType.TRAIN, group_id=f"{self.run}/round{round_}")

    def _replies_by_client(self, replies: list[Message], clients: np.ndarray, where: str
                           ) -> dict[int, Message]:
        """The replies of ``clients`` by client id; a missing or failed one raises."""
        client_of = {node: client for client, node in self.nodes.items()}
        strangers = sorted({r.metadata.src_node_id for r in replies} - set(client_of))
        if strangers:  # never some other node's arrays in a client's place
            raise FlowerRunError(f"replies {where} came from SuperNodes {strangers}, which are "
                                 f"none of the federation's clients (nodes {client_of}); the "
                                 "grid mixes runs or nodes joined after discovery: restart "
                                 "the run")
        by_client = {client_of[r.metadata.src_node_id]: r for r in replies}
        for c in clients.tolist():
            reply = by_client.get(c)
            if reply is None:
                raise FlowerRunError(f"client {c} (SuperNode {self.nodes[c]}) did not reply "
                                     f"{where} within Flower's timeout (strategy.start's "
                                     "timeout=); the node is down or too slow")
            if reply.has_error():
                raise FlowerRunError(f"client {c} (SuperNode {self.nodes[c]}) failed {where}: "
                                     f"{reply.error.reason}")
        return by_client

    def _uploads(self, replies: list[Message], participants: np.ndarray, where: str) -> Any:
        """The participants' uploads stacked in their order; their counts added.

        Every reply is checked first (:mod:`._replies`): one that is not what
        :func:`client_train` sends stops the run with an error naming its client, node,
        round and field, before any of this round's uploads or counts are used.
        """
        by_client = self._replies_by_client(replies, participants, where)
        like = np.asarray(self.algorithm.output(self.server_state))
        clients = participants.tolist()
        try:
            parts, counts = checked_uploads([by_client[c].content for c in clients],
                                            [1] * len(clients), like, tuple(like.shape))
        except BadReply as exc:
            raise self._refused(clients[exc.index], where, exc) from exc
        for c, counted in zip(clients, counts, strict=True):  # all checked: now counted
            for key, value in counted.items():
                setattr(self.counters, key, getattr(self.counters, key) + value)
            self.trained.add(c)
        return concat_uploads(parts)

    @contextlib.contextmanager
    def _naming(self, client: int, where: str) -> Iterator[None]:
        """A :class:`BadReply` within the block as the run's error (:meth:`_refused`)."""
        try:
            yield
        except BadReply as exc:
            raise self._refused(client, where, exc) from exc

    def _refused(self, client: int, where: str, exc: BadReply) -> FlowerRunError:
        """The run's error for a refused reply, naming the client, its node and round."""
        return FlowerRunError(
            f"client {client} (SuperNode {self.nodes[client]}) sent a reply the server "
            f"refuses {where}: {exc}. Nothing of it was aggregated; the run stops")

    def _server_step(self, stacked: Any, round_: int, participants: np.ndarray) -> None:
        like = np.asarray(self.algorithm.output(self.server_state))
        self.server_state = server_step(self.algorithm, self.weights, like, self.server_state,
                                        stacked, round_, participants, self.server_prox,
                                        self.counters, self.seed)


def _initial_model(arrays: ArrayRecord) -> np.ndarray:
    """``x⁰``: the one array of ``initial_arrays`` (fedcomp models are one array)."""
    values = arrays.to_numpy_ndarrays()
    if len(values) != 1:
        raise ValueError(f"initial_arrays holds {len(values)} arrays; a fedcomp model is one "
                         "array: pass ArrayRecord([x0]) with x0 of the model's shape (a "
                         "network's flat parameter vector)")
    x0 = np.asarray(values[0])
    if not np.issubdtype(x0.dtype, np.floating):
        raise ValueError(f"initial_arrays' array has dtype {x0.dtype}; give a floating model "
                         "(np.zeros(d) is float64)")
    return x0


__all__ = ["Strategy", "build_component", "component_spec"]
