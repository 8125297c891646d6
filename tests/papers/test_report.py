"""``fedcomp report``: experiments run (or reused) and assembled into index.html / report.md."""

from __future__ import annotations

import copy
import io
import json
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest

from fedcomp import report as rep
from fedcomp.config import ConfigError, load, quick_config
from fedcomp.experiments import EXPERIMENTS, validate
from fedcomp.experiments.claims import seed000
from fedcomp.plotting import COLORS, color_of, results_figure

CONFIG_DIR = Path(__file__).resolve().parents[2] / "fedcomp" / "configs"


def tiny_seed000(rounds: int = 20) -> dict:
    """Seed 000 on 4 clients × 50 samples, two seeds, two gradient modes."""
    cfg = copy.deepcopy(load("seed000"))
    cfg.update(rounds=rounds, eval_every=5, seeds=[0, 1], reference={"tol": 1e-10})
    cfg["data"] = {**cfg["data"], "n_clients": 4, "samples_per_client": 50}
    cfg["algorithms"] = [a for a in cfg["algorithms"] if a["name"] in ("za1", "fedmid", "fedda")]
    return cfg


def with_readings(cfg: dict) -> dict:
    """``cfg`` with an as-run reading (ZA1 at a tenth of its step) and a diagnosis from it
    (FedMiD's step too)."""
    return {**cfg, "readings": {
        "as_run": {"follows": "a code's smaller step", "set": ["algorithms.za1.client_lr=0.1"]},
        "fedmid_step": {"follows": "as run, FedMiD's step a tenth", "base": "as_run",
                        "diagnosis": "FedMiD's smaller step",
                        "set": ["algorithms.fedmid.client_lr=0.01"]}}}


def broken() -> dict:
    """A config that passes to the runner and fails there (an unknown loss)."""
    cfg = tiny_seed000()
    cfg["name"] = "broken"
    del cfg["paper"]  # an experiment of no paper: the report's "other experiments"
    cfg["problem"] = {"loss": "hinge"}
    return cfg


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    results = rep.run_report(out, configs=[("seed000", with_readings(tiny_seed000())),
                                           ("broken", broken())],
                             stream=io.StringIO(), command="fedcomp report --out REPORT")
    return out, results


class _Page(HTMLParser):
    """The ids, links (``href``, ``src``, ``srcset``) and contents links of an HTML page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.links: list[str] = []
        self.contents: list[str] = []
        self.in_nav = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        self.in_nav = self.in_nav or tag == "nav"
        for key in ("href", "src", "srcset"):
            if key in attrs:
                self.links.append(attrs[key])
                if self.in_nav and key == "href":
                    self.contents.append(attrs[key])

    def handle_endtag(self, tag):
        self.in_nav = self.in_nav and tag != "nav"


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
    ok, *_, bad = results
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


def test_contents_link_every_paper_and_experiment_and_resolve(report_dir):
    """Papers → experiments, each link to an id on the page; "↑ contents" after each section."""
    import re

    out, results = report_dir
    text = (out / "index.html").read_text()
    page = _Page(text)
    assert len(page.ids) == len(set(page.ids))
    assert page.contents == ["#summary", "#paper-seed000", "#seed000", "#seed000--as_written",
                             "#seed000--as_run", "#paper-other", "#broken",
                             "#broken--as_written"]
    assert "Zhang, Hu, Johansson — ICASSP 2024" in text  # the paper by name, not its seed id
    assert {link[1:] for link in page.links if link.startswith("#")} <= set(page.ids)
    assert text.count("<a href='#contents'>↑ contents</a>") == len(results) + 1  # + summary
    md = (out / "report.md").read_text()
    anchors = set(re.findall(r'<a id="([^"]+)"></a>', md))
    assert {"contents", "summary", "paper-seed000", "seed000", "broken"} <= anchors
    assert set(re.findall(r"\]\(#([^)]+)\)", md)) <= anchors
    assert md.count("[↑ contents](#contents)") == len(results) + 1
    assert "\n## Zhang, Hu, Johansson — ICASSP 2024\n" in md and "\n## seed000" not in md


def test_paper_names_replace_seed_ids():
    assert rep.paper_name("seed001") == "Bao, Crawshaw, Luo, Liu — ICML 2022"
    assert set(rep.PAPER_NAMES) == set(rep.PAPERS)
    result = rep.ExperimentResult("bao2022_emnist", {"paper": "seed001"}, verdict="reproduced")
    summary = rep.markdown_report([result], quick=True, seconds=1.0, header={"date": "today"})
    assert "| Bao, Crawshaw, Luo, Liu — ICML 2022 | reproduced |" in summary
    assert "| seed001 |" not in summary and "## seed001" not in summary


HEADER_FIELDS = ("date", "fedcomp", "git commit", "Python", "NumPy", "PyTorch", "CPU", "GPU",
                 "command")


def test_header_says_what_made_the_report(report_dir):
    import platform
    import re

    import fedcomp

    out, _ = report_dir
    page, md = (out / "index.html").read_text(), (out / "report.md").read_text()
    for key in HEADER_FIELDS:
        assert f"<tr><th>{key}</th>" in page and f"| {key} |" in md
    assert "<code>fedcomp report --out REPORT</code>" in page
    assert "| command | `fedcomp report --out REPORT` |" in md
    header = rep.environment("fedcomp report --quick --out R")
    assert tuple(header) == HEADER_FIELDS
    assert header["fedcomp"] == fedcomp.__version__ and header["NumPy"] == np.__version__
    assert header["Python"] == platform.python_version()
    assert re.fullmatch(r"[0-9a-f]{7,40}( \+ uncommitted changes)?|not a git checkout",
                        header["git commit"])
    assert re.search(r", \d+ cores", header["CPU"]) and header["PyTorch"] and header["GPU"]
    assert "not recorded" in rep.environment()["command"]


def test_git_commit_only_of_fedcomps_own_checkout(tmp_path, monkeypatch):
    """An installed fedcomp is not a checkout, even in another repository's ignored venv."""
    if not shutil.which("git"):
        pytest.skip("no git")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    package = tmp_path / ".venv" / "site-packages" / "fedcomp"
    package.mkdir(parents=True)
    from fedcomp.report import _environment

    monkeypatch.setattr(_environment, "__file__", str(package / "report" / "_environment.py"))
    assert rep.git_commit() == "not a git checkout"
    monkeypatch.setenv("PATH", "")  # no git at all
    assert rep.git_commit() == "not a git checkout"


