"""Scafflix (Yi, Condat, Richtárik, TMLR 2025): parity with a transcription of the authors'
logistic-regression code, its two limits (every α_i = 1 is Scaffnew, every α_i = 0 local
training), convergence to the FLIX optimum solved here by Newton, and its refusals."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import ClientData, Problem, simulate
from fedcomp.algorithms import make_algorithm, scafflix, scaffnew
from fedcomp.algorithms._base import setup_context
from fedcomp.algorithms.scafflix import personal_models
from fedcomp.algorithms.scaffnew import steps_until_communication
from fedcomp.losses import LeastSquares, Logistic
from fedcomp.regularizers import L1, Zero

REG = 0.1          # the code's ridge λ (run_scafflix.py: regularization=0.1)
ALPHA = [0.9, 0.4, 0.15]
P, SEED = 0.35, 3


def _data(seed=0, sizes=(9, 12, 7), d=4):
    """Three clients of different sizes and shifted features (heterogeneous optima);
    labels in {0, 1} for the code's LogReg, ±1 for fedcomp's Logistic."""
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(n, d)) + 0.7 * i for i, n in enumerate(sizes)]
    ys = [(rng.random(n) < 0.5).astype(float) for n in sizes]
    return xs, ys


@pytest.fixture(scope="module")
def data():
    return _data()


@pytest.fixture(scope="module")
def problem(data):
    xs, ys = data
    return Problem(Logistic(l2=REG), Zero(), ClientData.from_lists(xs, [2 * y - 1 for y in ys]),
                   weighting="uniform")  # the paper's (1/n) Σ


# --- a NumPy transcription of logistic_reg/workers.py run_scafflix and models.py LogReg -------
def _code_grad(x, y, w):
    """LogReg.grad: Xᵀ(σ(Xw) − y)/n + λw, labels in {0, 1}."""
    return x.T @ (1.0 / (1.0 + np.exp(-(x @ w))) - y) / y.shape[0] + REG * w


def _code_optimum(x, y):
    """w_opt = argmin of the client's LogReg, by Newton here (the code's gradient descent to
    ‖∇‖ < 1e-6 is a looser stand-in for the exact x_i* of the paper)."""
    w = np.zeros(x.shape[1])
    for _ in range(60):
        s = 1.0 / (1.0 + np.exp(-(x @ w)))
        hess = x.T @ (x * (s * (1 - s))[:, None]) / y.shape[0] + REG * np.eye(x.shape[1])
        w = w - np.linalg.solve(hess, _code_grad(x, y, w))
    return w


def code_scafflix(xs, ys, alpha, lr, p, coins, w0):
    """run_scafflix's loop: returns (ws, h) after each communication (coin = 1)."""
    n = len(xs)
    w_opt = [_code_optimum(x, y) for x, y in zip(xs, ys, strict=True)]
    ws = np.array([w0] * n)
    h = np.zeros_like(ws)
    out = []
    for coin in coins:
        # grad_shift: α_i ∇f_i(compute_local(w)), compute_local = α_i w + (1 − α_i) w_opt
        grad_vec = np.array([alpha[i] * _code_grad(xs[i], ys[i], alpha[i] * ws[i]
                                                   + (1 - alpha[i]) * w_opt[i]) - h[i]
                             for i in range(n)])
        ws_tmp = ws - lr * grad_vec
        ws = np.array([np.mean(ws_tmp, axis=0)] * n) if coin else ws_tmp
        h = h + p / lr * (ws - ws_tmp)
        if coin:
            out.append((ws.copy(), h.copy()))
    return out


def _code_smoothness(x):
    """models.LogReg._smoothness on the code's intercept-free features."""
    return np.max(np.linalg.eigvalsh(x.T @ x + REG * np.eye(x.shape[1]))) / (4 * x.shape[0])


