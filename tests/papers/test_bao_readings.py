"""The two readings of Bao et al. (ICML 2022): the paper's equations and the authors' MATLAB.

Every "as run" option of ``fast_fedda``, ``c_fedda`` and ``mc_fedda`` against the formulas of
github.com/MingruiLiu-ML-Lab/Federated-Sparse-Learning, transcribed below one client and
one step at a time (the MATLAB's 1-based rounds r and steps k, its sums divided by the
step count, its ``l1_soft`` / ``nuc_prox`` / ``l1_soft_cs``): 3 clients, full gradients,
every client in every round, a random start ``x0 = randn`` as in the code. Also FedDA's
1-based counters (``fedda(counters="one_based")``) and the code's minibatches without
replacement (``Problem(minibatch="without_replacement")``). The defaults (the paper) are
checked unchanged against ``tests/_loops.py``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from fedcomp import ClientData, Problem, simulate
from fedcomp._random import minibatch_indices
from fedcomp.algorithms import c_fedda, fast_fedda, fedda, fedmid, mc_fedda
from fedcomp.losses import LeastSquares, TraceRegression
from fedcomp.regularizers import L1, Nuclear
from tests._loops import loop_c_fedda, loop_fast_fedda

K, MU, LAM = 3, 0.1, 0.05  # local steps, μ, λ


# --- the MATLAB's building blocks ---------------------------------------------------------

def l1_soft(v, t):
    """``l1_soft.m``: ``sign(v).*max(abs(v)-lambda,0)``."""
    return np.sign(v) * np.maximum(np.abs(v) - t, 0.0)


def nuc_prox(a, t):
    """``nuc_prox.m``: threshold the singular values of A at t."""
    u, s, vh = np.linalg.svd(a)
    return u @ np.diag(np.maximum(s - t, 0.0)) @ vh


def project_onto_l1_ball(v, b):
    """``ProjectOntoL1Ball.m``, line by line."""
    if np.abs(v).sum() < b:
        return v
    u = np.sort(np.abs(v))[::-1]
    sv = np.cumsum(u)
    rho = np.flatnonzero(u > (sv - b) / np.arange(1, len(u) + 1))[-1]
    theta = max(0.0, (sv[rho] - b) / (rho + 1))
    return np.sign(v) * np.maximum(np.abs(v) - theta, 0.0)


def l1_soft_cs(v, t, v0, rho, projections):
    """``l1_soft_cs.m``: soft-threshold, then project onto the ℓ1 ball around v0 if outside."""
    pr = l1_soft(v, t)
    if np.abs(pr - v0).sum() > rho:
        projections.append(1)
        pr = project_onto_l1_ball(pr - v0, rho) + v0
    return pr


# --- the problems: 3 clients, tiny d --------------------------------------------------------

def lasso_problem():
    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(8, 5)) + rng.normal(size=5) for _ in range(3)]
    w_true = np.array([1.0, 1.0, 0.0, 0.0, 0.0])
    targs = [f @ w_true + 0.5 * rng.normal(size=8) for f in feats]
    problem = Problem(LeastSquares(), L1(LAM), ClientData.from_lists(feats, targs))
    grads = [lambda w, x=x, y=y: x.T @ (x @ w - y) / len(y) for x, y in zip(feats, targs,
                                                                                 strict=True)]
    return problem, grads, l1_soft, np.random.default_rng(1).normal(size=5)


def nuclear_problem():
    rng = np.random.default_rng(2)
    w_true = np.diag([1.0, 0.0, 0.0])
    feats = [rng.normal(size=(8, 3, 3)) + rng.normal(size=(3, 3)) for _ in range(3)]
    targs = [np.einsum("jab,ab->j", f, w_true) + 0.5 * rng.normal(size=8) for f in feats]
    problem = Problem(TraceRegression(), Nuclear(LAM), ClientData.from_lists(feats, targs))

    def nuc_grad(w, x, y):  # nuc_grad.m: mean of X·(trace(X'W) − y), all samples
        return np.einsum("j,jab->ab", np.einsum("jab,ab->j", x, w) - y, x) / len(y)

    grads = [lambda w, x=x, y=y: nuc_grad(w, x, y) for x, y in zip(feats, targs, strict=True)]
    return problem, grads, nuc_prox, np.random.default_rng(3).normal(size=(3, 3))


PROBLEMS = {"lasso": lasso_problem, "nuclear": nuclear_problem}


def run(algorithm, problem, rounds, x0):
    return simulate(algorithm, problem, rounds, x0=x0, metrics=[])


# --- the MATLAB's algorithms ----------------------------------------------------------------

def matlab_fast_fedda(grads, threshold, x0, rounds, gamma, prox_first):
    """Fast-FedDA: ``LassoRun.m`` lines 137-178 (gradient, then prox) and ``NuclearRun.m``
    lines 100-142 (prox, then gradient). ``xr`` sums x0, every prox output of the clients
    (the K-th too) and the server iterates."""
    xr, wr, gr = x0.copy(), x0.copy(), np.zeros_like(x0)
    for r in range(1, rounds + 1):
        g_up, x_up = [], []
        for grad in grads:
            g_i, x_i, w_i = gr.copy(), xr.copy(), wr.copy()
            for k in range(1, K + 1):
                eta = (r - 1) * K + k
                if not prox_first:
                    g_i = g_i + grad(w_i)
                a = g_i / eta - 0.5 * MU * x_i / eta - gamma * x0 / eta
                b = 0.5 * MU + gamma / eta
                w_i = threshold(-a / b, LAM / b)
                if prox_first:
                    g_i = g_i + grad(w_i)
                x_i = x_i + w_i
            g_up.append(g_i)
            x_up.append(x_i)
        gr, xr = sum(g_up) / len(grads), sum(x_up) / len(grads)
        eta = r * K
        a = gr / eta - 0.5 * MU * xr / eta - gamma * x0 / eta
        b = 0.5 * MU + gamma / eta
        wr = threshold(-a / b, LAM / b)
        xr = xr + wr
    return wr


def matlab_c_fedda_stage(grads, threshold, x0, rounds, gamma, lam, prox_first):
    """One C-FedDA run from x0: ``LassoRun.m`` lines 184-215 (``AFedDA``), ``NuclearRun.m``
    lines 147-179 (``SFedDA``); an MC-FedDA stage (lines 233-265, 197-227) with
    ``threshold`` = ``l1_soft_cs`` around x0. ``xr`` sums x0 and the server iterates only;
    all sums are divided by rK, γ is not."""
    xr, wr, gr = x0.copy(), x0.copy(), np.zeros_like(x0)
    for r in range(1, rounds + 1):
        br = 0.5 * MU + gamma / (r * K)
        g_up = []
        for grad in grads:
            g_i, w_i = gr.copy(), wr.copy()
            for _ in range(K):
                if not prox_first:
                    g_i = g_i + grad(w_i)
                a = g_i / (r * K) - 0.5 * MU * xr / r - gamma * x0 / (r * K)
                w_i = threshold(-a / br, lam / br)
                if prox_first:
                    g_i = g_i + grad(w_i)
            g_up.append(g_i)
        gr = sum(g_up) / len(grads)
        a = gr / (r * K) - 0.5 * MU * xr / r - gamma * x0 / (r * K)
        wr = threshold(-a / br, lam / br)
        xr = xr + wr
    return wr


AS_RUN_C = dict(radius=None, weights="uniform", proximal_weight="constant", output="last")


# --- Fast-FedDA -------------------------------------------------------------------------------

@pytest.mark.parametrize("name, order", [
    ("lasso", "gradient_first"),   # LassoRun.m
    ("nuclear", "prox_first"),     # NuclearRun.m
    ("nuclear", "gradient_first"),  # the lasso's order on matrices
])
def test_fast_fedda_as_run(name, order):
    """``weights="uniform", iterate_sum="every_prox"`` (and ``order``) is the code's
    Fast-FedDA: constant γ = L per local step, each client's K-th prox in the sum."""
    problem, grads, threshold, x0 = PROBLEMS[name]()
    gamma = 20.0
    alg = fast_fedda(smoothness=gamma, strong_convexity=MU, local_steps=K, weights="uniform",
                     iterate_sum="every_prox", order=order)
    result = run(alg, problem, 2, x0)
    expected = matlab_fast_fedda(grads, threshold, x0, 2, gamma, order == "prox_first")
    np.testing.assert_allclose(result.x, expected, rtol=0, atol=1e-12)
    # each reading moves the iterates: the paper's running sum, the other order
    paired = run(fast_fedda(smoothness=gamma, strong_convexity=MU, local_steps=K,
                            weights="uniform"), problem, 2, x0)
    assert np.abs(paired.x - expected).max() > 1e-6
    other = matlab_fast_fedda(grads, threshold, x0, 2, gamma, order != "prox_first")
    assert np.abs(other - expected).max() > 1e-6


