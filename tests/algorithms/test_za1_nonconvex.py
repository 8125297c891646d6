"""ZA1 on a nonconvex loss: the nonconvex extension of Zhang, Hu and Johansson (arXiv 2502.03958).

The journal version of the ICASSP paper keeps ZA1's update and proves, for a nonconvex smooth
``f`` and a convex ``g``, convergence to a residual set by the stochastic-gradient variance and
the batch size, and a linear rate under the proximal PL inequality. Two phenomena follow and are
checked here on a problem that is verified to be nonconvex:

* full gradients: ZA1 reaches a stationary point of ``f + g`` — its prox-gradient residual falls
  to rounding level, geometrically — while FedMiD stalls at a client-drift floor;
* minibatches of size ``b``: the residual floor shrinks as ``b`` grows, like ``1/√b``.
"""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import simulate
from fedcomp.algorithms import make_algorithm
from fedcomp.config import load
from fedcomp.experiments import build_problem, validate
from fedcomp.losses import Logistic
from fedcomp.oracle import Counters, Oracle

ALPHA, L2 = 0.05, 0.002  # nonconvex penalty α Σ x²/(1 + x²), curvature down to −α/2 < −l2
ZA1 = dict(client_lr=0.5, server_lr=1.0, local_steps=5)


@pytest.fixture(scope="module")
def problem():
    """Breast cancer, 10 clients, logistic + ridge + nonconvex penalty, ℓ1 with λ = 1e-3."""
    cfg = load("fedcanon_stepsizes")
    cfg["problem"].update(l2=L2, nonconvex=ALPHA)
    cfg["regularizer"] = {"name": "l1", "alpha": 1e-3}
    return build_problem(validate(cfg))


def mean_hessian(problem, x):
    """``∇²f(x) = Σ_i π_i ∇²f_i(x)``."""
    oracle = Oracle(problem, slice(0, problem.n_clients), 0, 0, None, Counters())
    hessians = oracle.full_hessian(np.repeat(x[None], problem.n_clients, axis=0))
    return np.tensordot(np.asarray(problem.weights), hessians, axes=1)


def residuals(problem, name, rounds, every, batch_size=None, seed=0, **params):
    run = simulate(make_algorithm(name, **params), problem, rounds, metrics=["prox_grad_norm"],
                   eval_every=every, batch_size=batch_size, seed=seed)
    return {row["round"]: row["prox_grad_norm"] for row in run.history}


def test_the_problem_is_nonconvex(problem):
    """``f`` has negative curvature: at ``x = 1`` (every coordinate where the penalty bends down)
    the Hessian of the loss has a negative eigenvalue."""
    assert problem.loss == Logistic(l2=L2, nonconvex=ALPHA) and not problem.loss.convex
    x = np.ones(problem.param_shape)
    assert np.linalg.eigvalsh(mean_hessian(problem, x))[0] < -0.005


def test_logistic_penalty_hessian_matches_finite_differences(problem):
    rng = np.random.default_rng(3)
    x = rng.normal(scale=1.5, size=problem.param_shape)
    batch = problem.data.full_batch()
    xs = np.repeat(x[None], problem.n_clients, axis=0)
    hess = problem.loss.hessian(xs, batch)
    eps = 1e-6
    for j in range(problem.param_shape[0]):
        e = np.zeros_like(xs)
        e[:, j] = eps
        fd = (problem.loss.grad(xs + e, batch) - problem.loss.grad(xs - e, batch)) / (2 * eps)
        np.testing.assert_allclose(hess[:, :, j], fd, rtol=1e-5, atol=1e-7)


def test_full_gradients_reach_a_stationary_point_linearly_while_fedmid_stalls(problem):
    za1 = residuals(problem, "za1", 250, 50, **ZA1)
    assert za1[250] < 1e-12
    # linear rate: every 50 rounds divide the residual by more than 50, until rounding level
    falling = [r for r in (50, 100, 150) if za1[r] > 1e-11]
    assert len(falling) >= 2
    for r in falling:
        assert za1[r + 50] < za1[r] / 50, za1
    fedmid = residuals(problem, "fedmid", 250, 50, **ZA1)
    assert fedmid[250] > 1e-3 and fedmid[250] > 0.5 * fedmid[100]  # a floor, not progress


def test_the_limit_is_a_local_minimum_in_a_nonconvex_landscape(problem):
    """The stationary point is a strict local minimum on its support (positive curvature there)
    though ``f`` is nonconvex elsewhere: proximal PL holds near it, as the linear rate needs."""
    run = simulate(make_algorithm("za1", **ZA1), problem, 250)
    x = np.asarray(run.x)
    support = x != 0
    curvature = np.linalg.eigvalsh(mean_hessian(problem, x)[np.ix_(support, support)])
    assert curvature[0] > 0
    assert np.abs(problem.prox_grad_mapping(x, 1.0)).max() < 1e-12


def test_the_minibatch_residual_floor_shrinks_like_one_over_root_b(problem):
    """Floor = root-mean-square residual over rounds 150..300, three minibatch seeds per size;
    the theory's floor is ∝ σ²/b in the squared residual, so ∝ 1/√b in the residual: ×2 from
    b = 4 to b = 16 (the check asks for > 1.5, above every seed's spread)."""
    def floor(b, seed):
        curve = residuals(problem, "za1", 300, 5, batch_size=b, seed=seed, **ZA1)
        tail = np.array([v for r, v in curve.items() if r >= 150])
        return float(np.sqrt(np.mean(tail ** 2)))

    small, large = ([floor(b, seed) for seed in range(3)] for b in (4, 16))
    assert min(small) / max(large) > 1.5, (small, large)
    assert max(large) < 0.05 and min(small) > 0.02  # a floor above full-batch's 1e-12


def test_test_loss_counts_the_data_free_penalty_once_across_chunks(problem, monkeypatch):
    """``test_loss`` sums the held-out loss chunk by chunk; the ridge and the nonconvex penalty
    (which every chunk's value carries) must enter once — checked with chunks of 7 samples."""
    import dataclasses

    import fedcomp.metrics._functions as functions
    from fedcomp.data import Batch

    feats, targs, _ = problem.data.pooled()
    held = dataclasses.replace(problem, data=dataclasses.replace(
        problem.data, holdout=(feats[:50], targs[:50])))
    x = np.random.default_rng(0).normal(size=problem.param_shape)
    whole = held.loss.value(x[None], Batch(feats[None, :50], targs[None, :50],
                                           np.full((1, 50), 1 / 50)))[0]
    monkeypatch.setattr(functions, "PREDICT_CHUNK", 7)
    assert functions.test_loss(held, x) == pytest.approx(whole, rel=1e-12)
