"""S-DANE and Acc-S-DANE against a NumPy transcription of the official code's update
(mlolab/S-DANE, src/optimizers/sdane.py: ``step`` with the stopping criterion and the
adaptive λ off, full gradients, every client), and the prox of g converging to x*."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedcomp import Problem, simulate, toy
from fedcomp.algorithms import sdane
from fedcomp.reference import solve_reference
from fedcomp.regularizers import make_regularizer


def client_gradients(problem):
    """``grad(i, x)``: client i's gradient, reweighted as the code reweights it
    (``n · n_i / N``; with equal clients, the plain gradient)."""
    n = problem.n_clients
    counts = np.asarray(problem.data.counts, dtype=float)

    def grad(i, x):
        batch = problem.data.full_batch(np.array([i]))
        plain = np.asarray(problem.loss.grad(np.asarray(x)[None], batch))[0]
        return n * counts[i] / counts.sum() * plain
    return grad


def official_update(grad, n, x0, rounds, lam, lr, local_steps, mu=0.0, accelerated=False):
    """The code's ``step()`` (``a = None``, constant step rule) transcribed to NumPy: the
    ``x`` (params) and ``v`` after each round."""
    x, v = np.array(x0, float), np.array(x0, float)
    A, B = 0.0, 1.0
    out = []
    for _ in range(rounds):
        if accelerated:  # update_a, then y = A/(A+a) x + a/(A+a) v
            a = B / (2 * lam) + math.sqrt(B ** 2 / (4 * lam ** 2) + A * B / lam)
            y = A / (A + a) * x + a / (A + a) * v
        else:
            a = 1 / lam
            y = v.copy()
        grads = [grad(i, y) for i in range(n)]
        mean = sum(grads) / n
        control = [g - mean for g in grads]  # compute_control_variates
        iterates, final_grads = [], []
        for i in range(n):
            p = y.copy()
            for _ in range(local_steps):  # compute_next_iterate
                g = grad(i, p)
                p = (control[i] - g + p / lr + lam * y) / (1 / lr + lam)
            iterates.append(p)
            final_grads.append(grad(i, p))
        x = sum(iterates) / n
        g = sum(final_grads) / n
        if accelerated:
            v = (mu * a) / (mu * a + B) * x + B / (mu * a + B) * v - a / (mu * a + B) * g
            A += a
            B += mu * a
        else:
            v = (mu * a) / (mu * a + 1) * x + 1 / (mu * a + 1) * v - a / (mu * a + 1) * g
        out.append((x.copy(), v.copy()))
    return out


def smooth_problem():
    problem = toy.tiny_problem()
    return Problem(problem.loss, make_regularizer("zero"), problem.data)


@pytest.mark.parametrize(("accelerated", "mu"), [(False, 0.0), (False, 0.3), (True, 0.0),
                                                 (True, 0.3)])
def test_sdane_is_the_official_update_on_three_clients(accelerated, mu):
    problem = smooth_problem()
    lam, lr, steps = 2.0, 0.05, 4
    want = official_update(client_gradients(problem), problem.n_clients,
                           np.zeros(problem.param_shape), 3, lam, lr, steps, mu, accelerated)
    algorithm = sdane(lam=lam, local_steps=steps, local_lr=lr, mu=mu, accelerated=accelerated)
    for iteration, (x, v) in enumerate(want, start=1):
        # one iteration: a gradient round and a local-solve round
        run = simulate(algorithm, problem, 2 * iteration)
        np.testing.assert_allclose(run.x, x, rtol=0, atol=1e-12)
        np.testing.assert_allclose(run.server_state.v, v, rtol=0, atol=1e-12)


def test_the_prox_of_g_converges_to_the_composite_solution():
    problem = toy.tiny_problem(lam=0.1)
    x_star = solve_reference(problem).x
    run = simulate(sdane(lam=1.0, local_steps=10, local_lr=0.1), problem, 200)
    np.testing.assert_allclose(run.x, x_star, rtol=0, atol=1e-9)
    assert np.count_nonzero(run.x) == np.count_nonzero(x_star)  # the prox's exact zeros


def test_sdane_refuses_sampling_and_bad_arguments():
    with pytest.raises(ValueError, match="sdane is defined for full participation only"):
        simulate(sdane(), toy.tiny_problem(), 2, clients_per_round=2)
    with pytest.raises(ValueError, match="mu must be a finite number >= 0"):
        sdane(mu=-1.0)
    with pytest.raises(ValueError, match="lam must be a positive number"):
        sdane(lam=0.0)
