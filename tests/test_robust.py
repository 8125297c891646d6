"""Robustness under concurrency, faults and bad input (issue 20): every failure a user or a
broken file can cause ends in one ``error:`` line naming what is wrong, never a traceback,
a silent wrong result or a half-written output directory."""

from __future__ import annotations

import json

import numpy as np
import pytest


# --- 13: a float32 mixing matrix is checked to float32's rounding ----------------------------
def test_a_float32_mixing_matrix_is_accepted_to_its_rounding():
    from fedcomp.topology import Topology

    rng = np.random.default_rng(0)
    n = 12
    u = rng.uniform(size=(n, n))
    u = u + u.T
    for _ in range(200):  # symmetric Sinkhorn: a dense doubly stochastic matrix in float64
        d = 1 / np.sqrt(u.sum(axis=1))
        u = d[:, None] * u * d[None, :]
    u32 = u.astype(np.float32)
    rows = np.abs(u32.astype(np.float64).sum(axis=1) - 1.0).max()
    assert 1e-10 < rows < 1e-6  # float32 entries: off by float32's rounding, not 1e-10
    assert Topology(u32).n_nodes == n
    bad = u32.copy()  # a real defect stays an error whatever the dtype
    bad[0, 0] += np.float32(1e-2)
    with pytest.raises(ValueError, match="doubly stochastic"):
        Topology(bad)
    noisy = u32.astype(np.float64) + 1e-8 * rng.standard_normal((n, n))
    with pytest.raises(ValueError, match="symmetric"):  # float64: the tight tolerance
        Topology(noisy)


# --- a tiny configuration the CLI tests run -------------------------------------------------
TINY = """\
name = "tiny"
rounds = 2
reference = false
metrics = ["objective"]
[data]
generator = "breast_cancer"
n_clients = 3
partition = "iid"
seed = 0
[problem]
loss = "logistic"
[regularizer]
name = "l1"
alpha = 0.01
[[algorithms]]
name = "fedmid"
client_lr = 0.01
local_steps = 1
"""


