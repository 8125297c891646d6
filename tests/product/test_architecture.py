"""The package's import graph: no cycles, and the experiment pipeline flows one way.

Every ``import`` and ``from ... import`` in ``fedcomp/`` is read from the source (function-
level imports included: a lazy import is still a dependency), resolved to the module it
names (``from . import x`` is the submodule ``x`` when there is one, else the package), and
the graph is checked. ``docs/ARCHITECTURE.md`` draws the same layers.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "fedcomp"

#: The experiment pipeline, in the order data flow through it.
PIPELINE = ["fedcomp.config", "fedcomp.experiments._validate", "fedcomp.experiments._setting",
            "fedcomp.experiments._build",
            "fedcomp.experiments._plan", "fedcomp.experiments._execute",
            "fedcomp.experiments._results", "fedcomp.experiments._runner"]

#: Modules above the core: the pipeline, the experiments' rules and the front ends.
UPPER = ("fedcomp.config", "fedcomp.experiments", "fedcomp.report", "fedcomp.cli",
         "fedcomp.flower", "fedcomp.__main__", "fedcomp.sklearn")


def modules(root: Path = PACKAGE) -> dict[str, tuple[Path, bool]]:
    """``{dotted name: (file, is a package __init__)}`` of every module under ``root``."""
    out = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """``{module: the fedcomp modules it imports}``, read from the source."""
    known = modules(root)
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, (path, is_package) in known.items():
        here = name.split(".") if is_package else name.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = here[:len(here) - (node.level - 1)]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                targets = [f"{module}.{alias.name}" if f"{module}.{alias.name}" in known
                           else module for alias in node.names]
            graph[name] |= {t for t in targets if t in known and t != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_reader_sees_cycles_and_lazy_imports(tmp_path):
    pkg = tmp_path / "fedcomp"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .sub import c\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "c.py").write_text("from .. import a\n")
    graph = import_graph(pkg)
    assert graph["fedcomp.b"] == {"fedcomp.sub.c"}  # a function-level import counts
    assert cycles(graph) == [["fedcomp.a", "fedcomp.b", "fedcomp.sub.c"]]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, f"import cycles in fedcomp/: {found}"


@pytest.mark.parametrize("stage", PIPELINE)
def test_no_pipeline_stage_imports_a_later_one(stage):
    graph = import_graph()
    later = set(PIPELINE[PIPELINE.index(stage) + 1:])
    assert not graph[stage] & later, f"{stage} imports a later stage: {graph[stage] & later}"


def test_the_core_never_imports_the_pipeline_or_the_front_ends():
    graph = import_graph()
    core = [m for m in graph if not m.startswith(UPPER) and m not in ("fedcomp",)]
    upward = {m: sorted(t for t in graph[m] if t.startswith(UPPER)) for m in core}
    assert not {m: t for m, t in upward.items() if t}


def test_the_verdict_rules_read_results_not_runs():
    """An experiment's module judges summaries: it may build a setting (a timing re-run) but
    never plans, executes or writes an output directory."""
    graph = import_graph()
    rules = [m for m in graph if m.startswith("fedcomp.experiments.claims.")
             and not m.rsplit(".", 1)[-1].startswith("_")]
    assert len(rules) >= 13
    forbidden = {"fedcomp.experiments._plan", "fedcomp.experiments._execute",
                 "fedcomp.experiments._results", "fedcomp.experiments._runner"}
    assert {m: graph[m] & forbidden for m in rules if graph[m] & forbidden} == {}


def private_runtime_imports(root: Path = PACKAGE) -> dict[str, list[str]]:
    """``{module: [private names]}``: the underscored names each module imports from a
    module of ``fedcomp.runtime`` (``from ._simulate import _sampled``)."""
    found: dict[str, list[str]] = {}
    for name, (path, is_package) in modules(root).items():
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = node.module or ""
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([target] if target else [])])
            private = [a.name for a in node.names
                       if a.name.startswith("_") and not a.name.startswith("__")]
            if target.startswith("fedcomp.runtime.") and target != name and private:
                found.setdefault(name, []).extend(private)
    return found


def test_the_runners_use_the_runtimes_public_pieces():
    """The runners (simulate, the asynchronous and gossip ones, Ray, Flower) share the
    runtime's public pieces (runtime/_checks.py, the executor's block helpers), never each
    other's privates; only the compiled engine's modules, one engine split in four, do."""
    compiled = {f"fedcomp.runtime._compiled{part}"
                for part in ("", "_parts", "_trace", "_fallback")}
    assert {m: names for m, names in private_runtime_imports().items()
            if m not in compiled} == {}


def test_experiments_holds_the_pipeline_and_claims_the_paper_experiments():
    """experiments/ is the pipeline's stages (private modules) and the package that gathers
    them; every module of a paper's claim is in experiments/claims/."""
    top = sorted(p.stem for p in (PACKAGE / "experiments").glob("*.py"))
    assert [m for m in top if not m.startswith("_")] == [], \
        "a public module in experiments/: a claim goes to experiments/claims/"
    from fedcomp.experiments import EXPERIMENTS

    assert {m.__name__.rsplit(".", 1)[0] for m in EXPERIMENTS.values()} == {
        "fedcomp.experiments.claims"}


#: The folders of tests/, one per layer, each named in ARCHITECTURE.md.
TEST_LAYERS = ("core", "algorithms", "engines", "papers", "product")


def test_every_test_module_sits_in_the_folder_of_its_layer():
    tests = ROOT / "tests"
    loose = sorted(p.name for p in tests.glob("test_*.py"))
    assert loose == [], f"tests/ holds test modules outside a layer's folder: {loose}"
    folders = sorted(p.parent.name for p in tests.glob("*/test_*.py"))
    assert set(folders) == set(TEST_LAYERS), set(folders) ^ set(TEST_LAYERS)
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    assert [layer for layer in TEST_LAYERS if f"`tests/{layer}/`" not in text] == []


