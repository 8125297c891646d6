"""What every estimator shares: its parameters, ``fit`` through :func:`fedcomp.simulate`,
the convergence warning."""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np

from .._extras import require

require("sklearn.base", "fedcomp.sklearn")

# scikit-learn >= 1.6 (the data extra's floor): validate_data and the tags API
from sklearn.base import BaseEstimator  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.utils.metaestimators import available_if  # noqa: E402
from sklearn.utils.multiclass import check_classification_targets  # noqa: E402
from sklearn.utils.validation import (  # noqa: E402
    _check_sample_weight,
    check_is_fitted,
    validate_data,
)

from ..data import ClientData  # noqa: E402
from ..data._sparse import is_sparse_matrix  # noqa: E402
from ..losses import Loss  # noqa: E402
from ..problem import Problem  # noqa: E402
from ..regularizers import Regularizer, Scaled  # noqa: E402
from ..runtime import JaxEngineWarning, RunOptions, simulate  # noqa: E402
from ..runtime._stopping import DIVERGED_MARK, NonFiniteError, check_tol  # noqa: E402
from ._engine import check_engine, on_engine, run_dtype, run_tol  # noqa: E402
from ._problem import (  # noqa: E402
    EVAL_EVERY,
    Preconditioner,
    _algorithm,
    _append_ones,
    _seed,
    _unconverged,
    _with_intercept,
    client_owners,
    column_report,
    pooled_preconditioner,
    preconditionable,
    split_data,
)


def _diverged(model: Any, run: Any, reason: str) -> None:
    """A fit whose run diverged: an error where the model is not finite (nothing to keep),
    else a :class:`ConvergenceWarning` (``converged_`` is False): a finite model that ran
    away is an unconverged fit, as scikit-learn reports one."""
    if not np.all(np.isfinite(np.asarray(run.x, dtype=np.float64))):
        raise NonFiniteError(f"{type(model).__name__}: {reason}")
    warnings.warn(f"{type(model).__name__} did not converge: {reason}; the fitted model is the "
                  f"one of round {run.n_rounds}, not a solution", ConvergenceWarning,
                  stacklevel=3)



# --- the estimators -----------------------------------------------------------------------
def _class_targets(model: Any, y: np.ndarray, binary: bool) -> tuple[np.ndarray, int | None]:
    """Labels as the loss wants them: ±1 (logistic) or class ids (softmax); sets classes_."""
    check_classification_targets(y)
    model.classes_, ids = np.unique(y, return_inverse=True)
    k = len(model.classes_)
    if k < 2:
        raise ValueError(f"a classifier needs samples of at least 2 classes; got 1 class "
                         f"({model.classes_[0]!r})")
    if binary:
        if k != 2:
            raise ValueError(f"the logistic loss separates 2 classes; got {k}: use "
                             "loss='softmax'")
        return np.where(ids == 1, 1.0, -1.0), None
    return ids.astype(np.float64), k


def _predict_labels(model: Any, X: Any) -> np.ndarray:
    scores = model._decision(X)
    if scores.ndim == 1 or scores.shape[1] == 1:
        return model.classes_[(scores.reshape(-1) > 0).astype(int)]
    return model.classes_[np.argmax(scores, axis=1)]


def _margins(scores: np.ndarray) -> np.ndarray:
    """Binary scores as the margins (n,) scikit-learn expects, others unchanged.

    A logistic model's (n, 1) scores are its margins; a softmax model on 2 classes has
    scores (s₀, s₁) whose softmax is σ(s₁ − s₀): its margin is s₁ − s₀.
    """
    if scores.ndim == 1 or scores.shape[1] == 1:
        return scores.reshape(-1)
    return scores[:, 1] - scores[:, 0] if scores.shape[1] == 2 else scores


def _probabilities(scores: np.ndarray) -> np.ndarray:
    """``[1 − σ(t), σ(t)]`` of binary margins ``t``, else the softmax of each row."""
    if scores.ndim == 1:
        p = _sigmoid(scores)
        return np.column_stack([1.0 - p, p])
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _sigmoid(t: np.ndarray) -> np.ndarray:
    # σ(t) = (1 + tanh(t/2))/2 never overflows
    return 0.5 * (1.0 + np.tanh(0.5 * t))


def _store(estimator: Any, arguments: dict[str, Any]) -> None:
    """Keep the constructor's arguments as they are, as scikit-learn asks (no validation
    before ``fit``). Each class spells its parameters out in its own ``__init__`` signature,
    which is where ``get_params`` reads them."""
    for name, value in arguments.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


