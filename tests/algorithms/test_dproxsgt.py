"""DProxSGT and CDProxSGT (Yan, Chen, Chen, Cui, Lu, Xu, ICML 2023): parity with the authors'
code, the paper's reductions, and convergence where the paper's analysis applies."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import ClientData, Problem, simulate
from fedcomp.algorithms import cdproxsgt, dproxsgt, fedavg
from fedcomp.losses import LeastSquares
from fedcomp.reference import solve_reference
from fedcomp.regularizers import L1
from fedcomp.runtime import simulate_decentralized
from fedcomp.topology import chain, complete, ring

N, M, D = 3, 12, 5  # nodes, samples per node, dimension
LR, L1_STRENGTH = 0.2, 0.05


def node_data(seed=0):
    """Heterogeneous least squares on N nodes: (features (N, M, D), targets (N, M))."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=(N, M, D)) + 0.5 * np.arange(N)[:, None, None]
    b = np.einsum("nmd,nd->nm", a, rng.normal(size=(N, D))) + 0.1 * rng.normal(size=(N, M))
    return a, b


def problem_of(a, b, strength):
    data = ClientData.from_lists(list(a), list(b))
    return Problem(LeastSquares(), L1(strength), data)


def run(alg, problem, topo, rounds, **kw):
    return simulate_decentralized(alg, problem, topo, rounds, metrics=[], **kw)


# --- the authors' code, transcribed ---------------------------------------------------------
# What yonggui-yan/DProxSGT runs per node and iteration, written over all nodes at once:
# node i's "average over peers" is row i of the gossip matrix W (their ring's 1/3 weights is
# fedcomp's ring; here a chain, whose weights differ across nodes, so a wrong index shows).
# Gradients are the full local ones (deterministic), ½-mean-squared-residual least squares.


def local_gradients(x, a, b):
    return np.einsum("nmd,nm->nd", a, np.einsum("nmd,nd->nm", a, x) - b) / a.shape[1]


def clipped(grad, max_norm=10.0):
    """``nn.utils.clip_grad_norm_(…, 10)`` of each node's gradient (inactive on this data)."""
    norm = np.linalg.norm(grad, axis=1, keepdims=True)
    return grad * np.minimum(1.0, max_norm / (norm + 1e-6))


def soft_threshold(v, t):
    return np.maximum(np.abs(v) - t, 0.0) * np.sign(v)  # their prox_Norm1(model, l1*lr)


def code_dproxsgt(x, a, b, w, iterations, lr, l1, mixed):
    """``train_DProxSGT``: RegL1_FMNIST/core.py (``mixed=False``: the step uses ``yy``) or
    Compress_FMNIST/core_compress.py (``mixed=True``: ``param.grad.copy_(yr)``), both with the
    RegL1 prox after ``optimizer.step()``."""
    yy, yr, grad_last = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    for _ in range(iterations):
        grad = clipped(local_gradients(x, a, b))
        yy = yr + (grad - grad_last)
        grad_last = grad.copy()
        yr = w @ yy  # bsend(yy) to the peers, average what is received
        direction = yr if mixed else yy
        x = x - lr * direction  # optimizer.step(): plain SGD, lr constant
        x = soft_threshold(x, l1 * lr)
        x = x + 1.0 * (w @ x - x)  # ws + gamma_x (ws_received − ws), gamma_x = 1
    return x


def top_k(v, k):
    """``TopKCompressor``: the k entries of largest magnitude of each node's row."""
    out = np.zeros_like(v)
    idx = np.argsort(-np.abs(v), axis=1)[:, :k]
    np.put_along_axis(out, idx, np.take_along_axis(v, idx, axis=1), axis=1)
    return out


