"""The composite federated problem ``F(x) = Σ_i π_i f_i(x) + g(x)``.

A :class:`Problem` ties a smooth loss (each client's ``f_i`` is that loss on client i's
data), a regularizer ``g``, the stacked client data and the client weights ``π``. It
evaluates the *global* quantities a centralized observer would (objective, full gradient,
prox-gradient mapping) — for metrics and the reference solver, never for the algorithms,
which see data only through :class:`fedcomp.oracle.Oracle`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._array import Array, asarray_like, device_of, namespace, to_numpy, weighted_sum
from .data import ClientData
from .losses import Loss
from .regularizers import Regularizer


def as_client_data(data: Any) -> ClientData:
    """``data`` as a :class:`ClientData`: one already, or a list of per-client ``(X, y)``
    pairs (stacked by :meth:`ClientData.from_lists`); anything else is refused by name."""
    if isinstance(data, ClientData):
        return data
    if isinstance(data, list | tuple) and data and all(
            isinstance(pair, list | tuple) and len(pair) == 2 for pair in data):
        return ClientData.from_lists([np.asarray(x) for x, _ in data],
                                     [np.asarray(y) for _, y in data])
    raise TypeError(f"data must be a fedcomp.ClientData, or a list of per-client (X, y) "
                    f"pairs (got {type(data).__name__}); build one with "
                    "ClientData.from_lists([X_1, X_2, ...], [y_1, y_2, ...])")


def client_weights(data: ClientData, weighting: Any = "uniform") -> np.ndarray:
    """Client weights ``π`` (summing to 1).

    ``"uniform"`` gives ``1/n`` (the papers' default), ``"samples"`` gives ``n_i/N`` (what
    most official code does), an array of finite nonnegative weights with a positive sum is
    normalised.
    """
    return normalised_weights(weighting, data.n_clients, data.sample_totals)


def normalised_weights(weighting: Any, n_clients: int,
                       sample_totals: Callable[[], np.ndarray]) -> np.ndarray:
    """:func:`client_weights` of ``n_clients`` clients whose sample counts (or their
    samples' summed weights) ``sample_totals()`` gives: what a server holding no data
    (:class:`fedcomp.flower.Strategy`) computes from what its clients report."""
    if isinstance(weighting, str):
        if weighting == "uniform":
            return np.full(n_clients, 1.0 / n_clients)
        if weighting == "samples":  # the clients' sample counts, or their samples' weights
            totals = np.asarray(sample_totals(), dtype=np.float64)
            return totals / totals.sum()
        raise ValueError(f"unknown weighting {weighting!r}; use 'uniform', 'samples' or an array "
                         "of one positive weight per client")
    try:
        w = np.asarray(weighting, dtype=np.float64)
    except (TypeError, ValueError):  # a table, a list of strings, a ragged list
        raise ValueError(f"weighting must be 'uniform', 'samples' or {n_clients} "
                         f"nonnegative numbers (got {weighting!r})") from None
    if w.shape != (n_clients,):
        raise ValueError(f"weighting must be {n_clients} nonnegative numbers with a positive "
                         f"sum (got shape {w.shape}); pass one weight per client")
    bad = np.flatnonzero(~np.isfinite(w) | (w < 0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"weighting[{i}] = {w[i]} is not a finite nonnegative number; client "
                         "weights must be finite and >= 0 (e.g. the clients' sample counts)")
    # finite entries can still sum to inf (1e308 + 1e308), which would make every π_i zero
    with np.errstate(over="ignore"):
        total = float(w.sum())
    if not 0 < total < np.inf:
        raise ValueError(f"weighting sums to {total}; client weights need a positive finite sum: "
                         "give at least one client a positive weight, or rescale them")
    return w / total


#: Target values read per block by :func:`_distinct_targets` (8 MiB of float64).
LABEL_BLOCK_VALUES = 1 << 20


def _distinct_targets(data: ClientData) -> np.ndarray:
    """The distinct values among every client's real (unpadded) targets and the holdout's.

    Read a block of clients at a time: the labels' checks need only these values, and a
    population whose targets are memory-mapped (``ClientData.load``) is never copied whole
    into memory for them.
    """
    width = int(data.targets.shape[1])
    per_block = max(1, LABEL_BLOCK_VALUES // max(width, 1))
    columns = np.arange(width)[None, :]
    found = [np.zeros(0)]
    for start in range(0, data.n_clients, per_block):
        stop = min(start + per_block, data.n_clients)  # in bounds: the Array API's slices
        targets = to_numpy(data.targets[start:stop, ...])
        real = columns < np.asarray(data.counts[start:stop])[:, None]
        found.append(np.unique(targets[real]))
    if data.holdout is not None:
        found.append(np.unique(to_numpy(data.holdout[1])))
    return np.unique(np.concatenate(found))


def _check_models_fit(data: ClientData, param_shape: tuple[int, ...]) -> None:
    """Refuse, before a run allocates them, models that cannot fit in memory.

    Sparse features cost memory in their nonzeros, but every run holds dense models: one
    per client at least (the clients' local iterates, their gradients at an evaluation)
    and two for the server (:func:`~fedcomp.data._checks.models_bytes`). A LIBSVM index
    of 99999999999, or ``n_features = 10**9`` on a few nonzeros, makes data that load
    instantly and a run that ends in a 745 GiB ``MemoryError`` or is killed by the OS;
    this names the size and the widest client instead
    (:func:`~fedcomp.data._checks.check_memory`, the check of dense data).
    """
    from ._array import bit_width
    from .data._checks import SERVER_MODELS, check_memory, models_bytes

    n_models = data.n_clients + SERVER_MODELS
    dtype = str(data.dtype).removeprefix("torch.")

    def fix() -> str:
        if not data.sparse:
            return "use fewer features or fewer clients"
        columns = to_numpy(data.features.columns)
        d = data.feature_shape[0]
        if not columns.size:
            return f"the features have {d} columns and no nonzero; give fewer columns"
        widest = int(np.argmax(columns % d))
        row = int(np.searchsorted(data.features.indptr, widest, side="right")) - 1
        return (f"the features have {d} columns, but the largest used is "
                f"{int(columns[widest]) % d} (client {row // data.max_samples}): pass "
                "n_features (or build the matrices) with only the columns used, and check "
                "that client's indices")

    check_memory(models_bytes(data.n_clients, param_shape, bit_width(data.like) // 8),
                 f"Problem: the {n_models} models of shape {param_shape} ({dtype}) that a "
                 f"run holds at least (one per client of {data.n_clients}, "
                 f"{SERVER_MODELS} for the server)", fix)


#: How a minibatch draws a client's samples (:class:`Problem`'s ``minibatch``).
MINIBATCH = ("with_replacement", "without_replacement")


@dataclass(frozen=True, eq=False)
class Problem:
    """A composite federated optimization problem.

    Parameters
    ----------
    loss : Loss
        The smooth per-sample loss; client i's ``f_i`` is its weighted mean over i's data.
    regularizer : Regularizer
        The (possibly nonsmooth, possibly weakly convex) ``g``.
    data : ClientData
        Every client's samples, stacked on a leading client axis.
    weighting : {"samples", "uniform"} or array, default "samples"
        Client weights ``π`` (see :func:`client_weights`). ``"samples"`` (``n_i/N``) makes
        ``F`` the loss averaged over all samples, whatever the split — the objective of
        a centralized fit and of the scikit-learn estimators (:mod:`fedcomp.sklearn`),
        which use the same default. The papers mostly weight clients equally
        (``"uniform"``), and so do the experiment configurations unless their
        ``[problem] weighting`` says otherwise. Equal client sizes give the same weights
        either way.
    n_classes : int, optional
        Number of classes, for losses whose model shape depends on it (softmax).
    ground_truth : array, optional
        A known true model (synthetic data), for support-recovery metrics.
    name : str, default ""
        A label used in outputs.
    sampler : object, optional
        Streaming data: ``sampler.batch(seed, round, client_ids, draw, batch_size, like)``
        returns fresh samples for every minibatch gradient call (e.g.
        :class:`fedcomp.data.LiangSampler`); ``data`` then only fixes shapes, dtype and the
        training-loss metrics. Full-gradient runs (``batch_size=None``) still use ``data``.
    minibatch : {"with_replacement", "without_replacement"}, default "with_replacement"
        How a minibatch picks a client's samples: independent uniform draws, or a uniformly
        random subset of distinct samples (Bao et al.'s MATLAB: ``datasample(...,
        'Replace', false)``, e.g. ``LassoRun.m`` line 155), which needs every client to hold
        at least ``batch_size`` samples. Either way client i's minibatch in round r depends
        only on (seed, r, i, draw) (:func:`fedcomp._random.minibatch_indices`). Streaming
        samplers draw fresh samples and ignore it.

    Examples
    --------
    >>> import numpy as np
    >>> from fedcomp.data import ClientData
    >>> from fedcomp.losses import LeastSquares
    >>> from fedcomp.regularizers import L1
    >>> data = ClientData.from_lists([np.eye(2), 2 * np.eye(2)], [np.ones(2), np.ones(2)])
    >>> p = Problem(LeastSquares(), L1(0.1), data)
    >>> p.param_shape, round(p.objective(np.zeros(2)), 6)
    ((2,), 0.5)
    """

    loss: Loss
    regularizer: Regularizer
    data: ClientData
    weighting: Any = "samples"
    n_classes: int | None = None
    ground_truth: Any = None
    name: str = ""
    sampler: Any = None
    minibatch: str = "with_replacement"
    weights: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "data", as_client_data(self.data))
        if self.data.sparse and not getattr(self.loss, "takes_sparse", False):
            raise ValueError(f"{type(self.loss).__name__} computes on dense features; sparse "
                             "data run with a linear-model loss (LeastSquares, Logistic, "
                             "Softmax), or densify small data first")
        if self.minibatch not in MINIBATCH:
            raise ValueError(f"minibatch must be one of {MINIBATCH} (got "
                             f"minibatch={self.minibatch!r})")
        object.__setattr__(self, "weights", client_weights(self.data, self.weighting))
        if self.loss.param_ndim != self.regularizer.param_ndim:
            raise ValueError(
                f"the loss has {self.loss.param_ndim}-D models but the regularizer was built with "
                f"param_ndim={self.regularizer.param_ndim}; pass param_ndim={self.loss.param_ndim} "
                "to the regularizer")
        check_targets = getattr(self.loss, "check_targets", None)
        if check_targets is not None:
            check_targets(_distinct_targets(self.data), self.n_classes)
        _check_models_fit(self.data, self.param_shape)

    def __repr__(self) -> str:
        """One line: the parts and the data's shapes (not its arrays)."""
        extra = "".join(f", {name}={value!r}" for name, value in (
            ("n_classes", self.n_classes), ("name", self.name)) if value)
        return (f"Problem({self.loss!r}, {self.regularizer!r}, {self.data!r}, "
                f"weighting={self.weighting if isinstance(self.weighting, str) else 'array'!r}"
                f"{extra})")

    # --- shapes ---------------------------------------------------------------------------
    @property
    def n_clients(self) -> int:
        return self.data.n_clients

    @property
    def param_shape(self) -> tuple[int, ...]:
        return tuple(self.loss.param_shape(self.data.feature_shape, self.n_classes))

    def zeros(self) -> Array:
        """A zero model in the data's namespace and dtype."""
        xp = namespace(self.data.like)
        return xp.zeros(self.param_shape, dtype=self.data.dtype,
                        device=device_of(self.data.like))

    def initial_model(self) -> Array:
        """The default starting model: the loss's own (a network's seeded initial
        parameters, :meth:`TorchModel.initial_model`), else zeros."""
        initial = getattr(self.loss, "initial_model", None)
        return self.zeros() if initial is None else self.as_model(initial())

    def as_model(self, x: Any) -> Array:
        """``x`` as a model array in the data's namespace and dtype.

        Raises ``ValueError`` when ``x`` is not of shape :attr:`param_shape` (a start of
        the wrong size would fail deep inside the loss as a raw matmul error).
        """
        x = to_numpy(x) if not isinstance(x, np.ndarray) else x
        if tuple(np.shape(x)) != tuple(self.param_shape):
            raise ValueError(f"{self.name or 'problem'}: a model (x0) of shape "
                             f"{tuple(np.shape(x))} was given; this problem's models have "
                             f"shape {tuple(self.param_shape)} (param_shape)")
        return asarray_like(x, self.data.like)

    def start_model(self, x0: Any = None) -> Array:
        """A run's first model: :meth:`initial_model`, or ``x0`` checked (shape, and finite:
        a NaN start would be reported as a divergence, with a step size to blame)."""
        if x0 is None:
            return self.initial_model()
        x = self.as_model(x0)
        bad = np.flatnonzero(~np.isfinite(to_numpy(x)).reshape(-1))
        if bad.size:
            raise ValueError(f"{self.name or 'problem'}: x0 has {bad.size} NaN or infinite "
                             f"entries (the first at flat index {int(bad[0])}); give a finite "
                             "starting model")
        return x

    # --- global quantities ----------------------------------------------------------------
    def _replicate(self, x: Array) -> Array:
        xp = namespace(x)
        return xp.broadcast_to(x[None, ...], (self.n_clients, *x.shape))

    def _pi(self) -> Array:
        return asarray_like(self.weights, self.data.like)

    def smooth_value(self, x: Array) -> float:
        """``f(x) = Σ_i π_i f_i(x)``."""
        values = self.loss.value(self._replicate(x), self.data.full_batch())
        return float(to_numpy(weighted_sum(values, self._pi())))

    def smooth_grad(self, x: Array) -> Array:
        """``∇f(x) = Σ_i π_i ∇f_i(x)``."""
        grads = self.loss.grad(self._replicate(x), self.data.full_batch())
        return weighted_sum(grads, self._pi())

    def client_grads(self, x: Array) -> Array:
        """Every client's full gradient at the common point ``x``: ``(n, *param_shape)``."""
        return self.loss.grad(self._replicate(x), self.data.full_batch())

    def reg_value(self, x: Array) -> float:
        return float(to_numpy(self.regularizer.value(x[None, ...]))[0])

    def objective(self, x: Array) -> float:
        """``F(x) = f(x) + g(x)``."""
        return self.smooth_value(x) + self.reg_value(x)

    def prox(self, x: Array, step: float) -> Array:
        """``prox_{step·g}`` of a single model."""
        return self.regularizer.prox(x[None, ...], step)[0, ...]

    def prox_grad_mapping(self, x: Array, step: float) -> Array:
        """``G_s(x) = (x − prox_{s g}(x − s∇f(x))) / s``: zero exactly at stationary points."""
        return (x - self.prox(x - step * self.smooth_grad(x), step)) / step

    def smoothness(self) -> float:
        """An upper bound on the Lipschitz constant of ``∇f``: ``Σ_i π_i L_i``."""
        per_client = to_numpy(self.loss.smoothness(self.data.full_batch()))
        return float(np.dot(self.weights, per_client))

    # --- identity ---------------------------------------------------------------------------
    def fingerprint(self) -> str:
        """A hash of everything that determines the solution (data, loss, regularizer, π)."""
        h = hashlib.sha256()
        h.update(json.dumps([type(self.loss).__name__, repr(self.loss),
                             type(self.regularizer).__name__, repr(self.regularizer),
                             self.n_classes]).encode())
        features = (self.data.features.fingerprint_arrays() if self.data.sparse
                    else [self.data.features])
        for arr in (*features, self.data.targets):
            a = np.ascontiguousarray(to_numpy(arr))
            h.update(str((a.shape, a.dtype.str)).encode())
            h.update(a.tobytes())
        h.update(self.data.counts.tobytes())
        if self.data.sample_weight is not None:
            h.update(np.ascontiguousarray(self.data.sample_weight).tobytes())
        h.update(np.ascontiguousarray(self.weights).tobytes())
        return h.hexdigest()[:24]
