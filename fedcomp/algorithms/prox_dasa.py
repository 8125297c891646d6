"""Prox-DASA and Prox-DASA-GT: decentralized proximal averaged stochastic approximation.

References
----------
Xiao, T., Chen, X., Balasubramanian, K., Ghadimi, S. "A One-Sample Decentralized Proximal
Algorithm for Non-Convex Stochastic Composite Optimization." UAI 2023, arXiv:2302.09766.
Official code: github.com/xuxingc/ProxDASA (PyTorch + MPI, ``methods/proxdasa.py`` and
``methods/proxdasagt.py``), read line by line for the notes below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from .._array import Array, namespace
from ._base import check_positive, check_prox_steps, replicate
from ._decentralized import DecentralizedAlgorithm, NodeContext

#: ``α_k`` from the rate ``a``, round ``k`` (0-based) and ``n`` nodes. "diminishing" is
#: ``proxdasa.py``'s ``min(a√(n/(k+1)), 1)``; "diminishing_gt" is ``proxdasagt.py``'s
#: ``a·min(√(n/(k+1)), 1)``, which is not capped at 1 when ``a > 1`` (their MNIST runs: a = 3).
SCHEDULES: dict[str, Callable[[float, int, int], float]] = {
    "constant": lambda a, k, n: a,
    "diminishing": lambda a, k, n: min(a * math.sqrt(n / (k + 1)), 1.0),
    "diminishing_gt": lambda a, k, n: a * min(math.sqrt(n / (k + 1)), 1.0),
}
AVERAGE_OF = ("tracker", "gradient")


class AveragedState(NamedTuple):
    x: Array  # x_i^k: the node's model
    z: Array  # z_i^k: the moving average of its gradients (zero at k = 0)


class TrackedState(NamedTuple):
    x: Array     # x_i^k
    z: Array     # z_i^k: the moving average of the tracked gradients
    u: Array     # u_i^k: the gradient tracker (after its mixing)
    grad: Array  # v_i^{k−1}: the previous stochastic gradient (the initial one at k = 0)


def _check(owner: str, client_lr: Any, averaging_rate: Any, schedule: Any,
           gossip_rounds: Any) -> None:
    check_positive(owner, client_lr=client_lr, averaging_rate=averaging_rate)
    if schedule not in SCHEDULES:
        raise ValueError(f"{owner}: schedule must be one of {tuple(SCHEDULES)} "
                         f"(got {schedule!r})")
    if schedule == "constant" and averaging_rate > 1:
        raise ValueError(f"{owner}: a constant averaging_rate is a weight in (0, 1] (got "
                         f"averaging_rate={averaging_rate!r}); the paper's choice is "
                         f"sqrt(n_nodes / rounds)")
    if not (isinstance(gossip_rounds, int) and not isinstance(gossip_rounds, bool)
            and gossip_rounds >= 1):
        raise ValueError(f"{owner}: gossip_rounds must be an integer >= 1 "
                         f"(got {gossip_rounds!r})")


def _averaged_step(x: Array, z: Array, ctx: NodeContext, client_lr: float,
                   rate: float) -> tuple[Array, Array]:
    """``((1 − α) x + α y, v)``: the model moved towards its prox point ``y``, and the
    round's stochastic gradient at the model the round started from."""
    y = ctx.prox(x - client_lr * z, client_lr)
    return (1.0 - rate) * x + rate * y, ctx.grad(x)


def _gossip(states: Any, mix: Callable[[Array], Array], rounds: int) -> Any:
    """Every field but the previous gradient mixed ``rounds`` times (``W^m``)."""
    mixed = dict(states._asdict())
    for name in mixed:
        if name != "grad":
            for _ in range(rounds):
                mixed[name] = mix(mixed[name])
    return type(states)(**mixed)


