"""ZA1: composite FL with decoupled prox and client-drift correction.

The algorithm of Zhang, Hu and Johansson (called "ZA1" in the FedCanon paper): workers keep
a pre-proximal and a post-proximal local model, correct their local gradients by the
difference between the global and their own previous average gradient, and the server
applies the prox to the average of the *pre-proximal* models, so the prox evaluation is
decoupled from communication.

The same update serves nonconvex losses: the journal version (Zhang, Hu, Johansson,
"Non-convex composite federated learning with heterogeneous data", arXiv 2502.03958, which
states that parts of it appeared at ICASSP 2024) keeps the algorithm — pre- and post-proximal
local models, the drift correction, one d-vector uploaded per round, the prox at the server —
and extends the analysis to a nonconvex smooth ``f`` with a convex ``g``: sublinear convergence
to a residual set by the stochastic-gradient variance and the batch size, linear under the
proximal Polyak-Łojasiewicz inequality. Only the paper's abstract and introduction could be
read here (its algorithm box could not), so fedcomp's ``za1`` follows the ICASSP Algorithm 1;
``tests/algorithms/test_za1_nonconvex.py`` checks the journal's phenomena on a loss verified
nonconvex (:class:`fedcomp.losses.Logistic` with ``nonconvex > 0``): exact stationarity at a
linear rate with full gradients, and a residual floor ``∝ 1/√b`` with minibatches of size ``b``.

References
----------
Zhang, J., Hu, J., Johansson, M. "Composite Federated Learning with Heterogeneous Data."
ICASSP 2024 (``shared/papers/seed000_*``), Algorithm 1.
Zhang, J., Hu, J., Johansson, M. "Non-convex composite federated learning with heterogeneous
data." arXiv:2502.03958 (2025).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from .._array import Array, device_of, expand_to, namespace, stacked_zeros
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    all_of,
    average,
    check_flag,
    check_local_steps,
    check_positive,
    check_prox_steps,
    replicate,
    require_full_participation,
)
from ._steps import repeat_local_steps


class ServerState(NamedTuple):
    x: Array       # pre-proximal global model x̄^r
    x_post: Array  # post-proximal global model P_{η̃ g}(x̄^r), the output


class ClientState(NamedTuple):
    anchor: Array     # P_{η̃ g}(x̄^r) the client started its last round from
    grad_mean: Array  # (1/τ) Σ_t ∇f_i(z_t; B_t) of that round
    started: Array    # 1 after the client's first round (c_i = 0 before)


class Message(NamedTuple):
    x: Array


class Upload(NamedTuple):
    z_hat: Array  # the last pre-proximal local model ẑ_{i,τ}


def za1_correction(states: ClientState, x_bar: Array, client_lr: float, server_lr: float,
                   local_steps: int) -> Array:
    """Drift correction ``c_i = (P(x̄^{r−1}) − x̄^r)/(η_g η τ) − (1/τ) Σ_t ∇f_i(z_t^{r−1})``.

    ``(P(x̄^{r−1}) − x̄^r)/(η_g η τ)`` is the previous round's global average gradient, so
    ``Σ_i π_i c_i = 0``; the first round uses ``c_i = 0``.
    """
    global_grad = (states.anchor - x_bar) / (server_lr * client_lr * local_steps)
    return expand_to(states.started, states.anchor.ndim) * (global_grad - states.grad_mean)


def za1(client_lr: float = 1.0, local_steps: int = 5, server_lr: float = 1.0,
        final_prox: bool = True) -> FederatedAlgorithm:
    """ZA1 (Zhang, Hu, Johansson 2024, Algorithm 1).

    Parameters
    ----------
    client_lr : float, default 1.0
        Local step ``η``.
    local_steps : int, default 5
        ``τ``.
    server_lr : float, default 1.0
        Global step ``η_g``.
    final_prox : bool, default True
        Compute ``z_τ = prox_{τη g}(ẑ_τ)`` after the last local step, as line 11 of the
        paper's Algorithm 1 does for ``t = τ − 1``. Its value is never used (the gradients
        are taken at ``z_0 .. z_{τ−1}`` and ``ẑ_τ`` is uploaded), so ``False`` skips it:
        the same iterates with one client prox fewer per round.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    With ``η̃ = η η_g τ`` and ``P = prox_{η̃ g}``, round r, worker i:

    * ``ẑ_0 = z_0 = P(x̄^r)``;
    * for t = 0..τ−1: ``ẑ_{t+1} = ẑ_t − η(∇f_i(z_t; B_t) + c_i)``,
      ``z_{t+1} = prox_{(t+1)η g}(ẑ_{t+1})``;
    * upload ``ẑ_τ`` (d floats);

    server: ``x̄^{r+1} = P(x̄^r) + η_g(Σ_i π_i ẑ_{i,τ} − P(x̄^r))``, broadcast ``x̄^{r+1}``
    (d floats); the worker then sets ``c_i`` by :func:`za1_correction`. Output ``P(x̄^R)``.

    Prox evaluations per round: each worker computes ``P(x̄^r)`` and ``z_1 .. z_τ``
    (τ + 1), the server ``P(x̄^{r+1})`` (stored, so the next round's broadcast reuses it):
    ``N(τ + 1) + 1``, the count of TABLE III of Zhou et al. (FedCanon) for ZA1. With
    ``final_prox=False`` the unused ``z_τ`` is skipped: ``Nτ + 1``. The initial
    ``P(x̄^0)``, which no message carries, is computed once, uncounted, by ``init`` with
    the exact prox of the set-up context (``prepare``). The correction term needs the
    previous global update, so ZA1 is defined for full participation only (checked before
    round 1).
    With weights π the server average is π-weighted (uniform π is the paper's 1/n).

    Examples
    --------
    >>> za1(client_lr=1.0, local_steps=5).hyperparameters
    {'client_lr': 1.0, 'local_steps': 5, 'server_lr': 1.0, 'final_prox': True}
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(za1(client_lr=0.1, local_steps=2)):.3f}")  # F after 20 rounds; min 0.241
    0.242
    """
    check_positive("za1", client_lr=client_lr, server_lr=server_lr)
    check_local_steps("za1", local_steps)
    check_flag("za1", final_prox=final_prox)
    big_step = client_lr * server_lr * local_steps  # η̃
    last_local_step = local_steps if final_prox else local_steps - 1  # largest prox_{(t+1)η g}
    checks = all_of(require_full_participation("za1"),
                    check_prox_steps("za1", max(big_step, last_local_step * client_lr),
                                     "lower client_lr, server_lr or local_steps"))

    def broadcast(state: ServerState) -> Message:
        return Message(state.x)

    def client_update(msg: Message, states: ClientState, ctx: ClientContext
                      ) -> tuple[Upload, ClientState]:
        xp = namespace(msg.x)
        correction = za1_correction(states, msg.x, client_lr, server_lr, local_steps)
        z = ctx.prox(replicate(msg.x, ctx.oracle.size), big_step)
        anchor = z

        def gradient_step(z: Array, z_hat: Array, grad_sum: Array) -> tuple[Array, Array]:
            grad = ctx.oracle.grad(z)
            return z_hat - client_lr * (grad + correction), grad_sum + grad

        def step(t: Any, carry: tuple[Array, Array, Array]) -> tuple[Array, Array, Array]:
            z_hat, grad_sum = gradient_step(*carry)
            return ctx.prox(z_hat, (t + 1) * client_lr), z_hat, grad_sum

        # z_τ is never used: the last step's prox is optional
        with_prox = local_steps if final_prox else local_steps - 1
        z, z_hat, grad_sum = repeat_local_steps(ctx, with_prox, step, (z, z, xp.zeros_like(z)))
        if not final_prox:
            z_hat, grad_sum = gradient_step(z, z_hat, grad_sum)
        new_states = ClientState(anchor, grad_sum / local_steps, xp.ones_like(states.started))
        return Upload(z_hat), new_states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        post = state.x_post
        x = post + server_lr * (average(uploads.z_hat, ctx.weights) - post)
        return ServerState(x, ctx.prox(x, big_step))

    def build(initial_prox: Callable[[Array, float], Array] | None) -> FederatedAlgorithm:
        def init(x0: Array, n_clients: int) -> tuple[ServerState, ClientState]:
            if initial_prox is None:
                raise RuntimeError("za1: prepare it with the problem's setup context before "
                                   "running it, algorithm = algorithm.prepare(fedcomp.runtime."
                                   "setup_context(problem)) (fedcomp.simulate does); the "
                                   "initial P(x0) needs the problem's regularizer")
            zeros = stacked_zeros(x0, n_clients)
            counts = namespace(x0).zeros((n_clients,), dtype=x0.dtype, device=device_of(x0))
            x_post = initial_prox(x0[None, ...], big_step)[0, ...]
            return ServerState(x0, x_post), ClientState(zeros, zeros, counts)

        def prepare(setup: SetupContext) -> FederatedAlgorithm:
            checks(setup)
            return build(setup.regularizer.prox)

        return FederatedAlgorithm(
            name="za1", init=init, broadcast=broadcast, client_update=client_update,
            server_update=server_update, output=lambda state: state.x_post,
            hyperparameters=dict(client_lr=client_lr, local_steps=local_steps,
                                 server_lr=server_lr, final_prox=bool(final_prox)),
            prepare=prepare)

    return build(None)
