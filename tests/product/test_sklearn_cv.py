"""The cross-validated estimators (FederatedLassoCV, FederatedElasticNetCV,
FederatedLogisticRegressionCV): the alpha GridSearchCV picks over the same grid and folds,
scikit-learn's attribute shapes, folds that split each client's samples, alphas=int and the
deprecated n_alphas of federated_path, the errors.

The fits are few and short (three alphas, three folds, the same tol on both sides), each
CV estimator fitted once per module."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import load_breast_cancer, load_diabetes  # noqa: E402
from sklearn.linear_model import LassoCV  # noqa: E402
from sklearn.model_selection import GridSearchCV, GroupKFold  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import (  # noqa: E402
    check_dont_overwrite_parameters,
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from fedcomp import ClientData  # noqa: E402
from fedcomp.sklearn import (  # noqa: E402
    FederatedElasticNetCV,
    FederatedLassoCV,
    FederatedLinearRegression,
    FederatedLogisticRegression,
    FederatedLogisticRegressionCV,
    alpha_grid,
    federated_path,
)
from fedcomp.sklearn._path import client_folds  # noqa: E402

#: Both sides of every comparison: a grid with its best alpha inside, three folds, the same
#: tolerance (the test scores of a fit differ between the sides by ~1e-6 relative, the
#: grid's neighbours by > 1e-3).
TOL = 1e-6
DIABETES_GRID = [1.5, 0.4, 0.1]
CANCER_GRID = [0.03, 0.003, 0.0003]
#: breast-cancer's texture, smoothness, fractal dimension and worst concave points: four
#: features that are not near copies of each other, whose fits take a few hundred rounds
#: (the 30 together, near collinear, take thousands: the slow test)
CANCER_FEATURES = [1, 4, 9, 27]


def _diabetes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), y, np.arange(len(y)) % 4


def _cancer() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X[:, CANCER_FEATURES]), y, np.arange(len(y)) % 4


def _base(model, Base, **params):
    """The base estimator the CV estimator ``model`` fits: its shared parameters, so that
    both sides run the same algorithm whatever the defaults."""
    shared = {name: value for name, value in model.get_params().items()
              if name in Base().get_params() and name != "l1_ratio"}
    return Base(**{**shared, **params})


def _grid_search(model, X, y, ids, grid, **params):
    """GridSearchCV over ``grid`` on the CV estimator ``model``'s base estimator, its folds
    (each client's samples split in ``model.cv``; stratified for a classifier) and its
    score (the mean squared error, or the log-loss)."""
    classifier = isinstance(model, FederatedLogisticRegressionCV)
    Base = FederatedLogisticRegression if classifier else FederatedLinearRegression
    folds = client_folds(np.unique(ids), np.unique(ids, return_inverse=True)[1], model.cv,
                         y if classifier else None)
    scoring = "neg_log_loss" if classifier else "neg_mean_squared_error"
    return GridSearchCV(_base(model, Base, **params), grid, cv=folds, scoring=scoring,
                        refit=False).fit(X, y, clients=ids)


@pytest.fixture(scope="module")
def lasso():
    X, y, ids = _diabetes()
    return FederatedLassoCV(alphas=DIABETES_GRID, cv=3, tol=TOL).fit(X, y, clients=ids)


@pytest.fixture(scope="module")
def enet():
    X, y, ids = _diabetes()
    model = FederatedElasticNetCV(l1_ratio=[0.5, 0.9], alphas=DIABETES_GRID, cv=3, tol=TOL)
    return model.fit(X, y, clients=ids)


@pytest.fixture(scope="module")
def logistic():
    X, y, ids = _cancer()
    return FederatedLogisticRegressionCV(alphas=CANCER_GRID, cv=3, tol=TOL).fit(
        X, y, clients=ids)


# --- the alpha GridSearchCV picks ----------------------------------------------------------
def test_lasso_cv_chooses_grid_search_alpha_on_diabetes(lasso):
    X, y, ids = _diabetes()
    search = _grid_search(lasso, X, y, ids, {"alpha": DIABETES_GRID})
    assert lasso.alpha_ == search.best_params_["alpha"] == 0.4  # inside the grid
    np.testing.assert_allclose(lasso.mse_path_.mean(axis=1),
                               -search.cv_results_["mean_test_score"], rtol=1e-5)
    # scikit-learn's shapes; the refit on all the data (test_folds_... shows it is the base
    # estimator's fit at alpha_)
    assert lasso.alphas_.tolist() == DIABETES_GRID and lasso.mse_path_.shape == (3, 3)
    assert lasso.coef_.shape == (10,) and isinstance(lasso.n_iter_, int)
    assert list(lasso.clients_) == [0, 1, 2, 3] and lasso.converged_
    assert lasso.score(X, y) > 0.5  # R², as LassoCV's


def test_elastic_net_cv_chooses_grid_search_alpha_and_l1_ratio(enet):
    X, y, ids = _diabetes()
    grid = {"alpha": DIABETES_GRID, "l1_ratio": [0.5, 0.9]}
    search = _grid_search(enet, X, y, ids, grid, penalty="elasticnet")
    assert (enet.alpha_, enet.l1_ratio_) == (search.best_params_["alpha"],
                                             search.best_params_["l1_ratio"])
    assert enet.mse_path_.shape == (2, 3, 3) and enet.alphas_.shape == (3,)
    # GridSearchCV's candidates run alpha-major: (alpha, l1_ratio) for l1_ratio inside
    ours = enet.mse_path_.mean(axis=-1).T.ravel()
    np.testing.assert_allclose(ours, -search.cv_results_["mean_test_score"], rtol=1e-5)


def test_logistic_cv_chooses_grid_search_alpha_on_breast_cancer(logistic):
    X, y, ids = _cancer()
    search = _grid_search(logistic, X, y, ids, {"alpha": CANCER_GRID})
    assert logistic.alpha_ == search.best_params_["alpha"] == 0.003
    np.testing.assert_allclose(logistic.scores_.mean(axis=0)[0],
                               search.cv_results_["mean_test_score"], rtol=1e-5)
    # LogisticRegressionCV's shapes (use_legacy_attributes=False), coef_ of the refit
    assert logistic.scores_.shape == logistic.n_iter_.shape == (3, 1, 3)
    assert logistic.coefs_paths_.shape == (3, 1, 3, 1, len(CANCER_FEATURES) + 1)
    assert logistic.coef_.shape == (1, 4) and logistic.intercept_.shape == (1,)
    assert logistic.l1_ratio_ == 1.0 and list(logistic.classes_) == [0, 1]
    assert logistic.score(X, y) < 0  # its scoring: the log-loss, negated
    assert logistic.predict_proba(X).shape == (len(y), 2)


@pytest.mark.slow  # ~20 s: 9 warm and 9 cold fits of thousands of rounds
def test_logistic_cv_chooses_grid_search_alpha_on_all_of_breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    X, ids, grid = StandardScaler().fit_transform(X), np.arange(len(y)) % 4, [0.03, 0.004, 8e-4]
    model = FederatedLogisticRegressionCV(alphas=grid, cv=3, tol=TOL).fit(X, y, clients=ids)
    search = _grid_search(model, X, y, ids, {"alpha": grid})
    assert model.alpha_ == search.best_params_["alpha"] == 0.004
    # near-separable: the held-out log-loss of the weakest fit magnifies the difference of
    # a warm and a cold start (3e-3 at 8e-4); the neighbours differ by 50 %
    np.testing.assert_allclose(model.scores_.mean(axis=0)[0],
                               search.cv_results_["mean_test_score"], rtol=1e-2)


# --- the grid, the folds --------------------------------------------------------------------
def test_alphas_int_is_scikit_learns_grid_and_an_array_is_the_grid():
    X, y, ids = _diabetes()
    cheap = {"cv": 2, "max_iter": 20, "tol": None}  # the grid is what is checked here
    model = FederatedLassoCV(alphas=4, eps=1e-2, **cheap).fit(X, y, clients=ids)
    theirs = LassoCV(alphas=4, eps=1e-2, cv=2).fit(X, y).alphas_
    np.testing.assert_allclose(model.alphas_, theirs, rtol=1e-12)
    assert model.mse_path_.shape == (4, 2) and model.alpha_ in model.alphas_
    model = FederatedLassoCV(alphas=[0.1, 1.0, 0.5], **cheap).fit(X, y, clients=ids)
    assert model.alphas_.tolist() == [1.0, 0.5, 0.1]  # fitted decreasing
    weights = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))  # LassoCV's weighting
    weighted = FederatedLassoCV(alphas=4, eps=1e-2, **cheap).fit(X, y, sample_weight=weights)
    theirs = LassoCV(alphas=4, eps=1e-2, cv=2).fit(X, y, sample_weight=weights).alphas_
    np.testing.assert_allclose(weighted.alphas_, theirs, rtol=1e-12)
    enet = FederatedElasticNetCV(l1_ratio=[0.5, 1.0], alphas=3, **cheap).fit(X, y)
    assert enet.alphas_.shape == (2, 3)  # one grid per l1_ratio, from alpha_max / l1_ratio
    np.testing.assert_allclose(enet.alphas_[0], 2 * enet.alphas_[1], rtol=1e-12)


def test_folds_split_each_clients_samples():
    ids = np.repeat(["a", "b", "c"], [7, 9, 12])
    owner = np.unique(ids, return_inverse=True)[1]
    folds = client_folds(np.unique(ids), owner, 3)
    tests = np.concatenate([test for _, test in folds])
    assert sorted(tests.tolist()) == list(range(28))  # each sample held out once
    for train, test in folds:
        assert set(ids[train]) == {"a", "b", "c"}  # every training fold keeps every client
        held = [int((ids[test] == c).sum()) for c in "abc"]
        assert held in ([3, 3, 4], [2, 3, 4])  # a third of each client's samples
    # a classifier's folds: stratified within each client
    labels = np.tile([0, 1], 14)
    for _, test in client_folds(np.unique(ids), owner, 3, labels):
        assert 0 < labels[test].mean() < 1
    # without clients=, the iid split of n_clients the base estimator makes
    X, y, _ = _diabetes()
    model = FederatedLassoCV(alphas=[1.0], cv=GroupKFold(3), n_clients=3, max_iter=5,
                             tol=None, random_state=1).fit(X, y)
    base = _base(model, FederatedLinearRegression, alpha=1.0).fit(X, y)
    np.testing.assert_array_equal(model.coef_, base.coef_)
    assert model.mse_path_.shape == (1, 3)  # GroupKFold held out one client a fold
    # a ClientData: its clients, split as clients= would be
    data = ClientData.from_lists([X[:200], X[200:]], [y[:200], y[200:]])
    cheap = {"alphas": [1.0], "cv": 2, "max_iter": 5, "tol": None}
    from_data = FederatedLassoCV(**cheap).fit(data)
    given = FederatedLassoCV(**cheap).fit(X, y, clients=np.arange(len(y)) >= 200)
    assert list(from_data.clients_) == [0, 1]
    np.testing.assert_array_equal(from_data.mse_path_, given.mse_path_)


def test_federated_path_takes_alphas_int_and_n_alphas_with_a_future_warning():
    X, y, ids = _diabetes()
    cheap = FederatedLinearRegression(max_iter=10, tol=None)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new form warns nothing
        alphas, coefs, n_iters = federated_path(cheap, X, y, clients=ids, alphas=3, eps=1e-2)
    np.testing.assert_array_equal(alphas, alpha_grid(cheap, X, y, 3, eps=1e-2))
    assert coefs.shape == (3, 10) and n_iters.tolist() == [10, 10, 10]
    with pytest.warns(FutureWarning, match="'n_alphas' is deprecated.*pass alphas=3"):
        old = federated_path(cheap, X, y, clients=ids, n_alphas=3, eps=1e-2)
    np.testing.assert_array_equal(old[1], coefs)
    with pytest.warns(FutureWarning, match="'alphas=None' is deprecated.*alphas=3"), \
            pytest.warns(FutureWarning, match="'n_alphas'"):
        assert len(federated_path(cheap, X, y, alphas=None, n_alphas=3)[0]) == 3
    with pytest.raises(ValueError, match="pass alphas=4 alone"), \
            pytest.warns(FutureWarning):
        federated_path(cheap, X, y, alphas=4, n_alphas=3)


# --- the errors -------------------------------------------------------------------------------
@pytest.mark.parametrize(("params", "message"), [
    ({"alphas": 0}, r"alphas must be the number of grid points .*\(got alphas=0\)"),
    ({"alphas": [0.5, -1.0]}, r"alphas\[1\] must be a finite number >= 0 \(got -1.0\)"),
    ({"alphas": []}, "alphas is empty"),
    ({"cv": 1}, r"cv must be an integer >= 2, the number of folds \(got cv=1\)"),
    ({"cv": "five"}, "cv must be an integer >= 2, a splitter"),
    ({"eps": 0.0}, "eps must be a number > 0"),
])
def test_bad_cv_parameters_are_one_clear_error(params, message):
    X, y, ids = _diabetes()
    with pytest.raises(ValueError, match=message):
        FederatedLassoCV(**{"alphas": 3, **params}).fit(X, y, clients=ids)


def test_a_client_with_fewer_samples_than_folds_is_named():
    X, y, ids = _diabetes()
    ids = np.where(np.arange(len(y)) < 2, 99, ids)  # client 99 holds 2 samples
    with pytest.raises(ValueError, match="client 99 has 2 samples, fewer than cv=3 folds.*"
                                         "lower cv to at most 2, or merge client 99"):
        FederatedLassoCV(alphas=[1.0], cv=3).fit(X, y, clients=ids)


def test_logistic_cv_errors_name_the_fix():
    X, y, ids = _cancer()
    with pytest.raises(ValueError, match="scoring must be one of 'neg_log_loss', 'accuracy'"):
        FederatedLogisticRegressionCV(alphas=[0.1], scoring="roc_auc").fit(X, y)
    with pytest.raises(ValueError, match="alphas=3 builds the grid from alpha_max.*'l2'.*"
                                         r"alphas=\[...\]"):
        FederatedLogisticRegressionCV(penalty="l2", alphas=3).fit(X, y)
    with pytest.raises(ValueError, match=r"l1_ratio must be a number in \[0, 1\]"):
        FederatedElasticNetCV(l1_ratio=[0.5, 2.0]).fit(X, y)
    with pytest.raises(ValueError, match="Unknown label type"):
        FederatedLogisticRegressionCV(alphas=[0.1]).fit(X, np.linspace(0, 1, len(y)))


# --- scikit-learn's conventions -----------------------------------------------------------------
@pytest.mark.parametrize("Estimator", [FederatedLassoCV, FederatedElasticNetCV,
                                       FederatedLogisticRegressionCV])
def test_cv_estimators_keep_scikit_learns_conventions(Estimator):
    name = Estimator.__name__
    check_parameters_default_constructible(name, Estimator())
    check_no_attributes_set_in_init(name, Estimator())
    check_get_params_invariance(name, Estimator())
    check_set_params(name, Estimator())
    cheap = Estimator(alphas=[1.0, 0.1], cv=2, max_iter=5, tol=None)
    check_dont_overwrite_parameters(name, cheap)
    assert clone(cheap).get_params() == cheap.get_params()
    assert "alphas=[1.0, 0.1]" in repr(cheap)
    X, y = (_cancer() if Estimator is FederatedLogisticRegressionCV else _diabetes())[:2]
    fitted = pickle.loads(pickle.dumps(clone(cheap).fit(X, y)))
    np.testing.assert_array_equal(fitted.predict(X), cheap.fit(X, y).predict(X))
