"""A missing optional extra ends in one line naming the feature, the package and the fix.

Each extra is made unimportable in a subprocess (a meta-path finder that refuses the module,
installed before fedcomp is imported: the same ``ModuleNotFoundError`` as a package that is
not installed), and the public entry points that need it are called there: the Python API
must raise :class:`fedcomp.MissingExtraError` without a chained traceback, ``python -m
fedcomp`` must print one ``error: ...`` line naming ``fedcomp[EXTRA]`` and exit 2.
"""

from __future__ import annotations

import ast
import importlib.util
import inspect
import json
import os
import pickle
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import fedcomp
from fedcomp import MissingExtraError
from fedcomp._extras import EXTRAS, check_installed, require
from fedcomp.data import DATASET_NEEDS, DATASETS

PACKAGE = Path(fedcomp.__file__).resolve().parent
ROOT = PACKAGE.parent

#: Run first in every subprocess: the modules named by the first argument cannot be imported.
BLOCKER = """
import sys

BLOCKED = set(sys.argv.pop(1).split(","))
assert not BLOCKED & set(sys.modules), "imported before the blocker"


class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, NotInstalled())
"""

#: Evaluates each ``label: expression`` of ``sys.argv[1]`` (JSON) and prints, as JSON, how
#: each one ended: the exception's type, message and whether a chained one would be shown.
API_PROBE = BLOCKER + """
import json

results = {}
for label, expression in json.loads(sys.argv[1]).items():
    try:
        exec(expression, {})
        results[label] = ["ok", "", False]
    except Exception as exc:
        chained = exc.__cause__ is not None or (exc.__context__ is not None
                                                and not exc.__suppress_context__)
        results[label] = [type(exc).__name__, str(exc), chained]
print(json.dumps(results))
"""

CLI = BLOCKER + "import runpy\nrunpy.run_module('fedcomp', run_name='__main__', alter_sys=True)\n"


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "FEDCOMP_DEBUG"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    return env


def probe_api(blocked: str, expressions: dict[str, str], cwd: Path) -> dict[str, list]:
    """How each expression ends in a Python where ``blocked`` (comma-separated) is missing."""
    res = subprocess.run([sys.executable, "-c", API_PROBE, blocked, json.dumps(expressions)],
                         capture_output=True, text=True, cwd=cwd, env=_env(), timeout=300)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.splitlines()[-1])


def fedcomp_without(blocked: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    """``python -m fedcomp ARGS`` in a Python where ``blocked`` (comma-separated) is missing."""
    return subprocess.run([sys.executable, "-c", CLI, blocked, *args], capture_output=True,
                          text=True, cwd=cwd, env=_env(), timeout=300)


def assert_missing(result: list, extra: str, feature: str) -> None:
    kind, message, chained = result
    assert kind == "MissingExtraError", result
    assert f"pip install 'fedcomp[{extra}]'" in message and feature in message, message
    assert "\n" not in message and not chained, result


def assert_one_error(res: subprocess.CompletedProcess, extra: str) -> str:
    """Exit 2, the last stderr line is the only ``error:`` line, it names the extra."""
    lines = res.stderr.splitlines()
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], res.stderr
    assert f"pip install 'fedcomp[{extra}]'" in lines[-1], lines[-1]
    return lines[-1]


# --- the error and the helpers --------------------------------------------------------------
def test_message_is_one_line_with_the_feature_the_package_and_the_fix():
    exc = MissingExtraError("fedcomp.data.digits", ["sklearn"])
    assert isinstance(exc, ImportError) and exc.name == "sklearn"
    assert str(exc) == "fedcomp.data.digits needs scikit-learn: pip install 'fedcomp[data]'"
    both = MissingExtraError("config 'x'", ["torch", "sklearn", "torch"])
    assert both.modules == ("torch", "sklearn") and both.extras == ("data", "torch")
    assert str(both) == "config 'x' needs torch and scikit-learn: pip install 'fedcomp[data,torch]'"


