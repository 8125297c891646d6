"""Fast-FedDA: federated dual averaging with increasing weights for strongly convex losses.

References
----------
Bao, Y., Crawshaw, M., Luo, S., Liu, M. "Fast Composite Optimization and Statistical
Recovery in Federated Learning." ICML 2022 (``shared/papers/seed001_*``), Algorithm 1.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .._array import Array, device_of, expand_to, is_traced, model_norm, namespace
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    average,
    check_local_steps,
    check_positive,
    replicate,
    setup_context,
)

#: Regularizers h for which ``argmin_{w ∈ ball} q(w) + h(w)`` is the radial projection of
#: the unconstrained prox: positively homogeneous h that are invariant under the sign/rotation
#: structure of the ball (see the proof in ``L1L2Ball``).
BALL_COMPATIBLE = ("Zero", "L1", "GroupLasso", "Nuclear")

#: The readings of the running sum w̃ and of a local step's order (see :func:`fast_fedda`).
ITERATE_SUMS = ("paired", "every_prox")
ORDERS = ("gradient_first", "prox_first")


def weight(t: int, weights: str) -> float:
    """``α_t``: ``t + 1`` (the paper) or 1 (Bao et al.'s MATLAB, ``weights="uniform"``).

    ``t`` is a Python integer, or inside ``jax.jit`` a traced one (the step number
    ``rE + k`` of a traced round): then ``α_t`` is a traced scalar, cast to the model's
    dtype by :func:`_like` where it meets a model.
    """
    if weights != "increasing":
        return 1.0
    return t + 1.0 if is_traced(t) else float(t + 1)


def weight_sum(t: int, weights: str) -> float:
    """``A_t = Σ_{i ≤ t} α_i`` (traced for a traced ``t``, as :func:`weight`)."""
    if weights == "increasing":
        return (t + 1) * (t + 2) / 2.0
    return t + 1.0 if is_traced(t) else float(t + 1)


def _like(value: Any, model: Array) -> Any:
    """A step-size scalar ready to meet ``model``: Python numbers as they are (they take the
    model's dtype), a traced scalar cast to the model's dtype (a float64 scalar would make a
    float32 model float64)."""
    if isinstance(value, int | float):
        return value
    return namespace(model).astype(value, model.dtype)


def prox_t(z: Array, w0: Array, t: int, prox: Any, smoothness: float, strong_convexity: float,
           radius: float | None, weights: str) -> Array:
    """``Prox_t(z) = argmin_{w ∈ W} ⟨w, z − γ_t w0⟩ + (μA_t/2 + γ_t)‖w‖²/2 + A_t h(w)``.

    Completing the square gives ``P_W(prox_{(A_t/c) h}((γ_t w0 − z)/c))`` with
    ``c = μA_t/2 + γ_t`` and ``γ_t = L α_t``; ``W`` is the ℓ2 ball of ``radius`` (or the
    whole space). ``prox(v, step)`` is the (counted) prox of h on a block; ``z`` is a block.
    """
    a_t = _like(weight_sum(t, weights), z)
    gamma = _like(smoothness * weight(t, weights), z)
    c = 0.5 * strong_convexity * a_t + gamma
    w = prox((gamma * w0 - z) / c, a_t / c)
    if radius is None:
        return w
    xp = namespace(w)
    ndim = w.ndim - 1
    norms = model_norm(w, ndim)
    scale = radius / xp.maximum(norms, radius)
    return expand_to(scale, w.ndim) * w


class ServerState(NamedTuple):
    w0: Array         # the initial point (every Prox_t needs it)
    g: Array          # Σ_k π_k g^k: weighted sum of gradients
    w_tilde: Array    # Σ_k π_k w̃^k before the server adds α_{t_r} w_{t_r}
    w: Array          # server model w_{t_r}
    w_avg: Array      # Σ_r α_{t_r} w_{t_r} / Σ_r α_{t_r}: the weighted average of server models
    weight_total: Array


class ClientState(NamedTuple):
    w0: Array  # the initial point (a setup constant every Prox_t needs; never communicated)


class Message(NamedTuple):
    g: Array
    w_tilde: Array


class Upload(NamedTuple):
    g: Array
    w_tilde: Array


def max_client_smoothness(problem: Any) -> float:
    """``max_i L_i``: the largest client smoothness constant (each client reports its own once).

    What ``smoothness="auto"`` resolves to: ``setup.client_smoothness().max()`` of the run's
    :class:`~fedcomp.algorithms._base.SetupContext`.
    """
    return float(setup_context(problem).client_smoothness().max())


def fast_fedda(smoothness: float | str = "auto", strong_convexity: float = 0.0,
               local_steps: int = 10,
               radius: float | None = None, weights: str = "increasing", output: str = "last",
               iterate_sum: str = "paired", order: str = "gradient_first"
               ) -> FederatedAlgorithm:
    """Fast-FedDA (Bao et al. 2022, Algorithm 1).

    Parameters
    ----------
    smoothness : float or "auto", default "auto"
        ``L`` in ``γ_t = L α_t``. It must bound every client's local smoothness (not only
        the global one), or the local steps of heterogeneous clients diverge; ``"auto"``
        uses the largest client constant ``max_i L_i`` (:func:`max_client_smoothness`).
    strong_convexity : float, default 0.0
        ``μ``, a lower bound on the strong convexity of f (from the data, or a ridge).
        The method is for strongly convex objectives: with ``μ = 0`` and several local
        steps it stalls under client heterogeneity (see Notes).
    local_steps : int, default 10
        ``E``: local steps per round; round r covers the global steps ``t = rE..(r+1)E−1``.
    radius : float, optional
        Radius of the ℓ2-ball domain ``W`` (the whole space by default).
    weights : {"increasing", "uniform"}, default "increasing"
        ``α_t = t + 1`` (the paper: Algorithm 1, line 2, and Theorem 2.1) or ``α_t = 1``
        (as run: Bao et al.'s MATLAB, ``LassoRun.m`` lines 159-162 and 170-172,
        ``NuclearRun.m`` lines 118-121 and 134-136, which divide the sums by the step count
        ``(r−1)K + k``; that division scales the Prox_t objective and leaves its argmin
        unchanged). With ``"uniform"``, ``γ_t = L α_t = L`` is constant per local step:
        the reading of Appendix F's "L = 550" that the code runs (``gamma = 550``,
        ``LassoRun.m`` line 138, ``NuclearRun.m`` line 101).
    output : {"last", "average"}, default "last"
        Evaluate the last server model, or the α-weighted average of the server models,
        ``Σ_r α_{t_r} w_{t_r} / Σ_r α_{t_r}`` over the round ends ``t_r = (r+1)E``. The
        server can only average the round-end server iterates it computes, not the
        iterates of every local step t that the theorem's average runs over (those exist
        only on the clients, one per client, between communications).
    iterate_sum : {"paired", "every_prox"}, default "paired"
        Which points the running sum ``w̃`` of past iterates holds. ``"paired"`` (the
        paper, Algorithm 1, lines 9 and 16): exactly the points whose gradients are in
        ``g`` — ``w_0``, the server models and the local iterates before a round's last
        step, where a client computes no Prox. ``"every_prox"`` (as run: Bao et al.'s
        MATLAB, ``LassoRun.m`` lines 154-164): every point a Prox produces, so each client
        also computes ``w = Prox_t(g − μw̃/2)`` at its last step ``t`` and adds
        ``α_{t+1} w`` to ``w̃`` before uploading it (line 163); that point gets no
        gradient, and it enters the server's Prox of the same round (lines 168-172) and
        every later one. The server model enters ``w̃`` under both readings (line 177; the
        paper's line 16).
    order : {"gradient_first", "prox_first"}, default "gradient_first"
        ``"gradient_first"`` (the paper, Algorithm 1, lines 6-9, and ``LassoRun.m``
        lines 156-162): a local step takes the gradient at the current point, then the
        Prox; round r's first gradient is at the server model. ``"prox_first"`` (as run:
        Bao et al.'s ``NuclearRun.m`` lines 117-126): a local step first moves to
        ``w = Prox_t(g − μw̃/2)`` of the gradients so far (``t = rE + k``, so A_t counts
        one more term than g holds), then adds ``∇f_k(w; ξ)`` to ``g`` and ``w`` to
        ``w̃``; every local point gets a gradient and the server models get none (line 116
        is overwritten at line 121). The code runs it only with uniform weights and every
        Prox output in the sum, so it needs ``weights="uniform"`` and
        ``iterate_sum="every_prox"``; neither source pairs it with increasing weights.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Client k, steps t of round r: ``g ← g + α_t ∇f_k(w; ξ)``; unless t is the round's last
    step, ``w ← Prox_t(g − μ w̃/2)`` and ``w̃ ← w̃ + α_{t+1} w`` (:func:`prox_t`). Upload
    ``g`` and ``w̃`` (2d floats). Server: averages both, ``w = Prox_{t−1}(ḡ − μ w̃̄/2)`` at
    ``t = t_{r+1}``, and broadcasts ``ḡ`` and ``w̃̄`` (2d floats); each client recomputes the
    same ``w`` from them (one extra client prox per round) and sets ``w̃ = w̃̄ + α_t w``, the
    synchronisation of Algorithm 1, line 17. ``w̃_0 = α_0 w_0``, ``g_{−1} = 0``.

    **Rate needs μ > 0.** With exact gradients the error to x* falls like 1/T only when
    ``μ > 0``. Measured on Bao et al.'s sparse regression reduced to 8 clients × 64
    samples, p = 50, s = 10, λ = 0.1 (client constants L_i from 26 to 73, f 0.23-strongly
    convex), full gradients and participation, E = 10: with ``μ = 0.1`` the error at 4T is
    0.257× (T = 500) and 0.255× (T = 1000) the error at T, as 1/T predicts (0.25); with
    ``μ = 0`` the same runs stall at a client-drift floor near 6e-3 relative error, ratios
    0.71 and 0.89. Why: with ``μ = 0``, ``c = γ_t = Lα_t`` and the newest gradient enters
    ``w`` with the constant step ``α_t/c = 1/L``, so each round's E local steps drift
    towards the client's own minimiser as FedDA's do; the ``μA_t/2`` term makes that step
    about ``4/(μt)`` and the drift decays. Tested in ``tests/algorithms/test_fast_fedda.py``.

    **As run.** The defaults are the paper's equations. The authors' MATLAB
    (github.com/MingruiLiu-ML-Lab/Federated-Sparse-Learning) made Figs. 1-2 with
    ``weights="uniform", iterate_sum="every_prox"`` (``LassoRun.m``), plus
    ``order="prox_first"`` (``NuclearRun.m``), ``smoothness=550``, ``strong_convexity=0.1``
    and a random start ``x0 = randn`` (``simulate(x0=...)``; ``LassoRun.m`` line 44,
    ``NuclearRun.m`` line 35; ``EmnistRun.m`` starts from zeros, ``gamma = 25``).
    Tested in ``tests/papers/test_bao_readings.py``.

    Examples
    --------
    >>> fast_fedda(smoothness=2.0, strong_convexity=0.1).hyperparameters["weights"]
    'increasing'
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(fast_fedda(local_steps=2)):.3f}")  # F after 20 rounds; min 0.241
    0.244
    """
    if smoothness != "auto":
        check_positive("fast_fedda", smoothness=smoothness)
    check_local_steps("fast_fedda", local_steps)
    if not strong_convexity >= 0:
        raise ValueError(f"fast_fedda: strong_convexity must be >= 0 (got {strong_convexity!r})")
    if radius is not None:
        check_positive("fast_fedda", radius=radius)
    if weights not in ("increasing", "uniform"):
        raise ValueError(f"fast_fedda: weights must be 'increasing' or 'uniform' (got {weights!r})")
    if output not in ("last", "average"):
        raise ValueError(f"fast_fedda: output must be 'last' or 'average' (got {output!r})")
    if iterate_sum not in ITERATE_SUMS:
        raise ValueError(f"fast_fedda: iterate_sum must be one of {ITERATE_SUMS} "
                         f"(got {iterate_sum!r})")
    if order not in ORDERS:
        raise ValueError(f"fast_fedda: order must be one of {ORDERS} (got {order!r})")
    if order == "prox_first" and (weights, iterate_sum) != ("uniform", "every_prox"):
        raise ValueError(f"fast_fedda: order='prox_first' is NuclearRun.m's reading and is "
                         f"defined only with weights='uniform' and iterate_sum='every_prox' "
                         f"(got weights={weights!r}, iterate_sum={iterate_sum!r}); set both")
    hyperparameters = dict(smoothness=smoothness, strong_convexity=strong_convexity,
                           local_steps=local_steps, radius=radius, weights=weights,
                           output=output, iterate_sum=iterate_sum, order=order)

    if smoothness == "auto":  # a placeholder until the runner prepares it

        def resolve(setup: SetupContext) -> FederatedAlgorithm:
            resolved = fast_fedda(float(setup.client_smoothness().max()), strong_convexity,
                                  local_steps, radius, weights, output, iterate_sum, order)
            return resolved.prepare(setup) or resolved

        return placeholder("fast_fedda", hyperparameters, resolve,
                           "or pass a number for smoothness")
    lipschitz = float(smoothness)
    mu, big_e = strong_convexity, local_steps

    def p_t(z: Array, w0: Array, t: int, prox: Any) -> Array:
        return prox_t(z, w0, t, prox, lipschitz, mu, radius, weights)

    def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
        xp = namespace(x0)
        zero = xp.zeros_like(x0)
        # round 0 starts from w_0 with w̃_0 = α_0 w_0; the server message is (0, 0) and
        # clients special-case r = 0 (there is no Prox_{−1})
        count = xp.zeros((), dtype=x0.dtype, device=device_of(x0))
        return (ServerState(x0, zero, zero, x0, x0, count),
                ClientState(replicate(x0, n_clients)))

    def broadcast(state: ServerState) -> Message:
        return Message(state.g, state.w_tilde)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        size = ctx.oracle.size
        start = ctx.round * big_e
        w0 = states.w0
        if ctx.round == 0:
            w = w0
            w_tilde = weight(0, weights) * w0
            g = replicate(msg.g, size)
        else:
            g = replicate(msg.g, size)
            w = p_t(g - 0.5 * mu * msg.w_tilde, w0, start - 1, ctx.prox)
            w_tilde = msg.w_tilde + _like(weight(start, weights), w) * w
        # the global step t = rE + k counts from the round's start (traced under jax.jit,
        # so the loop runs over k, a Python integer)
        if order == "prox_first":  # NuclearRun.m: the server model w gets no gradient
            for k in range(big_e):
                w = p_t(g - 0.5 * mu * w_tilde, w0, start + k, ctx.prox)
                g = g + ctx.oracle.grad(w)  # α_t = 1: prox_first needs uniform weights
                w_tilde = w_tilde + w
            return Upload(g, w_tilde), states
        # "paired" skips the last step's Prox (its point would get no gradient);
        # "every_prox" computes it and adds it to w̃ (LassoRun.m, lines 162-163)
        proxes = big_e - (1 if iterate_sum == "paired" else 0)
        for k in range(big_e):
            t = start + k
            g = g + _like(weight(t, weights), g) * ctx.oracle.grad(w)
            if k < proxes:
                w = p_t(g - 0.5 * mu * w_tilde, w0, t, ctx.prox)
                w_tilde = w_tilde + _like(weight(t + 1, weights), w) * w
        return Upload(g, w_tilde), states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        g = average(uploads.g, ctx.weights)
        w_tilde = average(uploads.w_tilde, ctx.weights)
        t_next = (ctx.round + 1) * big_e

        def block_prox(v: Array, step: Any) -> Array:  # the server's prox on a block of one
            return ctx.prox(v[0, ...], step)[None, ...]

        w = p_t((g - 0.5 * mu * w_tilde)[None, ...], state.w0[None, ...], t_next - 1,
                block_prox)[0, ...]
        alpha = _like(weight(t_next, weights), state.weight_total)
        total = state.weight_total + alpha
        w_avg = state.w_avg + (alpha / total) * (w - state.w_avg)
        return ServerState(state.w0, g, w_tilde, w, w_avg, total)

    def prepare(setup: SetupContext) -> None:
        reg = setup.regularizer
        if not reg.convex:
            raise ValueError("fast_fedda needs a convex regularizer (its prox parameter A_t/c "
                             f"grows with t); got the weakly convex {type(reg).__name__}")
        if radius is not None and type(reg).__name__ not in BALL_COMPATIBLE:
            raise ValueError(
                f"fast_fedda: with an l2-ball domain the prox is exact only for "
                f"{BALL_COMPATIBLE} (got {type(reg).__name__}); drop radius or use one of them")

    return FederatedAlgorithm(
        name="fast_fedda", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update,
        output=(lambda state: state.w) if output == "last" else (lambda state: state.w_avg),
        hyperparameters=hyperparameters, prepare=prepare,
        divergence_hint=(f"raise smoothness (L={lipschitz:g}): L must bound every client's "
                         "local smoothness, not only the global one (smoothness='auto' uses "
                         "the largest client constant)"))


def placeholder(name: str, hyperparameters: dict[str, Any],
                prepare: Callable[[SetupContext], FederatedAlgorithm], fix: str = ""
                ) -> FederatedAlgorithm:
    """An algorithm whose constants come from the problem: every function but ``prepare``
    raises until ``algorithm = algorithm.prepare(setup)`` resolves them.

    ``prepare`` must record the resolved values in the returned algorithm's
    ``hyperparameters``, so that rebuilding it by name from them (a Flower node does) and
    preparing it on any part of the data gives the same algorithm.
    """
    def needs_setup(*args: Any) -> Any:
        raise RuntimeError(f"{name} must be set up with a problem first: "
                           f"algorithm = algorithm.prepare(fedcomp.runtime.setup_context("
                           f"problem))"
                           f" (fedcomp.simulate and the Flower nodes do)"
                           f"{'; ' + fix if fix else ''}")

    return FederatedAlgorithm(
        name=name, init=needs_setup, broadcast=needs_setup, client_update=needs_setup,
        server_update=needs_setup, output=needs_setup, hyperparameters=hyperparameters,
        prepare=prepare)
