"""Composition with a structure: a wrapped algorithm is its recipe, each transform an entry.

A wrapped algorithm's identity is a :class:`~fedcomp.algorithms.Recipe` (the base name and
hyperparameters, then the transforms in order), rebuilt from JSON by
:func:`~fedcomp.algorithms.rebuild_algorithm`; each transform's traits live on its entry of
:data:`~fedcomp.algorithms.TRANSFORMS`; what an algorithm requires (``g = 0``, full
participation) is declared on its registry entry. No wrapper is recognised by its name.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import fedcomp
from fedcomp import simulate, toy
from fedcomp._registry import REQUIREMENTS, AlgorithmEntry, HostValue, TransformEntry
from fedcomp.algorithms import (
    REGISTRY,
    TRANSFORMS,
    Recipe,
    compressed,
    display_name,
    ditto,
    fedavg,
    fedmid,
    host_values,
    make_algorithm,
    private,
    rebuild_algorithm,
    recipe_of,
    transformed,
)
from fedcomp.compressors import QSGD, TopK
from fedcomp.regularizers import Zero
from fedcomp.runtime import setup_context
from tests.conftest import make_problem
from tests.core.test_contract import CONTRACT_PARAMS

#: Stacks of transforms, as a configuration and a user build them.
WRAPPED = {
    "compressed": lambda: compressed(fedmid(client_lr=0.05, local_steps=2), QSGD(levels=4)),
    "ef21": lambda: compressed(fedavg(client_lr=0.05), TopK(k=2), ef21=True),
    "ditto": lambda: ditto(fedmid(client_lr=0.05, local_steps=2), lam=0.3, personal_steps=2),
    "compressed-ditto": lambda: ditto(compressed(fedmid(client_lr=0.05), QSGD(levels=4)),
                                      lam=0.3, personal_lr=0.05),
    "dp": lambda: private(fedavg(client_lr=0.05), clip=0.5, noise_multiplier=0.3),
    "compressed-dp-local": lambda: private(compressed(fedavg(client_lr=0.05), QSGD(levels=4)),
                                           clip=float("inf"), noise_multiplier=0.0, local=True),
}


def test_no_wrapper_is_recognised_by_a_name_prefix():
    prefixes = {TRANSFORMS.entry(name).rename("") for name in TRANSFORMS} - {""}
    assert prefixes == {"dp_", "ditto_"}  # the display names the wrappers give
    literal = "|".join(re.escape(p) for p in prefixes)
    # a prefix as a string of its own: startswith("dp_"), removeprefix("ditto_"), a
    # ("dp_", "ditto_") tuple, a {"dp_": paper} table; f"dp_{name}" (a rename) is not one
    pattern = re.compile(rf"""(?<![\w{{])["']({literal})["']""")
    root = Path(fedcomp.__file__).parent
    found = [f"{path.relative_to(root)}:{number}: {line.strip()}"
             for path in sorted(root.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if pattern.search(line)]
    assert not found, "a wrapper recognised by its name prefix:\n" + "\n".join(found)


def test_the_prefix_scan_finds_what_it_is_for():
    pattern = re.compile(r"""(?<![\w{])["'](dp_|ditto_)["']""")
    assert pattern.search('if name.startswith("dp_"):')
    assert pattern.search("name.removeprefix('ditto_')")
    assert not pattern.search('name=f"dp_{algorithm.name}"')


@pytest.mark.parametrize("case", sorted(WRAPPED))
def test_a_recipe_round_trips_through_json_and_rebuilds_the_same_algorithm(case):
    algorithm = WRAPPED[case]()
    text = json.dumps(recipe_of(algorithm).to_json())
    rebuilt = rebuild_algorithm(json.loads(text))
    assert recipe_of(rebuilt) == recipe_of(algorithm)
    assert rebuilt.name == algorithm.name == display_name(recipe_of(algorithm))
    assert rebuilt.hyperparameters == algorithm.hyperparameters
    assert host_values(rebuilt) == host_values(algorithm)
    problem = toy.tiny_problem()
    ours = simulate(algorithm, problem, 4, batch_size=5, seed=3)
    theirs = simulate(rebuilt, problem, 4, batch_size=5, seed=3)
    np.testing.assert_array_equal(theirs.x, ours.x)
    assert [row["objective"] for row in theirs.history] == [
        row["objective"] for row in ours.history]


def test_the_recipe_records_the_transforms_in_order_and_prepare_keeps_it():
    algorithm = WRAPPED["compressed-ditto"]()
    recipe = recipe_of(algorithm)
    assert (recipe.base, [s.transform for s in recipe.transforms]) == ("fedmid",
                                                                      ["compress", "ditto"])
    assert recipe.params == fedmid(client_lr=0.05).hyperparameters
    # prepare resolves Ditto's personal step: the recipe records the resolved value
    auto = ditto(fedmid(client_lr=0.05), lam=0.3)
    prepared = auto.prepare(setup_context(toy.tiny_problem()))
    (step,) = recipe_of(prepared).transforms
    assert step.params["personal_lr"] == prepared.hyperparameters["ditto"]["personal_lr"] != "auto"
    # an algorithm as its factory built it: its name and hyperparameters
    plain = fedavg(client_lr=0.1)
    assert plain.recipe is None and recipe_of(plain) == Recipe("fedavg", plain.hyperparameters)


def test_a_value_that_is_not_a_recipe_is_named():
    with pytest.raises(ValueError, match=r"not an algorithm recipe: \{'name': 'fedavg'\}"):
        rebuild_algorithm({"name": "fedavg"})
    with pytest.raises(ValueError, match="unknown transform 'squeeze'; valid: compress, "
                                         "ditto, dp"):
        rebuild_algorithm(Recipe("fedavg", {}).then("squeeze", {}))


@pytest.fixture
def scaled_transform():
    """A user's own transform, registered for the test: uploads scaled by ``factor``."""

    def scaled(algorithm, factor):
        def client_update(message, states, ctx):
            upload, states = algorithm.client_update(message, states, ctx)
            return upload._replace(**{f: factor * getattr(upload, f) for f in upload._fields}
                                   ), states

        return transformed(algorithm, "scaled", {"factor": factor},
                           name=f"scaled_{algorithm.name}", client_update=client_update,
                           hyperparameters={**algorithm.hyperparameters, "scale": factor})

    TRANSFORMS.register(TransformEntry(
        "scaled", scaled, "uploads scaled by a factor (a test's own)",
        host_values=(HostValue(("server update",), "the factor is read on the host",
                               lambda params, batch, quadratic: params["factor"] != 1.0),),
        rename=lambda name: f"scaled_{name}"))
    yield scaled
    TRANSFORMS.unregister("scaled")


def test_a_users_transform_is_picked_up_by_host_values_and_rebuild(scaled_transform):
    algorithm = compressed(scaled_transform(fedavg(client_lr=0.05), 0.5), QSGD(levels=4))
    assert algorithm.name == "scaled_fedavg" == display_name(recipe_of(algorithm))
    # its own trait (read from its parameters) beside the compressor's
    assert host_values(algorithm) == {
        "client update": TRANSFORMS.entry("compress").host_values[0].reason,
        "server update": "the factor is read on the host"}
    assert host_values(scaled_transform(fedavg(), 1.0)) == {}
    rebuilt = rebuild_algorithm(json.loads(json.dumps(recipe_of(algorithm).to_json())))
    assert recipe_of(rebuilt) == recipe_of(algorithm)
    assert rebuilt.hyperparameters == algorithm.hyperparameters
    problem = toy.tiny_problem()
    np.testing.assert_array_equal(simulate(rebuilt, problem, 3).x,
                                  simulate(algorithm, problem, 3).x)


def test_an_unregistered_transform_declares_no_traits():
    inner = fedavg()
    algorithm = transformed(inner, "nobodys", {}, name="mine")
    assert host_values(algorithm) == host_values(inner) == {}
    with pytest.raises(ValueError, match="unknown transform 'nobodys'"):
        rebuild_algorithm(recipe_of(algorithm))


ROUND_BASED = sorted(name for name in REGISTRY if REGISTRY.entry(name).execution == "rounds")


@pytest.mark.parametrize("name", ROUND_BASED)
def test_the_declared_requirements_are_what_prepare_refuses(name):
    """An entry's ``requires`` (what the tests read) is what its ``prepare`` checks."""
    algorithm = make_algorithm(name, **CONTRACT_PARAMS.get(name, dict(client_lr=0.5,
                                                                      local_steps=3)))
    requires = REGISTRY.entry(name).requires
    smooth, composite = make_problem("logistic", n_clients=4, reg=Zero()), make_problem(
        "logistic", n_clients=4)

    def refuses(problem, clients_per_round):
        try:
            algorithm.prepare(setup_context(problem, clients_per_round))
        except ValueError:
            return True
        return False

    assert not refuses(smooth, None)
    assert refuses(smooth, 2) == ("full_participation" in requires)
    assert refuses(composite, None) == ("smooth" in requires)


def test_an_unknown_requirement_is_refused():
    with pytest.raises(ValueError, match=r"mine: unknown requirement\(s\) \['convex'\] in "
                                         "requires; valid: smooth, full_participation"):
        AlgorithmEntry("mine", fedavg, "a test's", color="#123456", requires=("convex",))
    assert REQUIREMENTS == ("smooth", "full_participation")


def test_a_configuration_entry_applies_its_transforms_in_one_stage():
    from fedcomp.experiments._setting import AlgorithmSpec

    spec = AlgorithmSpec("dp", "fedavg", {"client_lr": 0.05}, None,
                         compressor={"name": "qsgd", "levels": 4, "ef21": False},
                         privacy={"clip": 0.5, "noise_multiplier": 0.3})
    built = spec.build(rounds=10, n_clients=3)
    by_hand = private(compressed(fedavg(client_lr=0.05), QSGD(levels=4)), clip=0.5,
                      noise_multiplier=0.3)
    assert recipe_of(built) == recipe_of(by_hand) and built.name == "dp_fedavg"
    assert spec.execution == "rounds"
    # before a problem exists (a check of the entry's hyperparameters): no privacy yet
    assert [s.transform for s in spec.recipe().transforms] == ["compress"]


def test_a_flower_server_sends_the_recipe_its_nodes_rebuild():
    pytest.importorskip("flwr")
    from fedcomp.flower._server import FlowerRunError, portable_recipe

    setup = setup_context(toy.tiny_problem())
    algorithm = ditto(compressed(fedmid(client_lr=0.05), QSGD(levels=4)), lam=0.3)
    algorithm = algorithm.prepare(setup)  # the personal step resolved, as the server sends it
    sent = portable_recipe(algorithm, setup)  # the train message's "recipe"
    assert json.loads(sent) == json.loads(json.dumps(recipe_of(algorithm).to_json()))
    assert rebuild_algorithm(json.loads(sent)).hyperparameters == algorithm.hyperparameters
    # an algorithm no registry knows cannot travel: one error naming it and why
    mine = fedavg()._replace(name="mine")
    with pytest.raises(FlowerRunError, match=r"mine: its recipe .* does not rebuild it on a "
                                             r"node \(unknown algorithm 'mine'"):
        portable_recipe(mine, setup)


def test_a_wrapped_algorithm_runs_where_its_engine_is_read():
    """The engine is the algorithm's own fact (toy.tiny_run looked up 'dp_fedavg' by name)."""
    wrapped = private(fedavg(client_lr=0.1), clip=1.0)
    assert np.isfinite(toy.tiny_run(wrapped, rounds=3))
    assert toy.tiny_run(wrapped, rounds=3) == toy.tiny_run(fedavg(client_lr=0.1), rounds=3)
