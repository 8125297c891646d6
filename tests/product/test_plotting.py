"""Figures from a results.csv: titles, panels (order, shared y, none empty), the legend, axis
labels, colors told apart, the saved SVG and PNG."""

from __future__ import annotations

import csv

import numpy as np
import pytest

pytest.importorskip("matplotlib")

from fedcomp.config import experiment_names  # noqa: E402
from fedcomp.plotting import curve_colors, plot_results, results_figure  # noqa: E402


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
        # one curve each (the first algorithm drawn last, on top), listed in order
        assert sorted(line.get_label() for line in fig.axes[0].get_lines()) == ["fedmid", "za1"]
        assert [t.get_text() for t in fig.legends[0].get_texts()] == ["za1", "fedmid"]
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


def test_a_variant_without_the_metric_gets_no_panel(tmp_path):
    """feddr_mlp: the synthetic variant has no test split; its test_accuracy is all NaN."""
    import matplotlib.pyplot as plt

    from fedcomp.plotting import panels_of, read_results

    rows = [{"algorithm": method, "method": method, "batch_size": "b10", "seed": 0,
             "round": r, "variant": variant,
             "test_accuracy": "nan" if variant == "synthetic" else 0.1 * r,
             "objective": 1.0 / (1 + r)}
            for variant in ("digits", "synthetic") for method in ("fedprox", "feddr")
            for r in (0, 5, 10)]
    path = _write_rows(tmp_path / "results.csv", rows)
    assert panels_of(read_results(path), "test_accuracy") == [("digits", "b10")]
    fig = results_figure(path, "test_accuracy", fallback=False)
    try:
        assert [ax.get_title() for ax in fig.axes] == ["digits: minibatch b10"]
        assert all(ax.get_lines() for ax in fig.axes)  # no empty panel
    finally:
        plt.close(fig)
    fig = results_figure(path, "objective")  # both variants record the objective
    try:
        assert len(fig.axes) == 2 and all(ax.get_lines() for ax in fig.axes)
    finally:
        plt.close(fig)
    with pytest.raises(ValueError, match="no run records a finite 'optimality'"):
        results_figure(path, "optimality", fallback=False)


def test_panels_read_full_then_minibatches_by_size_and_share_the_y_axis(tmp_path):
    import matplotlib.pyplot as plt

    rows = [{"algorithm": f"za1_{mode}", "method": "za1", "batch_size": mode, "seed": 0,
             "round": r, "optimality": scale * 0.5 ** r}
            for mode, scale in (("b100", 1.0), ("b20", 10.0), ("full", 100.0)) for r in (0, 5)]
    fig = results_figure(_write_rows(tmp_path / "results.csv", rows))
    try:
        assert [ax.get_title() for ax in fig.axes] == [
            "full gradients", "minibatch b20", "minibatch b100"]
        assert len({ax.get_ylim() for ax in fig.axes}) == 1  # compared on one y scale
        assert fig.axes[0].get_ylabel() and not fig.axes[1].get_ylabel()
    finally:
        plt.close(fig)


def test_one_legend_below_the_panels_not_over_the_curves(results):
    import matplotlib.pyplot as plt

    fig = results_figure(results)
    try:
        assert all(ax.get_legend() is None for ax in fig.axes)
        (legend,) = fig.legends
        assert [t.get_text() for t in legend.get_texts()] == ["za1", "fedmid"]
        fig.canvas.draw()
        box = legend.get_window_extent()
        assert all(box.y1 <= ax.get_window_extent().y0 for ax in fig.axes)  # below the axes
    finally:
        plt.close(fig)


def test_readable_axis_labels(results):
    import matplotlib.pyplot as plt

    from fedcomp.plotting import X_LABELS, Y_LABELS

    fig = results_figure(results)
    try:
        assert fig.axes[0].get_ylabel().startswith("optimality ‖x − x*‖ / ‖x*‖")
        assert fig.axes[0].get_xlabel() == "communication rounds"
    finally:
        plt.close(fig)
    assert X_LABELS["wall_s"] == "wall time (s)" and X_LABELS["floats_up"] == "floats uploaded"
    assert all("||" not in label for label in Y_LABELS.values())


