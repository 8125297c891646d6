"""Figures from a results.csv: the figure's title, the panels' titles, the saved file."""

from __future__ import annotations

import csv

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
