"""The decentralized (gossip) simulator.

Per round: every node runs its local steps (nodes in blocks, exactly like the clients of
:func:`fedcomp.runtime.simulate`), then the algorithm's ``gossip`` mixes the stacked node
states with the topology's matrix (a second exchange, ``second_update`` then
``second_gossip``, follows where the algorithm has one; its ``after_gossip``, if any,
applies the nodes' proxes to what they received). Randomness is keyed by
``(seed, round, node_id, draw)``, so results never depend on the block size. Evaluations
report each metric on the node average (plain names), on one node (``node<i>_`` prefix; the
authors' code evaluates node 0), and as min/mean/max over nodes (``_min``/``_mean``/
``_max`` suffixes), plus the consensus error ``(1/n) Σ_i ‖w_i − w̄‖₂²``; with ``sparsity``
every metric is also reported on the top-s sparsified model (``_sparse`` suffix):
``Sparse(w̄; s)`` for the node average, ``Sparse(w_i; s)`` for the per-node variants.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._array import (
    Array,
    asarray_like,
    bit_width,
    namespace,
    quiet_overflow,
    to_numpy,
    wait_for,
)
from ..algorithms._base import setup_context
from ..algorithms._decentralized import DecentralizedAlgorithm, NodeContext
from ..algorithms._mirror import check_sparsity, top_s
from ..metrics import DEFAULT_METRICS, evaluate
from ..oracle import Counters, Oracle
from ..problem import Problem
from ..topology import Topology
from ._checks import check_divergence, check_run_args, norm_limit_of
from ._clients import client_blocks, concat_uploads, gather_states
from ._recording import Recorder
from ._round import counted_prox
from ._simulate import RunResult, resolve_block_size
from ._stopping import NonFiniteError, RunView, StopRule

#: Oracle round key of the initialisation queries: -1, distinct from every real round and
#: the key of the federated runners' warm-up round, so DFedDA-GT's c⁰ on the complete graph
#: draws the samples of FedDA-GT's (tracker_init="gradient") warm-up.
INIT_ROUND = -1

EVALUATE_ON = ("average", "node", "nodes")


def consensus_error(models: Array) -> float:
    """``(1/n) Σ_i ‖w_i − w̄‖₂²`` of node models stacked on axis 0."""
    w = np.asarray(to_numpy(models), dtype=np.float64).reshape(models.shape[0], -1)
    return float(np.mean(np.sum((w - w.mean(axis=0)) ** 2, axis=1)))


def _node_rows(problem: Problem, models: Array, metrics: Sequence[Any], reference: Any,
               evaluate_on: Sequence[str], node: int, sparsity: int | None) -> dict[str, Any]:
    xp = namespace(models)
    row: dict[str, Any] = {}
    mean = xp.mean(models, axis=0)
    # (suffix, node models, node average); "_sparse" is Sparse(·; s) of each evaluated model:
    # the average's is the top-s of w̄, not the mean of the sparsified nodes (up to n·s nonzeros)
    variants = [("", models, mean)]
    if sparsity is not None:
        variants.append(("_sparse", top_s(models, sparsity),
                         top_s(xp.expand_dims(mean, axis=0), sparsity)[0, ...]))
    for suffix, block, avg in variants:
        if "average" in evaluate_on:
            row.update({k + suffix: v for k, v in
                        evaluate(problem, avg, metrics, reference).items()})
        if "node" in evaluate_on:
            row.update({f"node{node}_{k}{suffix}": v for k, v in
                        evaluate(problem, block[node, ...], metrics, reference).items()})
        if "nodes" in evaluate_on:
            per = [evaluate(problem, block[i, ...], metrics, reference)
                   for i in range(block.shape[0])]
            for k in per[0]:
                vals = np.array([r[k] for r in per], dtype=np.float64)
                row[f"{k}{suffix}_min"] = float(vals.min())
                row[f"{k}{suffix}_mean"] = float(vals.mean())
                row[f"{k}{suffix}_max"] = float(vals.max())
    row["consensus_error"] = consensus_error(models)
    return row


@quiet_overflow
def simulate_decentralized(
    algorithm: DecentralizedAlgorithm,
    problem: Problem,
    topology: Topology,
    rounds: int,
    *,
    x0: Any = None,
    batch_size: int | None = None,
    node_block: Any = "auto",
    eval_every: int = 1,
    metrics: Sequence[Any] = DEFAULT_METRICS,
    evaluate_on: Sequence[str] = ("average",),
    node: int = 0,
    sparsity: int | None = None,
    reference: Any = None,
    logger: Any = None,
    seed: int = 0,
    progress: Any = "auto",
    tags: dict[str, Any] | None = None,
    max_norm: float | None = 1e12,
    sparse_mixing: Any = "auto",
    tol: float | None = None,
    stop: str = "relative_prox_step",
    callbacks: Any = None,
    on_divergence: str = "return",
) -> RunResult:
    """Run a decentralized algorithm over a graph, nodes vectorised in blocks.

    Parameters
    ----------
    algorithm : DecentralizedAlgorithm
    problem : Problem
        Its clients are the nodes; node i minimises ``n·π_i·f_i``.
    topology : Topology
        The graph and its gossip matrix (``topology.n_nodes == problem.n_clients``).
    rounds : int
        Communication (gossip) rounds ``R``.
    x0 : array, optional
        Initial model of every node (``problem.initial_model()``: zeros, or a network's
        seeded initial parameters).
    batch_size : int, optional
        Minibatch size of every gradient call (``None`` = full local gradients). With a
        problem that has a ``sampler``, minibatches are fresh samples (streaming).
    node_block : "auto", "all" or int, default "auto"
        Nodes per vectorised block of the local phase (results do not depend on it).
    eval_every : int, default 1
    metrics : sequence of str or callable
        See :mod:`fedcomp.metrics`.
    evaluate_on : sequence of {"average", "node", "nodes"}, default ("average",)
        Where metrics are evaluated: the node average (plain names), node ``node``
        (``node<i>_`` prefix), min/mean/max over all nodes (suffixes).
    node : int, default 0
        The node of ``evaluate_on="node"``.
    sparsity : int, optional
        Also evaluate the top-``s`` sparsified models (``_sparse`` suffix): the top-``s`` of
        the node average (at most ``s`` nonzeros, not the mean of the sparsified nodes) and
        of each evaluated node. A positive integer.
    reference, logger, seed, progress, tags, max_norm
        As in :func:`fedcomp.runtime.simulate`.
    sparse_mixing : "auto" or bool
        Gossip by neighbour gathers (sparse graphs) or one dense product.
    tol, stop, callbacks, on_divergence
        As in :func:`~fedcomp.runtime.simulate`, the measure taken at the node average; a
        callback's :class:`RunView` has the node models as ``model`` and the node states
        as ``client_states``.

    Returns
    -------
    RunResult
        ``x`` is the node average; ``client_states`` the final node states;
        ``server_state`` is None. ``counters.floats_up`` counts the floats every node sends
        to its neighbours (``floats_down`` what they receive: the same); ``bits_up`` /
        ``bits_down`` the same at the bit width of the dtype.

    Notes
    -----
    On jax arrays (``backend = "jax"`` or ``"jax-float32"``) this runner is not compiled:
    the local phase, the gossip and the evaluations run eagerly, operation by operation, on
    the jax arrays (all nodes in one block by default), with NumPy's iterates and counters
    to rounding (``tests/engines/test_jax_runners.py``); only :func:`~fedcomp.runtime.simulate`
    traces its rounds with ``jax.jit``. NumPy is the faster backend here.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import ClientData
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import L1
    >>> from fedcomp.algorithms import dfedda_gt
    >>> from fedcomp.topology import ring
    >>> rng = np.random.default_rng(0)
    >>> data = ClientData.from_lists([rng.normal(size=(20, 3)) for _ in range(4)],
    ...                              [rng.normal(size=20) for _ in range(4)])
    >>> run = simulate_decentralized(dfedda_gt(client_lr=0.05, p=2.0),
    ...                              Problem(LeastSquares(), L1(0.0), data), ring(4), rounds=2)
    >>> [row["round"] for row in run.history]
    [0, 1, 2]
    """
    check_run_args(problem, rounds, None, batch_size, eval_every, seed)
    if not isinstance(topology, Topology):
        raise TypeError(f"topology must be a fedcomp.topology.Topology (got "
                        f"{type(topology).__name__}); build one with e.g. topology.chain(n)")
    if topology.n_nodes != problem.n_clients:
        raise ValueError(f"the topology has {topology.n_nodes} nodes but the problem has "
                         f"{problem.n_clients} clients; build the graph with "
                         f"n_nodes={problem.n_clients}")
    bad = sorted(set(evaluate_on) - set(EVALUATE_ON))
    if bad:
        raise ValueError(f"evaluate_on: unknown {bad}; valid: {EVALUATE_ON}")
    if not 0 <= node < problem.n_clients:
        raise ValueError(f"node must be in 0..{problem.n_clients - 1} (got {node})")
    check_sparsity("simulate_decentralized", sparsity)
    algorithm = algorithm.prepare(setup_context(problem)) or algorithm
    norm_limit = norm_limit_of(max_norm)
    block_size = resolve_block_size(node_block, problem, batch_size)
    n = problem.n_clients
    x = problem.start_model(x0)
    like = problem.data.like
    counters = Counters()
    regularizer = problem.regularizer
    # node i minimises n·π_i·f_i, so that (1/n)Σ_i of the node objectives is Σ_i π_i f_i
    scale_all = n * problem.weights
    uniform = bool(np.allclose(scale_all, 1.0, rtol=0, atol=1e-15))
    base_mix = topology.mixer(x, sparse_mixing)
    edges = topology.n_edges

    def mix(v: Array, row_bits: int | None = None) -> Array:
        floats = int(np.prod(v.shape[1:])) * edges
        # a compressed message's encoded size (the same for every node) replaces the width
        bits = floats * bit_width(v) if row_bits is None else int(row_bits) * edges
        counters.floats_up += floats
        counters.floats_down += floats
        counters.bits_up += bits
        counters.bits_down += bits
        return base_mix(v)

    prox, _ = counted_prox(regularizer, counters)

    def context(clients: Any, round_: int) -> NodeContext:
        oracle = Oracle(problem, clients, INIT_ROUND if round_ < 0 else round_, seed,
                        batch_size, counters)
        grad: Callable[[Array], Array] = oracle.grad
        if not uniform:
            scale = asarray_like(scale_all[oracle.client_ids], like)
            shape = (len(oracle.client_ids),) + (1,) * len(problem.param_shape)
            scale = namespace(like).reshape(scale, shape)

            def scaled(w: Array) -> Array:
                return scale * oracle.grad(w)

            grad = scaled

        return NodeContext(grad, oracle, prox, round_, oracle.client_ids, n)

    states = algorithm.init(x, context(slice(0, n), -1), mix)
    recorder = Recorder(
        problem, rounds, eval_every=eval_every, metrics=metrics, reference=reference,
        logger=logger, tags=tags, progress=progress, label=algorithm.name,
        evaluation=lambda models: _node_rows(problem, models, metrics, reference, evaluate_on,
                                             node, sparsity))
    rule = StopRule(problem, tol, stop, callbacks, on_divergence,
                    hint=algorithm.divergence_hint)
    wall = 0.0

    def record(round_: int, models: Array) -> bool:
        """The row of ``round_``; whether the run stops there."""
        average = namespace(models).mean(models, axis=0)
        row = recorder.record(round_, models, counters, wall, **rule.columns(average))
        return rule.after_row(RunView(round_, row, models, None, states, counters,
                                      recorder.history, algorithm.name))

    stopped = record(0, algorithm.output(states))
    everyone = np.arange(n)
    done = 0
    for r in range(rounds):
        if stopped:
            break
        tic = time.perf_counter()
        parts = [algorithm.local_update(gather_states(states, block), context(block, r))
                 for block in client_blocks(everyone, block_size)]
        states = algorithm.gossip(concat_uploads(parts), mix, r)
        if algorithm.second_gossip is not None and algorithm.second_update is not None:
            parts = [algorithm.second_update(gather_states(states, block), context(block, r))
                     for block in client_blocks(everyone, block_size)]
            states = algorithm.second_gossip(concat_uploads(parts), mix, r)
        if algorithm.after_gossip is not None:
            states = algorithm.after_gossip(states, prox)
        wait_for(like, states)  # the GPU's queued round, not its dispatch
        wall += time.perf_counter() - tic
        models = algorithm.output(states)
        done = r + 1
        try:
            check_divergence(models, norm_limit * np.sqrt(n), algorithm, recorder.tags,
                             f"in round {r + 1}", what="the node models")
        except NonFiniteError as exc:
            rule.diverged(exc)
            break
        if recorder.due(r + 1):
            stopped = record(r + 1, models)
        recorder.progress(r + 1)
    rule.finish(recorder.tags.get("algorithm", algorithm.name), done)
    final = namespace(x).mean(algorithm.output(states), axis=0)
    return RunResult(final, recorder.history, None, states, counters, rule.status, done)
