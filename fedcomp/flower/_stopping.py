"""fedcomp's stopping rules as Flower's ``should_stop``: on Flower 1.43, and the same on 1.42.

Flower 1.43 makes ``num_rounds`` a maximum. Its ``Strategy.start`` (flwr-nightly
1.43.0.dev20261026, ``flwr/serverapp/strategy/strategy.py``) reads::

    def start(self, grid, initial_arrays, num_rounds=3, timeout=3600, train_config=None,
              evaluate_config=None, evaluate_fn=None,
              should_stop: Callable[[int, Result], bool] | None = None) -> Result:
        ...
        for current_round in range(1, num_rounds + 1):
            ...  # train, evaluate (ClientApp side), evaluate_fn (ServerApp side)
            if should_stop is not None and should_stop(current_round, result):
                break

so the predicate sees the round and the accumulated ``Result`` after the round's
centralized evaluation, never for round 0. Flower 1.42's ``start`` has no such parameter:
there :class:`StopWatch` gives the same run, round for round. It calls the predicate at the
same place (a wrapper of ``evaluate_fn``, the last step of 1.42's round, with a ``Result``
holding what Flower's holds) and, once it says stop, the strategy's remaining rounds are
empty: no message is sent, nothing is aggregated or evaluated, so the ``Result`` Flower
returns ends at the same round as on 1.43. Which path runs is read from ``start``'s
signature (:func:`flower_stops`), never from a version string.

:class:`StoppingRule` is the predicate built from fedcomp's own rule
(:class:`fedcomp.runtime.StopRule`: ``tol``, the callbacks such as
:class:`~fedcomp.runtime.EarlyStopping`, the objective's certificate), applied, as
:func:`fedcomp.simulate` applies it, at each evaluation row.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from logging import INFO
from typing import Any, cast

from flwr.app import ArrayRecord, MetricRecord
from flwr.common.logger import log
from flwr.serverapp.strategy import Result

from ..runtime._stopping import NonFiniteError, RunView, StopRule, check_stop
from ._server import FlowerRunError

#: Flower's ``should_stop``: the round just ended and the accumulated ``Result``
ShouldStop = Callable[[int, Result], bool]


def flower_stops(start: Callable[..., Any]) -> bool:
    """Whether Flower's ``start`` takes ``should_stop`` itself (1.43 on), by its signature.

    Examples
    --------
    >>> def start(grid, initial_arrays, num_rounds=3, should_stop=None): ...
    >>> flower_stops(start), flower_stops(lambda grid, initial_arrays, num_rounds=3: None)
    (True, False)
    """
    return "should_stop" in inspect.signature(start).parameters


def round_row(result: Result, server_round: int) -> dict[str, Any]:
    """One row of the round's metrics in ``result``: the centralized evaluation's, then the
    strategy's counters and its federated evaluation (fedcomp's own names win)."""
    row: dict[str, Any] = {}
    for records in (result.evaluate_metrics_serverapp, result.train_metrics_clientapp,
                    result.evaluate_metrics_clientapp):
        row.update(dict(records.get(server_round, {})))
    return row


class StoppingRule:
    """fedcomp's stopping rule of one :class:`~fedcomp.flower.Strategy` run as Flower's
    ``should_stop`` (built by :meth:`fedcomp.flower.Strategy.stopping`; one per run).

    Called after every round, it applies the rule at the strategy's evaluation rows (every
    ``evaluate_every`` rounds, where the nodes report ``F``), as :func:`fedcomp.simulate`
    does at its ``eval_every`` rows: ``tol`` on ``relative_change`` certified by the
    objective, then the callbacks on a :class:`~fedcomp.runtime.RunView` of the row (its
    ``client_states`` are ``None``: they stay on the nodes). ``status`` is the run's, as
    :func:`~fedcomp.simulate`'s: ``"converged"``, ``"stopped"`` or ``"completed"``.
    An objective that runs away stops the run with a :class:`FlowerRunError`.
    """

    def __init__(self, strategy: Any, tol: float | None = None,
                 stop: str = "relative_change", callbacks: Any = None) -> None:
        check_stop(stop)
        if tol is not None and stop != "relative_change":
            raise ValueError(
                f"stop={stop!r} needs the gradient of f at the model, one more round the "
                "Strategy does not run; use stop='relative_change' (the model's relative "
                "change between evaluation rows), or an EarlyStopping callback on 'objective'")
        if not strategy.evaluate_every:
            raise ValueError(
                "a stopping rule is applied at the evaluation rows, where the nodes report F: "
                "build the Strategy with evaluate_every=k (the rule is checked every k rounds)")
        self.strategy = strategy
        # no Problem on the server: relative_change needs none, F comes from the row
        self.rule = StopRule(cast(Any, None), tol, stop, callbacks, "raise",
                             "lower the step size")
        self.history: list[dict[str, Any]] = []
        self.stopped_at: int | None = None

    @property
    def status(self) -> str:
        return self.rule.status

    def __call__(self, server_round: int, result: Result) -> bool:
        if not self.strategy._evaluates(server_round):
            return False
        row = round_row(result, server_round)
        model = result.arrays.to_numpy_ndarrays()[0]
        row.update(self.rule.columns(model))
        self.history.append(row)
        strategy = self.strategy
        view = RunView(server_round, row, model, strategy.server_state, None,
                       strategy.counters, self.history, strategy.algorithm.name)
        try:
            stop = self.rule.after_row(view, row.get("objective"))
        except NonFiniteError as exc:
            raise FlowerRunError(str(exc)) from exc
        if stop:
            self.stopped_at = server_round
        return stop

    def finish(self, rounds: int) -> None:
        """The budget's ``ConvergenceWarning`` when ``tol`` was not reached in ``rounds``."""
        self.rule.finish(f"fedcomp.flower.Strategy({self.strategy.algorithm.name})", rounds)


