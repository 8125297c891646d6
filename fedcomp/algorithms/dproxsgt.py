"""DProxSGT and CDProxSGT: decentralized proximal SGD with gradient tracking, and compressed.

References
----------
Yan, Y., Chen, J., Chen, P.-Y., Cui, X., Lu, S., Xu, Y. "Compressed Decentralized Proximal
Stochastic Gradient Method for Nonconvex Composite Problems with Heterogeneous Data." ICML
2023, arXiv:2302.14252 — Algorithm 1 (DProxSGT) and Algorithm 2 (CDProxSGT). Official code:
github.com/yonggui-yan/DProxSGT (PyTorch + MPI), read for the notes below.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

from .._array import Array, bit_width, namespace
from ..compressors import Compressor, make_compressor
from ._base import check_positive, check_prox_steps, replicate
from ._decentralized import DecentralizedAlgorithm, NodeContext

TRACKERS = ("mixed", "unmixed")
#: The authors' compressor in their run.sh: ``Top30`` (30% of the entries) for x and y.
AUTHORS_CODEC = {"name": "top_k", "fraction": 0.3}


class TrackingState(NamedTuple):
    x: Array       # x_i^t: the node's model (x_i^{t+1/2} between the two exchanges)
    y: Array       # y_i^{t-1}: the tracker after its mixing (y_i^{t-1/2} between the mixes)
    grad: Array    # ∇F_i(x_i^{t-1}; ξ_i^{t-1}): the previous stochastic gradient (0 at t = 0)


class CompressedState(NamedTuple):
    x: Array       # x_i^t (x_i^{t+1/2} between the two exchanges)
    y: Array       # y_i^{t-1} (y_i^{t-1/2} between the exchanges)
    grad: Array    # ∇F_i(x_i^{t-1}; ξ_i^{t-1})
    x_hat: Array   # x̲_i: the compressed copy of x_i its neighbours hold
    x_mix: Array   # Σ_j w_ij x̲_j, kept by adding the mixed messages (only q is sent)
    y_hat: Array   # y̲_i
    y_mix: Array   # Σ_j w_ij y̲_j
    message: Array  # q_i: the compressed difference this exchange sends


def _codec(owner: str, codec: Any) -> Compressor:
    spec: Any = AUTHORS_CODEC if codec is None else codec
    if not (isinstance(spec, dict) and isinstance(spec.get("name"), str)):
        raise ValueError(f"{owner}: a codec must be a table naming a compressor and its "
                         f"parameters, e.g. codec_x = {{name = \"top_k\", fraction = 0.3}} "
                         f"(got {codec!r})")
    return make_compressor(spec["name"], **{k: v for k, v in spec.items() if k != "name"})


def _check_gamma(owner: str, **gammas: Any) -> None:
    check_positive(owner, **gammas)
    for name, value in gammas.items():
        if value > 1:
            raise ValueError(f"{owner}: {name} is a consensus step in (0, 1] (got "
                             f"{name}={value!r}); the authors run 0.5")


def dproxsgt(client_lr: float = 0.01, tracker: str = "mixed") -> DecentralizedAlgorithm:
    """DProxSGT: proximal SGD on every node along a tracked gradient, gossip of both.

    Parameters
    ----------
    client_lr : float, default 0.01
        ``η``, the step of every node (also the prox parameter of ``g``); the authors'
        ``lr0`` on Fashion-MNIST.
    tracker : {"mixed", "unmixed"}, default "mixed"
        ``"mixed"`` (Algorithm 1; also the authors' ``Compress_*/core_compress.py``): the
        step uses the tracker after its mixing, ``y^t = W y^{t−1/2}``, so a round has two
        exchanges (the trackers, then the models). ``"unmixed"`` (as run for the paper's ℓ1
        experiments: ``RegL1_FMNIST/core.py`` lines 283–300 and ``RegL1_CIFAR10``): the step
        uses ``y^{t−1/2}`` itself, whose mixing is only kept for the next step, so the
        trackers and the models travel in one exchange.

    Returns
    -------
    DecentralizedAlgorithm

    Notes
    -----
    Node i, step t (one round), from ``y_i^{−1} = 0`` and ``∇F_i(x_i^{−1}; ξ^{−1}) = 0``::

        y_i^{t−1/2} = y_i^{t−1} + ∇F_i(x_i^t; ξ_i^t) − ∇F_i(x_i^{t−1}; ξ_i^{t−1})
        y_i^t       = Σ_j w_ij y_j^{t−1/2}                          (exchange 1)
        x_i^{t+1/2} = prox_{η g}(x_i^t − η y_i^t)
        x_i^{t+1}   = Σ_j w_ij x_j^{t+1/2}                          (exchange 2)

    The previous gradient is the one drawn at step t−1 (not recomputed on the new sample),
    so ``Σ_i y_i^t = Σ_i ∇F_i(x_i^t; ξ_i^t)`` every step (W doubly stochastic). With W = J
    (complete graph) every ``y_i^t`` is the average gradient and the step is centralized
    proximal SGD on the average of the nodes' minibatches.

    The official code (read line by line) differs from Algorithm 1 in:

    * the ℓ1 experiments (``RegL1_*``) step along ``y^{t−1/2}`` (``tracker="unmixed"``);
      their compressed experiments (``Compress_*``) step along ``y^t`` as the paper does;
    * every stochastic gradient is clipped to norm 10 over the whole model
      (``CLIP_GRAD_NORM_MAX``) before it enters the tracker; fedcomp does not clip;
    * each node's network is initialised from its own seed (``20210311 + 100·rank``, whose
      comment says the starts are meant to be equal); fedcomp starts every node at ``x0``;
    * the gossip is a ring with weight 1/3 to each neighbour and to itself, which is
      :func:`fedcomp.topology.ring`'s Metropolis matrix;
    * ``x − lr·y`` is ``torch.optim.SGD`` without momentum or weight decay, and the prox is
      the soft-threshold at ``l1·lr``: ``prox_{η g}`` for ``g = l1‖·‖₁``, as here.

    References
    ----------
    Yan, Chen, Chen, Cui, Lu, Xu, ICML 2023, Algorithm 1.

    Examples
    --------
    >>> dproxsgt(client_lr=0.1).hyperparameters
    {'client_lr': 0.1, 'tracker': 'mixed'}
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(dproxsgt(client_lr=0.1)):.3f}")  # F after 20 rounds; min 0.241
    0.251
    """
    check_positive("dproxsgt", client_lr=client_lr)
    if tracker not in TRACKERS:
        raise ValueError(f"dproxsgt: tracker must be one of {TRACKERS} (got {tracker!r})")

    def init(x0: Array, ctx: NodeContext, mix: Callable[[Array], Array]) -> TrackingState:
        x = replicate(x0, ctx.n_nodes) + 0.0
        zero = namespace(x).zeros_like(x)
        return TrackingState(x, zero, zero)

    def local_update(states: TrackingState, ctx: NodeContext) -> TrackingState:
        grad = ctx.grad(states.x)
        y_half = states.y + grad - states.grad
        if tracker == "unmixed":  # the code's step: along y^{t−1/2}, before its mixing
            x_half = ctx.prox(states.x - client_lr * y_half, client_lr)
            return TrackingState(x_half, y_half, grad)
        return TrackingState(states.x, y_half, grad)

    def gossip(states: TrackingState, mix: Callable[[Array], Array],
               round_: int) -> TrackingState:
        if tracker == "unmixed":  # one exchange: the half-step models and trackers
            return TrackingState(mix(states.x), mix(states.y), states.grad)
        return states._replace(y=mix(states.y))

    def prox_step(states: TrackingState, ctx: NodeContext) -> TrackingState:
        return states._replace(x=ctx.prox(states.x - client_lr * states.y, client_lr))

    def gossip_models(states: TrackingState, mix: Callable[[Array], Array],
                      round_: int) -> TrackingState:
        return states._replace(x=mix(states.x))

    mixed = tracker == "mixed"
    return DecentralizedAlgorithm(
        name="dproxsgt", init=init, local_update=local_update, gossip=gossip,
        output=lambda s: s.x,
        hyperparameters=dict(client_lr=client_lr, tracker=tracker),
        prepare=check_prox_steps("dproxsgt", client_lr, "lower client_lr"),
        second_update=prox_step if mixed else None,
        second_gossip=gossip_models if mixed else None)


def cdproxsgt(client_lr: float = 0.01, codec_x: dict[str, Any] | None = None,
              codec_y: dict[str, Any] | None = None, gamma_x: float = 0.5,
              gamma_y: float = 0.5) -> DecentralizedAlgorithm:
    """CDProxSGT: DProxSGT whose two exchanges send compressed differences (Choco-style).

    Parameters
    ----------
    client_lr : float, default 0.01
        ``η``, as in :func:`dproxsgt`.
    codec_x, codec_y : dict, optional
        The compressors ``Q_x`` of the models and ``Q_y`` of the trackers, tables like
        ``{"name": "top_k", "fraction": 0.3}`` (any of :mod:`fedcomp.compressors`; random
        ones are keyed by ``(seed, round, node)``); default that one, the authors' ``Top30``.
        ``{"name": "identity"}`` with ``gamma_x = gamma_y = 1`` is :func:`dproxsgt`.
    gamma_x, gamma_y : float in (0, 1], default 0.5
        The consensus step sizes ``γ_x`` and ``γ_y`` (the authors' run.sh: 0.5 each).

    Returns
    -------
    DecentralizedAlgorithm

    Notes
    -----
    Node i, step t (one round), from ``x̲_i = y̲_i = y_i^{−1} = 0`` and a zero previous
    gradient (the code's start)::

        y_i^{t−1/2} = y_i^{t−1} + ∇F_i(x_i^t; ξ_i^t) − ∇F_i(x_i^{t−1}; ξ_i^{t−1})
        y̲_i ← y̲_i + Q_y[y_i^{t−1/2} − y̲_i]                       (exchange 1 sends Q_y[·])
        y_i^t = y_i^{t−1/2} + γ_y (Σ_j w_ij y̲_j − y̲_i)
        x_i^{t+1/2} = prox_{η g}(x_i^t − η y_i^t)
        x̲_i ← x̲_i + Q_x[x_i^{t+1/2} − x̲_i]                       (exchange 2 sends Q_x[·])
        x_i^{t+1} = x_i^{t+1/2} + γ_x (Σ_j w_ij x̲_j − x̲_i)

    Each node keeps ``Σ_j w_ij x̲_j`` (and the same for y̲) by adding the mixed messages, as
    the code does: only the compressed differences travel. The runner counts d floats per
    message and its encoded size in bits (the codec's ``row_bits``).

    The official code (``Compress_FMNIST/core_compress.py``, ``train_CDProxSGT``) runs this
    update, with these differences: its compressed experiments have no regularizer (no
    prox step; ``g = 0`` here gives the same), it clips gradients to norm 10 and keeps the
    tracker in float64 (see :func:`dproxsgt`); its top-k keeps ``⌊0.3·numel⌋`` entries of
    each layer's tensor (fedcomp's ``fraction`` keeps ``⌈0.3·d⌉`` of the whole model; give
    ``k`` for an exact count), and its QSGD quantises each layer with that layer's norm
    (fedcomp's ``qsgd`` is the same quantiser on the whole model's norm).

    References
    ----------
    Yan, Chen, Chen, Cui, Lu, Xu, ICML 2023, Algorithm 2.

    Examples
    --------
    >>> cdproxsgt().hyperparameters["gamma_x"]
    0.5
    >>> from fedcomp.toy import tiny_run
    >>> print(f"{tiny_run(cdproxsgt(client_lr=0.1)):.3f}")  # F after 20 rounds; min 0.241
    0.251
    """
    owner = "cdproxsgt"
    check_positive(owner, client_lr=client_lr)
    _check_gamma(owner, gamma_x=gamma_x, gamma_y=gamma_y)
    compress_x, compress_y = _codec(owner, codec_x), _codec(owner, codec_y)

    def init(x0: Array, ctx: NodeContext, mix: Callable[[Array], Array]) -> CompressedState:
        x = replicate(x0, ctx.n_nodes) + 0.0
        zero = namespace(x).zeros_like(x)
        return CompressedState(x, zero, zero, zero, zero, zero, zero, zero)

    def compressed(v: Array, ctx: NodeContext, purpose: int, codec: Compressor) -> Array:
        # purpose keeps the two messages of a node's round on independent draws
        decoded, _ = codec.compress(v, ctx.oracle.seed, ctx.round, ctx.node_ids, purpose)
        return decoded

    def local_update(states: CompressedState, ctx: NodeContext) -> CompressedState:
        grad = ctx.grad(states.x)
        y_half = states.y + grad - states.grad
        q = compressed(y_half - states.y_hat, ctx, 0, compress_y)
        return states._replace(y=y_half, grad=grad, y_hat=states.y_hat + q, message=q)

    def sent(message: Array, codec: Compressor) -> int:
        """The encoded size of one node's message (the runner counts these bits)."""
        return codec.row_bits(math.prod(message.shape[1:]), bit_width(message))

    def gossip(states: CompressedState, mix: Callable[..., Array],
               round_: int) -> CompressedState:
        y_mix = states.y_mix + mix(states.message, sent(states.message, compress_y))
        y = states.y + gamma_y * (y_mix - states.y_hat)
        return states._replace(y=y, y_mix=y_mix)

    def prox_step(states: CompressedState, ctx: NodeContext) -> CompressedState:
        x_half = ctx.prox(states.x - client_lr * states.y, client_lr)
        q = compressed(x_half - states.x_hat, ctx, 1, compress_x)
        return states._replace(x=x_half, x_hat=states.x_hat + q, message=q)

    def gossip_models(states: CompressedState, mix: Callable[..., Array],
                      round_: int) -> CompressedState:
        x_mix = states.x_mix + mix(states.message, sent(states.message, compress_x))
        x = states.x + gamma_x * (x_mix - states.x_hat)
        return states._replace(x=x, x_mix=x_mix)

    return DecentralizedAlgorithm(
        name=owner, init=init, local_update=local_update, gossip=gossip,
        output=lambda s: s.x,
        hyperparameters=dict(client_lr=client_lr, codec_x=codec_x, codec_y=codec_y,
                             gamma_x=gamma_x, gamma_y=gamma_y),
        prepare=check_prox_steps(owner, client_lr, "lower client_lr"),
        second_update=prox_step, second_gossip=gossip_models)


__all__ = ["cdproxsgt", "dproxsgt"]