def test_fast_fedda_every_prox_with_increasing_weights_adds_the_last_local_point():
    """``iterate_sum="every_prox"`` under the paper's weights: the K-th local point enters
    w̃ with α_{t+1}, so it is the paired run with that one extra term (one round: w̃ after
    the clients is the paper's plus α_E · mean of the clients' extra Prox_{E−1} points)."""
    problem, grads, threshold, x0 = lasso_problem()
    kw = dict(smoothness=20.0, strong_convexity=MU, local_steps=K)
    every = run(fast_fedda(iterate_sum="every_prox", **kw), problem, 1, x0)
    paired = run(fast_fedda(**kw), problem, 1, x0)

    def prox_t(t, z):  # Prox_t with α_t = t + 1, γ_t = L α_t, ℓ1
        a_t, gamma = (t + 1) * (t + 2) / 2, 20.0 * (t + 1)
        c = MU * a_t / 2 + gamma
        return l1_soft((gamma * x0 - z) / c, LAM * a_t / c)

    extra = []
    for grad in grads:
        g, w, w_tilde = np.zeros_like(x0), x0.copy(), x0.copy()
        for t in range(K):
            g = g + (t + 1) * grad(w)
            w = prox_t(t, g - MU * w_tilde / 2)
            w_tilde = w_tilde + (t + 2) * w
        extra.append((K + 1) * w)  # the point of step K−1 = E − 1, weight α_E = E + 1
    np.testing.assert_allclose(every.server_state.w_tilde,
                               paired.server_state.w_tilde + sum(extra) / 3, rtol=0,
                               atol=1e-12)


