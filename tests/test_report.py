"""``fedcomp report``: experiments run (or reused) and assembled into index.html / report.md."""

from __future__ import annotations

import copy
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedcomp import report as rep
from fedcomp.config import ConfigError, load, quick_config
from fedcomp.experiments import EXPERIMENTS, seed000, validate
from fedcomp.plotting import COLORS, color_of, results_figure

CONFIG_DIR = Path(__file__).resolve().parents[1] / "fedcomp" / "configs"


def tiny_seed000(rounds: int = 20) -> dict:
    """Seed 000 on 4 clients × 50 samples, two seeds, two gradient modes."""
    cfg = copy.deepcopy(load("seed000"))
    cfg.update(rounds=rounds, eval_every=5, seeds=[0, 1], reference={"tol": 1e-10})
    cfg["data"] = {**cfg["data"], "n_clients": 4, "samples_per_client": 50}
    cfg["algorithms"] = [a for a in cfg["algorithms"] if a["name"] in ("za1", "fedmid", "fedda")]
    return cfg


def broken() -> dict:
    """A config that passes to the runner and fails there (an unknown loss)."""
    cfg = tiny_seed000()
    cfg["name"] = "broken"
    cfg["problem"] = {"loss": "hinge"}
    return cfg


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    results = rep.run_report(out, configs=[("seed000", tiny_seed000()), ("broken", broken())],
                             stream=io.StringIO())
    return out, results


@pytest.mark.parametrize("path", sorted(CONFIG_DIR.glob("*.toml")), ids=lambda p: p.stem)
def test_every_config_has_valid_quick_settings(path):
    from fedcomp.config import load

    raw = load(path)
    assert raw.get("quick", {}).get("set"), f"{path.name} has no [quick] table"
    quick = quick_config(raw)
    assert "quick" not in quick
    if quick.get("kind") != "timing":
        resolved = validate(quick)
        # the quick run is smaller: never more rounds than the full one
        assert resolved["rounds"] <= validate(raw)["rounds"]


def test_quick_table_errors_name_the_fix():
    with pytest.raises(ConfigError, match="quick.set must be a list"):
        quick_config({"quick": {"set": "rounds=5"}})
    with pytest.raises(ConfigError, match="quick must be a table"):
        quick_config({"quick": {"rounds": 5}})


def test_report_files_verdict_and_tables(report_dir):
    out, results = report_dir
    assert (out / "index.html").exists() and (out / "report.md").exists()
    ok, bad = results
    assert not ok.error and ok.figures
    for fig in ok.figures:
        assert (out / "seed000" / fig).stat().st_size > 0
    # the verdict is the module's rule applied to the final rows written to summary.json
    from fedcomp.experiments import final_metrics, read_summary
    from fedcomp.experiments._verdict import judge_over_seeds

    expected = judge_over_seeds(seed000.verdict, read_summary(out / "seed000"), final_metrics,
                                validate(ok.config))
    assert (ok.verdict, ok.rule) == expected
    md = (out / "report.md").read_text()
    assert f"Verdict: {ok.verdict}." in md and expected[1] in md
    assert seed000.CLAIM in md and rep.PAPERS["seed000"] in md
    page = (out / "index.html").read_text()
    assert "<img src='seed000/" in page and "Verdict: " in page


def test_mean_and_std_come_from_the_seeds(report_dir):
    out, results = report_dir
    header, body = rep.mean_std_table(results[0])
    rows = json.loads((out / "seed000" / "summary.json").read_text())
    za1 = [r["optimality"] for r in rows if r["algorithm"] == "za1_full"]
    assert len(za1) == 2
    line = next(b for b in body if b[0] == "za1_full")
    assert line[header.index("seeds")] == "2"
    cell = line[header.index("optimality")]
    assert cell == rep.format_mean_std(np.array(za1))
    mean, std = (float(v) for v in cell.split(" ± "))
    assert mean == pytest.approx(np.mean(za1), rel=1e-3)
    assert std == pytest.approx(np.std(za1), rel=1e-3, abs=1e-300)


def test_failed_experiment_is_reported_and_the_others_kept(report_dir):
    out, results = report_dir
    bad = results[1]
    assert "hinge" in bad.error and bad.verdict == "not run (error)"
    assert "hinge" in (out / "broken" / "error.txt").read_text()
    assert "not run (error)" in (out / "report.md").read_text()
    assert rep.exit_status(results) == 1


def test_finished_experiments_are_reused_not_rerun(report_dir, tmp_path):
    out, _ = report_dir
    copy_dir = tmp_path / "again"
    shutil.copytree(out, copy_dir)
    before = (copy_dir / "seed000" / "results.csv").stat().st_mtime_ns
    results = rep.run_report(copy_dir, configs=[("seed000", tiny_seed000())],
                             stream=io.StringIO())
    assert results[0].reused
    assert (copy_dir / "seed000" / "results.csv").stat().st_mtime_ns == before
    spent = f"the experiments took {results[0].seconds:.0f} s when they ran"
    assert "1 experiments reused" in (copy_dir / "report.md").read_text()
    assert spent in (copy_dir / "report.md").read_text()
    assert spent in (copy_dir / "index.html").read_text()
    # a different config is not "the same results": it runs again
    results = rep.run_report(copy_dir, configs=[("seed000", tiny_seed000(rounds=10))],
                             stream=io.StringIO())
    assert not results[0].reused
    assert (copy_dir / "seed000" / "results.csv").stat().st_mtime_ns != before


