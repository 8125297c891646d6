"""The README's and the documentation pages' snippets run as written and show what their
comments say.

The README is the front door: a quickstart that raises, or whose printed number drifted
from the comment beside it, is the first thing a new user meets. Each ```python block is
executed verbatim (in a temporary directory, with the reference cache there too). The
documentation pages (docs/*.md, the site's sources) are held to the same standard: their
```python blocks and ``fedcomp`` commands are checked here, their ``>>>`` examples run as
doctests in tests/product/test_docs.py.
"""

from __future__ import annotations

import contextlib
import gc
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from scripts.render_tables import REGENERATE_HINT, load_hook, stale

#: A page's example shows no warning, so it may raise none: every warning fails its test
#: (the README's scikit-learn example once raised 11 ConvergenceWarnings it did not show).
pytestmark = pytest.mark.filterwarnings("error")


@pytest.fixture(autouse=True)
def _earlier_tests_garbage_collected():
    """Collect what earlier tests of this worker left before a page's snippet runs under
    "error": a file another test leaked would otherwise be finalised during the snippet and
    fail it with that test's ResourceWarning. The snippet's own garbage still counts."""
    hook = sys.unraisablehook
    sys.unraisablehook = lambda unraisable: None
    try:
        gc.collect()
    finally:
        sys.unraisablehook = hook

README = Path(__file__).resolve().parents[2] / "README.md"
#: the README and the documentation site's pages (not the generated report)
PAGES = (README, *sorted(p for p in (README.parent / "docs").rglob("*.md")
                         if "report" not in p.relative_to(README.parent / "docs").parts))


def _text() -> str:
    return "\n".join(page.read_text(encoding="utf-8") for page in PAGES)


def python_blocks() -> list[str]:
    """Every ```python block but the ``>>>`` ones (doctests, run by tests/product/test_docs.py)."""
    return [block for block in re.findall(r"```python\n(.*?)```", _text(), re.S)
            if not block.lstrip().startswith(">>>")]


def block_with(marker: str) -> str:
    """The one Python block containing ``marker`` (a page may repeat it verbatim)."""
    found = sorted({b for b in python_blocks() if marker in b})
    assert len(found) == 1, f"expected one python block with {marker!r}, found {len(found)}"
    return found[0]


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path


def run_block(source: str) -> dict:
    namespace: dict = {"__name__": "readme"}
    exec(compile(source, str(README), "exec"), namespace)  # noqa: S102 - the README's own code
    return namespace


@contextlib.contextmanager
def ray_warnings():
    """Ray's own warnings shown, not raised: its tips (an accelerator variable's future
    default) and its workers' files are Ray's, whatever the snippet does."""
    with warnings.catch_warnings():
        warnings.simplefilter("default")
        yield


@pytest.mark.slow
def test_ray_clients_snippet_gives_the_simulators_iterates(sandbox):
    """docs/scale.md: a Ray instance on this machine, two actors; the block asserts equality."""
    pytest.importorskip("ray")
    with ray_warnings():
        namespace = run_block(block_with("on_ray = simulate("))
    assert namespace["on_ray"].counters == namespace["local"].counters


@pytest.mark.slow
def test_data_on_disk_snippet_gives_the_simulators_iterates(sandbox):
    """docs/scale.md: data saved, loaded memory-mapped, read by the actors from the files."""
    pytest.importorskip("ray")
    with ray_warnings():
        namespace = run_block(block_with("ClientData.load(directory)"))
    assert namespace["run"].counters == namespace["local"].counters


def test_every_python_block_is_covered():
    """A new snippet must get a test here (or be listed as needing outside context)."""
    covered = (QUICKSTART, LANDING, 'Checkpoint("za1.npz")', "partition=\"writers\"",
               "TorchModel(\"cnn\"", "run_simulation(", "FederatedLogisticRegression(",
               "mlp.pruned_module(run.x)", "from_federated_dataset(table",
               "ray_clients(shards=2)",
               "ClientData.load(directory)", DITTO,
               # docs/flower.md's own app: tests/product/test_flower_strategy.py deploys it
               "Strategy(feddr(", "client_train(msg, context",
               "strategy.stopping(")  # tests/product/test_flower_143.py runs it
    for block in python_blocks():
        assert any(marker in block for marker in covered), f"untested README block:\n{block}"