# --- C-FedDA ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name, order", [
    ("lasso", "gradient_first"),   # AFedDA, LassoRun.m
    ("nuclear", "prox_first"),     # SFedDA, NuclearRun.m
    ("lasso", "prox_first"),       # the nuclear script's order on vectors
])
def test_c_fedda_as_run(name, order):
    """No ball, uniform weights, the constant γ = L, the last iterate (and ``order``)."""
    problem, grads, threshold, x0 = PROBLEMS[name]()
    gamma = 20.0
    alg = c_fedda(smoothness=gamma, strong_convexity=MU, local_steps=K, order=order,
                  **AS_RUN_C)
    result = run(alg, problem, 2, x0)
    expected = matlab_c_fedda_stage(grads, threshold, x0, 2, gamma, LAM, order == "prox_first")
    np.testing.assert_allclose(result.x, expected, rtol=0, atol=1e-12)
    other = matlab_c_fedda_stage(grads, threshold, x0, 2, gamma, LAM, order != "prox_first")
    assert np.abs(other - expected).max() > 1e-6


@pytest.mark.parametrize("name", ["lasso", "nuclear"])
def test_c_fedda_uniform_weights_alone_is_the_code_with_gamma_times_E(name):
    """``weights="uniform"`` with the paper's γ_r = (L + μ)α_r: the code's formula with its
    γ = (L + μ)E (the code's γ is the paper's γ_r E)."""
    problem, grads, threshold, x0 = PROBLEMS[name]()
    lip = 7.0
    alg = c_fedda(radius=None, smoothness=lip, strong_convexity=MU, local_steps=K,
                  weights="uniform", output="last")
    expected = matlab_c_fedda_stage(grads, threshold, x0, 2, (lip + MU) * K, LAM, False)
    np.testing.assert_allclose(run(alg, problem, 2, x0).x, expected, rtol=0, atol=1e-12)


def test_c_fedda_no_ball_is_the_unconstrained_cprox():
    """``radius=None`` and ``inf`` take the thresholding path, bit for bit; the exact solver
    with an inactive ball gives the same point (to 1e-12)."""
    problem, _, _, x0 = lasso_problem()
    kw = dict(smoothness=20.0, strong_convexity=MU, local_steps=K)
    none = run(c_fedda(radius=None, **kw), problem, 2, x0)
    inf = run(c_fedda(radius=float("inf"), **kw), problem, 2, x0)
    big = run(c_fedda(radius=1e6, **kw), problem, 2, x0)
    np.testing.assert_array_equal(none.x, inf.x)
    np.testing.assert_allclose(none.x, big.x, rtol=0, atol=1e-12)


