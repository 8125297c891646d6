"""C-FedDA's constrained prox for ℓ1 against a generic convex solver (SLSQP on a split form)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from fedcomp.algorithms._cprox import cprox_l1, cprox_l1_objective


def reference(b, c, kappa, w0, eps, rho):
    """SLSQP on w = p − n with p, n ≥ 0 and the ℓ1-ball difference split u − v = w − w0."""
    d = len(b)

    def split(x):
        return x[:d] - x[d:2 * d], x[2 * d:3 * d], x[3 * d:]

    def objective(x):
        w, _, _ = split(x)
        return b @ w + 0.5 * c * w @ w + kappa * (x[:d].sum() + x[d:2 * d].sum())

    cons = [
        {"type": "eq", "fun": lambda x: split(x)[0] - w0 - (split(x)[1] - split(x)[2])},
        {"type": "ineq", "fun": lambda x: eps - split(x)[1].sum() - split(x)[2].sum()},
    ]
    if rho is not None:
        cons.append({"type": "ineq", "fun": lambda x: rho**2 - np.sum(split(x)[0] ** 2)})
    best = None
    rng = np.random.default_rng(0)
    for start in (np.zeros(4 * d), np.abs(rng.normal(size=4 * d)) * 0.1):
        res = minimize(objective, start, method="SLSQP", bounds=[(0, None)] * 4 * d,
                       constraints=cons, options={"ftol": 1e-16, "maxiter": 2000})
        if best is None or res.fun < best.fun:
            best = res
    return split(best.x)[0], best.fun


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("rho", [None, 0.6])
def test_cprox_l1_is_the_constrained_argmin(seed, rho):
    rng = np.random.default_rng(seed)
    d = 5
    b = rng.normal(size=d) * 2
    w0 = rng.normal(size=d) * 0.15
    c, kappa, eps = 1.0 + rng.random(), 0.3 * rng.random(), 0.5
    ours = cprox_l1(b[None], c, kappa, w0, eps, rho)[0]
    ref, ref_value = reference(b, c, kappa, w0, eps, rho)
    value = float(cprox_l1_objective(ours[None], b[None], c, kappa)[0])
    # feasible, and at least as good as the generic solver
    assert np.abs(ours - w0).sum() <= eps * (1 + 1e-12)
    if rho is not None:
        assert np.linalg.norm(ours) <= rho * (1 + 1e-12)
    assert value <= ref_value + 1e-10
    np.testing.assert_allclose(ours, ref, atol=1e-8)


def test_cprox_l1_inactive_constraints_reduce_to_the_prox():
    rng = np.random.default_rng(3)
    b, c, kappa = rng.normal(size=(4, 6)), 2.0, 0.5
    w0 = np.zeros(6)
    ours = cprox_l1(b, c, kappa, w0, radius_l1=1e6)
    expected = np.sign(-b) * np.maximum(np.abs(b) - kappa, 0) / c  # soft threshold of −b/c
    np.testing.assert_allclose(ours, expected, atol=1e-15)


def test_cprox_rows_are_independent():
    rng = np.random.default_rng(5)
    b = rng.normal(size=(3, 6)) * 3
    w0 = rng.normal(size=6) * 0.1
    block = cprox_l1(b, 1.5, 0.2, w0, 0.4, 0.5)
    for i in range(3):
        np.testing.assert_allclose(block[i], cprox_l1(b[i:i + 1], 1.5, 0.2, w0, 0.4, 0.5)[0],
                                   atol=1e-14)


def test_disjoint_balls_raise():
    with pytest.raises(ValueError, match="does not meet"):
        cprox_l1(np.ones((1, 3)), 1.0, 0.0, np.full(3, 5.0), 0.1, 1.0)


# --- nuclear norm: against SCS (through cvxpy) at 1e-14 tolerances -----------------------
def nuclear_reference(b, c, kappa, w0, eps, rho):
    cp = pytest.importorskip("cvxpy")
    w = cp.Variable(b.shape)
    constraints = [cp.normNuc(w - w0) <= eps]
    if rho is not None:
        constraints.append(cp.norm(w, "fro") <= rho)
    objective = cp.sum(cp.multiply(b, w)) + c / 2 * cp.sum_squares(w) + kappa * cp.normNuc(w)
    problem = cp.Problem(cp.Minimize(objective), constraints)
    problem.solve(solver=cp.SCS, eps_abs=1e-14, eps_rel=1e-14, max_iters=2_000_000)
    return w.value, problem.value


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("centred", [True, False])
@pytest.mark.parametrize("rho", [None, 0.8])
def test_cprox_nuclear_is_the_constrained_argmin(seed, centred, rho):
    """Centred: von Neumann reduction to the ℓ1 CProx of the singular values; off-centre:
    Douglas–Rachford. Both must be the argmin a generic conic solver finds, to 1e-8."""
    from fedcomp.algorithms._cprox import cprox_nuclear, cprox_nuclear_objective

    rng = np.random.default_rng(seed)
    b = rng.normal(size=(5, 4)) * 2
    w0 = np.zeros((5, 4)) if centred else rng.normal(size=(5, 4)) * 0.15
    c, kappa, eps = 1.0 + rng.random(), 0.3 * rng.random(), 1.0
    ours = cprox_nuclear(b[None], c, kappa, w0, eps, rho)[0]
    ref, ref_value = nuclear_reference(b, c, kappa, w0, eps, rho)
    assert np.linalg.svd(ours - w0, compute_uv=False).sum() <= eps * (1 + 1e-10)
    if rho is not None:
        assert np.linalg.norm(ours) <= rho * (1 + 1e-12)
    value = float(cprox_nuclear_objective(ours[None], b[None], c, kappa)[0])
    assert value <= ref_value + 1e-10
    np.testing.assert_allclose(ours, ref, atol=1e-8)


def test_cprox_nuclear_constraint_is_active_in_these_checks():
    """The instances above must exercise the ball: the plain prox would leave it."""
    from fedcomp.regularizers import Nuclear

    rng = np.random.default_rng(0)
    b = rng.normal(size=(5, 4)) * 2
    c, kappa = 1.0 + rng.random(), 0.3 * rng.random()
    free = Nuclear(kappa / c).prox(-b[None] / c, 1.0)[0]
    assert np.linalg.svd(free, compute_uv=False).sum() > 1.5


def test_cprox_nuclear_rows_are_independent():
    from fedcomp.algorithms._cprox import cprox_nuclear

    rng = np.random.default_rng(7)
    b = rng.normal(size=(3, 4, 3)) * 2
    w0 = rng.normal(size=(4, 3)) * 0.2
    block = cprox_nuclear(b, 1.2, 0.1, w0, 0.7, None)
    for i in range(3):
        np.testing.assert_array_equal(block[i], cprox_nuclear(b[i:i + 1], 1.2, 0.1, w0, 0.7)[0])


def test_cprox_nuclear_disjoint_balls_raise():
    from fedcomp.algorithms._cprox import cprox_nuclear

    with pytest.raises(ValueError, match="does not meet"):
        cprox_nuclear(np.ones((1, 3, 3)), 1.0, 0.0, 5 * np.eye(3), 0.1, 1.0)


def test_cprox_nuclear_disjointness_is_exact():
    """The smallest Frobenius norm on the nuclear ball around W0 = diag(1, 0) with ε = 0.1
    is 0.9 (shrink the singular value): a Frobenius ball of radius 0.8 misses it, though the
    bound (‖W0‖_* − ε)/√2 = 0.64 let it through to 20000 Douglas–Rachford iterations."""
    from fedcomp.algorithms._cprox import cprox_nuclear

    with pytest.raises(ValueError, match=r"does not meet.*smallest Frobenius norm is 0\.9\b"):
        cprox_nuclear(np.ones((1, 2, 2)), 1.0, 0.0, np.diag([1.0, 0.0]), 0.1, 0.8)
    # just inside: feasible, solved
    w = cprox_nuclear(np.ones((1, 2, 2)), 1.0, 0.0, np.diag([1.0, 0.0]), 0.1, 0.95)[0]
    assert np.linalg.svd(w - np.diag([1.0, 0.0]), compute_uv=False).sum() <= 0.1 * (1 + 1e-10)
    assert np.linalg.norm(w) <= 0.95 * (1 + 1e-12)


def nearly_tangent_instance():
    """A 4×4 instance from a random search whose nuclear ball (around W0) reaches the
    Frobenius ball only through a sliver: returns the inputs and the ball's smallest
    Frobenius norm ``m``."""
    from fedcomp.algorithms._cprox import _project_nuclear_ball

    rng = np.random.default_rng(3)
    for _ in range(20):
        p1, p2 = int(rng.integers(2, 5)), int(rng.integers(2, 5))
        b = rng.normal(size=(p1, p2)) * 10 ** rng.uniform(-1, 1)
        w0 = rng.normal(size=(p1, p2)) * 10 ** rng.uniform(-1.5, 0)
        c, kappa, eps = 10 ** rng.uniform(-1, 1), 10 ** rng.uniform(-2, 0), 10 ** rng.uniform(
            -1.5, 0.5)
        if rng.random() >= 0.5:
            rng.uniform(0.5, 1.5)
    closest = _project_nuclear_ball(np.zeros((1, p1, p2)), w0[None], eps)[0]
    return b, c, kappa, w0, eps, float(np.linalg.norm(closest))


def test_cprox_nuclear_non_convergence_reports_the_gap_and_the_radii(monkeypatch):
    from fedcomp.algorithms import _cprox

    b, c, kappa, w0, eps, m = nearly_tangent_instance()
    monkeypatch.setattr(_cprox, "_DR_MAX_ITER", 300)  # keep the test fast
    with pytest.raises(ValueError, match=r"in 300 iterations \(gap \|\|W - Y\|\|_F = [0-9.e-]+"
                                         r".*smallest Frobenius norm is 0\.168457.*enlarge"):
        _cprox.cprox_nuclear(b[None], c, kappa, w0, eps, 1.01 * m)


@pytest.mark.slow
def test_cprox_nuclear_converges_on_nearly_tangent_balls():
    """ρ = 1.05 m needs about 39000 Douglas–Rachford iterations (20000 were allowed)."""
    from fedcomp.algorithms._cprox import cprox_nuclear

    b, c, kappa, w0, eps, m = nearly_tangent_instance()
    w = cprox_nuclear(b[None], c, kappa, w0, eps, 1.05 * m)[0]
    assert np.linalg.svd(w - w0, compute_uv=False).sum() <= eps * (1 + 1e-10)
    assert np.linalg.norm(w) <= 1.05 * m * (1 + 1e-12)


def test_cprox_keeps_the_device_of_its_inputs():
    """Every array CProx builds lives on the inputs' device (CUDA torch would otherwise mix
    devices); array_api_strict's second device checks it on the CPU."""
    xp = pytest.importorskip("array_api_strict")
    from fedcomp.algorithms._cprox import cprox_l1, cprox_nuclear

    device = xp.Device("device1")
    rng = np.random.default_rng(0)
    b_host, w0_host = rng.normal(size=(3, 5)) * 3, np.full(5, 0.1)
    b, w0 = xp.asarray(b_host, device=device), xp.asarray(w0_host, device=device)
    # the ℓ1 ball active (the nested ℓ2 bisection is too slow on array_api_strict)
    w = cprox_l1(b, 1.0, 0.1, w0, 0.5)
    assert w.device == device
    expected = cprox_l1(b_host, 1.0, 0.1, w0_host, 0.5)
    assert (np.abs(expected - w0_host).sum(axis=1) >= 0.5 * (1 - 1e-9)).all()
    np.testing.assert_array_equal(np.asarray(w.to_device(xp.Device("CPU_DEVICE"))), expected)
    matrices = xp.asarray(rng.normal(size=(2, 3, 3)), device=device)
    centred = cprox_nuclear(matrices, 1.0, 0.1, xp.zeros((3, 3), device=device), 0.5)
    assert centred.device == device
