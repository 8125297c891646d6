"""The ℓ1 regularization path with warm starts (``alpha_max``, ``alpha_grid``,
``federated_path``), and what its cross-validation needs: folds that split each client's
samples, the folds' scores along the paths, the best of them."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from .._extras import require

require("sklearn.base", "fedcomp.sklearn")

# scikit-learn >= 1.6 (the data extra's floor): validate_data and the tags API
from sklearn.base import clone  # noqa: E402
from sklearn.metrics import accuracy_score, log_loss, mean_squared_error  # noqa: E402
from sklearn.model_selection import KFold, StratifiedKFold  # noqa: E402
from sklearn.utils.validation import (  # noqa: E402
    check_array,
)

from ._problem import _nonnegative  # noqa: E402

#: A fitted model, held-out X, y and sample weights -> the fold's score (higher is better).
Scorer = Callable[[Any, Any, np.ndarray, Any], float]

#: The grid's length when ``alphas`` is not given (scikit-learn's is 100: a federated fit
#: costs rounds of communication, not microseconds).
N_ALPHAS = 10


# --- the regularization path --------------------------------------------------------------
def alpha_max(estimator: Any, X: Any, y: Any, sample_weight: Any = None) -> float:
    """The smallest ``alpha`` at which ``estimator``'s ℓ1 (or elastic-net) fit is all zero.

    ``max_j |∂_j f(x₀)| / ρ``: the largest partial derivative of the smooth part at the
    model whose coefficients are zero and whose intercept is fitted alone (``ρ`` the
    ``l1_ratio`` of an elastic net, 1 for ℓ1). Federatedly it takes one round: every client
    sends ``∇f_i(x₀)`` (its intercept ``x₀`` is the weighted mean of the targets for least
    squares, the log-odds of the positive class for the logistic loss, both sums the
    clients report first), and the server averages them with the weights ``π_i = n_i/N``
    — which is the pooled gradient, whatever the split: no ``clients`` are needed. As
    scikit-learn's ``LassoCV`` grid starts (``alphas_[0]``). With ``sample_weight`` each
    sample counts with its weight, as in the weighted fit.
    """
    X = check_array(X, dtype=np.float64, accept_sparse="csr")
    penalty = getattr(estimator, "penalty", getattr(estimator, "regularizer", None))
    if penalty not in ("l1", "elasticnet"):
        raise ValueError(f"alpha_max is the ℓ1 path's start: penalty must be 'l1' or "
                         f"'elasticnet' (got {penalty!r})")
    model = clone(estimator)
    targets, n_classes = model._fit_targets(np.asarray(y))
    if n_classes is not None:
        raise ValueError("alpha_max covers the least squares and binary logistic losses; "
                         "a softmax model's path starts where GridSearchCV finds it")
    logistic = model._is_classifier()
    if model.fit_intercept:
        positive = _average(targets > 0, sample_weight)
        intercept = (np.log(positive / (1.0 - positive)) if logistic
                     else _average(targets, sample_weight))
    else:
        intercept = 0.0
    margin = np.full(len(targets), intercept)
    residual = (-targets / (1.0 + np.exp(targets * margin)) if logistic
                else margin - targets)
    if sample_weight is None:
        gradient = np.asarray(X.T @ residual).ravel() / len(targets)
    else:
        weights = np.asarray(sample_weight, dtype=np.float64)
        gradient = np.asarray(X.T @ (weights * residual)).ravel() / weights.sum()
    ratio = float(model.l1_ratio) if penalty == "elasticnet" else 1.0
    if ratio == 0:
        raise ValueError("an elastic net with l1_ratio=0 is never all zero (alpha_max is "
                         "infinite): give its alphas as an array")
    return float(np.max(np.abs(gradient))) / ratio


def _average(values: np.ndarray, sample_weight: Any) -> float:
    """The mean of ``values``, weighted by ``sample_weight`` where given."""
    if sample_weight is None:
        return float(np.mean(values))
    weights = np.asarray(sample_weight, dtype=np.float64)
    return float(weights @ values / weights.sum())


def alpha_grid(estimator: Any, X: Any, y: Any, n_alphas: int, eps: float = 1e-3,
               sample_weight: Any = None) -> np.ndarray:
    """``n_alphas`` values from :func:`alpha_max` down to ``eps`` times it, log-spaced
    (decreasing), as scikit-learn's ``LassoCV(alphas=n_alphas)`` builds its grid."""
    check_eps(eps)
    top = alpha_max(estimator, X, y, sample_weight)
    resolution = np.finfo(np.float64).resolution
    if top <= resolution:  # a constant target: every alpha gives the same zero model
        return np.full(n_alphas, resolution)
    # the formula federated_path has always used (LassoCV's geomspace differs by an ulp)
    return top * np.logspace(0.0, np.log10(eps), n_alphas)