def test_c_fedda_output_last_is_the_last_server_model():
    problem, _, _, x0 = lasso_problem()
    kw = dict(radius=None, smoothness=20.0, strong_convexity=MU, local_steps=K)
    last = run(c_fedda(output="last", **kw), problem, 3, x0)
    average = run(c_fedda(**kw), problem, 3, x0)
    np.testing.assert_array_equal(last.x, last.server_state.w)
    np.testing.assert_array_equal(last.server_state.w, average.server_state.w)
    assert np.abs(last.x - average.x).max() > 1e-6


# --- MC-FedDA ---------------------------------------------------------------------------------

def test_mc_fedda_as_run_lasso():
    """``LassoRun.m`` lines 218-266: ``l1_soft_cs`` (the ball active here), λ and radius per
    stage, each stage restarted at the last iterate (``x0 = wr; xr = wr; gr = 0``)."""
    problem, grads, _, x0 = lasso_problem()
    gamma, lams, radii = 20.0, [2 * LAM, LAM], [0.4, 0.2]
    alg = mc_fedda(stages=2, stage_rounds=[2], radii=radii, reg_strengths=lams,
                   smoothness=gamma, strong_convexity=MU, local_steps=K,
                   cprox="soft_then_project", weights="uniform", proximal_weight="constant",
                   output="last", warm_start="last")
    result = run(alg, problem, 4, x0)
    wr, projections = x0, []
    for lam, rho in zip(lams, radii, strict=True):
        centre = wr.copy()
        wr = matlab_c_fedda_stage(
            grads, lambda v, t, c=centre, rho=rho: l1_soft_cs(v, t, c, rho, projections),
            centre, 2, gamma, lam, False)
    assert projections  # the ℓ1 ball was active
    np.testing.assert_allclose(result.x, wr, rtol=0, atol=1e-12)


def test_mc_fedda_as_run_nuclear():
    """``NuclearRun.m`` lines 181-228: prox first. Its ``nuc_prox_cs.m`` projects only when
    every singular value of ``A_st − W0`` exceeds ρ (line 10 compares the row
    ``sum(Sv)`` with ρ) — never at the code's radii 5000/2500/1250 — so with such a radius
    it is ``nuc_prox``."""
    problem, grads, _, x0 = nuclear_problem()
    gamma, lams = 20.0, [2 * LAM, LAM]
    alg = mc_fedda(stages=2, stage_rounds=[2], radius=5000.0, reg_strengths=lams,
                   smoothness=gamma, strong_convexity=MU, local_steps=K,
                   cprox="soft_then_project", weights="uniform", proximal_weight="constant",
                   order="prox_first", output="last", warm_start="last")
    result = run(alg, problem, 4, x0)
    wr = x0
    for lam in lams:
        wr = matlab_c_fedda_stage(grads, nuc_prox, wr.copy(), 2, gamma, lam, True)
    np.testing.assert_allclose(result.x, wr, rtol=0, atol=1e-12)


def test_mc_fedda_warm_start_last_is_c_fedda_from_the_last_iterate():
    """Under the paper's other rules too: stage 2 is C-FedDA started and centred at stage
    1's last server model, not at its weighted average."""
    problem, _, _, x0 = lasso_problem()
    kw = dict(smoothness=20.0, strong_convexity=MU, local_steps=K)
    staged = run(mc_fedda(stages=2, stage_rounds=[2], radii=[0.4, 0.2],
                          reg_strengths=[2 * LAM, LAM], warm_start="last", **kw),
                 problem, 4, x0)
    first = run(c_fedda(radius=0.4, reg_strength=2 * LAM, **kw), problem, 2, x0)
    second = run(c_fedda(radius=0.2, reg_strength=LAM, **kw), problem, 2,
                 first.server_state.w)
    np.testing.assert_allclose(staged.x, second.x, rtol=0, atol=1e-12)
    np.testing.assert_array_equal(staged.server_state.w0, first.server_state.w)
    assert np.abs(first.server_state.w - first.x).max() > 1e-6


