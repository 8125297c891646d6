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
pass every check of scikit-learn's ``check_estimator`` (``tests/test_sklearn.py``).

* :class:`FederatedLinearRegression` — ``ℓ = ½(aᵀx + b − y)²``: with ``penalty="l1"`` it has
  *the same objective as* :class:`sklearn.linear_model.Lasso` with the same ``alpha``
  (``1/(2N)‖y − Xw − b‖² + α‖w‖₁``); ``"elasticnet"`` as
  :class:`~sklearn.linear_model.ElasticNet` with the same ``alpha`` and ``l1_ratio``.
* :class:`FederatedLogisticRegression` — the logistic loss (two classes) or the softmax
  cross-entropy (more). The objective ``(1/N) Σ_j log-loss_j + α‖w‖₁`` is
  :class:`sklearn.linear_model.LogisticRegression`'s ``C Σ_j log-loss_j + ‖w‖₁``
  divided by ``C·N``: ``alpha = 1 / (C · N)`` (N the training samples).
* :class:`FederatedEstimator` — any registered loss, regularizer and algorithm.

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

import inspect
import warnings
from typing import Any

import numpy as np

from ._extras import require

require("sklearn.base", "fedcomp.sklearn")

# scikit-learn >= 1.6 (the data extra's floor): validate_data and the tags API
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone  # noqa: E402
from sklearn.exceptions import ConvergenceWarning  # noqa: E402
from sklearn.utils import ClassifierTags, RegressorTags  # noqa: E402
from sklearn.utils.metaestimators import available_if  # noqa: E402
from sklearn.utils.multiclass import check_classification_targets  # noqa: E402
from sklearn.utils.validation import (  # noqa: E402
    _check_sample_weight,
    check_array,
    check_is_fitted,
    validate_data,
)

from .algorithms import ALGORITHMS, FederatedAlgorithm, make_algorithm  # noqa: E402
from .data import ClientData  # noqa: E402
from .data._sparse import is_sparse_matrix  # noqa: E402
from .losses import LOSSES, Loss, make_loss  # noqa: E402
from .problem import Problem  # noqa: E402
from .regularizers import (  # noqa: E402
    L1,
    MCP,
    REGULARIZERS,
    SCAD,
    ElasticNet,
    Masked,
    Regularizer,
    Zero,
    make_regularizer,
)
from .regularizers._masked import SEPARABLE  # noqa: E402
from .runtime import simulate  # noqa: E402
from .runtime._stopping import check_tol  # noqa: E402

#: Rows of ``history_`` (and checks of ``tol``) every this many rounds by default.
EVAL_EVERY = 10


def _unconverged(model: Any, run: Any, tol: float, X: Any) -> str:
    """Why a fit stopped unconverged, and what to change: the data's scale first."""
    value = run.history[-1].get("relative_prox_step", float("nan"))
    # the root-mean-square of each column, the intercept's constant 1 included: columns of
    # very different sizes make the problem ill-conditioned for every gradient method
    squares = X.multiply(X).mean(axis=0) if is_sparse_matrix(X) else np.mean(X * X, axis=0)
    scale = np.sqrt(np.asarray(squares).ravel())
    scale = scale[scale > 0]
    ratio = float(scale.max() / scale.min()) if scale.size > 1 else 1.0
    fix = (f"the columns' sizes (the intercept's constant 1 included) differ by a factor of "
           f"{ratio:.3g}, which slows every gradient method: standardize the features "
           "(sklearn.preprocessing.StandardScaler in a Pipeline), or " if ratio > 10.0 else "")
    return (f"{type(model).__name__} did not converge: the relative prox-gradient step is "
            f"{value:.3g} > tol={tol:g} after max_iter={model.max_iter} rounds; {fix}raise "
            "max_iter (or tol)")

#: Losses whose model predicts classes (the classifier behaviour of FederatedEstimator).
CLASSIFICATION_LOSSES = ("logistic", "softmax")


