"""pFedMe with a composite personal problem: Moreau-envelope personalisation with ``g``.

Dinh, Tran, Nguyen, "Personalized Federated Learning with Moreau Envelopes", NeurIPS 2020,
Algorithm 1. Client i's personal model is the proximal point of its local model ``w_i``
for its own objective,

    θ_i(w_i) = argmin_θ  f_i(θ) + g(θ) + (λ/2) ‖θ − w_i‖²,

and the local model descends the Moreau envelope ``F_i(w) = min_θ f_i(θ) + g(θ) +
(λ/2)‖θ − w‖²``, whose gradient is ``λ (w − θ_i(w))``. Here ``g`` is in the personal
problem (the paper has a smooth ``f_i`` only), so every personal model is sparse,
low-rank or feasible as ``g`` asks; the global model, an average of local models, is
smooth-trained and carries no prox of its own.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._array import Array, stacked_zeros
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    average,
    check_local_steps,
    check_positive,
    replicate,
)
from ._personal import check_personal_lr, ready_step, resolve_personal_lr
from ._steps import repeat_local_steps


class ServerState(NamedTuple):
    w: Array


class Message(NamedTuple):
    w: Array


class Upload(NamedTuple):
    delta: Array


class ClientState(NamedTuple):
    personal: Array  # θ_i, the personal model of the client's last round


def pfedme(lam: float = 15.0, client_lr: float = 0.005, local_steps: int = 20,
           inner_steps: int = 5, personal_lr: Any = "auto", server_lr: float = 1.0
           ) -> FederatedAlgorithm:
    """pFedMe (Dinh, Tran, Nguyen 2020) with ``g`` in each client's personal problem.

    Parameters
    ----------
    lam : float, default 15.0
        ``λ > 0``, the Moreau envelope's parameter: the pull of the personal model toward
        the client's local model (the paper's default 15).
    client_lr : float, default 0.005
        ``η``, the local model's step on the envelope.
    local_steps : int, default 20
        ``R``, local model updates per round.
    inner_steps : int, default 5
        ``K``, proximal gradient steps that solve each personal problem (from the local
        model); raise it to solve the problem exactly.
    personal_lr : float or "auto", default "auto"
        The personal problem's step ``ν``: ``"auto"`` is ``1/(max_i L_i + λ)`` (resolved
        before round 1), at which every step decreases every client's personal objective
        and ``K`` steps converge linearly (rate ``1 − λ/(max_i L_i + λ)``).
    server_lr : float, default 1.0
        ``β``: ``w ← (1 − β) w + β Σ π̃_i w_i``.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Client i: ``w_i ← w``; ``R`` times: ``θ ← w_i``, then ``K`` times
    ``θ ← prox_{ν g}(θ − ν (∇f_i(θ) + λ (θ − w_i)))``; ``w_i ← w_i − η λ (w_i − θ)``.
    Upload ``w_i − w``; the personal model ``θ_i`` stays with the client
    (``client_states.personal``). Server: ``w ← w + β Σ π̃_i (w_i − w)``. Deviations from
    Algorithm 1: the personal problem has ``g`` and is solved by proximal gradient (the
    paper takes ``K`` gradient steps on a smooth one); its minibatch is drawn anew at every
    inner step (the paper keeps one batch ``D_i`` for the ``K`` steps); the server average
    is weighted by the clients' weights (uniform under ``weighting = "uniform"``, the
    paper's). No official code was read for this implementation.

    Examples
    --------
    >>> alg = pfedme(lam=1.0, client_lr=0.1, local_steps=2, inner_steps=3)
    >>> alg.hyperparameters["personal_lr"]
    'auto'
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(alg):.3f}")  # F(w) after 20 rounds; min 0.241
    0.255
    """
    check_positive("pfedme", lam=lam, client_lr=client_lr, server_lr=server_lr)
    check_local_steps("pfedme", local_steps)
    check_local_steps("pfedme (inner_steps)", inner_steps)
    personal_lr = check_personal_lr("pfedme", personal_lr)
    hyperparameters = dict(lam=lam, client_lr=client_lr, local_steps=local_steps,
                           inner_steps=inner_steps, personal_lr=personal_lr,
                           server_lr=server_lr)

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        return ServerState(x0), ClientState(stacked_zeros(x0, n_clients) + x0[None, ...])

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        nu = ready_step("pfedme", personal_lr)
        def step(_: int, carry: tuple[Array, Array]) -> tuple[Array, Array]:
            w_local, theta = carry[0], carry[0]
            for _ in range(inner_steps):
                theta = ctx.prox(theta - nu * (ctx.oracle.grad(theta)
                                               + lam * (theta - w_local)), nu)
            return w_local - client_lr * lam * (w_local - theta), theta

        start = replicate(msg.w, ctx.oracle.size)
        w_local, theta = repeat_local_steps(ctx, local_steps, step, (start, start))
        return Upload(w_local - msg.w), ClientState(theta)

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        return ServerState(state.w + server_lr * average(uploads.delta, ctx.weights))

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        steps = resolve_personal_lr("pfedme", personal_lr, lam, setup)
        if steps == personal_lr:
            return None
        return pfedme(lam, client_lr, local_steps, inner_steps, steps, server_lr)

    return FederatedAlgorithm(
        name="pfedme", init=init, broadcast=lambda state: Message(state.w),
        client_update=client_update, server_update=server_update,
        output=lambda state: state.w, hyperparameters=hyperparameters, prepare=prepare,
        divergence_hint="try a smaller client_lr (η λ < 1 keeps the local step a contraction)")


__all__ = ["pfedme"]