# --- FedDA's 1-based counters --------------------------------------------------------------

def matlab_fedda(grads, threshold, x0, rounds, lam, etac, etas=1.0):
    """``LassoRun.m`` lines 104-133 (``NuclearRun.m`` lines 68-96), every client in every
    round, full gradients: the loops count r = 1..R and k = 1..K, and the thresholds use
    those counters as they are."""
    z = x0.copy()
    for r in range(1, rounds + 1):
        deltas = []
        for grad in grads:
            z_i = z.copy()
            for k in range(1, K + 1):
                etark = etas * etac * r * K + etac * k
                z_i = z_i - etac * grad(threshold(z_i, etark * lam))
            deltas.append(z_i - z)
        z = z + etas * np.mean(deltas, axis=0)
        wr = threshold(z, etas * etac * (r + 1) * K * lam)
    return wr


@pytest.mark.parametrize("name", ["lasso", "nuclear"])
def test_fedda_one_based_counters_are_the_code(name):
    problem, grads, threshold, x0 = PROBLEMS[name]()
    etac = 0.05
    result = run(fedda(client_lr=etac, local_steps=K, counters="one_based"), problem, 2, x0)
    expected = matlab_fedda(grads, threshold, x0, 2, LAM, etac)
    np.testing.assert_allclose(result.x, expected, rtol=0, atol=1e-12)
    # the option moves the iterates: the default thresholds one round and one step less
    paper = run(fedda(client_lr=etac, local_steps=K), problem, 2, x0)
    assert np.abs(paper.x - result.x).max() > 1e-6


# --- minibatches without replacement ------------------------------------------------------

def matlab_fedmid_minibatch(feats, targs, x0, rounds, lam, etac, bs, seed):
    """``LassoRun.m`` lines 82-101 (FedMiD), every client in every round, with
    ``idx = datasample(nm*(i-1)+1:nm*i, bs, 'Replace', false)`` (line 90) taken from fedcomp's
    counter-based stream: client i's k-th minibatch of round r (1-based in the code) is
    ``minibatch_indices(seed, r, [i], n_i, k, bs, replace=False)`` with 0-based r and k."""
    wr = x0.copy()
    for r in range(rounds):
        models = []
        for i, (x, y) in enumerate(zip(feats, targs, strict=True)):
            w = wr.copy()
            for k in range(K):
                idx = minibatch_indices(seed, r, np.array([i]), np.array([len(y)]), k, bs,
                                        replace=False)[0]
                assert len(set(idx.tolist())) == bs  # 'Replace', false: distinct samples
                g = x[idx].T @ (x[idx] @ w - y[idx]) / bs  # loss_grad.m
                w = l1_soft(w - etac * g, etac * lam)
            models.append(w)
        wr = l1_soft(wr + np.mean(models, axis=0) - wr, etac * lam)  # line 96, etas = 1
    return wr


def test_minibatch_without_replacement_is_the_code():
    problem, _, _, x0 = lasso_problem()
    feats = [np.asarray(problem.data.features[i]) for i in range(3)]
    targs = [np.asarray(problem.data.targets[i]) for i in range(3)]
    code = dataclasses.replace(problem, minibatch="without_replacement")
    alg = fedmid(client_lr=0.05, local_steps=K, server_prox_step="unscaled")
    result = simulate(alg, code, 2, x0=x0, batch_size=5, seed=7, metrics=[])
    expected = matlab_fedmid_minibatch(feats, targs, x0, 2, LAM, 0.05, 5, 7)
    np.testing.assert_allclose(result.x, expected, rtol=0, atol=1e-12)
    # the option moves the iterates: draws with replacement repeat samples
    other = simulate(alg, problem, 2, x0=x0, batch_size=5, seed=7, metrics=[])
    assert np.abs(other.x - result.x).max() > 1e-6
    # a minibatch of every sample without replacement is the full local gradient
    whole = simulate(alg, code, 2, x0=x0, batch_size=8, seed=7, metrics=[])
    full = simulate(alg, problem, 2, x0=x0, metrics=[])
    np.testing.assert_allclose(whole.x, full.x, rtol=0, atol=1e-12)