def test_parity_with_a_transcription_of_the_official_code(data, problem):
    """3 clients × 3 communications (their local steps from fedcomp's common coin): the
    code runs one step lr = 1/mean(α_i² L_i) on the lifted f̃_i; fedcomp runs the paper's
    γ_i = α_i² lr. Models and control variates (the code's h = α_i h_i) equal to 1e-12."""
    xs, ys = data
    alpha = np.array(ALPHA)
    lr = 1.0 / np.mean(alpha ** 2 * np.array([_code_smoothness(x) for x in xs]))
    coins = []
    for r in range(3):
        k = steps_until_communication(SEED, r, P)
        coins += [0] * (k - 1) + [1]
    assert len(coins) > 3  # local steps between communications, not only averaging
    w0 = np.full(4, 0.3)
    expected = code_scafflix(xs, ys, alpha, lr, P, coins, w0)
    alg = scafflix(global_weight=ALPHA, client_lr=[float(a * a * lr) for a in alpha],
                   comm_prob=P)
    for rounds, (ws, h_code) in enumerate(expected, start=1):
        run = simulate(alg, problem, rounds, seed=SEED, x0=w0, metrics=[])
        np.testing.assert_allclose(run.x, ws[0], rtol=0, atol=1e-12)
        states = run.client_states
        # fedcomp updates h_i at the start of the next round: bring it to now
        h_now = states.h + (P / (alpha ** 2 * lr) * alpha)[:, None] * (run.x - states.x_hat)
        np.testing.assert_allclose(alpha[:, None] * h_now, h_code, rtol=0, atol=1e-12)
    assert np.abs(h_code).max() > 1e-3


def test_every_weight_one_is_scaffnew(problem):
    """α_i = 1: the same iterates, control variates and gradient count as Scaffnew (same
    seed, same coin), and no local optimum is solved."""
    ref = simulate(scaffnew(client_lr=0.8, comm_prob=P), problem, 12, seed=SEED, metrics=[])
    run = simulate(scafflix(global_weight=1.0, client_lr=0.8, comm_prob=P), problem, 12,
                   seed=SEED, metrics=[])
    np.testing.assert_allclose(run.x, ref.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.client_states.h, ref.client_states.h, rtol=0, atol=1e-12)
    assert np.ptp(run.client_states.personal, axis=0).max() == 0  # the global model
    assert run.counters.grad_evals == ref.counters.grad_evals
    assert np.abs(ref.client_states.h).max() > 1e-3


def test_every_weight_zero_is_local_training(data, problem):
    """α_i = 0: each personal model is the client's own optimum (solved here independently),
    from the first round on, and the global model never moves."""
    xs, ys = data
    own = np.array([_code_optimum(x, y) for x, y in zip(xs, ys, strict=True)])
    x0 = np.full(4, 0.2)
    for rounds in (1, 4):
        run = simulate(scafflix(global_weight=0.0, comm_prob=P), problem, rounds, seed=SEED,
                       x0=x0, metrics=[])
        np.testing.assert_allclose(run.client_states.personal, own, rtol=0, atol=1e-12)
        np.testing.assert_array_equal(run.x, x0)
        assert not run.client_states.h.any()


def _flix_optimum(xs, ys, alpha, w_opt, pi=None):
    """argmin_x Σ π_i f_i(α_i x + (1 − α_i) x_i*) by Newton, written here (π_i = 1/n
    unless given)."""
    pi = np.full(len(xs), 1 / len(xs)) if pi is None else pi
    x = np.zeros(xs[0].shape[1])
    for _ in range(60):
        g, hess = np.zeros_like(x), np.zeros((x.size, x.size))
        for xi, yi, a, wi, p in zip(xs, ys, alpha, w_opt, pi, strict=True):
            z = a * x + (1 - a) * wi
            s = 1.0 / (1.0 + np.exp(-(xi @ z)))
            g += p * a * _code_grad(xi, yi, z)
            hess += p * a * a * (xi.T @ (xi * (s * (1 - s))[:, None]) / yi.shape[0]
                                 + REG * np.eye(x.size))
        x = x - np.linalg.solve(hess, g)
    return x


