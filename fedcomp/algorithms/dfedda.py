"""DFedDA, DFedDA-GT and DReFedDA-GT: decentralized dual averaging in the ℓq geometry.

References
----------
Liang, J., Peng, Y., Zhang, Z. "Gradient Tracking for High Dimensional Federated
Optimization." arXiv preprint, 2023 — Algorithm 1 (DFedDA / DFedDA-GT, eq. (1)) and the
decentralized version of Algorithm 2 (DReFedDA-GT) used in its Section 7.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .._array import Array, device_of, namespace
from ._base import check_flag, check_local_steps, check_positive, replicate
from ._decentralized import DecentralizedAlgorithm, NodeContext
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

TRACKER_INIT = ("gradient", "zero")


class NodeState(NamedTuple):
    z0: Array      # z^m_{r,0}: the dual state each node starts the round from
    z: Array       # z^m_{r,k}: the dual after the local steps of the round
    c: Array       # c^m_r: gradient tracker (zeros without tracking)
    anchor: Array  # w_0: centre of the restricted map (DReFedDA-GT); the dual origin is 0
    w_sum: Array   # Σ_{r' < r} w^m_{r',0}: for the averaged (sparsified) output
    count: Array   # (n,) number of terms in w_sum


def _family(name: str, *, client_lr: float, local_steps: int, server_lr: float,
            gradient_tracking: bool, p: float | None, tracker_init: str,
            radius_sq: float | None, sparsity: int | None, restricted: bool,
            output: str) -> DecentralizedAlgorithm:
    check_positive(name, client_lr=client_lr, server_lr=server_lr)
    check_local_steps(name, local_steps)
    check_flag(name, gradient_tracking=gradient_tracking)
    check_p(name, p)
    check_radius(name, radius_sq)
    check_sparsity(name, sparsity)
    if tracker_init not in TRACKER_INIT:
        raise ValueError(f"{name}: tracker_init must be one of {TRACKER_INIT} "
                         f"(got {tracker_init!r})")
    if output not in ("last", "average"):
        raise ValueError(f"{name}: output must be 'last' or 'average' (got {output!r})")

    def primal(z: Array, anchor: Array, pp: float) -> Array:
        if restricted:  # ReFedDA map: the dual is measured from z_0 = 0 around w_0
            return restricted_primal(anchor, z, pp, radius_sq)
        return grad_h_conj(z, pp)

    def exponent(x: Array) -> float:
        return resolve_p(p, x.shape[-1] if x.ndim == 2 else int(x.size // x.shape[0]))

    def init(x0: Array, ctx: NodeContext, mix: Callable[[Array], Array]) -> NodeState:
        xp = namespace(x0)
        n = ctx.n_nodes
        w0 = replicate(x0, n)
        pp = exponent(w0)
        z0 = xp.zeros_like(w0) if restricted else grad_h(w0, pp)
        c = xp.zeros_like(w0)
        if gradient_tracking and tracker_init == "gradient":
            g0 = ctx.grad(w0)  # c^m_0 = Σ_j u_jm ∇F_j(w_0; ξ_j) − ∇F_m(w_0; ξ_m)
            c = mix(g0) - g0
        return NodeState(z0, z0, c, w0 + 0.0, xp.zeros_like(w0),
                         xp.zeros((n,), dtype=x0.dtype, device=device_of(x0)))

    def local_update(states: NodeState, ctx: NodeContext) -> NodeState:
        pp = exponent(states.z0)
        z = states.z0
        for _ in range(local_steps):
            g = ctx.grad(primal(z, states.anchor, pp))
            z = z - client_lr * (g + states.c) if gradient_tracking else z - client_lr * g
        return states._replace(z=z)

    def gossip(states: NodeState, mix: Callable[[Array], Array], round_: int) -> NodeState:
        w_sum = states.w_sum
        if output == "average":  # accumulate w^m_{r,0} for the averaged output
            w_sum = w_sum + primal(states.z0, states.anchor, exponent(states.z0))
        delta = (states.z - states.z0) / (local_steps * client_lr)  # Δ^m_r
        c = states.c + delta - mix(delta) if gradient_tracking else states.c
        z0 = mix(states.z0 + (local_steps * server_lr * client_lr) * delta)
        return NodeState(z0, z0, c, states.anchor, w_sum, states.count + 1.0)

    def node_models(states: NodeState) -> Array:
        if output == "last":  # Sparse(w^m_{R,0}; s): both outputs are sparsified
            return top_s(primal(states.z0, states.anchor, exponent(states.z0)), sparsity)
        xp = namespace(states.w_sum)
        count = xp.maximum(states.count, xp.ones_like(states.count))
        mean = states.w_sum / xp.reshape(count, (-1,) + (1,) * (states.w_sum.ndim - 1))
        # before the first round the average is empty: report w_{0,0}
        started = xp.reshape(states.count > 0, mean.shape[:1] + (1,) * (mean.ndim - 1))
        mean = xp.where(started, mean, primal(states.z0, states.anchor, exponent(states.z0)))
        return top_s(mean, sparsity)

    return DecentralizedAlgorithm(
        name=name, init=init, local_update=local_update, gossip=gossip, output=node_models,
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps,
                             server_lr=server_lr, gradient_tracking=gradient_tracking, p=p,
                             tracker_init=tracker_init, radius_sq=radius_sq,
                             sparsity=sparsity, output=output))


def dfedda(client_lr: float = 0.01, local_steps: int = 10, server_lr: float = 1.0,
           p: float | None = None, gradient_tracking: bool = False,
           tracker_init: str = "gradient") -> DecentralizedAlgorithm:
    """DFedDA: local ℓq dual averaging on every node, gossip of the dual states.

    Parameters
    ----------
    client_lr : float, default 0.01
        ``η_c``.
    local_steps : int, default 10
        ``K``.
    server_lr : float, default 1.0
        ``η_s`` (scales the dual displacement before mixing).
    p : float, optional
        Dual exponent ``p ≥ 2`` of the mirror map (``q = p/(p−1)``); ``None`` gives
        ``2 ln d``. The paper's experiments use ``p = 12``.
    gradient_tracking : bool, default False
        ``True`` is DFedDA-GT (see :func:`dfedda_gt`).
    tracker_init : {"gradient", "zero"}, default "gradient"
        GT only: ``c^m_0 = Σ_j u_jm ∇F_j(w_0) − ∇F_m(w_0)`` (Algorithm 1, line 5), or zero
        (the first round then runs uncorrected, as the server algorithms do).

    Returns
    -------
    DecentralizedAlgorithm

    Notes
    -----
    ``z^m_{0,0} = ∇h(w_0)``. Round r, node m: for k = 0..K−1, ``w = ∇h*(z^m)``,
    ``z^m ← z^m − η_c (∇F_m(w; ξ) + c^m)`` (``c^m = 0`` without tracking). Then
    ``Δ^m = (z^m_K − z^m_0)/(K η_c)``, ``c^m ← c^m + Δ^m − Σ_j u_jm Δ^j`` and
    ``z^m_{r+1,0} = Σ_j u_jm (z^j_{r,0} + K η_s η_c Δ^j)``. Tracking keeps ``Σ_m c^m = 0``
    (U is doubly stochastic), and removes the heterogeneity floor of plain DFedDA. No
    regularizer is used: sparsity comes from the ℓq geometry (the problem's ``g`` is
    ignored). Node m's model is ``w^m_{r,0} = ∇h*(z^m_{r,0})``.

    References
    ----------
    Liang, Peng, Zhang, "Gradient Tracking for High Dimensional Federated Optimization",
    2023, Algorithm 1.

    Examples
    --------
    >>> dfedda(client_lr=0.1).hyperparameters["gradient_tracking"]
    False
    >>> from fedcomp.toy import tiny_run
    >>> alg = dfedda(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.247
    """
    return _family("dfedda_gt" if gradient_tracking else "dfedda", client_lr=client_lr,
                   local_steps=local_steps, server_lr=server_lr,
                   gradient_tracking=gradient_tracking, p=p, tracker_init=tracker_init,
                   radius_sq=None, sparsity=None, restricted=False, output="last")


def dfedda_gt(client_lr: float = 0.01, local_steps: int = 10, server_lr: float = 1.0,
              p: float | None = None, tracker_init: str = "gradient") -> DecentralizedAlgorithm:
    """DFedDA-GT: :func:`dfedda` with gradient tracking (Algorithm 1, ``gradient_tracking=True``).

    See :func:`dfedda` for the parameters and the update rule.

    Examples
    --------
    >>> dfedda_gt().name
    'dfedda_gt'
    >>> from fedcomp.toy import tiny_run
    >>> alg = dfedda_gt(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.247
    """
    return dfedda(client_lr, local_steps, server_lr, p, True, tracker_init)


def drefedda_gt(client_lr: float = 0.01, local_steps: int = 10, server_lr: float = 1.0,
                p: float | None = None, radius_sq: float | None = None,
                sparsity: int | None = None, tracker_init: str = "gradient",
                output: str = "average") -> DecentralizedAlgorithm:
    """DReFedDA-GT: gossip version of restricted FedDA-GT with a sparsified averaged output.

    Parameters
    ----------
    client_lr, local_steps, server_lr, p, tracker_init
        As in :func:`dfedda`.
    radius_sq : float, optional
        ``Q``: the primal stays in ``‖w − w_0‖_q² ≤ Q`` around the starting point; ``None``
        is ``Q = ∞``.
    sparsity : int, optional
        ``s`` of the output ``Sparse(·; s)`` (keep the s largest entries); ``None`` keeps all.
    output : {"average", "last"}, default "average"
        ``Sparse((1/R) Σ_r w^m_{r,0}; s)`` (Algorithm 2, line 16) or ``Sparse(w^m_{R,0}; s)``.

    Returns
    -------
    DecentralizedAlgorithm

    Notes
    -----
    As :func:`dfedda_gt`, with the dual started at ``z^m_{0,0} = 0`` and the dual-to-primal
    map replaced by ``w = argmin_{‖w − w_0‖_q² ≤ Q} ⟨w − w_0, −z⟩ + h(w − w_0)
    = w_0 + ∇h*(z)/(1 + λ)``, ``λ = max(‖z‖_p/((p−1)√Q) − 1, 0)`` (eq. (3), with the sign
    of ALGORITHMS.md). With ``Q = ∞``, ``w_0 = 0``, ``output="last"`` and no sparsity it is
    exactly DFedDA-GT. The paper names this variant (Section 7) without printing it; the
    gossip step is that of Algorithm 1.

    References
    ----------
    Liang, Peng, Zhang, 2023, Algorithm 2 and Section 7.

    Examples
    --------
    >>> drefedda_gt(radius_sq=4.0, sparsity=16).hyperparameters["radius_sq"]
    4.0
    >>> from fedcomp.toy import tiny_run
    >>> alg = drefedda_gt(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.302
    """
    return _family("drefedda_gt", client_lr=client_lr, local_steps=local_steps,
                   server_lr=server_lr, gradient_tracking=True, p=p, tracker_init=tracker_init,
                   radius_sq=radius_sq, sparsity=sparsity, restricted=True, output=output)


def dfedmid(client_lr: float = 0.01, local_steps: int = 10, server_lr: float = 1.0,
            second_prox: bool = False) -> DecentralizedAlgorithm:
    """DFedMiD: local proximal SGD on every node, then gossip of the primal models.

    Parameters
    ----------
    client_lr : float, default 0.01
        ``η_c`` (also the prox parameter of the problem's regularizer ``g``).
    local_steps : int, default 10
        ``K``.
    server_lr : float, default 1.0
        ``η_s``: node m sends ``x^m_0 + η_s (x^m_K − x^m_0)`` (its round-start model moved
        by η_s times its local displacement); 1 sends the local model itself.
    second_prox : bool, default False
        ``True`` (as run: pengyang7881187/DFedDA-GT, ``DecOptMethod.py`` lines 396-402,
        the baseline plotted by Liang, Peng, Zhang): after mixing, every node applies
        ``prox_{η_c K η_s g}`` (the soft-threshold at ``λ η_c K η_s`` for ``g = λ‖·‖₁``),
        FedMiD's server prox with the server average replaced by gossip. ``False``: the
        mixed models are kept (the paper's description of the baseline).

    Returns
    -------
    DecentralizedAlgorithm

    Notes
    -----
    Round r, node m: K steps ``x^m ← prox_{η_c g}(x^m − η_c ∇F_m(x^m; ξ))`` from
    ``x^m_0``, then ``x^m_0 ← Σ_j u_jm (x^j_0 + η_s (x^j_K − x^j_0))`` and, with
    ``second_prox``, ``x^m_0 ← prox_{η_c K η_s g}(x^m_0)``. The defaults (η_s = 1, no second
    prox) mix the local models, the decentralized FedMiD of Yuan, Zaheer, Reddi (ICML 2021)
    as Liang, Peng, Zhang (2023, Section 7) name their baseline; ``server_lr`` and
    ``second_prox`` give the update of the authors' code (their ``server_step_size``
    defaults to 0.1, ``train.py`` line 105).

    Examples
    --------
    >>> dfedmid().name
    'dfedmid'
    >>> dfedmid(server_lr=0.5, second_prox=True).hyperparameters["second_prox"]
    True
    >>> from fedcomp.toy import tiny_run
    >>> alg = dfedmid(client_lr=0.1, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.242
    """
    check_positive("dfedmid", client_lr=client_lr, server_lr=server_lr)
    check_local_steps("dfedmid", local_steps)
    check_flag("dfedmid", second_prox=second_prox)

    class State(NamedTuple):
        x0: Array  # x^m_0: the model each node starts the round from
        x: Array   # x^m_k: the local model (x^m_K after the local steps)

    def init(x0: Array, ctx: NodeContext, mix: Callable[[Array], Array]) -> Any:
        x = replicate(x0, ctx.n_nodes) + 0.0
        return State(x, x)

    def local_update(states: Any, ctx: NodeContext) -> Any:
        x = states.x0
        for _ in range(local_steps):
            x = ctx.prox(x - client_lr * ctx.grad(x), client_lr)
        return State(states.x0, x)

    def gossip(states: Any, mix: Callable[[Array], Array], round_: int) -> Any:
        sent = states.x if server_lr == 1.0 else states.x0 + server_lr * (states.x - states.x0)
        x = mix(sent)
        return State(x, x)

    def threshold(states: Any, prox: Callable[[Array, Any], Array]) -> Any:
        x = prox(states.x0, client_lr * local_steps * server_lr)
        return State(x, x)

    return DecentralizedAlgorithm(
        name="dfedmid", init=init, local_update=local_update, gossip=gossip,
        output=lambda s: s.x0,
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps,
                             server_lr=server_lr, second_prox=second_prox),
        after_gossip=threshold if second_prox else None)
