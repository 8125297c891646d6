"""FedDR, asyncFedDR and FedSplit: randomized Douglas–Rachford splitting across clients.

References
----------
Tran-Dinh, Q., Pham, N. H., Phan, D. T., Nguyen, L. M. "FedDR – Randomized Douglas-Rachford
Splitting Algorithms for Nonconvex Federated Composite Optimization." NeurIPS 2021
(Algorithm 1: FedDR; Algorithm 2: asyncFedDR; supplement Section A.1 for the derivation).
Pathak, R., Wainwright, M. J. "FedSplit: An algorithmic framework for fast federated
optimization." NeurIPS 2020 (FedSplit, the Peaceman–Rachford case α = 2).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from .._array import Array, namespace, stacked_zeros
from ._base import (
    Check,
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    all_of,
    average,
    check_max_delay,
    check_positive,
    check_prox_steps,
    replicate,
    require_full_participation,
)
from ._local import LocalSolver, local_prox, make_solver

INITS = ("paper", "code")
#: FedSplit's starts: FedDR's Algorithm 1 (with its warm-up round), or Pathak & Wainwright's
FEDSPLIT_INITS = ("feddr", "fedsplit")


class ServerState(NamedTuple):
    x: Array        # x̄ = prox_{ηg}(x̃), the model
    x_tilde: Array  # x̃ = Σ π_i x̂_i, kept incrementally


class ClientState(NamedTuple):
    y: Array
    x: Array
    x_hat: Array


class Message(NamedTuple):
    x: Array


class Upload(NamedTuple):
    delta: Array  # Δx̂_i = x̂_i(new) − x̂_i(old)


def feddr(eta: float = 1.0, alpha: float = 1.0, local_solver: str = "sgd",
          client_lr: float = 0.01, local_steps: int | None = 5, local_epochs: int | None = None,
          tol: float = 1e-10, max_iter: int = 50, init: str = "paper") -> FederatedAlgorithm:
    """FedDR: randomized block-coordinate Douglas–Rachford splitting (Algorithm 1).

    Parameters
    ----------
    eta : float, default 1.0
        The prox parameter ``η`` of ``prox_{η f_i}`` and of the server's ``prox_{η g}``.
    alpha : float, default 1.0
        Relaxation ``α ∈ (0, 2]`` (1: Douglas–Rachford, 2: Peaceman–Rachford).
    local_solver : {"sgd", "exact"}, default "sgd"
        How ``prox_{η f_i}`` is evaluated (see :mod:`fedcomp.algorithms._local`): SGD on
        ``f_i(x) + ‖x − y_i‖²/(2η)`` warm-started at the previous ``x_i``, or exactly (closed
        form for quadratic losses, damped Newton to ``tol`` otherwise).
    client_lr : float, default 0.01
        SGD step of the local solver.
    local_steps, local_epochs : int or None
        SGD steps, or epochs (which take precedence), per local solve.
    tol, max_iter
        Exact solver: gradient-norm tolerance and Newton iteration cap.
    init : {"paper", "code"}, default "paper"
        ``"paper"`` (as written: Algorithm 1's initialisation): ``y_i = x⁰``,
        ``x_i = prox_{η f_i}(x⁰)``, ``x̂_i = 2x_i − y_i``, computed by every client in a
        warm-up round before round 1 (counted; it needs all clients).
        ``"code"`` (as run: unc-optimization/FedDR, ``FedDR/flearn/models/client_dr.py``
        lines 27-28 and ``trainers/feddr.py`` lines 47-49): ``y_i = x̂_i = 0``,
        ``x_i = x⁰``, ``x̃ = 0``, under full and partial participation alike. The client's
        ``first_update`` flag (``client_dr.py`` lines 24, 33-37) sets its local model to the
        server's model at the first ``set_params`` call, but that call is the evaluation
        before round 0 (``trainers/feddr.py`` lines 187-188 → 105-108, which runs for every
        client whatever ``eval_every``), so it sets every ``x_i`` to ``x̄⁰ = x⁰`` — which
        all models already hold (one graph seed, ``models/synthetic/ann.py`` line 23) —
        before anyone trains: there is no later "first visit" to model.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Server state ``x̄``, ``x̃``; client state ``y_i, x_i, x̂_i``. Round k with participants S:

    * client i ∈ S: ``y_i ← y_i + α(x̄ − x_i)``, ``x_i ≈ prox_{η f_i}(y_i)``,
      ``x̂_i ← 2x_i − y_i``, upload ``Δx̂_i`` (new minus old);
    * server: ``x̃ ← x̃ + Σ_{i∈S} π_i Δx̂_i``, ``x̄ = prox_{η g}(x̃)``.

    Clients outside S keep their state, so ``x̃ = Σ_i π_i x̂_i`` over all clients (the
    supplement's derivation writes ``x̄^k +`` where it means the previous ``x̃^k``; this is the
    incremental form of its eq. (17)). With π-weights the splitting is Douglas–Rachford in the
    π-weighted inner product of the consensus reformulation, so the server average is exact.
    Communication: d floats down, d up per participant. Converges for nonconvex L-smooth
    ``f_i`` with α < 2 and ``η`` small enough (e.g. α = 1, η = 1/(3L), Corollary 3.1).

    Examples
    --------
    >>> alg = feddr(eta=0.5, alpha=1.5, local_solver="exact")
    >>> alg.name, alg.hyperparameters["alpha"]
    ('feddr', 1.5)
    >>> from fedcomp.toy import tiny_run
    >>> alg = feddr(eta=1.0, local_solver='exact')
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.241
    """
    solver = _checked("feddr", eta, alpha, local_solver, client_lr, local_steps, local_epochs,
                      tol, max_iter, init)
    return douglas_rachford("feddr", eta, alpha, solver, init)


def fedsplit(eta: float = 1.0, tol: float = 1e-10, max_iter: int = 50,
             init: str = "feddr") -> FederatedAlgorithm:
    """FedSplit: FedDR with ``α = 2``, full participation and an exact local prox.

    Parameters
    ----------
    eta : float, default 1.0
        The prox step ``s`` of Pathak & Wainwright.
    tol, max_iter
        Accuracy of the exact local prox (Newton; one step for least squares).
    init : {"feddr", "fedsplit"}, default "feddr"
        ``"feddr"``: FedDR's Algorithm 1 start (``feddr(init="paper")``): a counted
        warm-up round sets ``z_i = x̂_i = 2 prox_{η f_i}(x⁰) − x⁰`` and keeps ``x̄ = x⁰``.
        ``"fedsplit"`` (as written in Pathak & Wainwright, Algorithm 1: ``x⁽¹⁾ = z_1⁽¹⁾ =
        … = z_m⁽¹⁾ = x``): ``z_i = x⁰`` for every client and ``x̄ = x̃ = x⁰``, no warm-up.
        Its first round computes ``z_i = 2 prox_{η f_i}(x⁰) − x⁰`` — what ``"feddr"``'s
        warm-up computes — and then updates ``x̄`` as well, so the two paths differ from
        round 1 on by one server step and share their limit.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    This is Peaceman–Rachford splitting of the consensus problem: with ``z_i = x̂_i`` the
    FedDR update with α = 2 reads ``z_i^{1/2} = prox_{η f_i}(2x̄ − z_i)``,
    ``z_i ← z_i + 2(z_i^{1/2} − x̄)``, ``x̄ = prox_{ηg}(Σ π_i z_i)`` — FedSplit (with the
    server prox for a composite g). Peaceman–Rachford is not averaged: it converges for
    strongly convex ``f_i`` (Pathak & Wainwright) but may oscillate or diverge when the
    ``f_i`` are merely convex or nonconvex; use :func:`feddr` with α < 2 there.

    In FedDR's state ``y_i = x_i = x̂_i = x⁰`` is the start ``z_i = x⁰``: with α = 2 the
    update reads only ``x̂_i`` (``y_i + 2(x̄ − x_i) = 2x̄ − x̂_i``).

    Examples
    --------
    >>> fedsplit(eta=0.1).hyperparameters
    {'eta': 0.1, 'tol': 1e-10, 'max_iter': 50, 'init': 'feddr'}
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(fedsplit(eta=1.0)):.3f}")  # F after 20 rounds; min 0.241
    0.241
    """
    if init not in FEDSPLIT_INITS:
        raise ValueError(f"fedsplit: init must be one of {FEDSPLIT_INITS} (got {init!r})")
    start = "paper" if init == "feddr" else "fedsplit"
    solver = _checked("fedsplit", eta, 2.0, "exact", 0.01, None, None, tol, max_iter, "paper")
    alg = douglas_rachford("fedsplit", eta, 2.0, solver, start,
                           require_full_participation("fedsplit"))
    # hyperparameters are what the factory accepts (Flower nodes rebuild it from them)
    return alg._replace(hyperparameters={"eta": eta, "tol": tol, "max_iter": max_iter,
                                         "init": init})


def async_feddr(eta: float = 1.0, alpha: float = 1.0, local_solver: str = "sgd",
                client_lr: float = 0.01, local_steps: int | None = 5,
                local_epochs: int | None = None, tol: float = 1e-10, max_iter: int = 50,
                init: str = "paper", max_delay: int | None = None) -> FederatedAlgorithm:
    """asyncFedDR: one client update per server step, each computed from a stale ``x̄`` (Alg. 2).

    Parameters
    ----------
    eta, alpha, local_solver, client_lr, local_steps, local_epochs, tol, max_iter, init
        Those of :func:`feddr`.
    max_delay : int, optional
        The staleness bound ``τ`` of the paper's Assumption 4.1 (``d_k ≤ τ``), enforced by
        :func:`~fedcomp.runtime.simulate_async`: an arrival computed from ``x̄^{k−d}`` with
        ``d > τ`` is not applied; its client reads ``x̄^k`` and recomputes. ``None``
        (default): no bound, the delays are whatever the clock produces.

    Returns
    -------
    FederatedAlgorithm
        With ``execution="async"``: run it with :func:`fedcomp.runtime.simulate_async`
        (an event clock; each client's compute time is drawn from its distribution).

    Notes
    -----
    Server step k processes the next arrival ``i_k`` (in simulated time order), whose
    update used the model ``x̄^{k − d_k}`` it read when it started (``d_k`` = server steps
    since then): ``y_i ← y_i + α(x̄^{k−d_k} − x_i)``, ``x_i ≈ prox_{η f_i}(y_i)``,
    ``x̂_i ← 2x_i − y_i``; server ``x̃ ← x̃ + π_i Δx̂_i``, ``x̄^{k+1} = prox_{ηg}(x̃)``. The
    update functions are FedDR's with ``S_k = {i_k}``; only the execution differs, and with
    zero delays it is FedDR with one client per round in the same order. The paper's step
    bounds (Lemma B.2) shrink once ``2τ² > n``.

    Examples
    --------
    >>> async_feddr(eta=0.5).execution
    'async'
    >>> from fedcomp.toy import tiny_run
    >>> alg = async_feddr(eta=1.0, local_solver='exact')
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.242
    """
    solver = _checked("async_feddr", eta, alpha, local_solver, client_lr, local_steps,
                      local_epochs, tol, max_iter, init)
    check_max_delay(max_delay, "async_feddr")
    alg = douglas_rachford("async_feddr", eta, alpha, solver, init)
    return alg._replace(execution="async",
                        hyperparameters={**alg.hyperparameters, "max_delay": max_delay})


def _checked(owner: str, eta: Any, alpha: Any, local_solver: str, client_lr: float,
             local_steps: int | None, local_epochs: int | None, tol: float, max_iter: int,
             init: str) -> LocalSolver:
    check_positive(owner, eta=eta, alpha=alpha)
    if alpha > 2:
        raise ValueError(f"{owner}: alpha must be in (0, 2] (got alpha={alpha!r}); 1 is "
                         "Douglas-Rachford, 2 Peaceman-Rachford")
    if init not in INITS:
        raise ValueError(f"{owner}: init must be one of {INITS} (got {init!r})")
    return make_solver(owner, local_solver, client_lr, local_steps, local_epochs, tol, max_iter)


def douglas_rachford(name: str, eta: float, alpha: float, solver: LocalSolver,
                     init: str, *checks: Check) -> FederatedAlgorithm:
    """The FedDR update functions (shared by FedDR, FedSplit and asyncFedDR); ``init`` is
    ``"paper"``, ``"code"`` or ``"fedsplit"`` (``y_i = x_i = x̂_i = x⁰``, ``x̃ = x⁰``);
    ``checks`` are ``prepare`` checks beside the prox-step one (FedSplit's full
    participation)."""
    alpha = float(alpha)

    def init_fn(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        # "code": y_i = x̂_i = 0, x_i = x⁰, x̃ = 0. "paper" starts from the same arrays and
        # its warm-up round (every client, before round 1) sets y_i, x_i, x̂_i and x̃.
        xp = namespace(x0)
        if init == "fedsplit":  # z_i = x̂_i = x⁰ (y_i = x_i = x⁰), x̃ = Σ π_i x⁰ = x⁰
            # three real copies: client rows are replaced field by field later
            copies = [replicate(x0, n_clients) * 1.0 for _ in range(3)]
            return ServerState(x0, x0 * 1.0), ClientState(*copies)
        zeros = stacked_zeros(x0, n_clients)
        xs = replicate(x0, n_clients) * 1.0  # a real copy: client rows are replaced later
        return ServerState(x0, xp.zeros_like(x0)), ClientState(zeros, xs, zeros)

    def broadcast(state: ServerState) -> Message:
        return Message(state.x)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        if ctx.round < 0:  # warm-up: y = x⁰, x = prox_{ηf_i}(x⁰), x̂ = 2x − y
            y = replicate(msg.x, ctx.oracle.size)
            x = local_prox(solver, ctx, y, eta, y)
        else:
            y = states.y + alpha * (msg.x - states.x)
            x = local_prox(solver, ctx, y, eta, states.x)
        x_hat = 2.0 * x - y
        return Upload(x_hat - states.x_hat), ClientState(y, x, x_hat)

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        # raw π_i, not renormalised over S: x̃ stays the average of *all* clients' x̂_i
        x_tilde = state.x_tilde + average(uploads.delta, ctx.pi)
        if ctx.round < 0:  # warm-up: x̄⁰ = x⁰ (Algorithm 1's initialisation)
            return ServerState(state.x, x_tilde)
        return ServerState(ctx.prox(x_tilde, eta), x_tilde)

    hyper = {"eta": eta, "alpha": alpha, **solver.describe(), "init": init}
    return FederatedAlgorithm(
        name=name, init=init_fn, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=lambda state: state.x, hyperparameters=hyper,
        prepare=all_of(check_prox_steps(name, eta, "lower eta"), *checks),
        divergence_hint="try a smaller eta or alpha < 2, or a smaller client_lr",
        warmup=init == "paper")


__all__ = ["async_feddr", "douglas_rachford", "feddr", "fedsplit"]
