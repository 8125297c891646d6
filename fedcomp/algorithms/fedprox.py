"""FedProx: local proximal-term solves, server averaging (optional server prox for composite g).

References
----------
Li, T., Sahu, A. K., Zaheer, M., Sanjabi, M., Talwalkar, A., Smith, V. "Federated
Optimization in Heterogeneous Networks." MLSys 2020.
"""

from __future__ import annotations

from typing import NamedTuple

from .._array import Array
from ._base import (
    ClientContext,
    EmptyState,
    FederatedAlgorithm,
    ServerContext,
    average,
    check_positive,
    check_prox_steps,
    replicate,
)
from ._local import local_prox, make_solver
from ._server_prox import apply_server_prox


class ServerState(NamedTuple):
    x: Array


class Message(NamedTuple):
    x: Array


class Upload(NamedTuple):
    delta: Array


def fedprox(mu: float = 0.01, local_solver: str = "sgd", client_lr: float = 0.01,
            local_steps: int | None = 5, local_epochs: int | None = None,
            server_lr: float = 1.0, server_step: float | None = None, tol: float = 1e-10,
            max_iter: int = 50) -> FederatedAlgorithm:
    """FedProx: each client approximately minimises ``f_i(x) + (μ/2)‖x − x̄‖²``.

    Parameters
    ----------
    mu : float, default 0.01
        Proximal coefficient ``μ ≥ 0`` (0 with the SGD solver is FedAvg).
    local_solver, client_lr, local_steps, local_epochs, tol, max_iter
        The local solver, as in :func:`fedcomp.algorithms.feddr` (the SGD solver starts
        from ``x̄``, as FedProx's clients do; ``"exact"`` needs ``mu > 0``).
    server_lr : float, default 1.0
        Server step on the averaged update.
    server_step : float, optional
        Composite extension: the server prox ``x̄ ← prox_{server_step·g}(x̄)`` after
        averaging (FedProx itself has no regularizer, and no step of its own to scale, so
        the step is given as a number; without it ``g`` is ignored by the updates).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Client i ∈ S: ``x_i ≈ argmin_x f_i(x) + (μ/2)‖x − x̄‖² = prox_{f_i/μ}(x̄)``, upload
    ``Δ_i = x_i − x̄``. Server: ``x̄ ← x̄ + η_s Σ_{i∈S} π̃_i Δ_i`` (π̃: weights renormalised
    over S), then the optional prox. Clients keep no state between rounds.

    Examples
    --------
    >>> fedprox(mu=0.1, local_epochs=20).hyperparameters["local_epochs"]
    20
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedprox(mu=0.1, local_solver='exact')
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.246
    """
    if not (isinstance(mu, int | float) and mu >= 0):
        raise ValueError(f"fedprox: mu must be a number >= 0 (got mu={mu!r})")
    if local_solver == "exact" and mu <= 0:
        raise ValueError("fedprox: the exact local solver needs mu > 0 (argmin f_i alone is "
                         "a full local solve); use local_solver='sgd' or a positive mu")
    check_positive("fedprox", server_lr=server_lr)
    if server_step is not None:
        check_positive("fedprox", server_step=server_step)
    solver = make_solver("fedprox", local_solver, client_lr, local_steps, local_epochs, tol,
                         max_iter)
    step = 1.0 / mu if mu > 0 else float("inf")

    def client_update(msg: Message, states: EmptyState, ctx: ClientContext
                      ) -> tuple[Upload, EmptyState]:
        start = replicate(msg.x, ctx.oracle.size)
        x = local_prox(solver, ctx, start, step, start)
        return Upload(x - msg.x), states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        x = state.x + server_lr * average(uploads.delta, ctx.weights)
        return ServerState(apply_server_prox(x, server_step, ctx))

    return FederatedAlgorithm(
        name="fedprox", init=lambda x0, n: (ServerState(x0), EmptyState()),
        broadcast=lambda state: Message(state.x), client_update=client_update,
        server_update=server_update, output=lambda state: state.x,
        hyperparameters={"mu": mu, **solver.describe(), "server_lr": server_lr,
                         "server_step": server_step},
        prepare=check_prox_steps("fedprox", server_step or 0.0, "lower server_step"))
