"""The command line, run as real processes: outputs contract, errors, list, plot."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedcomp.cli import main
from fedcomp.config import load, parse_seeds
from fedcomp.experiments import RESULT_COLUMNS
from fedcomp.experiments.claims import seed000

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
    names = [a["name"] for a in load("seed000")["algorithms"]]
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
    assert "| za1_full" in summary  # every run's row in summary.md
    assert "| za1 | full |" in res.stdout  # the median rows are printed
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
    config = Path(__file__).parents[2] / "fedcomp" / "configs" / "seed000.toml"
    res = fedcomp("run", str(config), *SMALL, "--out", str(tmp_path / "t"), "--quiet")
    assert res.returncode == 0, res.stderr


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
    assert res.returncode == 2 and "does not exist" in res.stderr and "seed000" in res.stderr
    res = fedcomp("run", "seed00")
    assert res.returncode == 2 and "neither a config file nor a built-in" in res.stderr


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
    # topologies and experiments: every registered one, with its description
    from fedcomp.config import experiment_names
    from fedcomp.topology import TOPOLOGIES

    graphs = fedcomp("list", "topologies").stdout
    assert graphs.startswith("topologies:") and "algorithms:" not in graphs
    assert {line.split()[0] for line in graphs.splitlines()[1:] if line.strip()} == set(
        TOPOLOGIES)
    assert "Metropolis" in graphs
    experiments = fedcomp("list", "experiments").stdout
    assert {line.split()[0] for line in experiments.splitlines()[1:] if line.strip()} == set(
        experiment_names())


BASH_COMPLETE = """
source <("$FEDCOMP" completion bash)
complete_line() {  # the words typed so far (the last one being completed): the candidates
  COMP_WORDS=("$@"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
  COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
  _shtab_fedcomp; printf '%s ' "${COMPREPLY[@]}"; echo
}
complete_line fedcomp ru
complete_line fedcomp run feddr_
complete_line fedcomp run --tr
complete_line fedcomp list top
complete_line fedcomp show my
"""


@pytest.mark.skipif(not shutil.which("bash"), reason="needs bash")
def test_bash_completion_completes_commands_options_and_experiments(tmp_path):
    pytest.importorskip("shtab")
    (tmp_path / "my_config.toml").write_text("")
    (tmp_path / "my_notes.txt").write_text("")
    script = Path(sys.executable).with_name("fedcomp")
    res = subprocess.run(["bash", "-c", BASH_COMPLETE], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "FEDCOMP": str(script)}, timeout=60)
    assert res.returncode == 0, res.stderr
    assert [line.split() for line in res.stdout.splitlines()] == [
        ["run"], ["feddr_async", "feddr_mlp", "feddr_synthetic"], ["--track"], ["topologies"],
        ["my_config.toml"]]  # configs complete to *.toml files, not to other files


def test_zsh_completion_script():
    pytest.importorskip("shtab")
    res = fedcomp("completion", "zsh")
    assert res.returncode == 0 and res.stdout.startswith("#compdef fedcomp")
    assert "--track" in res.stdout and "completion" in res.stdout
    assert "seed000" in res.stdout  # the built-in experiments complete a config argument
    if shutil.which("zsh"):  # the script parses in zsh itself
        check = subprocess.run(["zsh", "-n"], input=res.stdout, capture_output=True,
                               text=True, timeout=60)
        assert check.returncode == 0, check.stderr
    bad = fedcomp("completion", "fish")
    assert bad.returncode == 2 and "invalid choice: 'fish'" in bad.stderr


def test_plot_command(tmp_path):
    out_dir = tmp_path / "p"
    assert fedcomp("run", *SMALL, "--out", str(out_dir), "--quiet").returncode == 0
    res = fedcomp("plot", str(out_dir), "--metric", "objective", "--x", "floats_up")
    assert res.returncode == 0, res.stderr
    assert (out_dir / "plot_objective_floats_up.png").stat().st_size > 10_000
    bad = fedcomp("plot", str(tmp_path / "empty"))
    assert bad.returncode == 2 and "not found" in bad.stderr
    # several runs overlay in one figure, written where the command runs
    second = tmp_path / "q"
    assert fedcomp("run", *SMALL, "--set", "rounds=8", "--out", str(second),
                   "--quiet").returncode == 0
    res = fedcomp("plot", str(out_dir), str(second), "--metric", "objective", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "plot_objective_round.png").stat().st_size > 10_000
    bad = fedcomp("plot", str(out_dir), str(tmp_path / "empty"))
    assert bad.returncode == 2 and "empty/results.csv not found" in bad.stderr


def test_the_resume_hint_names_the_output_directory():
    from fedcomp.cli import resume_command

    assert resume_command(["run"], Path("runs/a b")) == "fedcomp run --out 'runs/a b' --resume"
    given = ["run", "x.toml", "--out", "o", "--resume"]
    assert resume_command(given, Path("o")) == "fedcomp run x.toml --out o --resume"


def test_bench_is_offered_only_where_the_benchmarks_are(monkeypatch, capsys):
    import fedcomp.cli as cli
    from fedcomp.cli import _bench

    assert "bench" in cli.build_parser().format_help()  # this source checkout
    monkeypatch.setattr(_bench, "BENCHMARKS", Path("/nonexistent/benchmarks"))  # as in a wheel
    assert "bench" not in cli.build_parser().format_help()
    with pytest.raises(SystemExit) as caught:
        cli.main(["bench", "--help"])
    assert caught.value.code == 2 and "invalid choice: 'bench'" in capsys.readouterr().err


@pytest.mark.slow
def test_default_run_reproduces_seed000(tmp_path):
    """`fedcomp run` with no config, as `make demo` runs it: seed000 with one seed, one
    median row per algorithm and gradient mode, the verdict, what to run next."""
    res = fedcomp("run", "--out", str(tmp_path / "default"), "--quiet")
    assert res.returncode == 0, res.stderr
    table = [line for line in res.stdout.splitlines() if line.startswith("| ")]
    assert len(table) == 1 + 6 * 2  # the header, six algorithms x two gradient modes
    assert "fedcomp.load_results(" in res.stderr and "seed 0" in res.stderr
    rows = list(csv.DictReader((tmp_path / "default" / "results.csv").open()))
    final = {(r["method"], r["batch_size"]): {"optimality": float(r["optimality"])}
             for r in rows if r["round"] == "500"}
    verdict, _ = seed000.verdict(final)
    assert verdict == "reproduced", final
    assert "Verdict: reproduced" in res.stdout
    assert "Verdict: reproduced" in (tmp_path / "default" / "summary.md").read_text()


# --- --set on algorithm entries: labels, ambiguous names, the variants' own lists -----------
FEDDR_SYNTHETIC = Path(__file__).parents[2] / "fedcomp" / "configs" / "feddr_synthetic.toml"


def _by_label(entries):
    return {a.get("label", a["name"]): a for a in entries}


# --- bad values: one 'error:' line naming the key, exit status 2 ------------------------------
BC_CONFIG = """\
name = "bc"
rounds = 2
reference = false
metrics = ["objective"]
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
client_lr = 0.01
local_steps = 2
"""


@pytest.mark.parametrize("override, message", [
    ("seeds=0", "seeds must be a non-empty list of non-negative integers"),
    ("seeds=[]", "seeds must be a non-empty list"),
    ("seeds=[-1]", "seeds must be a non-empty list of non-negative integers"),
    ("seeds=[1.5]", "seeds must be a non-empty list"),
    ('data.partition={name="dirichlet", concentration="0.5"}',
     "data.partition.concentration must be a number (got '0.5')"),
    ('regularizer.alpha="0.1"', "regularizer.alpha must be a number (got '0.1')"),
    ("data.seed=1.5", "data.seed must be an integer (got 1.5)"),
    ("data.seed=-1", "data.seed must be a non-negative integer (got -1)"),
    ('data="breast_cancer"', "data must be a table"),
    ("data.n_clients=2.5", "data.n_clients must be an integer (got 2.5)"),
    ('data.partition={name="shards", shards_per_client=2.0}',
     "data.partition.shards_per_client must be an integer"),
    ('algorithms.fedmid.client_lr="0.1"',
     "algorithms.fedmid.client_lr must be a number (got '0.1'); write it without quotes"),
])
def test_bad_values_fail_before_running_and_name_the_key(tmp_path, capsys, override, message):
    config = tmp_path / "bc.toml"
    config.write_text(BC_CONFIG)
    out = tmp_path / "out"
    assert main(["run", str(config), "--set", override, "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"error: {message}" in err, err
    assert not out.exists()  # nothing written


def test_negative_seeds_on_the_command_line_exit_nonzero(tmp_path):
    res = fedcomp("run", "seed000", "--seeds=-1", "--set", "clients_per_round=5",
                  "--out", str(tmp_path / "neg"), "--quiet")
    assert res.returncode == 2, res.stderr
    assert "seeds must be non-negative integers (got -1)" in res.stderr
    assert "Traceback" not in res.stderr and not (tmp_path / "neg").exists()
    with pytest.raises(ValueError, match="non-negative"):
        parse_seeds("-2:1")


def test_missing_data_file_and_type_errors_are_one_line(tmp_path, capsys, monkeypatch):
    from fedcomp import experiments

    config = tmp_path / "svm.toml"
    config.write_text(BC_CONFIG.replace('generator = "breast_cancer"',
                                        f'generator = "libsvm_file"\npath = '
                                        f'"{tmp_path / "missing.svm"}"'))
    assert main(["run", str(config), "--out", str(tmp_path / "a"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error: data file" in err and "missing.svm" in err

    def wrong_type(*args, **kwargs):
        raise TypeError("unsupported operand type(s) for *: 'float' and 'str'")

    monkeypatch.setattr(experiments, "run_experiment", wrong_type)
    config.write_text(BC_CONFIG)
    assert main(["run", str(config), "--out", str(tmp_path / "b"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error: unsupported operand" in err and "FEDCOMP_DEBUG=1" in err
    monkeypatch.setenv("FEDCOMP_DEBUG", "1")  # the traceback, for a bug report
    with pytest.raises(TypeError, match="unsupported operand"):
        main(["run", str(config), "--out", str(tmp_path / "c"), "--quiet"])


# --- timing configs (kind = "timing") check their keys too -------------------------------
def test_timing_config_keys_are_checked(tmp_path, capsys):
    import tomllib

    from fedcomp.config import ConfigError, quick_config, reading_config, readings
    from fedcomp.experiments.claims import prox_cost

    path = Path(__file__).parents[2] / "fedcomp" / "configs" / "prox_cost.toml"
    good = tomllib.loads(path.read_text())
    prox_cost.check_config(good)
    prox_cost.check_config(quick_config(good))
    # its diagnosis readings (a measured variant) are checked like the config itself
    for name in readings(good):
        in_reading = reading_config(good, name)
        prox_cost.check_config(in_reading)
        assert in_reading["reading"] == name
    assert reading_config(good, "batch1")["batch_size"] == 1
    typo = tmp_path / "timing.toml"
    typo.write_text(path.read_text().replace("batch_size = 64", "batch_sise = 64"))
    assert main(["run", str(typo), "--out", str(tmp_path / "t"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "unknown key(s) ['batch_sise']; accepted: ['batch_size'" in err
    assert not (tmp_path / "t").exists()
    bad_network = {**good, "networks": [{**good["networks"][0], "optoins": {"hidden": [5]}}]}
    with pytest.raises(ConfigError, match=r"networks \(mlp\): unknown key\(s\) \['optoins'\]"):
        prox_cost.check_config(bad_network)
    bad_penalty = {**good, "penalties": [{"name": "mcp", "alpha": 1e-4, "gama": 3.0}]}
    with pytest.raises(ConfigError, match=r"penalties \(mcp\): unknown key\(s\) \['gama'\]"):
        prox_cost.check_config(bad_penalty)
    with pytest.raises(ConfigError, match="repeats must be a positive integer"):
        prox_cost.check_config({**good, "repeats": 0})


def test_plot_rejects_a_metric_that_is_not_a_column(tmp_path, capsys):
    (tmp_path / "results.csv").write_text(
        "algorithm,method,batch_size,seed,round,objective,optimality\n"
        "za1,za1,full,0,0,1.0,1.0\nza1,za1,full,0,1,0.5,0.1\n")
    assert main(["plot", str(tmp_path), "--metric", "optimalty"]) == 2
    err = capsys.readouterr().err
    assert "no column 'optimalty'" in err and "['objective', 'optimality']" in err
    assert not list(tmp_path.glob("*.png"))


def test_dry_run_prints_the_setting_and_the_planned_runs_and_writes_nothing(
        tmp_path, capsys, monkeypatch):
    import tomllib

    monkeypatch.chdir(tmp_path)  # the default --out would be runs/seed000-TIME here
    assert main(["run", "seed000", *SMALL, "--seeds", "0:2", "--dry-run",
                 "--sweep", "rounds=4,8"]) == 0
    assert list(tmp_path.iterdir()) == []
    out = capsys.readouterr().out
    setting, _, runs = out.partition("\n# planned: ")
    resolved = tomllib.loads(setting)  # the resolved configuration, as `fedcomp show` prints
    assert resolved["seeds"] == [0, 1] and resolved["data"]["n_clients"] == 5
    lines = runs.strip().splitlines()
    algorithms = [a["name"] for a in load("seed000")["algorithms"]]
    expected = 2 * 2 * 2 * len(algorithms)  # sweep points x seeds x gradient modes x algorithms
    assert lines[0].startswith(f"{expected} runs (2 settings x 2 seeds")
    assert len(lines) == 1 + expected
    assert lines[1] == (f"algorithm={algorithms[0]}_full method={algorithms[0]} "
                        "batch_size=full seed=0 rounds=4")
    assert {line.rsplit("rounds=", 1)[1] for line in lines[1:]} == {"4", "8"}
