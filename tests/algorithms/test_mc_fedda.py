"""MC-FedDA (Bao et al. 2022, Algorithm 3) and C-FedDA with the nuclear norm."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import Problem, simulate
from fedcomp.algorithms import c_fedda, mc_fedda
from fedcomp.data import bao_lowrank_matrix
from fedcomp.losses import TraceRegression
from fedcomp.regularizers import L1, ElasticNet, Nuclear
from tests.conftest import make_problem


def test_one_stage_is_c_fedda():
    p = make_problem("least_squares", reg=L1(0.01))
    kwargs = dict(radius=0.4, strong_convexity=0.05, local_steps=3)
    mc = simulate(mc_fedda(stages=1, **kwargs), p, 7, clients_per_round=3, batch_size=5,
                  metrics=[])
    c = simulate(c_fedda(**kwargs), p, 7, clients_per_round=3, batch_size=5, metrics=[])
    np.testing.assert_allclose(mc.x, c.x, rtol=0, atol=1e-13)
    assert mc.counters.grad_evals == c.counters.grad_evals
    # MC-FedDA also broadcasts the stage centre: 3d floats down instead of 2d
    assert mc.counters.floats_down * 2 == c.counters.floats_down * 3


def test_stages_warm_start_with_halved_lambda_and_radius():
    """Stage 2 is C-FedDA started at stage 1's output with ε/2 and the problem's λ (the
    default λ sequence halves towards it), its round counter and weights restarted."""
    lam = 0.02
    p = make_problem("least_squares", reg=L1(lam))
    kwargs = dict(strong_convexity=0.05, local_steps=3)
    run = simulate(mc_fedda(stages=2, stage_rounds=4, radius=0.5, **kwargs), p, 9, metrics=[],
                   eval_every=1)
    first = simulate(c_fedda(radius=0.5, reg_strength=2 * lam, **kwargs), p, 4, metrics=[])
    second = simulate(c_fedda(radius=0.25, reg_strength=lam, **kwargs), p, 5, x0=first.x,
                      metrics=[])
    np.testing.assert_allclose(run.x, second.x, rtol=0, atol=1e-12)
    assert not np.allclose(first.x, second.x, atol=1e-6)  # the second stage moved
    # the final model is within ε_1 of the warm start (ℓ1 ball around ŵ_1)
    assert np.abs(run.x - first.x).sum() <= 0.25 * (1 + 1e-9)


def test_explicit_sequences_and_stage_lengths():
    p = make_problem("least_squares", reg=L1(0.01))
    run = simulate(mc_fedda(stages=3, stage_rounds=[2, 3], radii=[1.0, 0.3, 0.1],
                            reg_strengths=[0.05, 0.03, 0.01], local_steps=2), p, 8, metrics=[])
    a = simulate(c_fedda(radius=1.0, reg_strength=0.05, local_steps=2), p, 2, metrics=[])
    b = simulate(c_fedda(radius=0.3, reg_strength=0.03, local_steps=2), p, 3, x0=a.x,
                 metrics=[])
    c = simulate(c_fedda(radius=0.1, reg_strength=0.01, local_steps=2), p, 3, x0=b.x,
                 metrics=[])
    np.testing.assert_allclose(run.x, c.x, rtol=0, atol=1e-12)


def lowrank_problem(alpha=0.1):
    data = bao_lowrank_matrix(n_clients=4, samples_per_client=30, size=5, rank=2, seed=1)
    return Problem(TraceRegression(), Nuclear(alpha), data)


@pytest.mark.parametrize("cprox", ["exact", "soft_then_project"])
def test_nuclear_iterates_stay_in_the_constraint_sets(cprox):
    p = lowrank_problem()
    run = simulate(mc_fedda(stages=2, stage_rounds=3, radius=2.0, local_steps=3,
                            domain_radius=1.8, cprox=cprox), p, 6, metrics=[])
    centre = run.server_state.w0  # stage 2's centre ŵ_1
    for w in (run.server_state.w, run.x):
        assert np.linalg.svd(w - centre, compute_uv=False).sum() <= 1.0 * (1 + 1e-9)
        assert np.linalg.norm(w) <= 1.8 * (1 + 1e-9)
    assert np.abs(centre).sum() > 0  # the warm start is off-centre: the DR path ran


def test_nuclear_c_fedda_converges_like_one_over_t_to_the_low_rank_optimum():
    """Full gradients, all clients, one local step: the error to x* (rank 2 of 5) falls like
    1/T, and the last server iterate has x*'s rank."""
    from fedcomp import solve_reference
    from fedcomp.metrics import rank

    p = lowrank_problem(alpha=1.0)
    ref = solve_reference(p)
    assert rank(p, ref.x) == 2
    run = simulate(c_fedda(radius=10.0, local_steps=1, strong_convexity=0.1), p, 800,
                   reference=ref, metrics=["optimality"], eval_every=200)
    errors = {row["round"]: row["optimality"] for row in run.history}
    assert errors[800] <= 0.35 * errors[200]  # 1/T predicts 0.25
    assert rank(p, run.server_state.w) == 2


