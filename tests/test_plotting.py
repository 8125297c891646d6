"""Figures from a results.csv: the figure's title, the panels' titles, the saved file."""

from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from fedcomp.plotting import plot_results, results_figure  # noqa: E402


@pytest.fixture
def results(tmp_path):
    """Two methods, two gradient modes (two panels), three evaluations."""
    path = tmp_path / "results.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, ["algorithm", "method", "batch_size", "seed", "round",
                                    "optimality"])
        writer.writeheader()
        for mode in ("full", "b20"):
            for method in ("za1", "fedmid"):
                for r in (0, 5, 10):
                    writer.writerow({"algorithm": f"{method}_{mode}", "method": method,
                                     "batch_size": mode, "seed": 0, "round": r,
                                     "optimality": 10.0 ** -r if method == "za1" else 0.3})
    return path


def test_suptitle_is_the_title_argument_not_a_panel_name(results):
    import matplotlib.pyplot as plt

    fig = results_figure(results, title="seed000")
    try:
        assert fig._suptitle is not None and fig._suptitle.get_text() == "seed000"
        assert [ax.get_title() for ax in fig.axes] == ["full gradients", "minibatch b20"]
    finally:
        plt.close(fig)


def test_no_title_no_suptitle(results):
    import matplotlib.pyplot as plt

    fig = results_figure(results)
    try:
        assert fig._suptitle is None
    finally:
        plt.close(fig)


def test_plot_results_writes_the_figure(results, tmp_path):
    out = plot_results(results, tmp_path / "plot.png", title="seed000")
    assert out == tmp_path / "plot.png" and out.stat().st_size > 10_000


def _write_rows(path, rows):
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_sweep_settings_are_separate_curves_not_a_seed_band(tmp_path):
    """A --sweep grid's points share the algorithm label: config.json's sweep keys split them."""
    import json

    import matplotlib.pyplot as plt

    # one seed per setting: client_lr 0.01 barely moves, client_lr 1.0 converges
    rows = [{"algorithm": "za1", "method": "za1", "batch_size": "full", "seed": 0,
             "round": r, "algorithm.client_lr": lr, "optimality": rate ** r}
            for lr, rate in (("0.01", 0.99), ("1.0", 0.5)) for r in (0, 5, 10)]
    path = _write_rows(tmp_path / "results.csv", rows)
    (tmp_path / "config.json").write_text(json.dumps(
        {"config": {}, "sweep": {"algorithm.client_lr": [0.01, 1.0]}}))
    fig = results_figure(path)
    try:
        (ax,) = fig.axes
        curves = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
        assert sorted(curves) == ["za1 client_lr=0.01", "za1 client_lr=1"]
        np.testing.assert_allclose(curves["za1 client_lr=1"], 0.5 ** np.array([0, 5, 10]))
        np.testing.assert_allclose(curves["za1 client_lr=0.01"], 0.99 ** np.array([0, 5, 10]))
        assert not ax.collections  # one seed per setting: no spread to shade
        colors = {line.get_color() for line in ax.get_lines()}
        assert len(colors) == 2  # one method, two settings: a color per setting
    finally:
        plt.close(fig)


def test_without_a_sweep_one_curve_per_algorithm_with_its_seed_band(results, tmp_path):
    import json

    import matplotlib.pyplot as plt

    (results.parent / "config.json").write_text(json.dumps({"config": {}, "sweep": {}}))
    fig = results_figure(results)
    try:
        assert [line.get_label() for line in fig.axes[0].get_lines()] == ["za1", "fedmid"]
    finally:
        plt.close(fig)


def test_round_axis_of_async_runs_counts_server_updates(tmp_path):
    """asyncFedDR's `round` is one client's update: the axis must not say communication rounds."""
    import matplotlib.pyplot as plt

    from fedcomp.plotting import ASYNC_ROUND_LABEL, X_LABELS

    rows = [{"algorithm": "feddr", "method": "feddr", "batch_size": "b10", "seed": 0,
             "round": r, "optimality": 0.9 ** r, "sim_time": 5.0 * r, "max_delay": ""}
            for r in (0, 5, 10)]
    rows += [{"algorithm": "async_feddr", "method": "async_feddr", "batch_size": "b10",
              "seed": 0, "round": k, "optimality": 0.99 ** k, "sim_time": 0.3 * k,
              "max_delay": d} for k, d in ((0, 0), (50, 48), (100, 70))]
    path = _write_rows(tmp_path / "results.csv", rows)
    fig = results_figure(path, x_axis="round")
    try:
        assert fig.axes[0].get_xlabel() == ASYNC_ROUND_LABEL
        assert "communication rounds" not in fig.axes[0].get_xlabel()
        assert "server updates" in ASYNC_ROUND_LABEL and "one client" in ASYNC_ROUND_LABEL
    finally:
        plt.close(fig)
    sync = _write_rows(tmp_path / "sync.csv", rows[:3])  # synchronous only: rounds as before
    fig = results_figure(sync, x_axis="round")
    try:
        assert fig.axes[0].get_xlabel() == X_LABELS["round"] == "communication rounds"
    finally:
        plt.close(fig)
    fig = results_figure(path, x_axis="sim_time")  # other axes keep their labels
    try:
        assert fig.axes[0].get_xlabel() == X_LABELS["sim_time"]
    finally:
        plt.close(fig)
