"""Seeds in worker processes, sweeps, ``fedcomp best``, resume and progress (issue 9)."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

from fedcomp.cli import main
from fedcomp.config import parse_sweep
from fedcomp.experiments import _execute, best_settings, run_experiment
from tests.product.test_variants import small_config


def tiny_config():
    cfg = small_config()
    cfg.pop("variants")
    cfg.update(name="sweeps-test", seeds=[0, 1])
    return cfg


def rows_of(directory):
    """results.csv rows without the timing column, in a fixed order."""
    with (directory / "results.csv").open(newline="") as f:
        rows = [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(f)]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


def run(directory, **kwargs):
    kwargs.setdefault("progress", False)
    return run_experiment(tiny_config(), directory, stream=io.StringIO(), **kwargs)


def test_parallel_seeds_equal_sequential(tmp_path):
    run(tmp_path / "one", jobs=1)
    summary = run(tmp_path / "two", jobs=2)
    assert rows_of(tmp_path / "one") == rows_of(tmp_path / "two")
    assert [(r["algorithm"], r["seed"]) for r in summary] == [
        (a, s) for s in (0, 1) for a in ("fedmid", "fedavg")]
    assert not (tmp_path / "two" / "parts").exists()
    assert len((tmp_path / "two" / "runs.jsonl").read_text().splitlines()) == 4
    assert "| fedavg | 1 |" in (tmp_path / "two" / "summary.md").read_text()


def test_sweep_expands_a_grid_into_columns(tmp_path):
    sweep = [parse_sweep("algorithm.client_lr=0.1,0.5"), parse_sweep("rounds=3,6")]
    summary = run(tmp_path, sweep=sweep, seeds=[0])
    rows = rows_of(tmp_path)
    assert {(r["algorithm.client_lr"], r["rounds"]) for r in rows} == {
        (lr, n) for lr in ("0.1", "0.5") for n in ("3", "6")}
    assert max(int(r["round"]) for r in rows if r["rounds"] == "3") == 3
    assert len(summary) == 4 * 2 and {r["algorithm.client_lr"] for r in summary} == {0.1, 0.5}
    assert "| algorithm | algorithm.client_lr | rounds | seed |" in (
        tmp_path / "summary.md").read_text()
    meta = json.loads((tmp_path / "config.json").read_text())
    assert meta["sweep"] == {"algorithm.client_lr": [0.1, 0.5], "rounds": [3, 6]}


def test_best_picks_the_known_best_setting(tmp_path):
    # 1e-3 barely moves in 6 rounds, 0.5 converges, 1e5 diverges
    sweep = [parse_sweep("algorithm.client_lr=0.001,0.5,1e5")]
    run(tmp_path, sweep=sweep)
    best = best_settings(tmp_path, "optimality")
    assert {b["algorithm"] for b in best} == {"fedmid", "fedavg"}
    for b in best:
        assert b["setting"] == {"algorithm.client_lr": "0.5"} and b["seeds"] == 2
        assert b["runner_up"]["setting"] == {"algorithm.client_lr": "0.001"}
        assert b["value"] < b["runner_up"]["value"]
    # maximising ranks the slow setting first and still puts the diverged one last
    worst = best_settings(tmp_path, "optimality", mode="max")
    assert all(b["setting"] == {"algorithm.client_lr": "0.001"} for b in worst)
    assert all(math.isfinite(b["runner_up"]["value"]) for b in worst)


def run_small_sweep(out, algorithms, *more):
    """A tiny seed000 swept over algorithm.client_lr = 0.001, 0.5: its exit status."""
    return main(["run", "seed000", "--set", "rounds=4", "--set", "data.n_clients=4",
                 "--set", "data.samples_per_client=40", "--set", "batch_size='full'",
                 "--set", f"algorithms={algorithms}",
                 "--sweep", "algorithm.client_lr=0.001,0.5", "--out", str(out), "--quiet",
                 "--jobs", "1", *more])


def test_best_command_prints_the_table(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_small_sweep(out, "[{name='fedmid', client_lr=0.5}]") == 0
    capsys.readouterr()
    assert main(["best", str(out), "--metric", "optimality"]) == 0
    table = capsys.readouterr().out
    assert "| fedmid | algorithm.client_lr=0.5 |" in table and "runner-up" in table


def test_a_sweep_an_algorithm_does_not_take_warns_and_best_reports_a_tie(tmp_path, capsys):
    out = tmp_path / "run"
    assert run_small_sweep(out, "[{name='fedmid', client_lr=0.5}, {name='fast_fedda'}]",
                           "--seeds", "0") == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == ["warning: --sweep algorithm.client_lr: fast_fedda does not take "
                        "'client_lr' and runs identically for each of its 2 values "
                        "('fedcomp best' reports a tie)"]
    best = {b["algorithm"]: b for b in best_settings(out, "optimality")}
    assert best["fast_fedda"]["tie"] and not best["fedmid"]["tie"]
    assert best["fast_fedda"]["value"] == best["fast_fedda"]["runner_up"]["value"]
    assert main(["best", str(out), "--metric", "optimality"]) == 0
    table = capsys.readouterr().out
    assert "| fast_fedda | tie (no setting better) |" in table
    assert "| fedmid | algorithm.client_lr=0.5 |" in table
    assert "tie: the best settings score exactly the same" in table


def test_interrupted_run_resumes_to_the_same_results(tmp_path, monkeypatch):
    run(tmp_path / "whole")
    calls = {"n": 0}
    original = _execute.run_one

    def interrupt_third(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            args[2].log({**args[0].tags, "round": 0})  # a partial row of the interrupted run
            raise KeyboardInterrupt
        return original(*args, **kwargs)

    monkeypatch.setattr(_execute, "run_one", interrupt_third)
    with pytest.raises(KeyboardInterrupt):
        run(tmp_path / "cut")
    cut = tmp_path / "cut"
    assert len((cut / "runs.jsonl").read_text().splitlines()) == 2
    assert {r["seed"] for r in rows_of(cut)} == {"0"}  # whole finished runs only
    monkeypatch.setattr(_execute, "run_one", original)
    with (cut / "results.csv").open("a") as f:  # what a hard crash (kill -9) leaves behind
        f.write("fedavg,fedavg,full,1,0" + "," * 10 + "\n")
    with pytest.raises(ValueError, match="already exists"):
        run(cut)
    summary = run(cut, resume=True)
    assert rows_of(cut) == rows_of(tmp_path / "whole")
    assert len(summary) == 4 and all(r["status"] == "ok" for r in summary)
    assert len((cut / "runs.jsonl").read_text().splitlines()) == 4


def test_resume_with_another_config_names_the_difference(tmp_path):
    run(tmp_path, seeds=[0])
    cfg = tiny_config()
    cfg["rounds"] = 9
    with pytest.raises(ValueError, match=r"rounds: 6 -> 9"):
        run_experiment(cfg, tmp_path, resume=True, progress=False, stream=io.StringIO())
    # more seeds are allowed: only the new ones run
    summary = run(tmp_path, resume=True, seeds=[0, 1])
    assert len(summary) == 4 and {r["seed"] for r in rows_of(tmp_path)} == {"0", "1"}


def test_cli_ctrl_c_prints_how_to_resume(tmp_path, monkeypatch, capsys):
    calls, run_one = [], _execute.run_one

    def interrupt(*args, **kwargs):  # after one finished run: there is something to resume
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return run_one(*args, **kwargs)

    monkeypatch.setattr(_execute, "run_one", interrupt)
    # --jobs 1: the patched run_one runs in this process (seed000's five seeds would
    # otherwise go to worker processes, which the patch does not reach)
    argv = ["run", "seed000", "--set", "rounds=2", "--out", str(tmp_path), "--quiet",
            "--jobs", "1"]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert "--resume" in err and str(tmp_path) in err


def test_progress_lines_per_finished_run(tmp_path, capsys):
    run(tmp_path / "loud", progress="auto", seeds=[0])
    err = capsys.readouterr().err
    assert "[1/2]" in err and "[2/2]" in err and "ETA" in err
    run(tmp_path / "quiet", progress=False, seeds=[0])
    assert capsys.readouterr().err == ""


def test_run_help_documents_the_options():
    from fedcomp.cli import build_parser

    text = build_parser()._subparsers._group_actions[0].choices["run"].format_help()
    for option in ("--seeds", "--jobs", "--sweep", "--resume", "fedcomp best"):
        assert option in text




@pytest.mark.slow
@pytest.mark.parametrize("sig", ["SIGTERM", "SIGKILL"])
def test_a_stopped_parallel_run_leaves_no_worker(tmp_path, sig):
    """SIGTERM ends `fedcomp run --jobs 2` like Ctrl-C (workers terminated, status 143);
    after SIGKILL the workers see their parent gone and exit (and multiprocessing's
    resource tracker with them) instead of running their runs to the end."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from fedcomp._lifetime import alive, descendants

    cfg = tmp_path / "long.toml"  # two runs of minutes each: only a stop ends them early
    cfg.write_text('name = "long"\nrounds = 200000\nseeds = [0, 1]\nreference = false\n'
                   'metrics = ["objective"]\n'
                   '[data]\ngenerator = "synthetic_fedprox"\nalpha = 1.0\nbeta = 1.0\n'
                   'n_clients = 4\nn_classes = 2\nsamples_per_client = 20\nn_features = 4\n'
                   '[problem]\nloss = "logistic"\n[regularizer]\nname = "l1"\nalpha = 0.001\n'
                   '[[algorithms]]\nname = "fedmid"\n')
    out = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "fedcomp", "run", str(cfg), "--jobs", "2",
                             "--quiet", "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    seen: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(list((out / "parts").glob("*.csv"))) < 2:
            time.sleep(0.2)
        seen = descendants([proc.pid])
        assert len(seen) >= 3, seen  # two workers and the resource tracker, running
        proc.send_signal(getattr(signal, sig))
        proc.wait(timeout=30)
        deadline = time.monotonic() + 15  # before the fix: until the runs end (minutes)
        while time.monotonic() < deadline and any(alive(p) for p in seen):
            time.sleep(0.1)
        left = [p for p in seen if alive(p)]
    finally:
        if proc.poll() is None:
            proc.kill()
        for pid in seen:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert left == []
    if sig == "SIGTERM":
        assert proc.returncode == 128 + signal.SIGTERM
        # no run had finished: the runner removed the directory, and the message says so
        assert "nothing was kept" in proc.stdout.read().decode() and not out.exists()
