"""The last robustness gaps of the reliability battery: each probe as a test that fails on
the code before its fix. A bad setting fails in one ``error:`` line before the output
directory exists; nothing is planned, connected to or written that the user did not ask for.
"""

from __future__ import annotations

import json
import time

import pytest

from tests.product.test_robust import TINY, one_error_line, run_cli, tiny

#: TINY (breast cancer, 3 clients, FedMiD) with a compressor on its uploads
COMPRESSED = TINY + 'compressor = {name = "%s", k = %d}\n'


# --- medium 1: a late validation error left a directory that refused the rerun --------------
@pytest.mark.parametrize("name, k", [("top_k", 1000000), ("rand_k", 50)])
def test_a_compressor_larger_than_the_model_fails_before_the_output_exists(
        tmp_path, capsys, name, k):
    config = tiny(tmp_path, COMPRESSED % (name, k))
    out = tmp_path / "out"
    for _ in range(2):  # the same command again: the same error, not "already exists"
        status, err = run_cli(capsys, "run", config, "--out", out, "--quiet")
        line = one_error_line(err)
        assert status == 2 and f"{name}: k={k} exceeds the size of a message row (d=30)" in line
        assert not out.exists()
    status, err = run_cli(capsys, "run", config, "--out", out, "--quiet", "--resume")
    assert status == 2 and "exceeds the size" in one_error_line(err) and not out.exists()


def test_the_compressed_wrapper_checks_k_when_prepared():
    from fedcomp.algorithms import compressed, make_algorithm
    from fedcomp.compressors import TopK
    from fedcomp.toy import tiny_problem

    problem = tiny_problem()
    algorithm = compressed(make_algorithm("fedavg"), TopK(k=10**6))
    from fedcomp.runtime import setup_context

    with pytest.raises(ValueError, match=r"top_k: k=1000000 exceeds .* \(d=\d+\)"):
        algorithm.prepare(setup_context(problem))


# --- medium 2: --seeds 0:100000000 had no limit ----------------------------------------------
def test_a_huge_seed_range_is_refused_at_once_naming_the_bound(tmp_path, capsys):
    config = tiny(tmp_path)
    tic = time.perf_counter()
    status, err = run_cli(capsys, "run", config, "--seeds", "0:100000000", "--dry-run")
    assert time.perf_counter() - tic < 5  # before: 5 GB of memory in 20 s
    line = one_error_line(err)
    assert status == 2 and "--seeds 0:100000000 plans 100000000 runs" in line
    assert "MAX_PLANNED_RUNS" in line and "interrupted" not in err


def test_planned_runs_over_the_bound_are_refused_in_the_python_api_too():
    from fedcomp.config import MAX_PLANNED_RUNS, ConfigError, load
    from fedcomp.experiments import resolve

    config = load("seed000")  # several algorithms: seeds x algorithms crosses the bound
    with pytest.raises(ConfigError, match=r"'seed000' plans \d+ runs, more than the 100000"):
        resolve(config, seeds=list(range(MAX_PLANNED_RUNS)))
    sweep = [("rounds", [str(r) for r in range(1, 401)]),
             ("eval_every", [str(e) for e in range(1, 301)])]
    with pytest.raises(ConfigError, match=r"--sweep rounds=<400 values> eval_every=<300 "
                                          r"values> plans 120000 runs"):
        resolve(config, sweep=sweep)


def test_an_interrupt_outside_a_run_does_not_mention_results(monkeypatch, capsys):
    from fedcomp import cli
    from fedcomp.cli import _show

    def interrupted(args):
        raise KeyboardInterrupt

    monkeypatch.setattr(_show, "cmd_show", interrupted)  # the parser reads it from its module
    status = cli.main(["show", "seed000"])
    err = capsys.readouterr().err
    assert status == 130 and "interrupted" in err and "results.csv" not in err


# --- medium 3: a Ray address with nothing behind it hung ------------------------------------
def test_a_ray_address_with_nothing_behind_fails_in_seconds_naming_it(tmp_path, capsys):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = tiny(tmp_path)
    out = tmp_path / "out"
    tic = time.perf_counter()
    status, err = run_cli(capsys, "run", config, "--out", out, "--executor", "ray",
                          "--ray-address", f"127.0.0.1:{port}", "--quiet")
    assert time.perf_counter() - tic < 30  # before: Ray's warnings for 120 s and more
    line = one_error_line(err)
    assert status == 2 and f"no Ray cluster answers at 127.0.0.1:{port}" in line
    assert not out.exists()  # before: .lock, config.json, models/, parts/


@pytest.mark.parametrize("address", ["nonsense", "host:port", ":6379"])
def test_a_malformed_ray_address_is_named(address):
    from fedcomp.runtime._ray_clients import check_ray_address

    with pytest.raises(ValueError, match="is not HOST:PORT"):
        check_ray_address(address)