def _check_fit_parameters(model: Any) -> None:
    """The flags and ``eval_every``, checked at ``fit`` as scikit-learn asks: a string flag
    would be truthy and ``int("x")`` NumPy's words, ``int(2.5)`` a silent 2."""
    for name in ("warm_start", "fit_intercept", "precondition"):
        value = getattr(model, name)
        if not isinstance(value, bool | np.bool_):
            raise ValueError(f"{name} must be True or False (got {name}={value!r})")
    every = model.eval_every
    if every is not None and not (isinstance(every, int | np.integer)
                                  and not isinstance(every, bool) and every >= 1):
        raise ValueError(f"eval_every must be an integer >= 1 or None for every 10 rounds "
                         f"(got eval_every={every!r})")


def _check_numbers(name: str, values: Any) -> None:
    """Refuse text where numbers belong, naming the argument (scikit-learn's check says
    only "could not convert string to float")."""
    if np.asarray(values).dtype.kind in "USO":
        try:
            np.asarray(values, dtype=np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must hold numbers, one per sample (got "
                             f"{str(np.ravel(values)[:3])[:60]} ...)") from None


class _FederatedModel(BaseEstimator):
    """Fit, predict and the attributes every estimator of this module shares.

    A subclass names its loss (``_loss``) and regularizer (``_regularizer``); for a
    classifier ``_fit_targets`` maps the labels to the loss's convention.
    """

    def _loss(self, n_classes: int | None) -> Loss:
        raise NotImplementedError

    def __sklearn_tags__(self) -> Any:
        # scipy.sparse X stays sparse: the clients' data are SparseFeatures
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags

    def _regularizer(self, param_ndim: int) -> Regularizer:
        raise NotImplementedError

    def _is_classifier(self) -> bool:
        return False

    # the class scores and probabilities, for the estimators whose loss classifies (each
    # subclass's own _is_classifier decides: a lambda, so that the override is the one asked)
    @available_if(lambda model: model._is_classifier())
    def decision_function(self, X: Any) -> np.ndarray:
        """Margins ``X @ coef_.T + intercept_`` (classification losses): shape (n,) for 2
        classes (positive means ``classes_[1]``), (n, n_classes) otherwise."""
        return _margins(self._decision(X))

    @available_if(lambda model: model._is_classifier())
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities (classification losses): the sigmoid of the margin (logistic)
        or the softmax of the scores (softmax)."""
        return _probabilities(self.decision_function(X))

    @available_if(lambda model: model._is_classifier())
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """``log(predict_proba(X))`` (classification losses)."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    # the parameters of the run, common to every estimator (each __init__ stores them)
    algorithm: Any
    algorithm_params: Any
    client_lr: Any
    max_iter: Any
    tol: Any
    warm_start: Any
    fit_intercept: Any
    precondition: Any
    n_clients: Any
    clients_per_round: Any
    batch_size: Any
    eval_every: Any
    random_state: Any
    engine: Any

    def fit(self, X: Any, y: Any = None, clients: Any = None, sample_weight: Any = None
            ) -> _FederatedModel:
        """Fit the model federatedly: each client id's samples form one client.

        Parameters
        ----------
        X : array of shape (n_samples, n_features), or ClientData
            The samples; or a :class:`fedcomp.ClientData` (then ``y`` and ``clients`` are
            None: its clients and targets are used).
        y : array of shape (n_samples,)
            Targets (responses, or class labels of any type for a classifier).
        clients : array of shape (n_samples,), optional
            The client id of every sample (any hashable values). Without it the samples are
            split iid into ``n_clients`` clients (default one: a centralized fit).
        sample_weight : array of shape (n_samples,), optional
            Each sample's weight, as scikit-learn's: the objective becomes the weighted
            mean loss ``Σ_j s_j ℓ_j / Σ_j s_j`` plus the penalty (each client weighted by
            its samples' total weight). Every client needs a positive total.

        Returns
        -------
        self
        """
        if isinstance(X, ClientData):
            if y is not None or clients is not None or sample_weight is not None:
                raise ValueError("fit(ClientData) takes its targets, clients and sample weights "
                                 "from the data: pass y=None, clients=None, "
                                 "sample_weight=None")
            if X.sample_weight is not None:
                sample_weight = np.concatenate([X.sample_weight[i, :n]
                                                for i, n in enumerate(X.counts)])
            X, y, clients = X.pooled()
        if not (isinstance(self.max_iter, int | np.integer) and self.max_iter >= 1):
            raise ValueError(f"max_iter must be an integer >= 1 (got {self.max_iter!r})")
        tol = check_tol(self.tol)
        engine = check_engine(self.engine)
        _check_fit_parameters(self)
        if y is not None and not self._is_classifier():
            _check_numbers("y", y)
        # float32 in, float32 coef_ out (scikit-learn's); the problem is built in float64,
        # the run computes in float32 where it converges in float32 (run_dtype)
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], accept_sparse="csr",
                             y_numeric=not self._is_classifier())
        dtype, X = X.dtype, X.astype(np.float64, copy=False)
        if sample_weight is not None:
            _check_numbers("sample_weight", sample_weight)
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        targets, n_classes = self._fit_targets(y)
        self.clients_, owner = client_owners(X.shape[0], clients, self.n_clients,
                                             self.random_state)
        problem, scaling, raw_regularizer = self._problem(X, targets, n_classes, owner,
                                                          sample_weight)
        algorithm = _algorithm(self.algorithm, self.algorithm_params, self.client_lr, problem,
                               batch_size=self.batch_size)
        eval_every = min(EVAL_EVERY, int(self.max_iter)) if self.eval_every is None \
            else int(self.eval_every)
        compute = run_dtype(dtype, algorithm, problem.loss)
        problem = on_engine(problem, compute, engine, f"{type(self).__name__}(engine='jax')")
        tol = run_tol(tol, compute)
        key = (repr(algorithm), problem.n_clients, problem.param_shape, _scaling_key(scaling),
               np.dtype(compute).name, engine)
        x0, states = self._warm_start(key, scaling)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            # a part the jax engine runs eagerly (the logistic Newton prox): documented
            warnings.simplefilter("ignore", JaxEngineWarning)
            run = simulate(algorithm, problem, int(self.max_iter), eval_every=eval_every,
                           metrics=["objective"], clients_per_round=self.clients_per_round,
                           batch_size=self.batch_size, seed=_seed(self.random_state), tol=tol,
                           x0=x0, options=RunOptions(progress=False, on_divergence="return",
                                                     initial_states=states))
        diverged = [str(w.message) for w in caught if run.status == "diverged"
                    and issubclass(w.category, RuntimeWarning) and DIVERGED_MARK in str(w.message)]
        for warning in caught:  # the estimator's own words for an unconverged fit
            if not (issubclass(warning.category, ConvergenceWarning)
                    or str(warning.message) in diverged):
                warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                       warning.lineno)
        if diverged:
            _diverged(self, run, diverged[0].removesuffix(DIVERGED_MARK))
        elif run.status != "converged" and tol is not None:
            warnings.warn(_unconverged(self, run, tol, X, scaling is not None),
                          ConvergenceWarning, stacklevel=2)
        # its repr, not the algorithm: a fitted estimator pickles (the algorithm's functions
        # are closures), and the repr is the call that builds it again
        self.algorithm_ = repr(algorithm)
        self.history_ = run.history
        self.n_iter_ = int(run.n_rounds)
        self.converged_ = run.status == "converged"
        model = np.asarray(run.x, dtype=np.float64)
        if scaling is None and compute == np.float64:
            self.objective_ = float(run.history[-1]["objective"])
        elif scaling is not None:
            model = scaling.to_raw(model, self.fit_intercept)
        self._set_model(model.astype(dtype))
        if scaling is not None or compute != np.float64:
            # F of the raw problem at the coefficients returned, in float64
            self.objective_ = _raw_objective(self, X, targets, sample_weight, problem,
                                             raw_regularizer, n_classes)
        # what a warm start continues from: the algorithm's states, not only its model
        self._final_states = (key, run.server_state, run.client_states)
        return self

    def _problem(self, X: Any, targets: np.ndarray, n_classes: int | None,
                 owner: np.ndarray, sample_weight: np.ndarray | None
                 ) -> tuple[Problem, Preconditioner | None, Regularizer]:
        """The problem the run solves, its coordinates (``None``: the raw features) and the
        penalty of the raw problem.

        With ``precondition`` (and a loss and penalty that allow it, :func:`preconditionable`)
        the clients first report their columns' sums (one aggregation round), and the run
        solves on the scaled features with the penalty written in their coordinates.
        """
        loss = self._loss(n_classes)
        regularizer = self._regularizer(loss.param_ndim)
        shape = tuple(loss.param_shape((X.shape[1] + bool(self.fit_intercept),), n_classes))
        raw_regularizer = _with_intercept(regularizer, shape) if self.fit_intercept \
            else regularizer
        scaling = None
        if self.precondition and preconditionable(loss, regularizer):
            n_clients = len(self.clients_)
            reports = [column_report(X[owner == i], None if sample_weight is None
                                     else sample_weight[owner == i]) for i in range(n_clients)]
            scaling = pooled_preconditioner(reports, intercept=bool(self.fit_intercept),
                                            center=self.fit_intercept and not
                                            is_sparse_matrix(X))
        features = X if scaling is None else scaling.features(X)
        if self.fit_intercept:
            features = _append_ones(features)
        data = split_data(features, targets, owner, len(self.clients_), sample_weight)
        run_regularizer: Any = raw_regularizer if scaling is None else \
            Scaled(raw_regularizer, scaling.penalty_scale(shape, bool(self.fit_intercept)))
        problem = Problem(loss, run_regularizer, data, weighting="samples", n_classes=n_classes)
        return problem, scaling, raw_regularizer

    def _warm_start(self, key: tuple[Any, ...], scaling: Preconditioner | None
                    ) -> tuple[np.ndarray | None, Any]:
        """``(x0, initial_states)`` of a fit: the previous fit's states where
        ``warm_start=True`` and the algorithm, clients and coordinates are the same
        (a new ``alpha`` along a path), else its model (in this run's coordinates) where
        the shape is the same, else nothing."""
        if not (self.warm_start and hasattr(self, "coef_")):
            return None, None
        previous = getattr(self, "_final_states", None)
        if previous is not None and previous[0] == key:
            return None, previous[1:]
        model = self._warm_start_model(key[2])
        if model is not None and scaling is not None:
            model = scaling.to_run(model, self.fit_intercept)
        return model, None

    def _warm_start_model(self, shape: tuple[int, ...]) -> np.ndarray | None:
        """The previous fit's model as the start (the same shape)."""
        coef = np.asarray(self.coef_, dtype=np.float64)
        if coef.ndim == 2 and coef.shape[0] == 1 and len(shape) == 1:
            coef = coef[0]  # a binary classifier's (1, d)
        weights = coef.T
        if self.fit_intercept:
            bias = np.asarray(self.intercept_, dtype=np.float64).reshape(weights.shape[1:])
            model = np.concatenate([weights, bias[None, ...]], axis=0)
        else:
            model = weights
        return model if model.shape == shape else None

    def _fit_targets(self, y: np.ndarray) -> tuple[np.ndarray, int | None]:
        return y.astype(np.float64), None

    def _set_model(self, x: np.ndarray) -> None:
        """``coef_``, ``intercept_`` from the model ``x`` (intercept in its last row), in
        ``x``'s dtype (a float64 scalar intercept a Python float, as before)."""
        weights, bias = (x[:-1], x[-1]) if self.fit_intercept else (x, np.zeros_like(x[0]))
        self.coef_ = weights.T
        self.intercept_ = bias if bias.ndim else \
            float(bias) if bias.dtype == np.float64 else bias[()]

    def _decision(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=[np.float64, np.float32], accept_sparse="csr",
                          reset=False)
        return np.asarray(X @ self.coef_.T) + self.intercept_


def _scaling_key(scaling: Preconditioner | None) -> tuple[bytes, bytes] | None:
    """What identifies a run's coordinates: a warm start reuses states of the same only."""
    return None if scaling is None else (scaling.mean.tobytes(), scaling.scale.tobytes())


def _raw_objective(model: Any, X: Any, targets: np.ndarray, sample_weight: Any,
                   problem: Problem, regularizer: Regularizer, n_classes: int | None) -> float:
    """``F`` of the raw problem (the raw features, the raw penalty) at the fitted
    ``coef_`` and ``intercept_``: the pooled weighted mean loss plus the penalty, which
    weighting the clients by their samples makes the federated objective."""
    features = _append_ones(X) if model.fit_intercept else X
    pooled = ClientData.from_lists([features], [targets], dtype=X.dtype,
                                   sample_weight=None if sample_weight is None
                                   else [sample_weight])
    raw = Problem(problem.loss, regularizer, pooled, weighting="samples", n_classes=n_classes)
    return raw.objective(raw.as_model(model._warm_start_model(problem.param_shape)))
