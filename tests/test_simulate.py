"""The simulator: block-size invariance, backends, dtypes, counters, loggers, failure modes."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from conftest import make_problem

from fedcomp import NonFiniteError, Problem, simulate
from fedcomp._array import to_numpy
from fedcomp.algorithms import ALGORITHMS as REGISTRY
from fedcomp.algorithms import fedavg, fedmid, make_algorithm, za1
from fedcomp.metrics import CSVLogger, JSONLLogger, MemoryLogger
from fedcomp.runtime import auto_block_size, setup_context

# the contract suite runs every registered algorithm automatically (small steps, 3 local steps)
CONTRACT_PARAMS = {"fast_fedda": dict(smoothness=2.0, strong_convexity=0.01, local_steps=3),
                   "c_fedda": dict(radius=0.5, strong_convexity=0.01, local_steps=3,
                                   domain_radius=2.0),
                   "mc_fedda": dict(stages=2, stage_rounds=2, radius=0.5, smoothness=2.0,
                                    strong_convexity=0.01, local_steps=3, domain_radius=2.0),
                   "scaffold": dict(client_lr=0.5, local_steps=3, server_prox=True),
                   "scaffnew": dict(client_lr=0.5, comm_prob=0.4, server_prox=True)}
CONTRACT_PARAMS["fedsplit"] = dict(eta=0.5)
ALGORITHMS = [make_algorithm(name, **CONTRACT_PARAMS.get(name, dict(client_lr=0.5, local_steps=3)))
              for name in sorted(REGISTRY)]
ALGORITHMS = [alg for alg in ALGORITHMS if alg.execution == "rounds"]  # async: test_feddr.py
# the exact (Newton) local solver of the primal-dual family, epochs with masks
ALGORITHMS += [make_algorithm("feddr", local_solver="exact", eta=0.5, alpha=1.5),
               make_algorithm("fedprox", mu=0.5, client_lr=0.5, local_epochs=2)]


def supports_sampling(alg, problem) -> bool:
    try:
        alg.prepare(setup_context(problem, 2))
    except ValueError:
        return False
    return True


def on_backend(problem: Problem, like) -> Problem:
    return Problem(problem.loss, problem.regularizer, problem.data.to(like),
                   weighting=problem.weighting)


@pytest.mark.parametrize("alg", ALGORITHMS, ids=lambda a: a.name)
@pytest.mark.parametrize("batch_size", [None, 4])
def test_block_size_does_not_change_results(alg, batch_size):
    p = make_problem("logistic", n_clients=7)
    cpr = 4 if supports_sampling(alg, p) else None
    runs = [simulate(alg, p, 5, batch_size=batch_size, clients_per_round=cpr, seed=11,
                     client_block=block, metrics=[])
            for block in (1, 3, "all", "auto")]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.x, runs[0].x)
        for a, b in zip(run.client_states, runs[0].client_states, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("alg", ALGORITHMS, ids=lambda a: a.name)
def test_prepare_is_the_one_door_and_preparing_again_changes_nothing(alg):
    p = make_problem("logistic", n_clients=5)
    setup = setup_context(p)
    prepared = alg.prepare(setup) or alg
    again = prepared.prepare(setup) or prepared
    assert again.hyperparameters == prepared.hyperparameters
    server_state, client_states = prepared.init(p.zeros(), p.n_clients)  # no regularizer
    assert all(field.shape[0] == p.n_clients for field in client_states)
    np.testing.assert_array_equal(again.output(again.init(p.zeros(), p.n_clients)[0]),
                                  prepared.output(server_state))


def test_an_algorithm_whose_init_needs_the_problem_says_prepare():
    with pytest.raises(RuntimeError, match=r"za1: prepare it .*setup_context"):
        za1().init(np.zeros(3), 2)


@pytest.mark.parametrize("client_block", [1, 4, "all"])
def test_a_sampling_schedule_is_read_as_a_set_of_clients(client_block):
    # [0, 1, 5, 3] once became slice(0, 4): client 2 ran in client 5's place
    p = make_problem("logistic", n_clients=7)
    schedule = [[0, 1, 5, 3], [6, 2], [4, 0, 6, 5, 1]]
    runs = [simulate(make_algorithm("scaffold", client_lr=0.5, local_steps=3), p, 3,
                     sampling=lambda r, order=order: order(schedule[r]), client_block=client_block,
                     seed=4, metrics=[])
            for order in (sorted, list)]
    np.testing.assert_array_equal(runs[1].x, runs[0].x)
    for a, b in zip(runs[1].client_states, runs[0].client_states, strict=True):
        np.testing.assert_array_equal(a, b)


def test_a_full_participation_algorithm_takes_a_schedule_of_every_client():
    p = make_problem("logistic", n_clients=5)
    every = simulate(za1(0.5, 3), p, 3, sampling=lambda r: np.arange(5)[::-1], metrics=[])
    np.testing.assert_array_equal(every.x, simulate(za1(0.5, 3), p, 3, metrics=[]).x)
    with pytest.raises(ValueError, match="za1 is defined for full participation only.*got 4 of 5"):
        simulate(za1(0.5, 3), p, 3, sampling=lambda r: np.arange(5 - r), metrics=[])


@pytest.mark.parametrize("ids", [[0.5, 2], [1, 1], [7], [], ["a"]])
def test_a_bad_sampling_schedule_names_the_round_and_the_ids(ids):
    p = make_problem("logistic", n_clients=7)
    with pytest.raises(ValueError, match=r"sampling\(0\) must return distinct integer client ids "
                                         r"in 0\.\.6 \(got"):
        simulate(fedavg(0.5, 3), p, 2, sampling=lambda r: ids, metrics=[])


def test_seed_changes_minibatches_and_sampling():
    p = make_problem("logistic")
    a = simulate(fedavg(0.5, 3), p, 3, batch_size=2, clients_per_round=3, seed=0, metrics=[])
    b = simulate(fedavg(0.5, 3), p, 3, batch_size=2, clients_per_round=3, seed=1, metrics=[])
    c = simulate(fedavg(0.5, 3), p, 3, batch_size=2, clients_per_round=3, seed=0, metrics=[])
    assert np.abs(a.x - b.x).max() > 1e-6
    np.testing.assert_array_equal(a.x, c.x)


@pytest.mark.parametrize("alg", ALGORITHMS, ids=lambda a: a.name)
def test_array_api_strict_matches_numpy(alg):
    xps = pytest.importorskip("array_api_strict")
    p = make_problem("logistic")
    ref = simulate(alg, p, 4, batch_size=3, seed=2, metrics=[])
    strict = simulate(alg, on_backend(p, xps.zeros(0, dtype=xps.float64)), 4, batch_size=3,
                      seed=2, metrics=[])
    np.testing.assert_allclose(to_numpy(strict.x), ref.x, rtol=0, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("alg", ALGORITHMS, ids=lambda a: a.name)
def test_torch_matches_numpy_and_keeps_float32(alg):
    torch = pytest.importorskip("torch")
    p = make_problem("logistic")
    ref = simulate(alg, p, 4, batch_size=3, seed=2, metrics=[])
    t64 = simulate(alg, on_backend(p, torch.zeros(0, dtype=torch.float64)), 4, batch_size=3,
                   seed=2, metrics=[])
    assert isinstance(t64.x, torch.Tensor)
    np.testing.assert_allclose(to_numpy(t64.x), ref.x, rtol=0, atol=1e-12)
    t32 = simulate(alg, on_backend(p, torch.zeros(0, dtype=torch.float32)), 4, batch_size=3,
                   seed=2, metrics=["objective"])
    assert t32.x.dtype == torch.float32
    np.testing.assert_allclose(to_numpy(t32.x), ref.x, rtol=0, atol=1e-4)


@pytest.mark.parametrize("alg", ALGORITHMS, ids=lambda a: a.name)
def test_numpy_float32_stays_float32(alg):
    p = make_problem("logistic")
    p32 = on_backend(p, np.zeros(0, dtype=np.float32))
    run = simulate(alg, p32, 3, batch_size=3, metrics=["objective"])
    assert run.x.dtype == np.float32
    for field in run.server_state:
        assert field.dtype == np.float32
    for field in run.client_states:
        assert field.dtype == np.float32


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
    run = simulate(fedavg(0.5, 2), p, 7, eval_every=3, logger=logger,
                   metrics=["objective", "nnz", "prox_grad_norm"], tags={"algorithm": "x"})
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

    simulate(fedavg(0.5, 2), p, 4, logger=Both(), metrics=["objective", "optimality"])
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
        simulate(fedavg(client_lr=1e4, local_steps=5), p, 200, logger=logger, metrics=[])
    assert logger.rows and logger.rows[0]["round"] == 0


@pytest.mark.parametrize("kwargs, match", [
    (dict(rounds=-1), "rounds"),
    (dict(rounds=2, clients_per_round=0), "clients_per_round"),
    (dict(rounds=2, clients_per_round=100), "clients_per_round"),
    (dict(rounds=2, batch_size=0), "batch_size"),
    (dict(rounds=2, eval_every=0), "eval_every"),
    (dict(rounds=2, seed=-1), r"seed must be a nonnegative integer \(got seed=-1\)"),
    (dict(rounds=2, seed=1.5), "seed=1.5"),
    (dict(rounds=2, client_block="big"), "client_block"),
    (dict(rounds=2, metrics=["accuracy"]), "unknown metric"),
])
def test_bad_run_arguments_raise(kwargs, match):
    p = make_problem("logistic")
    with pytest.raises(ValueError, match=match):
        simulate(fedavg(), p, **kwargs)


def test_auto_block_size_targets_a_few_megabytes(monkeypatch):
    from fedcomp.runtime import _simulate

    p = make_problem("logistic", n_clients=7)
    per_client = p.data.max_samples * p.data.feature_shape[0] * 8
    assert auto_block_size(p) == 7  # small clients: one block
    monkeypatch.setattr(_simulate, "BLOCK_BYTES", 3 * per_client)
    assert auto_block_size(p) == 3
    assert auto_block_size(p, batch_size=1) == 7  # a minibatch is the working set
    monkeypatch.setattr(_simulate, "BLOCK_BYTES", per_client // 2)
    assert auto_block_size(p) == 1
    monkeypatch.setattr(_simulate, "BLOCK_BYTES", 1 << 30)
    monkeypatch.setattr(_simulate, "_cache_bytes", lambda: 8 * per_client)
    assert auto_block_size(p) == 2  # a quarter of the last-level cache


def test_progress_line_on_request(capsys):
    p = make_problem("logistic")
    simulate(fedavg(0.5, 2), p, 3, progress=True, metrics=[], tags={"algorithm": "fa"})
    err = capsys.readouterr().err
    assert "fa: round 3/3" in err and "rounds/s" in err and "ETA" in err
    simulate(fedavg(0.5, 2), p, 3, progress=False, metrics=[])
    assert capsys.readouterr().err == ""


def test_norm_limit_catches_divergence_before_overflow():
    p = make_problem("least_squares")
    alg = fedavg(client_lr=50.0, local_steps=2)
    with pytest.raises(NonFiniteError, match=r"diverged \(norm .* > max_norm 1e\+06\)"):
        simulate(alg, p, 50, metrics=[], max_norm=1e6)
    with pytest.raises(NonFiniteError, match="non-finite"):
        simulate(alg, p, 2000, metrics=[], max_norm=None)
    with pytest.raises(ValueError, match="max_norm"):
        simulate(alg, p, 1, max_norm=-1.0)
