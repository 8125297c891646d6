"""C-FedDA (Bao et al. 2022, Algorithm 2): constraint, special case, the code's variant."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import ClientData, Problem, RunOptions, simulate, solve_reference
from fedcomp.algorithms import c_fedda
from fedcomp.algorithms.c_fedda import round_weight_sum
from fedcomp.losses import LeastSquares
from fedcomp.regularizers import L1, ElasticNet
from tests._loops import loop_c_fedda
from tests.conftest import heterogeneous_sparse_regression, make_problem


def single_client(reg=None):
    base = make_problem("least_squares", reg=reg or L1(0.02))
    f, t = base.data.client_arrays(0)
    return Problem(LeastSquares(), base.regularizer, ClientData.from_lists([f], [t]))


def test_one_client_one_step_is_weighted_dual_averaging():
    """ε = ∞, μ = 0, E = 1, w0 = 0: w̄_{r+1} = S_{A_r λ/γ_r}(−g_r/γ_r), g_r = Σ α_j ∇f(w̄_j)."""
    p = single_client(L1(0.1))
    lip, lam, rounds = 2.0 * p.smoothness(), 0.1, 12
    run = simulate(c_fedda(radius=1e9, smoothness=lip, local_steps=1), p, rounds, metrics=[])
    w, g = np.zeros(p.param_shape), np.zeros(p.param_shape)
    iterates = []
    for r in range(rounds):
        g = g + (r + 1) * np.asarray(p.smooth_grad(w))
        gamma = lip * (r + 1)
        v = -g / gamma
        w = np.sign(v) * np.maximum(np.abs(v) - round_weight_sum(r) * lam / gamma, 0.0)
        iterates.append(w)
    np.testing.assert_allclose(run.server_state.w, w, rtol=0, atol=1e-12)
    weights = np.arange(1, rounds + 1, dtype=float)
    expected_avg = np.tensordot(weights, np.array(iterates), axes=1) / weights.sum()
    np.testing.assert_allclose(run.x, expected_avg, rtol=0, atol=1e-12)
    assert np.count_nonzero(w) < w.size


@pytest.mark.parametrize("batch_size, clients_per_round, radius, domain_radius, warm_start", [
    # ℓ1 ball active; domain W active (an active ℓ1 ball inside it costs nested bisections);
    # ℓ1 ball around a warm start w0 ≠ 0 with partial participation
    (None, None, 0.3, None, False), (4, None, 5.0, 0.2, False), (4, 3, 0.2, None, True)])
def test_multi_client_matches_per_client_loop(batch_size, clients_per_round, radius,
                                              domain_radius, warm_start):
    """5 sample-weighted heterogeneous clients, E = 4, 5 rounds, μ > 0: the vectorised run
    (blocks of 2 clients) is Algorithm 2 run one client at a time, both the weighted
    average output and the last server model."""
    p = make_problem("least_squares", reg=L1(0.05), n_clients=5, weighting="samples")
    lipschitz, mu, local, rounds = float(np.max(p.loss.smoothness(p.data.full_batch()))), 0.1, 4, 5
    x0 = np.random.default_rng(5).normal(size=p.param_shape) * 0.1 if warm_start else None
    kw = dict(seed=2, batch_size=batch_size, clients_per_round=clients_per_round)
    alg = c_fedda(radius=radius, smoothness=lipschitz, strong_convexity=mu, local_steps=local,
                  domain_radius=domain_radius)
    run = simulate(alg, p, rounds, x0=x0, metrics=[], **kw, options=RunOptions(client_block=2))
    avg, last = loop_c_fedda(p, rounds, radius, lipschitz, mu, local,
                             domain_radius=domain_radius, x0=x0, **kw)
    np.testing.assert_allclose(run.x, avg, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.server_state.w, last, rtol=0, atol=1e-12)
    assert np.abs(last - avg).max() > 1e-2  # the two outputs are not the same vector
    if domain_radius is None:  # the ℓ1 ball is active
        w0 = np.zeros(p.param_shape) if x0 is None else x0
        assert np.abs(last - w0).sum() == pytest.approx(radius, rel=1e-9)
    else:  # the domain W is
        assert np.linalg.norm(last) == pytest.approx(domain_radius, rel=1e-9)


@pytest.mark.parametrize("cprox", ["exact", "soft_then_project"])
def test_iterates_stay_in_the_constraint_set(cprox):
    p = make_problem("least_squares", reg=L1(0.01))
    eps, rho = 0.3, 0.25
    for rounds in (1, 4, 9):
        run = simulate(c_fedda(radius=eps, strong_convexity=0.05, local_steps=4,
                               domain_radius=rho, cprox=cprox), p, rounds, clients_per_round=4,
                       metrics=[])
        for w in (run.server_state.w, run.x):
            assert np.abs(w).sum() <= eps * (1 + 1e-9)  # w0 = 0
            assert np.linalg.norm(w) <= rho * (1 + 1e-9)


def softmax_problem():
    """A (4, 3) matrix model under ``L1(param_ndim=2)``."""
    from fedcomp.losses import Softmax

    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(30, 4)) + i for i in range(3)]
    labels = [rng.integers(0, 3, size=30).astype(float) for _ in range(3)]
    return Problem(Softmax(), L1(0.001, param_ndim=2), ClientData.from_lists(feats, labels),
                   n_classes=3)


@pytest.mark.parametrize("cprox", ["exact", "soft_then_project"])
def test_matrix_model_constraints_bound_the_whole_model(cprox):
    """ε and ρ bound the whole (d, k) model, not each of its rows (one ε per row let
    ‖w‖₁ reach 0.28 for ε = 0.1 and ‖w‖₂ reach 0.09 for ρ = 0.05)."""
    p = softmax_problem()
    eps, rho = 0.1, 0.05
    run = simulate(c_fedda(radius=eps, local_steps=2, domain_radius=rho, cprox=cprox), p, 5,
                   metrics=[])
    assert run.x.shape == (4, 3)
    for w in (run.server_state.w, run.x):
        assert np.abs(w).sum() <= eps * (1 + 1e-9)  # w0 = 0
        assert np.linalg.norm(w) <= rho * (1 + 1e-9)
    assert np.linalg.norm(run.server_state.w) >= rho * (1 - 1e-9)  # the domain is active


@pytest.mark.parametrize("cprox", ["exact", "soft_then_project"])
def test_matrix_model_cprox_is_the_flattened_vector_cprox(cprox):
    from fedcomp.algorithms.c_fedda import constrained_prox_solver

    rng = np.random.default_rng(1)
    b, w0 = rng.normal(size=(3, 4, 5)), rng.normal(size=(4, 5)) * 0.05
    solve = constrained_prox_solver("l1", cprox)
    matrices = solve(b, 1.3, 0.2, w0, 0.6, 0.7)
    vectors = solve(b.reshape(3, 20), 1.3, 0.2, w0.reshape(20), 0.6, 0.7)
    np.testing.assert_array_equal(matrices, vectors.reshape(3, 4, 5))
    assert (np.abs(matrices - w0).sum(axis=(1, 2)) <= 0.6 * (1 + 1e-9)).all()
    assert (np.linalg.norm(matrices.reshape(3, 20), axis=1) <= 0.7 * (1 + 1e-9)).all()
    # both balls are active on the whole model, so a per-row answer would differ
    assert np.abs(matrices - w0).sum(axis=(1, 2)).max() >= 0.6 * (1 - 1e-9)


def test_code_cprox_is_exact_only_in_special_cases():
    """Soft-threshold-then-project is the exact CProx when the ℓ1 ball is centred at 0 (both
    are soft thresholdings) or inactive; around a warm start w0 ≠ 0 (MC-FedDA) it is not."""
    p = make_problem("least_squares", reg=L1(0.01))

    def final(radius, cprox, x0=None):
        alg = c_fedda(radius=radius, local_steps=3, cprox=cprox)
        return simulate(alg, p, 6, x0=x0, metrics=[]).x

    for radius in (1e6, 0.1):  # w0 = 0: identical
        np.testing.assert_allclose(final(radius, "exact"), final(radius, "soft_then_project"),
                                   atol=1e-12)
    # at the operator level, around w0 ≠ 0 the code's variant is feasible but not optimal
    from fedcomp.algorithms._cprox import cprox_l1, cprox_l1_objective
    from fedcomp.algorithms.c_fedda import soft_then_project

    rng = np.random.default_rng(0)
    b, w0 = rng.normal(size=(20, 8)), rng.normal(size=8) * 0.5
    exact = cprox_l1(b, 1.0, 0.4, w0, 0.8)
    code = soft_then_project(b, 1.0, 0.4, w0, 0.8, None)
    assert (np.abs(code - w0).sum(axis=1) <= 0.8 * (1 + 1e-9)).all()
    gap = cprox_l1_objective(code, b, 1.0, 0.4) - cprox_l1_objective(exact, b, 1.0, 0.4)
    assert gap.min() > -1e-12 and gap.max() > 1e-3


def test_error_decreases_monotonically_like_one_over_t():
    """Full gradients, full participation, E = 10 local steps on heterogeneous clients, μ = 0:
    the decaying effective step makes the error fall like 1/T (measured 0.245 from 500 to
    2000 rounds), monotonically. ε_0 = 20 = 2‖w*‖₁: the ℓ1 ball is inactive at x*."""
    p = heterogeneous_sparse_regression()
    ref = solve_reference(p)
    assert np.abs(ref.x).sum() < 20.0
    run = simulate(c_fedda(radius=20.0, local_steps=10), p, 2000, reference=ref,
                   metrics=["optimality"], eval_every=50)
    by_round = {row["round"]: row["optimality"] for row in run.history}
    window = [by_round[r] for r in range(500, 2001, 50)]
    assert all(b < a for a, b in zip(window, window[1:], strict=False))
    assert by_round[2000] <= 0.35 * by_round[500]  # 1/T predicts 0.25


def test_needs_an_l1_or_nuclear_regularizer():
    p = make_problem("least_squares", reg=ElasticNet(0.1, 0.1))
    with pytest.raises(ValueError, match="L1 or Nuclear regularizer"):
        simulate(c_fedda(), p, 1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(radius=0.0), "radius"), (dict(cprox="fast"), "cprox"),
    (dict(smoothness=-1.0), "smoothness"), (dict(local_steps=0), "local_steps"),
    (dict(strong_convexity=-0.1), "strong_convexity"),
    (dict(domain_radius=-1.0), "domain_radius"), (dict(domain_radius=0.0), "domain_radius"),
    (dict(domain_radius="big"), "domain_radius"), (dict(reg_strength=-0.5), "reg_strength"),
    (dict(reg_strength="x"), "reg_strength"), (dict(reg_strength=True), "reg_strength"),
])
def test_invalid_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        c_fedda(**kwargs)


def test_valid_reg_strength_and_domain_radius_are_accepted():
    for kwargs in (dict(reg_strength=0), dict(reg_strength=0.3), dict(reg_strength=None),
                   dict(domain_radius=None), dict(domain_radius=2)):
        assert c_fedda(**kwargs).hyperparameters.items() >= kwargs.items()