QUICKSTART = "reference = fedcomp.solve_reference(problem)"
#: docs/index.md's ten lines: FedMiD stalls, ZA1 reaches the centralized solution
LANDING = "x_star = fedcomp.solve_reference(problem)"


def run_without_warnings(source: str) -> dict:
    """Run a page's block with every warning an error, whatever the test's filters."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return run_block(source)


def test_the_landing_pages_example_prints_what_its_comment_says(sandbox, capsys):
    """The front page's example runs without a warning and prints each algorithm's final
    distance to x*, as its comment says: FedMiD at its drift floor, ZA1 at x*."""
    block = block_with(LANDING)
    run_without_warnings(block)
    said = re.findall(r"^# (\w+ \S+)", block, re.M)  # the comments below it: what it prints
    assert said == ["fedmid 4e-01", "za1 8e-08"], said
    assert capsys.readouterr().out.splitlines() == said
    code = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(code) <= 14 and max(map(len, code)) <= 80  # fits the page's code box
DITTO = "personal_metrics(problem, run.client_states.personal, run.x)"


def test_ditto_snippet_prints_the_commented_gains(sandbox, capsys):
    exec(block_with(DITTO), {})
    printed = capsys.readouterr().out.strip()
    assert printed == "[0.263, 0.191, 0.053]"  # the comment below the print


def test_quickstart_python_reaches_the_commented_accuracy(sandbox, capsys):
    namespace = run_block(block_with(QUICKSTART))
    printed = float(capsys.readouterr().out.split()[-1])
    # the comment says "≈ 4e-9"; measured 3.6e-9
    assert 1e-10 < printed < 1e-8
    assert namespace["run"].history[-1]["optimality"] == printed


def test_stopping_snippet_converges_and_checkpoints(sandbox, capsys):
    """docs/getting-started.md: the quickstart's problem, run to tol with a checkpoint."""
    namespace = run_block(block_with(QUICKSTART))
    exec(compile(block_with('Checkpoint("za1.npz")'), "getting-started", "exec"),  # noqa: S102
         namespace)
    status, rounds = capsys.readouterr().out.split()[-2:]
    assert status == "converged" and 0 < int(rounds) < 2000
    assert (sandbox / "za1.npz").exists()


def test_sklearn_snippet_picks_the_commented_alpha(sandbox, capsys):
    pytest.importorskip("sklearn")
    namespace = run_without_warnings(block_with("FederatedLogisticRegression("))
    # the comment: "{'alpha': 0.01} 10 (of 20 features)"
    assert capsys.readouterr().out.split() == ["{'alpha':", "0.01}", "10"]
    assert namespace["best"].coef_.shape == (1, 20)


def test_digits_writers_snippet_holds_out_359_images(sandbox):
    namespace = run_block(block_with('partition="writers"'))
    data = namespace["data"]
    assert data.n_clients == 7
    features, _ = data.holdout
    assert len(features) == 359  # the comment: "data.holdout: 359 test images"


def test_torch_cnn_snippet_trains(sandbox):
    pytest.importorskip("torch")
    namespace = run_block(block_with('TorchModel("cnn"'))
    last = namespace["run"].history[-1]
    assert last["round"] == 30
    assert last["test_accuracy"] > 0.5  # 10 classes under Dir(0.2): chance is 0.1
    assert 0.0 <= last["sparsity"] <= 1.0


