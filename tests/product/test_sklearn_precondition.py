"""Preconditioning keeps the user's objective: raw features reach skglm's optimum with the
default settings, the penalty written in the scaled coordinates has the right prox, and
float32 in gives float32 out."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from scipy import sparse  # noqa: E402
from scipy.optimize import minimize_scalar  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_diabetes  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from fedcomp.regularizers import L1, MCP, ElasticNet, Masked, Nuclear, Scaled  # noqa: E402
from fedcomp.sklearn import (  # noqa: E402
    FederatedEstimator,
    FederatedLinearRegression,
    FederatedLogisticRegression,
)


# --- the penalty in scaled coordinates ----------------------------------------------------
@pytest.mark.parametrize("base, scale", [
    (L1(0.7), [0.05, 1.0, 3.0, 0.4]),
    (ElasticNet(0.4, 0.9), [0.05, 1.0, 3.0, 0.4]),
    (Masked(ElasticNet(0.4, 0.9), np.array([True, True, False, True])), [0.05, 1.0, 3.0, 0.4]),
    # the generic path, the base's prox with a step per coordinate: steps t/s² < gamma
    (MCP(0.5, gamma=10.0), [0.5, 1.0, 3.0, 0.8]),
])
def test_scaled_prox_is_the_argmin_of_the_penalty_in_scaled_coordinates(base, scale):
    """``prox_{t g̃}(z)`` with ``g̃(v) = g(v/s)`` against a numerical minimiser of
    ``t·g(u/s) + ½‖u − z‖²``, coordinate by coordinate (g splits), and ``g̃``'s value."""
    scale = np.array(scale)
    reg = Scaled(base, scale)
    z = np.array([[0.03, -1.2, 2.5, 0.1], [-0.4, 0.3, -0.2, 2.0]])
    for step in (0.5, np.array([0.5, 2.0])):  # a scalar step, and one per model
        out = reg.prox(z, step)
        steps = np.broadcast_to(np.asarray(step, dtype=float).reshape(-1, 1), z.shape)
        for (b, j), zj in np.ndenumerate(z):
            def objective(u, j=j, zj=zj, t=steps[b, j]):
                v = np.zeros((1, 4))
                v[0, j] = u
                return t * float(reg.value(v)[0]) + 0.5 * (u - zj) ** 2

            best = minimize_scalar(objective, bounds=(-5.0, 5.0), method="bounded",
                                   options={"xatol": 1e-12})
            assert objective(out[b, j]) <= best.fun + 1e-12
            assert out[b, j] == pytest.approx(best.x, abs=1e-6)
    np.testing.assert_allclose(reg.value(z), base.value(z / scale), rtol=1e-13)


def test_scaled_refuses_a_penalty_that_does_not_split_and_a_bad_scale():
    with pytest.raises(ValueError, match="coordinate-separable.*Nuclear.*unscaled"):
        Scaled(Nuclear(1.0), np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"every scale must be > 0 and finite \(got 0.0\)"):
        Scaled(L1(1.0), np.array([1.0, 0.0]))
    with pytest.raises(ValueError, match="scale has shape \\(2,\\) but the models"):
        Scaled(L1(1.0), np.ones(2)).prox(np.ones((1, 3)), 1.0)
    assert Scaled(MCP(1.0, gamma=3.0), np.array([0.5, 2.0])).weak_convexity == \
        pytest.approx(4.0 / 3.0)


# --- raw data reach the optimum: skglm's, on the standardized problem, mapped back ---------
def _raw(name: str) -> tuple[np.ndarray, np.ndarray]:
    if name == "diabetes":
        return load_diabetes(return_X_y=True)
    X, y = load_breast_cancer(return_X_y=True)
    return X, np.where(y == 1, 1.0, -1.0)


def _objective(X, y, coef, intercept, alpha, logistic):
    """The raw problem's F: the mean loss plus α‖w‖₁ (the intercept unpenalised)."""
    z = X @ coef + intercept
    loss = np.mean(np.logaddexp(0.0, -y * z)) if logistic else 0.5 * np.mean((y - z) ** 2)
    return loss + alpha * np.abs(coef).sum()


def _kkt_violation(X, y, coef, intercept, alpha, logistic) -> float:
    """The largest violation of ``0 ∈ ∇f + α∂‖w‖₁`` (and ``∂f/∂b = 0``)."""
    z = X @ coef + intercept
    r = -y / (1.0 + np.exp(y * z)) if logistic else z - y
    grad = X.T @ r / len(y)
    on = coef != 0
    return float(max(np.abs(grad[on] + alpha * np.sign(coef[on])).max(initial=0.0),
                     np.maximum(np.abs(grad[~on]) - alpha, 0.0).max(initial=0.0),
                     abs(r.mean())))