@pytest.mark.parametrize("kwargs, match", [
    (dict(stages=0), "stages"), (dict(stages=3, stage_rounds=[5]), "stage_rounds"),
    (dict(stages=2, radii=[1.0]), "radii"), (dict(stages=2, reg_strengths=[0.1, -1]),
                                             "reg_strengths"),
    (dict(cprox="fast"), "cprox"), (dict(radius=0), "radius"),
    (dict(domain_radius=-1.0), "domain_radius"), (dict(domain_radius=0.0), "domain_radius"),
    (dict(domain_radius="big"), "domain_radius"),
])
def test_invalid_hyperparameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mc_fedda(**kwargs)


def test_needs_an_l1_or_nuclear_regularizer():
    p = make_problem("least_squares", reg=ElasticNet(0.1, 0.1))
    with pytest.raises(ValueError, match="L1 or Nuclear"):
        simulate(mc_fedda(), p, 1)


def test_a_run_shorter_than_the_schedule_stops_in_an_earlier_stage():
    """The documented limitation: the algorithm cannot see the run's length, so 5 rounds of
    a 2-stage schedule with 8-round stages return stage 1's C-FedDA output (λ_0 = 2λ)."""
    lam = 0.02
    p = make_problem("least_squares", reg=L1(lam))
    run = simulate(mc_fedda(stages=2, stage_rounds=8, radius=0.5, local_steps=2), p, 5,
                   metrics=[])
    first = simulate(c_fedda(radius=0.5, reg_strength=2 * lam, local_steps=2), p, 5,
                     metrics=[])
    np.testing.assert_allclose(run.x, first.x, rtol=0, atol=1e-13)
    assert "Give the run more rounds" in mc_fedda.__doc__


def test_matrix_model_l1_balls_bound_the_whole_model():
    """Stage 2 of MC-FedDA on a (d, k) model: ‖w − ŵ_1‖₁ ≤ ε_1 and ‖w‖₂ ≤ ρ on the whole model."""
    from fedcomp import ClientData
    from fedcomp.losses import Softmax

    rng = np.random.default_rng(0)
    feats = [rng.normal(size=(30, 4)) + i for i in range(3)]
    labels = [rng.integers(0, 3, size=30).astype(float) for _ in range(3)]
    p = Problem(Softmax(), L1(0.001, param_ndim=2), ClientData.from_lists(feats, labels),
                n_classes=3)
    run = simulate(mc_fedda(stages=2, stage_rounds=3, radius=0.2, local_steps=2,
                            domain_radius=0.08), p, 6, metrics=[])
    centre = run.server_state.w0
    assert np.abs(centre).sum() > 0  # off-centre second stage
    for w in (run.server_state.w, run.x):
        assert np.abs(w - centre).sum() <= 0.1 * (1 + 1e-9)
        assert np.linalg.norm(w) <= 0.08 * (1 + 1e-9)