def test_figures_save_as_svg_and_png(results, tmp_path):
    svg = plot_results(results, tmp_path / "plot.svg")
    assert svg.read_text().lstrip().startswith("<?xml") and "<svg" in svg.read_text()
    again = plot_results(results, tmp_path / "again.svg")
    assert again.read_text() == svg.read_text()  # no date, fixed ids: redrawn, unchanged


def _distinct(colors):
    from itertools import combinations

    from fedcomp.plotting import MIN_COLOR_DISTANCE, color_distance

    return all(color_distance(a, b) >= MIN_COLOR_DISTANCE for a, b in combinations(colors, 2))


@pytest.mark.parametrize("name", [n for n in experiment_names() if n != "prox_cost"])
def test_the_curves_of_each_experiment_have_distinct_colors(name):
    """Every pair of algorithms one built-in experiment draws together is ΔE >= 25 apart, each
    in its own color (one color per algorithm throughout the report)."""
    from fedcomp.config import load
    from fedcomp.experiments import validate
    from fedcomp.plotting import COLORS

    algorithms = validate(load(name))["algorithms"]
    curves = [(a.get("label") or a["name"], a["name"]) for a in algorithms]
    if any("privacy" in a for a in algorithms):
        # drawn as one utility-against-epsilon line per algorithm (report.draw_privacy_figure)
        curves = [(method, method) for method in dict.fromkeys(m for _, m in curves)]
    colors = curve_colors(curves)
    pairs = list(zip(curves, colors, strict=True))
    assert len(set(colors)) == len(curves) and _distinct(colors), pairs
    methods = [method for _, method in curves]
    for (label, method), color in zip(curves, colors, strict=True):
        if label in COLORS or methods.count(method) == 1:  # not a sweep: its own color
            assert color == COLORS.get(label, COLORS[method]), (label, method)


def test_sweep_curves_are_told_apart_from_each_other_and_the_baselines():
    from fedcomp.plotting import COLORS

    curves = [(f"fedcanon lr={lr}", "fedcanon") for lr in (0.01, 0.1, 1.0)]
    curves += [("fedmid", "fedmid"), ("za1", "za1")]
    colors = curve_colors(curves)
    assert colors[3:] == [COLORS["fedmid"], COLORS["za1"]]  # baselines keep their colors
    assert _distinct(colors)
    nine = curve_colors([(f"a{i}", "fedcanon") for i in range(9)])  # fedcanon_stepsizes
    assert _distinct(nine)


def test_any_few_algorithms_drawn_together_get_distinct_colors():
    """A user's own mix: a color too close to one taken is replaced from the palette."""
    import random

    from fedcomp.algorithms import ALGORITHMS, DECENTRALIZED

    names = sorted({*ALGORITHMS, *DECENTRALIZED})
    rng = random.Random(0)
    for _ in range(200):
        mix = rng.sample(names, rng.randint(2, 8))
        assert _distinct(curve_colors([(n, n) for n in mix])), mix


def test_every_algorithm_has_a_color_of_its_own():
    from fedcomp.algorithms import ALGORITHMS, DECENTRALIZED
    from fedcomp.plotting import COLORS, color_of

    names = [*ALGORITHMS, *DECENTRALIZED]
    assert set(names) <= set(COLORS)  # chosen, not given by registry order
    assert len({color_of(n) for n in names}) == len(names)


def test_several_runs_overlay_in_one_figure_named_by_run(tmp_path):
    import matplotlib.pyplot as plt

    def run(directory, rate):
        directory.mkdir(parents=True)
        return _write_rows(directory / "results.csv", [
            {"algorithm": "za1", "method": "za1", "batch_size": "full", "seed": 0,
             "round": r, "optimality": rate ** r} for r in (0, 5, 10)])

    fast, slow = run(tmp_path / "fast", 0.5), run(tmp_path / "slow", 0.9)
    twin = run(tmp_path / "other" / "fast", 0.7)  # the same directory name as `fast`
    fig = results_figure([fast, slow])
    try:
        (ax,) = fig.axes
        curves = {line.get_label(): list(line.get_ydata()) for line in ax.get_lines()}
        assert sorted(curves) == ["fast/za1", "slow/za1"]
        np.testing.assert_allclose(curves["slow/za1"], 0.9 ** np.array([0, 5, 10]))
        assert len({line.get_color() for line in ax.get_lines()}) == 2
    finally:
        plt.close(fig)
    fig = results_figure([fast, twin])
    try:
        labels = sorted(line.get_label() for line in fig.axes[0].get_lines())
        assert labels == sorted([f"{tmp_path / 'fast'}/za1", f"{tmp_path / 'other' / 'fast'}/za1"])
    finally:
        plt.close(fig)