@pytest.mark.parametrize("weighting", ["uniform", "samples"])
def test_converges_to_the_flix_optimum(data, problem, weighting):
    """The paper's linear rate with γ_i = 1/L_i ("auto"): the global and personal models
    reach the FLIX optimum (solved centrally here, with the problem's client weights π_i)
    to 1e-9; plain Scaffnew on the same data ends at the unpersonalised optimum, far from
    it."""
    xs, ys = data
    problem = Problem(problem.loss, problem.regularizer, problem.data, weighting=weighting)
    w_opt = [_code_optimum(x, y) for x, y in zip(xs, ys, strict=True)]
    x_flix = _flix_optimum(xs, ys, ALPHA, w_opt, problem.weights)
    run = simulate(scafflix(global_weight=ALPHA, comm_prob=0.5), problem, 150, seed=1,
                   metrics=[])
    np.testing.assert_allclose(run.x, x_flix, rtol=0, atol=1e-9)
    np.testing.assert_allclose(personal_models(run.x, run.client_states.x_star, ALPHA),
                               [a * x_flix + (1 - a) * w for a, w in zip(ALPHA, w_opt,
                                                                         strict=True)],
                               rtol=0, atol=1e-9)
    plain = simulate(scafflix(global_weight=1.0, comm_prob=0.5), problem, 150, seed=1,
                     metrics=[])
    assert np.linalg.norm(plain.x - x_flix) > 1e-2


def test_a_client_at_zero_weight_leaves_the_others_at_their_flix_optimum(data, problem):
    """One α_i = 0: that client's f̃_i is constant, so x solves FLIX of the other two (with
    the uniform weights' ratio) and the client keeps x_i*."""
    xs, ys = data
    alpha = [0.7, 0.0, 0.3]
    w_opt = [_code_optimum(x, y) for x, y in zip(xs, ys, strict=True)]
    keep = [0, 2]
    x_flix = _flix_optimum([xs[i] for i in keep], [ys[i] for i in keep],
                           [alpha[i] for i in keep], [w_opt[i] for i in keep])
    run = simulate(scafflix(global_weight=alpha, comm_prob=0.5), problem, 150, seed=1,
                   metrics=[])
    np.testing.assert_allclose(run.x, x_flix, rtol=0, atol=1e-9)
    np.testing.assert_allclose(run.client_states.personal[1], w_opt[1], rtol=0, atol=1e-12)


# --- what it refuses, naming why ------------------------------------------------------------
def test_refuses_a_nonsmooth_g_naming_why(problem):
    composite = Problem(problem.loss, L1(0.01), problem.data)
    with pytest.raises(ValueError, match=r"scafflix solves a smooth problem, the FLIX problem "
                                         r".*strongly convex f_i\) has no g.* L1 would be ignored"):
        simulate(scafflix(), composite, 2, metrics=[])


def test_refuses_sampling_bad_weights_and_local_problems_without_an_optimum(data, problem):
    xs, ys = data
    lsq = Problem(LeastSquares(), Zero(), ClientData.from_lists([x[:3] for x in xs],
                                                             [y[:3] for y in ys]))
    with pytest.raises(ValueError, match=r"scafflix: client 0 has no unique optimum .* add a "
                                         r"ridge term"):
        simulate(scafflix(), lsq, 2, metrics=[])
    with pytest.raises(ValueError, match="full participation"):
        simulate(scafflix(), lsq, 2, clients_per_round=2, metrics=[])
    with pytest.raises(ValueError, match=r"global_weight\[1\] must be a number in \[0, 1\]"):
        scafflix(global_weight=[0.5, 1.5, 0.2])
    for steps in ("auto", "code", 0.1):  # before round 1 where it resolves steps, else in it
        with pytest.raises(ValueError, match="global_weight has [24] entries for 3 clients"):
            simulate(scafflix(global_weight=[0.5] * 4, client_lr=steps), problem, 1, metrics=[])
        with pytest.raises(ValueError, match="global_weight has [24] entries for 3 clients"):
            simulate(scafflix(global_weight=[0.5] * 2, client_lr=steps), problem, 1, metrics=[])
    with pytest.raises(ValueError, match=r"client_lr must be a positive number, one per client, "
                                         r"or one of \('auto', 'code'\)"):
        make_algorithm("scafflix", client_lr="fast")


def test_step_rules_resolve_from_the_clients_smoothness(problem):
    setup = setup_context(problem)
    smooth = setup.client_smoothness()
    auto = scafflix(global_weight=ALPHA).prepare(setup)
    np.testing.assert_allclose(auto.hyperparameters["client_lr"], 1 / smooth, rtol=1e-15)
    assert auto.prepare(setup) is None  # resolved: preparing again changes nothing
    code = scafflix(global_weight=ALPHA, client_lr="code").prepare(setup)
    alpha = np.array(ALPHA)
    np.testing.assert_allclose(code.hyperparameters["client_lr"],
                               alpha ** 2 / np.mean(alpha ** 2 * smooth), rtol=1e-15)
