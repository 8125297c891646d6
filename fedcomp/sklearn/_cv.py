"""Cross-validated estimators on warm-started federated paths: ``FederatedLassoCV``,
``FederatedElasticNetCV``, ``FederatedLogisticRegressionCV``.

Each is scikit-learn's ``LassoCV`` / ``ElasticNetCV`` / ``LogisticRegressionCV`` with the fit
made federated: the grid from :func:`~fedcomp.sklearn.alpha_max` (one aggregation round),
folds that split *each client's* samples (every training fold keeps every client, as the
federation it stands for), one path per training fold along the decreasing grid with each
fit warm-started from the last, the held-out score that the clients' sums add up to, then a
refit on all the data at the best ``alpha``.

References
----------
Friedman, Hastie, Tibshirani, "Regularization paths for generalized linear models via
coordinate descent", Journal of Statistical Software 33(1), 2010 (the grid and warm starts).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .._extras import require

require("sklearn.base", "fedcomp.sklearn")

# scikit-learn >= 1.6 (the data extra's floor): validate_data and the tags API
from sklearn.base import ClassifierMixin, RegressorMixin, clone  # noqa: E402
from sklearn.utils.multiclass import check_classification_targets  # noqa: E402
from sklearn.utils.validation import _check_sample_weight, validate_data  # noqa: E402

from ..data import ClientData  # noqa: E402
from ._base import _FederatedModel, _predict_labels, _store  # noqa: E402
from ._estimators import FederatedLinearRegression, FederatedLogisticRegression  # noqa: E402
from ._path import (  # noqa: E402
    N_ALPHAS,
    SCORINGS,
    Scorer,
    alpha_grid,
    best_index,
    check_alphas,
    check_eps,
    check_l1_ratios,
    cv_folds,
    cv_paths,
    neg_mse,
)
from ._problem import client_owners  # noqa: E402

#: The refit's attributes a CV estimator keeps, beside its own.
REFIT_ATTRIBUTES = ("coef_", "intercept_", "history_", "objective_", "converged_",
                    "algorithm_", "clients_")


# --- the estimators -------------------------------------------------------------------------
class _FederatedCV(_FederatedModel):
    """The path, the folds, the choice and the refit that the three estimators share.

    A subclass names its base estimator (``_base_class``), its penalty and its scorer.
    """

    _base_class: type = FederatedLinearRegression

    # the CV's own parameters (each subclass's __init__ stores them)
    alphas: Any
    cv: Any
    eps: Any
    l1_ratio: Any
    penalty: Any

    def _penalty(self) -> Any:
        return self.penalty

    def _scorer(self) -> Scorer:
        return neg_mse

    def _l1_ratios(self) -> list[float]:
        return check_l1_ratios(self.l1_ratio)

    def _base_estimator(self) -> Any:
        """The model each fold's path and the refit fit: the CV's shared parameters."""
        base = self._base_class()
        shared = {name: value for name, value in self.get_params(deep=False).items()
                  if name in base.get_params(deep=False)
                  and name not in ("l1_ratio", "penalty")}
        return base.set_params(**shared, penalty=self._penalty())

    def _grids(self, base: Any, l1_ratios: list[float], X: Any, y: np.ndarray,
               sample_weight: Any) -> np.ndarray:
        """The grid of each ``l1_ratio``, shape ``(n_l1_ratios, n_alphas)``, decreasing."""
        alphas = check_alphas(self.alphas)
        if not isinstance(alphas, int):
            return np.tile(alphas, (len(l1_ratios), 1))
        check_eps(self.eps)
        try:
            return np.stack([alpha_grid(clone(base).set_params(l1_ratio=ratio), X, y,
                                        alphas, self.eps, sample_weight)
                             for ratio in l1_ratios])
        except ValueError as error:
            raise ValueError(f"alphas={alphas} builds the grid from alpha_max: {error}; or "
                             f"give the grid, alphas=[...]") from None

    def fit(self, X: Any, y: Any = None, clients: Any = None, sample_weight: Any = None
            ) -> _FederatedCV:
        """Choose ``alpha`` by federated cross-validation, then refit on all the data.

        Parameters
        ----------
        X : array of shape (n_samples, n_features), or ClientData
            The samples; or a :class:`fedcomp.ClientData` (then ``y``, ``clients`` and
            ``sample_weight`` are None: its own are used).
        y : array of shape (n_samples,)
            Targets (class labels of any type for a classifier).
        clients : array of shape (n_samples,), optional
            The client id of every sample; without it the samples are split iid into
            ``n_clients`` clients, as the base estimator splits them.
        sample_weight : array of shape (n_samples,), optional
            Each sample's weight, in the fits and in the folds' scores.

        Returns
        -------
        self
        """
        X, y, clients, sample_weight = _unpack(X, y, clients, sample_weight)
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], accept_sparse="csr",
                             y_numeric=not self._is_classifier())
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        if self._is_classifier():
            check_classification_targets(y)
        base = self._base_estimator()
        ratios = self._l1_ratios() if self._penalty() == "elasticnet" else [1.0]
        grids = self._grids(base, ratios, X, y, sample_weight)
        ids, owner = client_owners(X.shape[0], clients, self.n_clients, self.random_state)
        folds = cv_folds(self.cv, X, y, ids, owner, stratify=self._is_classifier())
        scores, n_iters, paths = cv_paths(base, X, y, owner, sample_weight, folds, ratios,
                                          grids, self._scorer())
        r, a = best_index(scores)
        refit = base.set_params(alpha=float(grids[r, a]), l1_ratio=ratios[r])
        # the ids as given (refit's clients_ are the user's ids, not owner's indices)
        refit.fit(X, y, clients=clients, sample_weight=sample_weight)
        for name in REFIT_ATTRIBUTES + (("classes_",) if self._is_classifier() else ()):
            setattr(self, name, getattr(refit, name))
        self.alpha_ = float(grids[r, a])
        self.alphas_ = grids[0] if len(ratios) == 1 or not isinstance(
            check_alphas(self.alphas), int) else grids
        self._set_cv_attributes(scores, n_iters, paths, ratios[r], refit)
        return self

    def _set_cv_attributes(self, scores: np.ndarray, n_iters: np.ndarray, paths: Any,
                           l1_ratio: float, refit: Any) -> None:
        """scikit-learn's ``LassoCV`` / ``ElasticNetCV`` attributes."""
        mse = -scores
        self.mse_path_ = mse[0] if mse.shape[0] == 1 else mse
        self.n_iter_ = refit.n_iter_
        if self._penalty() == "elasticnet":
            self.l1_ratio_ = l1_ratio

    def predict(self, X: Any) -> np.ndarray:
        """``X @ coef_ + intercept_`` of the refit."""
        return self._decision(X)


