"""``algorithm="auto"``, the estimators' default: Douglas–Rachford with exact local proxes
and the curvature step where it applies, ZA1 elsewhere (fedcomp.sklearn._auto)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.datasets import load_diabetes  # noqa: E402
from sklearn.linear_model import Lasso  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import fedcomp  # noqa: E402
from fedcomp.sklearn import FederatedEstimator, FederatedLinearRegression  # noqa: E402
from fedcomp.sklearn._auto import CONDITION_FLOOR, RELAXATION, curvature_step  # noqa: E402


@pytest.fixture(scope="module")
def diabetes() -> tuple[np.ndarray, np.ndarray]:
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def _built(model: object) -> fedcomp.FederatedAlgorithm:
    """The algorithm a fitted estimator ran, rebuilt from its repr."""
    return eval(model.algorithm_, {"feddr": fedcomp.feddr, "za1": fedcomp.za1})  # noqa: S307


def test_auto_is_douglas_rachford_with_the_pooled_curvature_step(diabetes):
    X, y = diabetes
    model = FederatedLinearRegression(alpha=0.1, n_clients=5).fit(X, y)
    run = _built(model)
    assert run.name == "feddr"
    assert run.hyperparameters["alpha"] == RELAXATION
    assert run.hyperparameters["local_solver"] == "exact"
    # the oracle: 1/√(μL) of the pooled Hessian XᵀX/N with the intercept's column, by NumPy
    # (the data are standardized: preconditioning leaves them as they are, to rounding)
    ones = np.column_stack([X, np.ones(len(X))])
    eigenvalues = np.linalg.eigvalsh(ones.T @ ones / len(X))
    expected = 1.0 / np.sqrt(eigenvalues[0] * eigenvalues[-1])
    assert run.hyperparameters["eta"] == pytest.approx(expected, rel=1e-5)


def test_auto_reaches_the_lasso_in_a_tenth_of_za1s_rounds(diabetes):
    X, y = diabetes
    exact = Lasso(alpha=0.1, tol=1e-14, max_iter=100_000).fit(X, y)
    auto = FederatedLinearRegression(alpha=0.1, n_clients=5).fit(X, y)
    assert auto.converged_
    np.testing.assert_allclose(auto.coef_, exact.coef_, atol=1e-4)
    # ZA1's gradient steps need 3960 rounds here (κ ≈ 470): the splitting ~√κ (170)
    assert auto.n_iter_ <= 250, auto.n_iter_


@pytest.mark.parametrize("settings", [
    {"penalty": "mcp"},                 # a weakly convex penalty: its prox needs a small step
    {"batch_size": 20},                 # minibatches: no exact local prox
    {"algorithm_params": {"local_steps": 3}},  # ZA1's hyperparameters
    {"client_lr": 0.01},                # a gradient step asked for
])
def test_auto_falls_back_to_za1_where_the_splitting_does_not_apply(diabetes, settings):
    X, y = diabetes
    model = FederatedLinearRegression(alpha=0.1, n_clients=5, max_iter=20, tol=None,
                                      **settings)
    model.fit(X, y)
    assert model.algorithm_.startswith("za1("), model.algorithm_


def test_auto_samples_clients_with_feddrs_randomized_splitting(diabetes):
    X, y = diabetes
    exact = Lasso(alpha=0.1, tol=1e-14, max_iter=100_000).fit(X, y)
    model = FederatedLinearRegression(alpha=0.1, n_clients=5, clients_per_round=2).fit(X, y)
    assert model.algorithm_.startswith("feddr(") and model.converged_
    np.testing.assert_allclose(model.coef_, exact.coef_, atol=1e-4)


def test_auto_falls_back_for_a_matrix_model():
    rng = np.random.default_rng(0)
    X, labels = rng.normal(size=(60, 3)), rng.integers(0, 3, size=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = FederatedEstimator("softmax", alpha=0.01, max_iter=5, tol=None).fit(X, labels)
    assert model.algorithm_.startswith("za1(")


def test_the_step_floors_mu_for_rank_deficient_data():
    assert curvature_step(0.01, 4.0) == pytest.approx(5.0)
    assert curvature_step(0.0, 4.0) == pytest.approx(1 / np.sqrt(CONDITION_FLOOR * 16.0))
    assert curvature_step(-1e-12, 4.0) == curvature_step(0.0, 4.0)  # rounding below zero
    assert curvature_step(0.0, 0.0) == 1.0  # a zero loss: every step is exact