# --- the problem ------------------------------------------------------------------------
def client_data(X: np.ndarray, y: np.ndarray, clients: Any, n_clients: int,
                random_state: Any, sample_weight: np.ndarray | None = None
                ) -> tuple[ClientData, np.ndarray]:
    """Split ``(X, y)`` (and the samples' weights) among clients: by the ids ``clients``,
    else iid into ``n_clients``.

    Returns the :class:`ClientData` and the distinct client ids (in client order).
    """
    n = X.shape[0]
    if clients is None:
        if not (isinstance(n_clients, int | np.integer) and n_clients >= 1):
            raise ValueError(f"n_clients must be an integer >= 1 (got {n_clients!r})")
        if n_clients > n:
            raise ValueError(f"n_clients={n_clients} but only {n} samples: every client needs "
                             "one; lower n_clients or pass clients=")
        order = np.random.default_rng(_seed(random_state)).permutation(n)
        owner = np.empty(n, dtype=np.int64)
        for i, part in enumerate(np.array_split(order, int(n_clients))):
            owner[part] = i
        ids = np.arange(int(n_clients))
    else:
        clients = np.asarray(clients)
        if clients.shape != (n,):
            raise ValueError(f"clients must hold one client id per sample: shape ({n},), got "
                             f"{clients.shape}")
        if clients.dtype.kind in "fc":  # NaN ids are all distinct: each its own client
            bad = np.flatnonzero(~np.isfinite(clients))
            if bad.size:
                raise ValueError(f"clients holds {bad.size} NaN or infinite ids (the first "
                                 f"for sample {int(bad[0])}); give every sample a client id")
        elif clients.dtype == object and any(c is None for c in clients.tolist()):
            first = next(i for i, c in enumerate(clients.tolist()) if c is None)
            raise ValueError(f"clients holds None ids (the first for sample {first}); give "
                             "every sample a client id")
        ids, owner = np.unique(clients, return_inverse=True)
    weights = None if sample_weight is None else [
        sample_weight[owner == i] for i in range(len(ids))]
    data = ClientData.from_lists([X[owner == i] for i in range(len(ids))],
                                 [y[owner == i] for i in range(len(ids))],
                                 sample_weight=weights)
    return data, ids


def _append_ones(X: Any) -> Any:
    """``[X, 1]``: the intercept's column (a sparse ``X`` stays sparse CSR)."""
    if is_sparse_matrix(X):
        from scipy import sparse

        return sparse.hstack([X, np.ones((X.shape[0], 1))], format="csr")
    return np.hstack([X, np.ones((X.shape[0], 1))])


def _seed(random_state: Any) -> int:
    """An integer seed: ``None`` is 0 (a fit is reproducible unless asked otherwise)."""
    if random_state is None:
        return 0
    if isinstance(random_state, int | np.integer) and not isinstance(random_state, bool):
        return int(random_state)
    if isinstance(random_state, np.random.RandomState):
        return int(random_state.randint(np.iinfo(np.int32).max))
    raise ValueError(f"random_state must be None, an int or a numpy RandomState (got "
                     f"{random_state!r})")


def _with_intercept(regularizer: Regularizer, shape: tuple[int, ...]) -> Any:
    """``regularizer`` on every coordinate except the last feature row (the intercept's)."""
    if not isinstance(regularizer, SEPARABLE):
        raise ValueError(f"fit_intercept=True leaves the intercept unpenalised, which needs a "
                         f"coordinate-separable regularizer; {type(regularizer).__name__} is "
                         "not: pass fit_intercept=False (and add a column of ones yourself)")
    mask = np.ones(shape, dtype=bool)
    mask[-1, ...] = False
    return Masked(regularizer, mask)