def prox_dasa(client_lr: float = 0.1, averaging_rate: float = 0.1,
              schedule: str = "constant", gossip_rounds: int = 1) -> DecentralizedAlgorithm:
    """Prox-DASA: a prox point of a moving-average gradient, moving averages of both, gossip.

    Parameters
    ----------
    client_lr : float, default 0.1
        ``η = 1/β``, the prox parameter of the step (the paper's β is its inverse; the
        authors' ``--lr``, with the caveat on their gradient scale in the Notes).
    averaging_rate : float, default 0.1
        ``a`` of the schedule of ``α_k``, the weight of the new point in both moving averages
        (``α = 1`` keeps no memory: prox-gradient with gossip). Constant: in ``(0, 1]``; the
        paper's theory takes ``α = √(n/K)`` for ``K`` iterations (the authors' ``constant``
        step: ``alpha_base·√(n/K)``).
    schedule : {"constant", "diminishing", "diminishing_gt"}, default "constant"
        ``α_k = a``; ``min(a√(n/(k+1)), 1)`` (``proxdasa.py``'s ``diminishing``, the one its
        README runs); or ``a·min(√(n/(k+1)), 1)`` (``proxdasagt.py``'s, above 1 for ``a > 1``).
    gossip_rounds : int, default 1
        ``m``: the gossip matrix is applied m times a round (the authors' ``--comm_round``,
        1 in every run of their README).

    Returns
    -------
    DecentralizedAlgorithm

    Notes
    -----
    Node i, round k, from ``x_i^0 = x0`` and ``z_i^0 = 0``::

        y_i^k       = prox_{η g}(x_i^k − η z_i^k)
        v_i^k       = ∇F_i(x_i^k; ξ_i^k)                     (one minibatch, at x_i^k)
        x_i^{k+1}   = Σ_j w_ij [(1 − α_k) x_j^k + α_k y_j^k]
        z_i^{k+1}   = Σ_j w_ij [(1 − α_k) z_j^k + α_k v_j^k]

    ``Σ_j w_ij`` applied ``m`` times; x and z travel in one exchange. The gradient estimate
    ``z`` is a consensus moving average of the one-sample gradients, and ``x`` moves a
    fraction ``α_k`` towards the prox point: one sample a node a round, no large batches.
    With ``n = 1`` (or ``W = J``, the complete graph, and full gradients) the step is the
    centralized single-time-scale method the paper decentralizes.

    The official code (``methods/proxdasa.py``) runs this update; where it differs:

    * its gradient is that of ``loss/n`` (``get_grads``: ``(1/num_nodes)·NLLLoss``), so its
      ``(lr, l1)`` is fedcomp's ``client_lr = lr/n`` with ``L1(n·l1)``: it minimises
      ``f + n·l1‖·‖₁`` while its reported stationarity is that of ``f + l1‖·‖₁``;
    * it sends and receives float32 (``numpy.float32`` buffers); fedcomp keeps the dtype;
    * a gradient is one minibatch of the node's shard, drawn afresh at every call (a new
      ``DataLoader`` iterator over a ``SubsetRandomSampler``): fedcomp's ``batch_size``;
    * its ``constant`` step needs the iteration count (``alpha_base·√(n/K)``): give that
      number as ``averaging_rate``;
    * each node starts from its own initial weights (``init_weights/…/rank{i}``); fedcomp
      starts every node at ``x0``;
    * it reports the consensus violation ``Σ_i ‖x_i − x̄‖²`` (fedcomp's ``consensus_error``
      is the mean, ``1/n`` of it), the stationarity ``‖x̄ − prox_g(x̄ − ∇f(x̄))‖²`` (the
      ``prox_grad_norm`` metric at step 1, squared) and the share of ``|x̄_j| > 1e-6``
      (``nnz`` counts exact nonzeros, as a prox output has).

    References
    ----------
    Xiao, Chen, Balasubramanian, Ghadimi, UAI 2023, arXiv:2302.09766.

    Examples
    --------
    >>> prox_dasa(client_lr=0.5, averaging_rate=0.5).hyperparameters["schedule"]
    'constant'
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(prox_dasa(client_lr=0.5, averaging_rate=0.5)):.3f}")  # min 0.241
    0.241
    """
    owner = "prox_dasa"
    _check(owner, client_lr, averaging_rate, schedule, gossip_rounds)
    rate_of = SCHEDULES[schedule]

    def init(x0: Array, ctx: NodeContext, mix: Callable[[Array], Array]) -> AveragedState:
        x = replicate(x0, ctx.n_nodes) + 0.0
        return AveragedState(x, namespace(x).zeros_like(x))

    def local_update(states: AveragedState, ctx: NodeContext) -> AveragedState:
        rate = rate_of(averaging_rate, ctx.round, ctx.n_nodes)
        x, grad = _averaged_step(states.x, states.z, ctx, client_lr, rate)
        return AveragedState(x, (1.0 - rate) * states.z + rate * grad)

    def gossip(states: AveragedState, mix: Callable[[Array], Array],
               round_: int) -> AveragedState:
        return _gossip(states, mix, gossip_rounds)

    return DecentralizedAlgorithm(
        name=owner, init=init, local_update=local_update, gossip=gossip,
        output=lambda s: s.x,
        hyperparameters=dict(client_lr=client_lr, averaging_rate=averaging_rate,
                             schedule=schedule, gossip_rounds=gossip_rounds),
        prepare=check_prox_steps(owner, client_lr, "lower client_lr"))