def test_an_interrupted_experiment_keeps_its_finished_runs(report_dir, tmp_path):
    out, _ = report_dir
    cut = tmp_path / "cut"
    shutil.copytree(out, cut)
    runs = (cut / "seed000" / "runs.jsonl").read_text().splitlines()
    (cut / "seed000" / "runs.jsonl").write_text("\n".join(runs[:-1]) + "\n")  # last unfinished
    (cut / "seed000" / "report.json").unlink()
    (cut / "seed000" / "summary.json").unlink()
    result = rep.run_report(cut, configs=[("seed000", tiny_seed000())], stream=io.StringIO())[0]
    assert not result.reused and not result.error
    assert len((cut / "seed000" / "runs.jsonl").read_text().splitlines()) == len(runs)

    def rows(directory):
        lines = (directory / "seed000" / "results.csv").read_text().splitlines()
        header = lines[0].split(",")
        keep = [i for i, c in enumerate(header) if c != "wall_s"]
        return sorted(",".join(line.split(",")[i] for i in keep) for line in lines[1:])

    assert rows(cut) == rows(out)  # no duplicated or missing rows, the same numbers


def test_experiments_are_grouped_by_paper_in_order():
    names = [name for name, _ in rep.experiment_configs()]
    assert names[0] == "seed000" and set(names) == {p.stem for p in CONFIG_DIR.glob("*.toml")}
    papers = [rep.paper_of(n) for n in names]
    assert papers == sorted(papers)  # seed000, seed001, ... each paper's experiments together
    assert set(papers) <= set(rep.PAPERS)
    assert set(names) <= set(EXPERIMENTS)  # every config has a module with its verdict rule
    with pytest.raises(ValueError, match="unknown experiment.*valid: .*seed000"):
        rep.experiment_configs(only=["seed999"])


def test_each_algorithm_has_one_color_everywhere():
    from fedcomp.algorithms import ALGORITHMS, DECENTRALIZED

    names = [*ALGORITHMS, *DECENTRALIZED]
    colors = [color_of(n) for n in names]
    assert len(set(colors)) == len(names)  # distinct
    assert all(color_of(n) == COLORS[n] for n in COLORS)  # the seed-000 colors are kept


def test_figures_shade_the_seed_spread_and_label_units(report_dir):
    from matplotlib.collections import PolyCollection

    out, _ = report_dir
    fig = rep_figure(out / "seed000" / "results.csv", "floats")
    ax = fig.axes[0]
    assert any(isinstance(c, PolyCollection) for c in ax.collections)  # two seeds → a band
    assert ax.get_xlabel() == "floats communicated (up + down)"
    assert ax.get_yscale() == "log" and "x*" in ax.get_ylabel()
    lines = {line.get_label(): line.get_color() for line in ax.get_lines()}
    assert lines["za1"] == color_of("za1")  # panels are per mode: labelled by method


def test_wall_time_curves_align_seeds_by_round():
    from fedcomp.plotting import seed_band

    # two seeds, error halving each round, with different wall times
    rows = [{"round": r, "wall_s": r * speed, "optimality": 0.5 ** r, "seed": seed}
            for seed, speed in ((0, 1.0), (1, 1.5)) for r in range(5)]
    xs, mid, lo, hi, seeds = seed_band(rows, "optimality", "wall_s")
    assert seeds == 2
    np.testing.assert_allclose(xs, 1.25 * np.arange(5))  # the seeds' median time per round
    np.testing.assert_allclose(mid, 0.5 ** np.arange(5))  # monotone: no seed-to-seed zig-zag
    np.testing.assert_allclose(lo, hi)
    rows[-1]["optimality"] = 1.0  # one seed's last evaluation differs: median and band
    _, mid, lo, hi, _ = seed_band(rows, "optimality", "wall_s")
    assert (lo[-1], hi[-1], mid[-1]) == (0.5 ** 4, 1.0, (1.0 + 0.5 ** 4) / 2)


def rep_figure(path, x_axis):
    import matplotlib.pyplot as plt

    fig = results_figure(path, "optimality", x_axis)
    plt.close(fig)
    return fig


def test_report_renders_in_headless_chromium(report_dir):
    """Every image of index.html loads and the browser logs no error."""
    webdriver = pytest.importorskip("selenium.webdriver")
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.skip("Debian chromium and chromium-driver are not installed (.ci/run installs "
                    "them: apt-get install chromium chromium-driver)")
    out, _ = report_dir
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--allow-file-access-from-files"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    from selenium.webdriver.chrome.service import Service

    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    try:
        driver.get((out / "index.html").resolve().as_uri())
        images = driver.execute_script(
            "return Array.from(document.images).map("
            "i => [i.getAttribute('src'), i.complete, i.naturalWidth]);")
        logs = driver.get_log("browser")
    finally:
        driver.quit()
    assert len(images) >= 3
    broken_images = [src for src, complete, width in images if not complete or width == 0]
    assert not broken_images
    assert not [entry for entry in logs if entry["level"] == "SEVERE"], logs


