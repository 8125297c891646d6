"""pFedMe with g in the personal problem: the personal step is the exact proximal point on
ℓ1 least squares, and the global model converges to the minimiser of the clients' Moreau
envelopes (the fixed point w = Σ π_i θ_i(w))."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import simulate, toy
from fedcomp.algorithms import pfedme


def quadratic_of(problem, client):
    """``(Q, c)`` with ``∇f_i(θ) = Qθ − c``: read off the loss's own gradient (quadratic)."""
    d = problem.param_shape[0]
    batch = problem.data.full_batch(np.array([client]))

    def grad(theta):
        return np.asarray(problem.loss.grad(theta[None], batch))[0]

    c = -grad(np.zeros(d))
    q = np.stack([grad(e) + c for e in np.eye(d)], axis=1)
    return q, c


def exact_personal(problem, client, anchor, lam, alpha):
    """``argmin_θ f_i(θ) + α‖θ‖₁ + (λ/2)‖θ − anchor‖²`` by coordinate descent to machine
    precision (independent of fedcomp's prox and solver)."""
    q, c = quadratic_of(problem, client)
    q = q + lam * np.eye(len(c))
    c = c + lam * anchor
    theta = np.zeros(len(c))
    for _ in range(5000):
        for j in range(len(c)):
            rest = c[j] - q[j] @ theta + q[j, j] * theta[j]
            theta[j] = np.sign(rest) * max(abs(rest) - alpha, 0.0) / q[j, j]
    return theta


def test_the_personal_step_is_the_exact_proximal_point_on_l1_least_squares():
    problem = toy.tiny_problem(lam=0.3)  # a strong l1: some coordinates exactly zero
    lam = 2.0
    run = simulate(pfedme(lam=lam, client_lr=0.01, local_steps=1, inner_steps=3000), problem, 1)
    anchor = np.zeros(problem.param_shape)  # one local step: θ solved at w_i = x0 = 0
    for i in range(problem.n_clients):
        exact = exact_personal(problem, i, anchor, lam, alpha=0.3)
        np.testing.assert_allclose(run.client_states.personal[i], exact, rtol=0, atol=1e-12)
    assert np.any(run.client_states.personal == 0.0)  # the prox's exact zeros


def _envelope_gap(problem, w, lam, alpha):
    """``w − Σ π_i θ_i(w)``: zero exactly at the minimiser of Σ π_i F_i (∇F_i(w) = λ (w −
    θ_i(w)), F_i the Moreau envelope of f_i + g), with each θ_i(w) solved exactly."""
    thetas = np.stack([exact_personal(problem, i, w, lam, alpha)
                       for i in range(problem.n_clients)])
    return w - np.asarray(problem.weights) @ thetas, thetas


def test_one_local_step_converges_to_the_envelopes_minimiser():
    # R = 1: the round is gradient descent on Σ π_i F_i with step η λ (Dinh et al., Thm 1)
    problem = toy.tiny_problem(lam=0.05)
    lam = 1.0
    run = simulate(pfedme(lam=lam, client_lr=0.5, local_steps=1, inner_steps=400), problem, 400)
    gap, thetas = _envelope_gap(problem, np.asarray(run.x), lam, 0.05)
    assert np.abs(gap).max() < 1e-10
    # and the personal models are the clients' own, not the global one
    assert np.abs(thetas - np.asarray(run.x)).max() > 0.05


def test_several_local_steps_drift_from_it():
    # R > 1 local steps on heterogeneous clients: the average of the local models has
    # another fixed point (the paper's rates allow this drift to shrink with η)
    problem = toy.tiny_problem(lam=0.05)
    run = simulate(pfedme(lam=1.0, client_lr=0.5, local_steps=5, inner_steps=400), problem, 400)
    gap, _ = _envelope_gap(problem, np.asarray(run.x), 1.0, 0.05)
    assert np.abs(gap).max() > 1e-3


def test_pfedme_checks_its_arguments():
    with pytest.raises(ValueError, match="lam must be a positive number"):
        pfedme(lam=0.0)
    with pytest.raises(ValueError, match="inner_steps"):
        pfedme(inner_steps=0)
    with pytest.raises(ValueError, match="personal_lr must be a positive number"):
        pfedme(personal_lr=[0.1, 0.1])
