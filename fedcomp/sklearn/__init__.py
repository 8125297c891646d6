"""scikit-learn estimators that fit their model federatedly: ``fit(X, y, clients=ids)``.

The samples of each client id form one client of a composite problem

.. math::

    \\min_x\\; F(x) = \\sum_i \\pi_i f_i(x) + g(x), \\qquad
    f_i(x) = \\frac{1}{n_i} \\sum_{j \\in \\text{client } i} \\ell(x; a_j, y_j), \\quad
    \\pi_i = \\frac{n_i}{N},

so ``F`` is the loss averaged over *all* N samples plus the regularizer — whatever the
split, the same objective a centralized fit minimises — and a federated algorithm
(:func:`fedcomp.simulate`) solves it. The estimators are ordinary scikit-learn estimators
(``get_params``/``set_params``, ``GridSearchCV``, ``Pipeline``, ``clone``, pickling) and
pass every check of scikit-learn's ``check_estimator`` (``tests/product/test_sklearn.py``).

* :class:`FederatedLinearRegression` — ``ℓ = ½(aᵀx + b − y)²``: with ``penalty="l1"`` it has
  *the same objective as* :class:`sklearn.linear_model.Lasso` with the same ``alpha``
  (``1/(2N)‖y − Xw − b‖² + α‖w‖₁``); ``"elasticnet"`` as
  :class:`~sklearn.linear_model.ElasticNet` with the same ``alpha`` and ``l1_ratio``.
* :class:`FederatedLogisticRegression` — the logistic loss (two classes) or the softmax
  cross-entropy (more). The objective ``(1/N) Σ_j log-loss_j + α‖w‖₁`` is
  :class:`sklearn.linear_model.LogisticRegression`'s ``C Σ_j log-loss_j + ‖w‖₁``
  divided by ``C·N``: ``alpha = 1 / (C · N)`` (N the training samples).
* :class:`FederatedEstimator` — any registered loss, regularizer and algorithm.
* :class:`FederatedLassoCV`, :class:`FederatedElasticNetCV`,
  :class:`FederatedLogisticRegressionCV` — ``alpha`` chosen by cross-validation on
  warm-started paths (:func:`federated_path`), in folds that split each client's samples.

The intercept: fedcomp's losses have none (``f(x)`` of a linear model ``aᵀx``), so with
``fit_intercept=True`` the estimators append a constant feature 1 and leave its coefficient
out of the penalty (:class:`fedcomp.regularizers.Masked`), as scikit-learn does.

The step size: an algorithm name with ``client_lr="auto"`` gets ``client_lr = 1 / (τ L)``,
``L`` the largest client smoothness constant (each client reports its ``L_i`` once, as
:class:`fedcomp.algorithms._base.SetupContext` does) and ``τ`` the algorithm's
``local_steps`` (1 if it takes none): a round then moves about as far as one gradient step
of length ``1/L``, which keeps the default ZA1 stable on unscaled data.

Needs scikit-learn: ``pip install 'fedcomp[data]'``.

Examples
--------
>>> import numpy as np
>>> from fedcomp.sklearn import FederatedLinearRegression
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(200, 5))
>>> y = X @ np.array([1.0, -2.0, 0.0, 0.0, 0.5]) + 3.0
>>> clients = np.repeat(np.arange(4), 50)          # four clients of 50 samples
>>> model = FederatedLinearRegression(alpha=0.01).fit(X, y, clients=clients)
>>> np.round(model.coef_, 2), round(float(model.intercept_), 2)
(array([ 0.99, -1.99,  0.  ,  0.  ,  0.49]), 3.0)
"""

from __future__ import annotations

from .._extras import require

require("sklearn.base", "fedcomp.sklearn")

from ._cv import (  # noqa: E402
    FederatedElasticNetCV,
    FederatedLassoCV,
    FederatedLogisticRegressionCV,
)
from ._estimators import (  # noqa: E402
    FederatedEstimator,
    FederatedLinearRegression,
    FederatedLogisticRegression,
)
from ._path import alpha_grid, alpha_max, federated_path  # noqa: E402

__all__ = ["alpha_grid", "alpha_max", "federated_path", "FederatedEstimator",
           "FederatedLinearRegression", "FederatedLogisticRegression", "FederatedLassoCV",
           "FederatedElasticNetCV", "FederatedLogisticRegressionCV"]
