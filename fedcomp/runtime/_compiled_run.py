"""A run's rows computed on the device: the compiled engine's whole-run calls.

Where a run's rows need only what a trace can compute — the metrics of
:data:`TRACED_METRICS`, the stopping measure of ``tol``, the objective that certifies it —
one compiled call runs the rounds *and* the rows: a ``lax.while_loop`` over rows, each a
``while_loop`` over its rounds that stops at a round whose ``Σ x²`` is non-finite or above
``max_norm²``, then the row's metrics, its stopping measure and its
:class:`~fedcomp.runtime._stopping.Certificate`, stopping at the first row where ``tol``
is met and certified, or where the objective runs away. The values go back to the host
in preallocated arrays, where :func:`~fedcomp.runtime.simulate` writes the rows and
applies the very :class:`~fedcomp.runtime._stopping.StopRule` of the row-by-row run to
them (the device's decisions are the host's comparisons on the same float64 values),
with each row's counters replayed from the trace (a round of every client adds the same
counts: added once per row, multiplied).

The first call writes row 0 too, before any round. A call ends at a row: the last one it
may reach (a callback's or a checkpoint's row: the
host must see it), a stop, a divergence, or the most rounds a call runs
(:attr:`RowPlan.span`), so a long run stays interruptible and its progress line moves.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

from .._array import weighted_sum
from ..data import Batch
from ..problem import Problem
from ._compiled_trace import DataArrays
from ._jax import require_jax
from ._stopping import FLOOR, RISE_SLACK, RUNAWAY

#: A whole-run call runs at most this many rounds (every client each round) ...
WHOLE_ROUNDS = 4096
#: ... or this many with sampled clients (their ids are drawn on the host beforehand)
SAMPLED_ROUNDS = 512
#: ... and touches about this many data floats (participants x samples x features per
#: round, summed over its rounds): ~1 s of ZA1 rounds with 5 local steps on one core.
WHOLE_FLOATS = 200_000_000


# --- the metrics a trace computes ---------------------------------------------------------------

def _batch(arrays: DataArrays) -> Batch:
    return Batch(arrays.features, arrays.targets, arrays.sample_weights)


def _replicate(problem: Problem, x: Any) -> Any:
    return require_jax().numpy.broadcast_to(x[None, ...], (problem.n_clients, *x.shape))


def smooth_value(problem: Problem, x: Any, arrays: DataArrays) -> Any:
    """``f(x) = Σ π_i f_i(x)`` (:meth:`Problem.smooth_value`) on the traced data."""
    return weighted_sum(problem.loss.value(_replicate(problem, x), _batch(arrays)),
                        arrays.weights)


def objective(problem: Problem, x: Any, arrays: DataArrays) -> Any:
    """``F(x) = f(x) + g(x)`` (:meth:`Problem.objective`) on the traced data, the two
    terms added in float64 as the host adds its two floats."""
    return _f64(smooth_value(problem, x, arrays)) + _f64(
        problem.regularizer.value(x[None, ...])[0])


def _f64(value: Any) -> Any:
    """A traced value as float64 (the host's ``float``: float32 data give float32 sums)."""
    return require_jax().numpy.asarray(value, dtype="float64")


def mapping_norm(problem: Problem, x: Any, arrays: DataArrays, step: float) -> Any:
    """``‖x − prox_{s g}(x − s∇f(x))‖ / s`` (:func:`~fedcomp.metrics.prox_grad_norm`)."""
    jnp = require_jax().numpy
    grad = weighted_sum(problem.loss.grad(_replicate(problem, x), _batch(arrays)),
                        arrays.weights)
    mapped = (x - problem.regularizer.prox((x - step * grad)[None, ...], step)[0, ...]) / step
    return _f64(jnp.sqrt(jnp.sum(mapped * mapped)))


def _nnz(problem: Problem, x: Any, arrays: DataArrays, step: float) -> Any:
    jnp = require_jax().numpy
    return jnp.sum(jnp.abs(x) > 0).astype(jnp.float64)


def _sparsity(problem: Problem, x: Any, arrays: DataArrays, step: float) -> Any:
    jnp = require_jax().numpy
    return jnp.sum(x == 0).astype(jnp.float64) / max(int(np.prod(x.shape)), 1)


def _nan(problem: Problem, x: Any, arrays: DataArrays, step: float) -> Any:
    return require_jax().numpy.float64(math.nan)


#: The registry's metrics a trace computes, as ``fn(problem, x, arrays, step)`` (``step``:
#: :func:`~fedcomp.metrics.stationarity_step`); ``optimality`` and ``suboptimality`` only
#: without a reference (NaN). Any other metric keeps the rows on the host.
TRACED_METRICS: dict[str, Callable[..., Any]] = {
    "objective": lambda problem, x, arrays, step: objective(problem, x, arrays),
    "training_loss": lambda problem, x, arrays, step: _f64(smooth_value(problem, x, arrays)),
    "prox_grad_norm": mapping_norm,
    "nnz": _nnz,
    "sparsity": _sparsity,
    "optimality": _nan,
    "suboptimality": _nan,
}


def _relative(numerator: Any, model_norm: Any) -> Any:
    """:func:`fedcomp.runtime._stopping._relative` traced: ``0/0 = 0``, ``a/0 = inf``."""
    jnp = require_jax().numpy
    safe = jnp.where(model_norm > 0, model_norm, 1.0)
    return jnp.where(numerator == 0, 0.0, jnp.where(model_norm > 0, numerator / safe, jnp.inf))


def _norm(x: Any) -> Any:
    jnp = require_jax().numpy
    return _f64(jnp.sqrt(jnp.sum(x * x)))


class RowPlan(NamedTuple):
    """What a run's rows hold, for the trace: the metric columns, the stopping measure of
    ``tol`` (``None``: no ``tol``) and the constants of the run's stop rule."""

    metrics: tuple[str, ...]
    measure: str | None
    step: float  # the stationarity step s (prox_grad_norm, relative_prox_step)
    rounds: int
    eval_every: int
    tol: float
    limit: float  # max_norm (inf: none)
    span: int  # the most rounds of one call

    @property
    def max_rows(self) -> int:
        return self.span // self.eval_every + 2

    @property
    def width(self) -> int:
        """Values per row: the metrics, the measure and the certificate's objective."""
        return len(self.metrics) + 2


def row_plan(problem: Problem, metrics: Sequence[Any], reference: Any, rule: Any,
             rounds: int, eval_every: int, limit: float, participants: int) -> RowPlan | None:
    """The :class:`RowPlan` of a run whose rows a trace can compute, else ``None`` (a
    user's callable metric, a reference, a host-only metric: the rows stay the host's)."""
    names = tuple(metrics)
    traced = all(isinstance(n, str) and n in TRACED_METRICS for n in names)
    if not traced or (reference is not None and {"optimality", "suboptimality"} & set(names)):
        return None
    if not names and rule.measure is None:
        return None  # rows of counters only: the chunks between rows cost the host nothing
    from ..metrics import stationarity_step

    measure = None if rule.measure is None else rule.stop
    needs_step = measure in ("relative_prox_step", "prox_grad_norm") or (
        "prox_grad_norm" in names)
    step = rule.measure.step if measure not in (None, "relative_change") else (
        stationarity_step(problem) if needs_step else 1.0)
    per_round = participants * problem.data.max_samples * int(
        np.prod(problem.data.feature_shape))
    most = SAMPLED_ROUNDS if participants < problem.n_clients else WHOLE_ROUNDS
    # not cut to the run's rounds: runs of other budgets share a compilation
    span = max(1, min(most, WHOLE_FLOATS // max(per_round, 1)))
    return RowPlan(names, measure, float(step), rounds, eval_every,
                   math.inf if rule.tol is None else rule.tol, limit,
                   max(span, min(eval_every, rounds)))


def evaluate_traced(plan: RowPlan, problem: Problem, x: Any, arrays: DataArrays,
                    previous: Any, has_previous: Any) -> tuple[Any, Any]:
    """``(values, measure)``: the row's metric values and its stopping measure's value
    (:class:`~fedcomp.runtime._stopping.StopMeasure`; ``previous``: the model of the row
    before, for ``relative_change``), and the certificate's objective, in one array."""
    jnp = require_jax().numpy
    columns = [TRACED_METRICS[name](problem, x, arrays, plan.step) for name in plan.metrics]
    if plan.measure is None:
        measure = jnp.float64(math.nan)
    elif plan.measure == "relative_change":
        measure = jnp.where(has_previous, _relative(_norm(x - previous), _norm(x)), jnp.inf)
    else:
        mapping = mapping_norm(problem, x, arrays, plan.step)
        measure = (mapping if plan.measure == "prox_grad_norm"
                   else _relative(plan.step * mapping, _norm(x)))
    certified = (objective(problem, x, arrays) if plan.measure is not None
                 else jnp.float64(math.nan))
    return jnp.stack([jnp.asarray(c, dtype=jnp.float64) for c in
                      (*columns, measure, certified)]), measure


def _above(now: Any, reference: Any) -> Any:
    """``now > reference`` beyond rounding (:class:`Certificate`'s rule, traced)."""
    jnp = require_jax().numpy
    scale = jnp.maximum(jnp.maximum(jnp.abs(reference), jnp.abs(now)), FLOOR)
    return now > reference + RISE_SLACK * scale


def stops_here(plan: RowPlan, tol: Any, measure: Any, now: Any, first: Any, previous: Any,
               has_previous: Any) -> Any:
    """Whether the row with ``measure`` and objective ``now`` ends the run (traced):
    ``tol`` met and certified (:meth:`Certificate.shortfall` empty), or the objective run
    away (:meth:`Certificate.runaway`); ``first`` and ``previous``: the certificate's
    objectives at the run's first row and the row before (``has_previous`` false at the
    first row)."""
    jnp = require_jax().numpy
    if plan.measure is None:
        return jnp.bool_(False)
    ran_away = jnp.isnan(now) | (jnp.isfinite(first) & jnp.isfinite(now)
                                 & (now - first > RUNAWAY * jnp.maximum(jnp.abs(first), FLOOR)))
    certified = jnp.isfinite(now) & ~_above(now, first) & ~(has_previous & _above(now, previous))
    return ran_away | ((measure <= tol) & certified)


class Certified(NamedTuple):
    """The certificate's and the measure's state a call starts from and hands on (traced)."""

    has_first: Any
    first: Any  # F at the run's first row
    has_current: Any
    current: Any  # F at the last row
    has_previous_model: Any
    previous_model: Any  # the last row's model (relative_change)


class Bounds(NamedTuple):
    """The run's constants a call takes as arguments (traced: a run with another ``tol``
    or budget uses the same compilation)."""

    rounds: Any
    eval_every: Any
    tol: Any
    limit: Any

    @classmethod
    def of(cls, plan: RowPlan) -> Bounds:
        jnp = require_jax().numpy
        return cls(jnp.int64(plan.rounds), jnp.int64(plan.eval_every), jnp.float64(plan.tol),
                   jnp.float64(plan.limit))


class Loop(NamedTuple):
    """The carry of a call's loop over rows (traced)."""

    round: Any  # the rounds run to
    end: Any  # the round the inner loop runs to (the next row's)
    server: Any
    clients: Any
    written: Any  # rows written
    ended: Any  # a stop, or a divergence
    diverged: Any
    sum_sq: Any  # Σ x² after the last round
    rounds_at: Any  # (max_rows,): each row's round
    values: Any  # (max_rows, width): each row's values
    bits: Any  # (span, 2): each round's wire bits down and up (traced WIRE_BITS sums)
    certified: Certified
    pending: Any  # the row of the call's first round is still to be written (row 0)


def rows_loop(engine: Any, plan: RowPlan, first: Any, until: Any, start_row: Any,
              server_state: Any, client_states: Any, ids: Any, weights: Any, pi: Any,
              arrays: DataArrays, certified: Certified, bounds: Bounds, *, low: int | None,
              start: int | None, stop: int | None) -> Loop:
    """Rounds ``first ..`` and their rows, up to the row of round ``until``; with
    ``start_row``, the row of round ``first`` (before any round) too (traced).

    ``ids``, ``weights`` and ``pi`` are every round's (``start:stop``, every client) or
    stacked per round, shape ``(span, B)``. Returns the final :class:`Loop`.
    """
    jax = require_jax()
    jnp = jax.numpy
    per_round = ids.ndim == 2
    problem = engine.problem

    def round_cond(loop: Loop) -> Any:
        return (loop.round < loop.end) & ~loop.diverged

    def one_round(loop: Loop) -> Loop:
        r = loop.round
        k = r - first
        who = (ids[k], weights[k], pi[k]) if per_round else (ids, weights, pi)
        server, clients, down, up, sum_sq = engine.round_traced(
            r, loop.server, loop.clients, *who, arrays, low=low, start=start, stop=stop)
        bits = loop.bits
        if down is not None or up is not None:  # else the trace knows them (no writes)
            bits = bits.at[k].set(jnp.stack([jnp.asarray(0.0 if b is None else b,
                                                         dtype=jnp.float64) for b in (down, up)]))
        sum_sq = _f64(sum_sq)  # the host's check reads it as a float
        bad = ~(jnp.isfinite(sum_sq) & (jnp.sqrt(sum_sq) <= bounds.limit))
        return loop._replace(round=r + 1, server=server, clients=clients, diverged=bad,
                             sum_sq=sum_sq, bits=bits)

    def row_cond(loop: Loop) -> Any:
        return ((loop.round < until) | loop.pending) & ~loop.ended

    def one_row(loop: Loop) -> Loop:
        r = loop.round
        due = jnp.minimum(bounds.rounds, (r // bounds.eval_every + 1) * bounds.eval_every)
        loop = jax.lax.while_loop(round_cond, one_round,
                                  loop._replace(end=jnp.where(loop.pending, r, due)))
        x = engine.algorithm.output(loop.server)
        cert = loop.certified
        row, measure = evaluate_traced(plan, problem, x, arrays, cert.previous_model,
                                       cert.has_previous_model)
        now = row[-1]
        first_f = jnp.where(cert.has_first, cert.first, now)
        ended = stops_here(plan, bounds.tol, measure, now, first_f, cert.current,
                           cert.has_current)
        ok = ~loop.diverged  # a round that diverged has no row
        j = loop.written
        cert = Certified(cert.has_first | ok, jnp.where(ok, first_f, cert.first),
                         cert.has_current | ok, jnp.where(ok, now, cert.current),
                         cert.has_previous_model | ok, jnp.where(ok, x, cert.previous_model))
        return loop._replace(
            written=j + ok.astype(j.dtype), ended=loop.diverged | (ok & ended),
            rounds_at=loop.rounds_at.at[j].set(jnp.where(ok, loop.round, loop.rounds_at[j])),
            values=loop.values.at[j].set(jnp.where(ok, row, loop.values[j])),
            certified=cert, pending=jnp.bool_(False))

    r = jnp.asarray(first, dtype=jnp.int64)
    loop = Loop(r, r, server_state, client_states,
                jnp.int64(0), jnp.bool_(False), jnp.bool_(False), jnp.float64(0.0),
                jnp.zeros(plan.max_rows, dtype=jnp.int64),
                jnp.zeros((plan.max_rows, plan.width), dtype=jnp.float64),
                jnp.zeros((plan.span, 2), dtype=jnp.float64), certified,
                jnp.asarray(start_row, dtype=bool))
    return jax.lax.while_loop(row_cond, one_row, loop)


class DeviceRows(NamedTuple):
    """What one whole-run call hands the driver."""

    server_state: Any
    done: int  # the rounds run so far (a diverged run: the round that diverged)
    rows: list[tuple[int, Any, dict[str, Any], float, float]]
    #: ``Σ x²`` of the round that diverged (``None``: none did)
    diverged: float | None


def _scaled(counters: Any, delta: Any, times: int) -> None:
    """``counters`` plus ``times`` rounds of ``delta`` (integer counts: exactly what
    adding it round by round gives)."""
    for name, value in delta.as_dict().items():
        if value:
            setattr(counters, name, getattr(counters, name) + value * times)


class WholeRun:
    """The whole-run capability of a :class:`~fedcomp.runtime._compiled.CompiledEngine`:
    rounds and rows in one compiled call (:func:`rows_loop`), under a
    part of its own (quiet: where it cannot be traced, the run's rows are the host's, by
    the driver's chunks)."""

    def __init__(self, engine: Any, plan: RowPlan, make_part: Callable[..., Any]) -> None:
        self.engine, self.plan = engine, plan
        #: the call and its fallbacks (``make_part(fn, part=..., static=...)`` makes it)
        self.part = make_part(self.traced, part="rows", static=("start", "stop"))
        #: one round's counts where every round adds the same (every client, static bits)
        self.deltas: dict[Any, Any] = {}

    def traced(self, first: Any, *args: Any, low: int | None, start: int | None,
               stop: int | None) -> Loop:
        return rows_loop(self.engine, self.plan, first, *args, low=low, start=start,
                         stop=stop)

    def last_row(self, first: int, until: int) -> int:
        """The row a call from round ``first`` ends at: ``until``, or the last row within
        its :attr:`RowPlan.span` rounds (at least the next row)."""
        plan = self.plan
        cap = first + plan.span
        if until <= cap:
            return until
        due = cap // plan.eval_every * plan.eval_every
        return due if due > first else min(plan.rounds,
                                           (first // plan.eval_every + 1) * plan.eval_every)

    def run(self, server_state: Any, first: int, until: int,
            participants_of: Callable[[int], np.ndarray], carried: tuple[Any, Any, Any],
            start_row: bool = False) -> DeviceRows | None:
        """Rounds ``first ..`` and their rows up to round ``until`` (a row) at most, with
        ``start_row`` the row of round ``first`` first; ``None`` where the call cannot run
        them (the driver's chunks, and its row on the host, then do)."""
        from ._compiled_fallback import EAGER
        from ._compiled_parts import participant_context

        engine, plan, part = self.engine, self.plan, self.part
        if part.eager or (part.low is not None and first < part.low):
            return None  # known before drawing the call's participants
        clients = engine.clients
        until = self.last_row(first, until)
        who = participants_of(first)
        if len(who) > clients.settings.block_size:
            return None
        groups: list[np.ndarray] | None = None
        start: int | None
        stop: int | None
        if len(who) == engine.n_clients:
            start, stop = 0, len(who)
            ids, weights, pi = engine.server.context(who, slice(start, stop))
        else:
            start = stop = None
            groups = [who] + [participants_of(r) for r in range(first + 1, until)]
            ids, weights, pi = participant_context(
                engine.problem, np.stack(groups + [who] * (plan.span - len(groups))))
        server_state = engine.place(server_state)
        out = self.part(first, until, start_row, server_state, clients.client_states, ids,
                        weights, pi, clients.arrays, self._certified(carried), Bounds.of(plan),
                        start=start, stop=stop)
        if out is EAGER:
            return None
        server_state, clients.client_states = out.server, out.clients
        done, written, bad = int(out.round), int(out.written), bool(out.diverged)  # waits
        rounds_at, values = np.asarray(out.rounds_at), np.asarray(out.values)
        bits, sum_sq = np.asarray(out.bits), out.sum_sq
        rows = []
        counted = first
        for j in range(written):
            round_ = int(rounds_at[j])
            self._count(counted, round_, groups, bits, first)
            counted = round_
            row = values[j]
            rows.append((round_, _copy(engine.counters),
                         {name: float(v) for name, v in zip(plan.metrics, row[:-2], strict=True)},
                         float(row[-2]), float(row[-1])))
        self._count(counted, done, groups, bits, first)
        return DeviceRows(server_state, done, rows, float(sum_sq) if bad else None)

    def _count(self, begin: int, end: int, groups: list[np.ndarray] | None, bits: np.ndarray,
               first: int) -> None:
        """The counts of rounds ``begin .. end - 1`` of a call from round ``first``, as a
        call per round adds them (:meth:`CompiledEngine._replay`)."""
        engine = self.engine
        low = self.part.low
        if begin >= end:
            return
        if groups is None:
            size = engine.n_clients
            key, block = (0, size, size), slice(0, size)
            traffic = engine.traffic[size]
            if traffic.bits_down is not None and traffic.bits_up is not None:
                delta = self.deltas.get(low)
                if delta is None:
                    from ..oracle import Counters

                    delta = self.deltas[low] = Counters()
                    engine._replay(size, 0, 0, key, block, first, low, into=delta)
                _scaled(engine.counters, delta, end - begin)
                return
        for r in range(begin, end):
            k = r - first
            if groups is None:
                engine._replay(size, bits[k, 0], bits[k, 1], key, block, r, low)
            else:
                who = groups[k]
                engine._replay(len(who), bits[k, 0], bits[k, 1],
                               (None, None, len(who), who.tobytes()), who, r, low)

    def _certified(self, carried: tuple[Any, Any, Any]) -> Certified:
        """The stop rule's state on the host (:meth:`StopRule.carried`) as the call's."""
        jnp = require_jax().numpy
        first, current, previous = carried
        return Certified(jnp.bool_(first is not None),
                         jnp.float64(math.nan if first is None else first),
                         jnp.bool_(current is not None),
                         jnp.float64(math.nan if current is None else current),
                         jnp.bool_(previous is not None),
                         self.engine.place(self.engine.problem.zeros() if previous is None
                                           else previous))


def _copy(counters: Any) -> Any:
    import copy

    return copy.copy(counters)
