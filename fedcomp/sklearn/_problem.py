"""The estimators' problem: samples to clients, the penalty, the algorithm and its step."""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import numpy as np

from .._extras import require

require("sklearn.base", "fedcomp.sklearn")

# scikit-learn >= 1.6 (the data extra's floor): validate_data and the tags API

from ..algorithms import ALGORITHMS, FederatedAlgorithm, make_algorithm  # noqa: E402
from ..data import ClientData  # noqa: E402
from ..data._checks import distinct_ids  # noqa: E402
from ..data._sparse import is_sparse_matrix  # noqa: E402
from ..losses import LeastSquares, Logistic, Softmax  # noqa: E402
from ..problem import Problem  # noqa: E402
from ..regularizers import (  # noqa: E402
    L1,
    MCP,
    SCAD,
    ElasticNet,
    Masked,
    Regularizer,
    Zero,
)
from ..regularizers._masked import SEPARABLE  # noqa: E402
from ..regularizers._scaled import SCALABLE  # noqa: E402
from ._auto import auto_algorithm  # noqa: E402
from ._engine import FLOAT32_TOL_EPS  # noqa: E402

#: Rows of ``history_`` (and checks of ``tol``) every this many rounds by default.
EVAL_EVERY = 10


def _unconverged(model: Any, run: Any, tol: float, X: Any, preconditioned: bool) -> str:
    """Why a fit stopped unconverged, and what to change: the data's scale first, where
    the run did not precondition it. ``tol`` is the run's (:func:`run_tol`)."""
    value = run.history[-1].get("relative_prox_step", float("nan"))
    fix = "" if preconditioned else _scale_advice(model, X)
    where = " (on the preconditioned features)" if preconditioned else ""
    raised = "" if tol == model.tol else (f" (tol={model.tol:g} raised to {FLOAT32_TOL_EPS:g} "
                                          "float32 epsilons: the run computes in float32)")
    return (f"{type(model).__name__} did not converge: the relative prox-gradient step is "
            f"{value:.3g} > tol={tol:g}{raised} after max_iter={model.max_iter} rounds{where}; "
            f"{fix}raise max_iter (or tol)")


def _scale_advice(model: Any, X: Any) -> str:
    """The fix for columns of very different sizes, or nothing where they are alike."""
    # the root-mean-square of each column, the intercept's constant 1 included: columns of
    # very different sizes make the problem ill-conditioned for every gradient method
    squares = X.multiply(X).mean(axis=0) if is_sparse_matrix(X) else np.mean(X * X, axis=0)
    scale = np.sqrt(np.asarray(squares, dtype=np.float64).ravel())
    if model.fit_intercept:
        scale = np.append(scale, 1.0)
    scale = scale[scale > 0]
    ratio = float(scale.max() / scale.min()) if scale.size > 1 else 1.0
    if ratio <= 10.0:
        return ""
    sizes = (f"the columns' sizes (the intercept's constant 1 included) differ by a factor of "
             f"{ratio:.3g}, which slows every gradient method: ")
    if not model.precondition:
        return (sizes + "pass precondition=True (the default: the fit solves in standardized "
                "coordinates and returns this problem's solution), or standardize the features "
                "(sklearn.preprocessing.StandardScaler in a Pipeline), or ")
    return (sizes + "this loss and penalty cannot be preconditioned (a penalty inside the "
            "loss, or a weakly convex or non-separable penalty): standardize the features "
            "(sklearn.preprocessing.StandardScaler in a Pipeline, which changes what the "
            "penalty weighs), or ")


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
    ids, owner = client_owners(X.shape[0], clients, n_clients, random_state)
    return split_data(X, y, owner, len(ids), sample_weight), ids


def client_owners(n: int, clients: Any, n_clients: int, random_state: Any
                  ) -> tuple[np.ndarray, np.ndarray]:
    """``(ids, owner)``: the distinct client ids (in client order) and the client index
    owning each of the ``n`` samples: by the ids ``clients``, else iid into ``n_clients``."""
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
        return np.arange(int(n_clients)), owner
    given, clients = clients, np.asarray(clients)
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
    # from the ids as given: NumPy would turn [0, "0", "a"] into text, 0 and "0" one id
    ids, owner = distinct_ids(given, "clients")
    return ids, owner


def split_data(X: Any, y: np.ndarray, owner: np.ndarray, n_clients: int,
               sample_weight: np.ndarray | None = None) -> ClientData:
    """The :class:`ClientData` of client ``i`` holding the samples ``owner == i``, in the
    features' floating dtype (float32 stays float32)."""
    weights = None if sample_weight is None else [
        sample_weight[owner == i] for i in range(n_clients)]
    return ClientData.from_lists([X[owner == i] for i in range(n_clients)],
                                 [y[owner == i] for i in range(n_clients)],
                                 dtype=X.dtype, sample_weight=weights)