class StopWatch:
    """``should_stop`` on a Flower whose ``start`` lacks it (1.42): see the module docstring.

    The strategy's hooks ask :attr:`stopped` (then they send and aggregate nothing) and
    record what they return (:meth:`trained`, :meth:`evaluated`); Flower calls
    :meth:`evaluate` in ``evaluate_fn``'s place at the end of every round.
    """

    def __init__(self, should_stop: ShouldStop | None = None,
                 evaluate_fn: Callable[[int, ArrayRecord], MetricRecord | None] | None = None,
                 initial_arrays: ArrayRecord | None = None) -> None:
        self.should_stop, self.evaluate_fn = should_stop, evaluate_fn
        self.result = Result(arrays=initial_arrays if initial_arrays is not None
                             else ArrayRecord())
        self.stopped_after: int | None = None

    @property
    def stopped(self) -> bool:
        return self.stopped_after is not None

    def trained(self, server_round: int, arrays: ArrayRecord, metrics: MetricRecord
                ) -> tuple[ArrayRecord, MetricRecord]:
        if self.should_stop is not None:
            self.result.arrays = arrays
            self.result.train_metrics_clientapp[server_round] = metrics
        return arrays, metrics

    def evaluated(self, server_round: int, metrics: MetricRecord | None) -> MetricRecord | None:
        if self.should_stop is not None and metrics is not None:
            self.result.evaluate_metrics_clientapp[server_round] = metrics
        return metrics

    def evaluate(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        """The user's ``evaluate_fn`` (if any), then ``should_stop``, as 1.43 orders them."""
        if self.stopped:
            return None
        metrics = None if self.evaluate_fn is None else self.evaluate_fn(server_round, arrays)
        if metrics is not None:
            self.result.evaluate_metrics_serverapp[server_round] = metrics
        if server_round >= 1 and self.should_stop is not None \
                and self.should_stop(server_round, self.result):
            self.stopped_after = server_round
            log(INFO, "fedcomp: should_stop ended the run after round %d; this Flower's "
                "start has no should_stop, so its remaining rounds send nothing", server_round)
        return metrics


__all__ = ["ShouldStop", "StopWatch", "StoppingRule", "flower_stops", "round_row"]