def test_error_survives_pickling_from_a_worker_process():
    exc = pickle.loads(pickle.dumps(MissingExtraError("f", ["ray"])))
    assert type(exc) is MissingExtraError
    assert str(exc) == "f needs ray: pip install 'fedcomp[flower]'"


def test_unknown_modules_are_a_programming_error():
    with pytest.raises(ValueError, match="'yaml' is not an optional dependency.*sklearn"):
        require("yaml", "f")
    with pytest.raises(ValueError, match="not an optional dependency"):
        MissingExtraError("f", ["numpy"])
    with pytest.raises(ValueError, match="at least one"):
        MissingExtraError("f", [])


def test_require_returns_the_module():
    pytest.importorskip("sklearn")
    assert require("sklearn.datasets", "f").__name__ == "sklearn.datasets"
    check_installed(["sklearn"], "f")  # installed: nothing raised


def test_a_broken_install_is_not_reported_as_a_missing_extra(tmp_path):
    """scikit-learn installed without its dependency joblib: the real error, unchanged."""
    pytest.importorskip("sklearn")
    results = probe_api("joblib", {"load": "import fedcomp.data as d; d.breast_cancer()"},
                        tmp_path)
    assert results["load"][0] == "ModuleNotFoundError" and "joblib" in results["load"][1]


def test_every_extra_is_declared_in_pyproject():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    for module, (package, extra) in EXTRAS.items():
        assert extra in extras, f"{module}: no extra {extra!r} in pyproject.toml"
        # ray comes with flwr[simulation]
        wanted = "flwr[simulation]" if package == "ray" else package
        assert any(req.startswith(wanted) for req in extras[extra]), (module, extras[extra])


def test_dataset_needs_lists_every_loader_of_an_optional_module():
    for name, loader in DATASETS.items():
        tree = ast.parse(inspect.getsource(loader).lstrip())
        needs = {node.args[0].value.partition(".")[0] for node in ast.walk(tree)
                 if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "require"}
        assert needs == ({DATASET_NEEDS[name]} if name in DATASET_NEEDS else set()), name


#: Modules importing optional packages plainly, and the guard that runs before any of them.
GUARDED = {
    "flower/_client.py": "fedcomp/flower/__init__.py requires flwr",
    "flower/_codec.py": "fedcomp/flower/__init__.py requires flwr",
    "flower/_server.py": "fedcomp/flower/__init__.py requires flwr",
    "flower/_simulation.py": "fedcomp/flower/__init__.py requires flwr; ray checked first",
    "flower/_strategy.py": "fedcomp/flower/__init__.py requires flwr",
    "flower/_user_client.py": "fedcomp/flower/__init__.py requires flwr",
    "losses/_networks.py": "imported after TorchModel.__post_init__ / NETWORKS require torch",
    "losses/_block_forward.py": "runs on the network of a TorchModel",
    "losses/_torch.py": "methods of a TorchModel, whose __post_init__ requires torch",
    "losses/_buffers.py": "runs on the network of a TorchModel (BatchNorm buffers)",
    "losses/_prune.py": "runs on TorchModel.to_module's network (pruned_module)",
    "losses/_jax_forward.py": "a TorchModel's forward on jax arrays: jax made them, torch "
                              "is the TorchModel's",
    "losses/_autocast.py": "runs on a TorchModel's tensors, whose __post_init__ requires torch",
    "losses/_layout.py": "_is_weight runs in TorchModel.layout, whose __post_init__ requires "
                         "torch (ParamLayout itself is NumPy)",
    "flower/_privacy.py": "fedcomp/flower/__init__.py requires flwr",
    "flower/_stopping.py": "fedcomp/flower/__init__.py requires flwr",
}


def _scopes(tree: ast.Module) -> list[list[ast.AST]]:
    """The nodes of the module's own statements, then of each function (nested ones too)."""
    top = [s for s in tree.body
           if not isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)]
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return [[node for statement in top for node in ast.walk(statement)],
            *([*ast.walk(f)] for f in functions)]


