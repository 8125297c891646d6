"""Adding an algorithm is one file plus one registry entry.

A toy algorithm lives in a module written to a temporary directory; one
``REGISTRY.register(AlgorithmEntry(...))`` later the command line runs it (privately too),
the API reference documents it, the documentation's tables and counts show it (the README's
check, of the package's own algorithms, still passes), the plots draw it in its own color,
the jax engine compiles it and the privacy wrapper accepts it — with no other edit anywhere.
"""

from __future__ import annotations

import csv
import importlib.util
import sys

import numpy as np
import pytest

from fedcomp._registry import AlgorithmEntry
from fedcomp.algorithms import FAMILIES, REGISTRY
from scripts.render_tables import ROOT, load_hook, stale

TOY = '''
"""A toy algorithm in a file of its own: local gradient steps, averaged, one server prox."""

from typing import Any, NamedTuple

from fedcomp.algorithms import EmptyState, FederatedAlgorithm
from fedcomp.algorithms._base import average, replicate


class Model(NamedTuple):
    x: Any


class Upload(NamedTuple):
    delta: Any


def toy_prox_average(client_lr: float = 0.1, local_steps: int = 2) -> FederatedAlgorithm:
    """Toy: ``local_steps`` gradient steps per client, their average, ``prox_{ηK g}``."""

    def client_update(msg, states, ctx):
        y = replicate(msg.x, ctx.oracle.size)
        for _ in range(local_steps):
            y = y - client_lr * ctx.oracle.grad(y)
        return Upload(y - msg.x), states

    def server_update(state, uploads, ctx):
        return Model(ctx.prox(state.x + average(uploads.delta, ctx.weights),
                              client_lr * local_steps))

    return FederatedAlgorithm(
        name="toy_prox_average", init=lambda x0, n: (Model(x0), EmptyState()),
        broadcast=lambda state: state, client_update=client_update,
        server_update=server_update, output=lambda state: state.x,
        hyperparameters={"client_lr": client_lr, "local_steps": local_steps})
'''

COLOR = "#2a9d8f"

CONFIG = """\
name = "toy"
rounds = 3
seeds = [0]
reference = false
metrics = ["objective", "nnz"]
[data]
generator = "synthetic_fedprox"
n_clients = 4
samples_per_client = 20
n_features = 6
n_classes = 2
alpha = 1.0
beta = 1.0
[problem]
loss = "logistic"
[regularizer]
name = "l1"
alpha = 0.001
[[algorithms]]
name = "toy_prox_average"
client_lr = 0.2
[[algorithms]]
name = "toy_prox_average"
label = "toy_private"
client_lr = 0.2
privacy = {clip = 1.0, noise_multiplier = 0.5}
"""


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy's module, loaded from its own file, and its one registry entry."""
    path = tmp_path / "toy_module.py"
    path.write_text(TOY)
    spec = importlib.util.spec_from_file_location("toy_module", path)
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "toy_module", module)
    spec.loader.exec_module(module)
    entry = REGISTRY.register(AlgorithmEntry(
        "toy_prox_average", module.toy_prox_average, "a toy: local steps, average, prox",
        color=COLOR, family="Toys", private_uploads={"delta": None}))
    yield module
    REGISTRY.unregister(entry.name)


def test_the_command_line_runs_it_and_its_private_variant(toy, tmp_path, capsys):
    from fedcomp.cli import main

    config = tmp_path / "toy.toml"
    config.write_text(CONFIG)
    assert main(["run", str(config), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    with (tmp_path / "out" / "results.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert {r["algorithm"] for r in rows} == {"toy_prox_average", "toy_private"}
    assert all(np.isfinite(float(r["objective"])) for r in rows)
    assert (tmp_path / "out" / "plot.png").stat().st_size > 0
    assert main(["list"]) == 0 and "toy_prox_average" in capsys.readouterr().out


def test_the_api_reference_documents_it_under_its_family(toy):
    hook = load_hook()
    page = hook.on_page_markdown(f"# API\n\n{hook.MARKER}\n", None, None, None)
    assert "## Toys\n\n::: toy_module.toy_prox_average" in page
    assert page.index("## Decentralized") < page.index("## Toys")  # after the known ones
    assert "Toys" not in FAMILIES


def test_the_docs_tables_and_counts_show_it(toy):
    """The site's algorithm pages, as the docs hook renders them: the toy is counted, in a
    family of its own, and in the table of every algorithm, with no edit of a page."""
    hook = load_hook()
    docs = ROOT / "docs"
    front = hook.on_page_markdown((docs / "index.md").read_text(encoding="utf-8"),
                                  None, None, None)
    assert f"{len(REGISTRY)} algorithms in {len(FAMILIES) + 1} families" in " ".join(
        front.split())
    page = hook.on_page_markdown((docs / "algorithms" / "index.md").read_text(encoding="utf-8"),
                                 None, None, None)
    assert "| [Toys](../api/algorithms.md) | `toy_prox_average` |" in page
    assert "| Toys | `toy_prox_average` | a toy: local steps, average, prox |" in page
    assert page.index("| Decentralized |") < page.index("| Toys |")
    assert "registry:" not in front + page  # the site shows no marker


def test_the_readme_check_counts_only_the_packages_algorithms(toy):
    """A user's registration is no built-in: the README's check still passes with it."""
    assert "toy_prox_average" in REGISTRY
    assert "toy_prox_average" not in {e.name for e in load_hook().builtin_entries(REGISTRY)}
    assert stale() == {}


def test_the_plots_draw_it_in_its_own_color(toy):
    from fedcomp.plotting import COLORS, color_of, curve_colors

    assert COLORS["toy_prox_average"] == color_of("toy_prox_average") == COLOR
    assert curve_colors([("toy_prox_average", "toy_prox_average"), ("za1", "za1")]) == [
        COLOR, COLORS["za1"]]


def test_the_jax_engine_compiles_it_to_the_numpy_iterates(toy):
    pytest.importorskip("jax")
    from fedcomp import RunOptions, simulate
    from fedcomp.runtime import jax_like
    from fedcomp.toy import tiny_problem

    problem = tiny_problem()
    algorithm = toy.toy_prox_average(client_lr=0.2)
    want = simulate(algorithm, problem, 4, batch_size=3, metrics=[])
    on_jax = type(problem)(problem.loss, problem.regularizer, problem.data.to(jax_like()),
                           weighting=problem.weighting)
    got = simulate(algorithm, on_jax, 4, batch_size=3, metrics=[],
                   options=RunOptions(compile=True))
    np.testing.assert_allclose(np.asarray(got.x), np.asarray(want.x), rtol=0, atol=1e-12)


def test_the_privacy_wrapper_clips_what_its_entry_declares(toy):
    from fedcomp.privacy import PRIVATE_UPLOADS, private, private_fields

    assert PRIVATE_UPLOADS["toy_prox_average"] == {"delta": None}
    algorithm = toy.toy_prox_average()
    assert private_fields(algorithm) == {"delta": None}
    assert private(algorithm, clip=1.0, noise_multiplier=0.5).name == "dp_toy_prox_average"


def test_an_entry_without_a_color_is_refused_naming_it(toy):
    with pytest.raises(ValueError, match="give the algorithm its line color"):
        AlgorithmEntry("nameless", toy.toy_prox_average, "no color")
