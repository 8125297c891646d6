"""Fed-HT and FedIter-HT: federated iterative hard thresholding for ℓ0-constrained learning.

References
----------
Tong, Q., Liang, G., Zhu, T., Bi, J. "Federated Nonconvex Sparse Learning." arXiv:2101.00052,
2020 (Algorithms 1 and 2); journal version: Tong, Q., Liang, G., Ding, J., Zhu, T., Pan, M.,
Bi, J. "Federated Optimization of ℓ0-norm Regularized Sparse Learning." Algorithms 15(9),
319, 2022.
"""

from __future__ import annotations

from typing import NamedTuple

from .._array import Array
from ._base import (
    ClientContext,
    EmptyState,
    FederatedAlgorithm,
    ServerContext,
    average,
    check_local_steps,
    check_positive,
    replicate,
)
from ._steps import repeat_local_steps
from .fedmid import Message, ServerState


class Upload(NamedTuple):
    #: the local model ``x_{t,K}^i`` itself, as the paper's clients send it (so that with
    #: one client the server's average is that model exactly)
    y: Array


def fed_ht(client_lr: float = 0.01, local_steps: int = 5) -> FederatedAlgorithm:
    """Fed-HT: local SGD, then the server hard-thresholds the average of the local models.

    Parameters
    ----------
    client_lr : float, default 0.01
        Local step ``γ`` (constant; the paper's ``γ_t`` with a constant schedule).
    local_steps : int, default 5
        ``K`` local SGD steps per round.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    For ``min_x Σ_i p_i f_i(x)`` s.t. ``‖x‖₀ ≤ τ``, with the regularizer
    ``l0_ball(sparsity=τ)`` (Tong et al., Algorithm 1)::

        client i ∈ S:  y ← x_t;  K times  y ← y − γ ∇f_i(y; ξ)        upload y = x_{t,K}^i
        server:        x_{t+1} = H_τ(Σ_{i∈S} p̃_i x_{t,K}^i)

    ``H_τ`` keeps the τ largest-magnitude entries: the counted ``ctx.prox`` of ``l0_ball``
    (ties to the lower flat index). With ``l0(alpha)`` instead (fedcomp's extension, an ℓ0
    penalty rather than a constraint), the server prox is the hard threshold
    ``prox_{Kγ·alpha‖·‖₀}``, the step ``Kγ`` being FedMiD's scaled server step. With any
    other regularizer the same updates run with its prox in place of ``H_τ``: then they are
    FedAvg's with the server prox (``fedavg(server_prox=True)``, up to rounding), no longer
    hard thresholding; they are allowed so that the algorithm meets the same contracts as
    every other (any regularizer, backend, block size).

    With full gradients and ``K = 1`` the server step is ``H_τ(x − γ∇f(x))`` up to
    rounding: centralized IHT (the paper's Distributed-IHT baseline). The paper proves
    linear convergence to a neighbourhood of the τ-sparse optimum under restricted strong
    convexity/smoothness and ``τ`` large enough relative to the true sparsity; this
    implementation does not check those conditions.

    Written from the paper's abstract and the summary of its two algorithms in the Flower
    baseline's README (flwrlabs/flower, ``baselines/fedht``: where each applies ``H_τ``);
    the paper's full text could not be read here, so its step-size schedule and any
    sparsity level of the local thresholds other than ``τ`` are not reproduced.

    Examples
    --------
    >>> fed_ht(client_lr=0.1, local_steps=3).hyperparameters
    {'client_lr': 0.1, 'local_steps': 3}
    """
    return _hard_thresholding("fed_ht", client_lr, local_steps, client_threshold=False)


def fediter_ht(client_lr: float = 0.01, local_steps: int = 5) -> FederatedAlgorithm:
    """FedIter-HT: every local SGD step is hard-thresholded too, and so is the average.

    Parameters
    ----------
    client_lr : float, default 0.01
        Local step ``γ``; also the prox step of the client thresholds for ``l0``.
    local_steps : int, default 5
        ``K``.

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    Tong et al., Algorithm 2, with ``l0_ball(sparsity=τ)``::

        client i ∈ S:  y ← x_t;  K times  y ← H_τ(y − γ ∇f_i(y; ξ))    upload y
        server:        x_{t+1} = H_τ(Σ_{i∈S} p̃_i y_i)

    Local models stay τ-sparse, so uploads are sparse (the paper's bandwidth argument);
    their average has up to ``|S|·τ`` nonzeros, which the server's ``H_τ`` cuts back. With
    ``l0(alpha)`` the thresholds are ``prox_{γ·alpha‖·‖₀}`` on the clients and
    ``prox_{Kγ·alpha‖·‖₀}`` on the server (fedcomp's extension, as in :func:`fed_ht`); with
    another regularizer, its prox (FedMiD's updates with ``server_lr = 1``).

    With **one** client and ``K = 1`` FedIter-HT equals Fed-HT bit for bit: the server's
    average of one model is that model, and ``H_τ(H_τ(v)) = H_τ(v)``. With several clients
    it does not, even at ``K = 1``: the average of thresholded models is not the average of
    the models (``test_hard_thresholding.py`` checks both).

    Examples
    --------
    >>> fediter_ht(client_lr=0.1, local_steps=3).name
    'fediter_ht'
    """
    return _hard_thresholding("fediter_ht", client_lr, local_steps, client_threshold=True)


def _hard_thresholding(name: str, client_lr: float, local_steps: int, *,
                       client_threshold: bool) -> FederatedAlgorithm:
    """Local SGD (each step thresholded when ``client_threshold``), then ``H(average)``."""
    check_positive(name, client_lr=client_lr)
    check_local_steps(name, local_steps)
    server_step = local_steps * client_lr

    def init(x0: Array, n_clients: int) -> tuple[ServerState, EmptyState]:
        return ServerState(x0), EmptyState()

    def client_update(msg: Message, states: EmptyState, ctx: ClientContext
                      ) -> tuple[Upload, EmptyState]:
        def step(_: int, y: Array) -> Array:
            y = y - client_lr * ctx.oracle.grad(y)
            return ctx.prox(y, client_lr) if client_threshold else y

        return Upload(repeat_local_steps(ctx, local_steps, step,
                                         replicate(msg.x, ctx.oracle.size))), states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        return ServerState(ctx.prox(average(uploads.y, ctx.weights), server_step))

    return FederatedAlgorithm(
        name=name, init=init, broadcast=lambda state: Message(state.x),
        client_update=client_update, server_update=server_update,
        output=lambda state: state.x,
        hyperparameters=dict(client_lr=client_lr, local_steps=local_steps))