def test_pruning_snippet_prints_the_commented_count_with_the_same_outputs(sandbox, capsys):
    pytest.importorskip("torch")
    import torch

    block = block_with("mlp.pruned_module(run.x)")
    namespace = run_block(block)
    printed = capsys.readouterr().out.strip()
    comment = re.search(r"^# (\d+ of \d+ parameters)", block, re.M).group(1)
    assert printed == comment
    accuracy = float(re.search(r"test accuracy ([\d.]+)", block).group(1))
    assert round(namespace["run"].history[-1]["test_accuracy"], 2) == accuracy
    features = np.asarray(namespace["problem"].data.holdout[0][:50])
    with torch.no_grad():
        pruned = namespace["smaller"](torch.from_numpy(features)).numpy()
    np.testing.assert_allclose(pruned, namespace["mlp"].predict(namespace["run"].x, features),
                               rtol=1e-6, atol=1e-6)


def test_federated_dataset_snippet_makes_one_client_per_partition(sandbox):
    pytest.importorskip("flwr_datasets")
    data = run_block(block_with("from_federated_dataset(table"))["data"]
    assert data.n_clients == 2 and data.feature_shape == (2,) and int(data.counts.sum()) == 4


def test_flower_simulation_snippet_loads_its_config_and_calls_a_real_function():
    """The Flower-simulation snippet runs all of seed 000 through Ray (minutes): check the
    config it names loads and the call matches ``run_simulation``'s signature; the Flower
    tests run the engine itself on small configs."""
    import inspect

    from fedcomp.config import load

    flower = pytest.importorskip("fedcomp.flower")
    block = block_with("run_simulation(")
    name = re.search(r'load\("([^"]+)"\)', block).group(1)
    config = load(name)
    assert config["algorithms"]
    call = re.search(r"run_simulation\((.*)\)", block).group(1)
    inspect.signature(flower.run_simulation).bind(*(a.strip() for a in call.split(",")))


def readme_cli_commands() -> list[list[str]]:
    """Every ``fedcomp ...`` command of the README's bash blocks, continuations joined and
    trailing comments dropped, as argv lists."""
    import shlex

    commands = []
    for block in re.findall(r"```bash\n(.*?)```", _text(), re.S):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            for i, word in enumerate(words):  # a redirection or pipe ends the command
                if word in (">", ">>", "|"):
                    words = words[:i]
                    break
            if words[:1] == ["fedcomp"]:
                commands.append(words[1:])
    return commands


def test_readme_cli_commands_parse_and_name_real_configs():
    """Each command the README shows is accepted by the CLI's parser (no run), and each
    experiment or config file it names exists — a renamed flag or experiment breaks this
    test, not a user."""
    from fedcomp.cli import build_parser
    from fedcomp.config import experiment_names

    commands = readme_cli_commands()
    assert len(commands) >= 10
    parser = build_parser()
    for argv in commands:
        try:
            parser.parse_args(argv)
        except SystemExit as exc:  # argparse exits 2 on an unknown flag or choice
            command = "fedcomp " + " ".join(argv)
            raise AssertionError(f"README command does not parse: {command}") from exc
        args = parser.parse_args(argv)
        named = getattr(args, "config", None)
        if named and not named.endswith(".toml"):
            assert named in experiment_names(), f"README names a missing experiment {named}"


def test_readme_run_commands_name_settings_the_config_accepts():
    """Beyond parsing: each README ``fedcomp run`` applies its ``--set`` and ``--sweep``
    assignments to its config and the result resolves (what ``cmd_run`` checks before it
    writes anything), so a key renamed in the config schema breaks this test."""
    from fedcomp.cli import _load_config, build_parser
    from fedcomp.config import apply_override, expand_sweep, parse_sweep
    from fedcomp.experiments import validate

    runs = [build_parser().parse_args(a) for a in readme_cli_commands() if a[0] == "run"]
    assert any(args.set for args in runs) and any(args.sweep for args in runs)
    for args in runs:
        if args.config and args.config.endswith(".toml"):
            continue  # a file the README's reader writes first (fedcomp show NAME > FILE)
        config = _load_config(args.config)
        for assignment in args.set or []:
            config = apply_override(config, assignment)
        for _, point in expand_sweep(config, [parse_sweep(s) for s in args.sweep or []]):
            validate(point)


