"""FedADMM: ADMM on the consensus reformulation, with partial participation.

References
----------
Wang, H., Marella, S., Anderson, J. "FedADMM: A Federated Primal-Dual Algorithm Allowing
Partial Participation." IEEE CDC 2022.
"""

from __future__ import annotations

from typing import NamedTuple

from .._array import Array, namespace
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    average,
    check_positive,
    check_prox_steps,
    replicate,
)
from ._local import local_prox, make_solver


class ServerState(NamedTuple):
    x: Array      # x̄ = prox_{g/ρ}(Σ π_i u_i)
    u_sum: Array  # Σ_i π_i u_i over every client's latest upload


class ClientState(NamedTuple):
    x: Array    # local model (warm start of the local solver)
    lam: Array  # dual variable λ_i


class Message(NamedTuple):
    x: Array


class Upload(NamedTuple):
    delta: Array  # u_i(new) − u_i(old), u_i = x_i + λ_i/ρ


def fedadmm(rho: float = 1.0, local_solver: str = "sgd", client_lr: float = 0.01,
            local_steps: int | None = 5, local_epochs: int | None = None, tol: float = 1e-10,
            max_iter: int = 50) -> FederatedAlgorithm:
    """FedADMM: local augmented-Lagrangian solves, dual updates, server z-step with a prox.

    Parameters
    ----------
    rho : float, default 1.0
        Penalty ``ρ`` of the augmented Lagrangian (the local prox step is ``1/ρ``).
    local_solver, client_lr, local_steps, local_epochs, tol, max_iter
        The local solver, as in :func:`fedcomp.algorithms.feddr`.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Augmented Lagrangian of ``min Σ π_i f_i(x_i) + g(z)`` s.t. ``x_i = z``. Client i ∈ S:
    ``x_i ≈ argmin f_i(x) + ⟨λ_i, x − x̄⟩ + (ρ/2)‖x − x̄‖² = prox_{f_i/ρ}(x̄ − λ_i/ρ)``,
    ``λ_i ← λ_i + ρ(x_i − x̄)``, upload ``u_i = x_i + λ_i/ρ``. The server keeps every
    client's latest upload (initially ``u_i = x⁰``) and sets ``x̄ = prox_{g/ρ}(Σ_i π_i u_i)``.
    It keeps the sum ``Σ π_i u_i`` rather than n vectors: clients send ``Δu_i`` (d floats,
    like ``u_i``) and the sum is updated with the raw weights π_i — the same iterates.
    At a fixed point ``λ_i = −∇f_i(x*)`` and ``x̄ = prox_{g/ρ}(x* − ∇f(x*)/ρ) = x*``.

    Examples
    --------
    >>> fedadmm(rho=2.0, local_solver="exact").hyperparameters["rho"]
    2.0
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedadmm(rho=1.0, local_solver='exact')
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.241
    """
    check_positive("fedadmm", rho=rho)
    solver = make_solver("fedadmm", local_solver, client_lr, local_steps, local_epochs, tol,
                         max_iter)
    step = 1.0 / rho

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        xp = namespace(x0)
        xs = replicate(x0, n_clients) * 1.0
        return ServerState(x0, x0 * 1.0), ClientState(xs, xp.zeros_like(xs))

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        u_old = states.x + step * states.lam
        x = local_prox(solver, ctx, msg.x - step * states.lam, step, states.x)
        lam = states.lam + rho * (x - msg.x)
        return Upload(x + step * lam - u_old), ClientState(x, lam)

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        u_sum = state.u_sum + average(uploads.delta, ctx.pi)
        return ServerState(ctx.prox(u_sum, step), u_sum)

    return FederatedAlgorithm(
        name="fedadmm", init=init, broadcast=lambda state: Message(state.x),
        client_update=client_update, server_update=server_update,
        output=lambda state: state.x,
        hyperparameters={"rho": rho, **solver.describe()},
        prepare=check_prox_steps("fedadmm", step, "raise rho"),
        divergence_hint="try a larger rho or a smaller client_lr")
