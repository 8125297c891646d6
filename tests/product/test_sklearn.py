"""The scikit-learn front door: check_estimator, the correspondence with scikit-learn's own
linear models, GridSearchCV and Pipeline with client ids, and the errors."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.base import clone  # noqa: E402
from sklearn.datasets import (  # noqa: E402
    load_breast_cancer,
    load_diabetes,
    load_iris,
    make_classification,
    make_regression,
)
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.linear_model import ElasticNet as SkElasticNet  # noqa: E402
from sklearn.linear_model import Lasso, LogisticRegression  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.utils.estimator_checks import parametrize_with_checks  # noqa: E402

import fedcomp  # noqa: E402
from fedcomp import ClientData  # noqa: E402
from fedcomp.regularizers import L1, GroupLasso, Masked  # noqa: E402
from fedcomp.sklearn import (  # noqa: E402
    FederatedEstimator,
    FederatedLinearRegression,
    FederatedLogisticRegression,
)


# --- scikit-learn's estimator checks: every one (none is expected to fail) ---------------------
@parametrize_with_checks([
    FederatedLinearRegression(max_iter=100),
    FederatedLogisticRegression(max_iter=100),
    FederatedEstimator(max_iter=100),                                   # a regressor
    FederatedEstimator("softmax", alpha=0.01, max_iter=100),            # a classifier
])
def test_sklearn_estimator_checks(estimator, check):
    check(estimator)


# --- the same objective as scikit-learn's models ----------------------------------------------
def _clients_with_shifts(n: int, n_clients: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Client ids, and a per-client shift of the features: heterogeneous clients."""
    rng = np.random.default_rng(seed)
    ids = rng.integers(n_clients, size=n)
    return ids, rng.normal(scale=0.5, size=(n_clients, 1))[ids]


def _lasso_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    X, y = make_regression(240, 8, n_informative=3, noise=10.0, random_state=seed)
    ids, shift = _clients_with_shifts(len(y), 4, seed)
    return X + shift, y, ids


@pytest.mark.parametrize("penalty, reference", [
    ("l1", Lasso(alpha=2.0)),
    ("elasticnet", SkElasticNet(alpha=2.0, l1_ratio=0.3)),
])
def test_linear_regression_solves_sklearns_problem_with_the_same_alpha(penalty, reference):
    X, y, ids = _lasso_data()
    ours = FederatedLinearRegression(penalty, alpha=2.0, l1_ratio=0.3, max_iter=600)
    ours.fit(X, y, clients=ids)
    theirs = clone(reference).set_params(tol=1e-12, max_iter=100_000).fit(X, y)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, atol=1e-5 * np.abs(theirs.coef_).max())
    assert ours.intercept_ == pytest.approx(theirs.intercept_, abs=1e-4)
    assert ours.coef_.shape == (8,) and isinstance(ours.intercept_, float)
    assert (ours.coef_ == 0).sum() == (theirs.coef_ == 0).sum() > 0  # the same support


def test_logistic_regression_is_sklearns_with_alpha_one_over_c_n():
    X, y = make_classification(200, 5, n_informative=3, random_state=1)
    X = StandardScaler().fit_transform(X)
    alpha = 0.02
    ours = FederatedLogisticRegression(alpha=alpha, max_iter=3000)
    ours.fit(X, y, clients=np.arange(200) % 3)
    theirs = LogisticRegression(C=1 / (alpha * len(y)), l1_ratio=1.0, solver="saga",
                                tol=1e-12, max_iter=100_000).fit(X, y)
    assert ours.coef_.shape == (1, 5) and ours.intercept_.shape == (1,)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, atol=1e-4)
    np.testing.assert_allclose(ours.intercept_, theirs.intercept_, atol=1e-4)
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-4)


