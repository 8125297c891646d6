"""Whole runs compiled (issue 45): with the data on jax arrays, the rounds *and* the
evaluation rows — their metrics, the stopping measure of ``tol`` and its certificate, the
divergence check — run inside the compiled call, a ``lax.while_loop`` that returns to the
host only where the host must see a row (a callback, a checkpoint) or a call's rounds run
out. The rows (round, counters, metric values), the final iterates, ``n_rounds`` and
``status`` equal the row-by-row run's, whose rows are computed on the host between the
compiled chunks of rounds (``_compiled.WHOLE_RUNS = False``): to 1e-12, counters exactly.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from fedcomp import RunOptions, simulate
from fedcomp.algorithms import fedavg, za1
from fedcomp.runtime import _compiled, _compiled_run, jax_like
from fedcomp.runtime._compiled_run import WholeRun
from tests.conftest import make_problem
from tests.core.test_contract import on_backend
from tests.engines.test_jax_engine import assert_same_run, relative_error

jax = pytest.importorskip("jax")
LIKE = jax_like()
METRICS = ["objective", "nnz", "prox_grad_norm"]
ALG = za1(client_lr=0.4, local_steps=2)


@pytest.fixture(scope="module")
def lstsq():
    return on_backend(make_problem("least_squares", n_clients=6, d=5), LIKE)


@pytest.fixture
def calls(monkeypatch):
    """The whole-run calls of a run: ``(first round, rounds run, rows)`` each."""
    log: list[tuple[int, int, int]] = []
    run = WholeRun.run

    def logged(self, server_state, first, *args):
        out = run(self, server_state, first, *args)
        if out is not None:
            log.append((first, out.done - first, len(out.rows)))
        return out

    monkeypatch.setattr(WholeRun, "run", logged)
    return log


def both(monkeypatch, alg, problem, rounds, **kwargs):
    """``(whole run, row-by-row run)`` of the same simulation, each run's warnings kept
    in ``run_warnings``."""
    runs = []
    for whole in (True, False):
        monkeypatch.setattr(_compiled, "WHOLE_RUNS", whole)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = simulate(alg, problem, rounds, **kwargs)
        runs.append((run, [str(w.message) for w in caught]))
    return runs


def assert_same_rows(got, want):
    """Every row's round and counters equal, its float columns to 1e-12 of the column's
    largest finite value in the run (a stopping measure near convergence is a difference
    ``x - prox(x - s grad f(x))`` of nearly equal numbers: the gradient fused into the
    compiled call differs from the host's by an ulp or two, 1e-12 of ``x``, not of the
    difference), and ``status`` and ``n_rounds`` equal."""
    assert len(got.history) == len(want.history)
    scale = {key: max((abs(row[key]) for row in want.history if isinstance(row[key], float)
                       and math.isfinite(row[key])), default=0.0)
             for key in want.history[0]}
    for a, b in zip(got.history, want.history, strict=True):
        assert list(a) == list(b)  # the same columns in the same order
        for key, value in b.items():
            if key == "wall_s":
                continue
            if isinstance(value, float) and math.isfinite(value):
                assert math.isclose(a[key], value, rel_tol=1e-12,
                                    abs_tol=1e-12 * scale[key]), (key, a[key], value)
            elif isinstance(value, float):
                assert str(a[key]) == str(value), key  # nan, inf
            else:
                assert a[key] == value, key  # round and counters exactly
    assert (got.status, got.n_rounds) == (want.status, want.n_rounds)


def assert_equal_runs(runs):
    (got, got_warned), (want, want_warned) = runs
    assert_same_rows(got, want)
    assert_same_run(got, want)
    assert got_warned == want_warned


def test_za1_converged_by_tol_in_one_call(monkeypatch, lstsq, calls):
    runs = both(monkeypatch, ALG, lstsq, 2000, eval_every=5,
                metrics=METRICS, tol=1e-7, seed=1)
    assert runs[0][0].status == "converged" and runs[0][0].n_rounds < 2000
    assert_equal_runs(runs)
    # every round and row (row 0 too) in one call, which stopped at tol
    assert calls == [(0, runs[0][0].n_rounds, len(runs[0][0].history))]


def test_a_run_that_hits_its_rounds(monkeypatch, lstsq, calls):
    runs = both(monkeypatch, ALG, lstsq, 23, eval_every=5,
                metrics=["objective", "optimality", "sparsity"], tol=1e-14,
                options=RunOptions(stop="relative_change"))
    got = runs[0][0]
    assert (got.status, got.n_rounds) == ("completed", 23)
    assert [row["round"] for row in got.history] == [0, 5, 10, 15, 20, 23]
    assert any("has not converged" in m for m in runs[0][1])  # the budget's warning
    assert_equal_runs(runs)
    assert calls == [(0, 23, 6)]


def test_a_diverging_run_stops_at_the_same_round(monkeypatch, lstsq, calls):
    alg = fedavg(client_lr=5.0, local_steps=1)  # the norm grows ~1.4x every 2 rounds
    kwargs = dict(eval_every=5, metrics=["objective"], options=RunOptions(max_norm=50.0))
    (got, got_warned), (want, _) = both(monkeypatch, alg, lstsq, 60, **kwargs)
    assert got.status == "diverged" and got.n_rounds % 5 not in (0, 1), got.n_rounds
    assert_same_rows(got, want)
    assert any(f"in round {got.n_rounds}" in m for m in got_warned)
    # the whole run stops at the round that diverged, as NumPy's run does (the
    # row-by-row jax run ends the call of rounds it was in)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        numpy_run = simulate(alg, make_problem("least_squares", n_clients=6, d=5), 60,
                             **kwargs)
    assert numpy_run.n_rounds == got.n_rounds
    assert relative_error(got.x, numpy_run.x) <= 1e-12
    assert len(calls) == 1
    # an objective that runs away (the certificate of tol, applied on the device) is a
    # divergence at its row
    (got, got_warned), (want, _) = both(monkeypatch, alg, lstsq, 200, eval_every=5,
                                        metrics=["objective"], tol=1e-9)
    assert (got.status, got.n_rounds) == ("diverged", 10)
    assert any("ran away" in m for m in got_warned)
    assert_same_rows(got, want)


def test_sampled_clients_and_minibatches(monkeypatch, lstsq, calls):
    runs = both(monkeypatch, fedavg(client_lr=0.2, local_steps=2), lstsq, 40, eval_every=4,
                metrics=METRICS, tol=1e-9, seed=3, clients_per_round=3, batch_size=2)
    assert_equal_runs(runs)
    assert calls and calls[0][0] == 0


def test_minibatches_every_client(monkeypatch, lstsq, calls):
    runs = both(monkeypatch, ALG, lstsq, 30, eval_every=3,
                metrics=["objective", "training_loss"], seed=4, batch_size=3)
    assert_equal_runs(runs)
    assert calls == [(0, 30, 11)]


def test_a_callback_sees_every_row_and_stops_the_run(monkeypatch, lstsq, calls):
    seen: dict[bool, list[tuple[int, float, float]]] = {True: [], False: []}

    def watch(view):
        out = _compiled.WHOLE_RUNS
        x = np.asarray(view.model)
        seen[out].append((view.round, view.row["objective"], float(np.sum(x * x))))
        return view.round >= 12

    runs = both(monkeypatch, ALG, lstsq, 40, eval_every=4,
                metrics=["objective"], tol=1e-12, options=RunOptions(callbacks=[watch]))
    assert runs[0][0].status == "stopped" and runs[0][0].n_rounds == 12
    assert_equal_runs(runs)
    # a call per row: the callback sees each row's own model
    assert calls == [(0, 0, 1), (0, 4, 1), (4, 4, 1), (8, 4, 1)]
    for a, b in zip(seen[True], seen[False], strict=True):
        assert a[0] == b[0] and a[1:] == pytest.approx(b[1:], rel=1e-12)


def test_a_checkpoint_in_the_middle_and_calls_of_a_bounded_span(monkeypatch, lstsq, calls,
                                                                 tmp_path):
    from fedcomp.runtime import Checkpoint

    monkeypatch.setattr(_compiled_run, "WHOLE_ROUNDS", 8)  # calls of at most 8 rounds
    alg = ALG
    runs = both(monkeypatch, alg, lstsq, 20, eval_every=3, metrics=["objective"])
    assert_equal_runs(runs)
    assert [c[:2] for c in calls] == [(0, 6), (6, 6), (12, 8)]  # each ends at a row
    calls.clear()
    path = tmp_path / "run.ckpt"
    runs = both(monkeypatch, alg, lstsq, 9, eval_every=3, metrics=["objective"],
                options=RunOptions(callbacks=[Checkpoint(path)]))
    assert_equal_runs(runs)
    assert calls == [(0, 0, 1), (0, 3, 1), (3, 3, 1), (6, 3, 1)]
    resumed = simulate(alg, lstsq, 15, eval_every=3, metrics=["objective"],
                       options=RunOptions(resume_from=path))
    monkeypatch.setattr(_compiled, "WHOLE_RUNS", False)
    straight = simulate(alg, lstsq, 15, eval_every=3, metrics=["objective"])
    assert_same_rows(resumed, straight)


def test_a_metric_the_trace_cannot_compute_keeps_the_rows_on_the_host(lstsq, calls):
    def spread(problem, x, **_):
        return float(np.ptp(np.asarray(x)))

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # chosen once, without a warning
        run = simulate(ALG, lstsq, 10, eval_every=5,
                       metrics=["objective", spread])
    assert calls == [] and [row["round"] for row in run.history] == [0, 5, 10]
    assert "spread" in run.history[-1]


def test_rows_whose_trace_fails_fall_back_to_the_host_quietly(monkeypatch, lstsq, calls):
    def host_only(problem, x, arrays, step):
        return float(x[0])  # a host value: tracing the call fails

    monkeypatch.setitem(_compiled_run.TRACED_METRICS, "nnz", host_only)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run = simulate(ALG, lstsq, 10, eval_every=5, metrics=["nnz"])
    monkeypatch.setattr(_compiled, "WHOLE_RUNS", False)
    assert calls == []
    assert_same_rows(run, simulate(ALG, lstsq, 10, eval_every=5, metrics=["nnz"]))
