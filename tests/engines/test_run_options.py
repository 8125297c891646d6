"""``simulate``'s options as one typed object: :class:`fedcomp.RunOptions`.

The signature keeps what a user sets about the run (at most 12 parameters); how the run
executes and reports is one frozen dataclass, checked where it is built; a keyword of the
former signature is one ``TypeError`` naming the field and the fix.
"""

from __future__ import annotations

import dataclasses
import inspect
import re

import numpy as np
import pytest

import fedcomp
from fedcomp import ComputeTimes, RunOptions, simulate
from fedcomp.algorithms import fedavg, scaffold
from fedcomp.metrics import MemoryLogger
from fedcomp.runtime._options import OPTION_FIELDS, split_options
from tests.conftest import make_problem

SIGNATURE = ["algorithm", "problem", "rounds", "x0", "seed", "clients_per_round",
             "batch_size", "eval_every", "metrics", "reference", "tol", "options"]


def test_simulate_has_at_most_12_parameters_and_the_options_are_none_of_them():
    parameters = inspect.signature(fedcomp.simulate).parameters
    assert len(parameters) <= 12
    assert list(parameters) == SIGNATURE  # what the docs' API page renders too
    assert not set(parameters) & set(OPTION_FIELDS)
    assert fedcomp.RunOptions is fedcomp.runtime.RunOptions


def test_run_options_are_frozen_keyword_only_and_default_like_simulate():
    options = RunOptions()
    assert (options.client_block, options.compile, options.client_state, options.progress,
            options.stop, options.max_norm, options.on_divergence) == (
        "auto", "auto", "memory", "auto", "relative_prox_step", 1e12, "return")
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.progress = False  # type: ignore[misc]
    with pytest.raises(TypeError):
        RunOptions("auto")  # type: ignore[misc]


@pytest.mark.parametrize("field, value, error, message", [
    ("client_state", "ram", ValueError, "client_state must be 'memory' or 'disk' (got 'ram')"),
    ("on_divergence", "ignore", ValueError,
     "on_divergence must be 'return' or 'raise' (got 'ignore')"),
    ("max_norm", "big", TypeError, "max_norm must be a positive number or None (got 'big'"),
    ("max_norm", -1.0, ValueError, "max_norm must be positive or None (got -1.0)"),
    ("client_block", 0, ValueError,
     "client_block must be 'auto', 'all' or a positive integer (got 0)"),
    ("client_block", "big", ValueError, "client_block must be 'auto', 'all' or a positive"),
    ("client_block", True, ValueError, "client_block must be 'auto', 'all' or a positive"),
    ("stop", "gap", ValueError, "stop must be one of relative_prox_step, prox_grad_norm, "
                                "relative_change (got 'gap')"),
    ("stop", ["gap"], ValueError, "stop must be one of"),  # not Python's 'unhashable'
])
def test_each_check_names_the_field_and_the_value_where_the_options_are_built(
        field, value, error, message):
    with pytest.raises(error, match=re.escape(message)):
        RunOptions(**{field: value})


def test_an_old_keyword_still_runs_with_one_warning_naming_the_new_form():
    """Code written for the former signature keeps running, to the same iterates, and is
    told once how to write it now."""
    p = make_problem("logistic")
    with pytest.warns(FutureWarning, match=re.escape(
            "progress is a RunOptions field: passing it to simulate is deprecated and will "
            "be an error in a later release; write simulate(..., "
            "options=RunOptions(progress=False))")) as caught:
        old = simulate(fedavg(0.3, 2), p, 3, progress=False)
    assert len(caught) == 1 and caught[0].filename == __file__  # the caller's line
    new = simulate(fedavg(0.3, 2), p, 3, options=RunOptions(progress=False))
    np.testing.assert_array_equal(old.x, new.x)
    with pytest.warns(FutureWarning, match=re.escape(
            "client_block, tags are RunOptions fields: passing them to simulate is "
            "deprecated and will be an error in a later release; write simulate(..., "
            "options=RunOptions(client_block=2, tags={'seed': 1}))")):
        old = simulate(fedavg(0.3, 2), p, 3, tags={"seed": 1}, client_block=2)
    assert old.history[-1]["seed"] == 1
    np.testing.assert_array_equal(old.x, new.x)
    # a field's own check still runs where the options are built
    with pytest.warns(FutureWarning), pytest.raises(ValueError, match="client_state"):
        simulate(fedavg(0.3, 2), p, 3, client_state="cloud")
    for field in OPTION_FIELDS:  # every field is taken, not only the two above
        with pytest.raises(TypeError, match=rf"^{field} is a RunOptions field: give it "
                                            r"inside options, not beside it"):
            simulate(fedavg(), None, 3, options=RunOptions(), **{field: None})


def test_options_of_another_type_say_how_to_build_them():
    with pytest.raises(TypeError, match=r"options must be a fedcomp.RunOptions \(got "
                                        r"\{'progress': False\} of type dict\)"):
        simulate(fedavg(), make_problem("logistic"), 1, options={"progress": False})


def _schedule(round_):
    return [(round_ + k) % 6 for k in range(3)]


def test_a_run_with_options_equals_a_run_of_the_same_settings_bit_for_bit():
    p = make_problem("logistic", n_clients=6)
    alg = scaffold(client_lr=0.3, local_steps=2)
    settings = dict(seed=4, batch_size=3, eval_every=2, metrics=["objective"],
                    sampling=_schedule, compute_times=ComputeTimes(mean=2.0),
                    client_block=2, tags={"algorithm": "s"}, max_norm=1e9)
    own, options = split_options(settings)
    assert options == RunOptions(sampling=_schedule, compute_times=ComputeTimes(mean=2.0),
                                 client_block=2, tags={"algorithm": "s"}, max_norm=1e9)
    logger = MemoryLogger()
    run = simulate(alg, p, 5, **own, options=dataclasses.replace(options, logger=logger,
                                                                 progress=False))
    again = simulate(alg, p, 5, seed=4, batch_size=3, eval_every=2, metrics=["objective"],
                     options=options)
    np.testing.assert_array_equal(run.x, again.x)
    for a, b in zip(run.client_states, again.client_states, strict=True):
        np.testing.assert_array_equal(a, b)
    drop = {"wall_s"}
    assert [{k: v for k, v in r.items() if k not in drop} for r in run.history] == \
           [{k: v for k, v in r.items() if k not in drop} for r in again.history]
    assert logger.rows == run.history and run.history[-1]["sim_time"] > 0
    # the block size changes speed, never results: the options' defaults give the same run
    default_block = simulate(alg, p, 5, **own, options=dataclasses.replace(
        options, client_block="auto"))
    np.testing.assert_array_equal(default_block.x, run.x)
    # None is RunOptions()
    plain = simulate(alg, p, 3, seed=1)
    np.testing.assert_array_equal(simulate(alg, p, 3, seed=1, options=RunOptions()).x, plain.x)
