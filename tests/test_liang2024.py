"""The Liang, Peng, Zhang (2023) experiment configurations run end to end at reduced size."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np
import pytest

from fedcomp.config import ConfigError, apply_override, build_problem, load, resolve
from fedcomp.data import LiangSampler, liang_logistic_models
from fedcomp.experiments import EXPERIMENTS, run_experiment

CONFIGS = Path(__file__).parents[1] / "configs"
REDUCED = ["rounds=4", "eval_every=2", "data.n_features=40", "data.sparsity=4",
           "topology.sparsity=4", "algorithms.drefedda_gt.sparsity=4",
           "algorithms.mrefedda_gt.sparsity=4", "algorithms.mrefedda_gt.stage_rounds=2"]


@pytest.mark.parametrize("name", ["liang2024_linear", "liang2024_logistic"])
def test_config_runs_every_algorithm_at_reduced_size(name, tmp_path):
    cfg = load(CONFIGS / f"{name}.toml")
    for assignment in REDUCED:
        cfg = apply_override(cfg, assignment)
    labels = [a.get("label", a["name"]) for a in cfg["algorithms"]]
    assert labels == ["dfedmid", "dfedda", "dfedda_gt", "drefedda_gt", "mrefedda_gt",
                      "fast_fedda", "c_fedda"]
    problem = build_problem(resolve(cfg))
    assert problem.sampler is not None and problem.ground_truth is not None
    assert np.count_nonzero(problem.ground_truth) == 4
    out = io.StringIO()
    summary = run_experiment(cfg, tmp_path, progress=False, stream=out)
    assert [r["status"] for r in summary] == ["ok"] * 7
    for row in summary:
        assert np.isfinite(row["l1_error"]) and np.isfinite(row["population_gap"])
    assert "Verdict:" in out.getvalue()
    with (tmp_path / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {"node0_l1_error", "l1_error_sparse", "consensus_error"} <= set(rows[0])
    gossip = [r for r in rows if r["algorithm"] == "dfedda_gt" and r["round"] == "4"][0]
    assert float(gossip["consensus_error"]) > 0 and gossip["node0_l1_error"] != ""
    assert (tmp_path / "plot.png").exists()
    assert name in EXPERIMENTS
    import json

    meta = json.loads((tmp_path / "config.json").read_text())
    assert abs(meta["settings"]["base"]["topology"]["sigma2"] - 0.987) < 5e-4


def test_decentralized_algorithms_need_a_topology_and_streaming_a_sampler():
    cfg = load(CONFIGS / "liang2024_linear.toml")
    del cfg["topology"]
    with pytest.raises(ConfigError, match=r"add a \[topology\] table"):
        resolve(cfg)
    cfg = load(CONFIGS / "liang2024_linear.toml")
    with pytest.raises(ConfigError, match="unknown topology"):
        resolve(apply_override(cfg, "topology.name=star"))
    cfg["data"] = {"generator": "bao_sparse_regression"}
    with pytest.raises(ConfigError, match="needs a generator with a sampler"):
        resolve(cfg)


def test_logistic_optimum_is_the_population_minimiser():
    w_tilde, w_star = liang_logistic_models(4, 12, 3, seed=2)
    assert np.count_nonzero(w_star) == 3
    f = LiangSampler("logistic", w_tilde).population_objective
    f_star = f(w_star)
    rng = np.random.default_rng(0)
    for _ in range(6):  # every direction increases the objective (quadratically)
        e = rng.normal(size=12)
        e /= np.linalg.norm(e)
        up, down = f(w_star + 1e-3 * e) - f_star, f(w_star - 1e-3 * e) - f_star
        assert up > 0 and down > 0
        assert abs(up - down) < 1e-3 * up  # no first-order term: the gradient vanishes


@pytest.mark.parametrize("name", ["liang2024_linear", "liang2024_logistic"])
def test_builtin_experiment_equals_the_config_file(name):
    import tomllib

    text = (CONFIGS / f"{name}.toml").read_text()
    assert EXPERIMENTS[name].TOML == text
    assert resolve(tomllib.loads(text)) == resolve(EXPERIMENTS[name].CONFIG)