def _integer(value: Any) -> bool:
    """An integer, not a bool (``True`` is no number of grid points)."""
    return isinstance(value, int | np.integer) and not isinstance(value, bool)


def check_eps(eps: Any) -> None:
    """``eps``, the grid's end over its start, is a number > 0: else one ValueError."""
    if not (_nonnegative(eps) and eps > 0):
        raise ValueError(f"eps must be a number > 0: the grid ends at eps * alpha_max "
                         f"(got eps={eps!r})")


def check_alphas(alphas: Any) -> int | np.ndarray:
    """``alphas`` as the number of grid points (an int >= 1) or the grid itself (finite
    values >= 0, decreasing): one ValueError naming the bad value otherwise."""
    if _integer(alphas):
        if alphas < 1:
            raise ValueError(f"alphas must be the number of grid points (an integer >= 1) or "
                             f"the grid, an array of alphas >= 0 (got alphas={alphas!r})")
        return int(alphas)
    if isinstance(alphas, str | bool) or alphas is None or np.ndim(alphas) != 1:
        raise ValueError(f"alphas must be an integer >= 1 (the number of grid points) or a "
                         f"1-D array of alphas >= 0 (got alphas={alphas!r})")
    for index, alpha in enumerate(alphas):
        if not _nonnegative(alpha):
            raise ValueError(f"alphas[{index}] must be a finite number >= 0 (got "
                             f"{alpha!r})")
    if len(alphas) == 0:
        raise ValueError("alphas is empty: give at least one alpha, or an integer >= 1 for "
                         "that many grid points")
    return np.sort(np.asarray(alphas, dtype=np.float64))[::-1]


def check_l1_ratios(l1_ratio: Any) -> list[float]:
    """``l1_ratio`` (a number in [0, 1] or a list of them) as a list: else one ValueError."""
    ratios = np.atleast_1d(np.asarray(l1_ratio, dtype=object))
    if ratios.ndim != 1 or ratios.size == 0:
        raise ValueError(f"l1_ratio must be a number in [0, 1] or a list of them (got "
                         f"l1_ratio={l1_ratio!r})")
    for ratio in ratios.tolist():
        if not (_nonnegative(ratio) and ratio <= 1):
            raise ValueError(f"l1_ratio must be a number in [0, 1] or a list of them "
                             f"(got {ratio!r} in l1_ratio={l1_ratio!r})")
    return [float(ratio) for ratio in ratios.tolist()]


def _grid_size(alphas: Any, n_alphas: Any) -> Any:
    """``alphas`` with the deprecated ``n_alphas`` folded in, as scikit-learn 1.9's
    ``lasso_path`` does: ``n_alphas`` and ``alphas=None`` still work, each with a
    ``FutureWarning`` naming the new form (``alphas=int``); a grid given as an array wins."""
    # TODO(the release after next): remove n_alphas and alphas=None
    size = N_ALPHAS
    if not (isinstance(n_alphas, str) and n_alphas == "deprecated"):
        warnings.warn(f"'n_alphas' is deprecated and will be removed in a later release: "
                      f"'alphas' now takes the number of grid points; pass "
                      f"alphas={n_alphas!r} and leave n_alphas out to silence this warning",
                      FutureWarning, stacklevel=3)
        if _integer(alphas) and alphas != N_ALPHAS:
            raise ValueError(f"alphas={alphas!r} and n_alphas={n_alphas!r} both give the "
                             f"number of grid points: pass alphas={alphas!r} alone")
        size = n_alphas
    if alphas is None:
        warnings.warn(f"'alphas=None' is deprecated and will be removed in a later release: "
                      f"pass alphas={size!r} (the number of grid points) to silence this "
                      "warning", FutureWarning, stacklevel=3)
        return size
    if _integer(alphas):
        return size if size != N_ALPHAS else alphas
    return alphas


