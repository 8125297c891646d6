"""C-FedDA: constrained federated dual averaging (per-round weights, exact constrained prox).

References
----------
Bao, Y., Crawshaw, M., Luo, S., Liu, M. "Fast Composite Optimization and Statistical
Recovery in Federated Learning." ICML 2022 (``shared/papers/seed001_*``), Algorithm 2.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any, NamedTuple

from .._array import Array, namespace
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    average,
    check_local_steps,
    check_positive,
    replicate,
)
from ._cprox import cprox_l1
from .fast_fedda import placeholder

CPROX = ("exact", "soft_then_project")
#: The readings of Bao et al.'s paper and of their MATLAB (see :func:`c_fedda`).
WEIGHTS = ("increasing", "uniform")
PROXIMAL_WEIGHTS = ("paper", "constant")
ORDERS = ("gradient_first", "prox_first")
OUTPUTS = ("average", "last")


def round_weight(r: int, weights: str = "increasing") -> int:
    """``α_r``: ``r + 1`` (the paper) or 1 (Bao et al.'s MATLAB, ``weights="uniform"``)."""
    return r + 1 if weights == "increasing" else 1


def round_weight_sum(r: int, weights: str = "increasing") -> float:
    """``A_r = Σ_{j ≤ r} α_j``."""
    return (r + 1) * (r + 2) / 2.0 if weights == "increasing" else float(r + 1)


def soft_then_project(b: Array, c: float, kappa: float, w0: Array, radius_l1: float | None,
                      radius_l2: float | None) -> Array:
    """Bao et al.'s code: soft-threshold ``−b/c`` at ``κ/c``, then project onto the ℓ1 ball
    around ``w0`` (none when ``radius_l1`` is None), then radially onto the ℓ2 ball — not
    the exact CProx when the ℓ1 ball is active."""
    from ..regularizers import L1, L1Ball

    w = L1(kappa / c).prox(-b / c, 1.0)
    if radius_l1 is not None:
        w = w0 + L1Ball(radius_l1).prox(w - w0, 1.0)
    if radius_l2 is None:
        return w
    xp = namespace(w)
    norms = xp.sqrt(xp.sum(w * w, axis=-1, keepdims=True))
    return w * (radius_l2 / xp.maximum(norms, radius_l2))


def soft_then_project_nuclear(b: Array, c: float, kappa: float, w0: Array,
                              radius: float | None, radius_l2: float | None) -> Array:
    """The code's variant for the nuclear norm: singular value thresholding of ``−b/c`` at
    ``κ/c``, projection onto the nuclear ball around ``w0`` (none when ``radius`` is None),
    radial projection."""
    from ..regularizers import Nuclear
    from ._cprox import _project_nuclear_ball, _radial

    w = Nuclear(kappa / c).prox(-b / c, 1.0)
    if radius is not None:
        w = _project_nuclear_ball(w, w0, radius)
    return _radial(w, radius_l2)


def _optional_ball(solver: Callable[..., Array], threshold: Callable[..., Array]
                   ) -> Callable[..., Array]:
    """``solver``, or ``threshold`` when there is no ball (``ε = None``).

    Without the ball the CProx is the prox of ``(κ/c)R`` at ``−b/c`` followed by the radial
    projection onto ``W`` (exact for ℓ1 and the nuclear norm, both invariant under the
    sign/rotation structure of the ℓ2 ball), whichever ``cprox`` was asked for.
    """

    def solve(b: Array, c: float, kappa: float, w0: Array, eps: float | None,
              rho: float | None) -> Array:
        return (threshold if eps is None else solver)(b, c, kappa, w0, eps, rho)

    return solve


def constrained_prox_solver(norm: str, cprox: str, shape: tuple[int, int] | None = None
                            ) -> Callable[..., Array]:
    """The CProx solver ``solve(b, c, κ, w0, ε, ρ)`` on a block for ``R = norm``.

    ``norm`` is ``"l1"`` or ``"nuclear"``; ``shape`` is the matrix view of vector models
    under the nuclear norm (rows are reshaped to it and back). Under ℓ1 every model of the
    block is flattened to a vector, so the balls bound whole models.
    """
    from ._cprox import cprox_nuclear

    if norm == "l1":
        return _whole_models(_optional_ball(
            cprox_l1 if cprox == "exact" else soft_then_project, soft_then_project))
    matrix_solver = _optional_ball(
        cprox_nuclear if cprox == "exact" else soft_then_project_nuclear,
        soft_then_project_nuclear)
    if shape is None:
        return matrix_solver

    def solve(b: Array, c: float, kappa: float, w0: Array, eps: float | None,
              rho: float | None) -> Array:
        xp = namespace(b)
        as_matrix = (b.shape[0], *shape)
        w0 = w0 + xp.zeros_like(b)
        w = matrix_solver(xp.reshape(b, as_matrix), c, kappa, xp.reshape(w0, as_matrix), eps,
                          rho)
        return xp.reshape(w, b.shape)

    return solve


def _whole_models(vector_solver: Callable[..., Array]) -> Callable[..., Array]:
    """Run an ℓ1 solver on each model of a block viewed as one vector.

    The constraints ``‖w − w0‖₁ ≤ ε`` and ``‖w‖₂ ≤ ρ`` bound the whole model: a matrix
    model ``(B, d, k)`` (``L1(param_ndim=2)``) is flattened to ``(B, d·k)`` so that it gets
    one ε and one ρ, not one per row.
    """

    def solve(b: Array, c: float, kappa: float, w0: Array, eps: float | None,
              rho: float | None) -> Array:
        xp = namespace(b)
        flat = (b.shape[0], -1)
        w0 = w0 + xp.zeros_like(b)
        w = vector_solver(xp.reshape(b, flat), c, kappa, xp.reshape(w0, flat), eps, rho)
        return xp.reshape(w, b.shape)

    return solve


def _check_reg_strength(owner: str, reg_strength: Any) -> None:
    """``None`` (the problem's λ) or a number ``>= 0``."""
    is_number = isinstance(reg_strength, numbers.Real) and not isinstance(reg_strength, bool)
    if reg_strength is not None and not (is_number and reg_strength >= 0):
        raise ValueError(f"{owner}: reg_strength must be a number >= 0, or None for the "
                         f"problem's regularizer strength (got reg_strength={reg_strength!r})")


def constraint_norm(regularizer: Any) -> tuple[str, float, tuple[int, int] | None]:
    """``(norm, λ, matrix view)`` of C-FedDA's ``R`` from the problem's regularizer.

    ``L1(λ)`` gives the ℓ1 norm, ``Nuclear(λ)`` the nuclear norm, ``Zero`` the ℓ1 norm
    with λ = 0; anything else raises.
    """
    from ..regularizers import L1, Nuclear, Zero

    if isinstance(regularizer, L1):
        return "l1", float(regularizer.alpha), None
    if isinstance(regularizer, Nuclear):
        shape = regularizer.shape if regularizer.param_ndim == 1 else None
        return "nuclear", float(regularizer.alpha), shape
    if isinstance(regularizer, Zero):
        return "l1", 0.0, None
    raise ValueError(f"C-FedDA works with an L1 or Nuclear regularizer (got "
                     f"{type(regularizer).__name__}): R and h are the same norm in Bao et al.; "
                     "use L1 or Nuclear")


class CFedDARules(NamedTuple):
    """The update rules of one C-FedDA stage (shared by C-FedDA and MC-FedDA).

    ``client(g, w_tilde_prev, w0, r, ctx, lam, eps)`` runs round r's local steps of a block
    from the broadcast ``(ḡ, w̃_{r−1})`` and returns the block's ``g``;
    ``server(g, w_tilde, w0, r, lam, eps)`` returns ``(w̄_{r+1}, w̃_{r+1})``.
    """

    client: Callable[..., Array]
    server: Callable[..., tuple[Array, Array]]


def c_fedda_rules(smoothness: float, strong_convexity: float, local_steps: int,
                  domain_radius: float | None, solve: Callable[..., Array],
                  weights: str = "increasing", proximal_weight: str = "paper",
                  order: str = "gradient_first") -> CFedDARules:
    """Build :class:`CFedDARules` for fixed ``L``, ``μ``, ``E``, ``ρ``, CProx solver and
    readings (``weights``, ``proximal_weight``, ``order``: see :func:`c_fedda`)."""
    lip, mu, big_e = smoothness, strong_convexity, local_steps

    def alpha(r: int) -> int:
        return round_weight(r, weights)

    def constrained_prox(z: Array, w0: Array, r: int, lam: float, eps: float | None
                         ) -> Array:
        a_r = round_weight_sum(r, weights)
        # γ_r of the E-scaled objective: (L + μ)α_r (the paper), or L/E so that the
        # unscaled objective carries L·½‖w − w0‖² in every round (Bao et al.'s MATLAB)
        gamma = (lip + mu) * alpha(r) if proximal_weight == "paper" else lip / big_e
        b = z / big_e - gamma * w0
        return solve(b, 0.5 * mu * a_r + gamma, a_r * lam, w0, eps, domain_radius)

    def client(g_bar: Array, w_tilde_prev: Array, w0: Array, r: int, ctx: ClientContext,
               lam: float, eps: float | None) -> Array:
        g = replicate(g_bar, ctx.oracle.size)
        if r == 0:
            w, w_tilde = w0, w0
        else:  # the server's w̄_r and w̃_r, recomputed from (ḡ, w̃_{r−1})
            w = constrained_prox(g - 0.5 * mu * big_e * w_tilde_prev, w0, r - 1, lam, eps)
            w_tilde = w_tilde_prev + alpha(r) * w
        if order == "prox_first":  # NuclearRun.m: the server model w̄_r gets no gradient
            for _ in range(big_e):
                w = constrained_prox(g - 0.5 * mu * big_e * w_tilde, w0, r, lam, eps)
                g = g + alpha(r) * ctx.oracle.grad(w)
            return g
        for t in range(big_e):
            g = g + alpha(r) * ctx.oracle.grad(w)
            if t < big_e - 1:
                w = constrained_prox(g - 0.5 * mu * big_e * w_tilde, w0, r, lam, eps)
        return g

    def server(g_bar: Array, w_tilde: Array, w0: Array, r: int, lam: float,
               eps: float | None) -> tuple[Array, Array]:
        w = constrained_prox((g_bar - 0.5 * mu * big_e * w_tilde)[None, ...], w0[None, ...],
                             r, lam, eps)[0, ...]
        return w, w_tilde + alpha(r + 1) * w

    return CFedDARules(client, server)


class ServerState(NamedTuple):
    w0: Array
    g: Array           # Σ π_k g^k of the last round
    w_tilde_prev: Array  # w̃_{r−1}: clients recompute w̄_r and w̃_r from (g, w̃_{r−1})
    w_tilde: Array     # w̃_r = Σ_{j ≤ r} α_j w̄_j
    w: Array           # w̄_r
    w_avg: Array       # Σ_r α_r w̄_{r+1} / A_R


class ClientState(NamedTuple):
    w0: Array  # the centre of the constraint (a setup constant, never communicated)


class Message(NamedTuple):
    g: Array
    w_tilde: Array  # w̃_{r−1}


class Upload(NamedTuple):
    g: Array


def c_fedda(radius: float | None = 1.0, smoothness: float | str = "auto",
            strong_convexity: float = 0.0, local_steps: int = 10,
            domain_radius: float | None = None, reg_strength: Any = None, cprox: str = "exact",
            weights: str = "increasing", proximal_weight: str = "paper",
            order: str = "gradient_first", output: str = "average") -> FederatedAlgorithm:
    """C-FedDA (Bao et al. 2022, Algorithm 2) for an ℓ1 or nuclear-norm regularizer.

    Parameters
    ----------
    radius : float or None, default 1.0
        ``ε_0``: the constraint ``R(w − w0) ≤ ε_0`` around the initial point, with ``R``
        the problem's regularizer norm (ℓ1 for :class:`~fedcomp.regularizers.L1`, nuclear
        for :class:`~fedcomp.regularizers.Nuclear`) of the whole model (a matrix model
        under ℓ1 is one vector, not one constraint per row). ``None`` (or ``inf``): no
        ball, so the CProx is the prox of ``(κ/c)R`` at ``−b/c`` — soft-thresholding, or
        singular-value thresholding — then the radial projection onto ``W``. That replaces
        the paper's constraint set ``W(ε_0; w_0)`` of CProx_r (Section 3.3) by the whole
        space, as run: Bao et al.'s MATLAB C-FedDA, ``LassoRun.m`` lines 204 and 209
        (``l1_soft``), ``NuclearRun.m`` lines 164 and 173 (``nuc_prox``).
    smoothness : float or "auto", default "auto"
        ``L``; ``γ_r = (L + μ) α_r`` (see ``proximal_weight``). ``"auto"`` = the largest
        client constant.
    strong_convexity : float, default 0.0
        ``μ``.
    local_steps : int, default 10
        ``E``.
    domain_radius : float, optional
        ``ρ > 0``: the ℓ2-ball domain ``W`` of the whole model (the whole space when
        ``None``).
    reg_strength : float, optional
        ``λ ≥ 0``; by default the ``alpha`` of the problem's regularizer.
    cprox : {"exact", "soft_then_project"}, default "exact"
        The exact constrained prox (:func:`fedcomp.algorithms._cprox.cprox_l1`,
        :func:`~fedcomp.algorithms._cprox.cprox_nuclear`), or the authors' code's
        approximation (threshold, then project onto the ball: ``l1_soft_cs.m``,
        ``nuc_prox_cs.m``, used by their MC-FedDA).
    weights : {"increasing", "uniform"}, default "increasing"
        ``α_r = r + 1`` (the paper, Algorithm 2, line 2, and Theorem 3.1) or ``α_r = 1``
        (as run: Bao et al.'s MATLAB adds every gradient with weight 1 and divides the
        sums by rK, which leaves the CProx argmin unchanged: ``LassoRun.m`` lines 201-208,
        ``NuclearRun.m`` lines 163-172).
    proximal_weight : {"paper", "constant"}, default "paper"
        The weight of ``½‖w − w0‖²`` in the CProx objective. ``"paper"``: ``γ_r E`` with
        ``γ_r = (L + μ)α_r`` (Theorem 3.1 and CProx_r of Section 3.3). ``"constant"``:
        ``L`` itself, in every round and unscaled by α_r, E or μ (``γ_r = L/E``) — as run:
        ``gamma = 600`` enters as ``gamma * x0/(r*K)`` and ``gamma/(r*K)`` next to sums
        divided by rK (``LassoRun.m`` lines 183, 190, 203, 208; ``NuclearRun.m`` lines
        146, 156, 163, 172), the code's reading of Appendix F's "L = 600".
    order : {"gradient_first", "prox_first"}, default "gradient_first"
        ``"gradient_first"`` (the paper, Algorithm 2, lines 6-9, and ``LassoRun.m`` lines
        198-205): a local step takes the gradient at the current point, then the CProx;
        round r's first gradient is at the server model ``w̄_r``. ``"prox_first"`` (as
        run: ``NuclearRun.m`` lines 162-167, and 209-215 for MC-FedDA): a local step first
        moves to ``w = CProx_r(g − μE w̃_r/2)`` of the gradients so far, then adds
        ``α_r ∇f_k(w; ξ)`` to ``g``; the server models get no gradient.
    output : {"average", "last"}, default "average"
        ``Σ_r α_r w̄_{r+1} / A_R`` (the paper, Theorem 3.1), or the last server model
        ``w̄_R`` (as run: ``LassoRun.m`` line 210, ``NuclearRun.m`` line 174 evaluate it).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Round r (``α_r = r + 1``, ``A_r = Σ_{j≤r} α_j``): each client adds ``α_r ∇f_k(w; ξ)`` to
    ``g`` at every local step and, except at the last, moves to
    ``w = CProx_r(g − μE w̃_r/2)``; it uploads ``g`` (d floats). The server sets
    ``w̄_{r+1} = CProx_r(Σ π_k g_k − μE w̃_r/2)``, ``w̃_{r+1} = w̃_r + α_{r+1} w̄_{r+1}`` and
    broadcasts ``ḡ`` and ``w̃_r`` (2d floats: a client that skipped rounds recomputes
    ``w̄_{r+1}`` and ``w̃_{r+1}`` from them). Output: ``Σ_r α_r w̄_{r+1} / A_R``.
    ``CProx_r(z) = argmin_{w∈W, R(w−w0)≤ε} ⟨w, z − γ_r E w0⟩ + (μA_r/2 + γ_r)E‖w‖²/2
    + A_r E λ R(w)`` — after dividing by E, the solver with ``b = z/E − γ_r w0``.

    **As run.** The defaults are the paper's equations. The authors' MATLAB
    (github.com/MingruiLiu-ML-Lab/Federated-Sparse-Learning; C-FedDA is the section
    ``AFedDA`` of ``LassoRun.m``, ``SFedDA`` of ``NuclearRun.m``) made Figs. 1-2 with
    ``radius=None, weights="uniform", proximal_weight="constant", output="last"``, plus
    ``order="prox_first"`` for the nuclear norm, ``smoothness=600``,
    ``strong_convexity=0.1`` and a random start ``x0 = randn`` (``simulate(x0=...)``).
    Its μ-term, ``0.5*mu*xr/r`` with ``xr`` the sum of ``x0`` and the server models, held
    fixed within a round, is the paper's ``μE w̃_r/2`` under uniform weights: no option.
    Tested in ``tests/papers/test_bao_readings.py``.

    Examples
    --------
    >>> c_fedda(radius=2.0, smoothness=1.0).hyperparameters["cprox"]
    'exact'
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(c_fedda(radius=2.0, local_steps=2)):.3f}")  # F after 20 rounds; min 0.241
    0.250
    """
    if radius is not None:
        check_positive("c_fedda", radius=radius)
    if domain_radius is not None:
        check_positive("c_fedda", domain_radius=domain_radius)
    _check_reg_strength("c_fedda", reg_strength)
    check_local_steps("c_fedda", local_steps)
    if smoothness != "auto":
        check_positive("c_fedda", smoothness=smoothness)
    if not strong_convexity >= 0:
        raise ValueError(f"c_fedda: strong_convexity must be >= 0 (got {strong_convexity!r})")
    if cprox not in CPROX:
        raise ValueError(f"c_fedda: cprox must be one of {CPROX} (got {cprox!r})")
    check_readings("c_fedda", weights=weights, proximal_weight=proximal_weight, order=order,
                   output=output)
    hyperparameters = dict(radius=radius, smoothness=smoothness,
                           strong_convexity=strong_convexity, local_steps=local_steps,
                           domain_radius=domain_radius, reg_strength=reg_strength, cprox=cprox,
                           weights=weights, proximal_weight=proximal_weight, order=order,
                           output=output)
    eps = no_ball(radius)

    def prepare(setup: SetupContext) -> FederatedAlgorithm:
        norm, lam, shape = constraint_norm(setup.regularizer)
        lip = float(smoothness if smoothness != "auto" else setup.client_smoothness().max())
        lam = float(reg_strength) if reg_strength is not None else lam
        # the resolved L and λ are hyperparameters from now on: a Flower node rebuilds the
        # algorithm from them and must not re-derive L from its own clients only
        resolved = {**hyperparameters, "smoothness": lip, "reg_strength": lam}
        rules = c_fedda_rules(lip, strong_convexity, local_steps, domain_radius,
                              constrained_prox_solver(norm, cprox, shape), weights,
                              proximal_weight, order)
        return _c_fedda(eps, lip, rules, lam, weights, output, resolved)

    return placeholder("c_fedda", hyperparameters, prepare)


def no_ball(radius: float | None) -> float | None:
    """``ε`` as the solvers take it: ``None`` for no ball (``radius`` None or ``inf``)."""
    return None if radius is None or math.isinf(radius) else radius


def check_readings(owner: str, **readings: str) -> None:
    """Raise a ``ValueError`` naming the first reading that is not one of its values."""
    allowed = dict(weights=WEIGHTS, proximal_weight=PROXIMAL_WEIGHTS, order=ORDERS,
                   output=OUTPUTS, warm_start=OUTPUTS)
    for name, value in readings.items():
        if value not in allowed[name]:
            raise ValueError(f"{owner}: {name} must be one of {allowed[name]} "
                             f"(got {name}={value!r})")


def _c_fedda(radius: float | None, lip: float, rules: CFedDARules, lam: float, weights: str,
             output: str, hyperparameters: dict[str, Any]) -> FederatedAlgorithm:
    """C-FedDA with every constant resolved against the problem (see :func:`c_fedda`)."""

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        zero = namespace(x0).zeros_like(x0)
        return ServerState(x0, zero, zero, x0, x0, x0), ClientState(replicate(x0, n_clients))

    def broadcast(state: ServerState) -> Message:
        return Message(state.g, state.w_tilde_prev)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        g = rules.client(msg.g, msg.w_tilde, states.w0, ctx.round, ctx, lam, radius)
        return Upload(g), states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        r = ctx.round
        g = average(uploads.g, ctx.weights)
        w, w_tilde = rules.server(g, state.w_tilde, state.w0, r, lam, radius)
        # Σ_{j≤r} α_j w̄_{j+1} / A_r, updated incrementally
        w_avg = state.w_avg + (round_weight(r, weights) / round_weight_sum(r, weights)) * (
            w - state.w_avg)
        return ServerState(state.w0, g, state.w_tilde, w_tilde, w, w_avg)

    return FederatedAlgorithm(
        name="c_fedda", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update,
        output=(lambda state: state.w_avg) if output == "average" else (lambda state: state.w),
        hyperparameters=hyperparameters,
        divergence_hint=(f"raise smoothness (L={lip:g}): L must bound every client's local "
                         "smoothness"))
