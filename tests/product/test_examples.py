"""The scripts in ``examples/`` run and show what their docstrings say."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sparse_logistic_za1_reaches_x_star_the_others_stall(capsys):
    final = load("sparse_logistic").main(rounds=200)
    assert final["za1"] < 1e-4
    assert final["fedmid"] > 0.1 and final["fedda"] > 0.1  # the client-drift floor
    assert "za1" in capsys.readouterr().out


def test_sparse_mlp_digits_trains_and_sparsifies(capsys):
    pytest.importorskip("torch")
    final = load("sparse_mlp_digits").main(rounds=10)
    assert min(final.values()) > 0.6  # 10 classes: chance is 0.1
    out = capsys.readouterr().out
    assert "fedcanon" in out and "zero weights" in out


def test_sparse_rcv1_configuration_runs_sparse_end_to_end(tmp_path, capsys):
    """``examples/sparse_rcv1.toml`` on reduced documents: every algorithm runs on the sparse
    data (never densified: the problem's features stay SparseFeatures) and lowers the
    objective from log 2, the zero model's."""
    import numpy as np

    from fedcomp import load_results
    from fedcomp.cli import main
    from fedcomp.config import load as load_config
    from fedcomp.experiments import build_problem, resolve

    path = EXAMPLES / "sparse_rcv1.toml"
    assert load_config(str(path))["data"]["shape"] == "rcv1"
    reduced = ["--set", "rounds=10", "--set", "data.shape=[1500, 6000, 0.005]",
               "--set", "data.n_clients=8"]
    assert main(["run", str(path), "--out", str(tmp_path / "out"), *reduced]) == 0
    frame = load_results(tmp_path / "out")
    finals = frame[frame["round"] == 10].set_index("algorithm")["objective"]
    assert len(finals) == 6 and (finals < np.log(2) - 1e-3).all()
    config = load_config(str(path))
    config["data"].update(shape=[300, 2000, 0.01], n_clients=3)
    assert build_problem(resolve(config).base, 0).data.sparse
    assert "za1" in capsys.readouterr().out