def test_multiclass_is_a_multinomial_fit():
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    names = np.array(["setosa", "versicolor", "virginica"])
    labels = names[y]
    ours = FederatedLogisticRegression(penalty="l2", alpha=0.05, max_iter=1500).fit(X, labels)
    # scikit-learn's l2 penalty is ½‖w‖²/C: alpha·N = 1/C
    theirs = LogisticRegression(C=1 / (0.05 * len(y)), tol=1e-12, max_iter=100_000).fit(X, y)
    assert list(ours.classes_) == list(names)
    assert ours.coef_.shape == (3, 4) and ours.intercept_.shape == (3,)
    # the intercepts of a softmax are determined up to a common shift: compare probabilities
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), atol=1e-3)
    np.testing.assert_allclose(ours.coef_, theirs.coef_, atol=1e-3)
    top2 = np.sort(theirs.predict_proba(X), axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 1e-2  # a near tie may go either way at 1e-3
    assert clear.sum() > 140
    assert (ours.predict(X) == names[theirs.predict(X)])[clear].all()


def test_the_generic_estimator_gives_probabilities_for_classification_losses_only():
    """The generic estimator on the logistic loss is FederatedLogisticRegression (same
    problem, same algorithm: the same numbers), whose probabilities match scikit-learn's."""
    X, y = make_classification(200, 5, n_informative=3, random_state=1)
    X = StandardScaler().fit_transform(X)
    clients = np.arange(200) % 3
    binary = FederatedEstimator("logistic", alpha=0.02, max_iter=300).fit(X, y, clients=clients)
    known = FederatedLogisticRegression(alpha=0.02, max_iter=300).fit(X, y, clients=clients)
    np.testing.assert_array_equal(binary.predict_proba(X), known.predict_proba(X))
    np.testing.assert_array_equal(binary.decision_function(X), known.decision_function(X))
    labels = np.array(["a", "b", "c"])[load_iris(return_X_y=True)[1]]
    iris = StandardScaler().fit_transform(load_iris(return_X_y=True)[0])
    multi = FederatedEstimator("softmax", alpha=0.01, max_iter=300).fit(iris, labels)
    proba = multi.predict_proba(iris)
    assert proba.shape == (150, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    assert (multi.classes_[proba.argmax(axis=1)] == multi.predict(iris)).all()
    np.testing.assert_allclose(np.log(proba), multi.predict_log_proba(iris), rtol=1e-12)
    regressor = FederatedEstimator(max_iter=5)  # least squares: no probabilities
    assert not hasattr(regressor, "predict_proba")
    assert not hasattr(regressor, "decision_function")


# --- GridSearchCV and Pipeline ------------------------------------------------------------
def test_grid_search_over_alpha_picks_what_a_centralized_lasso_picks():
    X, y = make_regression(160, 30, n_informative=3, noise=30.0, random_state=1)
    ids, shift = _clients_with_shifts(len(y), 5, seed=1)
    X = X + shift
    grid = {"alpha": [0.1, 1.0, 3.0, 10.0, 30.0]}
    folds = KFold(4, shuffle=True, random_state=0)
    federated = GridSearchCV(FederatedLinearRegression(max_iter=1000), grid, cv=folds)
    federated.fit(X, y, clients=ids)  # GridSearchCV splits the client ids with the samples
    centralized = GridSearchCV(Lasso(tol=1e-10, max_iter=100_000), grid, cv=folds).fit(X, y)
    np.testing.assert_allclose(federated.cv_results_["mean_test_score"],
                               centralized.cv_results_["mean_test_score"], rtol=1e-4)
    assert federated.best_params_ == centralized.best_params_
    # and the winner is not the edge of the grid: the test would see a wrong ranking
    assert federated.best_params_["alpha"] not in (grid["alpha"][0], grid["alpha"][-1])


def test_pipeline_passes_the_client_ids_to_the_estimator():
    X, y, ids = _lasso_data()
    pipe = make_pipeline(StandardScaler(), FederatedLinearRegression(alpha=1.0, max_iter=300))
    pipe.fit(X, y, federatedlinearregression__clients=ids)
    model = pipe[-1]
    assert list(model.clients_) == [0, 1, 2, 3]
    assert pipe.score(X, y) > 0.9
    pipe.set_params(federatedlinearregression__alpha=1e3).fit(
        X, y, federatedlinearregression__clients=ids)
    assert (pipe[-1].coef_ == 0).all()  # alpha beyond ‖Xᵀy‖∞/N: the lasso's zero solution


# --- the default fit on scikit-learn's bundled data: matches, or says it has not converged --
def _bundled(name: str, scaled: bool) -> tuple[np.ndarray, np.ndarray]:
    X, y = (load_diabetes if name == "diabetes" else load_breast_cancer)(return_X_y=True)
    return (StandardScaler().fit_transform(X) if scaled else X), y


def _centralized(kind: str, alpha: float, X: np.ndarray, y: np.ndarray) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        if kind == "lasso":
            return Lasso(alpha=alpha, tol=1e-14, max_iter=1_000_000).fit(X, y).coef_
        if kind == "elasticnet":
            return SkElasticNet(alpha=alpha, l1_ratio=0.5, tol=1e-14,
                                max_iter=1_000_000).fit(X, y).coef_
        return LogisticRegression(C=1 / (alpha * len(y)), l1_ratio=1.0, solver="saga",
                                  tol=1e-13, max_iter=1_000_000).fit(X, y).coef_.ravel()


@pytest.mark.parametrize("data, scaled, kind, alpha, converges, precondition, algorithm", [
    ("diabetes", False, "lasso", 0.1, True, True, "auto"),  # raw data: preconditioned
    # unscaled, ZA1's gradient steps stall; auto's curvature step adapts to the scale
    ("diabetes", False, "lasso", 0.1, False, False, "za1"),
    ("diabetes", False, "lasso", 0.1, True, False, "auto"),
    ("diabetes", True, "lasso", 0.1, True, True, "auto"),
    ("diabetes", True, "elasticnet", 0.1, True, True, "auto"),
    ("diabetes", False, "elasticnet", 0.01, None, True, "auto"),
    ("breast_cancer", True, "logistic", 0.01, True, True, "auto"),
    # raw breast-cancer with auto converges too, but saga's reference does not: that case
    # is checked against skglm's optimum in test_sklearn_precondition
    ("breast_cancer", False, "logistic", 0.01, False, True, "za1"),
])
def test_the_default_fit_matches_scikit_learn_or_warns(data, scaled, kind, alpha, converges,
                                                        precondition, algorithm):
    """Never a silent miss: the coefficients within 1e-4 (relative) of scikit-learn's
    centralized solution, or a ConvergenceWarning (and converged_ False)."""
    X, y = _bundled(data, scaled)
    if kind == "logistic":
        ours = FederatedLogisticRegression(alpha=alpha, precondition=precondition,
                                           algorithm=algorithm)
    else:
        ours = FederatedLinearRegression(kind if kind == "elasticnet" else "l1", alpha=alpha,
                                         l1_ratio=0.5, precondition=precondition,
                                         algorithm=algorithm)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours.fit(X, y)
    warned = [w for w in caught if issubclass(w.category, ConvergenceWarning)]
    assert bool(warned) == (not ours.converged_)
    if converges is not None:  # the cases whose outcome is known: the rule is not vacuous
        assert ours.converged_ == converges
    if warned:
        message = str(warned[0].message)
        assert f"after max_iter={ours.max_iter} rounds" in message
        if not scaled:  # the fix named first: preconditioning, or where it ran, not scale
            assert ("precondition=True" in message and "StandardScaler" in message) \
                if not precondition else ("preconditioned" in message
                                          and "StandardScaler" not in message)
        return
    theirs = _centralized(kind, alpha, X, y)
    error = np.linalg.norm(ours.coef_.ravel() - theirs) / np.linalg.norm(theirs)
    assert error <= 1e-4, error


def test_warm_start_continues_from_the_previous_fit():
    X, y = _bundled("diabetes", True)
    cold = FederatedLinearRegression(alpha=0.1).fit(X, y)
    warm = FederatedLinearRegression(alpha=0.1, warm_start=True)
    warm.fit(X, y)
    again = warm.fit(X, y)  # already at the solution: the first check stops it
    assert again.n_iter_ == 0 and again.converged_
    np.testing.assert_allclose(again.coef_, cold.coef_, rtol=1e-6)
    # along a path: the next alpha starts from the last states and reaches its own solution
    # (for ZA1 on these data no sooner: the slow tail, not the start, sets the rounds)
    path = warm.set_params(alpha=0.2).fit(X, y)
    fresh = FederatedLinearRegression(alpha=0.2).fit(X, y)
    assert path.converged_
    assert np.linalg.norm(path.coef_ - fresh.coef_) <= 1e-4 * np.linalg.norm(fresh.coef_)


# --- the ways of giving clients -------------------------------------------------------------
def test_client_data_clients_and_an_iid_split_solve_the_same_problem():
    X, y, ids = _lasso_data()
    model = FederatedLinearRegression(alpha=2.0, max_iter=600)
    by_ids = clone(model).fit(X, y, clients=np.array(["abcd"[i] for i in ids]))
    data = ClientData.from_lists([X[ids == i] for i in range(4)], [y[ids == i] for i in range(4)])
    by_data = clone(model).fit(data)
    iid = clone(model).set_params(n_clients=6, random_state=1).fit(X, y)
    one = clone(model).fit(X, y)
    assert list(by_ids.clients_) == list("abcd") and len(iid.clients_) == 6
    np.testing.assert_allclose(by_data.coef_, by_ids.coef_, rtol=1e-12)
    for other in (iid, one):  # weighting by samples: every split has the pooled objective
        np.testing.assert_allclose(other.coef_, by_ids.coef_, atol=1e-5)


def test_fitted_attributes_history_and_pickling():
    X, y, ids = _lasso_data()
    model = FederatedEstimator(alpha=2.0, algorithm="fedcanon", max_iter=50, eval_every=10,
                               tol=None)
    model.fit(X, y, clients=ids)
    assert [row["round"] for row in model.history_] == [0, 10, 20, 30, 40, 50]
    assert model.n_iter_ == 50 and model.objective_ == model.history_[-1]["objective"]
    assert model.history_[-1]["objective"] < model.history_[0]["objective"]
    assert model.algorithm_.startswith("fedcanon(client_lr=")
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict(X), model.predict(X))


def _largest_smoothness(X: np.ndarray, ids: np.ndarray) -> float:
    """The largest client's ``λ_max(A_iᵀA_i / n_i)`` of ``A = [X, 1]``."""
    Xb = np.hstack([X, np.ones((len(X), 1))])
    return max(np.linalg.eigvalsh(Xb[ids == i].T @ Xb[ids == i] / (ids == i).sum())[-1]
               for i in np.unique(ids))


def test_client_lr_auto_is_one_over_local_steps_times_the_largest_smoothness():
    X, y, ids = _lasso_data()
    model = FederatedLinearRegression(max_iter=1, algorithm_params={"local_steps": 4},
                                      precondition=False)
    model.fit(X, y, clients=ids)
    run = eval(model.algorithm_, {"za1": fedcomp.za1})  # noqa: S307 - the algorithm's repr
    assert run.hyperparameters["local_steps"] == 4
    assert run.hyperparameters["client_lr"] == pytest.approx(
        1 / (4 * _largest_smoothness(X, ids)), rel=1e-10)
    given = clone(model).set_params(client_lr=0.001).fit(X, y, clients=ids)
    assert "client_lr=0.001," in given.algorithm_
    # preconditioned (the default): the smoothness of the pooled-standardized columns
    scaled = clone(model).set_params(precondition=True).fit(X, y, clients=ids)
    run = eval(scaled.algorithm_, {"za1": fedcomp.za1})  # noqa: S307 - the algorithm's repr
    standardized = (X - X.mean(axis=0)) / X.std(axis=0)
    assert run.hyperparameters["client_lr"] == pytest.approx(
        1 / (4 * _largest_smoothness(standardized, ids)), rel=1e-10)


def test_repr_and_params():
    model = FederatedLogisticRegression(penalty="scad", alpha=0.1, gamma=4.0)
    assert repr(model) == "FederatedLogisticRegression(alpha=0.1, gamma=4.0, penalty='scad')"
    assert model.get_params()["gamma"] == 4.0
    assert model.set_params(alpha=0.2).alpha == 0.2
    # a built algorithm shows as the call that builds it
    assert "algorithm=za1(client_lr=1.0," in repr(FederatedEstimator(algorithm=fedcomp.za1()))


@pytest.mark.parametrize("model, fit_kwargs, match", [
    (FederatedLinearRegression(penalty="lasso"), {}, "unknown penalty 'lasso'.*l1, elasticnet"),
    (FederatedLinearRegression(alpha=-1.0), {}, r"alpha must be a number >= 0 \(got alpha=-1.0"),
    (FederatedLinearRegression(max_iter=0), {}, r"max_iter must be an integer >= 1 \(got 0\)"),
    (FederatedLinearRegression(), {"clients": np.zeros(3)}, r"one client id per sample: shape"),
    (FederatedLinearRegression(n_clients=500), {}, "n_clients=500 but only 240 samples"),
    (FederatedLinearRegression(algorithm="nope"), {}, "must be 'auto', a name of fedavg"),
    (FederatedLinearRegression(algorithm="async_feddr"), {}, "event clock"),
    (FederatedEstimator(regularizer=GroupLasso(1.0, groups=(0, 0, 1, 1, 2, 2, 3, 3)),
                        alpha=None), {}, "coordinate-separable.*fit_intercept=False"),
    (FederatedEstimator(regularizer=L1(1.0)), {}, "carries its own strength: pass alpha=None"),
    (FederatedEstimator(regularizer="l1_ball"), {}, "takes no alpha.*regularizer_params"),
])
def test_errors_name_the_bad_value_and_the_fix(model, fit_kwargs, match):
    X, y, _ = _lasso_data()
    with pytest.raises(ValueError, match=match):
        model.fit(X, y, **fit_kwargs)


def test_a_classifier_needs_two_classes():
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(ValueError, match="at least 2 classes; got 1 class"):
        FederatedLogisticRegression().fit(X, np.ones(20))
    with pytest.raises(ValueError, match="logistic loss separates 2 classes; got 3.*softmax"):
        FederatedEstimator("logistic", alpha=0.01).fit(X, np.arange(20) % 3)


def test_masked_on_a_matrix_model_leaves_the_bias_row_alone():
    mask = np.ones((3, 2), dtype=bool)
    mask[-1] = False
    reg = Masked(L1(1.0, param_ndim=2), mask)
    x = np.full((1, 3, 2), 2.0)
    np.testing.assert_array_equal(reg.prox(x, 0.5)[0], [[1.5, 1.5], [1.5, 1.5], [2.0, 2.0]])
    assert reg.value(x)[0] == 8.0 and reg.param_ndim == 2
    with pytest.raises(ValueError, match="2-D boolean array"):
        Masked(L1(1.0, param_ndim=2), np.ones(3, dtype=bool))


# --- the regularization path -------------------------------------------------------------------
def test_alpha_max_is_where_the_fit_becomes_zero_and_scikit_learns_grid_starts():
    from sklearn.linear_model import LassoCV

    from fedcomp.sklearn import alpha_max

    X, y = _bundled("diabetes", True)
    top = alpha_max(FederatedLinearRegression(), X, y)
    assert top == pytest.approx(LassoCV(alphas=3, cv=2).fit(X, y).alphas_[0], rel=1e-12)
    assert (FederatedLinearRegression(alpha=1.001 * top).fit(X, y).coef_ == 0).all()
    assert (FederatedLinearRegression(alpha=0.95 * top).fit(X, y).coef_ != 0).any()
    Xb, yb = _bundled("breast_cancer", True)
    top = alpha_max(FederatedLogisticRegression(), Xb, yb)
    assert (FederatedLogisticRegression(alpha=1.001 * top).fit(Xb, yb).coef_ == 0).all()
    assert (FederatedLogisticRegression(alpha=0.95 * top).fit(Xb, yb).coef_ != 0).any()
    with pytest.raises(ValueError, match="penalty must be 'l1' or 'elasticnet'"):
        alpha_max(FederatedLinearRegression(penalty="mcp"), X, y)


def test_federated_path_follows_lassos_solutions_with_warm_starts():
    from fedcomp.sklearn import federated_path

    X, y = _bundled("diabetes", True)
    ids = np.arange(len(y)) % 4
    alphas, coefs, n_iters = federated_path(FederatedLinearRegression(), X, y, clients=ids,
                                            alphas=5, eps=1e-2)
    assert np.all(np.diff(alphas) < 0) and coefs.shape == (5, X.shape[1])
    assert (coefs[0] == 0).all() and (n_iters > 0).all()  # at alpha_max: every coefficient 0
    nonzeros = (coefs != 0).sum(axis=1)
    assert np.all(np.diff(nonzeros) >= 0) and nonzeros[-1] > nonzeros[1]
    for alpha, coef in zip(alphas[1:], coefs[1:], strict=True):
        theirs = _centralized("lasso", alpha, X, y)
        assert np.linalg.norm(coef - theirs) <= 1e-4 * np.linalg.norm(theirs)


# --- sample weights ----------------------------------------------------------------------------
def test_sample_weight_gives_scikit_learns_weighted_lasso():
    X, y = _bundled("diabetes", True)
    weights = np.random.default_rng(0).uniform(0.2, 3.0, size=len(y))
    ids = np.arange(len(y)) % 3
    ours = FederatedLinearRegression(alpha=0.1).fit(X, y, clients=ids, sample_weight=weights)
    assert ours.converged_
    theirs = Lasso(alpha=0.1, tol=1e-14, max_iter=1_000_000).fit(X, y, sample_weight=weights)
    error = np.linalg.norm(ours.coef_ - theirs.coef_) / np.linalg.norm(theirs.coef_)
    assert error <= 1e-4, error
    assert ours.intercept_ == pytest.approx(theirs.intercept_, rel=1e-4)
    # an integer weight is that many copies of the sample, whatever the clients
    counts = np.random.default_rng(1).integers(1, 4, size=len(y))
    copies = FederatedLinearRegression(alpha=0.1).fit(np.repeat(X, counts, axis=0),
                                                      np.repeat(y, counts))
    weighted = FederatedLinearRegression(alpha=0.1).fit(X, y, sample_weight=counts)
    np.testing.assert_allclose(weighted.coef_, copies.coef_, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="clients \\[0\\] all weigh 0"):
        FederatedLinearRegression().fit(X, y, clients=ids, sample_weight=(ids != 0) * 1.0)
