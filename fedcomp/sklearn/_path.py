"""The ℓ1 regularization path with warm starts: ``alpha_max``, ``federated_path``."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._extras import require

require("sklearn.base", "fedcomp.sklearn")

# scikit-learn >= 1.6 (the data extra's floor): validate_data and the tags API
from sklearn.base import clone  # noqa: E402
from sklearn.utils.validation import (  # noqa: E402
    check_array,
)

#: Rows of ``history_`` (and checks of ``tol``) every this many rounds by default.

# --- the regularization path --------------------------------------------------------------
def alpha_max(estimator: Any, X: Any, y: Any) -> float:
    """The smallest ``alpha`` at which ``estimator``'s ℓ1 (or elastic-net) fit is all zero.

    ``max_j |∂_j f(x₀)| / ρ``: the largest partial derivative of the smooth part at the
    model whose coefficients are zero and whose intercept is fitted alone (``ρ`` the
    ``l1_ratio`` of an elastic net, 1 for ℓ1). Federatedly it takes one round: every client
    sends ``∇f_i(x₀)`` (its intercept ``x₀`` is the weighted mean of the targets for least
    squares, the log-odds of the positive class for the logistic loss, both sums the
    clients report first), and the server averages them with the weights ``π_i = n_i/N``
    — which is the pooled gradient, whatever the split: no ``clients`` are needed. As
    scikit-learn's ``LassoCV`` grid starts (``alphas_[0]``).
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
        positive = float(np.mean(targets > 0))
        intercept = (np.log(positive / (1.0 - positive)) if logistic
                     else float(np.mean(targets)))
    else:
        intercept = 0.0
    margin = np.full(len(targets), intercept)
    residual = (-targets / (1.0 + np.exp(targets * margin)) if logistic
                else margin - targets)
    gradient = np.asarray(X.T @ residual).ravel() / len(targets)
    ratio = float(model.l1_ratio) if penalty == "elasticnet" else 1.0
    return float(np.max(np.abs(gradient))) / ratio


def federated_path(estimator: Any, X: Any, y: Any, clients: Any = None,
                   alphas: Any = None, n_alphas: int = 10, eps: float = 1e-3
                   ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Fit ``estimator`` along a decreasing grid of ``alpha``, each fit warm-started from
    the last, as :func:`sklearn.linear_model.lasso_path` does.

    The grid is ``n_alphas`` values from :func:`alpha_max` down to ``eps`` times it,
    log-spaced, unless ``alphas`` are given. Returns ``(alphas, coefs, n_iters)``: the grid
    (decreasing), the coefficients of each fit (stacked on the first axis) and its rounds.
    """
    if alphas is None:
        top = alpha_max(estimator, X, y)
        alphas = top * np.logspace(0.0, np.log10(eps), n_alphas)
    alphas = np.sort(np.asarray(alphas, dtype=np.float64))[::-1]
    model = clone(estimator).set_params(warm_start=True)
    coefs, n_iters = [], []
    for alpha in alphas:
        model.set_params(alpha=float(alpha)).fit(X, y, clients=clients)
        coefs.append(np.array(model.coef_, dtype=np.float64))
        n_iters.append(model.n_iter_)
    return alphas, np.stack(coefs), np.array(n_iters)