def code_cdproxsgt(x, a, b, w, iterations, lr, l1, k, gamma_x, gamma_y):
    """``train_CDProxSGT`` of Compress_FMNIST/core_compress.py (its runs have l1 = 0; with
    l1 > 0 the RegL1 prox follows ``optimizer.step()``, Algorithm 2's prox step)."""
    ws_copy, ws_mean_copy = np.zeros_like(x), np.zeros_like(x)
    yy, yy_copy, yy_mean_copy = np.zeros_like(x), np.zeros_like(x), np.zeros_like(x)
    grad_last = np.zeros_like(x)
    for _ in range(iterations):
        grad = clipped(local_gradients(x, a, b))
        yy = yy + (grad - grad_last)  # y^{t+0.5}
        grad_last = grad.copy()
        q = top_k(yy - yy_copy, k)
        yy_copy = yy_copy + q
        yy_mean_copy = yy_mean_copy + w @ q
        yy = yy + gamma_y * (yy_mean_copy - yy_copy)
        x = x - lr * yy
        x = soft_threshold(x, l1 * lr)
        q = top_k(x - ws_copy, k)
        ws_copy = ws_copy + q
        ws_mean_copy = ws_mean_copy + w @ q
        x = x + gamma_x * (ws_mean_copy - ws_copy)
    return x


@pytest.mark.parametrize("tracker", ["mixed", "unmixed"])
def test_dproxsgt_equals_the_authors_code(tracker):
    a, b = node_data()
    topo = chain(N)
    mixing = np.asarray(topo.mixing)
    x0 = np.zeros((N, D))
    # the clip never fires on this data: the code's step is the paper's here
    assert np.linalg.norm(local_gradients(x0, a, b), axis=1).max() < 10
    expect = code_dproxsgt(x0, a, b, mixing.T, 3, LR, L1_STRENGTH, tracker == "mixed")
    got = run(dproxsgt(LR, tracker=tracker), problem_of(a, b, L1_STRENGTH), topo, 3)
    nodes = np.asarray(got.client_states.x)
    np.testing.assert_allclose(nodes, expect, rtol=0, atol=1e-12)
    assert np.abs(expect - expect.mean(axis=0)).max() > 1e-3  # the nodes really disagree
    smooth = code_dproxsgt(x0, a, b, mixing.T, 3, LR, 0.0, tracker == "mixed")
    assert np.abs(expect - smooth).max() > 1e-2  # and the prox really acts


def test_the_two_trackers_differ():
    # the l1 experiments' code (unmixed) is not the paper's update (mixed)
    a, b = node_data()
    mixing = np.asarray(chain(N).mixing).T
    x0 = np.zeros((N, D))
    mixed = code_dproxsgt(x0, a, b, mixing, 3, LR, L1_STRENGTH, True)
    unmixed = code_dproxsgt(x0, a, b, mixing, 3, LR, L1_STRENGTH, False)
    assert np.abs(mixed - unmixed).max() > 1e-2


@pytest.mark.parametrize("strength", [0.0, L1_STRENGTH], ids=["as-run", "with-prox"])
def test_cdproxsgt_equals_the_authors_code(strength):
    a, b = node_data(1)
    topo = chain(N)
    k = 2  # of D = 5 entries
    expect = code_cdproxsgt(np.zeros((N, D)), a, b, np.asarray(topo.mixing).T, 3, LR,
                            strength, k, gamma_x=0.5, gamma_y=0.7)
    alg = cdproxsgt(LR, codec_x={"name": "top_k", "k": k}, codec_y={"name": "top_k", "k": k},
                    gamma_x=0.5, gamma_y=0.7)
    got = np.asarray(run(alg, problem_of(a, b, strength), topo, 3).client_states.x)
    np.testing.assert_allclose(got, expect, rtol=0, atol=1e-12)
    assert np.abs(expect - expect.mean(axis=0)).max() > 1e-3


# --- the paper's reductions -----------------------------------------------------------------


@pytest.mark.parametrize("batch_size", [None, 4])
def test_identity_codec_with_unit_consensus_steps_is_dproxsgt(batch_size):
    a, b = node_data(2)
    problem = problem_of(a, b, L1_STRENGTH)
    identity = {"name": "identity"}
    compressed = cdproxsgt(LR, codec_x=identity, codec_y=identity, gamma_x=1.0, gamma_y=1.0)
    kw = dict(batch_size=batch_size, seed=3)
    got = run(compressed, problem, chain(N), 6, **kw)
    plain = run(dproxsgt(LR), problem, chain(N), 6, **kw)
    np.testing.assert_allclose(np.asarray(got.client_states.x),
                               np.asarray(plain.client_states.x), rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.asarray(got.client_states.y),
                               np.asarray(plain.client_states.y), rtol=0, atol=1e-12)