def warm_path(model: Any, X: Any, y: Any, clients: Any, alphas: np.ndarray,
              sample_weight: Any = None) -> Iterator[Any]:
    """``model`` fitted at each ``alpha`` in turn, each fit started from the previous
    one's states (``warm_start=True``): yields the fitted model (the same object) after
    each fit. ``model`` is changed in place: pass a clone."""
    model.set_params(warm_start=True)
    for alpha in alphas:
        yield model.set_params(alpha=float(alpha)).fit(X, y, clients=clients,
                                                       sample_weight=sample_weight)


def federated_path(estimator: Any, X: Any, y: Any, clients: Any = None,
                   alphas: Any = N_ALPHAS, n_alphas: Any = "deprecated", eps: float = 1e-3,
                   sample_weight: Any = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit ``estimator`` along a decreasing grid of ``alpha``, each fit warm-started from
    the last, as :func:`sklearn.linear_model.lasso_path` does.

    Parameters
    ----------
    estimator : FederatedLinearRegression, FederatedLogisticRegression or FederatedEstimator
        The model to fit (cloned; its ``alpha`` is set along the grid).
    X, y, clients, sample_weight
        As in the estimator's ``fit``.
    alphas : int or array of shape (n_alphas,), default 10
        An int: that many values from :func:`alpha_max` down to ``eps`` times it,
        log-spaced (:func:`alpha_grid`). An array: the grid itself (fitted decreasing).
    n_alphas : int, deprecated
        The grid's length: pass ``alphas=n_alphas`` instead (``n_alphas``, and
        ``alphas=None``, still work with a ``FutureWarning``, as in scikit-learn 1.9).
    eps : float, default 1e-3
        The grid's end over its start, when ``alphas`` is an int.

    Returns
    -------
    alphas : array of shape (n_alphas,)
        The grid, decreasing.
    coefs : array of shape (n_alphas, *coef_.shape)
        The coefficients of each fit, in ``coef_``'s dtype (float32 for float32 ``X``,
        whose fits compute as the estimator's ``fit`` does).
    n_iters : array of shape (n_alphas,)
        The rounds of each fit.
    """
    grid = check_alphas(_grid_size(alphas, n_alphas))
    if isinstance(grid, int):
        grid = alpha_grid(estimator, X, y, grid, eps, sample_weight)
    coefs, n_iters = [], []
    for model in warm_path(clone(estimator), X, y, clients, grid, sample_weight):
        coefs.append(np.array(model.coef_))  # in X's dtype, as lasso_path's
        n_iters.append(model.n_iter_)
    return grid, np.stack(coefs), np.array(n_iters)


# --- the folds ------------------------------------------------------------------------------
def client_folds(ids: np.ndarray, owner: np.ndarray, n_folds: int,
                 y: np.ndarray | None = None) -> list[tuple[np.ndarray, np.ndarray]]:
    """``n_folds`` (train, test) index pairs whose test part ``k`` is the ``k``-th of
    ``n_folds`` parts of every client's samples: ``KFold`` within each client (in sample
    order, as scikit-learn's ``cv=int``), or ``StratifiedKFold`` on its labels ``y``.

    Every training fold keeps every client. A client with fewer samples than folds would
    be missing from a test fold: one ValueError naming it.
    """
    tests: list[list[np.ndarray]] = [[] for _ in range(n_folds)]
    for i, client in enumerate(ids.tolist()):
        where = np.flatnonzero(owner == i)
        if where.size < n_folds:
            raise ValueError(f"client {client!r} has {where.size} samples, fewer than "
                             f"cv={n_folds} folds: each fold holds out a share of every "
                             f"client's samples; lower cv to at most {where.size}, or merge "
                             f"client {client!r}'s samples into another client's")
        splitter = KFold(n_folds) if y is None else StratifiedKFold(n_folds)
        with warnings.catch_warnings():
            # a client short of one class: the pooled fold is what is scored
            warnings.filterwarnings("ignore", "The least populated class", UserWarning)
            parts = [test for _, test in splitter.split(where, None if y is None
                                                        else y[where])]
        for k, test in enumerate(parts):
            tests[k].append(where[test])
    everything = np.arange(len(owner))
    return [(np.setdiff1d(everything, test), np.sort(np.concatenate(test)))
            for test in ([np.concatenate(parts)] for parts in tests)]


def cv_folds(cv: Any, X: Any, y: np.ndarray, ids: np.ndarray, owner: np.ndarray,
           stratify: bool) -> list[tuple[np.ndarray, np.ndarray]]:
    """The (train, test) index pairs of ``cv``: an int (:func:`client_folds`), a splitter
    (its ``split(X, y, groups=client of each sample)``: ``GroupKFold`` holds out whole
    clients) or an iterable of pairs."""
    if _integer(cv):
        if cv < 2:
            raise ValueError(f"cv must be an integer >= 2, the number of folds (got cv={cv})")
        return client_folds(ids, owner, int(cv), y if stratify else None)
    if hasattr(cv, "split") and not isinstance(cv, str):
        return [(np.asarray(train), np.asarray(test))
                for train, test in cv.split(X, y, groups=owner)]
    try:
        folds = [(np.asarray(train, dtype=np.int64), np.asarray(test, dtype=np.int64))
                 for train, test in cv]
    except (TypeError, ValueError):
        raise ValueError(f"cv must be an integer >= 2, a splitter such as "
                         f"sklearn.model_selection.GroupKFold(3), or (train, test) index "
                         f"pairs (got cv={cv!r})") from None
    if not folds:
        raise ValueError("cv gave no (train, test) pairs")
    return folds


# --- the scores -----------------------------------------------------------------------------
def neg_mse(model: Any, X: Any, y: np.ndarray, sample_weight: Any) -> float:
    return -float(mean_squared_error(y, model.predict(X), sample_weight=sample_weight))


def _neg_log_loss(model: Any, X: Any, y: np.ndarray, sample_weight: Any) -> float:
    return -float(log_loss(y, model.predict_proba(X), sample_weight=sample_weight,
                           labels=model.classes_))


def _accuracy(model: Any, X: Any, y: np.ndarray, sample_weight: Any) -> float:
    return float(accuracy_score(y, model.predict(X), sample_weight=sample_weight))


#: The logistic CV's scorings: scikit-learn's names (GridSearchCV's ``scoring=``).
SCORINGS: dict[str, Scorer] = {"neg_log_loss": _neg_log_loss, "accuracy": _accuracy}


def _take(values: Any, rows: np.ndarray) -> Any:
    return None if values is None else values[rows]


def cv_paths(base: Any, X: Any, y: np.ndarray, owner: np.ndarray, sample_weight: Any,
             folds: list[tuple[np.ndarray, np.ndarray]], l1_ratios: list[float],
             grids: np.ndarray, scorer: Scorer) -> tuple[np.ndarray, np.ndarray, list[Any]]:
    """One warm-started path per ``l1_ratio`` and training fold, scored on its test fold.

    Returns ``scores`` and ``n_iters`` of shape ``(n_l1_ratios, n_alphas, n_folds)`` and
    the coefficients (intercept last) of each fit, nested the same way.
    """
    shape = (len(l1_ratios), grids.shape[1], len(folds))
    scores, n_iters = np.empty(shape), np.empty(shape, dtype=np.int64)
    paths: list[Any] = [[[None] * len(folds) for _ in grids[0]] for _ in l1_ratios]
    for r, (ratio, grid) in enumerate(zip(l1_ratios, grids, strict=True)):
        for k, (train, test) in enumerate(folds):
            model = clone(base).set_params(l1_ratio=ratio)
            fits = warm_path(model, X[train], y[train], owner[train], grid,
                             _take(sample_weight, train))
            for a, fitted in enumerate(fits):
                scores[r, a, k] = scorer(fitted, X[test], y[test], _take(sample_weight, test))
                n_iters[r, a, k] = fitted.n_iter_
                paths[r][a][k] = _with_intercept(fitted)
    return scores, n_iters, paths


def _with_intercept(model: Any) -> np.ndarray:
    """The fitted coefficients as rows ``(n_outputs, n_features + 1)``, intercept last."""
    coef = np.atleast_2d(np.asarray(model.coef_, dtype=np.float64))
    intercept = np.broadcast_to(np.asarray(model.intercept_, dtype=np.float64),
                                (coef.shape[0],))
    return np.column_stack([coef, intercept])


def best_index(scores: np.ndarray) -> tuple[int, int]:
    """``(l1_ratio, alpha)`` index of the best mean score over folds (the last axis): the
    first of ties, in the order of ``l1_ratio`` then the decreasing grid (as scikit-learn's
    CV estimators and ``GridSearchCV`` over the grid in that order choose)."""
    mean = scores.mean(axis=-1)
    r, a = np.unravel_index(int(np.argmax(mean)), mean.shape)
    return int(r), int(a)
