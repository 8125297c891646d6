"""FedDR, FedSplit and asyncFedDR (Tran-Dinh et al. 2021): convergence to x*, the exact
special cases (FedSplit = Peaceman-Rachford, n = 1 = centralized Douglas-Rachford, zero
delays = FedDR with one client per round), the inexact solver, the nonconvex MCP case."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import (
    ClientData,
    ComputeTimes,
    Problem,
    RunOptions,
    simulate,
    simulate_async,
    solve_reference,
)
from fedcomp.algorithms import async_feddr, feddr, fedsplit, make_algorithm
from fedcomp.losses import LeastSquares, Logistic
from fedcomp.regularizers import L1, MCP, Zero
from tests._loops import loop_feddr
from tests.conftest import heterogeneous_data, make_problem


def lasso(n_clients=7, d=6, seed=0, alpha=0.01):
    data = heterogeneous_data(n_clients, d, seed, labels="real")
    return Problem(LeastSquares(), L1(alpha), data)


def lstsq_prox(problem, i, v, eta):
    """Closed-form prox_{η f_i}(v) of ½ mean squared residual: (AᵀWA + I/η)⁻¹(AᵀWb + v/η)."""
    a, b = problem.data.client_arrays(i)
    m = len(b)
    h = a.T @ a / m + np.eye(a.shape[1]) / eta
    return np.linalg.solve(h, a.T @ b / m + v / eta)


# --- convergence to the centralized solution -------------------------------------------------
@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_exact_feddr_converges_to_reference(kind):
    p = make_problem(kind, reg=L1(0.05 if kind == "least_squares" else 0.01))
    ref = solve_reference(p)
    eta = 1.0 if kind == "least_squares" else 5.0
    run = simulate(feddr(eta=eta, local_solver="exact"), p, 300, reference=ref,
                   metrics=["optimality"], eval_every=300)
    assert run.history[-1]["optimality"] < 1e-6
    # x̄ is a prox output: x*'s exact zeros (one or two here) are reproduced exactly
    assert 0 < np.sum(ref.x == 0) < ref.x.size
    np.testing.assert_array_equal(run.x == 0, ref.x == 0)


@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_feddr_with_30_percent_participation_converges(kind):
    p = make_problem(kind, reg=L1(0.01), n_clients=10)
    ref = solve_reference(p)
    eta = 1.0 if kind == "least_squares" else 5.0
    run = simulate(feddr(eta=eta, alpha=1.5, local_solver="exact"), p, 400, clients_per_round=3,
                   reference=ref, metrics=["optimality"], eval_every=400, seed=1)
    assert run.history[-1]["optimality"] < 1e-4
    # every round sends d floats to and from exactly 3 clients (plus the warm-up round)
    d = p.param_shape[0]
    assert run.counters.floats_up == (400 * 3 + 10) * d


def test_code_init_converges_too():
    p = lasso()
    ref = solve_reference(p)
    run = simulate(feddr(eta=1.0, local_solver="exact", init="code"), p, 300, reference=ref,
                   metrics=["optimality"], eval_every=300)
    assert run.history[-1]["optimality"] < 1e-6
    assert run.counters.grad_evals == 300 * p.n_clients  # no warm-up round


# --- exact special cases ---------------------------------------------------------------------
def peaceman_rachford(p, eta, rounds):
    """FedSplit (Pathak & Wainwright 2020) from FedDR's initial point, with the server prox
    ``x̄ = prox_{ηg}(Σ π_i z_i)`` of the composite case (the identity for g = 0)."""
    x0 = np.zeros(p.param_shape)
    z = np.array([2 * lstsq_prox(p, i, x0, eta) - x0 for i in range(p.n_clients)])
    xbar = x0
    for _ in range(rounds):
        half = np.array([lstsq_prox(p, i, 2 * xbar - z[i], eta) for i in range(p.n_clients)])
        z = z + 2 * (half - xbar)
        xbar = p.prox(p.weights @ z, eta)
    return xbar


def test_alpha_two_without_regularizer_is_fedsplit():
    p = make_problem("least_squares", reg=Zero())
    xbar = peaceman_rachford(p, 0.7, 15)
    for alg in (feddr(eta=0.7, alpha=2.0, local_solver="exact"), fedsplit(eta=0.7)):
        run = simulate(alg, p, 15, metrics=[])
        np.testing.assert_allclose(run.x, xbar, rtol=0, atol=1e-10)


def test_alpha_two_with_l1_is_composite_fedsplit():
    p = Problem(LeastSquares(), L1(0.05), heterogeneous_data(5, 6, 0, labels="real"),
                weighting="samples")
    xbar = peaceman_rachford(p, 0.7, 15)
    run = simulate(fedsplit(eta=0.7), p, 15, metrics=[])
    np.testing.assert_allclose(run.x, xbar, rtol=0, atol=1e-10)
    assert 0 < np.count_nonzero(xbar) < xbar.size  # the ℓ1 prox is active


@pytest.mark.parametrize("kind", ["least_squares", "logistic"])
def test_fedsplit_with_l1_converges_to_reference(kind):
    """Strongly convex f_i: Peaceman-Rachford converges linearly, here to the reference's
    floor (measured optimality 5.7e-10 for the lasso, 5.3e-10 for ℓ1-logistic after 200
    rounds; 1.4e-8 and 5.9e-10 after 100). Matching x* this closely also pins the server
    prox: FedSplit without it goes to the unregularized solution."""
    p = make_problem(kind, reg=L1(0.05 if kind == "least_squares" else 0.01), n_clients=5,
                     weighting="samples")
    ref = solve_reference(p)
    eta = 1.0 if kind == "least_squares" else 5.0
    run = simulate(fedsplit(eta=eta), p, 200, reference=ref, metrics=["optimality"],
                   eval_every=200)
    assert run.history[-1]["optimality"] < 1e-7
    assert 0 < np.sum(ref.x == 0) < ref.x.size  # the ℓ1 term shapes x*
    np.testing.assert_array_equal(run.x == 0, ref.x == 0)


def test_one_client_is_centralized_douglas_rachford():
    full = lasso(alpha=0.05)
    f, t = full.data.client_arrays(0)
    p = Problem(LeastSquares(), L1(0.05), ClientData.from_lists([f], [t]))
    eta, alpha, rounds = 0.8, 1.3, 25
    # relaxed Douglas-Rachford on f + g (supplement eq. (14) with n = 1)
    x0 = np.zeros(p.param_shape)
    y, x = x0, lstsq_prox(p, 0, x0, eta)
    xbar = x0
    for _ in range(rounds):
        y = y + alpha * (xbar - x)
        x = lstsq_prox(p, 0, y, eta)
        xbar = p.prox(2 * x - y, eta)
    run = simulate(feddr(eta=eta, alpha=alpha, local_solver="exact"), p, rounds, metrics=[])
    np.testing.assert_allclose(run.x, xbar, rtol=0, atol=1e-12)
    assert 0 < np.count_nonzero(xbar) < xbar.size  # the ℓ1 prox is active


@pytest.mark.parametrize("batch_size, clients_per_round, init",
                         [(None, None, "paper"), (4, 3, "paper"), (5, 2, "code")])
def test_feddr_matches_per_client_loop(batch_size, clients_per_round, init):
    p = make_problem("logistic", reg=L1(0.01), n_clients=6)
    kw = dict(seed=3, batch_size=batch_size, clients_per_round=clients_per_round)
    alg = feddr(eta=2.0, alpha=1.5, client_lr=0.4, local_steps=3, init=init)
    run = simulate(alg, p, 6, metrics=[], **kw, options=RunOptions(client_block=2))
    expected = loop_feddr(p, 6, 2.0, 1.5, 0.4, 3, init=init, **kw)
    np.testing.assert_allclose(run.x, expected, rtol=0, atol=1e-12)


# --- inexact local solver --------------------------------------------------------------------
def test_more_local_epochs_give_a_smaller_final_error():
    p = make_problem("logistic", reg=L1(0.01), n_clients=7)
    ref = solve_reference(p)
    errors = []
    for epochs in (5, 10, 20):
        alg = feddr(eta=5.0, alpha=1.0, client_lr=0.1, local_epochs=epochs)
        run = simulate(alg, p, 40, batch_size=10, clients_per_round=4, seed=0, reference=ref,
                       metrics=["optimality"], eval_every=40)
        errors.append(run.history[-1]["optimality"])
    assert errors[0] > errors[1] > errors[2], errors
    assert errors[0] > 1.5 * errors[2], errors


def test_epochs_mean_passes_over_each_clients_data():
    p = make_problem("least_squares", n_clients=4)
    run = simulate(feddr(client_lr=0.1, local_epochs=2, init="code"), p, 1, batch_size=10,
                   metrics=[])
    # ⌈n_i / 10⌉ minibatch steps per epoch, counted only for the clients still stepping
    assert run.counters.grad_evals == int(2 * np.ceil(p.data.counts / 10).sum())


# --- nonconvex ---------------------------------------------------------------------------------
def test_feddr_reaches_stationarity_with_mcp():
    reg = MCP(alpha=0.05, gamma=2.0)
    p = Problem(LeastSquares(), reg, heterogeneous_data(8, 6, seed=2, labels="real"))
    run = simulate(feddr(eta=0.5, alpha=1.0, local_solver="exact"), p, 300, clients_per_round=4,
                   metrics=["prox_grad_norm"], eval_every=300)
    assert run.history[0]["prox_grad_norm"] > 0.1
    assert run.history[-1]["prox_grad_norm"] < 1e-3
    with pytest.raises(ValueError, match="lower eta"):
        simulate(feddr(eta=3.0, local_solver="exact"), p, 1)


# --- asynchronous ------------------------------------------------------------------------------
def heterogeneous_clock(n):
    return ComputeTimes(mean=np.linspace(1.0, 4.0, n), distribution="exponential")


@pytest.mark.parametrize("solver", [dict(local_solver="exact"),
                                    dict(client_lr=0.3, local_steps=3)])
@pytest.mark.parametrize("zero_delay", [dict(stale=False), dict(max_delay=0)],
                         ids=["stale=False", "max_delay=0"])
def test_async_with_zero_delays_is_feddr_with_one_client_per_round(solver, zero_delay):
    # stale=False computes every arrival from the current model; max_delay=0 lets one job
    # run at a time, so each applied update was computed from the current model too
    p = make_problem("logistic", reg=L1(0.01), n_clients=5)
    steps, batch = 30, (None if "local_solver" in solver else 4)
    run = simulate_async(async_feddr(eta=2.0, alpha=1.2, **solver), p, steps,
                         compute_times=heterogeneous_clock(5), seed=4, batch_size=batch,
                         metrics=[], **zero_delay)
    if "max_delay" in zero_delay:
        assert run.delays.max() == 0 and run.waited > 0
    order = run.order
    sync = simulate(feddr(eta=2.0, alpha=1.2, **solver), p, steps, seed=4, batch_size=batch,
                    metrics=[], options=RunOptions(sampling=lambda r: [order[r]]))
    np.testing.assert_allclose(run.x, sync.x, rtol=0, atol=1e-12)
    for a, b in zip(run.client_states, sync.client_states, strict=True):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)


def test_async_with_delays_converges_and_is_reproducible():
    p = lasso(n_clients=6)
    ref = solve_reference(p)
    clock = heterogeneous_clock(6)
    alg = async_feddr(eta=1.0, alpha=1.0, local_solver="exact")
    run = simulate_async(alg, p, 1500, compute_times=clock, seed=7, reference=ref,
                         metrics=["optimality"], eval_every=500)
    assert run.history[-1]["optimality"] < 1e-4
    assert run.delays.max() >= 3  # stale updates really happen
    assert np.all(np.diff(run.times) >= 0)
    # the slow clients (larger mean) arrive less often
    counts = np.bincount(run.order, minlength=6)
    assert counts[0] > 2 * counts[-1]
    again = simulate_async(alg, p, 200, compute_times=clock, seed=7, metrics=[])
    np.testing.assert_array_equal(again.order, run.order[:200])
    np.testing.assert_array_equal(again.times, run.times[:200])
    other = simulate_async(alg, p, 200, compute_times=clock, seed=8, metrics=[])
    assert not np.array_equal(other.order, again.order)


def test_async_staleness_bound_holds_and_still_converges():
    p = lasso(n_clients=6)
    ref = solve_reference(p)
    clock = heterogeneous_clock(6)
    free = simulate_async(async_feddr(eta=1.0, local_solver="exact"), p, 1500,
                          compute_times=clock, seed=7, metrics=[])
    assert free.delays.max() > 2 and free.waited == 0  # the bound below binds
    alg = async_feddr(eta=1.0, local_solver="exact", max_delay=2)
    run = simulate_async(alg, p, 1500, compute_times=clock, seed=7, reference=ref,
                         metrics=["optimality"], eval_every=500)
    assert run.delays.max() <= 2 and run.history[-1]["max_delay"] <= 2
    assert run.history[-1]["optimality"] < 1e-4
    # nothing is dropped: the barrier holds clients back instead, idle on the clock
    assert run.waited > 0 and run.history[-1]["waited"] == run.waited
    assert np.all(np.bincount(run.order, minlength=6) > 0)
    # every job started reads the model once; 1 to τ + 1 = 3 jobs are left at the end
    d = p.param_shape[0]
    assert run.counters.floats_up == (1500 + 6) * d  # + the warm-up round
    assert (6 + 1500 + 1) * d <= run.counters.floats_down <= (6 + 1500 + 3) * d
    # the idle time: the bounded run is slower in time, not steps
    assert run.times[-1] > free.times[-1]
    again = simulate_async(alg, p, 1500, compute_times=clock, seed=7, metrics=[])
    np.testing.assert_array_equal(again.order, run.order)
    np.testing.assert_array_equal(again.x, run.x)


@pytest.mark.parametrize("max_delay", [2, 5])
def test_async_staleness_bound_applies_every_straggler(max_delay):
    # the last 3 of 6 clients take twice as long as the others, who do max_delay + 1 server
    # steps meanwhile: dropping the arrivals older than max_delay steps starved them (none
    # applied) and the run went to the fast clients' solution (optimality 0.58); the
    # barrier applies every client's work within the bound (Assumption 4.1 of the paper)
    p = lasso(n_clients=6)
    ref = solve_reference(p)
    clock = ComputeTimes(distribution="constant", slow_fraction=0.5, slowdown=2.0)
    run = simulate_async(async_feddr(eta=1.0, local_solver="exact", max_delay=max_delay), p,
                         1500, compute_times=clock, seed=7, reference=ref,
                         metrics=["optimality"], eval_every=1500)
    assert run.delays.max() <= max_delay and run.waited > 0
    assert np.bincount(run.order, minlength=6).min() >= 1500 // 12
    assert run.history[-1]["optimality"] < 1e-6


def test_async_barrier_starts_a_held_client_when_the_job_ahead_arrives():
    # max_delay=0: one job at a time; the clients held back start in first-come order (at
    # first by id) when the job ahead of them arrives, so with constant compute times the
    # arrivals go round-robin and the clock is the running sum of the compute times
    p = lasso(n_clients=3)
    clock = ComputeTimes(mean=[1.0, 2.0, 3.0], distribution="constant")
    run = simulate_async(async_feddr(eta=1.0, local_solver="exact", max_delay=0), p, 7,
                         compute_times=clock, metrics=[])
    start = run.history[0]["sim_time"]  # the warm-up round: the slowest client's time
    assert start == 3.0
    np.testing.assert_array_equal(run.order, [0, 1, 2, 0, 1, 2, 0])
    np.testing.assert_allclose(run.times, start + np.cumsum([1, 2, 3, 1, 2, 3, 1]), rtol=0)
    # one client computes, the other two wait, all the time
    assert run.waited == pytest.approx(2 * (run.times[-1] - start), rel=1e-12)
    assert run.history[-1]["waited"] == run.waited


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_max_delay_is_validated(bad):
    with pytest.raises(ValueError, match="max_delay must be an integer >= 0"):
        async_feddr(max_delay=bad)
    with pytest.raises(ValueError, match="max_delay must be an integer >= 0"):
        simulate_async(async_feddr(), lasso(), 1, max_delay=bad)
    with pytest.raises(ValueError, match="give the bound in one place"):
        simulate_async(async_feddr(max_delay=2), lasso(), 1, max_delay=3)


def test_async_algorithm_refuses_the_round_runner():
    with pytest.raises(ValueError, match="simulate_async"):
        simulate(async_feddr(), lasso(), 1)


def test_sync_rounds_last_as_long_as_the_slowest_participant():
    p = lasso(n_clients=4)
    clock = ComputeTimes(mean=[1.0, 2.0, 3.0, 4.0], distribution="constant")
    run = simulate(feddr(local_solver="exact", init="code"), p, 3, metrics=[], clients_per_round=2,
                   seed=0, options=RunOptions(compute_times=clock))
    from fedcomp._random import sample_clients

    expected = np.cumsum([1.0 + sample_clients(0, r, 4, 2).max() for r in range(3)])
    assert [row["sim_time"] for row in run.history] == [0.0, *expected.tolist()]


# --- validation --------------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    (dict(alpha=2.5), "alpha must be in"), (dict(eta=0.0), "eta"),
    (dict(init="zeros"), "init must be"), (dict(local_solver="lbfgs"), "local_solver"),
    (dict(local_steps=None), "local_steps or local_epochs"), (dict(local_epochs=0), "local_epochs"),
    (dict(local_solver="exact", tol=0), "tol"), (dict(unknown=1), "accepted"),
])
def test_bad_feddr_hyperparameters_raise(kwargs, match):
    with pytest.raises(ValueError, match=match):
        make_algorithm("feddr", **kwargs)


def test_fedsplit_needs_full_participation():
    with pytest.raises(ValueError, match="full participation"):
        simulate(fedsplit(), lasso(), 1, clients_per_round=3)


def test_exact_solver_needs_a_hessian():
    from fedcomp.losses import Softmax
    rng = np.random.default_rng(0)
    data = ClientData.from_lists([rng.normal(size=(10, 3))] * 2, [rng.integers(0, 3, 10)] * 2)
    p = Problem(Softmax(), L1(0.01, param_ndim=2), data, n_classes=3)
    with pytest.raises(ValueError, match="local_solver='sgd'"):
        simulate(feddr(local_solver="exact"), p, 1)


def test_logistic_hessian_matches_finite_differences():
    p = make_problem("logistic", n_clients=3)
    batch = p.data.full_batch()
    rng = np.random.default_rng(1)
    x = rng.normal(size=(3, *p.param_shape))
    loss = Logistic(l2=0.01)
    h = loss.hessian(x, batch)
    eps = 1e-6
    for j in range(p.param_shape[0]):
        e = np.zeros_like(x)
        e[:, j] = eps
        fd = (loss.grad(x + e, batch) - loss.grad(x - e, batch)) / (2 * eps)
        np.testing.assert_allclose(h[:, :, j], fd, rtol=1e-6, atol=1e-8)
    hl = LeastSquares(l2=0.1).hessian(x, batch)
    g0 = LeastSquares(l2=0.1).grad(np.zeros_like(x), batch)
    np.testing.assert_allclose(LeastSquares(l2=0.1).grad(x, batch),
                               g0 + np.einsum("bij,bj->bi", hl, x), atol=1e-12)


def test_async_seed_must_be_a_nonnegative_integer():
    p = make_problem("logistic", n_clients=3)
    with pytest.raises(ValueError, match=r"seed must be a nonnegative integer \(got seed=-1\)"):
        simulate_async(async_feddr(eta=1.0, local_solver="exact"), p, 3, seed=-1)


@pytest.mark.parametrize("kwargs, match", [
    (dict(server_steps=-1), r"server_steps must be a nonnegative integer \(got -1\)"),
    (dict(server_steps=2.0), "server_steps"),
    (dict(server_steps=2, eval_every=0), "eval_every"),
    (dict(server_steps=2, batch_size=0), "batch_size"),
])
def test_async_checks_the_run_arguments_like_simulate(kwargs, match):
    p = make_problem("logistic", n_clients=3)
    with pytest.raises(ValueError, match=match):
        simulate_async(async_feddr(eta=1.0, local_solver="exact"), p, **kwargs)


def test_async_takes_numpy_integers_like_simulate():
    p = make_problem("logistic", n_clients=3)
    run = simulate_async(async_feddr(eta=1.0, local_solver="exact"), p, np.int64(3),
                         eval_every=np.int64(2), metrics=[])
    assert [row["round"] for row in run.history] == [0, 2, 3]