def _unpack(X: Any, y: Any, clients: Any, sample_weight: Any) -> tuple[Any, Any, Any, Any]:
    """``(X, y, clients, sample_weight)`` of a ``ClientData`` (its pooled samples), or as
    given."""
    if not isinstance(X, ClientData):
        return X, y, clients, sample_weight
    if y is not None or clients is not None or sample_weight is not None:
        raise ValueError("fit(ClientData) takes its targets, clients and sample weights from "
                         "the data: pass y=None, clients=None, sample_weight=None")
    weights = None if X.sample_weight is None else np.concatenate(
        [X.sample_weight[i, :n] for i, n in enumerate(X.counts)])
    features, targets, owner = X.pooled()
    return features, targets, owner, weights


class FederatedLassoCV(RegressorMixin, _FederatedCV):
    """The Lasso with ``alpha`` chosen by federated cross-validation:
    :class:`sklearn.linear_model.LassoCV`, federated.

    Minimises ``(1/(2N)) ‖y − Xw − b‖² + α‖w‖₁`` over the samples of every client at the
    ``alpha`` of the least mean squared error on held-out samples: folds that split each
    client's samples, a path on each training fold along the decreasing grid, each fit
    warm-started from the last (the algorithm's states carry over), the squared errors
    that every client reports on its held-out samples added up by the server (the pooled
    mean scikit-learn computes on a test fold), then a refit on all the data at ``alpha_``.

    Parameters
    ----------
    alphas : int or array of shape (n_alphas,), default 10
        An int: that many values from :func:`alpha_max` (on all the data) down to ``eps``
        times it, log-spaced, as ``LassoCV(alphas=int)``; an array: the grid (fitted
        decreasing).
    eps : float, default 1e-3
        The grid's end over its start, when ``alphas`` is an int.
    cv : int, splitter or iterable, default 5
        An int ``k >= 2``: ``k`` folds that split each client's samples (scikit-learn's
        ``KFold`` within each client, so every training fold keeps every client; a client
        needs ``k`` samples). A splitter: its ``split(X, y, groups=client index of each
        sample)`` (``GroupKFold`` holds out whole clients). Or (train, test) index pairs.
    algorithm, algorithm_params, client_lr, max_iter, tol, fit_intercept, precondition,
    n_clients, clients_per_round, batch_size, eval_every, random_state, engine
        As in :class:`FederatedLinearRegression`, for every fit of every path and the
        refit (``n_clients`` and ``random_state`` give the iid split without ``clients=``,
        which the folds then split).

    Attributes
    ----------
    alpha_ : float
        The chosen ``alpha``.
    alphas_ : array of shape (n_alphas,)
        The grid, decreasing.
    mse_path_ : array of shape (n_alphas, n_folds)
        The mean squared error of each ``alpha`` on each test fold (weighted by
        ``sample_weight`` where given); ``alpha_`` has the least mean over folds.
    n_iter_ : int
        The refit's rounds.
    coef_, intercept_, history_, objective_, converged_, algorithm_, clients_
        The refit's (on all the data at ``alpha_``), as in
        :class:`FederatedLinearRegression`.
    n_features_in_ : int

    Examples
    --------
    >>> from sklearn.datasets import load_diabetes
    >>> from sklearn.preprocessing import StandardScaler
    >>> X, y = load_diabetes(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clients = np.arange(len(y)) % 3
    >>> model = FederatedLassoCV(alphas=3, eps=1e-2, cv=3, tol=1e-5)
    >>> model = model.fit(X, y, clients=clients)
    >>> model.alphas_.shape, model.mse_path_.shape
    ((3,), (3, 3))
    >>> bool(model.alpha_ == model.alphas_[model.mse_path_.mean(axis=1).argmin()])
    True
    """

    def __init__(self, *, alphas: Any = N_ALPHAS, eps: Any = 1e-3, cv: Any = 5,
                 algorithm: Any = "auto", algorithm_params: Any = None,
                 client_lr: Any = "auto", max_iter: Any = 10_000, tol: Any = 1e-8,
                 fit_intercept: Any = True, precondition: Any = True, n_clients: Any = 1,
                 clients_per_round: Any = None, batch_size: Any = None,
                 eval_every: Any = None, random_state: Any = None,
                 engine: Any = "auto") -> None:
        _store(self, locals())

    def _penalty(self) -> str:
        return "l1"

    def _l1_ratios(self) -> list[float]:
        return [1.0]


