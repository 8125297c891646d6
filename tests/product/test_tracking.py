"""Experiment tracking (issue 21): TensorBoard event files and MLflow runs hold the rows of
results.csv, read back with TensorBoard's and MLflow's own readers."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import pytest

from fedcomp import config
from fedcomp._extras import MissingExtraError
from fedcomp.config import ConfigError
from fedcomp.experiments import run_experiment

pytest.importorskip("tensorboardX")
pytest.importorskip("mlflow")

CONFIG = """\
name = "tracked"
rounds = 6
eval_every = 2
seeds = [0, 1]
metrics = ["objective", "optimality", "nnz"]
[data]
generator = "breast_cancer"
n_clients = 5
partition = "iid"
seed = 0
[problem]
loss = "logistic"
[regularizer]
name = "l1"
alpha = 0.01
[[algorithms]]
name = "fedmid"
client_lr = 0.05
local_steps = 2
[[algorithms]]
name = "fedda"
client_lr = 0.05
local_steps = 2
"""


def tracked(tmp_path: Path, tracking: str) -> dict:
    path = tmp_path / "tracked.toml"
    path.write_text(CONFIG + tracking)
    return config.load(str(path))


def csv_rows(out: Path) -> dict[tuple[str, str], list[dict[str, str]]]:
    """results.csv grouped by (algorithm, seed)."""
    runs: dict[tuple[str, str], list[dict[str, str]]] = {}
    with (out / "results.csv").open(newline="") as f:
        for row in csv.DictReader(f):
            runs.setdefault((row["algorithm"], row["seed"]), []).append(row)
    return runs


def run(cfg: dict, out: Path, jobs: int = 1) -> None:
    run_experiment(cfg, out, progress=False, stream=open("/dev/null", "w"), jobs=jobs)


@pytest.mark.parametrize("jobs", [1, 2])
def test_tensorboard_holds_the_rows_of_results_csv(tmp_path, jobs):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "out"
    run(tracked(tmp_path, "[tracking]\ntensorboard = true\n"), out, jobs)
    runs = csv_rows(out)
    assert len(runs) == 4
    for (algorithm, seed), rows in runs.items():
        events = EventAccumulator(str(out / "tensorboard" / f"{algorithm}_seed{seed}"))
        events.Reload()
        assert {"objective", "optimality", "nnz", "floats_up"} <= set(events.Tags()["scalars"])
        assert not {"seed", "round", "batch_size"} & set(events.Tags()["scalars"])
        for metric in ("objective", "optimality", "nnz"):
            logged = [(e.step, e.value) for e in events.Scalars(metric)]
            assert [step for step, _ in logged] == [int(r["round"]) for r in rows]
            # TensorBoard stores float32
            assert [v for _, v in logged] == pytest.approx(
                [float(r[metric]) for r in rows], rel=1e-6)


def test_mlflow_runs_hold_the_rows_tags_and_hyperparameters(tmp_path):
    from mlflow import MlflowClient

    out = tmp_path / "out"
    run(tracked(tmp_path, "[tracking]\nmlflow = { experiment = \"fedcomp-test\" }\n"), out,
        jobs=2)
    client = MlflowClient(tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("fedcomp-test")
    found = client.search_runs([experiment.experiment_id])
    runs = csv_rows(out)
    assert sorted(r.info.run_name for r in found) == sorted(f"{a}_seed{s}" for a, s in runs)
    for mlrun in found:
        algorithm, seed = mlrun.data.tags["algorithm"], mlrun.data.tags["seed"]
        assert mlrun.info.status == "FINISHED"
        assert mlrun.data.params["client_lr"] == "0.05"
        rows = runs[(algorithm, seed)]
        history = client.get_metric_history(mlrun.info.run_id, "objective")
        assert [(m.step, m.value) for m in sorted(history, key=lambda m: m.step)] == [
            (int(r["round"]), float(r["objective"])) for r in rows]


def test_a_named_tensorboard_directory_and_a_rerun_replacing_its_old_events(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logdir = tmp_path / "tb"
    cfg = tracked(tmp_path, f"[tracking]\ntensorboard = \"{logdir}\"\n")
    run(cfg, tmp_path / "first")
    run(cfg, tmp_path / "second")  # the same runs again: their directories are replaced
    events = EventAccumulator(str(logdir / "fedmid_seed0"))
    events.Reload()
    assert [e.step for e in events.Scalars("objective")] == [0, 2, 4, 6]


@pytest.mark.parametrize("tracking, message", [
    ("tracking = { wandb = true }", "tracking: unknown tracker 'wandb'; valid: "
                                    "['mlflow', 'tensorboard']"),
    ("tracking = { tensorboard = 3 }", "tracking.tensorboard must be true, false or a table"),
    ("tracking = { mlflow = { url = 'x' } }", "tracking.mlflow: unknown key(s) ['url']"),
    ("tracking = { mlflow = { uri = '' } }", "tracking.mlflow.uri must be a non-empty string"),
    ("tracking = 'tensorboard'", "tracking must be a table such as {tensorboard = true}"),
])
def test_bad_tracking_tables_are_named(tmp_path, tracking, message):
    path = tmp_path / "bad.toml"
    path.write_text(tracking + "\n" + CONFIG)
    with pytest.raises(ConfigError) as info:
        run(config.load(str(path)), tmp_path / "out")
    assert message in str(info.value)
    assert not (tmp_path / "out").exists()


def test_a_missing_tracker_names_its_extra_before_anything_runs(tmp_path, monkeypatch):
    import fedcomp._extras as extras

    installed = extras._installed
    monkeypatch.setattr(extras, "_installed", lambda m: m != "tensorboardX" and installed(m))
    with pytest.raises(MissingExtraError, match=r"pip install 'fedcomp\[tensorboard\]'"):
        run(tracked(tmp_path, "[tracking]\ntensorboard = true\n"), tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_cli_track_option(tmp_path):
    path = tmp_path / "tracked.toml"
    path.write_text(CONFIG)
    cli = [sys.executable, "-m", "fedcomp", "run", str(path), "--quiet", "--seeds", "0"]
    bad = subprocess.run([*cli, "--out", str(tmp_path / "bad"), "--track", "wandb"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2
    assert "--track wandb: unknown tracker; valid: ['mlflow', 'tensorboard']" in bad.stderr
    good = subprocess.run([*cli, "--out", str(tmp_path / "out"), "--track", "tensorboard"],
                          capture_output=True, text=True, timeout=300)
    assert good.returncode == 0, good.stderr
    assert sorted(p.name for p in (tmp_path / "out" / "tensorboard").iterdir()) == [
        "fedda_seed0", "fedmid_seed0"]
