"""The simulator: sampling schedules, seeds, counters, loggers, failure modes.

Block-size invariance, backends and dtypes of every registered algorithm: test_contract.py.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from fedcomp import NonFiniteError, RunOptions, simulate
from fedcomp.algorithms import fedavg, fedmid, make_algorithm, za1
from fedcomp.metrics import CSVLogger, JSONLLogger, MemoryLogger
from fedcomp.runtime import auto_block_size
from tests.conftest import make_problem


def test_an_algorithm_whose_init_needs_the_problem_says_prepare():
    with pytest.raises(RuntimeError, match=r"za1: prepare it .*setup_context"):
        za1().init(np.zeros(3), 2)


@pytest.mark.parametrize("client_block", [1, 4, "all"])
def test_a_sampling_schedule_is_read_as_a_set_of_clients(client_block):
    # [0, 1, 5, 3] once became slice(0, 4): client 2 ran in client 5's place
    p = make_problem("logistic", n_clients=7)
    schedule = [[0, 1, 5, 3], [6, 2], [4, 0, 6, 5, 1]]
    runs = [simulate(make_algorithm("scaffold", client_lr=0.5, local_steps=3), p, 3, seed=4,
                     metrics=[],
                     options=RunOptions(sampling=lambda r, order=order: order(schedule[r]),
                                        client_block=client_block))
            for order in (sorted, list)]
    np.testing.assert_array_equal(runs[1].x, runs[0].x)
    for a, b in zip(runs[1].client_states, runs[0].client_states, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_full_participation_algorithm_takes_a_schedule_of_every_client():
    p = make_problem("logistic", n_clients=5)
    every = simulate(za1(0.5, 3), p, 3, metrics=[],
                     options=RunOptions(sampling=lambda r: np.arange(5)[::-1]))
    np.testing.assert_array_equal(every.x, simulate(za1(0.5, 3), p, 3, metrics=[]).x)
    with pytest.raises(ValueError, match="za1 is defined for full participation only.*got 4 of 5"):
        simulate(za1(0.5, 3), p, 3, metrics=[],
                 options=RunOptions(sampling=lambda r: np.arange(5 - r)))


@pytest.mark.parametrize("ids", [[0.5, 2], [1, 1], [7], [], ["a"]])
def test_a_bad_sampling_schedule_names_the_round_and_the_ids(ids):
    p = make_problem("logistic", n_clients=7)
    with pytest.raises(ValueError, match=r"sampling\(0\) must return distinct integer client ids "
                                         r"in 0\.\.6 \(got"):
        simulate(fedavg(0.5, 3), p, 2, metrics=[], options=RunOptions(sampling=lambda r: ids))


def test_seed_changes_minibatches_and_sampling():
    p = make_problem("logistic")
    a = simulate(fedavg(0.5, 3), p, 3, batch_size=2, clients_per_round=3, seed=0, metrics=[])
    b = simulate(fedavg(0.5, 3), p, 3, batch_size=2, clients_per_round=3, seed=1, metrics=[])
    c = simulate(fedavg(0.5, 3), p, 3, batch_size=2, clients_per_round=3, seed=0, metrics=[])
    assert np.abs(a.x - b.x).max() > 1e-6
    np.testing.assert_array_equal(a.x, c.x)


def test_counters_count_what_the_algorithms_do():
    p = make_problem("logistic", n_clients=7)
    d = p.param_shape[0]
    run = simulate(za1(0.5, 4), p, 3, metrics=[], batch_size=5)
    c = run.counters
    assert c.grad_evals == 3 * 7 * 4
    assert c.sample_grads == 3 * 7 * 4 * 5
    assert c.prox_evals_client == 3 * 7 * 5  # P(x̄) + τ local proxes
    assert c.prox_evals_server == 3
    skip = simulate(za1(0.5, 4, final_prox=False), p, 3, metrics=[], batch_size=5)
    assert skip.counters.prox_evals_client == 3 * 7 * 4  # without the unused z_τ
    np.testing.assert_array_equal(skip.x, run.x)
    assert c.floats_up == c.floats_down == 3 * 7 * d
    run = simulate(fedmid(0.5, 2), p, 2, clients_per_round=3, metrics=[])
    assert run.counters.grad_evals == 2 * 3 * 2
    assert run.counters.sample_grads == sum(
        2 * int(p.data.counts[s].sum()) for s in _participants(2, 7, 3))
    assert run.counters.floats_up == 2 * 3 * d


def _participants(rounds, n, k, seed=0):
    from fedcomp._random import sample_clients

    return [sample_clients(seed, r, n, k) for r in range(rounds)]


def test_history_rows_and_eval_cadence():
    p = make_problem("logistic")
    logger = MemoryLogger()
    run = simulate(fedavg(0.5, 2), p, 7, eval_every=3,
                   metrics=["objective", "nnz", "prox_grad_norm"],
                   options=RunOptions(logger=logger, tags={"algorithm": "x"}))
    assert [r["round"] for r in run.history] == [0, 3, 6, 7]
    assert logger.rows == run.history
    row = run.history[-1]
    for key in ("algorithm", "grad_evals", "floats_up", "wall_s", "objective", "nnz",
                "prox_grad_norm"):
        assert key in row
    assert run.history[-1]["objective"] < run.history[0]["objective"]


def test_file_loggers_write_rows_as_they_come(tmp_path):
    p = make_problem("logistic")
    csv_logger = CSVLogger(tmp_path / "r.csv", columns=["round", "objective", "grad_evals"])
    jsonl = JSONLLogger(tmp_path / "r.jsonl")

    class Both:
        def log(self, row):
            csv_logger.log(row)
            jsonl.log(row)
            # each row is on disk before the next round runs
            assert (tmp_path / "r.csv").read_text().count("\n") == row["round"] + 2  # + header

    simulate(fedavg(0.5, 2), p, 4, metrics=["objective", "optimality"],
             options=RunOptions(logger=Both()))
    csv_logger.close()
    jsonl.close()
    rows = list(csv.DictReader((tmp_path / "r.csv").open()))
    assert [int(r["round"]) for r in rows] == [0, 1, 2, 3, 4]
    lines = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    assert lines[-1]["round"] == 4 and lines[-1]["optimality"] is None  # NaN → null


def test_divergence_stops_with_a_clear_error_and_keeps_rows():
    p = make_problem("least_squares")
    logger = MemoryLogger()
    with pytest.raises(NonFiniteError, match=r"round \d+.*smaller step"):
        simulate(fedavg(client_lr=1e4, local_steps=5), p, 200, metrics=[],
                 options=RunOptions(logger=logger, on_divergence="raise"))
    assert logger.rows and logger.rows[0]["round"] == 0


@pytest.mark.parametrize("kwargs, match", [
    (dict(rounds=-1), "rounds"),
    (dict(rounds=2, clients_per_round=0), "clients_per_round"),
    (dict(rounds=2, clients_per_round=100), "clients_per_round"),
    (dict(rounds=2, batch_size=0), "batch_size"),
    (dict(rounds=2, eval_every=0), "eval_every"),
    (dict(rounds=2, seed=-1), r"seed must be a nonnegative integer \(got seed=-1\)"),
    (dict(rounds=2, seed=1.5), "seed=1.5"),
    (dict(rounds=2, metrics=["accuracy"]), "unknown metric"),
])
def test_bad_run_arguments_raise(kwargs, match):
    p = make_problem("logistic")
    with pytest.raises(ValueError, match=match):
        simulate(fedavg(), p, **kwargs)


def test_the_cache_rule_targets_a_few_megabytes(monkeypatch):
    """The cache-size rule (``FEDCOMP_BLOCKS=rule``; the measured blocks:
    tests/engines/test_blocks.py). A small population is one block either way."""
    from fedcomp.runtime import _clients

    cache_block_size = _clients.cache_block_size
    p = make_problem("logistic", n_clients=7)
    per_client = p.data.max_samples * p.data.feature_shape[0] * 8
    assert auto_block_size(p) == 7  # small clients: one block
    monkeypatch.setattr(_clients, "BLOCK_BYTES", 3 * per_client)
    assert auto_block_size(p) == 7  # a population under 1 MiB is never cut
    assert cache_block_size(p) == 3
    assert cache_block_size(p, batch_size=1) == 7  # a minibatch is the working set
    monkeypatch.setattr(_clients, "BLOCK_BYTES", per_client // 2)
    assert cache_block_size(p) == 1
    monkeypatch.setattr(_clients, "BLOCK_BYTES", 1 << 30)
    monkeypatch.setattr(_clients, "_cache_bytes", lambda: 8 * per_client)
    assert cache_block_size(p) == 2  # a quarter of the last-level cache


def test_progress_line_on_request(capsys):
    p = make_problem("logistic")
    simulate(fedavg(0.5, 2), p, 3, metrics=[],
             options=RunOptions(progress=True, tags={"algorithm": "fa"}))
    err = capsys.readouterr().err
    assert "fa: round 3/3" in err and "rounds/s" in err and "ETA" in err
    simulate(fedavg(0.5, 2), p, 3, metrics=[], options=RunOptions(progress=False))
    assert capsys.readouterr().err == ""


def test_norm_limit_catches_divergence_before_overflow():
    p = make_problem("least_squares")
    alg = fedavg(client_lr=50.0, local_steps=2)
    with pytest.raises(NonFiniteError, match=r"diverged \(norm .* > max_norm 1e\+06\)"):
        simulate(alg, p, 50, metrics=[], options=RunOptions(max_norm=1e6, on_divergence="raise"))
    with pytest.raises(NonFiniteError, match="non-finite"):
        simulate(alg, p, 2000, metrics=[],
                 options=RunOptions(max_norm=None, on_divergence="raise"))
    with pytest.raises(ValueError, match="max_norm"):
        simulate(alg, p, 1, options=RunOptions(max_norm=-1.0))


def test_recorder_writes_the_rows_of_every_runner_in_one_column_order():
    from fedcomp.oracle import Counters
    from fedcomp.runtime._recording import Recorder

    p = make_problem("logistic", n_clients=3)
    logger = MemoryLogger()
    recorder = Recorder(p, 5, eval_every=2, metrics=["nnz"], reference=None, logger=logger,
                        tags={"algorithm": "a", "round": -1}, progress=False, label="x")
    assert [r for r in range(6) if recorder.due(r)] == [0, 2, 4, 5]
    row = recorder.record(2, np.zeros(p.param_shape), Counters(), 0.5, sim_time=1.0)
    # a tag named like a column keeps its place and takes the column's value
    assert list(row) == ["algorithm", "round", *Counters().as_dict(), "wall_s", "sim_time", "nnz"]
    assert (row["round"], row["wall_s"], row["nnz"]) == (2, 0.5, 0)
    assert recorder.history == logger.rows == [row]
    own = Recorder(p, 1, eval_every=1, metrics=[], reference=None, logger=None, tags=None,
                   progress=False, label="x", evaluation=lambda model: {"mine": 7})
    assert own.record(1, np.zeros(p.param_shape), Counters(), 0.0)["mine"] == 7


def test_the_three_runners_share_the_row_head():
    from fedcomp.algorithms import async_feddr, dfedda_gt
    from fedcomp.runtime import simulate_async, simulate_decentralized
    from fedcomp.topology import ring

    p = make_problem("least_squares", n_clients=4)
    kw = dict(eval_every=2, metrics=["nnz"], tags={"algorithm": "t"}, progress=False)
    options = RunOptions(tags={"algorithm": "t"})
    runs = [simulate(fedavg(client_lr=0.1), p, 3, eval_every=2, metrics=["nnz"],
                     options=options),
            simulate_async(async_feddr(eta=0.5, local_solver="exact"), p, 3, **kw),
            simulate_decentralized(dfedda_gt(client_lr=0.05, p=2.0), p, ring(4), 3, **kw)]
    head = ["algorithm", "round", *runs[0].counters.as_dict(), "wall_s"]
    for run in runs:
        assert [row["round"] for row in run.history] == [0, 2, 3]
        assert list(run.history[-1])[:len(head)] == head
        assert "nnz" in run.history[-1]


@pytest.mark.parametrize("library", ["numpy", "torch", "array_api_strict"])
def test_blocks_stacked_as_they_come_give_the_one_block_result(library):
    """Block results are copied into one array per field as they arrive (``_Stacked``):
    bit for bit what one block of every client gives, on every namespace that writes in
    place, with partial participation too (the states scattered back)."""
    from fedcomp import Problem
    from fedcomp._array import to_numpy

    problem = make_problem("logistic", n_clients=7)
    if library == "torch":
        torch = pytest.importorskip("torch")
        like = torch.zeros(0, dtype=torch.float64)
    elif library == "array_api_strict":
        xps = pytest.importorskip("array_api_strict")
        like = xps.zeros(0, dtype=xps.float64)
    else:
        like = np.zeros(0)
    problem = Problem(problem.loss, problem.regularizer, problem.data.to(like),
                      weighting=problem.weighting)
    for cpr in (None, 5):
        alg = za1(client_lr=0.5, local_steps=3) if cpr is None else fedmid(client_lr=0.5)
        runs = [simulate(alg, problem, 3, clients_per_round=cpr, seed=3, metrics=[],
                         options=RunOptions(client_block=block)) for block in ("all", 2, 3)]
        for run in runs[1:]:
            np.testing.assert_array_equal(to_numpy(run.x), to_numpy(runs[0].x))
            for a, b in zip(run.client_states, runs[0].client_states, strict=True):
                np.testing.assert_array_equal(to_numpy(a), to_numpy(b))