@pytest.mark.parametrize("batch_size", [None, 3])
def test_complete_graph_is_centralized_proximal_sgd(batch_size):
    """W = J: every tracker is the average gradient, so a step is the prox-SGD step of the
    average, i.e. FedAvg with one local step and the server prox."""
    a, b = node_data(4)
    problem = problem_of(a, b, L1_STRENGTH)
    dec = run(dproxsgt(LR), problem, complete(N), 5, batch_size=batch_size, seed=4)
    srv = simulate(fedavg(LR, 1, server_prox=True), problem, 5, batch_size=batch_size,
                   seed=4, metrics=[])
    np.testing.assert_allclose(np.asarray(dec.client_states.x),
                               np.broadcast_to(srv.x, (N, D)), rtol=0, atol=1e-13)
    # the code's l1 variant steps along y^{t−1/2}: not the centralized step even here
    unmixed = run(dproxsgt(LR, tracker="unmixed"), problem, complete(N), 5,
                  batch_size=batch_size, seed=4)
    assert np.abs(np.asarray(unmixed.x) - srv.x).max() > 1e-4


# --- convergence where the paper's analysis applies -----------------------------------------


@pytest.fixture(scope="module")
def lasso():
    (a1, b1), (a2, b2) = node_data(5), node_data(6)  # 6 nodes: a ring that is not complete
    problem = problem_of(np.concatenate([a1, a2]), np.concatenate([b1, b2]), 0.3)
    return problem, np.asarray(solve_reference(problem, use_cache=False).x)


@pytest.mark.parametrize("alg", [dproxsgt(0.1), dproxsgt(0.1, tracker="unmixed"),
                                 cdproxsgt(0.1, codec_x={"name": "top_k", "k": 3},
                                           codec_y={"name": "top_k", "k": 3})],
                         ids=["dproxsgt", "unmixed", "cdproxsgt-top3"])
def test_full_gradients_reach_the_lasso_solution_on_a_ring(lasso, alg):
    """With full gradients (σ = 0) the stationarity bound of Theorems 1 and 2 vanishes: every
    node reaches the (unique) solution of the convex problem, heterogeneity notwithstanding."""
    problem, x_star = lasso
    got = run(alg, problem, ring(6), 400)
    nodes = np.asarray(alg.output(got.client_states))
    error = np.abs(nodes - x_star).max()
    assert error < 1e-8, error  # measured: 4e-12 (both trackers), 1.5e-10 (top-3 of 5)
    assert np.count_nonzero(x_star) == D - 2  # the l1 term is active at the solution


def test_node_blocks_change_nothing_and_two_exchanges_are_counted():
    # the random codec is keyed by (seed, round, node), so blocks never change a draw
    a, b = node_data(3)
    problem = problem_of(a, b, L1_STRENGTH)
    alg = cdproxsgt(LR, codec_x={"name": "qsgd", "levels": 2}, codec_y={"name": "rand_k",
                                                                         "k": 2})
    runs = [run(alg, problem, chain(N), 4, batch_size=3, seed=2, node_block=block)
            for block in (1, 2, "all")]
    for other in runs[1:]:
        np.testing.assert_array_equal(other.x, runs[0].x)
    # each round mixes d floats twice (trackers, then models) over every edge, at the
    # codecs' encoded sizes: qsgd 64 + 5 x (1 + 2) bits, rand-2 (shared seed) 2 x 64 bits
    edges = chain(N).n_edges
    assert runs[0].counters.floats_up == 4 * 2 * D * edges
    assert runs[0].counters.bits_up == 4 * (64 + D * 3 + 2 * 64) * edges
    plain = run(dproxsgt(LR), problem, chain(N), 4, batch_size=3, seed=2)
    assert plain.counters.bits_up == 4 * 2 * D * 64 * edges


def test_refuses_bad_hyperparameters_with_the_fix():
    with pytest.raises(ValueError, match="tracker must be one of"):
        dproxsgt(tracker="paper")
    with pytest.raises(ValueError, match="gamma_x is a consensus step in \\(0, 1\\]"):
        cdproxsgt(gamma_x=1.5)
    with pytest.raises(ValueError, match="codec must be a table"):
        cdproxsgt(codec_y="top_k")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="client_lr must be a positive number"):
        dproxsgt(client_lr=0.0)
