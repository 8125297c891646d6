"""The decentralized algorithm interface: pure functions over node states, gossip by ``mix``.

A decentralized algorithm has no server: ``n`` nodes each keep a state (stacked on axis 0)
and talk only to their graph neighbours through a gossip matrix ``U``. The runner
(:func:`fedcomp.runtime.simulate_decentralized`) owns execution and calls, per round:

``local_update(states_block, ctx) -> states_block``
    The local work (gradient steps) of a *block* of B nodes; data only through
    ``ctx.grad`` (counted), so blocks change speed, never results.
``gossip(states, mix, round) -> states``
    The communication of the round on *all* nodes: ``mix(v)`` returns ``Uᵀ v`` over the node
    axis (node m receives ``Σ_j u_jm v_j``); the runner counts the floats each call sends,
    and their bits at the dtype's width, or ``mix(v, row_bits)`` for a compressed message
    of ``row_bits`` per node (a compressor's :meth:`~fedcomp.compressors.Compressor.row_bits`).
``after_gossip(states, prox) -> states`` (optional; ``None`` for most)
    Local work of *all* nodes on what they received, before the round's models are
    evaluated: ``prox(v, step)`` is ``prox_{step·g}`` of each row (counted), e.g. the
    soft-threshold DFedMiD's authors apply to the mixed models. Proxes only: gradients
    belong to ``local_update``.
``second_update(states_block, ctx) -> states_block`` and ``second_gossip(states, mix, round)``
    (optional; ``None`` for most) A second exchange in the same round, for an algorithm
    whose step communicates twice with local work between (DProxSGT mixes its gradient
    tracker, takes the prox step, then mixes the models): the local work of each block on
    what the first gossip delivered (``ctx.prox``, compression keyed by ``ctx.oracle.seed``;
    no gradients: they belong to ``local_update``), then the second mixing of all nodes.

and, once, ``prepare(setup)`` with the problem's :class:`~fedcomp.algorithms._base.SetupContext`
(as for a federated algorithm: raises what cannot run, returns the algorithm with
problem-derived defaults resolved, or ``None`` to run it as is), then
``init(x0, ctx, mix) -> states`` with a context over all nodes (some algorithms query
gradients at ``x0``, e.g. the tracker initialisation of DFedDA-GT).
``output(states) -> (n, *shape)`` gives every node's model; the runner evaluates their
average, one node, and the min/mean/max over nodes.

Node ``i`` minimises ``n·π_i·f_i``: ``ctx.grad`` scales each node's gradient by ``n·π_i``,
so ``(1/n) Σ_i n π_i f_i = Σ_i π_i f_i`` is the same weighted objective the federated
algorithms minimise (the scale is exactly 1 under uniform weights).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from .._array import Array
from ..oracle import Oracle
from ._base import STEP_HINT, SetupContext, _ready, algorithm_repr


class NodeContext(NamedTuple):
    """What a block of nodes may use in ``local_update`` (and ``init``).

    Attributes
    ----------
    grad : callable
        ``grad(w)`` — each node's (minibatch) gradient of ``n·π_i·f_i`` at its model
        ``w (B, ...)``; counted.
    oracle : Oracle
        The underlying data oracle of the block (unscaled gradients).
    prox : callable
        ``prox(v, step)`` — ``prox_{step·g}`` of each row of ``v (B, ...)``; counted.
    round : int
        The communication round ``r`` (0-based; ``init`` sees ``round = -1``).
    node_ids : numpy int array, shape (B,)
    n_nodes : int
    """

    grad: Callable[[Array], Array]
    oracle: Oracle
    prox: Callable[[Array, Any], Array]
    round: int
    node_ids: np.ndarray
    n_nodes: int


class DecentralizedAlgorithm(NamedTuple):
    """A gossip algorithm over a graph (see the module docstring for the contract)."""

    name: str
    init: Callable[[Array, NodeContext, Callable[[Array], Array]], Any]
    local_update: Callable[[Any, NodeContext], Any]
    gossip: Callable[[Any, Callable[[Array], Array], int], Any]
    output: Callable[[Any], Array]
    hyperparameters: dict[str, Any]
    prepare: Callable[[SetupContext], DecentralizedAlgorithm | None] = _ready
    divergence_hint: str = STEP_HINT
    #: ``after_gossip(states, prox) -> states``: the nodes' prox of what they received
    after_gossip: Callable[[Any, Callable[[Array, Any], Array]], Any] | None = None
    #: ``second_update(states_block, ctx)``, then ``second_gossip(states, mix, round)``: a
    #: second exchange of the round (both set, or neither)
    second_update: Callable[[Any, NodeContext], Any] | None = None
    second_gossip: Callable[[Any, Callable[[Array], Array], int], Any] | None = None

    def __repr__(self) -> str:
        return algorithm_repr(self)