def _penalty(penalty: Any, alpha: Any, l1_ratio: Any, gamma: Any, param_ndim: int) -> Any:
    """The regularizer of a ``penalty`` name, in scikit-learn's parametrisation."""
    names = ("l1", "elasticnet", "l2", "mcp", "scad", "none")
    if penalty is None or penalty == "none":
        return Zero(param_ndim=param_ndim)
    if not _nonnegative(alpha):
        raise ValueError(f"alpha must be a number >= 0 (got alpha={alpha!r})")
    alpha = float(alpha)
    if penalty == "l1":
        return L1(alpha, param_ndim=param_ndim)
    if penalty == "l2":
        return ElasticNet(0.0, alpha, param_ndim=param_ndim)
    if penalty == "elasticnet":
        if not (_nonnegative(l1_ratio) and l1_ratio <= 1):
            raise ValueError(f"l1_ratio must be in [0, 1] (got l1_ratio={l1_ratio!r})")
        # scikit-learn's ElasticNet: α·ρ‖w‖₁ + α(1−ρ)/2 ‖w‖²
        return ElasticNet(alpha * l1_ratio, alpha * (1 - l1_ratio), param_ndim=param_ndim)
    if penalty == "mcp":
        return MCP(alpha, 3.0 if gamma is None else float(gamma), param_ndim=param_ndim)
    if penalty == "scad":
        return SCAD(alpha, 3.7 if gamma is None else float(gamma), param_ndim=param_ndim)
    raise ValueError(f"unknown penalty {penalty!r}; use one of {', '.join(names)} (or None)")


def _nonnegative(value: Any) -> bool:
    return bool(isinstance(value, int | float | np.integer | np.floating)
                and not isinstance(value, bool) and np.isfinite(value) and value >= 0)


def _algorithm(algorithm: Any, algorithm_params: Any, client_lr: Any, problem: Problem
               ) -> FederatedAlgorithm:
    """The algorithm to run: a built one as given, a name built with its parameters."""
    if isinstance(algorithm, FederatedAlgorithm):
        if algorithm_params:
            raise ValueError("algorithm_params applies to an algorithm given by name; this "
                             f"algorithm is built already ({algorithm!r})")
        return algorithm
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be a name of {', '.join(ALGORITHMS)} or a built "
                         f"algorithm such as fedcomp.za1(client_lr=0.5) (got {algorithm!r})")
    if ALGORITHMS.entry(algorithm).execution != "rounds":
        raise ValueError(f"algorithm {algorithm!r} runs on an event clock; the estimators run "
                         "synchronous rounds: choose another algorithm")
    params = dict(algorithm_params or {})
    accepted = inspect.signature(ALGORITHMS.entry(algorithm).factory).parameters
    if "client_lr" in accepted and "client_lr" not in params:
        if isinstance(client_lr, str) and client_lr == "auto":
            steps = params.get("local_steps", accepted["local_steps"].default
                               if "local_steps" in accepted else 1)
            smoothness = float(np.max(problem.loss.smoothness(problem.data.full_batch())))
            # a constant column and a zero-variance client can give L = 0: any step is exact
            client_lr = 1.0 / (max(int(steps), 1) * max(smoothness, 1e-12))
        params["client_lr"] = float(client_lr)
    return make_algorithm(algorithm, **params)


