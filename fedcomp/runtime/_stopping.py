"""When a run stops before its budget: a tolerance, a callback, a divergence; and checkpoints.

:func:`~fedcomp.runtime.simulate` checks these at each evaluation row (every
``eval_every`` rounds):

* ``tol`` on a **stopping measure** (:data:`STOP_MEASURES`). The default,
  ``"relative_prox_step"``, is the length of one centralized prox-gradient step from the
  server's model relative to the model,

  .. math::

      \\frac{\\lVert x - \\operatorname{prox}_{s g}(x - s \\nabla f(x)) \\rVert}
            {\\lVert x \\rVert}, \\qquad s = \\min(1/L, 1/(2\\rho)),

  zero exactly at the stationary points of ``f + g`` (the ``prox_grad_norm`` metric times
  ``s``, divided by ``‖x‖``; ``0/0 = 0``). A deployment computes it in one extra round:
  every client sends ``∇f_i(x)``, the server averages and takes the prox. The simulator
  computes it centrally and does not add that round to the counters. A run that reaches
  ``tol`` has status ``"converged"`` only where the **objective certifies** it
  (:class:`Certificate`): ``F(x) = f(x) + g(x)`` finite, not above its value at the run's
  first row and not rising since the previous row. A relative measure alone is fooled by
  scale: a model that runs away makes ``‖x‖`` grow faster than the prox step, and its
  ratio falls below any ``tol``. One whose budget ends first warns with a
  ``ConvergenceWarning`` (:func:`convergence_warning`) that names what to change. An
  objective that **runs away** (NaN, or above its start by :data:`RUNAWAY` times the
  start's size) is a divergence, as below.
* **callbacks**: functions of a :class:`RunView`, called after every evaluation row; one
  that returns ``True`` stops the run (status ``"stopped"``). :class:`EarlyStopping` and
  :class:`Checkpoint` are two; any function is a third.
* a **divergence** (a non-finite model, or a norm above ``max_norm``): the run returns its
  rows so far with status ``"diverged"`` and a :class:`RuntimeWarning` naming the round and
  the fix, or raises :class:`~fedcomp.runtime.NonFiniteError` with
  ``on_divergence="raise"``.

Checkpoints (:class:`~fedcomp.runtime._checkpoint.Checkpoint`, a callback) live in
:mod:`fedcomp.runtime._checkpoint`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

from .._array import Array, namespace, to_numpy
from .._extras import _installed, require
from ..oracle import Counters
from ..problem import Problem


def convergence_warning() -> type[Warning]:
    """The warning class of a run whose budget ended before ``tol``: scikit-learn's
    :class:`~sklearn.exceptions.ConvergenceWarning` where it is installed (one filter then
    silences both), else :class:`FedcompConvergenceWarning`. A function, so that
    ``import fedcomp`` does not import scikit-learn (a second); ``fedcomp.ConvergenceWarning``
    calls it on first use."""
    if _installed("sklearn"):
        return require("sklearn.exceptions", "ConvergenceWarning").ConvergenceWarning
    return FedcompConvergenceWarning


class NonFiniteError(FloatingPointError):
    """An iterate diverged: NaN or infinite, its norm above ``max_norm``, or its objective
    run away (:class:`Certificate`)."""


class FedcompConvergenceWarning(UserWarning):
    """A run's budget ended before its stopping tolerance was reached (without
    scikit-learn)."""


#: The run ended its budget (no tolerance, or the tolerance was not reached: warned).
COMPLETED = "completed"
CONVERGED = "converged"
STOPPED = "stopped"
DIVERGED = "diverged"


# --- stopping measures --------------------------------------------------------------------
def _relative(numerator: float, model_norm: float) -> float:
    """``numerator / model_norm`` with ``0/0 = 0`` (a zero model that does not move)."""
    if numerator == 0.0:
        return 0.0
    return numerator / model_norm if model_norm > 0 else math.inf


def _norm(x: Array) -> float:
    xp = namespace(x)
    return float(to_numpy(xp.sqrt(xp.sum(x * x))))


class StopMeasure:
    """A stopping measure: ``value(model)`` at each evaluation row (lower is better)."""

    def __init__(self, name: str, problem: Problem) -> None:
        from ..metrics._functions import prox_grad_norm, stationarity_step

        check_stop(name)
        self.name, self.problem = name, problem
        self.previous: Array | None = None
        if name != "relative_change":
            # s once per run: L is a pass over the data
            self.step = stationarity_step(problem)
            self.mapping = prox_grad_norm

    def value(self, model: Array) -> float:
        if self.name == "relative_change":
            before, self.previous = self.previous, model
            if before is None:
                return math.inf
            return _relative(_norm(model - before), _norm(model))
        mapping = self.mapping(self.problem, model, step=self.step)
        if self.name == "prox_grad_norm":
            return mapping
        return _relative(self.step * mapping, _norm(model))


#: The measures ``RunOptions(stop=...)`` takes, each with what it is.
STOP_MEASURES = {
    "relative_prox_step": "||x - prox_{s g}(x - s grad f(x))|| / ||x||, s = min(1/L, 1/(2 rho))"
                          " (default)",
    "prox_grad_norm": "||x - prox_{s g}(x - s grad f(x))|| / s (the metric, absolute)",
    "relative_change": "||x_k - x_j|| / ||x_k|| between two evaluation rows j < k",
}


def check_stop(name: Any) -> None:
    """``stop`` names one of :data:`STOP_MEASURES`."""
    if not isinstance(name, str) or name not in STOP_MEASURES:  # a list is unhashable
        raise ValueError(f"stop must be one of {', '.join(STOP_MEASURES)} (got {name!r})")


def check_on_divergence(on_divergence: Any) -> None:
    """What a diverged run does: ``"return"`` its rows, or ``"raise"``."""
    if on_divergence not in ("return", "raise"):
        raise ValueError(f"on_divergence must be 'return' or 'raise' (got "
                         f"{on_divergence!r})")


def check_tol(tol: Any) -> float | None:
    if tol is None:
        return None
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not tol >= 0:
        raise ValueError(f"tol must be a number >= 0 or None (got tol={tol!r})")
    return float(tol)


def budget_warning(label: str, rounds: int, measure: str, value: float, tol: float,
                   hint: str = "") -> None:
    """The :class:`ConvergenceWarning` of a run whose ``rounds`` ended above ``tol`` (or at
    or below it, uncertified: ``hint`` says why)."""
    relation = ">" if value > tol else "<="
    warnings.warn(
        f"{label}: {measure} = {value:.3g} {relation} tol = {tol:.3g} after {rounds} rounds; the "
        f"model has not converged: {hint or 'raise the rounds, or the step size'}",
        convergence_warning(), stacklevel=4)


# --- the rule a runner applies at each row ------------------------------------------------
#: How the divergence warning ends (what an estimator looks for among a fit's warnings)
DIVERGED_MARK = "; the run returns its rows so far (status 'diverged')"

#: An objective this many times its start's size above its start has run away: a
#: divergence (``F(x_k) − F(x_0) > RUNAWAY · max(|F(x_0)|, FLOOR)``). No convergent run
#: passes through such a point on the way; a too-large step does (on standardized
#: breast-cancer data ×10³, ZA1 with ``client_lr = 100`` goes from 0.69 to 5.9·10⁵ in 10
#: rounds while its relative prox step is 6·10⁻¹¹).
RUNAWAY = 1e4
#: The relative slack of "not above the start" and "not rising": rounding, never progress
RISE_SLACK = 1e-9
#: The size below which an objective counts as zero in these comparisons
FLOOR = 1e-12


class Certificate:
    """What must hold of the objective ``F = f + g`` before a small stopping measure means
    "converged": the scale-free part of the claim.

    Every stopping measure is small at a model that runs away: the relative ones because
    ``‖x‖`` grows faster than the step, the absolute one where the loss saturates (a
    logistic loss at ``|margin| → ∞`` has a vanishing gradient). ``F`` cannot be fooled
    that way: a method that converges ends with ``F(x_k) ≤ F(x_0)`` (for a convex ``F``
    at every minimiser; for a nonconvex one at the stationary points a descent reaches)
    and with ``F`` settled. So a row is **certified** when ``F(x_k)`` is finite, at most
    ``F`` at the run's first row and at most ``F`` at the previous row (each up to
    :data:`RISE_SLACK`); it has **run away** when ``F(x_k)`` is NaN or above the first
    row's by :data:`RUNAWAY` times that row's size.

    ``F = +∞`` (a constraint's indicator at an infeasible average) is not certified, and
    not a divergence: the next rows may return to the set.
    """

    def __init__(self) -> None:
        self.first: float | None = None
        self.previous: float | None = None
        self.current: float | None = None

    def observe(self, objective: float) -> None:
        """Record the objective of the row just written."""
        self.previous, self.current = self.current, objective
        if self.first is None:
            self.first = objective

    def shortfall(self) -> str:
        """Why the last row does not certify convergence ("" when it does)."""
        now, first, before = self.current, self.first, self.previous
        if now is None or first is None:
            return ""
        if not math.isfinite(now):
            return f"the objective is {now}"
        for reference, what in ((first, "at the first row"), (before, "at the row before")):
            if reference is not None and now > reference + RISE_SLACK * max(
                    abs(reference), abs(now), FLOOR):
                return f"the objective F = {now:.6g} is above its value {what} ({reference:.6g})"
        return ""

    def runaway(self) -> str:
        """How the objective ran away at the last row ("" when it did not)."""
        now, first = self.current, self.first
        if now is None or first is None:
            return ""
        if math.isnan(now):
            return "has a NaN objective"
        if math.isfinite(first) and math.isfinite(now) and \
                now - first > RUNAWAY * max(abs(first), FLOOR):
            return (f"ran away (objective {now:.3g}, {RUNAWAY:g}+ times its start's size "
                    f"above the start {first:.3g})")
        return ""


class StopRule:
    """``tol``, ``stop``, ``callbacks`` and ``on_divergence`` of one run: what every runner
    (:func:`~fedcomp.runtime.simulate`, ``simulate_async``, ``simulate_decentralized``)
    checks at an evaluation row, and the run's status.

    A runner calls :meth:`columns` for the row's stopping-measure column, :meth:`after_row`
    once the row is recorded (``True``: stop here), :meth:`diverged` when its divergence
    check raised, and :meth:`finish` at the end (the budget's ``ConvergenceWarning``).
    """

    def __init__(self, problem: Problem, tol: Any, stop: str, callbacks: Any,
                 on_divergence: str, hint: str = "") -> None:
        self.problem, self.hint = problem, hint
        self.tol = check_tol(tol)
        self.callbacks = check_callbacks(callbacks)
        check_on_divergence(on_divergence)
        self.on_divergence, self.stop = on_divergence, stop
        self.measure = StopMeasure(stop, problem) if self.tol is not None else None
        self.status = COMPLETED
        self.last_value: float | None = None
        self.last_model: Array | None = None
        self.certificate = Certificate()
        #: why the last row that met ``tol`` was not certified (the budget warning's hint)
        self.uncertified = ""

    def columns(self, model: Array) -> dict[str, float]:
        """The row's stopping-measure column (none without ``tol``)."""
        if self.measure is None:
            return {}
        value = self.measure.value(model)
        self.last_value, self.last_model = value, model
        return {self.stop: value}

    def device_columns(self, value: float, model: Array) -> dict[str, float]:
        """:meth:`columns` of a row whose measure ``value`` came from the device (``model``:
        the compiled call's last, its last row's)."""
        if self.measure is None:
            return {}
        self.last_value, self.last_model = value, model
        if self.measure.name == "relative_change":
            self.measure.previous = model
        return {self.stop: value}

    def carried(self) -> tuple[float | None, float | None, Array | None]:
        """What a call that applies this rule on the device starts from: ``F`` at the first
        and the last row, and the last row's model (``relative_change``'s)."""
        previous = None if self.measure is None else self.measure.previous
        return self.certificate.first, self.certificate.current, previous

    def _objective(self, view: RunView) -> float:
        """``F`` at the model the measure saw: the row's own column where the row is of that
        model (no second pass over the data), else computed."""
        if view.model is self.last_model and "objective" in view.row:
            return float(view.row["objective"])
        return self.problem.objective(self.last_model)

    def after_row(self, view: RunView, objective: float | None = None) -> bool:
        """Apply ``tol`` (with its :class:`Certificate`) and the callbacks to the row just
        recorded; whether to stop (``objective``: ``F`` there, where the device gave it)."""
        if self.measure is not None and self.last_model is not None:
            self.certificate.observe(self._objective(view) if objective is None
                                     else objective)
            how = self.certificate.runaway()
            if how:
                self.diverged(NonFiniteError(
                    f"{view.algorithm}: the model {how} in round {view.round}; {self.hint}"
                    .rstrip("; ")))
                return True
            if self.last_value is not None and self.last_value <= self.tol:  # type: ignore
                self.uncertified = self.certificate.shortfall()
                if not self.uncertified:
                    self.status = CONVERGED
        if run_callbacks(self.callbacks, view) and self.status != CONVERGED:
            self.status = STOPPED
        return self.status != COMPLETED

    def diverged(self, error: Exception) -> None:
        """A divergence: raised again with ``on_divergence="raise"``, else a warning and
        the status ``"diverged"``."""
        if self.on_divergence == "raise":
            raise error
        warnings.warn(f"{error}{DIVERGED_MARK}",
                      RuntimeWarning, stacklevel=3)
        self.status = DIVERGED

    def finish(self, label: str, rounds: int) -> None:
        """The budget's :class:`ConvergenceWarning` when ``tol`` was not reached."""
        if self.status == COMPLETED and self.tol is not None and self.last_value is not None:
            hint = ""
            if self.last_value <= self.tol and self.uncertified:
                hint = (f"{self.uncertified}, so the small measure is not convergence (a "
                        "model that runs away has one too): lower the step size")
            budget_warning(label, rounds, self.stop, self.last_value, self.tol, hint)


# --- callbacks ----------------------------------------------------------------------------
class RunView(NamedTuple):
    """What a callback sees after an evaluation row."""

    round: int
    row: dict[str, Any]
    model: Array
    server_state: Any
    client_states: Any
    counters: Counters
    history: list[dict[str, Any]]
    algorithm: str


Callback = Callable[[RunView], Any]


class EarlyStopping:
    """Stop when ``metric`` has not improved by ``min_delta`` for ``patience`` rows.

    ``mode="min"`` (a loss, an objective) or ``"max"`` (an accuracy). The run then has
    status ``"stopped"``.

    Examples
    --------
    >>> stop = EarlyStopping("objective", patience=2)
    >>> [stop.improved(v) for v in (3.0, 2.0, 2.0, 2.0)]
    [True, True, False, False]
    """

    def __init__(self, metric: str = "objective", patience: int = 5, min_delta: float = 0.0,
                 mode: str = "min") -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max' (got {mode!r})")
        if not (isinstance(patience, int) and patience >= 1):
            raise ValueError(f"patience must be an integer >= 1 (got {patience!r})")
        self.metric, self.patience, self.min_delta, self.mode = (
            metric, patience, float(min_delta), mode)
        self.best = math.inf if mode == "min" else -math.inf
        self.waited = 0

    def improved(self, value: float) -> bool:
        better = (value < self.best - self.min_delta if self.mode == "min"
                  else value > self.best + self.min_delta)
        if better:
            self.best, self.waited = value, 0
        else:
            self.waited += 1
        return better

    def __call__(self, view: RunView) -> bool:
        if self.metric not in view.row:
            raise KeyError(f"EarlyStopping watches {self.metric!r}, which the rows lack "
                           f"(columns: {', '.join(view.row)}); add it to metrics=")
        self.improved(float(view.row[self.metric]))
        return self.waited >= self.patience


def run_callbacks(callbacks: Sequence[Callback], view: RunView) -> bool:
    """Call every callback (all of them, in order); whether one asked to stop."""
    asked = [bool(callback(view)) for callback in callbacks]
    return any(asked)


def check_callbacks(callbacks: Any) -> tuple[Callback, ...]:
    if callbacks is None:
        return ()
    if callable(callbacks):
        callbacks = [callbacks]
    out = tuple(callbacks)
    for callback in out:
        if not callable(callback):
            raise ValueError(f"callbacks must be functions of a RunView (got {callback!r})")
    return out