def test_minibatch_without_replacement_depends_on_the_client_alone():
    """Distinct indices below each client's count; client i's draw is the same in any block
    (the block's largest count does not enter it)."""
    counts = np.array([5, 12, 8])
    block = minibatch_indices(3, 4, np.array([0, 1, 2]), counts, 2, 5, replace=False)
    for row, (i, n) in enumerate(zip([0, 1, 2], counts, strict=True)):
        assert len(set(block[row].tolist())) == 5 and block[row].max() < n
        alone = minibatch_indices(3, 4, np.array([i]), counts[[i]], 2, 5, replace=False)
        np.testing.assert_array_equal(block[row], alone[0])
    assert not np.array_equal(
        block, minibatch_indices(3, 5, np.array([0, 1, 2]), counts, 2, 5, replace=False))
    with pytest.raises(ValueError, match="client 0 has 5 samples, batch_size=6"):
        minibatch_indices(3, 4, np.array([0, 1, 2]), counts, 2, 6, replace=False)


def test_problem_minibatch_names_the_bad_value():
    problem, _, _, _ = lasso_problem()
    with pytest.raises(ValueError, match="minibatch must be one of"):
        dataclasses.replace(problem, minibatch="no_replacement")


# --- the defaults are the paper's, unchanged ------------------------------------------------

def test_defaults_are_the_paper_unchanged():
    """Default calls equal the explicit paper readings bit for bit, and the paper's loops
    of ``tests/_loops.py`` (written before these options) to 1e-12."""
    problem, _, _, x0 = lasso_problem()
    lip = 20.0
    paper_fast = dict(weights="increasing", output="last", iterate_sum="paired",
                      order="gradient_first")
    paper_c = dict(weights="increasing", proximal_weight="paper", order="gradient_first",
                   output="average")
    kw = dict(smoothness=lip, strong_convexity=MU, local_steps=K)

    fast = run(fast_fedda(**kw), problem, 3, x0)
    np.testing.assert_array_equal(fast.x, run(fast_fedda(**kw, **paper_fast), problem, 3,
                                              x0).x)
    last, _ = loop_fast_fedda(problem, 3, lip, MU, K, x0=x0)
    np.testing.assert_allclose(fast.x, last, rtol=0, atol=1e-12)
    assert fast_fedda(**kw).hyperparameters.items() >= paper_fast.items()

    c = run(c_fedda(radius=0.4, **kw), problem, 3, x0)
    np.testing.assert_array_equal(c.x, run(c_fedda(radius=0.4, **kw, **paper_c), problem, 3,
                                           x0).x)
    average, _ = loop_c_fedda(problem, 3, 0.4, lip, MU, K, x0=x0)
    np.testing.assert_allclose(c.x, average, rtol=0, atol=1e-12)

    da = run(fedda(client_lr=0.05, local_steps=K), problem, 3, x0)
    np.testing.assert_array_equal(da.x, run(fedda(client_lr=0.05, local_steps=K,
                                                  counters="zero_based"), problem, 3, x0).x)

    mc = run(mc_fedda(stages=2, stage_rounds=2, radius=0.4, **kw), problem, 4, x0)
    explicit = run(mc_fedda(stages=2, stage_rounds=2, radius=0.4, warm_start="average",
                            cprox="exact", **kw, **paper_c), problem, 4, x0)
    np.testing.assert_array_equal(mc.x, explicit.x)


@pytest.mark.parametrize("factory, kwargs, match", [
    (fast_fedda, dict(iterate_sum="all"), "iterate_sum"),
    (fast_fedda, dict(order="prox"), "order"),
    (fast_fedda, dict(order="prox_first"), "weights='uniform' and iterate_sum='every_prox'"),
    (fast_fedda, dict(order="prox_first", weights="uniform"), "iterate_sum"),
    (c_fedda, dict(weights="flat"), "weights"),
    (c_fedda, dict(proximal_weight="L"), "proximal_weight"),
    (c_fedda, dict(order="prox"), "order"),
    (c_fedda, dict(output="final"), "output"),
    (c_fedda, dict(radius=0.0), "radius"),
    (mc_fedda, dict(warm_start="first"), "warm_start"),
    (mc_fedda, dict(output="final"), "output"),
    (fedda, dict(counters="matlab"), "counters"),
])
def test_invalid_readings_name_the_option(factory, kwargs, match):
    with pytest.raises(ValueError, match=match):
        factory(**kwargs)