# --- the estimators -----------------------------------------------------------------------
def _store(estimator: Any, arguments: dict[str, Any]) -> None:
    """Keep the constructor's arguments as they are, as scikit-learn asks (no validation
    before ``fit``). Each class spells its parameters out in its own ``__init__`` signature,
    which is where ``get_params`` reads them."""
    for name, value in arguments.items():
        if name not in ("self", "__class__"):
            setattr(estimator, name, value)


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
    n_clients: Any
    clients_per_round: Any
    batch_size: Any
    eval_every: Any
    random_state: Any

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
        X, y = validate_data(self, X, y, dtype=np.float64, accept_sparse="csr",
                             y_numeric=not self._is_classifier())
        if sample_weight is not None:
            sample_weight = _check_sample_weight(sample_weight, X, dtype=np.float64)
        targets, n_classes = self._fit_targets(y)
        if self.fit_intercept:
            X = _append_ones(X)
        data, self.clients_ = client_data(X, targets, clients, self.n_clients,
                                          self.random_state, sample_weight)
        loss = self._loss(n_classes)
        regularizer = self._regularizer(loss.param_ndim)
        shape = tuple(loss.param_shape(data.feature_shape, n_classes))
        if self.fit_intercept:
            regularizer = _with_intercept(regularizer, shape)
        problem = Problem(loss, regularizer, data, weighting="samples", n_classes=n_classes)
        algorithm = _algorithm(self.algorithm, self.algorithm_params, self.client_lr, problem)
        eval_every = min(EVAL_EVERY, int(self.max_iter)) if self.eval_every is None \
            else int(self.eval_every)
        x0, states = self._warm_start(shape, algorithm, problem)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ConvergenceWarning)
            run = simulate(algorithm, problem, int(self.max_iter), eval_every=eval_every,
                           metrics=["objective"], clients_per_round=self.clients_per_round,
                           batch_size=self.batch_size, seed=_seed(self.random_state),
                           progress=False, on_divergence="raise", tol=tol, x0=x0,
                           initial_states=states)
        for warning in caught:  # the estimator's own words for an unconverged fit
            if not issubclass(warning.category, ConvergenceWarning):
                warnings.warn_explicit(warning.message, warning.category, warning.filename,
                                       warning.lineno)
        if run.status != "converged" and tol is not None:
            warnings.warn(_unconverged(self, run, tol, X), ConvergenceWarning, stacklevel=2)
        # its repr, not the algorithm: a fitted estimator pickles (the algorithm's functions
        # are closures), and the repr is the call that builds it again
        self.algorithm_ = repr(algorithm)
        self.history_ = run.history
        self.n_iter_ = int(run.n_rounds)
        self.converged_ = run.status == "converged"
        self.objective_ = float(run.history[-1]["objective"])
        self._set_model(np.asarray(run.x, dtype=np.float64))
        # what a warm start continues from: the algorithm's states, not only its model
        self._final_states = (self.algorithm_, problem.n_clients, problem.param_shape,
                              run.server_state, run.client_states)
        return self

    def _warm_start(self, shape: tuple[int, ...], algorithm: FederatedAlgorithm,
                    problem: Problem) -> tuple[np.ndarray | None, Any]:
        """``(x0, initial_states)`` of a fit: the previous fit's states where
        ``warm_start=True`` and the algorithm and clients are the same (a new ``alpha``
        along a path), else its model where the shape is the same, else nothing."""
        if not (self.warm_start and hasattr(self, "coef_")):
            return None, None
        previous = getattr(self, "_final_states", None)
        if previous is not None and previous[:3] == (repr(algorithm), problem.n_clients,
                                                     problem.param_shape):
            return None, previous[3:]
        return self._warm_start_model(shape), None

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
        """``coef_``, ``intercept_`` from the model ``x`` (intercept in its last row)."""
        weights, bias = (x[:-1], x[-1]) if self.fit_intercept else (x, np.zeros_like(x[0]))
        self.coef_ = weights.T
        self.intercept_ = bias if bias.ndim else float(bias)

    def _decision(self, X: Any) -> np.ndarray:
        check_is_fitted(self)
        X = validate_data(self, X, dtype=np.float64, accept_sparse="csr", reset=False)
        return np.asarray(X @ self.coef_.T) + self.intercept_


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
    algorithm : str or FederatedAlgorithm, default "za1"
        A name of :data:`fedcomp.ALGORITHMS` (synchronous rounds) or a built algorithm.
    algorithm_params : dict, optional
        Hyperparameters of the named algorithm.
    client_lr : "auto" or float, default "auto"
        The named algorithm's ``client_lr`` unless ``algorithm_params`` sets it; ``"auto"``
        is ``1/(τ L)`` (see the module docstring).
    max_iter : int, default 10000
        The most communication rounds.
    tol : float or None, default 1e-8
        Stop once the relative prox-gradient step
        ``‖x − prox_{sg}(x − s∇f(x))‖ / ‖x‖`` (:func:`fedcomp.simulate`'s
        ``stop="relative_prox_step"``, checked every ``eval_every`` rounds) is at most
        ``tol``; a fit whose ``max_iter`` ends first warns with scikit-learn's
        :class:`~sklearn.exceptions.ConvergenceWarning`, naming what to change. ``None``:
        run all ``max_iter`` rounds, without the check.
    warm_start : bool, default False
        Start from the previous fit's ``coef_`` and ``intercept_`` (a regularization path,
        a refit on more data) instead of zeros.
    fit_intercept : bool, default True
        Append a constant feature whose coefficient is not penalised (``intercept_``).
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

    Attributes
    ----------
    coef_ : array of shape (n_features,), or (n_outputs, n_features)
    intercept_ : float or array of shape (n_outputs,)
        0 when ``fit_intercept=False``.
    classes_ : array
        The class labels (classification losses only).
    history_ : list of dict
        The run's evaluation rows (:attr:`fedcomp.RunResult.history`: round, counters,
        objective).
    objective_ : float
        ``F`` at the fitted model (with the constant feature and mean losses).
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
                 alpha: Any = 1.0, *, regularizer_params: Any = None, algorithm: Any = "za1",
                 algorithm_params: Any = None, client_lr: Any = "auto", max_iter: Any = 10_000,
                 tol: Any = 1e-8, warm_start: Any = False, fit_intercept: Any = True,
                 n_clients: Any = 1, clients_per_round: Any = None,
                 batch_size: Any = None, eval_every: Any = None, random_state: Any = None
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
    n_clients, clients_per_round, batch_size, eval_every, random_state
        As in :class:`FederatedEstimator`.

    Attributes
    ----------
    coef_ : array of shape (n_features,)
    intercept_ : float
    history_, objective_, n_iter_, converged_, algorithm_, clients_, n_features_in_
        As in :class:`FederatedEstimator`.
    """

    def __init__(self, penalty: Any = "l1", alpha: Any = 1.0, *, l1_ratio: Any = 0.5,
                 gamma: Any = None, algorithm: Any = "za1", algorithm_params: Any = None,
                 client_lr: Any = "auto", max_iter: Any = 10_000, tol: Any = 1e-8,
                 warm_start: Any = False, fit_intercept: Any = True,
                 n_clients: Any = 1, clients_per_round: Any = None, batch_size: Any = None,
                 eval_every: Any = None, random_state: Any = None) -> None:
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
    with ``C = 1/(alpha·N)`` (N the training samples) and the same penalty minimises the
    same objective scaled by ``C·N``. Two classes fit the logistic loss on labels ±1
    (``coef_`` of shape ``(1, n_features)``), more the softmax cross-entropy (one row of
    ``coef_`` per class, as scikit-learn's multinomial fit).

    Parameters
    ----------
    penalty : {"l1", "elasticnet", "l2", "mcp", "scad", "none"} or None, default "l1"
        As in :class:`FederatedLinearRegression` (on every coefficient of every class).
    alpha : float, default 0.01
        The penalty's strength α.
    l1_ratio, gamma, algorithm, algorithm_params, client_lr, max_iter, tol, warm_start,
    fit_intercept, n_clients, clients_per_round, batch_size, eval_every, random_state
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
                 gamma: Any = None, algorithm: Any = "za1", algorithm_params: Any = None,
                 client_lr: Any = "auto", max_iter: Any = 10_000, tol: Any = 1e-8,
                 warm_start: Any = False, fit_intercept: Any = True,
                 n_clients: Any = 1, clients_per_round: Any = None, batch_size: Any = None,
                 eval_every: Any = None, random_state: Any = None) -> None:
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
            self.intercept_ = np.atleast_1d(np.asarray(self.intercept_, dtype=np.float64))

    def predict(self, X: Any) -> np.ndarray:
        """The class of the largest score."""
        return _predict_labels(self, X)


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


__all__ = ["alpha_max", "federated_path", "FederatedEstimator", "FederatedLinearRegression",
           "FederatedLogisticRegression"]