def test_every_optional_import_goes_through_require():
    """An ``import torch`` (sklearn, matplotlib, flwr, ray) is allowed only after a
    ``require`` of the same package in the same function, or in a module of GUARDED."""
    bare = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative in GUARDED:
            continue
        for nodes in _scopes(ast.parse(path.read_text())):
            required = {call.args[0].value.partition(".")[0]: call.lineno for call in nodes
                        if isinstance(call, ast.Call) and getattr(call.func, "id", "") == "require"
                        and isinstance(call.args[0], ast.Constant)}
            for node in nodes:
                names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0
                         and node.module else [])
                for name in names:
                    top = name.partition(".")[0]
                    if top in EXTRAS and not required.get(top, node.lineno) < node.lineno:
                        bare.append(f"{relative}:{node.lineno} import {name}")
    assert not bare, f"optional imports not behind fedcomp._extras.require: {bare}"


# --- each extra missing, in a subprocess ----------------------------------------------------
@pytest.mark.parametrize("feature", ["breast_cancer", "digits"])
def test_data_api_without_scikit_learn(tmp_path, feature):
    results = probe_api("sklearn", {feature: f"import fedcomp.data as d; d.{feature}()"},
                        tmp_path)
    assert_missing(results[feature], "data", f"fedcomp.data.{feature}")


def test_sklearn_front_door_without_scikit_learn(tmp_path):
    results = probe_api("sklearn", {"core": "import fedcomp",
                                    "estimators": "import fedcomp.sklearn"}, tmp_path)
    assert results["core"] == ["ok", "", False]
    assert_missing(results["estimators"], "data", "fedcomp.sklearn")


def test_data_cli_without_scikit_learn(tmp_path):
    res = fedcomp_without("sklearn", "run", "fedcanon_stepsizes", "--set", "rounds=1",
                          "--out", "out", cwd=tmp_path)
    line = assert_one_error(res, "data")
    assert res.stderr.splitlines() == [line]  # refused before the run starts
    assert "'fedcanon_stepsizes'" in line and "scikit-learn" in line
    assert not (tmp_path / "out").exists()


def test_torch_api_without_torch(tmp_path):
    results = probe_api("torch", {
        "model": "from fedcomp.losses import TorchModel; TorchModel('mlp', input_shape=(3,), "
                 "n_classes=2)",
        "networks": "import fedcomp.losses; fedcomp.losses.NETWORKS",
        "backend": "from fedcomp.config import load; from fedcomp.experiments import "
                   "resolve; resolve({**load('seed000'), 'backend': 'torch'})",
        "timing": "from fedcomp.config import load; "
                  "from fedcomp.experiments.claims import prox_cost; "
                  "prox_cost.run(load('prox_cost'), "
                  "'timing-out')",
    }, tmp_path)
    assert_missing(results["model"], "torch", "fedcomp.losses.TorchModel")
    assert_missing(results["networks"], "torch", "fedcomp.losses.NETWORKS")
    assert_missing(results["backend"], "torch", "backend = 'torch'")
    assert_missing(results["timing"], "torch", "'prox_cost'")
    assert not (tmp_path / "timing-out").exists()


@pytest.mark.parametrize("name, args", [("fedcanon_nn", ["--set", "rounds=1"]),
                                        ("prox_cost", [])])  # a timing: no rounds
def test_torch_cli_without_torch(tmp_path, name, args):
    res = fedcomp_without("torch", "run", name, *args, "--out", "out", cwd=tmp_path)
    line = assert_one_error(res, "torch")
    assert res.stderr.splitlines() == [line] and f"'{name}'" in line
    assert not (tmp_path / "out").exists()


def test_jax_api_without_jax(tmp_path):
    results = probe_api("jax,jaxlib", {
        "like": "from fedcomp.runtime import jax_like; jax_like()",
        "backend": "from fedcomp.config import load; from fedcomp.experiments import "
                   "resolve; resolve({**load('seed000'), 'backend': 'jax-float32'})",
        "numpy": "import fedcomp.runtime, fedcomp.experiments",  # the core imports no jax
    }, tmp_path)
    assert_missing(results["like"], "jax", "the jax backend")
    assert_missing(results["backend"], "jax", "backend = 'jax-float32'")
    assert results["numpy"][0] == "ok", results["numpy"]


