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
* :func:`count_downloads` and :func:`count_uploads`: floats and encoded bits of a message
  and of the stacked uploads (:func:`~fedcomp.algorithms._base.message_bits`);
* :func:`star_round`: the round itself, for an executor with ``run_round``.

The asynchronous runner applies a server step to the uploads of the clients that arrived,
through the same :func:`count_uploads` and ``server_update`` (:func:`server_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .._array import Array
from ..algorithms._base import FederatedAlgorithm, message_bits, message_floats
from ..oracle import Counters
from ..problem import Problem
from ._clients import server_context

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


def count_downloads(counters: Counters, message: Any, receivers: int) -> None:
    """A broadcast ``message`` received by ``receivers`` clients."""
    counters.floats_down += message_floats(message) * receivers
    counters.bits_down += message_bits(message) * receivers


def count_uploads(counters: Counters, stacked: Any, senders: int) -> None:
    """The uploads of ``senders`` clients, stacked on a leading axis."""
    counters.floats_up += message_floats(stacked, 1) * senders
    counters.bits_up += message_bits(stacked)


def server_step(algorithm: FederatedAlgorithm, problem: Problem, server_state: Any,
                stacked: Any, round_: int, participants: np.ndarray, server_prox: Prox,
                counters: Counters, seed: int) -> Any:
    """The server's step on the stacked uploads of ``participants`` (counted)."""
    count_uploads(counters, stacked, len(participants))
    return algorithm.server_update(
        server_state, stacked,
        server_context(problem, server_prox, round_, participants, problem.data.features,
                       seed))


def star_round(algorithm: FederatedAlgorithm, problem: Problem, server_state: Any,
               round_: int, participants: np.ndarray, clients: Any, server_prox: Prox,
               counters: Counters, seed: int) -> Any:
    """One round: broadcast, the participants' client updates on ``clients`` (an executor
    with ``run_round(round_, message, participants)``), the server's update; returns the
    new server state."""
    message = algorithm.broadcast(server_state)
    stacked = clients.run_round(round_, message, participants)
    count_downloads(counters, message, len(participants))
    return server_step(algorithm, problem, server_state, stacked, round_, participants,
                       server_prox, counters, seed)
