"""FedCanon and FedCanon II: one prox per round, SCAFFOLD-style drift correction.

Clients run plain (prox-free) local SGD corrected by a control variable ``c_i`` and upload
their normalised model change ``Δ_i``; the regularizer enters only through one proximal
gradient step per round, applied by the server (FedCanon, Algorithm 1) or, with only
``Δ̄`` broadcast, by every client on its own copy of the model (FedCanon II, Algorithm 2).

References
----------
Zhou, Y., Zhong, J., Shi, X., Wen, G., Yu, X. "FedCanon: Non-Convex Composite Federated
Learning with Efficient Proximal Operation on Heterogeneous Data."
(``shared/papers/seed002_*``), Algorithms 1 and 2, eq. (7).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from .._array import Array, namespace, stacked_zeros
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    all_of,
    average,
    check_local_steps,
    check_positive,
    check_prox_steps,
    replicate,
    require_full_participation,
)
from ._steps import repeat_local_steps


class ServerState(NamedTuple):
    z: Array          # global model z^t (FedCanon II: the model every client holds)
    delta_bar: Array  # Δ̄^t of the last round (zeros before the first)


class ClientState(NamedTuple):
    c: Array      # control variable c_i^t the client used in its last round
    delta: Array  # Δ_i^{t+1} it uploaded then (c_i^{t+1} = c + Δ̄^{t+1} − delta)


class ClientState2(NamedTuple):
    x: Array      # FedCanon II: the client's own copy x_i^{t,0} of the model
    c: Array
    delta: Array


class Message(NamedTuple):
    delta_bar: Array
    z: Array


class Message2(NamedTuple):
    delta_bar: Array


class Upload(NamedTuple):
    delta: Array  # Δ_i = (x_i^{t,0} − x_i^{t,K}) / (βK)


def fedcanon_controls(states: ClientState | ClientState2, delta_bar: Array) -> Array:
    """The control variables ``c_i^{t+1} = c_i^t + Δ̄^{t+1} − Δ_i^{t+1}`` after a round.

    Clients apply this update lazily (at the start of their next round, when ``Δ̄`` has
    arrived); this returns it from the stored states and the server's ``delta_bar``.
    ``Σ_i π_i c_i = 0`` after every round (the paper's invariant, uniform ``π``).
    """
    return states.c + delta_bar - states.delta


def _local_steps(x: Array, c: Array, ctx: ClientContext, client_lr: float, local_steps: int
                 ) -> Array:
    """``K`` prox-free corrected steps ``x ← x − β(g_i(x) + c_i)``; returns ``Δ_i``."""
    def step(_: int, y: Array) -> Array:
        return y - client_lr * (ctx.oracle.grad(y) + c)

    y = repeat_local_steps(ctx, local_steps, step, x)
    return (x - y) / (client_lr * local_steps)


def _resolve(client_lr: float, local_steps: int, server_lr: float | None, owner: str
             ) -> float:
    check_positive(owner, client_lr=client_lr)
    check_local_steps(owner, local_steps)
    if server_lr is None:
        return client_lr * local_steps  # Remark 4's heuristic α = βK
    check_positive(owner, server_lr=server_lr)
    return float(server_lr)


def fedcanon(client_lr: float = 0.05, local_steps: int = 10, server_lr: float | None = None
             ) -> FederatedAlgorithm:
    """FedCanon (Zhou et al., Algorithm 1): prox-free local steps, one server prox per round.

    Parameters
    ----------
    client_lr : float, default 0.05
        Local step ``β``.
    local_steps : int, default 10
        ``K``.
    server_lr : float, optional
        Global step ``α`` — also the prox parameter, ``z ← prox_{αh}(z − αΔ̄)``. ``Δ̄`` is
        a normalised average gradient, so ``α`` is a gradient step size, not a multiplier
        of the model change as in FedAvg. Default ``βK`` (the paper's heuristic, Remark 4).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Round t, client i (``c_i^0 = 0``):

    * ``x_i^{t,0} = z^t``; for k = 0..K−1: ``x_i^{t,k+1} = x_i^{t,k} − β(g_i(x_i^{t,k}) + c_i^t)``;
    * upload ``Δ_i^{t+1} = (z^t − x_i^{t,K}) / (βK)`` (d floats);

    server: ``Δ̄^{t+1} = Σ_i π_i Δ_i^{t+1}``, ``z^{t+1} = prox_{αh}(z^t − αΔ̄^{t+1})`` (the only
    prox of the round), broadcast ``(Δ̄^{t+1}, z^{t+1})`` (2d floats); client
    ``c_i^{t+1} = c_i^t + Δ̄^{t+1} − Δ_i^{t+1}``, so ``Σ π_i c_i = 0`` always. TABLE III: 1 prox,
    3d floats per client per round. The client applies the ``c`` update at the start of its
    next round (same iterates; :func:`fedcanon_controls` gives ``c^{t+1}``).

    **Bias.** Clients never see ``h``: at a composite stationary point ``z*``,
    ``∇f(z*) = −h'(z*) ≠ 0``, so every client's local trajectory drifts away from ``z*`` by
    about ``kβ h'(z*)`` and ``Δ̄`` averages gradients along it instead of ``∇f(z*)``.
    With full gradients FedCanon therefore converges linearly to a neighbourhood of ``z*``
    whose radius grows with ``βK·L·‖h'‖`` — the ``O(κ)`` steady-state term ``B_h`` of
    Theorems 1–2 — and shrinks with ``β`` (tested on the seed-000 problem: halving β
    at α = βK lowers the plateau about 2×). It is exact when ``h = 0`` (then it is
    SCAFFOLD with full participation) or when ``h'(z*) = 0`` on the support.

    Full participation only (the ``c`` update uses every client's ``Δ_i``); with weights
    ``π`` the averages are π-weighted (uniform ``π`` is the paper's ``1/N``). For a
    ρ-weakly convex ``h`` the run checks ``α < 1/ρ`` before round 1.

    References
    ----------
    Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with
    Efficient Proximal Operation on Heterogeneous Data", Algorithm 1.

    Examples
    --------
    >>> fedcanon(client_lr=0.1, local_steps=5).hyperparameters
    {'client_lr': 0.1, 'local_steps': 5, 'server_lr': 0.5}
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedcanon(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.242
    """
    alpha = _resolve(client_lr, local_steps, server_lr, "fedcanon")

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        zeros = stacked_zeros(x0, n_clients)
        return ServerState(x0, namespace(x0).zeros_like(x0)), ClientState(zeros, zeros)

    def broadcast(state: ServerState) -> Message:
        return Message(state.delta_bar, state.z)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        c = fedcanon_controls(states, msg.delta_bar)  # the deferred update of the last round
        delta = _local_steps(replicate(msg.z, ctx.oracle.size), c, ctx, client_lr, local_steps)
        return Upload(delta), ClientState(c, delta)

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        delta_bar = average(uploads.delta, ctx.weights)
        return ServerState(ctx.prox(state.z - alpha * delta_bar, alpha), delta_bar)

    return FederatedAlgorithm(
        name="fedcanon", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=lambda state: state.z,
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps, server_lr=alpha),
        prepare=all_of(require_full_participation("fedcanon"),
                       check_prox_steps("fedcanon", alpha, "lower server_lr (alpha)")))


def fedcanon2(client_lr: float = 0.05, local_steps: int = 10, server_lr: float | None = None
              ) -> FederatedAlgorithm:
    """FedCanon II (Zhou et al., Algorithm 2): every client applies the prox; only Δ̄ is sent.

    Parameters
    ----------
    client_lr : float, default 0.05
        Local step ``β``.
    local_steps : int, default 10
        ``K``.
    server_lr : float, optional
        Global step and prox parameter ``α`` (default ``βK``).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Every client keeps its own copy ``x_i^{t,0}`` of the model (client state, all equal).
    Round t, client i: run the K corrected local steps of :func:`fedcanon` from
    ``x_i^{t,0}``, upload ``Δ_i^{t+1} = (x_i^{t,0} − x_i^{t,K})/(βK)`` (d floats); the
    server averages and broadcasts ``Δ̄^{t+1}`` only (d floats); client
    ``x_i^{t+1,0} = prox_{αh}(x_i^{t,0} − αΔ̄^{t+1})`` and
    ``c_i^{t+1} = c_i^t + Δ̄^{t+1} − Δ_i^{t+1}``. The iterates are those of FedCanon
    (tested to 1e-10). TABLE III: N prox evaluations (all on clients), 2d floats per
    client per round.

    In the simulator a client applies its prox and ``c`` update on receipt of ``Δ̄``,
    i.e. at the start of its next ``client_update``: rounds ≥ 1 count N client prox
    evaluations each, round 0 none. The model to evaluate is the one every client holds
    after receiving ``Δ̄^{t+1}``; the server does not need it, so it keeps an uncounted
    copy ``z^{t+1} = prox_{αh}(z^t − αΔ̄^{t+1})`` for evaluation only (built by ``prepare``
    from the regularizer of the set-up context; the prox counters and messages stay those of
    Algorithm 2, the wall time includes this one extra prox per round). The bias of
    :func:`fedcanon` applies unchanged.

    References
    ----------
    Zhou, Zhong, Shi, Wen, Yu, "FedCanon: Non-Convex Composite Federated Learning with
    Efficient Proximal Operation on Heterogeneous Data", Algorithm 2.

    Examples
    --------
    >>> fedcanon2(client_lr=0.1, local_steps=5, server_lr=0.25).name
    'fedcanon2'
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedcanon2(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.242
    """
    alpha = _resolve(client_lr, local_steps, server_lr, "fedcanon2")
    hyperparameters = dict(client_lr=client_lr, local_steps=local_steps, server_lr=alpha)
    checks = all_of(require_full_participation("fedcanon2"),
                    check_prox_steps("fedcanon2", alpha, "lower server_lr (alpha)"))

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState2]:
        zeros = stacked_zeros(x0, n_clients)
        return (ServerState(x0, namespace(x0).zeros_like(x0)),
                ClientState2(zeros + x0, zeros, zeros))

    def broadcast(state: ServerState) -> Message2:
        return Message2(state.delta_bar)

    def client_update(msg: Message2, states: ClientState2, ctx: ClientContext
                      ) -> tuple[Upload, ClientState2]:
        x, c = states.x, states.c
        if ctx.round > 0:  # Δ̄ of the previous round has arrived (full participation)
            x = ctx.prox(states.x - alpha * msg.delta_bar, alpha)
            c = fedcanon_controls(states, msg.delta_bar)
        delta = _local_steps(x, c, ctx, client_lr, local_steps)
        return Upload(delta), ClientState2(x, c, delta)

    def build(evaluation_prox: Callable[[Array, float], Array] | None) -> FederatedAlgorithm:
        def server_update(state: ServerState, uploads: Upload, ctx: ServerContext
                          ) -> ServerState:
            if evaluation_prox is None:
                raise RuntimeError("fedcanon2: prepare it with the problem's setup context "
                                   "before running it, algorithm = algorithm.prepare("
                                   "fedcomp.runtime.setup_context(problem)) (fedcomp.simulate "
                                   "does); the evaluation copy of the clients' model needs "
                                   "the problem's regularizer")
            delta_bar = average(uploads.delta, ctx.weights)
            z = evaluation_prox((state.z - alpha * delta_bar)[None, ...], alpha)[0, ...]
            return ServerState(z, delta_bar)

        def prepare(setup: SetupContext) -> FederatedAlgorithm:
            checks(setup)
            return build(setup.regularizer.prox)

        return FederatedAlgorithm(
            name="fedcanon2", init=init, broadcast=broadcast, client_update=client_update,
            server_update=server_update, output=lambda state: state.z,
            hyperparameters=hyperparameters, prepare=prepare)

    return build(None)