def test_cli_passes_its_command_line_to_the_report(tmp_path, monkeypatch):
    from fedcomp import cli

    seen = {}
    monkeypatch.setattr(rep, "run_report", lambda out, **kwargs: seen.update(kwargs) or [])
    out = tmp_path / "my report"
    assert cli.main(["report", "--quick", "--out", str(out), "--only", "seed000"]) == 0
    assert seen["command"] == f"fedcomp report --quick --out '{out}' --only seed000"


def test_each_experiment_links_its_config_and_results(report_dir):
    import re

    out, _ = report_dir
    page = _Page((out / "index.html").read_text())
    files = [link for link in page.links if not link.startswith("#")]
    assert all((out / link).is_file() for link in files)
    for link in ("seed000/config.toml", "seed000/results.csv", "seed000/summary.json",
                 "broken/config.toml", "broken/error.txt"):
        assert link in files
    md = (out / "report.md").read_text()
    assert "Files: [config.toml](seed000/config.toml) · [results.csv](seed000/results.csv)" in md
    assert all((out / link).is_file() for link in re.findall(r"\]\(([^#)][^)]*)\)", md))
    # config.toml is the configuration that ran, resolved: it loads back to the same one
    assert validate(load(out / "seed000" / "config.toml")) == validate(tiny_seed000())
    assert load(out / "broken" / "config.toml")["problem"] == {"loss": "hinge"}  # as given


def test_figures_are_svg_with_a_png_fallback(report_dir):
    out, results = report_dir
    page, md = (out / "index.html").read_text(), (out / "report.md").read_text()
    for png in results[0].figures:
        svg = png.removesuffix(".png") + ".svg"
        assert (out / "seed000" / png).stat().st_size > 0
        assert "<svg" in (out / "seed000" / svg).read_text()
        assert (f"<picture><source srcset='seed000/{svg}' type='image/svg+xml'>"
                f"<img src='seed000/{png}'") in page
        assert f"](seed000/{png})" in md