# --- no dead code ------------------------------------------------------------------------------
ROOT = PACKAGE.parent
#: Where a definition of the package may be used: the package, its tests, benchmarks,
#: scripts and documentation (a reference objective the tests check against is used).
USERS = [PACKAGE, ROOT / "tests", ROOT / "benchmarks", ROOT / "scripts"]


def _identifiers(path: Path) -> set[str]:
    """Every name a module mentions: names, attributes, imported names, and string
    constants that look like identifiers (``getattr``, ``__all__``, registry entries)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.update({node.name.rpartition(".")[2], node.asname or ""})
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.update(w for w in node.value.replace(".", " ").split() if w.isidentifier())
    return found


def unused_definitions(package: Path, users: list[Path]) -> list[str]:
    """Top-level functions and classes of ``package`` that no module of ``users`` (their
    own module beyond the definition included) and no documentation page mentions."""
    defined: dict[str, list[str]] = {}
    for path in package.rglob("*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) \
                    and not node.name.startswith("__"):
                defined.setdefault(node.name, []).append(path.relative_to(package).as_posix())
    mentioned: set[str] = set()
    for root in users:
        for path in root.rglob("*.py"):
            mentioned |= _identifiers(path)
    docs = " ".join(p.read_text(encoding="utf-8") for p in (ROOT / "docs").rglob("*.md"))
    return sorted(f"{where[0]}:{name}" for name, where in defined.items()
                  if name not in mentioned and name not in docs)


def test_the_dead_code_reader_finds_an_unused_function(tmp_path):
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "a.py").write_text("def used():\n    return 1\n\n\ndef _dead():\n    return 2\n")
    (package / "b.py").write_text("from .a import used\n\nprint(used())\n")
    assert unused_definitions(package, [package]) == ["a.py:_dead"]


def test_no_dead_code():
    """Every function and class of the package is used somewhere: by the package, its
    tests, its benchmarks or scripts, or named in the documentation."""
    assert unused_definitions(PACKAGE, USERS) == []


# --- the core's own floors ---------------------------------------------------------------------
#: The core's units (top-level modules and packages of fedcomp), each on a floor: a unit
#: imports units of lower floors only (function-level imports included). A new unit must be
#: placed here (docs/ARCHITECTURE.md draws the same floors).
CORE_FLOORS = {
    "_array": 0, "_random": 0, "_registry": 0, "_extras": 0, "_lifetime": 0, "_log": 0,
    "data": 1, "regularizers": 1, "compressors": 1, "topology": 1,
    "losses": 2,
    "problem": 3,
    "oracle": 4, "metrics": 4, "reference": 4,
    "algorithms": 5,
    "privacy": 6,
    "runtime": 7,
    "_frames": 8, "toy": 8, "catalogue": 8, "plotting": 8,
}
#: Above the core: the pipeline, the front ends and the package's own namespace.
ABOVE_CORE = {"config", "experiments", "report", "cli", "flower", "sklearn", "__main__",
              "fedcomp"}


def unit_of(module: str) -> str:
    """``fedcomp.runtime._round`` → ``runtime``; the package itself → ``fedcomp``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "fedcomp"


def test_every_unit_of_the_package_has_a_floor_or_is_above_the_core():
    units = {unit_of(m) for m in modules()}
    assert units - set(CORE_FLOORS) - ABOVE_CORE == set()


def test_the_core_imports_only_downward():
    upward = sorted(f"{a} -> {b}" for a, targets in import_graph().items() for b in targets
                    if unit_of(a) in CORE_FLOORS and unit_of(b) != unit_of(a)
                    and not CORE_FLOORS.get(unit_of(b), 99) < CORE_FLOORS[unit_of(a)])
    assert upward == []


def test_architecture_md_names_modules_that_exist_and_every_package():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    named = set(re.findall(r"`?\b([a-z_]+(?:/[a-z_0-9]+)*\.py)\b", text))
    missing = sorted(path for path in named
                     if not (PACKAGE / path).exists() and not (ROOT / path).exists()
                     and not any(PACKAGE.rglob(path)))
    assert missing == [], "ARCHITECTURE.md names modules that do not exist"
    packages = sorted(p.parent.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob(
        "__init__.py") if p.parent != PACKAGE and "configs" not in p.parts)
    unnamed = [p for p in packages if f"{p}/" not in text]
    assert unnamed == [], "packages ARCHITECTURE.md does not name"


# --- module sizes ------------------------------------------------------------------------------
#: Modules still over 700 lines: each is to be split; the list may only shrink.
TO_SPLIT: set[str] = set()


def module_lines() -> dict[str, int]:
    return {path.relative_to(PACKAGE).as_posix(): len(path.read_text(encoding="utf-8")
                                                       .splitlines())
            for path in PACKAGE.rglob("*.py")}


def test_a_module_over_400_lines_is_named_in_architecture_md_with_why():
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text(encoding="utf-8")
    section = text.split("## Modules over 400 lines", 1)[1]
    unnamed = sorted(f"{path} ({n} lines)" for path, n in module_lines().items()
                     if n > 400 and f"`{path}`" not in section)
    assert unnamed == []


def test_no_module_is_over_700_lines_but_those_still_to_split():
    over = {path for path, n in module_lines().items() if n > 700}
    assert over <= TO_SPLIT, over - TO_SPLIT
    assert TO_SPLIT <= set(module_lines()), "a module of TO_SPLIT is gone: drop it from the list"
