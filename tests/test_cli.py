"""The command line, run as real processes: outputs contract, errors, list, plot."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedcomp.config import apply_override, parse_seeds, resolve
from fedcomp.experiments import RESULT_COLUMNS, seed000

SMALL = ["--set", "rounds=12", "--set", "eval_every=4", "--set", "data.n_clients=5",
         "--set", "data.samples_per_client=80", "--set", "batch_size=['full', 10]"]


def fedcomp(*args, cwd=None, env_extra=None):
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "fedcomp", *args], capture_output=True,
                          text=True, cwd=cwd, env=env, timeout=600)


def test_help_works_both_ways():
    out = fedcomp("--help")
    assert out.returncode == 0 and "run" in out.stdout and "list" in out.stdout
    script = Path(sys.executable).parent / "fedcomp"  # the console script of this environment
    entry = subprocess.run([str(script), "--help"], capture_output=True, text=True)
    assert entry.returncode == 0 and "plot" in entry.stdout


def test_run_writes_the_output_contract(tmp_path):
    out_dir = tmp_path / "run"
    res = fedcomp("run", *SMALL, "--seeds", "0:2", "--out", str(out_dir), "--quiet")
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader((out_dir / "results.csv").open()))
    assert rows and set(RESULT_COLUMNS) <= set(rows[0])
    labels = {r["algorithm"] for r in rows}
    names = [a["name"] for a in seed000.CONFIG["algorithms"]]
    assert names[:3] == ["za1", "fedmid", "fedda"]  # the paper's three, then later ones
    assert labels == {f"{a}_{m}" for a in names for m in ("full", "b10")}
    assert {r["seed"] for r in rows} == {"0", "1"}
    # 0, 4, 8, 12: four evaluations per run, 2 gradient modes per algorithm, 2 seeds
    assert len(rows) == 2 * 2 * len(names) * 4
    meta = json.loads((out_dir / "config.json").read_text())
    assert meta["seeds"] == [0, 1] and meta["config"]["rounds"] == 12
    assert meta["config"]["data"]["n_clients"] == 5
    assert {"fedcomp", "numpy", "python"} <= set(meta["versions"])
    models = sorted(p.name for p in (out_dir / "models").iterdir())
    assert "za1_full_seed0.npy" in models and len(models) == 2 * 2 * len(names)
    assert np.load(out_dir / "models" / "za1_full_seed1.npy").shape == (60,)
    summary = (out_dir / "summary.md").read_text()
    assert "za1_full" in summary and "optimality" in summary
    assert "| za1_full" in res.stdout  # the table is printed too
    assert (out_dir / "plot.png").stat().st_size > 10_000
    # results.csv rows are consistent with the saved final models' optimality ordering
    final = [r for r in rows if r["algorithm"] == "za1_full" and r["round"] == "12"]
    assert all(float(r["optimality"]) < 1 for r in final)


def test_run_refuses_to_overwrite_results(tmp_path):
    out_dir = tmp_path / "run"
    assert fedcomp("run", *SMALL, "--out", str(out_dir), "--quiet").returncode == 0
    again = fedcomp("run", *SMALL, "--out", str(out_dir), "--quiet")
    assert again.returncode == 2 and "already exists" in again.stderr


def test_run_from_toml_file(tmp_path):
    config = Path(__file__).parents[1] / "configs" / "seed000.toml"
    res = fedcomp("run", str(config), *SMALL, "--out", str(tmp_path / "t"), "--quiet")
    assert res.returncode == 0, res.stderr


def test_toml_config_equals_builtin_default():
    import tomllib

    path = Path(__file__).parents[1] / "configs" / "seed000.toml"
    assert resolve(tomllib.loads(path.read_text())) == resolve(seed000.CONFIG)


@pytest.mark.parametrize("override, message", [
    ("algorithms.za1.name=fedfoo", "unknown algorithm 'fedfoo'; valid"),
    ("regularizer.name=l3", "unknown regularizer 'l3'; valid"),
    ("problem.loss=hinge", "unknown loss 'hinge'; valid"),
    ("data.generator=mnist9", "unknown dataset 'mnist9'; valid"),
    ("algorithms.za1.step=2", "unknown key(s) ['step']"),
    ("algorithms.fedx.client_lr=2", "no algorithm named 'fedx'"),
    ("metrics=['accuracy']", "unknown metric 'accuracy'"),
])
def test_bad_configs_fail_with_the_valid_names(tmp_path, override, message):
    res = fedcomp("run", "--set", override, "--out", str(tmp_path / "x"))
    assert res.returncode == 2
    assert message in res.stderr
    assert "Traceback" not in res.stderr


def test_missing_config_file_is_a_clear_error(tmp_path):
    res = fedcomp("run", str(tmp_path / "nope.toml"))
    assert res.returncode == 2 and "neither a config file" in res.stderr


def test_divergence_is_reported_and_other_runs_kept(tmp_path):
    out_dir = tmp_path / "d"
    res = fedcomp("run", *SMALL, "--set", "algorithms.fedmid.client_lr=1e6",
                  "--set", "batch_size='full'", "--out", str(out_dir), "--quiet")
    assert res.returncode == 1
    assert "diverged (norm" in res.stderr and "smaller step" in res.stderr
    rows = list(csv.DictReader((out_dir / "results.csv").open()))
    assert {"za1", "fedda"} <= {r["algorithm"] for r in rows}
    assert "diverged" in (out_dir / "summary.md").read_text()


def test_list_names_every_component():
    res = fedcomp("list")
    assert res.returncode == 0
    for word in ("algorithms:", "za1", "regularizers:", "mcp", "losses:", "softmax",
                 "datasets:", "synthetic_fedprox", "partitioners:", "dirichlet", "metrics:"):
        assert word in res.stdout
    only = fedcomp("list", "algorithms")
    assert "fedda" in only.stdout and "regularizers:" not in only.stdout


def test_plot_command(tmp_path):
    out_dir = tmp_path / "p"
    assert fedcomp("run", *SMALL, "--out", str(out_dir), "--quiet").returncode == 0
    res = fedcomp("plot", str(out_dir), "--metric", "objective", "--x", "floats_up")
    assert res.returncode == 0, res.stderr
    assert (out_dir / "plot_objective_floats_up.png").stat().st_size > 10_000
    bad = fedcomp("plot", str(tmp_path / "empty"))
    assert bad.returncode == 2 and "not found" in bad.stderr


def test_overrides_and_seeds_parsing():
    cfg = {"algorithms": [{"name": "za1"}, {"name": "fedda"}]}
    cfg = apply_override(cfg, "algorithms.*.local_steps=3")
    assert [a["local_steps"] for a in cfg["algorithms"]] == [3, 3]
    assert apply_override({}, "a.b='x y'") == {"a": {"b": "x y"}}
    assert apply_override({}, "name=plainword") == {"name": "plainword"}
    assert parse_seeds("0:3") == [0, 1, 2] and parse_seeds("4") == [4]
    assert parse_seeds("1,5") == [1, 5]
    with pytest.raises(ValueError, match="seeds"):
        parse_seeds("a:b")


@pytest.mark.slow
def test_default_run_reproduces_seed000(tmp_path):
    """`fedcomp run` with no config: the full default experiment, as `make demo` runs it."""
    res = fedcomp("run", "--out", str(tmp_path / "default"), "--quiet")
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader((tmp_path / "default" / "results.csv").open()))
    final = {(r["method"], r["batch_size"]): {"optimality": float(r["optimality"])}
             for r in rows if r["round"] == "500"}
    verdict, _ = seed000.verdict(final)
    assert verdict == "reproduced", final
    assert "Verdict: reproduced" in res.stdout
    assert "Verdict: reproduced" in (tmp_path / "default" / "summary.md").read_text()