def test_a_metric_a_variant_does_not_record_gets_no_panel(tmp_path):
    """feddr_mlp: the synthetic variant has no test split (test_accuracy NaN)."""
    import csv

    import matplotlib.pyplot as plt

    def write(test_accuracy):
        with (tmp_path / "results.csv").open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(["algorithm", "method", "batch_size", "seed", "round", "variant",
                             "objective", "test_accuracy", "floats_up", "floats_down",
                             "wall_s"])
            for variant in ("digits", "synthetic_1_1"):
                for method in ("fedprox", "feddr"):
                    for r in (0, 5, 10):
                        writer.writerow([method, method, "b10", 0, r, variant, 1 / (1 + r),
                                         test_accuracy(variant, r), 10 * r, 10 * r, 0.1 * r])

    result = rep.ExperimentResult("feddr_mlp", load("feddr_mlp"))
    write(lambda variant, r: "nan" if variant == "synthetic_1_1" else 0.05 * r)
    names = rep.draw_figures(result, tmp_path)
    assert "fig_test_accuracy_rounds.png" in names
    for name in names:
        metric = name.removeprefix("fig_").rsplit("_", 1)[0]
        x_axis = {"rounds": "round", "floats": "floats", "time": "wall_s"}[
            name.removesuffix(".png").rsplit("_", 1)[1]]
        fig = results_figure(tmp_path / "results.csv", metric, x_axis, fallback=False)
        plt.close(fig)
        assert all(ax.get_lines() for ax in fig.axes), name  # no empty panel
        assert len(fig.axes) == (1 if metric == "test_accuracy" else 2)
    write(lambda variant, r: "nan")
    assert "fig_test_accuracy_rounds.png" not in rep.draw_figures(result, tmp_path)


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
    # seeds won: per seed, the lowest full-gradient optimality among the runs compared
    column = header.index("seeds best (optimality)")
    full = [r for r in rows if r["batch_size"] == "full"]
    expected = {r["algorithm"]: 0 for r in full}
    for seed in {r["seed"] for r in full}:
        here = [r for r in full if r["seed"] == seed]
        expected[min(here, key=lambda r: r["optimality"])["algorithm"]] += 1
    assert {b[0]: b[column] for b in body if b[0] in expected} == {
        a: f"{n} of 2" for a, n in expected.items()}


def test_failed_experiment_is_reported_and_the_others_kept(report_dir):
    out, results = report_dir
    bad = results[-1]
    assert "hinge" in bad.error and bad.verdict == "not run (error)"
    assert "hinge" in (out / "broken" / "error.txt").read_text()
    assert "not run (error)" in (out / "report.md").read_text()
    assert rep.exit_status(results) == 1


def _copy_as_written(out: Path, dest: Path) -> None:
    """seed000's run as written alone: the readings and the broken experiment of
    ``report_dir`` are runs the tiny config below does not name, which a report refuses."""
    shutil.copytree(out / "seed000", dest / "seed000", ignore=lambda folder, names: [
        n for n in names if Path(folder) == out / "seed000" and (Path(folder) / n).is_dir()
        and n not in ("models",)])


def test_finished_experiments_are_reused_not_rerun(report_dir, tmp_path):
    out, _ = report_dir
    copy_dir = tmp_path / "again"
    _copy_as_written(out, copy_dir)
    before = (copy_dir / "seed000" / "results.csv").stat().st_mtime_ns
    log = (copy_dir / "seed000" / "log.txt").read_text()
    assert "Verdict:" in log  # the run's table and verdict
    results = rep.run_report(copy_dir, configs=[("seed000", tiny_seed000())],
                             stream=io.StringIO())
    assert results[0].reused
    assert (copy_dir / "seed000" / "results.csv").stat().st_mtime_ns == before
    assert (copy_dir / "seed000" / "log.txt").read_text().startswith(log)  # kept
    spent = f"they took {results[0].seconds:.0f} s when they ran"
    assert "1 runs of an experiment reused from earlier" in (copy_dir / "report.md").read_text()
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
    _copy_as_written(out, cut)
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
    configs = rep.experiment_configs()
    names = [name for name, _ in configs]
    assert names[0] == "seed000" and set(names) == {p.stem for p in CONFIG_DIR.glob("*.toml")}
    papers = [rep.paper_of(config) for _, config in configs]  # each config names its paper
    assert set(papers) <= set(rep.PAPERS)
    order = [list(rep.PAPERS).index(p) for p in papers]
    assert order == sorted(order)  # the PAPERS order, each paper's experiments together
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


def test_report_renders_in_headless_chromium(report_dir, headless_chromium):
    """Every figure loads (its SVG, and its PNG fallback), every contents link leads to its
    section, and the browser logs no error."""
    out, _ = report_dir
    check_page_in_browser(out / "index.html", headless_chromium)