def tiny(tmp_path, text=TINY, name="tiny.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def run_cli(capsys, *argv):
    """``fedcomp ARGV`` in this process: (exit status, stderr)."""
    from fedcomp.cli import main

    status = main([*map(str, argv)])
    return status, capsys.readouterr().err


def one_error_line(err):
    """The single ``error:`` line of ``err`` (no traceback)."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- 9: a name cannot lead the default output directory out of runs/ ------------------------
@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b", ".."])
def test_a_name_that_is_a_path_is_refused(tmp_path, capsys, monkeypatch, name):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    config = tiny(tmp_path, TINY.replace('name = "tiny"', f"name = {name!r}"))
    status, err = run_cli(capsys, "run", config, "--quiet")
    assert status == 2 and "name must be a plain file name" in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "tiny.toml"]
    assert not (work / "runs").exists() and not list((tmp_path / "a").glob("x*"))


# --- 7: resume after a torn record, and of a run whose rows were lost -----------------------
def _rows(path):
    import csv

    with (path / "results.csv").open(newline="") as f:
        return list(csv.DictReader(f))


#: Two seeds, one after the other in this process.
TWO_SEEDS = ["--seeds", "0:2", "--jobs", "1", "--quiet"]


def _timeless(rows):
    """Rows without their wall-clock column (the only one a rerun changes)."""
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


def test_resume_ignores_a_torn_last_record(tmp_path, capsys):
    config, out = tiny(tmp_path), tmp_path / "out"
    assert run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out)[0] == 0
    whole = _rows(out)
    records = (out / "runs.jsonl").read_text().splitlines(keepends=True)
    # seed 1 was killed while writing its record: half a line, no newline; its rows too
    (out / "runs.jsonl").write_text(records[0] + records[1][: len(records[1]) // 2])
    status, err = run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out, "--resume")
    assert status == 0, err
    assert _timeless(_rows(out)) == _timeless(whole)  # seed 1 ran again, same numbers
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert [json.loads(line)["key"]["seed"] for line in lines] == ["0", "1"]  # no fragment


def test_a_damaged_record_before_the_last_is_one_error_line(tmp_path, capsys):
    config, out = tiny(tmp_path), tmp_path / "out"
    assert run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out)[0] == 0
    records = (out / "runs.jsonl").read_text().splitlines(keepends=True)
    (out / "runs.jsonl").write_text("{garbage\n" + records[1])
    status, err = run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out, "--resume")
    assert status == 2 and "runs.jsonl, line 1: not a run record" in one_error_line(err)


def test_resume_reruns_a_finished_run_whose_rows_are_missing(tmp_path, capsys):
    import csv

    config, out = tiny(tmp_path), tmp_path / "out"
    assert run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out)[0] == 0
    whole = _rows(out)
    with (out / "results.csv").open("w", newline="") as f:  # seed 1's rows lost
        writer = csv.DictWriter(f, fieldnames=list(whole[0]))
        writer.writeheader()
        writer.writerows(r for r in whole if r["seed"] == "0")
    status, err = run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out, "--resume")
    assert status == 0, err
    assert "1 run(s) recorded as finished have no rows in results.csv" in err
    assert "fedmid 1" in err and "running them again" in err
    assert _timeless(_rows(out)) == _timeless(whole)


# --- 2: two runs into one output directory ------------------------------------------------
def test_a_second_run_into_a_busy_directory_stops_at_once(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    config, out = tiny(tmp_path), tmp_path / "out"
    command = [sys.executable, "-m", "fedcomp", "run", str(config), "--set", "rounds=1000000",
               "--set", "eval_every=1000000", "--out", str(out), "--quiet", "--jobs", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=env)
    try:
        lock = out / ".lock"
        deadline = time.monotonic() + 120
        while not (out / "config.json").exists():  # the first run has started its runs
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.05)
        # the same command again (--resume gets past the results.csv check): refused
        tic = time.monotonic()
        second = subprocess.run([*command, "--resume"], capture_output=True, text=True,
                                env=env, timeout=120)
        assert second.returncode == 2, second.stderr
        line = one_error_line(second.stderr)
        assert str(out) in line and f"pid {first.pid}" in line and "another --out" in line
        assert time.monotonic() - tic < 60 and first.poll() is None  # the first goes on
        assert (out / "parts").is_dir() and not (out / "runs.jsonl").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    from fedcomp.experiments._results import output_lock

    with output_lock(out):  # the kernel released a killed holder's lock
        assert lock.read_text().strip() == str(os.getpid())
    assert not lock.exists()


# --- 8: a bad value found late leaves nothing behind ----------------------------------------
def test_a_failure_before_any_run_finished_leaves_no_output(tmp_path, capsys):
    svm = TINY.replace('generator = "breast_cancer"',
                       f'generator = "libsvm_file"\npath = "{tmp_path / "missing.svm"}"')
    config = tiny(tmp_path, svm)
    out = tmp_path / "new"
    status, err = run_cli(capsys, "run", config, "--out", out, "--quiet")
    assert status == 2 and "missing.svm" in one_error_line(err)
    assert not out.exists()
    existing = tmp_path / "existing"  # a directory the user made: kept, and left as it was
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    status, err = run_cli(capsys, "run", config, "--out", existing, "--quiet")
    assert status == 2 and "missing.svm" in one_error_line(err)
    assert [p.name for p in existing.iterdir()] == ["notes.txt"]


# --- 5: non-finite parameters are refused where numbers enter factories ---------------------
@pytest.mark.parametrize("override, message", [
    ("algorithms.fedmid.client_lr=inf", "algorithms.fedmid.client_lr must be a finite number"),
    ("algorithms.fedmid.client_lr=nan", "algorithms.fedmid.client_lr must be a finite number"),
    ("regularizer.alpha=inf", "regularizer.alpha must be a finite number (got inf)"),
    ("problem.l2=inf", "problem.l2 must be a finite number (got inf)"),
    ("problem.l2=-inf", "problem.l2 must be a finite number (got -inf)"),
    ('data.partition={name="dirichlet", concentration=inf}',
     "data.partition.concentration must be a finite number"),
])
def test_non_finite_parameters_are_one_error_line(tmp_path, capsys, override, message):
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--set", override, "--out", out,
                          "--quiet")
    assert status == 2 and message in one_error_line(err)
    assert not out.exists()


def test_factories_refuse_non_finite_numbers_and_name_them():
    from fedcomp._registry import NonFiniteParameterError
    from fedcomp.algorithms import make_algorithm
    from fedcomp.losses import make_loss
    from fedcomp.regularizers import make_regularizer

    inf, nan = float("inf"), float("nan")
    with pytest.raises(NonFiniteParameterError, match=r"fedmid.client_lr .* \(got inf\)"):
        make_algorithm("fedmid", client_lr=inf)
    with pytest.raises(NonFiniteParameterError, match=r"l1.alpha .* \(got nan\)"):
        make_regularizer("l1", alpha=nan)
    with pytest.raises(NonFiniteParameterError, match=r"logistic.l2 .* \(got inf\)"):
        make_loss("logistic", l2=inf)
    with pytest.raises(NonFiniteParameterError, match=r"mc_fedda.stage_rounds"):
        make_algorithm("mc_fedda", stage_rounds=[10, inf])
    # where an infinity means something it stays allowed: a box open on one side, no ball
    assert make_regularizer("box", lower=0.0, upper=inf).upper == inf
    assert make_algorithm("c_fedda", radius=inf).hyperparameters["radius"] == inf
    with pytest.raises(NonFiniteParameterError, match="box.upper"):  # but never NaN
        make_regularizer("box", lower=0.0, upper=nan)
