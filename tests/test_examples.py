"""The scripts in ``examples/`` run and show what their docstrings say."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


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
