"""float32 in computes in float32 where the run converges in float32: ``"auto"``'s FedDR on
least squares runs on float32 data, stops at ``max(tol, 10 ε)`` without a warning, and
lands within the measured distance of the float64 fit; the fits that cannot converge in
float32 (ZA1, the logistic Newton prox) compute in float64; ``objective_`` stays float64."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.datasets import load_breast_cancer, load_diabetes  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import fedcomp.sklearn._base as base  # noqa: E402
from fedcomp.sklearn import (  # noqa: E402
    FederatedLassoCV,
    FederatedLinearRegression,
    FederatedLogisticRegression,
    federated_path,
)
from fedcomp.sklearn._engine import FLOAT32_TOL_EPS  # noqa: E402

EPS32 = float(np.finfo(np.float32).eps)


@pytest.fixture
def runs(monkeypatch):
    """The dtype of every fit's run: its problem's data and its final model."""
    seen: list[tuple[np.dtype, np.dtype]] = []
    simulate = base.simulate

    def spy(algorithm, problem, *args, **kwargs):
        run = simulate(algorithm, problem, *args, **kwargs)
        seen.append((np.dtype(problem.data.dtype), np.asarray(run.x).dtype))
        return run

    monkeypatch.setattr(base, "simulate", spy)
    return seen


def _diabetes(standardized: bool) -> tuple[np.ndarray, np.ndarray]:
    X, y = load_diabetes(return_X_y=True)
    return (StandardScaler().fit_transform(X) if standardized else X), y


# the float32 fit against the float64 one, relative to the largest coefficient: measured
# 3.1e-6 (standardized) and 2.3e-5 (raw diabetes, alpha 0.1); the bounds are ~4x that
@pytest.mark.parametrize("standardized, bound", [(True, 1e-5), (False, 1e-4)])
def test_float32_least_squares_computes_in_float32_and_converges(runs, standardized, bound):
    X, y = _diabetes(standardized)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ConvergenceWarning, nothing else either
        single = FederatedLinearRegression(alpha=0.1, n_clients=5).fit(X.astype(np.float32), y)
    double = FederatedLinearRegression(alpha=0.1, n_clients=5).fit(X, y)
    assert runs[0] == (np.float32, np.float32) and runs[1] == (np.float64, np.float64)
    assert single.converged_ and single.coef_.dtype == np.float32
    assert isinstance(single.intercept_, np.float32)
    # stopped at the floor, not at tol=1e-8 (which no float32 round reaches)
    assert single.history_[-1]["relative_prox_step"] <= FLOAT32_TOL_EPS * EPS32
    assert single.n_iter_ <= double.n_iter_
    scale = np.abs(double.coef_).max()
    np.testing.assert_allclose(single.coef_, double.coef_, rtol=0, atol=bound * scale)
    assert abs(single.intercept_ - double.intercept_) <= bound * abs(double.intercept_)
    # the raw objective in float64 at the float32 coefficients (measured 1e-9 relative)
    assert type(single.objective_) is float
    assert single.objective_ == pytest.approx(double.objective_, rel=1e-8)


def test_float32_logistic_and_za1_compute_in_float64(runs):
    """The exact logistic prox (Newton's line search stalls in float32) and ZA1 (levels
    off at 400-3600 ε): float64 on the converted data, float32 coefficients out."""
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        single = FederatedLogisticRegression(alpha=0.01, n_clients=5).fit(X.astype(np.float32),
                                                                         y)
    double = FederatedLogisticRegression(alpha=0.01, n_clients=5).fit(X, y)
    assert runs == [(np.float64, np.float64)] * 2
    assert single.converged_ and single.coef_.dtype == np.float32
    assert single.intercept_.dtype == np.float32
    # the inputs' float32 rounding only (measured 1.3e-8), and tol as given
    np.testing.assert_allclose(single.coef_, double.coef_, rtol=0,
                               atol=1e-6 * np.abs(double.coef_).max())
    assert single.n_iter_ == double.n_iter_
    Xd, yd = _diabetes(True)
    mcp = FederatedLinearRegression(penalty="mcp", alpha=0.1, max_iter=20, tol=None)
    assert mcp.fit(Xd.astype(np.float32), yd).coef_.dtype == np.float32
    assert mcp.algorithm_.startswith("za1") and runs[-1] == (np.float64, np.float64)


def test_an_unconverged_float32_fit_names_the_raised_tol():
    X, y = _diabetes(True)
    with pytest.warns(ConvergenceWarning, match=r"> tol=1\.19209e-06 \(tol=1e-08 raised to 10 "
                                                r"float32 epsilons: the run computes in float32\)"):
        FederatedLinearRegression(alpha=0.1, n_clients=5, max_iter=20).fit(
            X.astype(np.float32), y)


def test_float32_warm_start_path_and_cv_follow_the_rule(runs):
    """A warm-started float32 path keeps float32 states (and a float64 fit after it starts
    from its model, in float64); federated_path and the CV estimators compute as fit."""
    X, y = _diabetes(True)
    X32 = X.astype(np.float32)
    alphas, coefs, n_iters = federated_path(FederatedLinearRegression(n_clients=5), X32, y,
                                            alphas=[0.5, 0.1])
    assert coefs.dtype == np.float32 and runs == [(np.float32, np.float32)] * 2
    model = FederatedLinearRegression(alpha=0.1, n_clients=5, warm_start=True).fit(X32, y)
    again = model.fit(X32, y)  # the same problem, from its own float32 states
    assert again.n_iter_ <= 10 and again.coef_.dtype == np.float32
    assert model.fit(X, y).coef_.dtype == np.float64 and runs[-1] == (np.float64, np.float64)
    del runs[:]
    cv = FederatedLassoCV(alphas=[0.5, 0.1], cv=2, n_clients=2).fit(X32, y)
    assert cv.coef_.dtype == np.float32 and cv.converged_
    assert runs == [(np.float32, np.float32)] * 5  # two folds' paths, then the refit
