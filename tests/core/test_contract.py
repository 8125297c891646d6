"""The contract every registered component passes, parametrised over the registries.

A component registered in any family of :func:`fedcomp._registry.catalogue` is checked here
without a line of its own: a one-line description, a numpydoc docstring on its factory that
documents what a configuration may set, ``parameters()`` equal to the signature, and
unknown names and keys rejected with the registry's error types naming the valid choices.

Every synchronous star-topology algorithm then runs the simulator contract: the client
block size never changes the result, array-api-strict and PyTorch agree with NumPy, and
float32 stays float32 (asynchronous ones: ``tests/algorithms/test_feddr.py``; decentralized ones:
``tests/algorithms/test_decentralized.py``).
"""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from fedcomp import Problem, RunOptions, simulate
from fedcomp._array import to_numpy
from fedcomp._registry import (
    EXECUTIONS,
    MissingParameterError,
    Registry,
    UnknownNameError,
    UnknownParameterError,
)
from fedcomp.algorithms import (
    ALGORITHMS,
    DECENTRALIZED,
    REGISTRY,
    DecentralizedAlgorithm,
    FederatedAlgorithm,
    make_algorithm,
    recipe_of,
)
from fedcomp.catalogue import catalogue
from fedcomp.regularizers import Zero
from fedcomp.runtime import setup_context
from tests.conftest import make_problem

CATALOGUE = catalogue()
ENTRIES = [(family, name) for family, registry in CATALOGUE.items() for name in registry]

#: Section names numpydoc knows.
SECTIONS = {"Parameters", "Returns", "Yields", "Receives", "Other Parameters", "Raises",
            "Warns", "Warnings", "See Also", "Notes", "References", "Examples", "Attributes",
            "Methods"}


def sections(doc: str) -> dict[str, list[str]]:
    """``{header: body lines}`` of a numpydoc docstring (a header is underlined by dashes)."""
    lines = doc.splitlines()
    found: dict[str, list[str]] = {}
    current = None
    for i, line in enumerate(lines):
        if re.fullmatch(r"-{3,}", line.strip()):
            continue
        if i + 1 < len(lines) and line.strip() and re.fullmatch(r"-{3,}", lines[i + 1].strip()):
            assert len(lines[i + 1].strip()) == len(line.strip()), f"underline of {line!r}"
            current = line.strip()
            found[current] = []
        elif current is not None:
            found[current].append(line)
    return found


def documented(body: list[str]) -> list[str]:
    """Parameter names of a Parameters section (``a, b : type`` lines, ``**params``)."""
    names = []
    for line in body:
        match = re.match(r"^(\*{0,2}\w+(?:\s*,\s*\*{0,2}\w+)*)\s*(?::|$)", line)
        if match and not line.startswith(" "):
            names += [name.strip().lstrip("*") for name in match.group(1).split(",")]
    return names


# --- every registered component ---------------------------------------------------------------

def test_catalogue_lists_every_family_in_order():
    assert list(CATALOGUE) == ["algorithms", "regularizers", "losses", "datasets",
                               "partitioners", "metrics", "topologies", "compressors",
                               "backends"]
    assert all(isinstance(registry, Registry) for registry in CATALOGUE.values())


@pytest.mark.parametrize("family, name", ENTRIES)
def test_entry_has_a_one_line_description(family, name):
    registry = CATALOGUE[family]
    entry = registry.entry(name)
    assert entry.name == name and registry[name] is entry.factory
    text = registry.describe()[name]
    assert text == entry.description and text.strip() and "\n" not in text


@pytest.mark.parametrize("family, name", ENTRIES)
def test_factory_has_a_numpydoc_docstring(family, name):
    registry = CATALOGUE[family]
    doc = inspect.getdoc(registry[name])
    assert doc, f"{name}: the factory needs a docstring"
    summary = doc.splitlines()[0]
    assert summary.strip() and not summary.startswith(" ")
    found = sections(doc)
    assert set(found) <= SECTIONS, f"{name}: not numpydoc sections {set(found) - SECTIONS}"
    names = documented(found.get("Parameters", []))
    assert set(names) <= set(registry.parameters(name)), f"{name}: documents no parameter"
    if "See :func:" in doc and "Parameters" not in found:
        return  # a variant pointing to the function that documents its parameters
    undocumented = [p for p in registry.settable(name) if p not in names]
    assert not undocumented, f"{name}: document {undocumented} under Parameters"