# --- preconditioning: the pooled columns' scales, one aggregation round ------------------
class Preconditioner(NamedTuple):
    """The run's coordinates: it solves on the features ``(X − mean) / scale``.

    ``mean`` is zero where the features are not centered (no intercept to absorb it, or
    sparse features, which centering would make dense). The model ``x = (w, b)`` of the
    raw features is the model ``(scale ⊙ w, b + meanᵀw)`` of the scaled ones: both give
    every sample the same prediction, so the loss, and with the penalty written in the
    scaled coordinates (:class:`fedcomp.regularizers.Scaled`) the objective, are the same.
    """

    mean: np.ndarray
    scale: np.ndarray

    def features(self, X: Any) -> Any:
        """``(X − mean) / scale`` (a sparse ``X`` is only scaled: ``mean`` is zero), in
        ``X``'s dtype, computed in float64."""
        if is_sparse_matrix(X):
            from scipy import sparse

            return sparse.csr_matrix(X @ sparse.diags(1.0 / self.scale)).astype(X.dtype)
        return ((X - self.mean) / self.scale).astype(X.dtype)

    def to_run(self, model: np.ndarray, fit_intercept: bool) -> np.ndarray:
        """The raw model ``(w, b)`` (intercept in the last row) in the run's coordinates."""
        weights = model[:-1] if fit_intercept else model
        scaled = weights * _rows(self.scale, weights)
        if not fit_intercept:
            return scaled
        return np.concatenate([scaled, (model[-1] + self.mean @ weights)[None, ...]], axis=0)

    def to_raw(self, model: np.ndarray, fit_intercept: bool) -> np.ndarray:
        """The run's model in the raw features' coordinates (:meth:`to_run`'s inverse)."""
        scaled = model[:-1] if fit_intercept else model
        weights = scaled / _rows(self.scale, scaled)
        if not fit_intercept:
            return weights
        return np.concatenate([weights, (model[-1] - self.mean @ weights)[None, ...]], axis=0)

    def penalty_scale(self, shape: tuple[int, ...], fit_intercept: bool) -> np.ndarray:
        """The scale of every coordinate of a model of ``shape``: the intercept's row 1."""
        rows = np.concatenate([self.scale, [1.0]]) if fit_intercept else self.scale
        return np.broadcast_to(_rows(rows, np.empty(shape)), shape).copy()


def _rows(values: np.ndarray, like: np.ndarray) -> np.ndarray:
    """One value per feature row of ``like`` (a vector model, or a (d, k) matrix model)."""
    return values.reshape((-1,) + (1,) * (like.ndim - 1))


def column_report(features: Any, weights: np.ndarray | None) -> tuple[float, np.ndarray,
                                                                       np.ndarray]:
    """What one client sends for the preconditioner: ``Σ_j s_j``, ``Σ_j s_j a_j`` and
    ``Σ_j s_j a_j²`` over its samples ``a_j`` (weights ``s_j``, 1 without
    ``sample_weight``), accumulated in float64."""
    if weights is None:
        weights = np.ones(features.shape[0])
    if is_sparse_matrix(features):
        sums = features.T @ weights
        squares = features.multiply(features).T @ weights
    else:
        values = np.asarray(features, dtype=np.float64)
        sums, squares = weights @ values, weights @ (values * values)
    return float(weights.sum()), np.asarray(sums, dtype=np.float64).ravel(), \
        np.asarray(squares, dtype=np.float64).ravel()


def pooled_preconditioner(reports: list[tuple[float, np.ndarray, np.ndarray]],
                          intercept: bool, center: bool) -> Preconditioner:
    """The server's side of the round: the clients' reports summed give the pooled
    (weighted) column means and second moments.

    The scale is the standard deviation where the model has an ``intercept`` (which
    absorbs the mean), else the root mean square (glmnet's standardization without an
    intercept); a column of zero scale (constant) gets 1. The features are centered only
    where ``center`` (an intercept, and dense features: centering would fill a sparse
    matrix). The moments come as sums, so the variance is ``E[a²] − E[a]²``: it loses
    digits for a column whose mean dwarfs its spread, which costs the preconditioner some
    of its effect but never the solution (any positive scales give the same problem); a
    variance within rounding of zero is a constant column.
    """
    total = sum(report[0] for report in reports)
    mean = np.sum([report[1] for report in reports], axis=0) / total
    square = np.sum([report[2] for report in reports], axis=0) / total
    variance = np.maximum(square - mean * mean, 0.0) if intercept else square
    constant = variance <= 64.0 * np.finfo(np.float64).eps * square
    scale = np.where(constant, 1.0, np.sqrt(np.where(constant, 1.0, variance)))
    return Preconditioner(mean if center else np.zeros_like(mean), scale)


