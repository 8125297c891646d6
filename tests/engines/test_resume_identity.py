"""Issue 43, "a checkpoint of another run" at the experiment level: ``fedcomp run --resume``
keeps finished runs only when they were computed on the problem the configuration gives now.

On 71822a8 a ``libsvm_file`` run with ``--seeds 0``, its data file then rewritten, resumed
with ``--seeds 0:2`` exited 0: ``results.csv`` held seed 0 on the old data and seed 1 on the
new, and the summary averaged the two. Also here: a batch size past what NumPy can allocate
is one error naming it, before any work.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from fedcomp.config import ConfigError
from tests.product.test_robust import one_error_line, run_cli

SVM_CONFIG = """\
name = "svm"
rounds = 2
reference = false
metrics = ["objective"]
[data]
generator = "libsvm_file"
path = "{path}"
n_clients = 3
partition = "iid"
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


def write_svm(path, seed):
    """A 30-sample, 4-feature LIBSVM file with ±1 labels, drawn from ``seed``."""
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(30):
        label = 1 if i % 2 else -1
        values = rng.standard_normal(4) + 0.5 * label
        lines.append(f"{label} " + " ".join(f"{j + 1}:{v:.5f}" for j, v in enumerate(values)))
    path.write_text("\n".join(lines) + "\n")


def snapshot(out):
    """Every file under ``out`` with its contents' hash (what a refusal must not change)."""
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            if p.is_file() else "dir" for p in sorted(out.rglob("*"))}


@pytest.fixture
def svm_run(tmp_path, capsys):
    """A finished ``--seeds 0`` run of a ``libsvm_file`` config: (config, data file, out)."""
    data, config, out = tmp_path / "a.svm", tmp_path / "svm.toml", tmp_path / "out"
    write_svm(data, 0)
    config.write_text(SVM_CONFIG.format(path=data))
    status, err = run_cli(capsys, "run", config, "--seeds", "0", "--jobs", "1", "--out", out,
                          "--quiet")
    assert status == 0, err
    return config, data, out


def resume(capsys, config, out):
    return run_cli(capsys, "run", config, "--seeds", "0:2", "--jobs", "1", "--resume",
                   "--out", out, "--quiet")


def test_a_resume_on_changed_data_is_refused_naming_the_setting_and_both_fingerprints(
        svm_run, capsys):
    config, data, out = svm_run
    recorded = json.loads((out / "config.json").read_text())["settings"]
    fingerprint = recorded["base (data seed 0)"]["problem"]["fingerprint"]
    before = snapshot(out)
    write_svm(data, 1)  # the same file name, other samples
    status, err = resume(capsys, config, out)
    line = one_error_line(err)
    assert status == 2
    assert "the data of setting 'base (data seed 0)'" in line, line
    assert f"problem fingerprint recorded sha256:{fingerprint}, now sha256:" in line, line
    assert "pass a new --out, or drop --resume" in line, line
    assert snapshot(out) == before  # nothing written, moved or removed


def test_a_resume_on_unchanged_data_keeps_the_finished_run_and_runs_the_rest(svm_run, capsys):
    config, _, out = svm_run
    first = (out / "runs.jsonl").read_text()
    status, err = resume(capsys, config, out)
    assert status == 0, err
    records = (out / "runs.jsonl").read_text()
    assert records.startswith(first)  # seed 0 kept, not run again
    assert [json.loads(line)["key"]["seed"] for line in records.splitlines()] == ["0", "1"]
    settings = json.loads((out / "config.json").read_text())["settings"]
    assert sorted(settings) == ["base (data seed 0)", "base (data seed 1)"]


def test_a_resume_on_another_backend_is_refused(svm_run, capsys):
    config, _, out = svm_run
    path = out / "config.json"
    meta = json.loads(path.read_text())  # as if the kept run had run on a GPU
    meta["settings"]["base (data seed 0)"]["backend"].update(name="torch", device="cuda:0")
    path.write_text(json.dumps(meta))
    before = snapshot(out)
    status, err = resume(capsys, config, out)
    line = one_error_line(err)
    assert status == 2
    assert ("the backend of setting 'base (data seed 0)': recorded torch on cuda:0, now numpy "
            "on cpu") in line, line
    assert snapshot(out) == before


def test_a_refused_configuration_changes_nothing_either(svm_run, capsys):
    """The configuration check came after ``models/`` and ``parts/`` were remade."""
    config, _, out = svm_run
    (out / "parts").mkdir()
    (out / "parts" / "0.csv").write_text("round\n")  # an interrupted worker's rows
    before = snapshot(out)
    config.write_text(config.read_text().replace("rounds = 2", "rounds = 3"))
    status, err = resume(capsys, config, out)
    assert status == 2 and "rounds: 2 -> 3" in one_error_line(err)
    assert snapshot(out) == before


# --- --set batch_size=10^23 ended in NumPy's "Maximum allowed size exceeded" mid-run ----------
@pytest.mark.parametrize("batch_size", [2**31, 10**23])
def test_a_batch_size_past_the_limit_is_one_error_naming_it(tmp_path, batch_size):
    from fedcomp.config import load
    from fedcomp.experiments import resolve
    from fedcomp.experiments._validate import MAX_BATCH_SIZE

    config = {**load("seed000"), "batch_size": ["full", batch_size]}
    with pytest.raises(ConfigError, match=rf"batch_size = {batch_size} is above the largest "
                                          rf"minibatch, {MAX_BATCH_SIZE} \(2\*\*31 - 1\)"):
        resolve(config)
    resolve({**load("seed000"), "batch_size": MAX_BATCH_SIZE})  # the limit itself is valid


def test_a_huge_batch_size_fails_before_any_work_in_the_command(tmp_path, capsys):
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", "seed000", "--set", "rounds=1", "--set",
                          f"batch_size={10**23}", "--out", out, "--quiet")
    assert status == 2 and f"batch_size = {10**23} is above" in one_error_line(err)
    assert not out.exists()


def test_a_setting_recorded_without_a_finished_run_is_recorded_afresh(svm_run, capsys):
    """A run killed between recording its setting and its own line left a stale setting
    in config.json; it runs again, so its setting is recorded again (the old code kept the
    stale one)."""
    config, _, out = svm_run
    path = out / "config.json"
    meta = json.loads(path.read_text())
    meta["settings"]["base (data seed 1)"] = {**meta["settings"]["base (data seed 0)"],
                                              "data_seed": 1}
    meta["settings"]["base (data seed 1)"]["problem"] = {"fingerprint": "stale"}
    path.write_text(json.dumps(meta))
    status, err = resume(capsys, config, out)
    assert status == 0, err
    settings = json.loads(path.read_text())["settings"]
    assert settings["base (data seed 1)"]["problem"]["fingerprint"] not in (
        "stale", settings["base (data seed 0)"]["problem"]["fingerprint"])