def test_committed_full_report_renders_in_headless_chromium(headless_chromium):
    """docs/report/index.html, the full-size report: the same checks."""
    page = Path(__file__).resolve().parents[2] / "docs" / "report" / "index.html"
    check_page_in_browser(page, headless_chromium)


def check_page_in_browser(page, driver):
    """Open a report page in the browser and check its figures, contents links and log."""
    from selenium.webdriver.common.by import By

    driver.get(page.resolve().as_uri())
    images = driver.execute_script(
        "return Array.from(document.images).map("
        "i => [i.getAttribute('src'), i.complete, i.naturalWidth, i.currentSrc]);")
    fallbacks = driver.execute_async_script(  # each PNG, as a browser without SVG loads
        "const done = arguments[arguments.length - 1];"
        "Promise.all(Array.from(document.images).map(i => new Promise(resolve => {"
        "  const png = new Image();"
        "  png.onload = () => resolve([i.getAttribute('src'), png.naturalWidth]);"
        "  png.onerror = () => resolve([i.getAttribute('src'), 0]);"
        "  png.src = i.src; }))).then(done);")
    contents = driver.execute_script(
        "return Array.from(document.querySelectorAll('nav a')).map(a => "
        "[a.getAttribute('href'), document.getElementById(a.hash.slice(1)) !== null]);")
    followed = {}
    for href, _ in contents:
        driver.find_element(By.CSS_SELECTOR, f"nav a[href='{href}']").click()
        followed[href] = driver.execute_script(
            "const box = document.getElementById(arguments[0]).getBoundingClientRect();"
            "return [location.hash, box.top >= -1 && box.top < innerHeight];", href[1:])
        driver.execute_script("window.scrollTo(0, 0);")
    logs = driver.get_log("browser")
    assert len(images) >= 3
    assert not [src for src, complete, width, _ in images if not complete or width == 0]
    assert all(current.endswith(".svg") for *_, current in images)  # the SVG is shown
    assert not [src for src, width in fallbacks if width == 0]
    assert len(contents) >= 3 and all(found for _, found in contents), contents
    assert all(followed[href] == [href, True] for href, _ in contents), followed
    assert not [entry for entry in logs if entry["level"] == "SEVERE"], logs


def test_cli_report_only_and_unknown_name(tmp_path):
    result = subprocess.run([sys.executable, "-m", "fedcomp", "report", "--out", str(tmp_path),
                             "--only", "seed999"], capture_output=True, text=True)
    assert result.returncode == 2
    assert "unknown experiment(s) ['seed999']" in result.stderr and "seed000" in result.stderr