def _skglm_optimum(X, y, alpha, logistic):
    """skglm on the standardized problem with per-feature weights ``1/s_j`` (the same
    problem in the coordinates ``v = s ⊙ w``), the intercept an unpenalised column of
    ones, mapped back to the raw coordinates."""
    from skglm.datafits import Logistic, Quadratic
    from skglm.penalties import WeightedL1
    from skglm.solvers import AndersonCD, ProxNewton

    mean, scale = X.mean(axis=0), X.std(axis=0)
    design = np.asfortranarray(np.column_stack([(X - mean) / scale, np.ones(len(y))]))
    penalty = WeightedL1(alpha, np.append(1.0 / scale, 0.0))
    solver = (ProxNewton(tol=1e-14, max_iter=200, fit_intercept=False) if logistic
              else AndersonCD(tol=1e-14, max_iter=10_000, fit_intercept=False))
    v = solver.solve(design, y, Logistic() if logistic else Quadratic(), penalty)[0]
    coef = v[:-1] / scale
    return coef, v[-1] - mean @ coef


@pytest.fixture(scope="module")
def optimum():
    """``(coef, intercept, F)`` of a case, checked by KKT, computed once per module."""
    found = {}

    def get(name: str, alpha: float):
        if (name, alpha) not in found:
            X, y = _raw(name)
            logistic = name == "breast_cancer"
            coef, intercept = _skglm_optimum(X, y, alpha, logistic)
            # the reference is a solution: its subgradient condition, to 1e-7 of alpha
            assert _kkt_violation(X, y, coef, intercept, alpha, logistic) <= 1e-7 * alpha
            found[name, alpha] = coef, intercept, _objective(X, y, coef, intercept, alpha,
                                                             logistic)
        return found[name, alpha]

    return get


