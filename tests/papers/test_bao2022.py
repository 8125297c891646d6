"""Bao et al. 2022's recovery experiments (Figures 1 and 2) at reduced size.

Not marked slow: each reduced run takes 8–15 s on a shared 2-core machine.
"""

from __future__ import annotations

import csv
import io

import numpy as np
import pytest

from fedcomp.config import load
from fedcomp.experiments import run_experiment
from fedcomp.experiments.claims import bao2022_lowrank, bao2022_sparse_regression


def reduced(module, rounds=240):
    """The experiment on a small instance: same algorithms and hyperparameters otherwise."""
    cfg = load(module.__name__.rsplit(".", 1)[-1])
    # one seed: the checks below are of one run (the configs run three or five)
    cfg.update(rounds=rounds, eval_every=rounds // 4, clients_per_round=4, seeds=[0])
    # λ of the order of the statistical noise level: σ√(log p / N) for the sparse problem
    # (the paper's 0.5⁵ ≈ √(log 1024 / 8192)), σ√(p / N) for the matrix one
    if module is bao2022_sparse_regression:
        cfg["data"].update(n_clients=8, samples_per_client=64, n_features=40, sparsity=8)
        lam, radius = 0.1, 16.0  # ε_0 = 2‖w*‖₁
    else:
        cfg["data"].update(n_clients=8, samples_per_client=64, size=6, rank=2)
        lam, radius = 0.2, 4.0  # ε_0 = 2‖W*‖_*
    cfg["regularizer"]["alpha"] = lam
    for entry in cfg["algorithms"]:
        if "radius" in entry:
            entry["radius"] = radius
        if entry["name"] == "mc_fedda":
            entry["stage_rounds"] = rounds // 3
            entry["reg_strengths"] = [4 * lam, 2 * lam, lam]
        if entry["name"] in ("fedmid", "fedda"):
            entry["client_lr"] = 0.01  # the paper's tuning grid, for the smaller L here
        if "smoothness" in entry:
            entry["smoothness"] = "auto"  # L = the largest client constant of this instance
    return cfg


def final_rows(out):
    rows = list(csv.DictReader((out / "results.csv").open()))
    last = max(int(r["round"]) for r in rows)
    return rows, {r["algorithm"]: r for r in rows if int(r["round"]) == last}


def summary_columns(out, *columns):
    """``{algorithm: (column values...)}`` from the per-run Markdown table of ``summary.md``
    (after its median table)."""
    text = (out / "summary.md").read_text().split("## Every run", 1)[-1]
    lines = [line for line in text.splitlines() if line.startswith("|")]
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    table = {}
    for line in lines[2:]:
        cells = dict(zip(header, (c.strip() for c in line.strip("|").split("|")), strict=True))
        table[cells["algorithm"]] = tuple(cells[c] for c in columns)
    return table


def test_sparse_regression_experiment_runs_and_recovers(tmp_path):
    summary = run_experiment(reduced(bao2022_sparse_regression), tmp_path, progress=False,
                             stream=io.StringIO())
    assert all(r["status"] == "ok" for r in summary)
    rows, final = final_rows(tmp_path)
    assert set(final) == {"fedmid", "fedda", "fast_fedda", "c_fedda", "mc_fedda"}
    for metric in ("l2_error", "l1_error", "support_f1", "training_loss"):
        assert (tmp_path / f"plot_{metric}.png").stat().st_size > 5_000
    start = float(next(r for r in rows if r["round"] == "0")["l2_error"])
    assert start == pytest.approx(np.sqrt(8))  # w = 0 against w* = (1_8, 0)
    for name, row in final.items():  # every method moves well towards w*
        assert float(row["l2_error"]) < 0.5 * start, name
    # the dual-averaging methods with a last-iterate output select the support at this size
    # (C-FedDA and MC-FedDA output a weighted average of their iterates, whose support is
    # the union of theirs: see the issue note)
    for name in ("fedda", "fast_fedda"):
        assert float(final[name]["support_f1"]) >= 0.9, name
    text = (tmp_path / "summary.md").read_text()
    assert "Verdict:" in text and "rule:" in text
    # the table states the final l2 error, F1 and rank of every algorithm; rank is defined
    # for matrix models only: "—" here, and no rank figure
    table = summary_columns(tmp_path, "l2_error", "support_f1", "rank")
    assert set(table) == set(final)
    for name, (l2, f1, rank) in table.items():
        assert float(l2) == pytest.approx(float(final[name]["l2_error"]), rel=1e-3), name
        assert float(f1) == pytest.approx(float(final[name]["support_f1"]), rel=1e-3), name
        assert rank == "—", name
    assert not (tmp_path / "plot_rank.png").exists()


def test_lowrank_experiment_runs_and_recovers_the_rank(tmp_path):
    summary = run_experiment(reduced(bao2022_lowrank), tmp_path, progress=False,
                             stream=io.StringIO())
    assert all(r["status"] == "ok" for r in summary)
    rows, final = final_rows(tmp_path)
    for metric in ("l2_error", "operator_error", "support_f1", "rank", "training_loss"):
        assert (tmp_path / f"plot_{metric}.png").stat().st_size > 5_000
    start = float(next(r for r in rows if r["round"] == "0")["l2_error"])
    assert start == pytest.approx(np.sqrt(2))  # ‖diag(1, 1, 0, 0, 0, 0)‖_F
    for name, row in final.items():
        assert float(row["l2_error"]) < 0.4 * start, name
        assert float(row["operator_error"]) <= float(row["l2_error"]) + 1e-12
    for name in ("fedda", "fast_fedda"):
        assert float(final[name]["rank"]) == 2, name
    assert "Verdict:" in (tmp_path / "summary.md").read_text()
    # the table states the final Frobenius error, (entrywise) support F1 and rank of each
    table = summary_columns(tmp_path, "l2_error", "support_f1", "rank")
    assert set(table) == set(final)
    for name, (l2, f1, rank) in table.items():
        assert float(l2) == pytest.approx(float(final[name]["l2_error"]), rel=1e-3), name
        assert 0 <= float(f1) <= 1 and float(f1) == pytest.approx(
            float(final[name]["support_f1"]), rel=1e-3), name
        assert int(rank) == float(final[name]["rank"]), name
