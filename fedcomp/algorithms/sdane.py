"""S-DANE and Acc-S-DANE with the prox of ``g``: stabilised proximal-point local problems.

Jiang, Rodomanov, Stich, "Stabilized Proximal-Point Methods for Federated Optimization"
(S-DANE, Acc-S-DANE), NeurIPS 2024, arXiv 2407.07084; official code ``mlolab/S-DANE``,
``src/optimizers/sdane.py`` (read line by line for this implementation; the notes below
say which of its options this follows). Each iteration:

1. every client sends ``∇f_i(y)`` at the prox centre ``y`` (``v`` without acceleration); the
   server returns the average ``ḡ``, so that client i has the control variate
   ``h_i = ∇f_i(y) − ḡ``;
2. every client solves the doubly regularised local problem

       min_x  f_i(x) − ⟨h_i, x⟩ + g(x) + (λ/2) ‖x − y‖²

   approximately, ``local_steps`` steps from ``y``, each the code's implicit step with the
   prox of ``g`` after it:
   ``x ← prox_{σ g}((h_i − ∇f_i(x) + x/η + λ y) / (1/η + λ))``, ``σ = 1/(1/η + λ)``;
   and uploads ``x_i`` and ``∇f_i(x_i)``;
3. the server averages them into ``x`` and ``g_x`` and moves the dual point
   ``v ← prox_{c g}((μ a x + B v − a g_x) / (μ a + B))`` with ``c = a/(μ a + B)``: without
   acceleration ``a = 1/λ`` and ``B = 1``; with it ``a`` solves ``λ = (A + a) B / a²``,
   then ``A ← A + a``, ``B ← B + μ a``, and the next centre is
   ``y = A/(A + a') x + a'/(A + a') v``.

With ``g = 0`` every step is the official code's (no stopping criterion, no adaptive λ,
full gradients, every client), which ``tests/algorithms/test_sdane.py`` checks against a NumPy
transcription of it to 1e-12. ``g`` enters through the two proxes, which reduce to the
identity at ``g = 0``; at the solution ``x*`` of ``f + g`` every local problem is solved
by ``x*`` and the dual step keeps ``v = x*``.

One iteration is two communication rounds here (the gradient exchange, then the local
solve), counted as two rounds. The broadcast carries ``y``, ``ḡ`` and the round's phase
every round (``ḡ`` is read in the local-solve round only), and ``floats_down`` counts
them all.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from .._array import Array, asarray_like, expand_to, namespace, to_numpy
from ._base import (
    ClientContext,
    EmptyState,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    check_flag,
    check_local_steps,
    check_positive,
    replicate,
    require_full_participation,
)
from ._steps import repeat_local_steps

#: Rounds of one S-DANE iteration: the gradient exchange at the centre, then the local solve
#: (the official code's x-axis counts the two as one;
#: ``fedcomp.experiments.claims.sdane_polyhedron``).
ROUNDS_PER_ITERATION = 2


class ServerState(NamedTuple):
    x: Array          # the average of the clients' local solutions (the output)
    v: Array          # the dual point
    y: Array          # the prox centre of the next local problems
    grad_mean: Array  # ḡ, the clients' mean gradient at y (after a gradient round)
    A: Array          # Acc-S-DANE's weights (0-d, the models' dtype)
    B: Array
    phase: Array      # 1: the next round solves the local problems; 0: gradients at y


class Message(NamedTuple):
    y: Array
    grad_mean: Array  # read in a local-solve round only
    phase: Array


class GradientUpload(NamedTuple):
    grad: Array


class SolutionUpload(NamedTuple):
    x: Array
    grad: Array


def acceleration_step(A: Array, B: Array, lam: float) -> Array:
    """``a`` with ``λ = (A + a) B / a²`` (Acc-S-DANE; the official code's ``update_a``).

    Examples
    --------
    >>> float(acceleration_step(0.0, 1.0, 2.0))  # A = 0: a = B / λ
    0.5
    """
    return B / (2 * lam) + namespace(B).sqrt(B ** 2 / (4 * lam ** 2) + A * B / lam)


def _solves(state: Any) -> bool:
    """Whether this round solves the local problems (the phase of a server state or a
    message, read on the host)."""
    return bool(to_numpy(state.phase) > 0.5)


def sdane(lam: float = 1.0, local_steps: int = 10, local_lr: float = 0.1, mu: float = 0.0,
          accelerated: bool = False) -> FederatedAlgorithm:
    """S-DANE (or Acc-S-DANE with ``accelerated=True``) with the prox of ``g``.

    Parameters
    ----------
    lam : float, default 1.0
        ``λ > 0``, the local problems' proximal weight (the code's ``lambda_reguriz``).
    local_steps : int, default 10
        Steps of the local solver per iteration (the code's ``nb_local_steps`` with its
        stopping criterion off).
    local_lr : float, default 0.1
        ``η``, the local solver's step (the code's ``lr``, constant rule).
    mu : float, default 0.0
        ``μ ≥ 0``, the strong convexity the dual step assumes (the code's ``mu``).
    accelerated : bool, default False
        Acc-S-DANE: the centre ``y`` mixes ``x`` and ``v`` with the growing weights ``A``.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    See the module docstring for the update. Rounds alternate: one exchanges gradients at
    the centre, the next solves the local problems and moves ``x`` and ``v``. Every client
    takes part in every round (the code's adaptive λ and its partial participation are
    not implemented). The code weights client i's gradient by ``n · n_i / N`` and averages
    uniformly; here by ``n · π_i``, which is the same for ``weighting = "samples"``.

    Examples
    --------
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(sdane(lam=1.0, local_steps=5, local_lr=0.1), rounds=20):.3f}")
    0.241
    """
    check_positive("sdane", lam=lam, local_lr=local_lr)
    check_local_steps("sdane", local_steps)
    if not (isinstance(mu, int | float) and not isinstance(mu, bool) and 0 <= mu < math.inf):
        raise ValueError(f"sdane: mu must be a finite number >= 0 (got mu={mu!r})")
    check_flag("sdane", accelerated=accelerated)
    sigma = 1.0 / (1.0 / local_lr + lam)  # the local step's prox parameter

    def init(x0: Array, n_clients: int) -> tuple[ServerState, EmptyState]:
        zero, one = asarray_like(0.0, x0), asarray_like(1.0, x0)
        return ServerState(x0, x0, x0, 0.0 * x0, zero, one, zero), EmptyState()

    def broadcast(state: ServerState) -> Message:
        return Message(state.y, state.grad_mean, state.phase)

    def scaled_grad(ctx: ClientContext, x: Array) -> Array:
        # f_i weighted as the code weights it: n π_i ∇f_i (π_i = 1/n: the plain gradient)
        scale = expand_to(ctx.weights * ctx.n_clients, x.ndim)
        return scale * ctx.oracle.grad(x)

    def client_update(msg: Any, states: Any, ctx: ClientContext) -> tuple[Any, Any]:
        y = replicate(msg.y, ctx.oracle.size)
        if not _solves(msg):  # the gradient exchange at the centre
            return GradientUpload(scaled_grad(ctx, y)), states
        h = scaled_grad(ctx, y) - msg.grad_mean[None, ...]

        def step(_: int, x: Array) -> Array:
            return ctx.prox((h - scaled_grad(ctx, x) + x / local_lr + lam * y)
                            / (1.0 / local_lr + lam), sigma)

        x = repeat_local_steps(ctx, local_steps, step, y)
        return SolutionUpload(x, scaled_grad(ctx, x)), states

    def mean(values: Array) -> Array:
        return namespace(values).sum(values, axis=0) / values.shape[0]

    def server_update(state: ServerState, uploads: Any, ctx: ServerContext) -> ServerState:
        if not _solves(state):
            return state._replace(grad_mean=mean(uploads.grad), phase=state.phase * 0 + 1)
        x, g = mean(uploads.x), mean(uploads.grad)
        A, B = state.A, state.B
        a = acceleration_step(A, B, lam) if accelerated else 1.0 / lam
        denominator = mu * a + B
        v = ctx.prox((mu * a * x + B * state.v - a * g) / denominator, a / denominator)
        if not accelerated:
            return ServerState(x, v, v, state.grad_mean, A, B, state.phase * 0)
        A, B = A + a, B + mu * a
        a_next = acceleration_step(A, B, lam)
        y = (A / (A + a_next)) * x + (a_next / (A + a_next)) * v
        return ServerState(x, v, y, state.grad_mean, A, B, state.phase * 0)

    def prepare(setup: SetupContext) -> FederatedAlgorithm | None:
        require_full_participation("sdane")(setup)
        return None

    return FederatedAlgorithm(
        name="sdane", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update,
        output=lambda state: state.x,
        hyperparameters=dict(lam=lam, local_steps=local_steps, local_lr=local_lr, mu=mu,
                             accelerated=accelerated),
        prepare=prepare,
        divergence_hint="try a smaller local_lr or a larger lam")


__all__ = ["ROUNDS_PER_ITERATION", "acceleration_step", "sdane"]