# --- medium 4: --track mlflow dropped the store a config names ------------------------------
def test_track_keeps_the_mlflow_store_the_config_names(tmp_path, capsys):
    pytest.importorskip("mlflow")
    store = tmp_path / "named.db"
    config = tiny(tmp_path, TINY + f'[tracking]\nmlflow = {{uri = "sqlite:///{store}"}}\n')
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", config, "--out", out, "--track", "mlflow", "--quiet")
    assert status == 0, err
    recorded = json.loads((out / "config.json").read_text())["config"]["tracking"]
    assert recorded == {"mlflow": {"uri": f"sqlite:///{store}"}}
    assert store.exists() and not (out / "mlflow.db").exists()


def test_an_unwritable_mlflow_store_is_named_before_the_output_exists(tmp_path, capsys):
    pytest.importorskip("mlflow")
    (tmp_path / "a-file").write_text("")  # a store under a file: no user can create it
    store = tmp_path / "a-file" / "runs.db"
    config = tiny(tmp_path, TINY + f'[tracking]\nmlflow = {{uri = "sqlite:///{store}"}}\n')
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", config, "--out", out, "--track", "mlflow", "--quiet")
    line = one_error_line(err)
    assert status == 2 and f"the MLflow store sqlite:///{store} cannot be used" in line
    assert not out.exists()


# --- the low ones --------------------------------------------------------------------------
def test_a_toml_nested_too_deeply_is_one_error_line(tmp_path, capsys):
    deep = tmp_path / "deep.toml"
    deep.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n")
    status, err = run_cli(capsys, "run", deep, "--dry-run")
    assert status == 2 and "nested too deeply" in one_error_line(err)  # before: RecursionError


def test_a_nan_start_is_named_not_blamed_on_the_step():
    import numpy as np

    from fedcomp import simulate, za1
    from fedcomp.toy import tiny_problem

    problem = tiny_problem()
    x0 = np.zeros(problem.param_shape)
    x0[2] = np.nan
    with pytest.raises(ValueError, match=r"x0 has 1 NaN or infinite entries \(the first at "
                                         r"flat index 2\)"):
        simulate(za1(), problem, rounds=2, x0=x0)


@pytest.mark.parametrize("build, message", [
    (lambda: __import__("fedcomp").za1(client_lr=float("inf")),
     "za1.client_lr must be a finite number"),
    (lambda: __import__("fedcomp").fedmid(0.1, float("nan")),
     r"local_steps must be an integer >= 1 \(got nan\)"),
    (lambda: __import__("fedcomp").fedavg(float("nan")), "client_lr must be a positive number"),
    (lambda: __import__("fedcomp.losses").losses.Logistic(l2=float("inf")),
     "Logistic: l2 must be >= 0 and finite"),
])
def test_non_finite_numbers_are_refused_by_the_python_api(build, message):
    with pytest.raises(ValueError, match=message):
        build()


def test_an_unbounded_parameter_may_still_be_infinite():
    from fedcomp import c_fedda

    assert c_fedda(radius=float("inf")).hyperparameters["radius"] == float("inf")


def test_a_diverging_run_prints_fedcomps_warning_not_numpys(tmp_path, capsys):
    config = tiny(tmp_path, TINY + "")
    status, err = run_cli(capsys, "run", config, "--out", tmp_path / "out", "--quiet",
                          "--set", "problem.l2=1e300")
    assert "in round" in err and "try a smaller step" in err
    assert "RuntimeWarning" not in err and "overflow encountered" not in err


def test_nan_client_ids_are_refused_by_the_estimators():
    import numpy as np

    from fedcomp.sklearn import FederatedLinearRegression

    X = np.random.default_rng(0).normal(size=(10, 3))
    clients = np.array([0, 0, 1, 1, 2, 2, np.nan, np.nan, 1, 0])
    with pytest.raises(ValueError, match=r"clients holds 2 NaN or infinite ids \(the first "
                                         r"for sample 6\)"):
        FederatedLinearRegression().fit(X, X.sum(axis=1), clients=clients)


def test_a_file_that_is_not_libsvm_is_not_echoed(tmp_path):
    from fedcomp.data import load_libsvm

    secret = tmp_path / "notes.txt"
    secret.write_text("password hunter2\nmore\n")
    with pytest.raises(ValueError) as info:
        load_libsvm(secret)
    assert "line 1: not LIBSVM format" in str(info.value) and "the label" in str(info.value)
    assert "password" not in str(info.value) and "hunter2" not in str(info.value)
    bad = tmp_path / "bad.svm"
    bad.write_text("+1 1:0.5 secret 3:2\n")
    with pytest.raises(ValueError, match="token 3 is not index:value") as info:
        load_libsvm(bad)
    assert "secret" not in str(info.value)


def test_an_empty_libsvm_file_is_named(tmp_path):
    from fedcomp.data import libsvm_file

    empty = tmp_path / "empty.svm"
    empty.write_text("# only a comment\n")
    with pytest.raises(ValueError, match=f"{empty}: no samples"):
        libsvm_file(str(empty), n_clients=2)