# --- plots of runs and frames, told apart without colour --------------------------------------
def _two_runs():
    import fedcomp
    from tests.conftest import make_problem

    problem = make_problem("least_squares")
    return problem, {name: fedcomp.simulate(algorithm, problem, 10, eval_every=2,
                                            metrics=["objective"])
                     for name, algorithm in (("za1", fedcomp.za1(0.3, 2)),
                                             ("fedmid", fedcomp.fedmid(0.3, 2)))}


def _curves(fig):
    return [line for ax in fig.axes for line in ax.get_lines()]


def test_runs_frames_rows_and_directories_plot_alike(tmp_path):
    pytest.importorskip("pandas")
    import fedcomp

    problem, runs = _two_runs()
    one = results_figure(runs["za1"], metric="objective")
    assert [line.get_label() for line in _curves(one)] == ["run"]
    named = results_figure(runs, metric="objective")  # a dict: one curve per name
    labels = [line.get_label() for line in _curves(named)]
    assert sorted(labels) == ["fedmid", "za1"]
    frame = fedcomp.compare(problem, {"za1": fedcomp.za1(0.3, 2),
                                      "fedmid": fedcomp.fedmid(0.3, 2)},
                            rounds=10, seeds=[0, 1], eval_every=2, metrics=["objective"])
    from_frame = results_figure(frame, metric="objective")
    assert sorted(line.get_label() for line in _curves(from_frame)) == ["fedmid", "za1"]
    # the same rows in every form: the frame's medians are the two-seed medians of the runs
    rows = [row for row in frame.to_dict("records")]
    assert len(_curves(results_figure(rows, metric="objective"))) == 2
    with pytest.raises(TypeError, match="cannot plot a int"):
        results_figure(3, metric="objective")


def test_curves_differ_in_style_and_marker_and_the_first_is_on_top(results):
    fig = results_figure(results)
    for ax in fig.axes:
        lines = ax.get_lines()
        if len(lines) < 2:
            continue
        looks = {(line.get_linestyle(), line.get_marker()) for line in lines}
        assert len(looks) == len(lines)  # no two curves alike without their colours
        top = max(lines, key=lambda line: line.get_zorder())
        legend = [text.get_text() for text in fig.legends[0].get_texts()]
        assert top.get_label() == legend[0]  # the first algorithm, drawn last and on top


def test_compare_keeps_the_settings_and_a_minibatch_figure_says_so():
    # compare's frame had no batch_size: a b = 5 comparison was titled "full gradients"
    pytest.importorskip("pandas")
    import fedcomp
    from fedcomp._frames import SETTING_COLUMNS
    from tests.conftest import make_problem

    problem = make_problem("least_squares")
    algorithms = {"fedmid": fedcomp.fedmid(0.3, 2)}  # with client sampling
    mini = fedcomp.compare(problem, algorithms, rounds=4, seeds=[0], batch_size=5,
                           clients_per_round=3, eval_every=2, metrics=["objective"])
    assert list(mini.columns[:2 + len(SETTING_COLUMNS)]) == ["algorithm", "seed",
                                                             *SETTING_COLUMNS]
    assert mini.loc[0, ["rounds", "clients_per_round", "batch_size", "eval_every"]
                    ].tolist() == [4, 3, "b5", 2]
    assert [ax.get_title() for ax in results_figure(mini, "objective").axes] == [
        "minibatch b5"]
    full = fedcomp.compare(problem, algorithms, rounds=4, seeds=[0], eval_every=2,
                           metrics=["objective"])
    assert full.loc[0, ["clients_per_round", "batch_size"]].tolist() == [
        problem.n_clients, "full"]
    both = results_figure(__import__("pandas").concat([full, mini]), "objective")
    assert [ax.get_title() for ax in both.axes] == ["full gradients", "minibatch b5"]
    # the settings are not metrics: final_medians leaves them out
    medians = fedcomp.final_medians(mini)
    assert "objective" in medians and not set(SETTING_COLUMNS) & set(medians.columns)
