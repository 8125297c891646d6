"""CompressedScaffnew, TAMUNA, LoCoDL (Condat et al.) and their pattern compressor ``perm_s``:
special cases that give known algorithms, linear convergence to the centralised x*, block-size
invariance, exact bit counts, and the refusals that name the fix."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import RunOptions, simulate, solve_reference
from fedcomp.algorithms import compressed_scaffnew, fedavg, locodl, scaffnew, tamuna
from fedcomp.algorithms._condat import cohort
from fedcomp.compressors import PermS
from fedcomp.regularizers import L1, Zero
from tests.conftest import make_problem

GAMMA, P = 1.0, 0.3  # L_i <= 0.41 on this problem: γ < 2/L


@pytest.fixture(scope="module")
def problem():
    return make_problem("logistic", reg=Zero(), n_clients=6, d=8)


@pytest.fixture(scope="module")
def x_star(problem):
    return solve_reference(problem, tol=1e-13).x


def _error(alg, problem, x_star, rounds, **kw):
    return float(np.linalg.norm(simulate(alg, problem, rounds, seed=1, metrics=[], **kw).x
                                - x_star))


# --- the pattern compressor -----------------------------------------------------------------

@pytest.mark.parametrize(("d", "n", "s"), [(8, 6, 2), (7, 6, 3), (2, 12, 3), (5, 4, 4)])
def test_pattern_keeps_every_coordinate_at_exactly_s_clients(d, n, s):
    x = np.random.default_rng(0).normal(size=(n, d))
    decoded, bits = PermS(s=s, n=n).compress(x, 3, 5, np.arange(n))
    kept = decoded != 0
    assert kept.sum(axis=0).tolist() == [s] * d
    assert int(bits.sum()) == d * s * 64  # s/n of the uncompressed n·d·64 bits
    assert (kept.sum(axis=1) * 64).tolist() == bits.tolist()
    # the average of the n decoded messages is each coordinate's mean over its s senders
    np.testing.assert_allclose(decoded.mean(axis=0), (x * kept).sum(axis=0) / s, rtol=1e-14)
    if s == n:
        assert decoded is x  # uncompressed: the rows themselves


def test_pattern_is_unbiased_over_rounds_for_one_client():
    """E[(n/s) q_i ⊙ x] = x: one client over 8000 rounds (its column is uniform), the mean
    within 5 standard errors of the exact variance x²(n/s − 1); a 5 % bias fails it."""
    x = np.array([[0.3, -1.7, 2.5, 0.0, -0.05, 4.0, 1.1]])
    compressor, rounds = PermS(s=3, n=4), 8000
    draws = np.concatenate([compressor.compress(x, 7, r, [3])[0] for r in range(rounds)])
    bound = 5 * np.sqrt(x[0] ** 2 * (4 / 3 - 1) / rounds) + 1e-12
    assert np.all(np.abs(draws.mean(axis=0) - x[0]) <= bound)
    assert not np.all(np.abs(0.95 * draws.mean(axis=0) - x[0]) <= bound)


def test_pattern_refuses_positions_outside_the_pattern():
    with pytest.raises(ValueError, match=r"positions must be in 0..n-1=3 .* set n"):
        PermS(s=2, n=4).compress(np.ones((1, 5)), 0, 0, [4])
    with pytest.raises(ValueError, match=r"s .* must be an integer in 1..n=4"):
        PermS(s=5, n=4)


# --- special cases --------------------------------------------------------------------------

def test_compressed_scaffnew_with_s_equal_n_is_scaffnew(problem):
    """s = n (χ = 1): Scaffnew. fedcomp's scaffnew uploads x̂_i − (γ/p)h_i (Σ h_i = 0), so the
    averages differ by rounding only: 1e-13 after 40 rounds, where s = n − 1 is far off."""
    ref = simulate(scaffnew(client_lr=GAMMA, comm_prob=P), problem, 40, seed=4, metrics=[])
    full = simulate(compressed_scaffnew(client_lr=GAMMA, comm_prob=P, s=6), problem, 40, seed=4,
                    metrics=[])
    np.testing.assert_allclose(full.x, ref.x, rtol=0, atol=1e-13)
    np.testing.assert_allclose(full.client_states.h, ref.client_states.h, rtol=0, atol=1e-12)
    assert full.counters.bits_up == ref.counters.bits_up
    assert full.counters.grad_evals == ref.counters.grad_evals
    less = simulate(compressed_scaffnew(client_lr=GAMMA, comm_prob=P, s=5), problem, 40, seed=4,
                    metrics=[])
    assert np.linalg.norm(less.x - ref.x) > 1e-6


def test_tamuna_with_every_client_is_compressed_scaffnew_bit_for_bit(problem):
    chi = 6 * (3 - 1) / (3 * (6 - 1))
    a = simulate(tamuna(client_lr=GAMMA, comm_prob=P, s=3, cohort_size=6), problem, 30, seed=2,
                 metrics=[])
    b = simulate(compressed_scaffnew(client_lr=GAMMA, comm_prob=P, s=3, chi=chi), problem, 30,
                 seed=2, metrics=[])
    assert np.array_equal(a.x, b.x)
    assert a.counters.as_dict() == b.counters.as_dict()


def test_locodl_uncompressed_communicating_every_step_is_gradient_descent(problem):
    """p = 1, ρ = χ = 1, identity: every step sets x_i = y to ½ŷ + ½Σπ_i x̂_i =
    x − (γ/2)∇f(x), because Σπ_i u_i + v = 0 — gradient descent with step γ/2 (FedAvg with
    one local step)."""
    gd = simulate(fedavg(client_lr=GAMMA / 2, local_steps=1), problem, 25, metrics=[])
    lo = simulate(locodl(client_lr=GAMMA, comm_prob=1.0, rho=1.0), problem, 25, metrics=[])
    np.testing.assert_allclose(lo.x, gd.x, rtol=0, atol=1e-13)
    other = simulate(locodl(client_lr=GAMMA, comm_prob=1.0, rho=0.5), problem, 25, metrics=[])
    assert np.linalg.norm(other.x - gd.x) > 1e-6


# --- convergence to x*, at a linear rate ----------------------------------------------------

@pytest.mark.parametrize("alg", [
    compressed_scaffnew(client_lr=GAMMA, comm_prob=P, s=2),
    tamuna(client_lr=GAMMA, comm_prob=P, s=2, cohort_size=3),
    locodl(client_lr=GAMMA, comm_prob=P, codec={"name": "rand_k", "k": 2}),
    locodl(client_lr=GAMMA, comm_prob=P, codec={"name": "natural"}),
], ids=["compressed_scaffnew", "tamuna", "locodl_rand_k", "locodl_natural"])
def test_compressed_methods_converge_linearly_to_x_star(alg, problem, x_star):
    """The error to the centralised x* shrinks by a factor 2.5 or more every window of 50
    rounds (a linear rate; a sublinear or biased method's ratios tend to 1), down to the
    reference's own accuracy (1e-9) after 600 rounds."""
    windows = [_error(alg, problem, x_star, r) for r in (50, 100, 150, 200)]
    ratios = [b / a for a, b in zip(windows, windows[1:], strict=False)]
    assert max(ratios) < 0.4, ratios
    assert _error(alg, problem, x_star, 600) < 1e-9


def test_tamuna_keeps_the_sum_of_control_variates_zero_and_idle_clients_still(problem):
    alg = tamuna(client_lr=GAMMA, comm_prob=P, s=2, cohort_size=3)
    before = simulate(alg, problem, 9, seed=5, metrics=[]).client_states
    after = simulate(alg, problem, 10, seed=5, metrics=[]).client_states
    np.testing.assert_allclose(after.h.sum(axis=0), 0, atol=1e-12)
    # round 9's update reaches round 8's cohort; the others keep h (and x̂ unless in round 9)
    moved = np.any(after.h != before.h, axis=1)
    assert moved.tolist() == np.isin(np.arange(6), cohort(5, 8, 6, 3)).tolist()
    changed = np.any(after.x_hat != before.x_hat, axis=1)
    assert changed.tolist() == np.isin(np.arange(6), cohort(5, 9, 6, 3)).tolist()


# --- block size, bits ------------------------------------------------------------------------

@pytest.mark.parametrize("alg", [
    compressed_scaffnew(client_lr=GAMMA, comm_prob=P, s=4),
    tamuna(client_lr=GAMMA, comm_prob=P, s=2, cohort_size=4),
    locodl(client_lr=GAMMA, comm_prob=P, codec={"name": "qsgd", "levels": 2}),
], ids=lambda a: a.name)
def test_client_block_does_not_change_the_iterates(alg, problem):
    one, every = (simulate(alg, problem, 12, seed=3, metrics=[],
                           options=RunOptions(client_block=b))
                  for b in (1, "all"))
    assert np.array_equal(one.x, every.x)
    for a, b in zip(one.client_states, every.client_states, strict=True):
        assert np.array_equal(a, b)
    assert one.counters.as_dict() == every.counters.as_dict()


@pytest.mark.parametrize(("alg", "ratio"), [
    (compressed_scaffnew(client_lr=GAMMA, comm_prob=P, s=2), 2 / 6),
    (tamuna(client_lr=GAMMA, comm_prob=P, s=2, cohort_size=4), 2 / 6),  # ds of nd a round
    (locodl(client_lr=GAMMA, comm_prob=P, codec={"name": "rand_k", "k": 2}), 2 / 8),
], ids=lambda a: getattr(a, "name", ""))
def test_bits_up_are_the_uncompressed_count_times_the_compression_ratio(alg, ratio, problem):
    rounds = 15
    plain = simulate(scaffnew(client_lr=GAMMA, comm_prob=P), problem, rounds, metrics=[])
    assert plain.counters.bits_up == rounds * 6 * 8 * 64
    run = simulate(alg, problem, rounds, metrics=[])
    assert run.counters.bits_up == round(ratio * plain.counters.bits_up)
    assert run.counters.bits_down == rounds * 6 * 8 * 64  # x̄ (or d̄) to every client


# --- refusals ---------------------------------------------------------------------------------

@pytest.mark.parametrize("alg", [compressed_scaffnew(), tamuna(), locodl()],
                         ids=lambda a: a.name)
def test_a_regularizer_is_refused_naming_the_fix(alg):
    with pytest.raises(ValueError, match="Use regularizer 'zero'"):
        simulate(alg, make_problem("logistic", reg=L1(0.01)), 1)


def test_tamuna_refuses_runner_sampling_naming_cohort_size(problem):
    with pytest.raises(ValueError, match="set cohort_size=3 instead"):
        simulate(tamuna(), problem, 1, clients_per_round=3)
    with pytest.raises(ValueError, match="cohort_size=7 exceeds the 6 clients"):
        simulate(tamuna(cohort_size=7), problem, 1)


def test_unequal_client_weights_are_refused(problem):
    weighted = make_problem("logistic", reg=Zero(), n_clients=6, d=8,
                            weighting=np.arange(1.0, 7.0))
    with pytest.raises(ValueError, match="weighting = 'uniform'"):
        simulate(compressed_scaffnew(s=2), weighted, 1)


def test_locodl_refuses_a_biased_codec():
    with pytest.raises(ValueError, match="needs an unbiased compressor"):
        locodl(codec={"name": "top_k", "k": 2})


def _with_server_prox(s, n):
    """CompressedScaffnew with ProxSkip's composite step grafted on: each client uploads its
    masked shifted iterate ``q_i ⊙ (x̂_i − (γ/η) h_i)`` and the server applies
    ``prox_{(γ/η) g}`` to the coordinate averages — what "TAMUNA with the prox of g" would be."""
    from fedcomp.algorithms._condat import ServerState, as_algorithm, masked_scaffnew
    from fedcomp.algorithms._server_prox import apply_server_prox

    eta = P * n * (s - 1) / (s * (n - 1))
    init, broadcast, client_update, server_update = masked_scaffnew(
        "graft", GAMMA, P, s, lambda _: eta, None)

    def shifted(msg, states, ctx):
        upload, new = client_update(msg, states, ctx)
        sent = upload.v != 0
        return upload._replace(v=np.where(sent, upload.v - (GAMMA / eta) * new.h, 0.0)), new

    def proximal(state, uploads, ctx):
        return ServerState(apply_server_prox(server_update(state, uploads, ctx).x,
                                             GAMMA / eta, ctx))

    return as_algorithm("graft", (init, broadcast, shifted, proximal), {}, lambda _: None)


def test_why_tamuna_has_no_prox_of_g():
    """Uncompressed (s = n), the grafted server prox is ProxSkip and reaches the ℓ1 problem's
    x*; with the pattern (s < n) each coordinate's average covers only s clients' shifts, whose
    sum is not the fixed point's −∂g, and the error stays at 0.1–0.5: so TAMUNA and
    CompressedScaffnew refuse a regularizer rather than run this."""
    problem = make_problem("logistic", reg=L1(0.02), n_clients=6, d=8)
    x_star = solve_reference(problem, tol=1e-13).x

    def error(s, rounds):
        run = simulate(_with_server_prox(s, 6), problem, rounds, seed=1, metrics=[])
        return float(np.linalg.norm(run.x - x_star))

    assert error(6, 600) < 1e-7
    assert error(3, 300) > 0.05 and error(3, 600) > 0.05
    assert error(2, 600) > 0.05
