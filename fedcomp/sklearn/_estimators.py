"""The estimators: any loss and penalty, linear regression, logistic regression."""

from __future__ import annotations

from typing import Any

import numpy as np

from .._extras import require

require("sklearn.base", "fedcomp.sklearn")

# scikit-learn >= 1.6 (the data extra's floor): validate_data and the tags API
from sklearn.base import ClassifierMixin, RegressorMixin  # noqa: E402
from sklearn.utils import ClassifierTags, RegressorTags  # noqa: E402

from ..losses import LOSSES, Loss, make_loss  # noqa: E402
from ..regularizers import (  # noqa: E402
    REGULARIZERS,
    Regularizer,
    make_regularizer,
)
from ._base import _class_targets, _FederatedModel, _predict_labels, _store  # noqa: E402
from ._problem import CLASSIFICATION_LOSSES, _penalty  # noqa: E402


class FederatedEstimator(_FederatedModel):
    """A linear model with any registered loss, regularizer and federated algorithm.

    Parameters
    ----------
    loss : str or Loss, default "least_squares"
        A name of :data:`fedcomp.losses.LOSSES` on vector or matrix linear models
        (``least_squares``, ``logistic``, ``softmax``) or an instance. ``logistic`` and
        ``softmax`` make a classifier (``classes_``, ``predict`` gives labels, ``score`` the
        accuracy); ``logistic`` needs two classes.
    regularizer : str or Regularizer, default "l1"
        A name of :data:`fedcomp.regularizers.REGULARIZERS` (built with ``alpha`` and
        ``regularizer_params``) or an instance (then ``alpha`` must be None).
    alpha : float or None, default 1.0
        The regularizer's ``alpha`` (for a name whose class takes one).
    regularizer_params : dict, optional
        Other constructor arguments of the named regularizer (``{"gamma": 2.0}``).
    algorithm : str or FederatedAlgorithm, default "auto"
        A name of :data:`fedcomp.ALGORITHMS` (synchronous rounds), a built algorithm, or
        ``"auto"``: for a convex loss and penalty with full local gradients, FedDR's
        Douglas–Rachford splitting with exact local proxes (over-relaxed, ``α = 1.8``) and
        the step
        ``η = 1/√(μL)`` of the pooled Hessian at zero, whose rounds grow with ``√κ``;
        otherwise ZA1 (:mod:`fedcomp.sklearn._auto` says why). ``algorithm_`` names the
        one that ran.
    algorithm_params : dict, optional
        Hyperparameters of the named algorithm; with ``"auto"``, ZA1's (the default before
        ``"auto"``: ``algorithm_params`` or a ``client_lr`` number then run ZA1).
    client_lr : "auto" or float, default "auto"
        The named algorithm's ``client_lr`` unless ``algorithm_params`` sets it; ``"auto"``
        is ``1/(τ L)`` (see the module docstring), ``L`` that of the features the run
        works on (the preconditioned ones, see ``precondition``). A number is a step in
        those coordinates.
    max_iter : int, default 10000
        The most communication rounds.
    tol : float or None, default 1e-8
        Stop once the relative prox-gradient step
        ``‖x − prox_{sg}(x − s∇f(x))‖ / ‖x‖`` (:func:`fedcomp.simulate`'s
        ``stop="relative_prox_step"``, checked every ``eval_every`` rounds) is at most
        ``tol``; a fit whose ``max_iter`` ends first warns with scikit-learn's
        :class:`~sklearn.exceptions.ConvergenceWarning`, naming what to change. ``None``:
        run all ``max_iter`` rounds, without the check. A run computing in float32 (see
        ``coef_``) stops at ``max(tol, 10 ε)``, ``ε = 1.19e-7`` float32's machine epsilon:
        its relative step levels off near ``ε`` (measured at 0.8–1.7 ε on diabetes), below
        which no float32 round can go.
    warm_start : bool, default False
        Start from the previous fit's ``coef_`` and ``intercept_`` (a regularization path,
        a refit on more data) instead of zeros.
    fit_intercept : bool, default True
        Append a constant feature whose coefficient is not penalised (``intercept_``).
    precondition : bool, default True
        Solve in standardized coordinates and return the solution of the problem as given,
        as glmnet does but keeping the penalty on the raw coefficients. The clients report
        their columns' (weighted) sums and sums of squares in one aggregation round; the
        run works on the features ``(X − μ)/s`` (``μ`` the pooled column means, subtracted
        only with ``fit_intercept`` and for dense ``X``: a sparse ``X`` is only scaled;
        ``s`` the pooled standard deviations, the root mean squares without an intercept,
        1 for a constant column) with the penalty written in those coordinates,
        ``g(v/s)`` (:class:`fedcomp.regularizers.Scaled`; for ℓ1 the weighted ℓ1 norm
        ``Σ_j (α/s_j)|v_j|``), and maps the model back: ``coef_ = v/s``,
        ``intercept_ = b̃ − μᵀcoef_``. The objective stays the raw one, so the solution does
        not change, only how soon raw features of different sizes reach it (unlike a
        ``StandardScaler`` in a ``Pipeline``, which changes what the penalty weighs).
        It applies to the least squares, logistic and softmax losses (no penalty inside the
        loss) with a convex penalty that splits by coordinate (ℓ1, elastic net, ℓ2, none);
        other problems (MCP and SCAD, whose prox would need steps below ``γ s_j²``, group
        lasso, nuclear norm, a regularizer of another class) run on the raw features.
        ``False``: always the raw features, round for round the fit without this option.
        (Named for what it does to the solver, not ``standardize`` or ``normalize``: in
        glmnet and in scikit-learn's former linear models those change the problem.)
    n_clients : int, default 1
        Without ``clients=`` in ``fit``, split the samples iid into this many clients.
    clients_per_round : int, optional
        Participants per round (all by default; ZA1 needs all).
    batch_size : int, optional
        Minibatch size of the local gradients (full local gradients by default).
    eval_every : int, optional
        Rows of ``history_``, and checks of ``tol``, every this many rounds (default 10).
    random_state : int, RandomState or None, default None
        Seeds the iid split, client sampling and minibatches (None is 0).
    engine : {"auto", "numpy", "jax"}, default "auto"
        Where the run computes. ``"numpy"``: round by round on NumPy arrays. ``"jax"``: the
        clients' data move to jax arrays (float64, or float32 where the run computes in
        float32, see ``coef_``) and :func:`fedcomp.simulate` runs the compiled engine's
        whole run — the rounds, the ``history_`` rows and the ``tol`` check in jitted
        calls — with the same rows and coefficients as ``"numpy"`` (to rounding); it needs
        the ``jax`` extra (``pip install 'fedcomp[jax]'``). A fit traces its run (a refit
        of the same problem ~0.1–1 s) and a new ``alpha`` compiles it again (~0.5–3 s), so
        it pays for long runs only: standardized diabetes' MCP fit (7300 ZA1 rounds) took
        2.3 s on NumPy, 0.27 s refitted and 1.4 s at a new ``alpha`` on jax, while every
        ``"auto"`` least squares fit measured (10–300 rounds) was faster on NumPy. The
        logistic loss's exact local prox (damped Newton) needs host values: on ``"jax"``
        that part runs eagerly on the jax arrays (same results, several times slower than
        ``"numpy"``), and sparse ``X`` runs eagerly on jax's sparse arrays.
        ``"auto"``: NumPy (:data:`fedcomp.sklearn._engine.AUTO_ENGINE` gives the
        measurements: a fit's rounds are unknown before it runs, and on jax a short fit
        runs 10–100x slower, a long one 1.5–2x faster at a new ``alpha``).

    Attributes
    ----------
    coef_ : array of shape (n_features,), or (n_outputs, n_features)
        In ``X``'s dtype: float32 ``X`` gives float32 ``coef_``, ``intercept_`` and
        predictions, as scikit-learn's models do. The run computes in float32 too where it
        converges in float32: ``"auto"``'s FedDR on least squares (any FedDR with exact
        local proxes on a quadratic loss), whose coefficients came within 3e-6 (standardized
        diabetes) to 2.3e-5 (raw diabetes) of the float64 fit's, relative to the largest.
        Other fits compute in float64 on the converted data: ZA1's float32 rounds level off
        at a relative step of 5e-5 to 4e-4 (400 to 3600 ε), and the exact logistic prox's
        line search stalls in float32. The problem itself (the preconditioner's scales, the
        step of ``"auto"``) is always computed in float64, and so is ``objective_``.
    intercept_ : float or array of shape (n_outputs,)
        0 when ``fit_intercept=False``.
    classes_ : array
        The class labels (classification losses only).
    history_ : list of dict
        The run's evaluation rows (:attr:`fedcomp.RunResult.history`: round, counters,
        objective), in the coordinates the run works in: the preconditioned ones where
        ``precondition`` applied. Their ``objective`` is nonetheless the raw problem's
        (the change of coordinates maps the model and keeps ``F``), while
        ``relative_prox_step``, what ``tol`` checks, is measured in the run's coordinates.
    objective_ : float
        ``F`` of the raw problem at the returned ``coef_`` and ``intercept_`` (with the
        constant feature and mean losses): the last row's ``objective``, evaluated again on
        the raw features where the run was preconditioned (equal up to rounding).
    n_iter_ : int
        Rounds run (fewer than ``max_iter`` when ``tol`` was reached).
    converged_ : bool
        Whether ``tol`` was reached.
    algorithm_ : str
        The algorithm run, with its resolved ``client_lr``, as the call that builds it
        (its repr, e.g. ``"za1(client_lr=0.04, local_steps=5, ...)"``).
    clients_ : array
        The client ids, in the order of the problem's clients.
    n_features_in_ : int

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.sklearn import FederatedEstimator
    >>> rng = np.random.default_rng(1)
    >>> X = rng.normal(size=(300, 4))
    >>> y = X @ np.array([2.0, 0.0, 0.0, -1.0]) + 0.1 * rng.normal(size=300)
    >>> model = FederatedEstimator("least_squares", "mcp", alpha=0.1, n_clients=3).fit(X, y)
    >>> model
    FederatedEstimator(alpha=0.1, n_clients=3, regularizer='mcp')
    >>> np.round(model.coef_, 2) + 0.0  # MCP leaves large coefficients unshrunk
    array([ 2.,  0.,  0., -1.])
    >>> model.converged_, model.n_iter_  # tol reached after 30 rounds
    (True, 30)
    """

    def __init__(self, loss: Any = "least_squares", regularizer: Any = "l1",
                 alpha: Any = 1.0, *, regularizer_params: Any = None, algorithm: Any = "auto",
                 algorithm_params: Any = None, client_lr: Any = "auto", max_iter: Any = 10_000,
                 tol: Any = 1e-8, warm_start: Any = False, fit_intercept: Any = True,
                 precondition: Any = True, n_clients: Any = 1, clients_per_round: Any = None,
                 batch_size: Any = None, eval_every: Any = None, random_state: Any = None,
                 engine: Any = "auto"
                 ) -> None:
        _store(self, locals())

    def _loss_name(self) -> str | None:
        if isinstance(self.loss, str):
            return self.loss
        names = {LOSSES.entry(name).factory: name for name in LOSSES}
        return names.get(type(self.loss))

    def _is_classifier(self) -> bool:
        return self._loss_name() in CLASSIFICATION_LOSSES

    def _loss(self, n_classes: int | None) -> Loss:
        return make_loss(self.loss) if isinstance(self.loss, str) else self.loss

    def _regularizer(self, param_ndim: int) -> Regularizer:
        if not isinstance(self.regularizer, str):
            if self.alpha is not None or self.regularizer_params:
                raise ValueError("a Regularizer instance carries its own strength: pass "
                                 "alpha=None and no regularizer_params, or the regularizer's "
                                 "name")
            return self.regularizer
        params = dict(self.regularizer_params or {})
        if self.alpha is not None:
            accepted = REGULARIZERS.parameters(self.regularizer)
            if "alpha" not in accepted:
                raise ValueError(f"regularizer {self.regularizer!r} takes no alpha (its "
                                 f"parameters: {', '.join(accepted)}): pass alpha=None and "
                                 "regularizer_params={...}")
            params["alpha"] = self.alpha
        if "param_ndim" in REGULARIZERS.parameters(self.regularizer):
            params.setdefault("param_ndim", param_ndim)
        return make_regularizer(self.regularizer, **params)

    def _fit_targets(self, y: np.ndarray) -> tuple[np.ndarray, int | None]:
        if not self._is_classifier():
            return super()._fit_targets(y)
        return _class_targets(self, y, binary=self._loss_name() == "logistic")

    def predict(self, X: Any) -> np.ndarray:
        """Responses (regression losses) or class labels (classification losses)."""
        if self._is_classifier():
            return _predict_labels(self, X)
        return self._decision(X)

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² (regression losses) or accuracy (classification losses)."""
        mixin = ClassifierMixin if self._is_classifier() else RegressorMixin
        return float(mixin.score(self, X, y, sample_weight))  # type: ignore[arg-type]

    def __sklearn_tags__(self) -> Any:
        # the estimator's type follows its loss
        tags = super().__sklearn_tags__()
        if self._is_classifier():
            tags.estimator_type = "classifier"
            tags.classifier_tags = ClassifierTags()
        else:
            tags.estimator_type = "regressor"
            tags.regressor_tags = RegressorTags()
        return tags


class FederatedLinearRegression(RegressorMixin, _FederatedModel):
    """Penalised least squares, fitted federatedly.

    Minimises ``(1/(2N)) Σ_j (y_j − a_jᵀw − b)² + g(w)`` over the samples of every client:
    with ``penalty="l1"`` the objective of :class:`sklearn.linear_model.Lasso` with the same
    ``alpha``; with ``"elasticnet"`` that of :class:`~sklearn.linear_model.ElasticNet` with
    the same ``alpha`` and ``l1_ratio``.

    Parameters
    ----------
    penalty : {"l1", "elasticnet", "l2", "mcp", "scad", "none"} or None, default "l1"
        ``g``: ``α‖w‖₁``; ``αρ‖w‖₁ + α(1−ρ)/2‖w‖²`` (ρ = ``l1_ratio``); ``α/2‖w‖²``;
        MCP (Zhang 2010) or SCAD (Fan & Li 2001) with strength α; none.
    alpha : float, default 1.0
        The penalty's strength α.
    l1_ratio : float, default 0.5
        ρ of the elastic net.
    gamma : float, optional
        MCP's γ (default 3.0) or SCAD's a (default 3.7).
    algorithm, algorithm_params, client_lr, max_iter, tol, warm_start, fit_intercept,
    precondition, n_clients, clients_per_round, batch_size, eval_every, random_state,
    engine
        As in :class:`FederatedEstimator`.

    Attributes
    ----------
    coef_ : array of shape (n_features,)
    intercept_ : float
    history_, objective_, n_iter_, converged_, algorithm_, clients_, n_features_in_
        As in :class:`FederatedEstimator`.
    """

    def __init__(self, penalty: Any = "l1", alpha: Any = 1.0, *, l1_ratio: Any = 0.5,
                 gamma: Any = None, algorithm: Any = "auto", algorithm_params: Any = None,
                 client_lr: Any = "auto", max_iter: Any = 10_000, tol: Any = 1e-8,
                 warm_start: Any = False, fit_intercept: Any = True, precondition: Any = True,
                 n_clients: Any = 1, clients_per_round: Any = None, batch_size: Any = None,
                 eval_every: Any = None, random_state: Any = None,
                 engine: Any = "auto") -> None:
        _store(self, locals())

    def _loss(self, n_classes: int | None) -> Loss:
        return make_loss("least_squares")

    def _regularizer(self, param_ndim: int) -> Regularizer:
        return _penalty(self.penalty, self.alpha, self.l1_ratio, self.gamma, param_ndim)

    def predict(self, X: Any) -> np.ndarray:
        """``X @ coef_ + intercept_``."""
        return self._decision(X)


class FederatedLogisticRegression(ClassifierMixin, _FederatedModel):
    """Penalised logistic regression (binary) or softmax regression (multiclass), federated.

    Minimises ``(1/N) Σ_j log-loss_j + g(w)``: :class:`sklearn.linear_model.LogisticRegression`
    with ``C = 1/(alpha·N)`` (N the training samples) minimises the same objective scaled by
    ``C·N``, its penalty chosen by ``l1_ratio`` (scikit-learn ≥ 1.8 deprecates
    ``penalty=``): ``penalty="l1"`` is ``LogisticRegression(C=1/(alpha·N), l1_ratio=1.0,
    solver="saga")``, ``"elasticnet"`` with ``l1_ratio=ρ`` is ``l1_ratio=ρ`` (``saga``),
    ``"l2"`` is ``l1_ratio=0.0`` (the default), ``"none"`` is ``C=numpy.inf``; MCP and SCAD
    have no counterpart there. Two classes fit the logistic loss on labels ±1
    (``coef_`` of shape ``(1, n_features)``), more the softmax cross-entropy (one row of
    ``coef_`` per class, as scikit-learn's multinomial fit).

    Parameters
    ----------
    penalty : {"l1", "elasticnet", "l2", "mcp", "scad", "none"} or None, default "l1"
        As in :class:`FederatedLinearRegression` (on every coefficient of every class).
    alpha : float, default 0.01
        The penalty's strength α.
    l1_ratio, gamma, algorithm, algorithm_params, client_lr, max_iter, tol, warm_start,
    fit_intercept, precondition, n_clients, clients_per_round, batch_size, eval_every,
    random_state, engine
        As in :class:`FederatedLinearRegression`.

    Attributes
    ----------
    classes_ : array of shape (n_classes,)
    coef_ : array of shape (1, n_features) or (n_classes, n_features)
    intercept_ : array of shape (1,) or (n_classes,)
    history_, objective_, n_iter_, converged_, algorithm_, clients_, n_features_in_
        As in :class:`FederatedEstimator`.
    """

    def __init__(self, penalty: Any = "l1", alpha: Any = 0.01, *, l1_ratio: Any = 0.5,
                 gamma: Any = None, algorithm: Any = "auto", algorithm_params: Any = None,
                 client_lr: Any = "auto", max_iter: Any = 10_000, tol: Any = 1e-8,
                 warm_start: Any = False, fit_intercept: Any = True, precondition: Any = True,
                 n_clients: Any = 1, clients_per_round: Any = None, batch_size: Any = None,
                 eval_every: Any = None, random_state: Any = None,
                 engine: Any = "auto") -> None:
        _store(self, locals())

    def _is_classifier(self) -> bool:
        return True

    def _fit_targets(self, y: np.ndarray) -> tuple[np.ndarray, int | None]:
        return _class_targets(self, y, binary=len(np.unique(y)) == 2)

    def _loss(self, n_classes: int | None) -> Loss:
        return make_loss("logistic" if n_classes is None else "softmax")

    def _regularizer(self, param_ndim: int) -> Regularizer:
        return _penalty(self.penalty, self.alpha, self.l1_ratio, self.gamma, param_ndim)

    def _set_model(self, x: np.ndarray) -> None:
        super()._set_model(x)
        if self.coef_.ndim == 1:  # binary: scikit-learn's shapes (1, d) and (1,)
            self.coef_ = self.coef_[None, :]
            self.intercept_ = np.atleast_1d(np.asarray(self.intercept_, dtype=self.coef_.dtype))

    def predict(self, X: Any) -> np.ndarray:
        """The class of the largest score."""
        return _predict_labels(self, X)