@pytest.mark.parametrize("family, name", ENTRIES)
def test_parameters_are_the_signature(family, name):
    registry = CATALOGUE[family]
    signature = inspect.signature(registry[name])
    named = [p.name for p in signature.parameters.values()
             if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    assert list(registry.parameters(name)) == named
    assert list(registry.settable(name)) == [p for p in named if p not in registry.supplied]
    registry.check_keys(name, registry.settable(name))  # every settable key passes


@pytest.mark.parametrize("family, name", ENTRIES)
def test_unknown_keys_raise_naming_the_accepted_ones(family, name):
    registry = CATALOGUE[family]
    if any(p.kind is p.VAR_KEYWORD for p in inspect.signature(registry[name]).parameters.values()):
        registry.check_keys(name, ["no_such_key"])  # takes **kwargs: any key is a parameter
        return
    with pytest.raises(UnknownParameterError, match=r"unknown parameter\(s\) \['no_such_key'\]"
                       ) as info:
        registry.make(name, no_such_key=1)
    assert all(p in str(info.value) for p in registry.parameters(name))
    with pytest.raises(UnknownParameterError, match=r"^here: .*accepted: .*\blabel\b") as info:
        registry.check_keys(name, ["no_such_key", "label"], "here", extra=["label"])
    assert "'label'" not in str(info.value).split(";")[0]  # an extra key is accepted
    assert all(p in str(info.value) for p in registry.settable(name))
    for key in registry.supplied:
        if key in registry.parameters(name):  # the caller's to fill, not the config's
            with pytest.raises(UnknownParameterError, match=key):
                registry.check_keys(name, [key])


@pytest.mark.parametrize("family", list(CATALOGUE))
def test_unknown_names_raise_listing_the_valid_ones(family):
    registry = CATALOGUE[family]
    for call in (registry.entry, registry.parameters, registry.make,
                 lambda name: registry.check_keys(name, [])):
        with pytest.raises(UnknownNameError, match=rf"unknown {registry.kind} 'no_such_name'; "
                                                   r"valid: ") as info:
            call("no_such_name")
        assert all(name in str(info.value) for name in registry)
        assert isinstance(info.value, ValueError)  # existing `except ValueError` still works
    with pytest.raises(KeyError):  # a Mapping: [] and .get behave as on a dict
        registry["no_such_name"]
    assert registry.get("no_such_name") is None and "no_such_name" not in registry


def test_missing_required_parameters_raise_listing_the_accepted_ones():
    regularizers = CATALOGUE["regularizers"]
    with pytest.raises(MissingParameterError, match=r"regularizer 'group_lasso' needs "
                                                    r"parameter\(s\) \['alpha', 'groups'\]"):
        regularizers.make("group_lasso")
    assert issubclass(MissingParameterError, ValueError)
    assert issubclass(UnknownParameterError, ValueError)


def test_old_names_are_views_of_the_registries():
    from fedcomp import data, losses, metrics, regularizers

    assert regularizers.DESCRIPTIONS is regularizers.REGULARIZERS.describe()
    assert losses.DESCRIPTIONS is losses.LOSSES.describe()
    assert data.DATASET_DESCRIPTIONS is data.DATASETS.describe()
    assert data.PARTITIONER_DESCRIPTIONS is data.PARTITIONERS.describe()
    assert metrics.DESCRIPTIONS is metrics.METRICS.describe()
    entries = data.DATASETS.entries()
    assert dict(data.GROUND_TRUTHS) == {e.name: e.ground_truth for e in entries if e.ground_truth}
    assert dict(data.SAMPLERS) == {e.name: e.sampler for e in entries if e.sampler}
    assert set(data.SAMPLERS) <= set(data.GROUND_TRUTHS)


def test_registry_rejects_bad_entries():
    from fedcomp._registry import Entry

    with pytest.raises(ValueError, match="registered twice"):
        Registry("thing", [Entry("a", dict, "one"), Entry("a", dict, "two")])
    with pytest.raises(ValueError, match="one-line description"):
        Registry("thing", [Entry("a", dict, "two\nlines")])


# --- algorithms: execution is a static fact of the entry -------------------------------------

def test_algorithms_are_one_registry_split_by_execution():
    assert list(ALGORITHMS) + list(DECENTRALIZED) == list(REGISTRY)
    assert CATALOGUE["algorithms"] is REGISTRY
    for name in REGISTRY:
        execution = REGISTRY.entry(name).execution
        assert execution in EXECUTIONS
        assert (name in DECENTRALIZED) == (execution == "decentralized")
    assert {REGISTRY.entry(name).execution for name in ALGORITHMS} == {"rounds", "async"}


@pytest.mark.parametrize("name", list(REGISTRY))
def test_execution_fact_matches_the_built_algorithm(name):
    alg = make_algorithm(name)
    execution = REGISTRY.entry(name).execution
    if execution == "decentralized":
        assert isinstance(alg, DecentralizedAlgorithm)
    else:
        assert isinstance(alg, FederatedAlgorithm)
        assert alg.execution == execution


# --- the simulator contract of every synchronous star-topology algorithm --------------------

# small steps, 3 local steps; the parameters of those that need their own
CONTRACT_PARAMS = {"fast_fedda": dict(smoothness=2.0, strong_convexity=0.01, local_steps=3),
                   "c_fedda": dict(radius=0.5, strong_convexity=0.01, local_steps=3,
                                   domain_radius=2.0),
                   "mc_fedda": dict(stages=2, stage_rounds=2, radius=0.5, smoothness=2.0,
                                    strong_convexity=0.01, local_steps=3, domain_radius=2.0),
                   "scaffold": dict(client_lr=0.5, local_steps=3, server_prox=True),
                   "scaffnew": dict(client_lr=0.5, comm_prob=0.4, server_prox=True)}
CONTRACT_PARAMS["fedsplit"] = dict(eta=0.5)
# Condat et al.'s methods solve smooth problems (g = 0): contract_problem gives them no l1
CONTRACT_PARAMS["compressed_scaffnew"] = dict(client_lr=0.5, comm_prob=0.4, s=3)
CONTRACT_PARAMS["tamuna"] = dict(client_lr=0.5, comm_prob=0.4, s=2, cohort_size=4)
CONTRACT_PARAMS["locodl"] = dict(client_lr=0.5, comm_prob=0.4, codec={"name": "rand_k", "k": 2})
#: the algorithms whose entry declares g = 0 only (a live view of the registry)
SMOOTH_ONLY = REGISTRY.filter(lambda entry: "smooth" in entry.requires)
# constant extrapolation: on this logistic problem (no interpolation) the adaptive rules
# give alpha = 25 (GraDS) and 1000 (StoPS), which multiply float32's rounding of the
# averaged prox by as much; test_fedexprox.py checks them on backends in float64
CONTRACT_PARAMS["fedexprox"] = dict(step=0.5, server_lr=1.5)
# the personal (pFedMe) and local (S-DANE) problems: a contraction at these steps
CONTRACT_PARAMS["pfedme"] = dict(lam=1.0, client_lr=0.5, local_steps=3, inner_steps=2)
CONTRACT_PARAMS["sdane"] = dict(lam=2.0, local_lr=0.2, local_steps=3)
CONTRACT_PARAMS["scafflix"] = dict(global_weight=0.5, comm_prob=0.4)  # smooth: no l1
SYNCHRONOUS = [make_algorithm(name, **CONTRACT_PARAMS.get(name, dict(client_lr=0.5,
                                                                      local_steps=3)))
               for name in sorted(REGISTRY) if REGISTRY.entry(name).execution == "rounds"]
# the exact (Newton) local solver of the primal-dual family, epochs with masks
SYNCHRONOUS += [make_algorithm("feddr", local_solver="exact", eta=0.5, alpha=1.5),
                make_algorithm("fedprox", mu=0.5, client_lr=0.5, local_epochs=2),
                make_algorithm("fedexprox", step=0.5, server_lr=1.5, server_step=0.1)]


def contract_problem(alg, n_clients=7):
    """The contract's logistic problem (with ``l1``, or ``zero`` for a smooth-only method)."""
    return make_problem("logistic", n_clients=n_clients,
                        reg=Zero() if alg.name in SMOOTH_ONLY else None)


def supports_sampling(alg, problem=None) -> bool:
    """Whether ``alg`` (or the registered algorithm a transform wraps) runs with client
    sampling: its entry does not declare full participation (``problem``: unused, the
    declaration does not depend on it; test_composition.py checks it against prepare)."""
    return "full_participation" not in REGISTRY.entry(recipe_of(alg).base).requires


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_prepare_is_the_one_door_and_preparing_again_changes_nothing(alg):
    p = contract_problem(alg, n_clients=5)
    setup = setup_context(p)
    prepared = alg.prepare(setup) or alg
    again = prepared.prepare(setup) or prepared
    assert again.hyperparameters == prepared.hyperparameters
    server_state, client_states = prepared.init(p.zeros(), p.n_clients)  # no regularizer
    assert all(field.shape[0] == p.n_clients for field in client_states)
    np.testing.assert_array_equal(again.output(again.init(p.zeros(), p.n_clients)[0]),
                                  prepared.output(server_state))


def on_backend(problem: Problem, like) -> Problem:
    return Problem(problem.loss, problem.regularizer, problem.data.to(like),
                   weighting=problem.weighting)


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
@pytest.mark.parametrize("batch_size", [None, 4])
def test_block_size_does_not_change_results(alg, batch_size):
    p = contract_problem(alg)
    cpr = 4 if supports_sampling(alg, p) else None
    runs = [simulate(alg, p, 5, batch_size=batch_size, clients_per_round=cpr, seed=11, metrics=[],
                     options=RunOptions(client_block=block))
            for block in (1, 3, "all", "auto")]
    for run in runs[1:]:
        np.testing.assert_array_equal(run.x, runs[0].x)
        for a, b in zip(run.client_states, runs[0].client_states, strict=True):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_array_api_strict_matches_numpy(alg):
    xps = pytest.importorskip("array_api_strict")
    p = contract_problem(alg)
    ref = simulate(alg, p, 4, batch_size=3, seed=2, metrics=[])
    strict = simulate(alg, on_backend(p, xps.zeros(0, dtype=xps.float64)), 4, batch_size=3,
                      seed=2, metrics=[])
    np.testing.assert_allclose(to_numpy(strict.x), ref.x, rtol=0, atol=1e-12)


@pytest.mark.torch
@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_torch_matches_numpy_and_keeps_float32(alg):
    torch = pytest.importorskip("torch")
    p = contract_problem(alg)
    ref = simulate(alg, p, 4, batch_size=3, seed=2, metrics=[])
    t64 = simulate(alg, on_backend(p, torch.zeros(0, dtype=torch.float64)), 4, batch_size=3,
                   seed=2, metrics=[])
    assert isinstance(t64.x, torch.Tensor)
    np.testing.assert_allclose(to_numpy(t64.x), ref.x, rtol=0, atol=1e-12)
    t32 = simulate(alg, on_backend(p, torch.zeros(0, dtype=torch.float32)), 4, batch_size=3,
                   seed=2, metrics=["objective"])
    assert t32.x.dtype == torch.float32
    np.testing.assert_allclose(to_numpy(t32.x), ref.x, rtol=0, atol=1e-4)


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_numpy_float32_stays_float32(alg):
    p = contract_problem(alg)
    p32 = on_backend(p, np.zeros(0, dtype=np.float32))
    run = simulate(alg, p32, 3, batch_size=3, metrics=["objective"])
    assert run.x.dtype == np.float32
    for field in run.server_state:
        assert field.dtype == np.float32
    for field in run.client_states:
        assert field.dtype == np.float32