class FederatedElasticNetCV(RegressorMixin, _FederatedCV):
    """The elastic net with ``alpha`` and ``l1_ratio`` chosen by federated
    cross-validation: :class:`sklearn.linear_model.ElasticNetCV`, federated.

    Minimises ``(1/(2N)) ‖y − Xw − b‖² + αρ‖w‖₁ + α(1−ρ)/2 ‖w‖²`` (ρ = ``l1_ratio``) at the
    ``(alpha, l1_ratio)`` of the least mean squared error on held-out samples, found as
    :class:`FederatedLassoCV` finds its ``alpha``.

    Parameters
    ----------
    l1_ratio : float or list of float, default 0.5
        ρ, or the ρ to try (one path per ρ and fold; with ``alphas`` an int, each ρ its own
        grid from ``alpha_max / ρ``, which needs ρ > 0).
    alphas, eps, cv, algorithm, algorithm_params, client_lr, max_iter, tol, fit_intercept,
    precondition, n_clients, clients_per_round, batch_size, eval_every, random_state,
    engine
        As in :class:`FederatedLassoCV`.

    Attributes
    ----------
    alpha_ : float
        The chosen ``alpha``.
    l1_ratio_ : float
        The chosen ρ.
    alphas_ : array of shape (n_alphas,) or (n_l1_ratio, n_alphas)
        The grid (decreasing); one per ρ when ``alphas`` is an int and several ρ are tried.
    mse_path_ : array of shape (n_alphas, n_folds) or (n_l1_ratio, n_alphas, n_folds)
        The mean squared error on each test fold (the second shape for several ρ).
    n_iter_ : int
        The refit's rounds.
    coef_, intercept_, history_, objective_, converged_, algorithm_, clients_
        The refit's, as in :class:`FederatedLassoCV`.
    n_features_in_ : int
    """

    def __init__(self, *, l1_ratio: Any = 0.5, alphas: Any = N_ALPHAS, eps: Any = 1e-3,
                 cv: Any = 5, algorithm: Any = "auto", algorithm_params: Any = None,
                 client_lr: Any = "auto", max_iter: Any = 10_000, tol: Any = 1e-8,
                 fit_intercept: Any = True, precondition: Any = True, n_clients: Any = 1,
                 clients_per_round: Any = None, batch_size: Any = None,
                 eval_every: Any = None, random_state: Any = None,
                 engine: Any = "auto") -> None:
        _store(self, locals())

    def _penalty(self) -> str:
        return "elasticnet"


