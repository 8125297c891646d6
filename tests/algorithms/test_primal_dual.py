"""FedADMM, FedPD and FedProx: convergence to x*, the special cases that tie them together
(FedPD with p = 1 is FedADMM with every client; FedProx with μ = 0 is FedAvg), a per-client
loop for FedProx, and FedProx's heterogeneity bias."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import RunOptions, simulate, solve_reference
from fedcomp.algorithms import fedadmm, fedavg, fedpd, fedprox, make_algorithm
from fedcomp.regularizers import L1
from tests._loops import loop_fedavg, loop_fedprox
from tests.conftest import make_problem


@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_exact_fedadmm_converges_to_reference(kind):
    p = make_problem(kind, reg=L1(0.05 if kind == "least_squares" else 0.01))
    ref = solve_reference(p)
    rho = 1.0 if kind == "least_squares" else 0.2
    run = simulate(fedadmm(rho=rho, local_solver="exact"), p, 300, reference=ref,
                   metrics=["optimality"], eval_every=300)
    assert run.history[-1]["optimality"] < 1e-6


def test_fedadmm_with_partial_participation_converges():
    p = make_problem("least_squares", reg=L1(0.05), n_clients=10)
    ref = solve_reference(p)
    run = simulate(fedadmm(rho=1.0, local_solver="exact"), p, 500, clients_per_round=3,
                   reference=ref, metrics=["optimality"], eval_every=500, seed=2)
    assert run.history[-1]["optimality"] < 1e-4


@pytest.mark.parametrize("solver", [dict(local_solver="exact"),
                                    dict(client_lr=0.3, local_steps=4)])
def test_fedpd_with_p_one_is_fedadmm_with_every_client(solver):
    p = make_problem("logistic", reg=L1(0.01))
    a = simulate(fedpd(eta=2.0, **solver), p, 12, batch_size=None, metrics=[])
    b = simulate(fedadmm(rho=0.5, **solver), p, 12, metrics=[])
    np.testing.assert_allclose(a.x, b.x, rtol=0, atol=1e-12)
    np.testing.assert_allclose(a.client_states.lam, b.client_states.lam, rtol=0, atol=1e-12)


def test_fedpd_random_communication_costs_and_local_drift():
    p = make_problem("least_squares", reg=L1(0.05))
    ref = solve_reference(p)
    every = simulate(fedpd(eta=1.0, local_solver="exact"), p, 300, reference=ref,
                     metrics=["optimality"], eval_every=300)
    assert every.history[-1]["optimality"] < 1e-6
    rare = simulate(fedpd(eta=1.0, comm_prob=0.3, local_solver="exact"), p, 300, reference=ref,
                    metrics=["optimality"], eval_every=300)
    # same communication, E[L] = 1/p local primal-dual iterations per round
    assert rare.counters.floats_up == every.counters.floats_up
    assert 2.5 < rare.counters.grad_evals / every.counters.grad_evals < 4.5
    # with exact local solves an uncommunicated iteration is a proximal-point step on the
    # client's own f_i (λ_i = −∇f_i(x_i), x_0 ← x_i − η∇f_i(x_i)), so x* is not its fixed
    # point: on heterogeneous clients p < 1 leaves a drift floor
    assert rare.history[-1]["optimality"] > 1e-2


def test_fedpd_needs_every_client():
    with pytest.raises(ValueError, match="full participation"):
        simulate(fedpd(), make_problem("least_squares"), 1, clients_per_round=3)


@pytest.mark.parametrize("batch_size, clients_per_round", [(None, None), (4, 3)])
def test_fedprox_matches_per_client_loop(batch_size, clients_per_round):
    p = make_problem("logistic", reg=L1(0.01), n_clients=6)
    kw = dict(seed=5, batch_size=batch_size, clients_per_round=clients_per_round)
    run = simulate(fedprox(mu=0.5, client_lr=0.4, local_steps=3, server_step=0.2), p, 6,
                   metrics=[], **kw, options=RunOptions(client_block=4))
    expected = loop_fedprox(p, 6, 0.5, 0.4, 3, server_step=0.2, **kw)
    np.testing.assert_allclose(run.x, expected, rtol=0, atol=1e-12)


def test_fedprox_with_mu_zero_is_fedavg():
    p = make_problem("logistic", reg=L1(0.01))
    run = simulate(fedprox(mu=0.0, client_lr=0.5, local_steps=4), p, 5, batch_size=3,
                   clients_per_round=4, seed=1, metrics=[])
    ref = simulate(fedavg(client_lr=0.5, local_steps=4), p, 5, batch_size=3, clients_per_round=4,
                   seed=1, metrics=[])
    np.testing.assert_allclose(run.x, ref.x, rtol=0, atol=1e-13)
    np.testing.assert_allclose(run.x, loop_fedavg(p, 5, 0.5, 4, seed=1, batch_size=3,
                                                  clients_per_round=4), rtol=0, atol=1e-12)


def test_fedprox_exact_fixed_point_is_biased_under_heterogeneity():
    # FedProx's fixed point solves Σ π_i ∇f_i(prox_{f_i/μ}(x)) = 0, not ∇f(x) = 0: with
    # heterogeneous clients it stalls away from x* (what FedDR's dual correction removes)
    p = make_problem("least_squares", reg=L1(0.0))
    ref = solve_reference(p)
    run = simulate(fedprox(mu=1.0, local_solver="exact"), p, 400, reference=ref,
                   metrics=["optimality"], eval_every=200)
    assert abs(run.history[-1]["optimality"] - run.history[-2]["optimality"]) < 1e-8
    assert run.history[-1]["optimality"] > 1e-3
    # a larger μ (closer to one gradient step per round) shrinks the bias
    tight = simulate(fedprox(mu=20.0, local_solver="exact"), p, 2000, reference=ref,
                     metrics=["optimality"], eval_every=2000)
    assert tight.history[-1]["optimality"] < 0.3 * run.history[-1]["optimality"]


@pytest.mark.parametrize("name, kwargs, match", [
    ("fedadmm", dict(rho=0.0), "rho"), ("fedpd", dict(comm_prob=1.5), "comm_prob"),
    ("fedprox", dict(mu=-1.0), "mu"), ("fedprox", dict(mu=0.0, local_solver="exact"), "mu > 0"),
    ("fedprox", dict(server_step=0.0), "server_step"),
])
def test_bad_hyperparameters_raise(name, kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_algorithm(name, **kwargs)