def test_jax_cli_without_jax(tmp_path):
    res = fedcomp_without("jax,jaxlib", "run", "seed000", "--set", "backend='jax'",
                          "--set", "rounds=1", "--out", "out", cwd=tmp_path)
    line = assert_one_error(res, "jax")
    assert res.stderr.splitlines() == [line] and "backend = 'jax'" in line
    assert not (tmp_path / "out").exists()


def test_without_torch_and_scikit_learn_one_line_names_both(tmp_path):
    res = fedcomp_without("torch,sklearn", "run", "fedcanon_nn", cwd=tmp_path)
    line = assert_one_error(res, "data,torch")
    assert "scikit-learn and torch" in line or "torch and scikit-learn" in line


def test_plot_api_without_matplotlib(tmp_path):
    results = probe_api("matplotlib", {
        "plot": "from fedcomp.plotting import plot_results; plot_results('r.csv', 'p.png')",
        "figure": "from fedcomp.plotting import results_figure; results_figure('r.csv')",
        "report": "from fedcomp.report import run_report; run_report('rep', configs=[])",
    }, tmp_path)
    assert_missing(results["plot"], "plot", "fedcomp.plotting")
    assert_missing(results["figure"], "plot", "fedcomp.plotting")
    assert_missing(results["report"], "plot", "fedcomp report")
    assert not (tmp_path / "rep").exists()  # refused before any experiment runs


def test_plot_cli_without_matplotlib(tmp_path):
    # a run degrades gracefully: results without plot.png, and the line says why
    run = fedcomp_without("matplotlib", "run", "--set", "rounds=2", "--set", "eval_every=1",
                          "--set", "data.n_clients=4", "--set", "data.samples_per_client=20",
                          "--set", "batch_size=['full']", "--seeds", "0", "--out", "run",
                          "--quiet", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "no plot.png: fedcomp.plotting needs matplotlib: pip install 'fedcomp[plot]'" in (
        run.stderr)
    assert (tmp_path / "run" / "results.csv").exists()
    assert not (tmp_path / "run" / "plot.png").exists()
    assert_one_error(fedcomp_without("matplotlib", "plot", "run", cwd=tmp_path), "plot")
    report = fedcomp_without("matplotlib", "report", "--quick", "--only", "seed000", "--out",
                             "rep", cwd=tmp_path)
    assert "fedcomp report" in assert_one_error(report, "plot")
    assert not (tmp_path / "rep").exists()


def test_flower_without_flwr(tmp_path):
    results = probe_api("flwr", {"import": "import fedcomp.flower"}, tmp_path)
    assert_missing(results["import"], "flower", "fedcomp.flower")
    res = fedcomp_without("flwr", "flower", "local", "seed000", "--nodes", "2", "--out", "out",
                          cwd=tmp_path)
    assert "fedcomp.flower needs flwr" in assert_one_error(res, "flower")
    assert not (tmp_path / "out").exists()


@pytest.mark.skipif(importlib.util.find_spec("flwr") is None, reason="needs Flower")
def test_flower_simulation_without_ray(tmp_path):
    results = probe_api("ray", {
        "simulation": "import fedcomp.flower as f; from fedcomp.config import load; "
                      "f.run_simulation(load('seed000'), 'sim')"}, tmp_path)
    assert_missing(results["simulation"], "flower", "fedcomp.flower.run_simulation")
    assert "needs ray" in results["simulation"][1]


def test_privacy_without_dp_accounting_is_one_line_naming_the_extra(tmp_path):
    """fedcomp.privacy's wrapper needs nothing; its accountant needs the privacy extra."""
    results = probe_api("dp_accounting", {
        "eps": "import fedcomp.privacy as p; p.epsilon(1.0, 3, 1e-5, n_clients=4)",
        "wrap": "import fedcomp; from fedcomp.privacy import private; "
                "private(fedcomp.fedavg(), clip=1.0, noise_multiplier=1.0)"}, tmp_path)
    assert_missing(results["eps"], "privacy", "fedcomp.privacy")
    assert results["wrap"][0] == "ok", results["wrap"]