class FederatedLogisticRegressionCV(ClassifierMixin, _FederatedCV):
    """Penalised logistic regression with ``alpha`` chosen by federated
    cross-validation: :class:`sklearn.linear_model.LogisticRegressionCV`, federated.

    Minimises ``(1/N) Σ_j log-loss_j + g(w)`` (:class:`FederatedLogisticRegression`'s
    objective) at the ``alpha`` of the best mean ``scoring`` on held-out samples, found as
    :class:`FederatedLassoCV` finds its ``alpha``; ``cv=k`` stratifies each client's folds
    by class (``StratifiedKFold`` within each client).

    The strength is fedcomp's ``alpha``, not scikit-learn's ``C``: a fit on N samples (N
    the sum of ``sample_weight`` where given) at ``alpha`` is ``LogisticRegression`` at
    ``C = 1 / (alpha · N)``, so the increasing ``Cs_`` of ``LogisticRegressionCV`` are a
    decreasing grid of ``alphas``. A training fold holds fewer samples than the refit:
    the same ``alpha`` (the penalty beside the *mean* loss) is the same model strength on
    both, where the same ``C`` is not.

    Parameters
    ----------
    penalty : {"l1", "elasticnet", "l2"}, default "l1"
        ``g`` as in :class:`FederatedLogisticRegression` (``alphas`` an int needs "l1" or
        "elasticnet", and two classes: the grid starts at :func:`alpha_max`).
    l1_ratio : float or list of float, default 0.5
        The elastic net's ρ, or the ρ to try (``penalty="elasticnet"`` only).
    scoring : {"neg_log_loss", "accuracy"}, default "neg_log_loss"
        The score of a test fold (higher is better), pooled over the held-out samples of
        every client. The mean log-loss by default: it is smooth in ``alpha``, so a short
        grid has no ties, and it is ``LogisticRegressionCV``'s default from scikit-learn
        1.11 on (accuracy before). ``score`` uses it too, as ``LogisticRegressionCV``'s.
    alphas, eps, cv, algorithm, algorithm_params, client_lr, max_iter, tol, fit_intercept,
    precondition, n_clients, clients_per_round, batch_size, eval_every, random_state,
    engine
        As in :class:`FederatedLassoCV`.

    Attributes
    ----------
    classes_ : array of shape (n_classes,)
    alpha_ : float
        The chosen ``alpha``.
    alphas_ : array of shape (n_alphas,) or (n_l1_ratio, n_alphas)
        The grid, decreasing (strong to weak, as ``Cs_`` runs).
    l1_ratio_ : float
        The chosen ρ (1.0 for "l1", 0.0 for "l2").
    scores_ : array of shape (n_folds, n_l1_ratios, n_alphas)
        The score of each fit on its test fold, as ``LogisticRegressionCV``'s with
        ``use_legacy_attributes=False`` (its default from 1.10 on).
    coefs_paths_ : array of shape (n_folds, n_l1_ratios, n_alphas, n_outputs, n_features + 1)
        The coefficients of each fit, the intercept last (``n_outputs`` is 1 for two
        classes).
    n_iter_ : array of shape (n_folds, n_l1_ratios, n_alphas)
        The rounds of each fit of the paths (the refit's are in its ``history_``).
    coef_, intercept_, history_, objective_, converged_, algorithm_, clients_
        The refit's, as in :class:`FederatedLogisticRegression`.
    n_features_in_ : int
    """

    _base_class = FederatedLogisticRegression

    def __init__(self, *, penalty: Any = "l1", l1_ratio: Any = 0.5, alphas: Any = N_ALPHAS,
                 eps: Any = 1e-3, cv: Any = 5, scoring: Any = "neg_log_loss",
                 algorithm: Any = "auto", algorithm_params: Any = None,
                 client_lr: Any = "auto", max_iter: Any = 10_000, tol: Any = 1e-8,
                 fit_intercept: Any = True, precondition: Any = True, n_clients: Any = 1,
                 clients_per_round: Any = None, batch_size: Any = None,
                 eval_every: Any = None, random_state: Any = None,
                 engine: Any = "auto") -> None:
        _store(self, locals())

    def _is_classifier(self) -> bool:
        return True

    def _scorer(self) -> Scorer:
        if not (isinstance(self.scoring, str) and self.scoring in SCORINGS):
            raise ValueError(f"scoring must be one of {', '.join(map(repr, SCORINGS))} (got "
                             f"scoring={self.scoring!r})")
        return SCORINGS[self.scoring]

    def _set_cv_attributes(self, scores: np.ndarray, n_iters: np.ndarray, paths: Any,
                           l1_ratio: float, refit: Any) -> None:
        """``LogisticRegressionCV``'s attributes (``use_legacy_attributes=False``)."""
        # (n_l1_ratios, n_alphas, n_folds) -> (n_folds, n_l1_ratios, n_alphas)
        self.scores_ = np.moveaxis(scores, -1, 0)
        # the rounds of every fit of the paths, as LogisticRegressionCV's iterations
        self.n_iter_ = np.moveaxis(n_iters, -1, 0)  # type: ignore[assignment]
        self.coefs_paths_ = np.moveaxis(np.asarray(paths, dtype=np.float64), 2, 0)
        self.l1_ratio_ = {"l1": 1.0, "l2": 0.0}.get(self._penalty(), l1_ratio)

    def predict(self, X: Any) -> np.ndarray:
        """The class of the largest score of the refit."""
        return _predict_labels(self, X)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """``scoring`` on ``(X, y)`` (the mean log-loss, negated, by default), as
        ``LogisticRegressionCV.score`` uses its ``scoring``."""
        return self._scorer()(self, X, np.asarray(y), sample_weight)
