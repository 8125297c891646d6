"""FedMiD: federated mirror descent (Euclidean), i.e. local proximal SGD.

References
----------
Yuan, H., Zaheer, M., Reddi, S. "Federated Composite Optimization." ICML 2021.
Bao, Y., Crawshaw, M., Luo, S., Liu, M. "Fast Composite Optimization and Statistical
Recovery in Federated Learning." ICML 2022 (the ``server_prox_step="unscaled"`` convention of
its MATLAB code).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._array import Array
from ._base import (
    ClientContext,
    EmptyState,
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

SERVER_PROX_STEPS = ("scaled", "unscaled")


class ServerState(NamedTuple):
    x: Array


class Message(NamedTuple):
    x: Array


class Upload(NamedTuple):
    delta: Array


def fedmid(client_lr: float = 0.1, local_steps: int = 5, server_lr: float = 1.0,
           server_prox: bool = True, server_prox_step: str = "scaled") -> FederatedAlgorithm:
    """FedMiD: ``local_steps`` of proximal SGD per client, primal averaging on the server.

    Parameters
    ----------
    client_lr : float, default 0.1
        Client step ``η_c`` (also the client prox parameter).
    local_steps : int, default 5
        ``K``.
    server_lr : float, default 1.0
        ``η_s``.
    server_prox : bool, default True
        Apply the server's prox after averaging; without it, plain primal averaging: the
        Euclidean FedMiD of Yuan et al., with which one client and one local step is
        exactly proximal gradient descent.
    server_prox_step : {"scaled", "unscaled"}, default "scaled"
        The step of the server prox: ``η_s K η_c`` (``"scaled"``, the contract of
        ``ALGORITHMS.md``) or ``η_s η_c`` (``"unscaled"``, Bao et al.'s MATLAB).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Client i: ``y ← x̄``; ``K`` times ``y ← prox_{η_c g}(y − η_c ∇f_i(y; B))``; upload
    ``Δ_i = y − x̄``. Server: ``x̄ ← prox_{η_s K η_c g}(x̄ + η_s Σ_{i∈S} π̃_i Δ_i)``
    (``prox_{η_s η_c g}`` with ``server_prox_step="unscaled"``; no prox without
    ``server_prox``).
    Averaging sparse client models is not sparse ("the curse of primal averaging"), and
    local prox steps on heterogeneous ``f_i`` drift, so FedMiD stalls at a drift floor on
    heterogeneous data (Zhang, Hu, Johansson 2024, Fig. 1).

    Examples
    --------
    >>> fedmid(client_lr=1.0, local_steps=5).hyperparameters["server_prox_step"]
    'scaled'
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedmid(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.250
    """
    check_positive("fedmid", client_lr=client_lr, server_lr=server_lr)
    check_local_steps("fedmid", local_steps)
    if isinstance(server_prox, str) and server_prox in ("scaled", "unscaled", "none"):
        raise ValueError(f"fedmid: server_prox must be True or False (got "
                         f"server_prox={server_prox!r}); the step is server_prox_step: "
                         "'scaled' (the default) or 'unscaled' (Bao et al.'s code)")
    if server_prox_step not in SERVER_PROX_STEPS:
        raise ValueError(f"fedmid: server_prox_step must be one of {SERVER_PROX_STEPS} (got "
                         f"server_prox_step={server_prox_step!r})")
    step = (server_lr * local_steps * client_lr if server_prox_step == "scaled"
            else server_lr * client_lr)
    return primal_averaging("fedmid", client_lr, local_steps, server_lr, client_prox=True,
                            server_step=resolve_server_prox("fedmid", server_prox, step),
                            hyperparameters=dict(client_lr=client_lr, local_steps=local_steps,
                                                 server_lr=server_lr, server_prox=server_prox,
                                                 server_prox_step=server_prox_step))


def primal_averaging(name: str, client_lr: float, local_steps: int, server_lr: float, *,
                     client_prox: bool, server_step: float | None,
                     hyperparameters: dict[str, Any]) -> FederatedAlgorithm:
    """Local (proximal) SGD with a server average of the model updates: FedMiD and FedAvg.

    Client: ``K`` steps ``y ← y − η_c ∇f_i(y; B)``, followed by ``prox_{η_c g}`` when
    ``client_prox``; upload ``y − x̄``. Server: ``x̄ ← x̄ + η_s Σ π̃_i Δ_i``, then the server
    prox ``prox_{server_step · g}`` unless ``server_step`` is ``None``
    (:mod:`fedcomp.algorithms._server_prox`).
    """

    def init(x0: Array, n_clients: int) -> tuple[ServerState, EmptyState]:
        return ServerState(x0), EmptyState()

    def broadcast(state: ServerState) -> Message:
        return Message(state.x)

    def client_update(msg: Message, states: EmptyState, ctx: ClientContext
                      ) -> tuple[Upload, EmptyState]:
        def step(_: int, y: Array) -> Array:
            y = y - client_lr * ctx.oracle.grad(y)
            return ctx.prox(y, client_lr) if client_prox else y

        y = repeat_local_steps(ctx, local_steps, step, replicate(msg.x, ctx.oracle.size))
        return Upload(y - msg.x), states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        x = state.x + server_lr * average(uploads.delta, ctx.weights)
        return ServerState(apply_server_prox(x, server_step, ctx))

    prox_steps = [client_lr] if client_prox else []
    prox_steps += [] if server_step is None else [server_step]
    return FederatedAlgorithm(
        name=name, init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=lambda state: state.x,
        hyperparameters=hyperparameters,
        prepare=check_prox_steps(name, max(prox_steps, default=0.0),
                                 "lower client_lr / server_lr, or use "
                                 "server_prox_step='unscaled'"
                                 if name == "fedmid" else "lower client_lr / server_lr"))
