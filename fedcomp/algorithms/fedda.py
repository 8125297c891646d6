"""FedDA (FedDualAvg): federated dual averaging.

References
----------
Yuan, H., Zaheer, M., Reddi, S. "Federated Composite Optimization." ICML 2021.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._array import Array
from ._base import (
    ClientContext,
    EmptyState,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    average,
    check_local_steps,
    check_positive,
    replicate,
)
from ._steps import repeat_local_steps


class ServerState(NamedTuple):
    z: Array  # dual state z̄
    x: Array  # primal model x̄ = prox_{η_s η_c r K g}(z̄)


class Message(NamedTuple):
    z: Array


class Upload(NamedTuple):
    delta: Array


#: How the prox parameters count rounds and local steps (see :func:`fedda`).
COUNTERS = ("zero_based", "one_based")


def fedda(client_lr: float = 0.1, local_steps: int = 5, server_lr: float = 1.0,
          counters: str = "zero_based") -> FederatedAlgorithm:
    """FedDA: clients run dual averaging from the server's dual state; the server averages duals.

    Parameters
    ----------
    client_lr : float, default 0.1
        ``η_c``.
    local_steps : int, default 5
        ``K``.
    server_lr : float, default 1.0
        ``η_s``.
    counters : {"zero_based", "one_based"}, default "zero_based"
        How the prox parameters count. ``"zero_based"`` (Yuan et al.'s Algorithm 1 with
        rounds r = 0, 1, ... and steps k = 0..K−1): ``η̃ = η_s η_c r K + η_c k`` on the
        clients, ``η_s η_c (r+1) K`` on the server, i.e. the dual state's accumulated step.
        ``"one_based"`` (as run: Bao et al.'s MATLAB, whose loops count r = 1..R and
        k = 1..K and put the counters into the same formulas, ``LassoRun.m`` lines 119 and
        128, ``NuclearRun.m`` lines 81 and 91, ``EmnistRun.m`` lines 141 and 155): the
        client threshold is ``η_s η_c (r+1) K + η_c (k+1)`` and the server's
        ``η_s η_c (r+2) K`` in zero-based r and k — one round and one step more than the
        dual state has accumulated, so the primal iterates are sparser than the paper's.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Round r, client i: ``z_i ← z̄``; for k = 0..K−1: ``x = prox_{η̃ g}(z_i)`` with
    ``η̃ = η_s η_c r K + η_c k``, then ``z_i ← z_i − η_c ∇f_i(x; B)``. Upload ``z_i − z̄``.
    Server: ``z̄ ← z̄ + η_s Σ π̃_i Δ_i``, ``x̄ = prox_{η_s η_c (r+1) K g}(z̄)``. Averaging
    happens in the dual space, which avoids the "curse of primal averaging" of FedMiD, but
    the prox parameter grows without bound, so the regularizer must be convex.
    ``z̄`` is initialised at ``x0`` (the dual point whose prox with step 0 is ``x0``).

    Examples
    --------
    >>> fedda(client_lr=1.0).name
    'fedda'
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedda(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.242
    """
    check_positive("fedda", client_lr=client_lr, server_lr=server_lr)
    check_local_steps("fedda", local_steps)
    if counters not in COUNTERS:
        raise ValueError(f"fedda: counters must be one of {COUNTERS} (got counters={counters!r}); "
                         "'one_based' is Bao et al.'s MATLAB")
    # the MATLAB's 1-based r and k are the zero-based ones plus 1
    lead = 0 if counters == "zero_based" else 1

    def init(x0: Array, n_clients: int) -> tuple[ServerState, EmptyState]:
        return ServerState(x0, x0), EmptyState()

    def broadcast(state: ServerState) -> Message:
        return Message(state.z)

    def client_update(msg: Message, states: EmptyState, ctx: ClientContext
                      ) -> tuple[Upload, EmptyState]:
        round_step = server_lr * client_lr * (ctx.round + lead) * local_steps

        def step(k: Any, z: Array) -> Array:
            x = ctx.prox(z, round_step + client_lr * (k + lead))
            return z - client_lr * ctx.oracle.grad(x)

        z = repeat_local_steps(ctx, local_steps, step, replicate(msg.z, ctx.oracle.size))
        return Upload(z - msg.z), states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        z = state.z + server_lr * average(uploads.delta, ctx.weights)
        x = ctx.prox(z, server_lr * client_lr * (ctx.round + 1 + lead) * local_steps)
        return ServerState(z, x)

    def prepare(setup: SetupContext) -> None:
        reg = setup.regularizer
        if not reg.convex:
            raise ValueError(
                f"fedda needs a convex regularizer: its prox parameter grows with the round, so "
                f"a weakly convex {type(reg).__name__} breaks step < 1/rho after a few rounds. "
                "Use fedmid, za1 or fedcanon for MCP/SCAD.")

    return FederatedAlgorithm(
        name="fedda", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=lambda state: state.x,
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps, server_lr=server_lr,
                             counters=counters),
        prepare=prepare)
