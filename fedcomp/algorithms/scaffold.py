"""SCAFFOLD (option II control variates), with an optional server prox.

References
----------
Karimireddy, S. P., Kale, S., Mohri, M., Reddi, S., Stich, S., Suresh, A. T. "SCAFFOLD:
Stochastic Controlled Averaging for Federated Learning." ICML 2020, Algorithm 1 (option II).
Zhou et al., "FedCanon" (``shared/papers/seed002_*``), eq. (14): the smooth baseline of Fig. 2.
"""

from __future__ import annotations

from typing import NamedTuple

from .._array import Array, namespace, stacked_zeros, weighted_sum
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    average,
    check_local_steps,
    check_positive,
    check_prox_steps,
    replicate,
)
from ._server_prox import apply_server_prox, resolve_server_prox
from ._steps import repeat_local_steps


class ServerState(NamedTuple):
    x: Array  # server model
    c: Array  # server control variate c = Σ_i π_i c_i


class ClientState(NamedTuple):
    c: Array  # client control variate c_i


class Message(NamedTuple):
    x: Array
    c: Array


class Upload(NamedTuple):
    delta: Array    # Δy_i = y_{i,K} − x
    delta_c: Array  # Δc_i = c_i⁺ − c_i


def scaffold(client_lr: float = 0.1, local_steps: int = 5, server_lr: float = 1.0,
             server_prox: bool = False) -> FederatedAlgorithm:
    """SCAFFOLD with option II control variates (Karimireddy et al. 2020, Algorithm 1).

    Parameters
    ----------
    client_lr : float, default 0.1
        Local step ``η_l``.
    local_steps : int, default 5
        ``K``.
    server_lr : float, default 1.0
        Global step ``η_g`` (a multiplier of the averaged model change, as in FedAvg).
    server_prox : bool, default False
        Apply ``prox_{η_g K η_l g}`` to the server model after averaging (composite
        SCAFFOLD); without it the regularizer is ignored by the updates.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Round r, participants S, client i (``c_i = c = 0`` initially):
    ``y ← x``; K times ``y ← y − η_l(g_i(y) + c − c_i)``;
    ``c_i⁺ = c_i − c + (x − y)/(K η_l)`` (option II); upload ``(y − x, c_i⁺ − c_i)``
    (2d floats); ``c_i ← c_i⁺``. Server: ``x ← x + η_g Σ_{i∈S} π̃_i Δy_i`` (then the prox
    with ``server_prox``), ``c ← c + Σ_{i∈S} π_i Δc_i`` with the *global* weights ``π_i``
    (``1/N`` in the paper), which keeps ``c = Σ_i π_i c_i`` under client sampling;
    broadcast ``(x, c)`` (2d floats).

    With full participation and ``server_prox=True`` this is exactly FedCanon with
    ``α = η_g K η_l`` (FedCanon's ``c_i`` is ``c − c_i`` here; seed 002, Appendix A-1);
    tested to 1e-10.

    References
    ----------
    Karimireddy et al., "SCAFFOLD: Stochastic Controlled Averaging for Federated
    Learning", ICML 2020.

    Examples
    --------
    >>> scaffold(client_lr=0.1, local_steps=5).hyperparameters["server_prox"]
    False
    >>> from fedcomp.toy import tiny_run
    >>> alg = scaffold(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.245
    """
    check_positive("scaffold", client_lr=client_lr, server_lr=server_lr)
    check_local_steps("scaffold", local_steps)
    prox_step = resolve_server_prox("scaffold", server_prox,
                                    server_lr * local_steps * client_lr)

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        xp = namespace(x0)
        return (ServerState(x0, xp.zeros_like(x0)),
                ClientState(stacked_zeros(x0, n_clients)))

    def broadcast(state: ServerState) -> Message:
        return Message(state.x, state.c)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        correction = msg.c - states.c
        def step(_: int, y: Array) -> Array:
            return y - client_lr * (ctx.oracle.grad(y) + correction)

        y = repeat_local_steps(ctx, local_steps, step, replicate(msg.x, ctx.oracle.size))
        c_new = states.c - msg.c + (msg.x - y) / (local_steps * client_lr)
        return Upload(y - msg.x, c_new - states.c), ClientState(c_new)

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        x = apply_server_prox(state.x + server_lr * average(uploads.delta, ctx.weights),
                              prox_step, ctx)
        return ServerState(x, state.c + weighted_sum(uploads.delta_c, ctx.pi))

    return FederatedAlgorithm(
        name="scaffold", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=lambda state: state.x,
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps, server_lr=server_lr,
                             server_prox=server_prox),
        prepare=check_prox_steps("scaffold", prox_step or 0.0,
                                 "lower client_lr, server_lr or local_steps"))
