"""Scafflix: FLIX's explicit personalisation trained by Scaffnew's local steps.

Every client ``i`` has a weight ``α_i ∈ [0, 1]`` and its own optimum ``x_i* = argmin f_i``;
its personal model is ``x̃_i = α_i x + (1 − α_i) x_i*``, and the global ``x`` solves FLIX,

    min_x  Σ_i π_i f_i(α_i x + (1 − α_i) x_i*),

by i-Scaffnew (Scaffnew with a step ``γ_i`` per client) on the functions
``f̃_i(x) = f_i(α_i x + (1 − α_i) x_i*)``: local gradient steps with control variates,
communication with probability ``p`` per step. ``α_i = 1`` for every client is Scaffnew on
``Σ π_i f_i``; ``α_i = 0`` is local training (``x̃_i = x_i*``).

References
----------
Yi, K., Condat, L., Richtárik, P. "Explicit Personalization and Local Training: Double
Communication Acceleration in Federated Learning", TMLR 2025, arXiv:2305.13170, Algorithm 1.
Gasanov, E., Khaled, A., Horváth, S., Richtárik, P. "FLIX: A Simple and
Communication-Efficient Alternative to Local Methods in Federated Learning", AISTATS 2022.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like, namespace, per_client, stacked_zeros, to_numpy
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    all_of,
    average,
    check_positive,
    replicate,
    require_full_participation,
)
from ._condat import check_smooth
from ._local import LocalSolver, local_prox
from .scaffnew import steps_until_communication

#: The client-state field holding the personal models ``x̃_i``.
PERSONAL = "personal"
#: The step rules ``client_lr`` resolves before round 1 (see :func:`scafflix`).
STEP_RULES = ("auto", "code")
#: Newton's tolerance and budget for ``x_i* = argmin f_i`` (``_local``'s exact solver; its
#: floor is 100 eps of the dtype): Newton's last steps are quadratic, so x_i* is exact to
#: float precision for a few more gradients.
OPTIMUM_TOL, OPTIMUM_ITERATIONS = 1e-13, 50
#: Why a nonsmooth ``g`` is refused (:func:`~fedcomp.algorithms._condat.check_smooth`).
SMOOTH_FLIX = ("the FLIX problem min Σ π_i f_i(α_i x + (1 − α_i) x_i*): its analysis "
               "(smooth, strongly convex f_i) has no g, and a prox of g on x would not reach "
               "the personal models, which mix x with each client's dense optimum x_i*")


class ServerState(NamedTuple):
    x: Array


class ClientState(NamedTuple):
    h: Array         # control variate h_i (Σ π_i α_i h_i = 0 after every communication)
    x_hat: Array     # x̂_i, the client's last local iterate before the communication
    x_star: Array    # x_i* = argmin f_i, solved in round 0 (x⁰ until then, or if all α_i = 1)
    personal: Array  # x̃_i = α_i x + (1 − α_i) x_i* at the model x of the client's round


class Message(NamedTuple):
    x: Array


class Upload(NamedTuple):
    x_hat: Array  # the server averages them with the weights π_i α_i²/γ_i


def scafflix(global_weight: float | Sequence[float] = 0.5,
             client_lr: float | Sequence[float] | str = "auto", comm_prob: float = 0.2
             ) -> FederatedAlgorithm:
    """Scafflix (Yi, Condat, Richtárik 2025): FLIX personal models, Scaffnew's local training.

    Parameters
    ----------
    global_weight : float or sequence of float in [0, 1], default 0.5
        ``α_i``, the paper's personalisation factor: the global model's share of client
        i's personal model ``α_i x + (1 − α_i) x_i*``. One number for every client, or one
        per client. 1 is no personalisation (Scaffnew), 0 local training.
    client_lr : float, sequence of float, "auto" or "code", default "auto"
        ``γ_i``, the paper's individual steps (a client steps ``x`` by ``γ_i/α_i``). One
        number, one per client, or a rule resolved before round 1 from the clients'
        smoothness constants ``L_i`` (recorded in the hyperparameters): ``"auto"`` is
        ``γ_i = 1/L_i``, the largest the analysis allows; ``"code"`` is the official code's
        ``γ_i = α_i² / mean_j(α_j² L_j)`` (one step ``1/mean_j(α_j² L_j)`` on the ``f̃_i``).
    comm_prob : float in (0, 1], default 0.2
        ``p``: after each local step the clients communicate with this probability.

    Returns
    -------
    FederatedAlgorithm
        Its output is the global ``x``; ``client_states.personal`` holds the personal
        models (at the model each client last received) and ``client_states.x_star`` the
        local optima, so ``α_i x + (1 − α_i) x_i*`` is any ``x``'s personal model.

    Notes
    -----
    Round 0 first gives every client its optimum ``x_i* = argmin f_i``, which the paper
    takes as computed beforehand: exactly, by the exact local solver of the primal–dual
    family (Newton; one linear solve for a quadratic loss) on the client's full data,
    counted as client work (skipped when every ``α_i = 1``). ``f_i`` must have a unique
    minimiser: a client whose Newton solve does not reach ``‖∇f_i‖ ≤ √eps`` is an error
    naming it (add a ridge term, e.g. logistic ``l2=``).

    A round is the run of local steps between two communications, of geometric length
    ``K_r`` (mean ``1/p``) drawn from the coin common to all clients
    (:func:`~fedcomp.algorithms.scaffnew.steps_until_communication`, as Scaffnew). Client i
    (``h_i = 0`` initially): ``h_i ← h_i + (p α_i/γ_i)(x − x̂_i)`` (the control-variate
    update of the previous communication, a no-op in round 0); from ``x`` take ``K_r``
    steps ``x̂_i ← x̂_i − (γ_i/α_i)(∇f_i(α_i x̂_i + (1 − α_i) x_i*) − h_i)``; upload
    ``x̂_i`` (d floats). Server: ``x ← Σ_i π_i (α_i²/γ_i) x̂_i / Σ_i π_i (α_i²/γ_i)``,
    broadcast (d floats). ``Σ π_i α_i h_i = 0`` after every communication, so a fixed point
    has ``Σ π_i α_i ∇f_i(x̃_i) = 0``: the FLIX optimum. With ``π_i = 1/n`` this is the
    paper's Algorithm 1 (its ``γ = (1/n Σ α_i²/γ_i)⁻¹``). A client with ``α_i = 0`` is
    out of FLIX (``f̃_i`` is constant): it takes no step, its ``h_i`` stays 0 and its
    weight in the average is 0 (the paper's step ``γ_i/α_i`` is undefined there); if
    every ``α_i = 0`` the global model never moves and every personal model is ``x_i*``.
    Full participation only. Order of the updates: the paper and the code take the local
    step, flip the coin, average, then update ``h_i``; fedcomp updates ``h_i`` at the
    start of the next round, once the client has the average (the same iterates).

    Not composite: the paper's analysis (every ``f_i`` L_i-smooth and μ-strongly convex,
    ``γ_i ≤ 1/L_i``, a linear rate) has no regularizer, and a prox of ``g`` on ``x``
    would not reach the personal models, which mix ``x`` with the dense ``x_i*``. A
    nonzero ``g`` is refused by ``prepare``; a ridge term belongs in the loss.

    The official code (``WilliamYi96/Scafflix``, ``logistic_reg/workers.py``
    ``run_scafflix`` and ``models.py``, read for this) runs the same iteration in the
    variables of ``f̃_i``: one step ``lr = 1/mean_i(α_i² L_i)`` for every client, control
    variates ``α_i h_i``, a plain mean over the clients. That is the paper's update with
    ``γ_i = α_i² lr`` (``client_lr="code"``), whose weights ``α_i²/γ_i = 1/lr`` are equal;
    fedcomp runs the paper's reading (``"auto"``: ``γ_i = 1/L_i``). The differences:
    the code's ``γ_i`` can exceed the analysis' ``1/L_i`` (a mean of ``α_j² L_j``, not a
    bound per client), and its logistic ``L_i = λ_max(AᵀA + λI)/(4n_i)`` counts the ridge
    λ as ``λ/(4n_i)``; with its default ``optim_p=True`` it replaces the ``p`` it is given
    by ``1/√κ``, ``κ = mean_i L_i / 0.1`` (fedcomp takes ``p`` as given); it flips its
    coin after every local step with ``np.random`` (fedcomp draws the round's length from
    its counter-based common coin: the same law); it finds ``x_i*`` by gradient descent
    at ``1/L_i`` until ``‖∇f_i‖ < 1e-6`` (fedcomp by Newton, to 1e-13); a client with
    ``α_i = 0`` stays in its mean with a zero gradient; it adds an intercept column to
    the features and starts from ``x⁰ = 1`` (fedcomp from the given ``x0``). Its
    neural-network code (``nn/src/Scafflix.py``, FEMNIST) differs further (a coin per
    client step at 0.2, the control variate pulled toward the personal point, a server
    optimizer on the mean change) and is not what fedcomp follows.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp import Problem, simulate
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import Zero
    >>> from fedcomp.toy import tiny_problem
    >>> problem = Problem(LeastSquares(l2=0.1), Zero(), tiny_problem().data)
    >>> run = simulate(scafflix(global_weight=0.5, comm_prob=0.5), problem, 60, metrics=[])
    >>> own = personal_models(run.x, run.client_states.x_star, 0.5)
    >>> own.shape, bool(np.allclose(own, run.client_states.personal, atol=1e-8))
    ((3, 4), True)
    """
    weights = _checked_weights(global_weight)
    steps = _checked_steps(client_lr)
    check_positive("scafflix", comm_prob=comm_prob)
    if not comm_prob <= 1:
        raise ValueError(f"scafflix: comm_prob must be in (0, 1] (got comm_prob={comm_prob!r})")
    hyperparameters = dict(global_weight=weights, client_lr=steps, comm_prob=comm_prob)

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        zeros = stacked_zeros(x0, n_clients)
        return ServerState(x0), ClientState(zeros, zeros + x0, zeros + x0, zeros + x0)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        ids = np.asarray(ctx.client_ids)
        # a Flower node hosts a few clients by their global ids: size the tables by both
        n = max(ctx.n_clients, int(ids.max(initial=-1)) + 1)
        alpha, step, cv, _ = coefficients(weights, steps, comm_prob, n)
        x_star = states.x_star
        if ctx.round == 0 and not np.all(alpha == 1):
            x_star = local_optima(ctx, replicate(msg.x, ctx.oracle.size))
        a = per_client(alpha[ids], states.h, states.h.ndim - 1)
        h = states.h + per_client(cv[ids], states.h, states.h.ndim - 1) * (msg.x - states.x_hat)
        moving = alpha[ids] > 0
        active = None if moving.all() else moving
        lr = per_client(step[ids], states.h, states.h.ndim - 1)
        y = replicate(msg.x, ctx.oracle.size)
        for _ in range(steps_until_communication(ctx.oracle.seed, ctx.round, comm_prob)):
            mixed = a * y + (1.0 - a) * x_star
            y = y - lr * (ctx.oracle.grad(mixed, active=active) - h)
        personal = a * msg.x[None, ...] + (1.0 - a) * x_star
        return Upload(y), ClientState(h, y, x_star, personal)

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        for name, value in (("global_weight", weights), ("client_lr", steps)):
            if isinstance(value, list) and len(value) != ctx.n_clients:
                raise ValueError(_length_message(name, len(value), ctx.n_clients))
        *_, mass = coefficients(weights, steps, comm_prob, ctx.n_clients)
        if not mass.any():  # every α_i = 0: FLIX is constant, x stays where it is
            return state
        w = ctx.weights * _lookup(mass, ctx.client_ids, ctx.weights)
        return ServerState(average(uploads.x_hat, w / namespace(w).sum(w)))

    checks = all_of(check_smooth("scafflix", "or ditto / pfedme, which keep g in each "
                                 "personal problem", SMOOTH_FLIX),
                    require_full_participation("scafflix"))

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        checks(setup)
        if steps not in STEP_RULES:
            return None
        if isinstance(weights, list) and len(weights) != setup.n_clients:
            raise ValueError(_length_message("global_weight", len(weights), setup.n_clients))
        smooth = np.asarray(setup.client_smoothness(), dtype=np.float64)
        alpha = _per_client(weights, setup.n_clients, "global_weight")
        return scafflix(weights, resolve_steps(steps, alpha, smooth), comm_prob)

    return FederatedAlgorithm(
        name="scafflix", init=init, broadcast=lambda state: Message(state.x),
        client_update=client_update, server_update=server_update,
        output=lambda state: state.x, hyperparameters=hyperparameters,
        prepare=prepare,
        divergence_hint="try a smaller client_lr ('auto' is 1/L_i, the analysis' largest)",
        personal_field=PERSONAL)


def coefficients(global_weight: Any, client_lr: Any, comm_prob: float, n: int
                 ) -> tuple[np.ndarray, ...]:
    """Per client (host float64, ``(n,)``): ``α_i``, the step ``γ_i/α_i``, the
    control-variate rate ``p α_i/γ_i`` and the average's weight ``α_i²/γ_i`` (0 where
    ``α_i = 0``: such a client never moves)."""
    if isinstance(client_lr, str):
        raise ValueError(f"scafflix: client_lr={client_lr!r} is resolved by prepare() before "
                         "round 1; run the algorithm through fedcomp.simulate (or call prepare)")
    n = max([n] + [len(v) for v in (global_weight, client_lr) if isinstance(v, list)])
    alpha = _per_client(global_weight, n, "global_weight")
    gamma = _per_client(client_lr, n, "client_lr")
    inside = alpha > 0
    safe = np.where(inside, alpha, 1.0)
    step = np.where(inside, gamma / safe, 0.0)
    cv = np.where(inside, comm_prob * alpha / gamma, 0.0)
    return alpha, step, cv, alpha * alpha / gamma


def resolve_steps(rule: str, alpha: np.ndarray, smoothness: np.ndarray) -> list[float]:
    """``γ_i`` of a rule: ``"auto"`` ``1/L_i``; ``"code"`` ``α_i²/mean_j(α_j² L_j)``, and
    ``1/L_i`` for a client with ``α_i = 0`` (it takes no step: any positive value)."""
    auto = 1.0 / np.maximum(smoothness, np.finfo(np.float64).tiny)
    if rule == "auto":
        return [float(v) for v in auto]
    mean = float(np.mean(alpha * alpha * smoothness))
    code = alpha * alpha / mean if mean > 0 else auto
    return [float(v) for v in np.where(alpha > 0, code, auto)]


def local_optima(ctx: ClientContext, start: Array) -> Array:
    """``x_i* = argmin f_i`` of every client of the block: Newton on ``f_i`` alone (the exact
    local prox with an infinite step), counted; a client it does not solve is an error."""
    solver = LocalSolver("exact", tol=OPTIMUM_TOL, max_iter=OPTIMUM_ITERATIONS)
    try:
        x_star = local_prox(solver, ctx, start, math.inf, start)
    except np.linalg.LinAlgError:
        x_star = start * math.nan
    xp = namespace(x_star)
    g = ctx.oracle.full_grad(x_star)
    norms = to_numpy(xp.sqrt(xp.sum(xp.reshape(g * g, (g.shape[0], -1)), axis=1)))
    bad = ~(norms <= math.sqrt(float(np.finfo(norms.dtype).eps)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise ValueError(
            f"scafflix: client {int(ctx.client_ids[i])} has no unique optimum x_i* = argmin f_i "
            f"(Newton stopped at ‖∇f_i‖ = {float(norms[i]):.3g}); FLIX needs each f_i strongly "
            "convex: add a ridge term to the loss (e.g. logistic l2=...)")
    return x_star


def personal_models(x: Array, x_star: Array, global_weight: float | Sequence[float]) -> Array:
    """Every client's FLIX model ``α_i x + (1 − α_i) x_i*`` at the global model ``x``
    (``x_star``: ``client_states.x_star`` of a Scafflix run), shape ``(n, *x.shape)``."""
    alpha = _per_client(_checked_weights(global_weight), x_star.shape[0], "global_weight")
    a = per_client(alpha, x_star, x_star.ndim - 1)
    return a * x[None, ...] + (1.0 - a) * x_star


def _lookup(table: np.ndarray, ids: Any, like: Array) -> Array:
    """``table[ids]`` on ``like``'s namespace: host ids index on the host, traced ids (the
    compiled server) take from the table on the device."""
    if isinstance(ids, np.ndarray):
        return asarray_like(table[ids], like)
    return namespace(like).take(asarray_like(table, like), ids, axis=0)


def _per_client(value: Any, n: int, name: str) -> np.ndarray:
    """A hyperparameter's value for (at least) ``n`` clients: one number, or one per client."""
    if not isinstance(value, list):
        return np.full(n, float(value))
    if len(value) < n:
        raise ValueError(_length_message(name, len(value), n))
    return np.asarray(value, dtype=np.float64)


