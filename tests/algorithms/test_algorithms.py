"""Reference tests for FedAvg, FedMiD, FedDA and ZA1 (exact special cases and invariants)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from fedcomp import ClientData, Problem, RunOptions, simulate
from fedcomp.algorithms import (
    REGISTRY,
    execution_of,
    fedavg,
    fedda,
    fedmid,
    make_algorithm,
    za1,
    za1_correction,
)
from fedcomp.losses import LeastSquares, Logistic
from fedcomp.reference import solve_reference
from fedcomp.regularizers import L1, ElasticNet
from tests._loops import loop_fedavg, loop_fedda, loop_fedmid, loop_za1
from tests.conftest import heterogeneous_data, make_problem


def single_client(problem: Problem) -> Problem:
    f, t = problem.data.client_arrays(0)
    return Problem(problem.loss, problem.regularizer, ClientData.from_lists([f], [t]))


# --- exact equivalences with per-client loops ------------------------------------------------
@pytest.mark.parametrize("batch_size", [None, 4])
@pytest.mark.parametrize("clients_per_round", [None, 3])
def test_fedavg_fedmid_fedda_match_per_client_loops(batch_size, clients_per_round):
    p = make_problem("logistic", n_clients=7)
    kw = dict(batch_size=batch_size, clients_per_round=clients_per_round, seed=3)
    cases = [
        (fedavg(0.5, 3, server_prox=True),
         loop_fedavg(p, 6, 0.5, 3, server_prox=True, **kw)),
        (fedmid(0.5, 3, server_lr=0.7),
         loop_fedmid(p, 6, 0.5, 3, server_lr=0.7, **kw)),
        (fedmid(0.5, 3, server_prox_step="unscaled"),
         loop_fedmid(p, 6, 0.5, 3, server_step=0.5, **kw)),
        (fedda(0.5, 3, server_lr=0.8), loop_fedda(p, 6, 0.5, 3, server_lr=0.8, **kw)),
    ]
    for alg, expected in cases:
        run = simulate(alg, p, 6, metrics=[], **kw, options=RunOptions(client_block=2))
        np.testing.assert_allclose(run.x, expected, rtol=0, atol=1e-12,
                                   err_msg=str(alg.hyperparameters))


@pytest.mark.parametrize("batch_size", [None, 5])
def test_za1_matches_per_client_loop(batch_size):
    p = make_problem("logistic", n_clients=5, weighting="samples")
    run = simulate(za1(0.8, 4, 0.9), p, 7, batch_size=batch_size, seed=1, metrics=[],
                   options=RunOptions(client_block=2))
    # the loop weights the server average by π too
    expected = loop_za1(p, 7, 0.8, 4, 0.9, seed=1, batch_size=batch_size)
    np.testing.assert_allclose(run.x, expected, rtol=0, atol=1e-12)


# --- the exact special cases of the issue ----------------------------------------------------
def test_fedda_one_client_one_step_is_centralized_dual_averaging():
    p = single_client(make_problem("logistic", reg=L1(0.02)))
    lr, rounds = 0.7, 25
    run = simulate(fedda(lr, 1), p, rounds, metrics=[])
    z = np.zeros(p.param_shape)
    x = z.copy()
    for t in range(rounds):  # z_{t+1} = z_t − η ∇f(x_t),  x_{t+1} = prox_{(t+1)η g}(z_{t+1})
        z = z - lr * np.asarray(p.smooth_grad(x))
        x = p.prox(z, (t + 1) * lr)
    np.testing.assert_allclose(run.x, x, rtol=0, atol=1e-12)
    assert np.count_nonzero(x) < x.size  # the ℓ1 prox is active in this check


@pytest.mark.parametrize("reg", [L1(0.02), ElasticNet(0.02, 0.1)])
def test_fedmid_one_client_one_step_is_proximal_gradient(reg):
    p = single_client(make_problem("least_squares", reg=reg))
    lr, rounds = 0.5, 30
    run = simulate(fedmid(lr, 1, server_prox=False), p, rounds, metrics=[])
    x = np.zeros(p.param_shape)
    for _ in range(rounds):
        x = p.prox(x - lr * np.asarray(p.smooth_grad(x)), lr)
    np.testing.assert_allclose(run.x, x, rtol=0, atol=1e-12)
    # the default server prox applies prox_{η_s K η_c g} after averaging: PGD on f + g then
    # a second prox, i.e. for ℓ1 proximal gradient with threshold 2·η·alpha per step
    run2 = simulate(fedmid(lr, 1), p, rounds, metrics=[])
    x = np.zeros(p.param_shape)
    for _ in range(rounds):
        x = p.prox(p.prox(x - lr * np.asarray(p.smooth_grad(x)), lr), lr)
    np.testing.assert_allclose(run2.x, x, rtol=0, atol=1e-12)


def exact_lasso_solution(p: Problem, approx: np.ndarray) -> np.ndarray:
    """Polish an approximate ridge-lasso solution to machine precision.

    On the support S and signs s of ``approx`` the optimality condition is the linear system
    ``(A_Sᵀ W A_S + l2 I) x_S = A_Sᵀ W y − alpha·s``.
    """
    a, y = p.data.client_arrays(0)
    w = np.full(len(y), 1.0 / len(y))
    support = np.abs(approx) > 1e-8
    s = np.sign(approx[support])
    a_s = a[:, support]
    lhs = a_s.T @ (w[:, None] * a_s) + p.loss.l2 * np.eye(support.sum())
    x = np.zeros_like(approx)
    x[support] = np.linalg.solve(lhs, a_s.T @ (w * y) - p.regularizer.alpha * s)
    return x


def test_za1_single_client_fixed_point():
    """Seed 000 §7.2: n = 1, full gradients, x̄ = x* − η̃∇f(x*) ⇒ the output stays x*."""
    base = make_problem("least_squares", reg=L1(0.05))
    p = single_client(Problem(LeastSquares(l2=0.01), base.regularizer, base.data))
    x_star = exact_lasso_solution(p, solve_reference(p, use_cache=False).x)
    # x_star satisfies the prox fixed-point equation to machine precision
    lr, tau = 0.5 / p.smoothness(), 3
    grad = np.asarray(p.smooth_grad(x_star))
    assert np.abs(p.prox(x_star - lr * grad, lr) - x_star).max() < 1e-15
    assert 0 < np.count_nonzero(x_star) < x_star.size  # a genuinely composite fixed point
    x0 = x_star - lr * tau * grad
    run = simulate(za1(lr, tau), p, 20, x0=x0, metrics=[])
    np.testing.assert_allclose(run.x, x_star, rtol=0, atol=1e-12)
    np.testing.assert_allclose(run.server_state.x, x0, rtol=0, atol=1e-12)


def test_za1_corrections_average_to_zero_every_round():
    p = make_problem("logistic", n_clients=6, weighting="samples")
    lr, tau, server_lr = 0.7, 4, 1.3
    alg = za1(lr, tau, server_lr)
    for rounds in range(1, 6):
        run = simulate(alg, p, rounds, metrics=[], batch_size=3)
        c = za1_correction(run.client_states, run.server_state.x, lr, server_lr, tau)
        weighted = np.tensordot(p.weights, np.asarray(c), axes=1)
        assert np.abs(weighted).max() < 1e-13
        assert np.abs(np.asarray(c)).max() > 1e-3  # corrections themselves are not zero


def test_za1_rejects_partial_participation():
    p = make_problem("logistic")
    with pytest.raises(ValueError, match="full participation"):
        simulate(za1(), p, 2, clients_per_round=3)


def test_fedda_rejects_weakly_convex_regularizer():
    from fedcomp.regularizers import MCP

    p = make_problem("least_squares", reg=MCP(alpha=0.1, gamma=3.0))
    with pytest.raises(ValueError, match="convex regularizer"):
        simulate(fedda(), p, 2)


# --- hyperparameter validation ---------------------------------------------------------------
@pytest.mark.parametrize("name", ["fedavg", "fedmid", "fedda", "za1"])
def test_invalid_hyperparameters_raise(name):
    with pytest.raises(ValueError, match="client_lr"):
        make_algorithm(name, client_lr=-1.0)
    with pytest.raises(ValueError, match="local_steps"):
        make_algorithm(name, local_steps=0)
    with pytest.raises(ValueError, match="accepted"):
        make_algorithm(name, step_size=0.1)


@pytest.mark.parametrize("name, switch", [("fedavg", "server_prox"), ("scaffold", "server_prox"),
                                          ("scaffnew", "server_prox"), ("fedpd", "server_prox"),
                                          ("fedmid", "server_prox"), ("za1", "final_prox")])
@pytest.mark.parametrize("value", ["False", "none", 0, None])
def test_switches_must_be_booleans(name, switch, value):
    # "False" is what `--set ...server_prox=False` gives (TOML booleans are lowercase); taken
    # by truthiness it would turn the server prox *on*.
    with pytest.raises(ValueError, match=rf"{switch} must be True or False \(got {switch}="):
        make_algorithm(name, **{switch: value})
    assert not make_algorithm(name, **{switch: np.bool_(False)}).hyperparameters[switch]


@pytest.mark.parametrize("value", ["scaled", "unscaled", "none"])
def test_fedmid_server_prox_strings_name_the_step_option(value):
    # the server prox is a switch in every algorithm; FedMiD's step convention is its own
    with pytest.raises(ValueError, match="server_prox must be True or False.*server_prox_step"):
        fedmid(server_prox=value)
    with pytest.raises(ValueError, match="server_prox_step must be one of"):
        fedmid(server_prox_step="none")


@pytest.mark.parametrize("params, hint", [
    (dict(client_lr=np.float32(0.25)), "pass 0.25"),
    (dict(client_lr=np.float64(0.5)), "pass 0.5"),  # a float subclass, but it would promote
    (dict(local_steps=np.int64(5)), "pass 5"),
])
def test_numpy_scalar_hyperparameters_get_a_message_naming_the_fix(params, hint):
    with pytest.raises(ValueError, match=f"NumPy scalar: {hint}"):
        make_algorithm("za1", **params)


def test_unknown_algorithm_lists_valid_names():
    with pytest.raises(ValueError, match="za1"):
        make_algorithm("fedsomething")


# --- convergence to the centralized solution (convex) ---------------------------------------
def test_za1_converges_to_reference_on_heterogeneous_lasso():
    data = heterogeneous_data(n_clients=5, d=8, seed=4, labels="real")
    p = Problem(LeastSquares(), L1(0.01), data)
    ref = solve_reference(p)
    lr = 0.5 / p.smoothness()
    run = simulate(za1(lr, 5), p, 600, reference=ref, metrics=["optimality"], eval_every=600)
    assert run.history[-1]["optimality"] < 1e-9
    # FedMiD with the same steps stalls at its drift floor on this heterogeneous problem
    mid = simulate(fedmid(lr, 5), p, 600, reference=ref, metrics=["optimality"], eval_every=600)
    assert mid.history[-1]["optimality"] > 1e-4


def test_logistic_problem_fixture_is_heterogeneous(logistic_problem):
    # client optima differ: the per-client gradients at x* do not vanish
    ref = solve_reference(logistic_problem)
    grads = np.asarray(logistic_problem.client_grads(np.asarray(ref.x)))
    assert np.linalg.norm(grads, axis=1).min() > 1e-2
    assert isinstance(logistic_problem.loss, Logistic)


@pytest.mark.parametrize("alg, match", [
    (fedmid(client_lr=0.7, local_steps=5), "up to 3.5"),  # the scaled server prox step
    (za1(client_lr=1.0, local_steps=5), "up to 5"),
    (fedmid(client_lr=4.0, local_steps=1, server_prox=False), "up to 4"),
])
def test_weakly_convex_prox_steps_are_checked_before_round_one(alg, match):
    from fedcomp.regularizers import MCP

    p = make_problem("least_squares", reg=MCP(alpha=0.1, gamma=3.0))
    with pytest.raises(ValueError, match=f"1/rho=3.*{match}"):
        simulate(alg, p, 1)
    ok = make_algorithm(alg.name, client_lr=0.1, local_steps=2)
    simulate(ok, p, 2, metrics=[])  # steps below 1/ρ run


@pytest.mark.parametrize("name", list(REGISTRY))
def test_repr_names_the_algorithm_and_its_hyperparameters(name):
    algorithm = make_algorithm(name)
    text = repr(algorithm)
    assert text.startswith(f"{name}(") and text.endswith(")") and "<function" not in text
    for key, value in algorithm.hyperparameters.items():
        assert f"{key}={value!r}" in text
    factory = REGISTRY.entry(name).factory
    if set(algorithm.hyperparameters) <= set(inspect.signature(factory).parameters):
        # then the repr is the call that builds it again
        rebuilt = eval(text, {name: factory})  # noqa: S307 - our own repr and factory
        assert rebuilt.hyperparameters == algorithm.hyperparameters
        assert repr(rebuilt) == text
    else:
        # the gossip variants record the switches their shared builder set (dfedda_gt:
        # gradient_tracking=True), which their factories fix rather than take
        assert execution_of(name) == "decentralized"


def test_repr_shows_the_values_given():
    assert repr(za1(client_lr=0.5, local_steps=3)) == (
        "za1(client_lr=0.5, local_steps=3, server_lr=1.0, final_prox=True)")