def preconditionable(loss: Any, regularizer: Regularizer) -> bool:
    """Whether a change of the features' scale keeps the problem: a linear model whose
    loss sees the features only through ``Xw`` (least squares, logistic, softmax, no
    penalty inside the loss, which would act on the scaled model), and a convex penalty
    whose prox splits by coordinate (:data:`fedcomp.regularizers._scaled.SCALABLE`; MCP and
    SCAD, weakly convex, would need steps below ``gamma·scale_j²``)."""
    plain_loss = isinstance(loss, LeastSquares | Logistic | Softmax) and loss == type(loss)()
    return plain_loss and isinstance(regularizer, SCALABLE) and bool(regularizer.convex)


def _append_ones(X: Any) -> Any:
    """``[X, 1]``: the intercept's column, in ``X``'s dtype (a sparse ``X`` stays sparse
    CSR)."""
    if is_sparse_matrix(X):
        from scipy import sparse

        return sparse.hstack([X, np.ones((X.shape[0], 1), dtype=X.dtype)], format="csr")
    return np.hstack([X, np.ones((X.shape[0], 1), dtype=X.dtype)])


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
    if gamma is not None and penalty in ("mcp", "scad") and not _nonnegative(gamma):
        # float("x") would say only "could not convert string to float: 'x'"
        raise ValueError(f"gamma must be a finite number (got gamma={gamma!r}); MCP needs "
                         "gamma > 1 (3.0 by default), SCAD a > 2 (3.7 by default)")
    if penalty == "mcp":
        return MCP(alpha, 3.0 if gamma is None else float(gamma), param_ndim=param_ndim)
    if penalty == "scad":
        return SCAD(alpha, 3.7 if gamma is None else float(gamma), param_ndim=param_ndim)
    raise ValueError(f"unknown penalty {penalty!r}; use one of {', '.join(names)} (or None)")


def _nonnegative(value: Any) -> bool:
    """A real number in ``[0, inf)`` (an integer past a float's range is not)."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        return False
    try:
        return bool(math.isfinite(float(value)) and value >= 0)
    except OverflowError:
        return False


def _algorithm(algorithm: Any, algorithm_params: Any, client_lr: Any, problem: Problem, *,
               batch_size: int | None = None) -> FederatedAlgorithm:
    """The algorithm to run: a built one as given, a name built with its parameters,
    ``"auto"`` chosen for the problem (:mod:`fedcomp.sklearn._auto`)."""
    if isinstance(algorithm, FederatedAlgorithm):
        if algorithm_params:
            raise ValueError("algorithm_params applies to an algorithm given by name; this "
                             f"algorithm is built already ({algorithm!r})")
        return algorithm
    if isinstance(algorithm, str) and algorithm == "auto":
        # hyperparameters or a client_lr given with "auto" are ZA1's, the former default
        # (code written for it runs as before)
        untuned = not algorithm_params and isinstance(client_lr, str) and client_lr == "auto"
        chosen = auto_algorithm(problem, batch_size) if untuned else None
        if chosen is not None:
            return chosen
        algorithm = "za1"
    if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm must be 'auto', a name of {', '.join(ALGORITHMS)} or a "
                         f"built algorithm such as fedcomp.za1(client_lr=0.5) (got "
                         f"{algorithm!r})")
    if ALGORITHMS.entry(algorithm).execution != "rounds":
        raise ValueError(f"algorithm {algorithm!r} runs on an event clock; the estimators run "
                         "synchronous rounds: choose another algorithm")
    if algorithm_params is not None and not isinstance(algorithm_params, Mapping):
        raise ValueError(f"algorithm_params must be a dict of {algorithm!r}'s hyperparameters "
                         f"(got {algorithm_params!r}), e.g. {{'local_steps': 5}}")
    params = dict(algorithm_params or {})
    accepted = inspect.signature(ALGORITHMS.entry(algorithm).factory).parameters
    if "client_lr" in accepted and "client_lr" not in params:
        if isinstance(client_lr, str) and client_lr == "auto":
            steps = params.get("local_steps", accepted["local_steps"].default
                               if "local_steps" in accepted else 1)
            smoothness = float(np.max(problem.loss.smoothness(problem.data.full_batch())))
            # a constant column and a zero-variance client can give L = 0: any step is exact
            client_lr = 1.0 / (max(int(steps), 1) * max(smoothness, 1e-12))
        elif not (_nonnegative(client_lr) and client_lr > 0):
            raise ValueError(f"client_lr must be 'auto' or a number > 0 (got "
                             f"client_lr={client_lr!r})")
        params["client_lr"] = float(client_lr)
    return make_algorithm(algorithm, **params)