def _length_message(name: str, got: int, n: int) -> str:
    return (f"scafflix: {name} has {got} entries for {n} clients; give one number, or one "
            "per client")


def _checked_weights(value: Any) -> float | list[float]:
    """``α``: a number in [0, 1] or a non-empty sequence of them (as a list of floats)."""
    items = list(value) if isinstance(value, list | tuple) else [value]
    for i, v in enumerate(items):
        is_number = isinstance(v, int | float) and not isinstance(v, bool | np.generic)
        if not (is_number and 0 <= v <= 1):
            where = "" if items[0] is value else f"[{i}]"
            raise ValueError(f"scafflix: global_weight{where} must be a number in [0, 1] "
                             f"(got {v!r}); 1 is the global model, 0 the client's own optimum")
    if not items:
        raise ValueError("scafflix: global_weight is empty; give one number, or one per client")
    return [float(v) for v in items] if isinstance(value, list | tuple) else float(value)


def _checked_steps(value: Any) -> float | list[float] | str:
    """``γ``: a positive number, a non-empty sequence of them, or a rule of
    :data:`STEP_RULES`."""
    if isinstance(value, str):
        if value not in STEP_RULES:
            raise ValueError(f"scafflix: client_lr must be a positive number, one per client, "
                             f"or one of {STEP_RULES} (got {value!r})")
        return value
    if isinstance(value, list | tuple):
        if not value:
            raise ValueError("scafflix: client_lr is empty; give one number, or one per client")
        for i, v in enumerate(value):
            check_positive("scafflix", **{f"client_lr[{i}]": v})
        return [float(v) for v in value]
    check_positive("scafflix", client_lr=value)
    return float(value)


__all__ = ["PERSONAL", "personal_models", "scafflix"]