def prox_dasa_gt(client_lr: float = 0.1, averaging_rate: float = 0.1,
                 schedule: str = "constant", gossip_rounds: int = 1,
                 average_of: str = "tracker") -> DecentralizedAlgorithm:
    """Prox-DASA-GT: :func:`prox_dasa` whose moving average is fed by a gradient tracker.

    Parameters
    ----------
    client_lr, averaging_rate, schedule, gossip_rounds
        As in :func:`prox_dasa`.
    average_of : {"tracker", "gradient"}, default "tracker"
        What enters the moving average ``z``: the tracker ``u`` (gradient tracking, the
        paper's purpose for it), or the node's own gradient, as ``proxdasagt.py`` does (its
        ``U`` is updated and mixed but never read: its iterates are Prox-DASA's).

    Returns
    -------
    DecentralizedAlgorithm

    Notes
    -----
    Node i, round k, from ``x_i^0 = x0``, ``z_i^0 = 0`` and ``u_i^0 = v_i^{−1} =
    ∇F_i(x0; ξ_i^{−1})`` (one minibatch drawn before the first round)::

        y_i^k       = prox_{η g}(x_i^k − η z_i^k)
        v_i^k       = ∇F_i(x_i^k; ξ_i^k)
        u_i^{k+1/2} = u_i^k + v_i^k − v_i^{k−1}
        x_i^{k+1}   = Σ_j w_ij [(1 − α_k) x_j^k + α_k y_j^k]
        z_i^{k+1}   = Σ_j w_ij [(1 − α_k) z_j^k + α_k u_j^{k+1/2}]
        u_i^{k+1}   = Σ_j w_ij u_j^{k+1/2}

    (``average_of="gradient"``: ``v_j^k`` in place of ``u_j^{k+1/2}`` in z.) x, z and u
    travel in one exchange (``m`` times). The tracker keeps ``Σ_i u_i^{k+1/2} = Σ_i v_i^k``
    (W doubly stochastic), so each node averages an estimate of the network's gradient, not
    its own: with full gradients and a constant ``α`` every node reaches a stationary point
    of ``(1/n) Σ_i f_i + g``, where Prox-DASA stops at a distance set by the heterogeneity.

    The official code (``methods/proxdasagt.py``) differs from this update in the ways listed
    in :func:`prox_dasa` and in two more:

    * ``Z`` averages the raw gradient ``grads`` (``average_of="gradient"``), so its ``U``
      (updated, mixed with x and z, and sent: three vectors a round) changes no iterate;
    * its diminishing schedule is ``alpha_base·min(√(n/(k+1)), 1)``
      (``schedule="diminishing_gt"``); the initial gradient is drawn from the first
      minibatch of the node's loader, as here from round ``−1``'s draw.

    References
    ----------
    Xiao, Chen, Balasubramanian, Ghadimi, UAI 2023, arXiv:2302.09766.

    Examples
    --------
    >>> prox_dasa_gt().hyperparameters["average_of"]
    'tracker'
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(prox_dasa_gt(client_lr=0.5, averaging_rate=0.5)):.3f}")
    0.241
    """
    owner = "prox_dasa_gt"
    _check(owner, client_lr, averaging_rate, schedule, gossip_rounds)
    if average_of not in AVERAGE_OF:
        raise ValueError(f"{owner}: average_of must be one of {AVERAGE_OF} "
                         f"(got {average_of!r})")
    rate_of = SCHEDULES[schedule]

    def init(x0: Array, ctx: NodeContext, mix: Callable[[Array], Array]) -> TrackedState:
        x = replicate(x0, ctx.n_nodes) + 0.0
        grad = ctx.grad(x)  # v^{−1}: the tracker starts at the node's own gradient
        return TrackedState(x, namespace(x).zeros_like(x), grad, grad)

    def local_update(states: TrackedState, ctx: NodeContext) -> TrackedState:
        rate = rate_of(averaging_rate, ctx.round, ctx.n_nodes)
        x, grad = _averaged_step(states.x, states.z, ctx, client_lr, rate)
        u = states.u + grad - states.grad
        fed = u if average_of == "tracker" else grad
        return TrackedState(x, (1.0 - rate) * states.z + rate * fed, u, grad)

    def gossip(states: TrackedState, mix: Callable[[Array], Array],
               round_: int) -> TrackedState:
        return _gossip(states, mix, gossip_rounds)

    return DecentralizedAlgorithm(
        name=owner, init=init, local_update=local_update, gossip=gossip,
        output=lambda s: s.x,
        hyperparameters=dict(client_lr=client_lr, averaging_rate=averaging_rate,
                             schedule=schedule, gossip_rounds=gossip_rounds,
                             average_of=average_of),
        prepare=check_prox_steps(owner, client_lr, "lower client_lr"))


__all__ = ["prox_dasa", "prox_dasa_gt"]