# --- the algorithm tables and counts are generated from the registry ---------------------------
def test_the_generated_blocks_are_the_registrys():
    """Every ``<!-- registry:NAME -->`` block of the README and the pages is what the
    built-in algorithms' registry entries render (docs/_hooks/algorithms.py)."""
    found = {str(page.relative_to(README.parent)): names for page, names in stale().items()}
    assert not found, f"out of date with the registry: {found}; {REGENERATE_HINT}"


def test_the_tables_and_counts_stand_in_generated_blocks():
    """The README's and the algorithm pages' tables and counts are generated blocks, so
    adding an algorithm edits none of them by hand."""
    docs = README.parent / "docs"
    for page, names in ((README, ("algorithm-count", "algorithm-table")),
                        (docs / "index.md", ("algorithm-count", "family-count")),
                        (docs / "algorithms" / "index.md", ("family-table", "algorithm-table"))):
        text = page.read_text(encoding="utf-8")
        for name in names:
            assert f"<!-- registry:{name}" in text and f"<!-- /registry:{name} -->" in text, (
                page.name, name)


def test_the_algorithm_table_names_every_built_in_algorithm():
    """The README's table of algorithms names the package's algorithms, each once."""
    from fedcomp.algorithms import REGISTRY

    builtin = [e.name for e in load_hook().builtin_entries(REGISTRY)]
    table = README.read_text().split("## Algorithms", 1)[1].split("\n## ", 1)[0]
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| ")]
    named = re.findall(r"`([a-z0-9_]+)`", "\n".join(row[2] for row in rows))
    assert sorted(named) == sorted(builtin), (sorted(set(builtin) - set(named)),
                                              sorted(set(named) - set(builtin)))
    assert f"{len(builtin)} algorithms" in table


def test_a_stale_block_is_found_and_rendered_afresh():
    """The check fails on a hand-edited count or a missing row, and the command's rendering
    restores the block; an unknown block is one error naming it."""
    from fedcomp.algorithms import FAMILIES, REGISTRY

    hook = load_hook()
    entries = hook.builtin_entries(REGISTRY)
    text = README.read_text(encoding="utf-8")
    edited = text.replace(f">{len(entries)} algorithms<", f">{len(entries) - 1} algorithms<")
    edited = edited.replace("| `fedmid` |", "| `fedmid_old` |")
    assert hook.stale_blocks(edited, entries, FAMILIES) == ["algorithm-count",
                                                            "algorithm-table"]
    assert hook.render_blocks(edited, entries, FAMILIES) == text
    with pytest.raises(ValueError, match=r"README.md: unknown generated block "
                                         r"'registry:algorithm-tabel'; known: algorithm-count"):
        hook.stale_blocks("<!-- registry:algorithm-tabel -->\n<!-- /registry:algorithm-tabel -->",
                          entries, FAMILIES, where="README.md")


def test_every_family_has_its_page():
    """Each family of the package links to its page of docs/algorithms/."""
    from fedcomp.algorithms import FAMILIES

    pages = load_hook().FAMILY_PAGES
    assert set(pages) == set(FAMILIES)
    assert all((README.parent / "docs" / "algorithms" / page).is_file()
               for page in pages.values()), pages


#: Counts of the whole the pages may give, by their noun: each the registry's.
COUNTED = ("algorithms", "families", "experiments", "papers")
NUMBER_WORDS = ("two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
                "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen",
                "eighteen", "nineteen", "twenty")
#: Pages that count something else by those nouns: the benchmarks' configurations, the
#: architecture's notes, and one experiment's three papers.
OTHER_COUNTS = {"BENCHMARKS.md", "ARCHITECTURE.md"}
NOT_OF_THE_REGISTRY = {("compressed-local-training.md", "three papers")}


def registry_counts() -> dict[str, int]:
    """What the counted nouns number in the registries (the built-in algorithms)."""
    from fedcomp.algorithms import FAMILIES, REGISTRY
    from fedcomp.config import experiment_names, load
    from fedcomp.report import paper_of

    entries = load_hook().builtin_entries(REGISTRY)
    return {"algorithms": len(entries),
            "families": len(load_hook().family_order(entries, FAMILIES)),
            "experiments": len(experiment_names()),
            "papers": len({paper_of(load(name)) for name in experiment_names()})}


