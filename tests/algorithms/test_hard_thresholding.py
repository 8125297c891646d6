"""Fed-HT and FedIter-HT (Tong et al., arXiv:2101.00052): support recovery and convergence on a
well-conditioned sparse least squares, the exact special cases (one client, one local step;
K = 1 full batch = centralized IHT), and the refusal of other regularizers."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from fedcomp import ClientData, Problem, simulate
from fedcomp.algorithms import fed_ht, fedavg, fediter_ht, fedmid, make_algorithm
from fedcomp.losses import LeastSquares
from fedcomp.regularizers import L0, L1, L0Ball

D, S, SIGMA = 20, 3, 0.01
SUPPORT = np.array([2, 7, 15])
W_STAR = np.zeros(D)
W_STAR[SUPPORT] = [1.5, -2.0, 1.0]


def sparse_regression(n_clients=4, samples=60, seed=0, sizes=None):
    """y = A w* + σ ε with Gaussian rows: each client's A_iᵀA_i/m is near the identity, so
    the problem is well conditioned on every 2s-sparse direction (restricted isometry)."""
    rng = np.random.default_rng(seed)
    sizes = sizes or [samples] * n_clients
    feats = [rng.normal(size=(m, D)) for m in sizes]
    targs = [a @ W_STAR + SIGMA * rng.normal(size=len(a)) for a in feats]
    return Problem(LeastSquares(), L0Ball(sparsity=S), ClientData.from_lists(feats, targs))


def oracle(problem):
    """Least squares restricted to the true support: the IHT fixed point once the support
    is found (the pooled objective is the π-weighted sum of the ½-mean squared residuals)."""
    h, g = np.zeros((D, D)), np.zeros(D)
    for i in range(problem.n_clients):
        a, b = problem.data.client_arrays(i)
        h += problem.weights[i] * a.T @ a / len(b)
        g += problem.weights[i] * a.T @ b / len(b)
    x = np.zeros(D)
    x[SUPPORT] = np.linalg.solve(h[np.ix_(SUPPORT, SUPPORT)], g[SUPPORT])
    return x


def noise_tolerance(problem):
    """10·σ·sqrt(s/N): the oracle estimator's error is about σ·sqrt(s/N) for a near-identity
    design (N samples, s unknowns); 10 covers the χ²_s tail (P[χ²_3 > 100] < 1e-20)."""
    n = int(problem.data.counts.sum())
    return 10 * SIGMA * np.sqrt(S / n)


@pytest.mark.parametrize("make", [fed_ht, fediter_ht])
@pytest.mark.parametrize("local_steps", [1, 5])
def test_recovers_the_support_and_converges_near_w_star(make, local_steps):
    p = sparse_regression()
    run = simulate(make(client_lr=0.3, local_steps=local_steps), p, 150, eval_every=150,
                   metrics=["objective"])
    x = run.x
    np.testing.assert_array_equal(np.flatnonzero(x), SUPPORT)
    tol = noise_tolerance(p)  # 0.011 here; w*'s entries are >= 1
    assert np.linalg.norm(oracle(p) - W_STAR) < tol  # the noise level is what we think
    assert np.linalg.norm(x - W_STAR) < tol, np.linalg.norm(x - W_STAR)
    if local_steps == 1:
        # one full-gradient step per round: centralized IHT, whose fixed point on the
        # true support is the restricted least squares solution exactly
        np.testing.assert_allclose(x, oracle(p), rtol=0, atol=1e-10)


def test_one_local_step_is_centralized_iht():
    p = sparse_regression(sizes=[50, 70, 60])
    x, lr = np.zeros(D), 0.3
    run = simulate(fed_ht(client_lr=lr, local_steps=1), p, 5, eval_every=5, metrics=[])
    for _ in range(5):
        x = p.regularizer.prox((x - lr * p.smooth_grad(x))[None], lr)[0]
    np.testing.assert_allclose(run.x, x, rtol=0, atol=1e-13)


@pytest.mark.parametrize("batch_size", [None, 10])
def test_fediter_ht_with_one_local_step_equals_fed_ht_on_one_client(batch_size):
    """Bit for bit on one client (the server's average of one model is that model, H_s is
    idempotent), also with the same minibatch draws; not with several clients."""
    one = sparse_regression(n_clients=1, samples=80)
    kw = dict(eval_every=12, metrics=[], batch_size=batch_size, seed=3)
    a = simulate(fed_ht(client_lr=0.2, local_steps=1), one, 12, **kw).x
    b = simulate(fediter_ht(client_lr=0.2, local_steps=1), one, 12, **kw).x
    np.testing.assert_array_equal(a, b)
    several = sparse_regression(n_clients=4, samples=20, seed=1)
    a = simulate(fed_ht(client_lr=0.2, local_steps=1), several, 1, eval_every=1, metrics=[]).x
    b = simulate(fediter_ht(client_lr=0.2, local_steps=1), several, 1, eval_every=1,
                 metrics=[]).x
    assert not np.array_equal(a, b)  # H(average) differs from H(average of H's)


def test_are_fedavg_and_fedmid_with_a_server_projection():
    """Fed-HT's updates are FedAvg's with the server prox of l0_ball, FedIter-HT's FedMiD's
    (server_lr = 1); they differ only in uploading models rather than differences, i.e. in
    the rounding of x + Σ p_i (y_i − x) against Σ p_i y_i."""
    p = sparse_regression(sizes=[30, 45, 60])
    kw = dict(eval_every=8, metrics=[], batch_size=8, seed=2)
    pairs = [(fed_ht(client_lr=0.2, local_steps=4),
              fedavg(client_lr=0.2, local_steps=4, server_prox=True)),
             (fediter_ht(client_lr=0.2, local_steps=4), fedmid(client_lr=0.2, local_steps=4))]
    for ours, theirs in pairs:
        np.testing.assert_allclose(simulate(ours, p, 8, **kw).x, simulate(theirs, p, 8, **kw).x,
                                   rtol=0, atol=1e-12)


def test_l0_penalty_variant_thresholds_at_sqrt_2_step_alpha():
    p = sparse_regression()
    p = Problem(p.loss, L0(alpha=0.05), p.data)
    run = simulate(fediter_ht(client_lr=0.3, local_steps=2), p, 40, eval_every=40, metrics=[])
    # small coefficients sit below sqrt(2·0.6·0.05) = 0.24 after the server step: only the
    # true support (entries >= 1) survives
    np.testing.assert_array_equal(np.flatnonzero(run.x), SUPPORT)


def test_another_regularizer_gives_fedavg_with_its_server_prox_and_bad_values_raise():
    p = Problem(LeastSquares(), L1(0.1), sparse_regression(sizes=[20, 30]).data)
    kw = dict(eval_every=3, metrics=[])
    np.testing.assert_allclose(
        simulate(fed_ht(client_lr=0.2, local_steps=2), p, 3, **kw).x,
        simulate(fedavg(client_lr=0.2, local_steps=2, server_prox=True), p, 3, **kw).x,
        rtol=0, atol=1e-12)
    with pytest.raises(ValueError, match="client_lr must be a positive number"):
        fediter_ht(client_lr=0.0)
    with pytest.raises(ValueError, match="local_steps must be an integer >= 1"):
        fed_ht(local_steps=0)


def test_registered_and_listed():
    assert make_algorithm("fed_ht", client_lr=0.1).name == "fed_ht"
    assert make_algorithm("fediter_ht", local_steps=2).hyperparameters["local_steps"] == 2
    res = subprocess.run([sys.executable, "-m", "fedcomp", "list", "algorithms"],
                         capture_output=True, text=True, check=True)
    names = {line.split()[0] for line in res.stdout.splitlines()[1:] if line.strip()}
    assert {"fed_ht", "fediter_ht"} <= names
