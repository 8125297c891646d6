"""FedExProx: FedProx with exact client proxes and server extrapolation.

References
----------
Li, H., Acharya, K., Richtárik, P. "The Power of Extrapolation in Federated Learning."
NeurIPS 2024, arXiv:2405.13766 (Algorithm 1, FedExProx; its constant extrapolation of
Theorem 1 and the adaptive rules FedExProx-GraDS and FedExProx-StoPS).
"""

from __future__ import annotations

from typing import NamedTuple

from .._array import Array, namespace, to_numpy
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
from .fedprox import Message, ServerState, Upload

RULES = ("constant", "grads", "stops")


# FedProx's states and messages: FedExProx changes only the server's step; Upload.delta is
# prox_{γ f_i}(x) − x = −γ ∇M_i(x), the scaled gradient of the client's Moreau envelope


class PolyakUpload(NamedTuple):
    delta: Array
    #: ``M_i(x) = f_i(p_i) + ‖p_i − x‖²/(2γ)``, the client's Moreau envelope at ``x``, (B,)
    envelope: Array


def fedexprox(step: float = 1.0, rule: str = "constant", server_lr: float = 1.0,
              loss_floor: float = 0.0, server_step: float | None = None, tol: float = 1e-10,
              max_iter: int = 50) -> FederatedAlgorithm:
    """FedExProx: average the clients' exact proxes, then extrapolate past the average.

    Parameters
    ----------
    step : float, default 1.0
        The clients' prox step ``γ > 0`` (FedProx's ``1/μ``).
    rule : {"constant", "grads", "stops"}, default "constant"
        The extrapolation ``α_k``: ``server_lr`` (``"constant"``), gradient diversity
        (``"grads"``, FedExProx-GraDS) or the stochastic Polyak step (``"stops"``,
        FedExProx-StoPS).
    server_lr : float, default 1.0
        The constant ``α ≥ 1`` of ``rule="constant"`` (``1`` is FedProx with an exact
        prox; the paper's optimum is ``1/(γ L_γ)``, see Notes).
    loss_floor : float, default 0.0
        ``inf f_i``, the same for every client, for ``rule="stops"``: ``0`` for a nonnegative
        loss in the interpolation regime (a consistent least squares), the paper's setting.
    server_step : float, optional
        fedcomp's composite extension: the server prox ``x ← prox_{server_step·g}(x)`` after
        extrapolating (the paper has no regularizer; without it ``g`` is ignored by the
        updates, as in :func:`fedcomp.algorithms.fedprox`).
    tol, max_iter : float, int
        The exact local prox (Newton; one step for least squares), as in
        :func:`fedcomp.algorithms.fedprox` with ``local_solver="exact"``.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Round ``k`` with participants ``S`` and weights ``π̃`` (uniform ``1/|S|`` in the
    paper)::

        client i ∈ S:  p_i = prox_{γ f_i}(x_k),   upload Δ_i = p_i − x_k
        server:        x_{k+1} = x_k + α_k Σ_{i∈S} π̃_i Δ_i    [then prox_{server_step·g}]

    Since ``∇M_i(x) = (x − prox_{γ f_i}(x))/γ`` for the Moreau envelope
    ``M_i(x) = min_y f_i(y) + ‖y − x‖²/(2γ)``, this is gradient descent with step ``γα_k``
    on ``M = Σ π̃_i M_i``, whose minimisers are those of ``f`` in the interpolation regime
    (a common minimiser of every ``f_i``). The rules:

    * constant: ``α_k = server_lr``; Theorem 1's best constant is ``1/(γ L_γ)`` with
      ``L_γ`` the smoothness of the averaged envelope (full participation), which needs
      the Hessians of every client together, so it is not computed here;
    * GraDS: ``α_k = Σ π̃_i ‖Δ_i‖² / ‖Σ π̃_i Δ_i‖²`` (gradient diversity of the envelopes,
      ``≥ 1`` by Jensen), computed by the server from the uploads;
    * StoPS: ``α_k = γ Σ π̃_i (M_i(x_k) − inf f_i) / ‖Σ π̃_i Δ_i‖²`` (Polyak's step
      ``(M(x_k) − inf M)/‖∇M(x_k)‖²`` divided by ``γ``, with ``inf M_i = inf f_i``); each
      client also uploads ``M_i(x_k) = f_i(p_i) + ‖Δ_i‖²/(2γ)``.

    Where ``Σ π̃_i Δ_i = 0`` (a fixed point) the adaptive rules take ``α_k = 1``: the step
    is zero either way. I could read the paper's abstract and summaries but not its full
    text here; the rules are written from its definitions of GraDS and StoPS as the
    gradient diversity and the stochastic Polyak step of the Moreau envelopes, with
    fedcomp's participant weights ``π̃`` in place of ``1/|S|``.

    Examples
    --------
    >>> fedexprox(step=2.0, rule="grads").hyperparameters["rule"]
    'grads'
    """
    check_positive("fedexprox", step=step, server_lr=server_lr)
    if rule not in RULES:
        raise ValueError(f"fedexprox: rule must be one of {RULES} (got rule={rule!r}): "
                         "'constant' uses server_lr, 'grads' and 'stops' are adaptive")
    if not (isinstance(loss_floor, int | float) and not isinstance(loss_floor, bool)
            and abs(loss_floor) < float("inf")):
        raise ValueError(f"fedexprox: loss_floor must be a finite number, inf f_i (got "
                         f"loss_floor={loss_floor!r}); 0 for a nonnegative loss that "
                         "interpolates the data")
    if server_step is not None:
        check_positive("fedexprox", server_step=server_step)
    solver = make_solver("fedexprox", "exact", 0.01, None, None, tol, max_iter)

    def client_update(msg: Message, states: EmptyState, ctx: ClientContext
                      ) -> tuple[Upload | PolyakUpload, EmptyState]:
        start = replicate(msg.x, ctx.oracle.size)
        delta = local_prox(solver, ctx, start, step, start) - start
        if rule != "stops":
            return Upload(delta), states
        xp = namespace(delta)
        axes = tuple(range(1, delta.ndim))
        envelope = ctx.oracle.full_value(start + delta) + xp.sum(delta * delta,
                                                                 axis=axes) / (2.0 * step)
        return PolyakUpload(delta, envelope), states

    def extrapolation(uploads: Upload | PolyakUpload, mean: Array, ctx: ServerContext) -> float:
        if rule == "constant":
            return server_lr
        xp = namespace(mean)
        denominator = float(to_numpy(xp.sum(mean * mean)))
        if denominator == 0.0:
            return 1.0
        if rule == "grads":
            axes = tuple(range(1, uploads.delta.ndim))
            spread = xp.sum(uploads.delta * uploads.delta, axis=axes)
            return float(to_numpy(xp.sum(ctx.weights * spread))) / denominator
        gap = xp.sum(ctx.weights * (uploads.envelope - loss_floor))  # type: ignore[union-attr]
        return step * float(to_numpy(gap)) / denominator

    def server_update(state: ServerState, uploads: Upload | PolyakUpload, ctx: ServerContext
                      ) -> ServerState:
        mean = average(uploads.delta, ctx.weights)
        x = state.x + extrapolation(uploads, mean, ctx) * mean
        return ServerState(apply_server_prox(x, server_step, ctx))

    return FederatedAlgorithm(
        name="fedexprox", init=lambda x0, n: (ServerState(x0), EmptyState()),
        broadcast=lambda state: Message(state.x), client_update=client_update,
        server_update=server_update, output=lambda state: state.x,
        hyperparameters={"step": step, "rule": rule, "server_lr": server_lr,
                         "loss_floor": loss_floor, "server_step": server_step, "tol": tol,
                         "max_iter": max_iter},
        prepare=check_prox_steps("fedexprox", server_step or 0.0, "lower server_step"))