def counts_said(text: str) -> list[tuple[str, str]]:
    """``[(number, noun)]``: every "18 experiments", "the 18 built-in experiments" or
    "five papers" in ``text``."""
    number = r"\d+|" + "|".join(NUMBER_WORDS)
    return re.findall(rf"\b({number}) (?:built-in |seed )?({'|'.join(COUNTED)})\b", text,
                      re.I)


def test_the_counts_the_pages_give_are_the_registries():
    """"the 16 built-in experiments", "30 algorithms", "five families", "five papers": a
    count of the README or a page of the site is the registry's (they once said 13, 24 and
    five while 16, 30 and 10 were registered), and it stands in a generated block, so that
    it cannot drift: python -m scripts.render_tables rewrites it."""
    counts = registry_counts()
    hook = load_hook()
    said, by_hand = [], []
    for page in PAGES:
        if page.name in OTHER_COUNTS:
            continue
        text = page.read_text(encoding="utf-8")
        for block in hook.BLOCK.finditer(text):
            said += [(page.name, n, noun.lower()) for n, noun in counts_said(block["body"])]
        by_hand += [(page.name, f"{n} {noun}") for n, noun in counts_said(hook.BLOCK.sub("", text))
                    if (page.name, f"{n} {noun}".lower()) not in NOT_OF_THE_REGISTRY]
    assert {noun for _, _, noun in said} == set(COUNTED), said
    wrong = [(page, n, noun) for page, n, noun in said if int(n) != counts[noun]]
    assert not wrong, (wrong, counts)
    assert not by_hand, f"a count outside a generated block: {by_hand}; {REGENERATE_HINT}"


def test_a_count_that_differs_from_the_registry_fails_the_check():
    """The front page's paper and experiment counts out of date are stale blocks."""
    from fedcomp.algorithms import FAMILIES, REGISTRY

    hook = load_hook()
    entries = hook.builtin_entries(REGISTRY)
    counts = registry_counts()
    text = (README.parent / "docs" / "index.md").read_text(encoding="utf-8")
    edited = text.replace(f">{counts['papers']} papers<", ">5 papers<").replace(
        f">{counts['families']} families<", ">5 families<")
    assert edited != text
    assert hook.stale_blocks(edited, entries, FAMILIES) == ["family-count", "paper-count"]
    assert hook.render_blocks(edited, entries, FAMILIES) == text


def table_names(page: str, header: str) -> list[str]:
    """The names in the first column of ``page``'s table whose header row starts with
    ``header`` (a cell may name several, ``| `mnist`, `fashion_mnist` |``, and its
    parameters after them, ``| `rand_k` (`k` or `fraction`) |``)."""
    text = (README.parent / "docs" / page).read_text(encoding="utf-8")
    rows = text[text.index(header):].splitlines()[2:]
    rows = rows[:next((i for i, row in enumerate(rows) if not row.startswith("|")), len(rows))]
    return [name for row in rows
            for name in re.findall(r"`(\w+)`", row.split("|")[1].split("(")[0])]


def test_the_pages_tables_name_every_registered_component():
    """The pages' tables of regularizers, compressors, data sets and partitioners name
    exactly the registries' entries (data.md once lacked three generators): a component
    registered without its row, or a row left after its removal, fails here."""
    from fedcomp.compressors import COMPRESSORS
    from fedcomp.data import DATASETS, PARTITIONERS
    from fedcomp.regularizers import REGULARIZERS

    tables = {"regularizers": table_names("regularizers.md", "| name | $g(x)$"),
              "compressors": table_names("compressors.md", "| name | what the server gets"),
              "datasets": table_names("data.md", "| name | data |")
              + table_names("data.md", "| name | source |"),
              "partitioners": table_names("data.md", "| name | split |")}
    registries = {"regularizers": REGULARIZERS, "compressors": COMPRESSORS,
                  "datasets": DATASETS, "partitioners": PARTITIONERS}
    for kind, named in tables.items():
        assert sorted(named) == sorted(registries[kind]), (
            kind, sorted(set(registries[kind]) - set(named)),
            sorted(set(named) - set(registries[kind])))


