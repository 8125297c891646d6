"""Rolled local steps (issue 46): a block's K local steps as one ``fori_loop`` in the trace.

* :func:`~fedcomp.algorithms._steps.repeat_local_steps` rolled (the compiled engine's
  default) and unrolled (``_compiled_trace.ROLLED_STEPS = False``) give NumPy's iterates,
  counters and rows (float64, 1e-10) on the algorithms that train networks, with
  minibatches and with client sampling: step k of client i in round r draws NumPy's
  indices, and each step's counting calls are counted K times.
* The compiled program of a block's local steps does not grow with K where they are
  rolled, and does where they are unrolled.
* On the host the helper is the plain loop.
"""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
pytest.importorskip("torch")

import fedcomp  # noqa: E402
from fedcomp._random import minibatch_indices  # noqa: E402
from fedcomp.algorithms._steps import repeat_local_steps  # noqa: E402
from fedcomp.runtime import _compiled_trace  # noqa: E402
from fedcomp.runtime._compiled import RoundFrom  # noqa: E402
from fedcomp.runtime._compiled_trace import (  # noqa: E402
    CounterLog,
    DataArrays,
    Rows,
    TracedOracle,
    traced_minibatch_indices,
)
from fedcomp.runtime._round import client_context, counted_prox  # noqa: E402
from tests.engines.test_jax_networks import (  # noqa: E402
    _assert_same_run,
    _run,
    mlp_problems,  # noqa: F401  (the module's fixture)
)

#: The algorithms whose local steps roll, as they train a network (the named families of
#: tests/engines/test_jax_networks.py, whose compiled runs, rolled by default, equal NumPy's).
ROLLED = [("fedcanon", {}), ("fedcanon2", {}), ("fedmid", {}), ("fedavg", {}), ("za1", {}),
          ("za1", {"final_prox": False}), ("scaffold", {}), ("fedda", {}), ("fedprox", {}),
          ("feddr", {})]
IDS = [name + "".join(f"-{key}" for key in options) for name, options in ROLLED]


def _make(name, options, local_steps=4):
    return getattr(fedcomp, name)(client_lr=0.1, local_steps=local_steps, **options)


#: One of each kind of step, run rolled and unrolled: a plain step, a step size of k and
#: a last step without prox, client sampling, the sgd local solver with sampling.
#: (options, clients per round).
RUN = {"fedcanon": ({}, None), "za1": ({"final_prox": False}, None), "scaffold": ({}, 3),
       "fedprox": ({}, 3)}


@pytest.fixture
def rolls(monkeypatch):
    """The step counts each traced block rolled (a spy on :meth:`TracedOracle.roll_steps`)."""
    seen: list[int] = []
    roll = TracedOracle.roll_steps

    def spy(self, count, body, carry):
        seen.append(count)
        return roll(self, count, body, carry)

    monkeypatch.setattr(TracedOracle, "roll_steps", spy)
    return seen


@pytest.mark.parametrize("name", list(RUN))
def test_rolled_and_unrolled_runs_equal_numpy(name, mlp_problems, rolls, monkeypatch):  # noqa: F811
    numpy_problem, jax_problem = mlp_problems["l1"]
    options, cpr = RUN[name]
    alg = _make(name, options)
    want = _run(alg, numpy_problem, cpr)
    _assert_same_run(_run(alg, jax_problem, cpr), want, f"{alg.name} rolled")
    assert rolls and all(count >= 3 for count in rolls), rolls  # it went through the roll
    monkeypatch.setattr(_compiled_trace, "ROLLED_STEPS", False)
    _assert_same_run(_run(alg, jax_problem, cpr), want, f"{alg.name} unrolled")


def _program_lines(alg, problem, batch_size=5):
    """Lines of the lowered (StableHLO) program of one traced ``client_update`` of every
    client of ``problem``, as the compiled engine traces it."""
    n = problem.n_clients
    alg = alg.prepare(fedcomp.runtime.setup_context(problem)) or alg
    server, states = alg.init(jax.numpy.asarray(problem.loss.initial_model()), n)

    def local(round_, ids, message, states, arrays):
        log = CounterLog()
        oracle = TracedOracle(problem, arrays, Rows(0, n, ids), round_, 2, batch_size, log, n)
        prox, _ = counted_prox(problem.regularizer, log.counters)
        # a round >= 1, as the engine traces a warm-up's or a first round's branch
        ctx = client_context(oracle, prox, RoundFrom(round_, 1), arrays.weights, n)
        return alg.client_update(message, states, ctx)

    text = jax.jit(local).lower(jax.numpy.int64(1), jax.numpy.arange(n), alg.broadcast(server),
                                states, DataArrays.of(problem)).as_text()
    return len(text.splitlines())


@pytest.mark.parametrize(("name", "options"), ROLLED, ids=IDS)
def test_rolled_program_does_not_grow_with_local_steps(name, options, mlp_problems, rolls):  # noqa: F811
    _, jax_problem = mlp_problems["l1"]
    lines = [_program_lines(_make(name, options, steps), jax_problem) for steps in (3, 12)]
    assert lines[0] == lines[1], lines
    # ZA1's last step without its prox (final_prox=False) runs after the K - 1 rolled ones
    last = 1 if options.get("final_prox") is False else 0
    assert rolls == [3 - last, 12 - last], rolls


def test_unrolled_program_grows_with_local_steps(mlp_problems, monkeypatch):  # noqa: F811
    _, jax_problem = mlp_problems["l1"]
    monkeypatch.setattr(_compiled_trace, "ROLLED_STEPS", False)
    lines = [_program_lines(fedcomp.fedcanon(client_lr=0.1, local_steps=steps), jax_problem)
             for steps in (3, 12)]
    assert lines[1] > 2 * lines[0], lines  # ~4x the steps' lines


@pytest.mark.parametrize("replace", [True, False])
def test_a_traced_draw_counter_draws_numpys_indices(replace):
    """Rolled steps carry the draw counter as a traced integer: its draws are NumPy's."""
    ids, counts = np.array([0, 3, 2**40 + 5]), np.array([20, 37, 25])
    traced = jax.jit(lambda draw: traced_minibatch_indices(7, 4, ids, counts, draw, 6, replace,
                                                           40))
    for draw in (0, 1, 9, 2**40):
        np.testing.assert_array_equal(
            np.asarray(traced(jax.numpy.int64(draw))),
            minibatch_indices(7, 4, ids, counts, draw, 6, replace=replace))


def test_host_loop_is_the_plain_loop():
    """A host oracle has no ``roll_steps``: the body runs K times, k = 0..K-1, in order."""
    seen = []

    class Ctx:
        oracle = object()

    def body(k, carry):
        seen.append(k)
        return carry * 2 + k

    assert repeat_local_steps(Ctx(), 4, body, 1) == ((((1 * 2 + 0) * 2 + 1) * 2 + 2) * 2 + 3)
    assert seen == [0, 1, 2, 3]
