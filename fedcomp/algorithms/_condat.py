"""The round shared by CompressedScaffnew and TAMUNA: Scaffnew's local steps and control
variates, with a pattern-sparsified upload (:class:`fedcomp.compressors.PermS`).

``compressed_scaffnew`` is this round with every client in every round; ``tamuna`` with a
cohort of ``c`` clients drawn each round (the others idle, sending nothing). Both papers
state the problem as ``min (1/n) Σ f_i`` (``g = 0``, uniform weights); see their docstrings.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like, bit_width, namespace, stacked_zeros, to_numpy
from ..compressors import PermS
from ..compressors._pattern import round_order
from ._base import (
    WIRE_BITS,
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    check_positive,
    replicate,
)
from .scaffnew import steps_until_communication

#: The purpose numbers of the round's shared draws (``round_order``'s sub-streams).
MASK_PURPOSE, COHORT_PURPOSE = 0, 1


class ServerState(NamedTuple):
    x: Array


class ClientState(NamedTuple):
    h: Array      # control variate h_i (Σ_i h_i = 0 after every round)
    x_hat: Array  # x̂_i, the client's last local iterate (what it masked and sent)


class Message(NamedTuple):
    x: Array  # x̄, the model every client of the round starts from


class Upload(NamedTuple):
    v: Array          # q_i ⊙ x̂_i: the pattern's coordinates, zeros elsewhere (idle: zeros)
    wire_bits: Array  # the values sent, at the dtype's width (idle clients: 0)


assert Upload._fields[1] == WIRE_BITS


def cohort(seed: int, round_: int, n: int, size: int) -> np.ndarray:
    """The sorted clients of round ``r``: ``size`` of the ``n`` uniformly without
    replacement (all of them when ``size == n``), common to every client and the server.

    Examples
    --------
    >>> cohort(0, 3, 5, 5).tolist()
    [0, 1, 2, 3, 4]
    >>> len(set(cohort(0, 3, 10, 4).tolist()))
    4
    """
    if size >= n:
        return np.arange(n)
    return np.sort(round_order(seed, round_, n, COHORT_PURPOSE)[:size])


def _positions(seed: int, round_: int, n: int, size: int, ids: np.ndarray) -> np.ndarray:
    """Each client's position in the round's sorted cohort, ``-1`` when it is idle."""
    members = cohort(seed, round_, n, size)
    where = np.searchsorted(members, ids)
    inside = (where < len(members)) & (members[np.minimum(where, len(members) - 1)] == ids)
    return np.where(inside, where, -1)


def _mask(pattern: PermS, d: int, seed: int, round_: int, positions: np.ndarray
          ) -> np.ndarray:
    """``q_i`` of each client (bool ``(B, d)``), all False for an idle one."""
    q = np.zeros((len(positions), d), dtype=bool)
    active = positions >= 0
    if active.any():
        q[active] = pattern.mask(d, seed, round_, positions[active], MASK_PURPOSE)
    return q


def check_uniform_weights(owner: str, ctx: ServerContext) -> None:
    """The papers' problem is ``(1/n) Σ f_i``: refuse other client weights, naming the fix."""
    pi = to_numpy(ctx.pi)
    if pi.size and not np.all(pi == pi[0]):
        raise ValueError(f"{owner} averages each coordinate over the s clients that sent it, "
                         "which solves (1/n) Σ f_i: it needs equal client weights (got weights "
                         f"from {pi.min():.3g} to {pi.max():.3g}); use weighting = 'uniform'")



def check_local_training(owner: str, client_lr: Any, comm_prob: Any) -> None:
    """``γ > 0`` and ``p ∈ (0, 1]``, naming the bad one."""
    check_positive(owner, client_lr=client_lr, comm_prob=comm_prob)
    if not comm_prob <= 1:
        raise ValueError(f"{owner}: comm_prob must be in (0, 1] (got comm_prob={comm_prob!r})")