@pytest.mark.slow
def test_quick_report_of_every_config(tmp_path):
    """``fedcomp report --quick`` of every config, as written, one seed: each runs and gets a
    verdict. (Every reading of every config is validated by test_config; the several seeds
    and the other readings would take CI an hour at quick sizes: 37 readings x 3-5 seeds.)"""
    result = subprocess.run([sys.executable, "-m", "fedcomp", "report", "--quick", "--seeds",
                             "0", "--readings", "as_written", "--out", str(tmp_path)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    md = (tmp_path / "report.md").read_text()
    for path in CONFIG_DIR.glob("*.toml"):
        assert f"### {path.stem}" in md
        assert (tmp_path / path.stem / "summary.json").exists()
    assert "not run (error)" not in md and "not assessed" not in md


def test_event_clock_experiments_get_simulated_time_figures(tmp_path):
    from tests.papers.test_feddr_configs import small

    cfg = small("feddr_async", samples_per_client=12)
    (result,) = rep.run_report(tmp_path, configs=[("feddr_async", cfg)], stream=io.StringIO(),
                               only_readings=["as_written"])
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

    folder = Path(__file__).resolve().parents[2] / "docs" / "report"
    markdown = (folder / "report.md").read_text()
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", markdown)
    assert len(images) >= 13  # at least one figure per experiment
    assert all((folder / image).is_file() for image in images)
    page = (folder / "index.html").read_text()
    sources = re.findall(r"<img[^>]* src=['\"]([^'\"]+)['\"]", page)
    assert sorted(sources) == sorted(images)
    assert all((folder / src).is_file() for src in sources)
    svgs = re.findall(r"<source[^>]* srcset=['\"]([^'\"]+)['\"]", page)
    assert all((folder / svg).is_file() for svg in svgs)


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
    assert load(tmp_path / "prox_cost" / "config.toml") == timing  # written as given


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


# --- readings side by side, diagnoses ----------------------------------------------------
def test_every_reading_runs_into_its_own_folder_with_its_config(report_dir):
    out, results = report_dir
    seed000_runs = {r.reading: r for r in results if r.name == "seed000"}
    assert list(seed000_runs) == ["as_written", "as_run", "fedmid_step"]
    for reading, result in seed000_runs.items():
        folder = out / result.key
        assert folder == (out / "seed000" if reading == "as_written" else
                          out / "seed000" / reading)
        assert (folder / "summary.json").exists() and not result.error
        ran = load(folder / "config.toml")
        assert ran["reading"] == reading and "readings" not in ran
    za1 = {reading: next(a for a in load(out / r.key / "config.toml")["algorithms"]
                         if a["name"] == "za1")["client_lr"]
           for reading, r in seed000_runs.items()}
    assert za1["as_run"] == za1["fedmid_step"] == 0.1 != za1["as_written"]  # from its base
    diagnosis = seed000_runs["fedmid_step"]
    assert (diagnosis.base, diagnosis.diagnosis) == ("as_run", "FedMiD's smaller step")
    page, md = (out / "index.html").read_text(), (out / "report.md").read_text()
    for text in (page, md):
        assert "FedMiD&#x27;s smaller step" in text or "FedMiD's smaller step" in text
        assert "fedmid_step, from as_run" in text
    assert "<img src='seed000/as_run/" in page and "](seed000/as_run/fig_" in md


def _result(reading="as_written", verdict="reproduced", base="", diagnosis=""):
    return rep.ExperimentResult("bao2022_lowrank", {}, verdict=verdict, reading=reading,
                                follows=f"{reading}'s source", base=base, diagnosis=diagnosis)


@pytest.mark.parametrize("verdicts, lead", [
    (["not reproduced", "reproduced"], "The readings disagree."),
    (["partly (fast_fedda wins)", "partly"], "The readings agree."),
    (["reproduced", "not reproduced (fedda diverged)"], "The readings disagree."),
    (["reproduced"], ""),
])
def test_the_readings_lead_says_whether_they_agree(verdicts, lead):
    group = [_result("as_written", verdicts[0])]
    group += [_result("as_run", v) for v in verdicts[1:]]
    group.append(_result("gamma", "reproduced", base="as_written", diagnosis="a constant gamma"))
    said, sentence = rep.readings_lead(group)
    assert said == lead
    assert all(v in sentence for v in verdicts) and "gamma" not in sentence


@pytest.mark.parametrize("base_verdict, verdict, effect", [
    ("not reproduced", "reproduced", "moves the verdict from not reproduced to reproduced"),
    ("not reproduced", "partly (c_fedda wins)", "moves the verdict from not reproduced to partly"),
    ("partly", "partly (x)", "the verdict stays partly"),
    ("reproduced", "not reproduced", "moves the verdict from reproduced to not reproduced"),
])
def test_a_diagnosis_says_whether_its_one_change_moves_the_verdict(base_verdict, verdict,
                                                                    effect):
    group = [_result("as_written", "reproduced"), _result("as_run", base_verdict),
             _result("gamma", verdict, base="as_run", diagnosis="a constant gamma")]
    (sentence,) = rep.diagnosis_sentences(group)
    assert sentence.startswith("A constant gamma (gamma, from as_run): " + effect)
    assert sentence.endswith(f"— {verdict}.")


def test_a_verdict_short_of_reproduced_without_a_diagnosis_is_flagged():
    assert rep.diagnosis_sentences([_result("as_written", "partly")]) == [
        "No diagnosis ran: nothing here isolates what moves this verdict."]
    assert rep.diagnosis_sentences([_result("as_written", "reproduced")]) == []


def test_report_readings_option_keeps_the_bases_and_refuses_unknown_names(tmp_path):
    cfg = with_readings(tiny_seed000(rounds=5))
    assert rep.reading_names(cfg) == ["as_written", "as_run", "fedmid_step"]
    assert rep.reading_names(cfg, ["fedmid_step"]) == ["as_written", "as_run", "fedmid_step"]
    assert rep.reading_names(cfg, ["as_written"]) == ["as_written"]
    with pytest.raises(ValueError, match=r"unknown reading\(s\) \['as_ran'\]"):
        rep.run_report(tmp_path, configs=[("seed000", cfg)], only_readings=["as_ran"],
                       stream=io.StringIO())
    assert not (tmp_path / "seed000").exists()  # refused before anything ran


def test_an_experiment_that_times_its_runs_runs_them_one_at_a_time():
    assert rep.jobs_for("fedcanon_nn", 2) == 1
    assert rep.jobs_for("seed000", 2) == 2


def test_tables_show_the_per_node_columns_of_a_gossip_run_evaluated_at_a_node():
    """liang2024's as-run reading evaluates node 0 only: its table shows node0_l1_error (the
    verdict's number) beside the empty node-average l1_error."""
    config = {"name": "x", "rounds": 1, "metrics": ["l1_error"],
              "data": {"generator": "liang_sparse_linear"}, "problem": {"loss": "squared"},
              "regularizer": {"name": "zero"}, "algorithms": [{"name": "fedavg"}]}
    result = rep.ExperimentResult("x", config, rows=[
        {"label": "dfedda", "l1_error": float("nan"), "node0_l1_error": 0.5},
        {"label": "fast_fedda", "l1_error": 0.7}])
    result.checked = lambda: {"metrics": ["l1_error"]}  # type: ignore[method-assign]
    assert rep.table_columns(result)[:2] == ["l1_error", "node0_l1_error"]


def test_the_report_refuses_run_folders_no_config_names(tmp_path):
    # a dropped diagnosis's partial run (docs/report/bao2022_lowrank/code_start once)
    (tmp_path / "seed000" / "code_start").mkdir(parents=True)
    (tmp_path / "seed000" / "code_start" / "results.csv").write_text("round\n")
    with pytest.raises(ValueError, match="no configuration names: seed000/code_start. A report"):
        rep.run_report(tmp_path, configs=[("seed000", tiny_seed000())], stream=io.StringIO())
    assert not (tmp_path / "index.html").exists()  # refused before anything ran
    shutil.rmtree(tmp_path / "seed000" / "code_start")
    (tmp_path / "renamed_experiment").mkdir()
    with pytest.raises(ValueError, match="names: renamed_experiment"):
        rep.run_report(tmp_path, configs=[("seed000", tiny_seed000())], stream=io.StringIO())


def test_the_shipped_report_has_no_stale_folders():
    from fedcomp.config import readings

    shipped = Path(__file__).parents[2] / "docs" / "report"
    named = {name: set(readings(raw)) for name, raw in rep.experiment_configs()}
    assert rep.stale_folders(shipped, named) == []


# --- the report as pages of the documentation site ------------------------------------------
def test_the_site_pages_link_every_reading_to_its_section(report_dir):
    """``index.md`` and a page per paper (the experiment of no paper on ``paper-other.md``):
    every link of the summary leads to an anchor on the page it names, each reading's
    verdict is on its paper's page, and its figures are palette PNGs beside it."""
    import re

    from PIL import Image

    out, results = report_dir
    summary = (out / "index.md").read_text()
    assert "| fedcomp |" in summary and "`fedcomp report --out REPORT`" in summary
    pages = {p.name: p.read_text() for p in out.glob("paper-*.md")}
    assert set(pages) == {"paper-seed000.md", "paper-other.md"}
    links = re.findall(r"\]\((paper-[\w.-]+\.md)#([\w.-]+)\)", summary)
    # the readings linked (as the one-page report's contents), the diagnoses on their page
    assert {a for _, a in links} >= {r.anchor for r in results if not r.diagnosis} | {"seed000"}
    for page, anchor in links:
        assert f'<a id="{anchor}"></a>' in pages[page], (page, anchor)
    assert '<a id="seed000--fedmid_step"></a>' in pages["paper-seed000.md"]
    ok = results[0]
    assert f"**Verdict: {ok.verdict}.**" in pages["paper-seed000.md"]
    for fig in ok.figures:
        assert f"]({ok.key}/{fig})" in pages["paper-seed000.md"]
        with Image.open(out / ok.key / fig) as image:
            assert image.mode == "P"  # a palette: a quarter of an RGBA PNG's bytes
    # the site links the small files and names the stored results without linking them
    assert "[config.toml](seed000/config.toml)" in pages["paper-seed000.md"]
    assert "](seed000/results.csv)" not in pages["paper-seed000.md"]


def test_a_placement_key_does_not_rerun_a_finished_run():
    """A config's paper, claim or description places it in the report and changes no run:
    the shipped report's runs, made before configs named their paper, are reused."""
    from fedcomp.report._markers import same_runs

    ran = {"name": "seed000", "rounds": 500, "claim": "old words"}
    assert same_runs(ran, {**ran, "paper": "seed000", "claim": "new words"})
    assert not same_runs(ran, {**ran, "rounds": 400})
