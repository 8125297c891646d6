"""Stopping rules, callbacks, divergence as a status, and results as data frames (checkpoints:
test_checkpoint.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning as SklearnConvergenceWarning

import fedcomp
from fedcomp import (
    ALGORITHMS,
    ConvergenceWarning,
    EarlyStopping,
    RunOptions,
    load_results,
    simulate,
    solve_reference,
)
from fedcomp.algorithms import fedavg, make_algorithm, za1
from fedcomp.metrics import CSVLogger
from tests.conftest import make_problem


def test_a_run_stops_at_the_first_row_below_tol_and_is_near_the_solution():
    p = make_problem("least_squares")
    reference = solve_reference(p)
    # ZA1 converges to x* (FedAvg and FedMiD stop ~1e-2 away: the prox of an average is not
    # the average of the clients' proxes)
    run = simulate(za1(client_lr=0.5, local_steps=1), p, 5000, tol=1e-9, eval_every=10,
                   metrics=["optimality"], reference=reference)
    assert run.status == "converged" and run.n_rounds < 5000
    values = [row["relative_prox_step"] for row in run.history]
    assert values[-1] <= 1e-9 < min(values[:-1])  # the first row below tol, not later
    assert run.history[-1]["round"] == run.n_rounds
    # one prox-gradient step of relative length 1e-9 from x: a well-conditioned least squares
    # problem is then within a small multiple of that of x*
    assert run.history[-1]["optimality"] < 1e-7


@pytest.mark.parametrize("stop", ["prox_grad_norm", "relative_change"])
def test_every_stopping_measure_stops_a_run(stop):
    p = make_problem("logistic")
    run = simulate(za1(client_lr=0.5, local_steps=2), p, 3000, tol=1e-8, eval_every=5, metrics=[],
                   options=RunOptions(stop=stop))
    assert run.status == "converged" and run.history[-1][stop] <= 1e-8
    assert all(row[stop] > 1e-8 for row in run.history[:-1])


def test_a_budget_that_ends_first_warns_with_scikit_learns_class():
    p = make_problem("logistic")
    with pytest.warns(ConvergenceWarning, match=r"relative_prox_step = .* > tol = 1e-12 "
                                                r"after 5 rounds"):
        run = simulate(za1(client_lr=0.5, local_steps=2), p, 5, tol=1e-12, metrics=[])
    assert run.status == "completed" and run.n_rounds == 5
    assert ConvergenceWarning is SklearnConvergenceWarning
    with warnings.catch_warnings():  # no tol: no warning
        warnings.simplefilter("error")
        simulate(za1(client_lr=0.5, local_steps=2), p, 5, metrics=[])


@pytest.mark.parametrize("kwargs, match", [
    (dict(tol=-1.0), "tol must be"), (dict(tol=1e-3, stop="gap"), "stop must be one of"),
    (dict(on_divergence="ignore"), "on_divergence"), (dict(callbacks=[3]), "callbacks"),
])
def test_bad_stopping_arguments_name_the_value(kwargs, match):
    options = {k: kwargs.pop(k) for k in ("stop", "on_divergence", "callbacks") if k in kwargs}
    with pytest.raises(ValueError, match=match):
        simulate(fedavg(), make_problem("logistic"), 3, **kwargs,
                 options=RunOptions(**options))


def test_a_callback_stops_a_run_and_early_stopping_waits_its_patience():
    p = make_problem("logistic")
    seen = []

    def at_six(view):
        seen.append((view.round, view.algorithm, view.row["round"]))
        return view.round >= 6

    run = simulate(fedavg(0.5, 2), p, 20, eval_every=2, metrics=[],
                   options=RunOptions(callbacks=at_six))
    assert run.status == "stopped" and run.n_rounds == 6
    assert seen == [(r, "fedavg", r) for r in (0, 2, 4, 6)]
    # no row improves on round 0's objective by min_delta = 1
    stop = EarlyStopping("objective", patience=3, min_delta=1.0)
    run = simulate(fedavg(0.1, 1), p, 50, metrics=["objective"],
                   options=RunOptions(callbacks=[stop]))
    assert run.status == "stopped" and run.n_rounds == 3
    with pytest.raises(KeyError, match="add it to metrics"):
        simulate(fedavg(0.5, 1), p, 5, metrics=[],
                 options=RunOptions(callbacks=[EarlyStopping("accuracy")]))


def test_a_diverging_run_returns_its_rows_with_status_diverged():
    p = make_problem("least_squares")
    with pytest.warns(RuntimeWarning, match=r"in round \d+ .*status 'diverged'"):
        run = simulate(fedavg(client_lr=50.0, local_steps=2), p, 50, metrics=[],
                       options=RunOptions(max_norm=1e6))
    assert run.status == "diverged" and 0 < run.n_rounds < 50
    assert [row["round"] for row in run.history] == list(range(run.n_rounds))


def test_to_frame_round_trips_results_csv(tmp_path):
    p = make_problem("logistic")
    logger = CSVLogger(tmp_path / "results.csv")
    run = simulate(make_algorithm("fedmid", client_lr=0.3, local_steps=2), p, 6, tol=1e-3,
                   metrics=["objective", "optimality", "nnz"],
                   options=RunOptions(logger=logger, tags={"algorithm": "fedmid", "seed": 0}))
    logger.close()
    frame = run.to_frame()
    assert list(frame.columns)[:3] == ["algorithm", "seed", "round"]
    back = load_results(tmp_path)  # the directory, or the file itself
    assert back.equals(load_results(tmp_path / "results.csv"))
    assert list(back.columns) == list(frame.columns)
    for column in frame.columns:  # the same values, exactly (optimality is NaN here)
        np.testing.assert_array_equal(back[column].to_numpy(), frame[column].to_numpy())
    with pytest.raises(FileNotFoundError, match="fedcomp run --out DIR"):
        load_results(tmp_path / "elsewhere")


def test_every_registered_algorithm_factory_is_at_the_top_level():
    assert [name for name in ALGORITHMS if not callable(getattr(fedcomp, name, None))] == []


def test_the_asynchronous_and_gossip_runners_stop_and_return_as_simulate_does():
    from fedcomp.algorithms import async_feddr, dfedda_gt
    from fedcomp.runtime import simulate_async, simulate_decentralized
    from fedcomp.topology import ring

    p = make_problem("least_squares")
    # asyncFedDR's steps shrink slowly here (5e-3 after 4000 steps): a loose tolerance
    run = simulate_async(async_feddr(eta=1.0, alpha=1.0), p, 4000, tol=2e-2, eval_every=7,
                         metrics=[])
    assert run.status == "converged" and run.n_rounds < 4000
    assert run.n_rounds == run.history[-1]["round"] == len(run.order) == len(run.delays)
    assert run.history[-1]["relative_prox_step"] <= 2e-2
    stopped = simulate_async(async_feddr(eta=1.0, alpha=1.0), p, 100, metrics=[],
                             eval_every=5, callbacks=lambda view: view.round >= 20)
    assert stopped.status == "stopped" and stopped.n_rounds == 20
    # the node average of DFedDA-GT stops at its floor (4e-3 here): a tolerance above it
    gossip = simulate_decentralized(dfedda_gt(0.2, 2), p, ring(p.n_clients), 3000,
                                    tol=1e-2, eval_every=5, metrics=[])
    assert gossip.status == "converged" and gossip.n_rounds < 3000
    assert gossip.history[-1]["relative_prox_step"] <= 1e-2 < gossip.history[-2][
        "relative_prox_step"]
    with pytest.warns(RuntimeWarning, match="status 'diverged'"):
        blown = simulate_decentralized(dfedda_gt(50.0, 2), p, ring(p.n_clients), 200,
                                       metrics=[], max_norm=1e6)
    assert blown.status == "diverged" and blown.history


def test_a_config_stop_ends_every_run_at_its_tolerance(tmp_path):
    from fedcomp.cli import main

    out = tmp_path / "run"
    code = main(["run", "seed000", "--set", "rounds=400", "--set", "eval_every=10",
                 "--set", "data.n_clients=5", "--set", "data.samples_per_client=50",
                 "--set", 'batch_size=["full"]', "--set", "stop.tol=1e-6", "--seeds", "0",
                 "--out", str(out), "--quiet"])
    assert code == 0
    frame = load_results(out)
    za1_rows = frame[frame["method"] == "za1"]
    assert za1_rows["round"].max() < 400  # ZA1 converges: its run ended at tol
    assert za1_rows["relative_prox_step"].iloc[-1] <= 1e-6
    assert main(["run", "seed000", "--set", "stop.tol=-1", "--out", str(tmp_path / "x"),
                 "--dry-run"]) == 2