def test_cli_report_only_and_unknown_name(tmp_path):
    result = subprocess.run([sys.executable, "-m", "fedcomp", "report", "--out", str(tmp_path),
                             "--only", "seed999"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "unknown experiment(s) ['seed999']" in result.stderr and "seed000" in result.stderr


@pytest.mark.slow
def test_quick_report_of_every_config(tmp_path):
    """The whole ``fedcomp report --quick``: every config runs and gets a verdict."""
    result = subprocess.run([sys.executable, "-m", "fedcomp", "report", "--quick", "--out",
                             str(tmp_path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    md = (tmp_path / "report.md").read_text()
    for path in CONFIG_DIR.glob("*.toml"):
        assert f"### {path.stem}" in md
        assert (tmp_path / path.stem / "summary.json").exists()
    assert "not run (error)" not in md and "not assessed" not in md


def test_event_clock_experiments_get_simulated_time_figures(tmp_path):
    from tests.test_feddr_configs import small

    cfg = small("feddr_async", samples_per_client=12)
    (result,) = rep.run_report(tmp_path, configs=[("feddr_async", cfg)], stream=io.StringIO())
    assert result.figures[:2] == ["fig_optimality_simtime.png", "fig_objective_simtime.png"]
    assert all((tmp_path / "feddr_async" / name).exists() for name in result.figures)
    page = (tmp_path / "index.html").read_text()
    assert page.index("fig_optimality_simtime.png") < page.index("fig_optimality_rounds.png")
    no_clock = [r for r in rep.run_report(tmp_path / "sync", configs=[("seed000", tiny_seed000())],
                                          stream=io.StringIO())]
    assert not any("simtime" in name for name in no_clock[0].figures)


def test_timing_figure_marks_the_papers_ratios():
    import matplotlib.pyplot as plt

    rows = [{"network": net, "l1_ratio": 0.05, "mcp_ratio": 0.1, "scad_ratio": 0.2}
            for net in ("mlp", "cnn", "resnet18")]
    fig = rep.timing_figure(rep.ExperimentResult("prox_cost", {}, rows))
    plt.close(fig)
    marks = [line for line in fig.axes[0].get_lines() if line.get_marker() == "_"]
    assert [float(m.get_ydata()[0]) for m in marks] == [1.383, 2.568, 4.473]
    assert all(2 <= m.get_xdata()[0] < 3 for m in marks)  # on the resnet18 group
    assert "paper, ResNet-18" in [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_committed_full_report_links_resolve():
    """docs/report/ (a full-size `fedcomp report` snapshot): every figure it shows exists."""
    import re

    folder = Path(__file__).resolve().parents[1] / "docs" / "report"
    markdown = (folder / "report.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert len(images) >= 13  # at least one figure per experiment
    assert all((folder / image).is_file() for image in images)
    page = (folder / "index.html").read_text()
    sources = re.findall(r"<img[^>]* src=['\"]([^'\"]+)['\"]", page)
    assert sorted(sources) == sorted(images)
    assert all((folder / src).is_file() for src in sources)


@pytest.mark.torch
def test_seeds_given_to_the_report_leave_a_timing_experiment_alone(tmp_path):
    pytest.importorskip("torch")
    # report --seeds once set seeds on prox_cost too, whose key check then refused it
    timing = {"name": "prox_cost", "kind": "timing", "batch_size": 4, "repeats": 1,
              "networks": [{"name": "mlp", "input_shape": [1, 4, 4], "options": {"hidden": [3]}}],
              "penalties": [{"name": "l1", "alpha": 1e-4}]}
    (result,) = rep.run_report(tmp_path, configs=[("prox_cost", timing)], seeds=[0, 1],
                               stream=io.StringIO())
    assert result.error == "" and result.rows


def test_report_says_verdicts_use_the_median_while_tables_show_the_mean():
    """Seeds 1, 1, 10: the table shows 4 ± 4.243, the verdict rule sees 1; the page says so."""
    import re

    from fedcomp.experiments import final_metrics

    rows = [{"algorithm": "za1", "label": "za1", "batch_size": "full", "seed": seed,
             "status": "ok", "optimality": value} for seed, value in enumerate([1.0, 1.0, 10.0])]
    result = rep.ExperimentResult("seed000", tiny_seed000(), rows, verdict="reproduced",
                                  rule="a rule")
    header, body = rep.mean_std_table(result)
    assert body[0][header.index("optimality")] == "4 ± 4.243"
    assert final_metrics(rows)[("za1", "full")]["optimality"] == 1.0  # what judge() uses
    for text in (rep.markdown_report([result], quick=True, seconds=1.0),
                 rep.html_report([result], quick=True, seconds=1.0)):
        assert re.search(r"Tables: final metrics, mean ± std over seeds", text)
        assert re.search(r"Verdicts: [^.]*median over the seeds that converged", text)
