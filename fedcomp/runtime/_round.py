"""One round of a star-topology algorithm, and what every engine counts of it, in one place.

A round is: ``broadcast`` → the participants' ``client_update`` (in blocks, by a client
executor) → ``server_update`` on their stacked uploads. What differs between engines is
only how the client blocks execute and where their states live — vectorised blocks in this
process (:class:`~fedcomp.runtime._clients.LocalClients`, on any Array API namespace and
device), Ray actors, Flower nodes — and, for the compiled (jax) engine, that several rounds
run as one traced call. What they count is defined here once:

* :func:`counted_prox`: the regularizer's prox with client and server evaluations counted
  (``ClientContext.prox`` and ``ServerContext.prox``; the gossip runner and every client
  executor use the client one);
* :class:`Traffic` and :func:`count_traffic`: floats and encoded bits of a round's messages
  (:func:`~fedcomp.algorithms._base.message_bits`), added to the counters in one function —
  by :func:`count_downloads` and :func:`count_uploads` here, and by the compiled engine,
  which reads a traced round's :class:`Traffic` once per trace and replays it per call;
* :func:`star_round`: the round itself, for an executor with ``run_round`` and a server
  step (:class:`EagerServer`, or the compiled engine's ``CompiledServer``).

The asynchronous runner applies a server step to the uploads of the clients that arrived,
through the same :func:`count_uploads` and ``server_update`` (:func:`server_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like
from ..algorithms._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    message_bits,
    message_floats,
)
from ..oracle import Counters, Oracle
from ..problem import Problem

Prox = Callable[[Array, Any], Array]


def counted_prox(regularizer: Any, counters: Counters) -> tuple[Prox, Prox]:
    """``(client_prox, server_prox)``: the regularizer's prox, counted.

    ``client_prox(v, step)`` takes a block ``(B, *param_shape)`` and counts ``B`` client
    prox evaluations; ``server_prox(v, step)`` takes one model and counts one server
    evaluation.
    """

    def client_prox(v: Array, step: Any) -> Array:
        counters.prox_evals_client += int(v.shape[0])
        return regularizer.prox(v, step)

    def server_prox(v: Array, step: Any) -> Array:
        counters.prox_evals_server += 1
        return regularizer.prox(v[None, ...], step)[0, ...]

    return client_prox, server_prox


class Traffic(NamedTuple):
    """What a round's messages add to the counters: the broadcast's floats and bits per
    receiver, the upload's floats per sender and the whole stacked upload's bits."""

    floats_down: int
    floats_up: int
    bits_down: Any
    bits_up: Any


def traffic_of(message: Any, stacked: Any,
               bits: Callable[[Any], Any] = message_bits) -> Traffic:
    """The :class:`Traffic` of a broadcast ``message`` and the ``stacked`` uploads (either
    may be ``None``: nothing sent that way). ``bits`` sums a message's bits (the compiled
    engine passes one that leaves a traced :data:`WIRE_BITS` sum for the call to return)."""
    return Traffic(0 if message is None else message_floats(message),
                   0 if stacked is None else message_floats(stacked, 1),
                   0 if message is None else bits(message),
                   0 if stacked is None else bits(stacked))


def count_traffic(counters: Counters, traffic: Traffic, participants: int) -> None:
    """Add a round's ``traffic`` between the server and ``participants`` clients."""
    counters.floats_down += traffic.floats_down * participants
    counters.floats_up += traffic.floats_up * participants
    counters.bits_down += int(traffic.bits_down) * participants
    counters.bits_up += int(traffic.bits_up)


def count_downloads(counters: Counters, message: Any, receivers: int) -> None:
    """A broadcast ``message`` received by ``receivers`` clients."""
    count_traffic(counters, traffic_of(message, None), receivers)


def count_uploads(counters: Counters, stacked: Any, senders: int) -> None:
    """The uploads of ``senders`` clients, stacked on a leading axis."""
    count_traffic(counters, traffic_of(None, stacked), senders)


def consecutive(ids: np.ndarray) -> bool:
    """Whether ``ids`` are ``a, a + 1, ..., a + n − 1`` in that order (not empty).

    Examples
    --------
    >>> consecutive(np.array([3, 4, 5])), consecutive(np.array([3, 5, 4])), consecutive(
    ...     np.array([], dtype=int))
    (True, False, False)
    """
    n = len(ids)
    if n == 0 or int(ids[-1]) - int(ids[0]) != n - 1:
        return False
    if n <= 64:  # a few Python ints compare faster than NumPy's diff is called
        first = int(ids[0])
        return ids.tolist() == list(range(first, first + n))
    return bool((np.diff(ids) == 1).all())


