"""FedDA-GT, ReFedDA-GT and Multistep ReFedDA-GT: server-side ℓq dual averaging with tracking.

References
----------
Liang, J., Peng, Y., Zhang, Z. "Gradient Tracking for High Dimensional Federated
Optimization." arXiv preprint, 2023 — Algorithm 1 with ``U = J`` (FedDA-GT), Algorithm 2
(ReFedDA-GT, eqs. (3)–(4)) and Algorithm 3 (Multistep ReFedDA-GT).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from .._array import Array, asarray_like, device_of, expand_to, namespace, stacked_zeros
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    average,
    check_local_steps,
    check_positive,
    replicate,
    require_full_participation,
)
from ._mirror import (
    check_p,
    check_radius,
    check_sparsity,
    grad_h,
    grad_h_conj,
    resolve_p,
    restricted_primal,
    top_s,
)
from .dfedda import TRACKER_INIT


def _p_of(x: Array, p: float | None) -> float:
    return resolve_p(p, int(np.prod(x.shape)))


# --- FedDA-GT (Algorithm 1 with U = J) -----------------------------------------------------

class GTServerState(NamedTuple):
    z: Array          # z_{r,0}: the common dual state
    delta_bar: Array  # Σ π_j Δ^j of the previous round (zeros before the first)


class GTClientState(NamedTuple):
    c: Array      # c^m_r (Algorithm 1 form: Σ_m π_m c^m = 0)
    delta: Array  # this client's Δ^m of the previous round, until Δ̄ arrives


class GTMessage(NamedTuple):
    z: Array
    delta_bar: Array


class GTUpload(NamedTuple):
    delta: Array


def fedda_gt(client_lr: float = 0.01, local_steps: int = 10, server_lr: float = 1.0,
             p: float | None = None, tracker_init: str = "zero") -> FederatedAlgorithm:
    """FedDA-GT: federated ℓq dual averaging with gradient tracking (Algorithm 1, ``U = J``).

    Parameters
    ----------
    client_lr : float, default 0.01
        ``η_c``.
    local_steps : int, default 10
        ``K``.
    server_lr : float, default 1.0
        ``η_s``.
    p : float, optional
        Dual exponent (``None``: ``2 ln d``).
    tracker_init : {"zero", "gradient"}, default "zero"
        ``"gradient"`` is Algorithm 1, line 5: ``c^m_0 = Σ_j π_j ∇F_j(w_0; ξ_j) − ∇F_m(w_0; ξ_m)``,
        computed in a warm-up round before round 1 (every client uploads its gradient at
        ``w_0``; one extra communication, counted). ``"zero"`` skips it: round 0 then runs
        uncorrected, as SCAFFOLD does.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    ``z_0 = ∇h(w_0)``. Round r, client m: ``z^m ← z``; K steps ``w = ∇h*(z^m)``,
    ``z^m ← z^m − η_c(∇F_m(w; ξ) + c^m)``; upload ``Δ^m = (z^m_K − z)/(K η_c)``. Server:
    ``Δ̄ = Σ π̃_m Δ^m``, ``z ← z + K η_s η_c Δ̄``, broadcast ``(z, Δ̄)``. The tracker update
    ``c^m ← c^m + Δ^m − Δ̄`` of eq. (1) needs ``Δ̄``, so each client applies it when the next
    broadcast brings ``Δ̄`` — the same iterates as Algorithm 1 with ``U = J``, one message
    per round. With ``tracker_init="gradient"`` the warm-up round (``round = -1``) has each
    client upload ``Δ^m = −∇F_m(w_0; ξ)`` and keep it as its pending ``Δ``; the server
    leaves ``z`` and broadcasts ``Δ̄ = −Σ π_j ∇F_j(w_0; ξ_j)``, so the lazy update of round 0
    gives ``c^m_0 = Σ π_j ∇F_j − ∇F_m`` — the iterates of Algorithm 1 with ``U = J``,
    i.e. of :func:`~fedcomp.algorithms.dfedda_gt` on the complete graph (tested). Either
    way ``Σ_m π_m c^m = 0`` every round. Full participation only (eq. (1) averages over all
    clients). Output ``w_{r,0} = ∇h*(z_{r,0})``.

    References
    ----------
    Liang, Peng, Zhang, 2023, Algorithm 1 and eq. (1).

    Examples
    --------
    >>> fedda_gt().name
    'fedda_gt'
    >>> from fedcomp.toy import tiny_run
    >>> alg = fedda_gt(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.247
    """
    check_positive("fedda_gt", client_lr=client_lr, server_lr=server_lr)
    check_local_steps("fedda_gt", local_steps)
    check_p("fedda_gt", p)
    if tracker_init not in TRACKER_INIT:
        raise ValueError(f"fedda_gt: tracker_init must be one of {TRACKER_INIT} "
                         f"(got {tracker_init!r})")

    def init(x0: Array, n_clients: int) -> tuple[GTServerState, GTClientState]:
        xp = namespace(x0)
        z = grad_h(x0[None, ...], _p_of(x0, p))[0, ...]
        zeros = stacked_zeros(x0, n_clients)
        return GTServerState(z, xp.zeros_like(x0)), GTClientState(zeros, zeros)

    def broadcast(state: GTServerState) -> GTMessage:
        return GTMessage(state.z, state.delta_bar)

    def client_update(msg: GTMessage, states: GTClientState, ctx: ClientContext
                      ) -> tuple[GTUpload, GTClientState]:
        pp = _p_of(msg.z, p)
        if ctx.round < 0:  # warm-up: Δ^m = −∇F_m(w_0) makes round 0's c^m avg ∇F − ∇F_m
            delta = -ctx.oracle.grad(grad_h_conj(replicate(msg.z, ctx.oracle.size), pp))
            return GTUpload(delta), GTClientState(states.c, delta)
        c = states.c + states.delta - msg.delta_bar  # eq. (1) of the previous round
        z0 = replicate(msg.z, ctx.oracle.size)
        z = z0
        for _ in range(local_steps):
            z = z - client_lr * (ctx.oracle.grad(grad_h_conj(z, pp)) + c)
        delta = (z - z0) / (local_steps * client_lr)
        return GTUpload(delta), GTClientState(c, delta)

    def server_update(state: GTServerState, uploads: GTUpload, ctx: ServerContext
                      ) -> GTServerState:
        delta_bar = average(uploads.delta, ctx.weights)
        if ctx.round < 0:  # warm-up: z stays z_0
            return GTServerState(state.z, delta_bar)
        return GTServerState(state.z + (local_steps * server_lr * client_lr) * delta_bar,
                             delta_bar)

    return FederatedAlgorithm(
        name="fedda_gt", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update,
        output=lambda s: grad_h_conj(s.z[None, ...], _p_of(s.z, p))[0, ...],
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps,
                             server_lr=server_lr, p=p, tracker_init=tracker_init),
        prepare=require_full_participation("fedda_gt"), warmup=tracker_init == "gradient")


# --- ReFedDA-GT / Multistep ReFedDA-GT (Algorithms 2 and 3) ----------------------------------

class ReServerState(NamedTuple):
    anchor: Array  # w_0 of the current stage (centre of the restricted map)
    z: Array       # z_{r,0} (starts at 0 every stage)
    c: Array       # c_r: the server tracker
    w: Array       # w_{r,0} = Prox_h(w_0, z_{r,0}; Q_n)
    w_sum: Array   # Σ_r w_{r,0} over the rounds of the current stage
    count: Array   # () rounds in w_sum
    stage: Array   # () current stage n
    x: Array       # the output model


class ReClientState(NamedTuple):
    c: Array      # c^m_r: mean gradient of the client's last participation
    stage: Array  # (n,) stage of c^m (reset to 0 when the server moves on)


class ReMessage(NamedTuple):
    anchor: Array
    z: Array
    c: Array
    stage: Array


class ReUpload(NamedTuple):
    dz: Array  # (z^m_{r,K} − z_{r,0}) / (K η_c)
    dc: Array  # c^m_{r+1} − c^m_r


def _stage_plan(owner: str, stage_rounds: Any) -> list[int] | None:
    if stage_rounds is None:
        return None
    plan = [stage_rounds] if isinstance(stage_rounds, int) else list(stage_rounds)
    if not plan or not all(isinstance(r, int) and not isinstance(r, bool) and r >= 1
                           for r in plan):
        raise ValueError(f"{owner}: stage_rounds must be a positive integer or a list of them "
                         f"(got {stage_rounds!r})")
    return plan


def _refedda(name: str, client_lr: float, local_steps: int, server_lr: float,
             p: float | None, radius_sq: float | None, sparsity: int | None,
             stage_rounds: Sequence[int] | int | None, output: str,
             radius_decay: float) -> FederatedAlgorithm:
    check_positive(name, client_lr=client_lr, server_lr=server_lr, radius_decay=radius_decay)
    check_local_steps(name, local_steps)
    check_p(name, p)
    check_radius(name, radius_sq)
    check_sparsity(name, sparsity)
    plan = _stage_plan(name, stage_rounds)
    if output not in ("average", "last"):
        raise ValueError(f"{name}: output must be 'average' or 'last' (got {output!r})")

    def stage_of(round_: int) -> int:
        """Stage of round ``round_`` (0-based): the last stage length repeats."""
        if plan is None:
            return 0
        stage, start = 0, 0
        while True:
            length = plan[min(stage, len(plan) - 1)]
            if round_ < start + length:
                return stage
            start += length
            stage += 1

    def radius(stage: int) -> float | None:
        return None if radius_sq is None else radius_sq * radius_decay ** stage

    def primal(anchor: Array, z: Array, stage: int) -> Array:
        return restricted_primal(anchor[None, ...], z[None, ...], _p_of(z, p),
                                 radius(stage))[0, ...]

    def init(x0: Array, n_clients: int) -> tuple[ReServerState, ReClientState]:
        xp = namespace(x0)
        zero = xp.zeros_like(x0)
        scalar = xp.zeros((), dtype=x0.dtype, device=device_of(x0))
        server = ReServerState(x0, zero, zero, x0, zero, scalar, scalar, top_s(
            x0[None, ...], sparsity)[0, ...])
        clients = ReClientState(stacked_zeros(x0, n_clients),
                                xp.zeros((n_clients,), dtype=x0.dtype, device=device_of(x0)))
        return server, clients

    def broadcast(state: ReServerState) -> ReMessage:
        return ReMessage(state.anchor, state.z, state.c, state.stage)

    def client_update(msg: ReMessage, states: ReClientState, ctx: ClientContext
                      ) -> tuple[ReUpload, ReClientState]:
        xp = namespace(msg.z)
        stage = int(msg.stage)
        # a new stage resets the trackers (Algorithm 3 calls ReFedDA-GT with c_0 = 0)
        same = expand_to(states.stage == msg.stage, states.c.ndim)
        c_old = xp.where(same, states.c, xp.zeros_like(states.c))
        pp = _p_of(msg.z, p)
        anchor = replicate(msg.anchor, ctx.oracle.size)
        z0 = replicate(msg.z, ctx.oracle.size)
        z = z0
        for _ in range(local_steps):
            w = restricted_primal(anchor, z, pp, radius(stage))
            z = z - client_lr * (ctx.oracle.grad(w) - c_old + msg.c)
        dz = (z - z0) / (local_steps * client_lr)
        c_new = c_old - msg.c - dz  # eq. (4): the mean local gradient of this round
        stages = xp.full(states.stage.shape, float(stage), dtype=states.stage.dtype,
                         device=device_of(states.stage))
        return ReUpload(dz, c_new - c_old), ReClientState(c_new, stages)

    def server_update(state: ReServerState, uploads: ReUpload, ctx: ServerContext
                      ) -> ReServerState:
        stage = int(state.stage)
        c = state.c + average(uploads.dc, ctx.weights)
        # Server dual step: z ← z − K η_s η_c Δ_r with Δ_r = −Σ π̃_m (z^m_K − z)/(K η_c).
        # Eq. (4) prints Δ_r as the change of c, which does not reduce to Algorithm 1 with
        # U = J; this choice does (ALGORITHMS.md, Family 4; tested).
        z = state.z + (local_steps * server_lr * client_lr) * average(uploads.dz, ctx.weights)
        w_sum = state.w_sum + state.w  # w_{r,0}, r = 0..R−1
        count = state.count + 1.0
        w_next = primal(state.anchor, z, stage)
        mean = w_sum / count
        x = top_s((mean if output == "average" else w_next)[None, ...], sparsity)[0, ...]
        next_stage = stage_of(ctx.round + 1)
        if next_stage != stage:  # restart from the sparsified output, duals/trackers at 0
            xp = namespace(z)
            zero = xp.zeros_like(z)
            s = asarray_like(np.asarray(float(next_stage)), state.stage)
            return ReServerState(x, zero, zero, x, zero, xp.zeros_like(count), s, x)
        return ReServerState(state.anchor, z, c, w_next, w_sum, count, state.stage, x)

    return FederatedAlgorithm(
        name=name, init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update, output=lambda s: s.x,
        hyperparameters=_public_hyperparameters(
            name, dict(client_lr=client_lr, local_steps=local_steps, server_lr=server_lr, p=p,
                       radius_sq=radius_sq, sparsity=sparsity, stage_rounds=stage_rounds,
                       output=output, radius_decay=radius_decay)))


def _public_hyperparameters(name: str, values: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters the public factory ``name`` accepts (so it rebuilds from them)."""
    if name == "refedda_gt":
        return {k: v for k, v in values.items() if k not in ("stage_rounds", "radius_decay")}
    return values


def refedda_gt(client_lr: float = 0.01, local_steps: int = 10, server_lr: float = 1.0,
               p: float | None = None, radius_sq: float | None = None,
               sparsity: int | None = None, output: str = "average") -> FederatedAlgorithm:
    """ReFedDA-GT: restricted FedDA with SCAFFOLD-form tracking and a top-s output (Alg. 2).

    Parameters
    ----------
    client_lr, local_steps, server_lr, p
        As in :func:`fedda_gt`.
    radius_sq : float, optional
        ``Q``: the primal is confined to ``‖w − w_0‖_q² ≤ Q``; ``None`` is ``Q = ∞``.
    sparsity : int, optional
        ``s`` of the output ``Sparse(·; s)``; ``None`` keeps every entry.
    output : {"average", "last"}, default "average"
        ``Sparse((1/R) Σ_r w_{r,0}; s)`` (line 16) or ``Sparse(w_{R,0}; s)``.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    ``z_{0,0} = 0``, ``c_0 = c^m_0 = 0``. Round r, sampled client m: ``z^m ← z_{r,0}``; K
    steps ``w = Prox_h(w_0, z^m; Q) = w_0 + ∇h*(z^m)/(1+λ)``,
    ``z^m ← z^m − η_c(∇F_m(w; ξ) − c^m + c)``; then (eq. 4)
    ``c^m ← c^m − c − (z^m_K − z_{r,0})/(K η_c)`` (the client's mean gradient of the
    round), ``c ← c + Σ_S π̃_m Δc^m``. Server: ``z ← z + η_s Σ_S π̃_m (z^m_K − z)``. With
    every client participating and ``Q = ∞``, ``w_0 = 0`` it equals :func:`fedda_gt`
    (tested). Clients' trackers persist between participations.

    References
    ----------
    Liang, Peng, Zhang, 2023, Algorithm 2, eqs. (3)–(4).

    Examples
    --------
    >>> refedda_gt(radius_sq=1.0, sparsity=5).name
    'refedda_gt'
    >>> from fedcomp.toy import tiny_run
    >>> alg = refedda_gt(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.302
    """
    return _refedda("refedda_gt", client_lr, local_steps, server_lr, p, radius_sq, sparsity,
                    None, output, 0.5)


def multistep_refedda_gt(client_lr: float = 0.01, local_steps: int = 10,
                         server_lr: float = 1.0, p: float | None = None,
                         radius_sq: float = 1.0, sparsity: int | None = None,
                         stage_rounds: Sequence[int] | int = 50,
                         radius_decay: float = 0.5, output: str = "average"
                         ) -> FederatedAlgorithm:
    """Multistep ReFedDA-GT: restarted ReFedDA-GT with halving radius (Algorithm 3).

    Parameters
    ----------
    client_lr, local_steps, server_lr, p, sparsity
        As in :func:`refedda_gt` (the same in every stage).
    radius_sq : float, default 1.0
        ``Q_0``.
    stage_rounds : int or list of int, default 50
        ``R_n``: rounds of stage n (the last entry repeats).
    radius_decay : float, default 0.5
        ``Q_{n+1} = radius_decay · Q_n`` (the paper halves).
    output : {"average", "last"}, default "average"
        The stage's output ``w_{n+1}``, which is both the model reported and the next
        centre: ``Sparse(avg_r w_{r,0}; s)`` (Algorithm 3, line 3 through Algorithm 2,
        line 16), or ``"last"``, ``Sparse(w_{R_n,0}; s)``: the authors' code
        (pengyang7881187/DFedDA-GT) reports the last iterate (``train.py`` line 422) and
        restarts from the sparsified last iterate (``train.py`` lines 484-493,
        ``DecOptMethod.py`` lines 467-469, without ``--ReMovFlag``).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Stage n runs :func:`refedda_gt` from ``w_n`` with radius ``Q_n`` for ``R_n`` rounds; its
    output ``w_{n+1} = Sparse(avg_r w_{r,0}; s)`` is the next centre, and the duals and all
    trackers restart at 0 (line 3 passes ``c_0 = 0``). The model reported between restarts
    is the current stage's sparsified running average (``output="last"``: its sparsified
    last iterate).

    References
    ----------
    Liang, Peng, Zhang, 2023, Algorithm 3.

    Examples
    --------
    >>> multistep_refedda_gt(stage_rounds=[10, 20]).hyperparameters["stage_rounds"]
    [10, 20]
    >>> from fedcomp.toy import tiny_run
    >>> alg = multistep_refedda_gt(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.302
    """
    return _refedda("multistep_refedda_gt", client_lr, local_steps, server_lr, p, radius_sq,
                    sparsity, stage_rounds, output, radius_decay)