def check_smooth(owner: str, fix: str,
                 problem: str = "min (1/n) Σ f_i: its paper has no prox of g"
                 ) -> Callable[[SetupContext], None]:
    """A ``prepare`` check: ``g`` must be the zero regularizer (the papers have no prox);
    ``problem`` is the smooth problem it solves and why it has no ``g``."""

    def check(setup: SetupContext) -> None:
        from ..regularizers import Zero

        if not isinstance(setup.regularizer, Zero):
            raise ValueError(
                f"{owner} solves a smooth problem, {problem}, so "
                f"{type(setup.regularizer).__name__} would be ignored. Use regularizer "
                f"'zero' (a ridge term belongs in the loss, e.g. logistic l2=...); {fix}")

    return check


def masked_scaffnew(owner: str, client_lr: float, comm_prob: float, s: int,
                    cv_rate: Callable[[int], float], cohort_size: int | None) -> tuple:
    """The four round functions of CompressedScaffnew / TAMUNA (see the module doc).

    ``cv_rate(n)`` is the control-variate step ``η`` of
    ``h_i ← h_i + (η/γ) q_i ⊙ (x̄ − x̂_i)`` (CompressedScaffnew's ``pχ``) for ``n``
    clients; ``cohort_size`` ``None`` is full participation.
    """

    def sizes(n: int) -> tuple[PermS, float, int]:
        c = n if cohort_size is None else cohort_size
        return PermS(s=s, n=c), client_lr / cv_rate(n), c  # γ/η: Scaffnew's γ/p when η = p

    def init(x0: Array, n: int) -> tuple[ServerState, ClientState]:
        zeros = stacked_zeros(x0, n)
        return ServerState(x0), ClientState(zeros, zeros + x0)

    def broadcast(state: ServerState) -> Message:
        return Message(state.x)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        xp = namespace(msg.x)
        seed, r, ids = ctx.oracle.seed, ctx.round, np.asarray(ctx.client_ids)
        d = int(np.prod(msg.x.shape))
        shape = (len(ids), *msg.x.shape)
        pattern, cv_step, size = sizes(ctx.n_clients)
        h = states.h
        if r > 0:  # the previous round's participants take x̄ into their control variates
            q_prev = _mask(pattern, d, seed, r - 1,
                           _positions(seed, r - 1, ctx.n_clients, size, ids))
            q_prev = asarray_like(q_prev.reshape(shape), msg.x, dtype=xp.bool)
            h = h + xp.where(q_prev, msg.x - states.x_hat, 0.0) / cv_step
        positions = _positions(seed, r, ctx.n_clients, size, ids)
        active = positions >= 0
        y = replicate(msg.x, ctx.oracle.size)
        if active.any():
            counted = None if active.all() else active  # idle rows are computed, not charged
            for _ in range(steps_until_communication(seed, r, comm_prob)):
                y = y - client_lr * (ctx.oracle.grad(y, active=counted) - h)
        q = _mask(pattern, d, seed, r, positions)
        bits = q.sum(axis=1).astype(np.int64) * bit_width(msg.x)
        q_arr = asarray_like(q.reshape(shape), msg.x, dtype=xp.bool)
        keep = asarray_like(active.reshape((-1,) + (1,) * msg.x.ndim), msg.x, dtype=xp.bool)
        x_hat = xp.where(keep, y, states.x_hat)
        upload = Upload(xp.where(q_arr, y, 0.0), asarray_like(bits, msg.x, dtype=xp.int64))
        return upload, ClientState(h, x_hat)

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        check_uniform_weights(owner, ctx)
        # every coordinate was sent by exactly s clients of the cohort (idle rows are zeros)
        return ServerState(namespace(uploads.v).sum(uploads.v, axis=0) / s)

    return init, broadcast, client_update, server_update


def as_algorithm(owner: str, functions: tuple, hyperparameters: dict[str, Any],
                 prepare: Callable[[SetupContext], Any]) -> FederatedAlgorithm:
    """The :class:`FederatedAlgorithm` of :func:`masked_scaffnew`'s functions."""
    init, broadcast, client_update, server_update = functions
    return FederatedAlgorithm(
        name=owner, init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=lambda state: state.x,
        hyperparameters=hyperparameters, prepare=prepare,
        divergence_hint="lower client_lr (the local steps need client_lr < 2/L)")