def client_context(oracle: Oracle, client_prox: Prox, round_: Any, pi: Any, n_clients: int,
                   like: Array | None = None) -> ClientContext:
    """The :class:`ClientContext` of a block: its clients' ``oracle``, the counted
    ``client_prox``, their weights ``pi`` and the federation's size.

    ``pi`` are host values put on ``like``'s namespace and device, or (``like=None``)
    an array there already: the traced weights of a compiled block
    (:meth:`~fedcomp.runtime._compiled_parts.CompiledClients.local`, whose ``round_`` and
    client ids are traced too)."""
    return ClientContext(oracle, client_prox, round_, oracle.client_ids,
                         pi if like is None else asarray_like(pi, like), n_clients)


def server_context(server_prox: Prox, round_: Any, ids: Any, weights: Any, pi: Any,
                   n_clients: int, seed: int = 0) -> ServerContext:
    """The :class:`ServerContext` of a step: the participants' ``ids``, their normalised
    ``weights`` ``π_i / Σπ`` and ``pi`` on the models' namespace and device (traced in a
    compiled call), the federation's size and the run's seed."""
    return ServerContext(server_prox, round_, ids, weights, pi, n_clients, int(seed))


def server_step(algorithm: FederatedAlgorithm, weights: np.ndarray, like: Array,
                server_state: Any, stacked: Any, round_: int, participants: np.ndarray,
                server_prox: Prox, counters: Counters, seed: int) -> Any:
    """The server's step on the stacked uploads of ``participants`` (counted), given every
    client's weight ``π`` and an array ``like`` of the models' namespace and device (a
    server that holds no data passes its own: :class:`fedcomp.flower.Strategy`)."""
    count_uploads(counters, stacked, len(participants))
    normalised, pi = participant_weights(weights, participants, like)
    ctx = server_context(server_prox, round_, participants, normalised, pi, len(weights), seed)
    return algorithm.server_update(server_state, stacked, ctx)


def participant_weights(weights: np.ndarray, participants: np.ndarray, like: Array
                        ) -> tuple[Array, Array]:
    """``(π_i / Σπ, π_i)`` of the ``participants`` (host ``weights``), on ``like``'s
    namespace and device."""
    pi = weights[participants]
    return asarray_like(pi / pi.sum(), like), asarray_like(pi, like)


class EagerServer:
    """The server's step as written: ``server_update`` on the stacked uploads, counted
    (:func:`server_step`).

    One of the two server-step objects :func:`star_round` takes; the compiled engine's
    :class:`~fedcomp.runtime._compiled_parts.CompiledServer` is the other, with the same
    :meth:`update` (and this one for what it cannot trace).
    """

    def __init__(self, algorithm: FederatedAlgorithm, problem: Problem, server_prox: Prox,
                 counters: Counters, seed: int) -> None:
        self.algorithm, self.weights, self.like = algorithm, problem.weights, problem.data.like
        self.server_prox, self.counters, self.seed = server_prox, counters, seed
        self._everyone: tuple[Array, Array] | None = None

    def update(self, server_state: Any, stacked: Any, round_: int, participants: np.ndarray
               ) -> Any:
        """The new server state after the uploads ``stacked`` of ``participants``."""
        if not (len(participants) == len(self.weights) and consecutive(participants)):
            return server_step(self.algorithm, self.weights, self.like, server_state,
                               stacked, round_, participants, self.server_prox,
                               self.counters, self.seed)
        # every client, in order: the same weights every round, made once on the models'
        # device
        if self._everyone is None:
            self._everyone = participant_weights(self.weights, participants, self.like)
        count_uploads(self.counters, stacked, len(participants))
        ctx = server_context(self.server_prox, round_, participants, *self._everyone,
                             len(self.weights), self.seed)
        return self.algorithm.server_update(server_state, stacked, ctx)


def star_round(algorithm: FederatedAlgorithm, server: Any, clients: Any, counters: Counters,
               server_state: Any, round_: int, participants: np.ndarray) -> Any:
    """One round: broadcast, the participants' client updates on ``clients`` (an executor
    with ``run_round(round_, message, participants)``), the server's step ``server`` (an
    object with ``update(server_state, stacked, round_, participants)`` that counts the
    uploads: :class:`EagerServer`, or the compiled engine's); returns the new server
    state."""
    message = algorithm.broadcast(server_state)
    stacked = clients.run_round(round_, message, participants)
    count_downloads(counters, message, len(participants))
    return server.update(server_state, stacked, round_, participants)