# --- the README's verdict table follows the shipped report -----------------------------------
REPORT = README.parent / "docs" / "report"
LEVELS = ("not reproduced", "partly", "reproduced")  # "not reproduced" before "reproduced"


def _level(text: str) -> str | None:
    text = text.strip()
    return next((level for level in LEVELS if text.startswith(level)), None)


def report_verdicts() -> dict[tuple[str, str], str]:
    """``(experiment, reading) → verdict`` as docs/report/report.md prints them."""
    page = (REPORT / "report.md").read_text(encoding="utf-8")
    found = {}
    for match in re.finditer(r'<a id="([\w.]+)--([\w.]+)"></a>(.*?)\*\*Verdict: (.*?)\.\*\*',
                             page, re.S):
        found.setdefault((match[1], match[2]), match[4])
    return found


def verdict_table() -> list[dict[str, str]]:
    """The rows of the README's verdict table, by column name."""
    text = README.read_text(encoding="utf-8")
    header = "| experiment | paper | as written | as run (official code) | what moves it |"
    lines = text[text.index(header):].splitlines()
    columns = [c.strip() for c in lines[0].strip("|").split("|")]
    rows = []
    for line in lines[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append(dict(zip(columns, cells, strict=True)))
    return rows


def _seeds_said(cell: str) -> str | None:
    """``"3/5"`` of a cell's ``(3/5)`` or ``3/5 seeds``, if it says one."""
    match = re.search(r"(\d+)/(\d+)", cell)
    return None if match is None else f"{match[1]} of {match[2]} seeds"


def test_the_readme_table_names_every_experiment_of_the_report():
    experiments = {row["experiment"] for row in verdict_table()}
    assert experiments == {p.name for p in REPORT.iterdir() if p.is_dir()}


@pytest.mark.parametrize("row", verdict_table(), ids=lambda row: row["experiment"])
def test_the_readme_verdicts_are_the_reports(row):
    verdicts = report_verdicts()
    name = row["experiment"]
    written = verdicts[(name, "as_written")]
    assert _level(row["as written"]) == _level(written), (row["as written"], written)
    said = _seeds_said(row["as written"])
    assert said is None or said in written, (row["as written"], written)
    if (name, "as_run") in verdicts:
        run = verdicts[(name, "as_run")]
        assert _level(row["as run (official code)"]) == _level(run), (row, run)
        said = _seeds_said(row["as run (official code)"])
        assert said is None or said in run, (row["as run (official code)"], run)
    else:
        assert _level(row["as run (official code)"]) is None, row


@pytest.mark.parametrize("row", verdict_table(), ids=lambda row: row["experiment"])
def test_what_moves_a_verdict_names_a_run_of_the_report(row):
    """Every "what moves it" cell names a diagnosis or reading that ran, with its verdict as
    the report prints it; only a claim reproduced in every reading may say nothing."""
    verdicts = report_verdicts()
    name, cell = row["experiment"], row["what moves it"]
    named = re.findall(r"`([\w.]+)`", cell)
    if cell == "—":
        levels = [v for (e, _), v in verdicts.items() if e == name and _ in ("as_written",
                                                                               "as_run")]
        assert all(_level(v) == "reproduced" for v in levels), (name, levels)
        return
    assert named, f"{name}: 'what moves it' names no run: {cell!r}"
    for reading in named:
        assert (name, reading) in verdicts, f"{name}: no run '{reading}' in the report"
        # the level said right after the name (`code_gamma`: partly) is the report's
        after = cell[cell.index(f"`{reading}`") + len(reading) + 2:].split("`")[0]
        said = re.search(r"(not reproduced|partly|reproduced)", after)
        if said:
            assert said[1] == _level(verdicts[(name, reading)]), (reading, cell,
                                                                   verdicts[(name, reading)])