@pytest.mark.parametrize("alpha", [0.01, 0.1])
def test_raw_diabetes_reaches_the_optimal_objective_with_the_default_settings(optimum, alpha):
    X, y = _raw("diabetes")
    coef, intercept, best = optimum("diabetes", alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = FederatedLinearRegression(alpha=alpha).fit(X, y)
    assert model.converged_
    ours = _objective(X, y, model.coef_, model.intercept_, alpha, logistic=False)
    assert model.objective_ == pytest.approx(ours, rel=1e-12)  # the raw objective
    assert -1e-12 <= (ours - best) / best <= 1e-6
    np.testing.assert_allclose(model.coef_, coef, atol=1e-4 * np.abs(coef).max())
    assert model.intercept_ == pytest.approx(intercept, rel=1e-6)


@pytest.mark.parametrize("alpha", [0.01, 0.05])
def test_raw_breast_cancer_reaches_the_optimal_objective_with_the_default_settings(
        optimum, alpha):
    X, y = _raw("breast_cancer")
    *_, best = optimum("breast_cancer", alpha)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        model = FederatedLogisticRegression(alpha=alpha).fit(X, y)
    ours = _objective(X, y, model.coef_.ravel(), model.intercept_[0], alpha, logistic=True)
    assert model.objective_ == pytest.approx(ours, rel=1e-12)
    assert -1e-12 <= (ours - best) / best <= 1e-6


def test_preconditioning_speeds_up_a_gradient_method_on_raw_features(optimum):
    """ZA1's prox-gradient rounds on raw breast-cancer: 2000 of them end within 10 % of the
    optimal objective preconditioned, and more than 10 times as far without."""
    X, y = _raw("breast_cancer")
    *_, best = optimum("breast_cancer", 0.05)
    gaps = []
    for precondition in (True, False):
        model = FederatedLogisticRegression(alpha=0.05, algorithm="za1", max_iter=2000,
                                            tol=None, precondition=precondition).fit(X, y)
        gaps.append((model.objective_ - best) / best)
    assert 0 < gaps[0] <= 0.1 and gaps[1] >= 10 * gaps[0], gaps


# --- what preconditioning covers, and what it leaves alone -----------------------------------
def test_sparse_features_are_scaled_not_centered_and_reach_the_dense_solution():
    X, y = _raw("diabetes")
    X = X - X.min(axis=0)  # nonnegative, as sparse features are: the mean is not removed
    dense = FederatedLinearRegression(alpha=0.1).fit(X, y)
    ours = FederatedLinearRegression(alpha=0.1).fit(sparse.csr_matrix(X), y)
    assert ours.converged_ and dense.converged_
    assert ours.objective_ == pytest.approx(dense.objective_, rel=1e-9)
    np.testing.assert_allclose(ours.coef_, dense.coef_, atol=1e-5 * np.abs(dense.coef_).max())


def test_the_clients_weighted_column_sums_make_the_pooled_scales():
    """Weighted reports: a sample of integer weight k is k copies of it, whatever the
    clients; a warm start on raw data continues from the mapped-back model."""
    X, y = _raw("diabetes")
    counts = np.random.default_rng(1).integers(1, 4, size=len(y))
    ids = np.arange(len(y)) % 3
    weighted = FederatedLinearRegression(alpha=0.1).fit(X, y, clients=ids,
                                                       sample_weight=counts)
    copies = FederatedLinearRegression(alpha=0.1).fit(np.repeat(X, counts, axis=0),
                                                      np.repeat(y, counts))
    np.testing.assert_allclose(weighted.coef_, copies.coef_, rtol=1e-5, atol=1e-4)
    warm = FederatedLinearRegression(alpha=0.1, warm_start=True).fit(X, y)
    assert warm.fit(X, y).n_iter_ == 0  # already at the solution: the first check stops it
    for precondition in (True, False):  # a model, no states: mapped to the run's coordinates
        model = FederatedLinearRegression(alpha=0.1, warm_start=True, max_iter=10,
                                          precondition=precondition)
        model.coef_, model.intercept_ = warm.coef_, warm.intercept_
        assert model.fit(X, y).history_[0]["objective"] == pytest.approx(warm.objective_,
                                                                         rel=1e-12)


def test_constant_columns_get_the_scale_one_and_change_nothing():
    X, y = _raw("diabetes")
    padded = np.column_stack([X[:, :3], np.full(len(y), 5.0), np.zeros(len(y)), X[:, 3:]])
    ours = FederatedLinearRegression(alpha=0.1).fit(padded, y)
    plain = FederatedLinearRegression(alpha=0.1).fit(X, y)
    assert ours.converged_ and (ours.coef_[3:5] == 0).all()
    # both converged to tol: the same solution, to the accuracy tol gives
    np.testing.assert_allclose(np.delete(ours.coef_, [3, 4]), plain.coef_,
                               atol=1e-5 * np.abs(plain.coef_).max())
    assert ours.intercept_ == pytest.approx(plain.intercept_, rel=1e-6)


@pytest.mark.parametrize("model", [
    FederatedLinearRegression(penalty="mcp", alpha=0.1, max_iter=200),  # weakly convex
    FederatedEstimator(regularizer=Nuclear(0.1, shape=(5, 2)), alpha=None,
                       fit_intercept=False, max_iter=200),                # not separable
])
def test_penalties_that_cannot_be_scaled_run_unscaled_as_before(model):
    X, y = _raw("diabetes")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = model.fit(X, y)
        before = model.__class__(**{**model.get_params(), "precondition": False}).fit(X, y)
    np.testing.assert_array_equal(ours.coef_, before.coef_)
    assert ours.history_ == before.history_ or all(
        {k: v for k, v in a.items() if k != "wall_s"} == {k: v for k, v in b.items()
                                                          if k != "wall_s"}
        for a, b in zip(ours.history_, before.history_, strict=True))


def test_precondition_must_be_a_flag():
    X, y = _raw("diabetes")
    with pytest.raises(ValueError, match="precondition must be True or False"):
        FederatedLinearRegression(precondition="yes").fit(X, y)


# --- dtypes ---------------------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: FederatedLinearRegression(alpha=0.1),
    lambda: FederatedLogisticRegression(alpha=0.05, max_iter=500),
])
def test_float32_in_gives_float32_out_and_float64_stays_float64(make):
    X, y = _raw("diabetes")
    if isinstance(make(), FederatedLogisticRegression):
        y = (y > np.median(y)).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        single = make().fit(X.astype(np.float32), y)
        double = make().fit(X, y)
        sparse_single = make().fit(sparse.csr_matrix(X.astype(np.float32)), y)
    assert single.coef_.dtype == np.float32 and double.coef_.dtype == np.float64
    assert np.asarray(single.intercept_).dtype == np.float32
    assert np.asarray(double.intercept_).dtype == np.float64
    if isinstance(single, FederatedLinearRegression):  # a scalar, as Lasso's
        assert isinstance(single.intercept_, np.float32) and isinstance(double.intercept_,
                                                                        float)
    assert single.predict(X.astype(np.float32)).dtype == (
        np.float32 if isinstance(single, FederatedLinearRegression) else y.dtype)
    assert single.decision_function(X.astype(np.float32)).dtype == np.float32 \
        if hasattr(single, "decision_function") else True
    assert double.predict(X).dtype == (np.float64 if isinstance(double,
                                                                FederatedLinearRegression)
                                       else y.dtype)
    # the inputs' float32 rounding (and, for least squares, the float32 run: test_sklearn_float32)
    np.testing.assert_allclose(single.coef_, double.coef_,
                               atol=1e-4 * np.abs(double.coef_).max())
    assert sparse_single.coef_.dtype == np.float32
