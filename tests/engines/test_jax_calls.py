"""The compiled engine's calls: several rounds in one call, cache-sized sub-blocks in a call.

Between two evaluation rows :func:`fedcomp.simulate` on jax runs up to
:func:`~fedcomp.runtime._compiled.chunk_length` rounds as one compiled call, and a block
larger than the cache-sized sub-block runs as a ``lax.map`` over sub-blocks. Neither may
change a value: every synchronous algorithm runs with calls of 3 rounds (and a last call
of 1) and sub-blocks of 2 clients (and a rest), with and without client sampling, and
every evaluation row's counters, the iterates and the states equal NumPy's (1e-12). A run
that diverges inside a call names the round NumPy names.
"""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

from fedcomp import RunOptions, simulate
from fedcomp.algorithms import fedavg, za1
from fedcomp.runtime import JaxEngineWarning, NonFiniteError, _compiled, _compiled_parts, jax_like
from fedcomp.runtime._compiled import CHUNK_FLOATS, MAX_CHUNK, CompiledEngine, chunk_length
from tests.conftest import make_problem
from tests.core.test_contract import SYNCHRONOUS, contract_problem, on_backend, supports_sampling
from tests.engines.test_jax_engine import _expected_eager, _ident, assert_same_run

jax = pytest.importorskip("jax")
LIKE = jax_like()


@pytest.fixture
def calls(monkeypatch):
    """Sub-blocks of 2 clients, and a log of what each multi-round call did: the rounds
    it ran, or ``None`` where it left them to a call per round."""
    monkeypatch.setattr(_compiled_parts, "sub_block_size", lambda problem, batch_size: 2)
    log: list[int | None] = []
    chunk = CompiledEngine._chunk

    def logged(self, server_state, first, participants, length):
        out = chunk(self, server_state, first, participants, length)
        log.append(None if out is _compiled.EAGER else len(participants))
        return out

    monkeypatch.setattr(CompiledEngine, "_chunk", logged)
    return log


def rows_without_wall(run):
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in run.history]


@pytest.mark.parametrize("sampled", [False, True], ids=["all", "sampled"])
@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=_ident)
def test_rounds_per_call_and_sub_blocks_change_nothing(alg, sampled, calls):
    p = contract_problem(alg)  # 7 clients: sub-blocks 2, 2, 2 and 1
    if sampled and not supports_sampling(alg, p):
        pytest.skip(f"{alg.name} needs every client every round")
    kwargs = dict(seed=5, metrics=[], eval_every=3, batch_size=3,
                  clients_per_round=4 if sampled else None)
    want = simulate(alg, p, 7, **kwargs)
    with warnings.catch_warnings():  # the eager algorithms warn (tests/engines/test_jax_engine.py)
        warnings.simplefilter("ignore", JaxEngineWarning)
        got = simulate(alg, on_backend(p, LIKE), 7, **kwargs)
    assert_same_run(got, want)
    assert rows_without_wall(got) == rows_without_wall(want)
    # rounds 0-2 and 3-5 in a call each where the round compiles (rounds 1-2 where it
    # branches on the first round, which runs alone), round 6 alone; a round per call
    # where a part runs eagerly
    if _expected_eager(alg, 3) is None:
        assert calls in ([3, 3], [None, 3]), calls
    else:
        assert calls == [None, None], calls


def test_za1_runs_in_calls_of_several_rounds_and_sub_blocks(calls):
    p = make_problem("logistic", n_clients=7)
    got = simulate(za1(client_lr=0.1, local_steps=3), on_backend(p, LIKE), 10, metrics=[],
                   eval_every=4)
    assert calls == [4, 4, 2]  # rows at rounds 4, 8 and 10 (the last)
    assert [row["round"] for row in got.history] == [0, 4, 8, 10]


@pytest.mark.parametrize("eval_every", [1, 5])
def test_divergence_inside_a_call_names_numpys_round(eval_every, calls):
    p = make_problem("least_squares")
    alg = fedavg(client_lr=5.0, local_steps=1)  # the norm grows ~1.4x every 2 rounds
    messages = []
    for problem in (p, on_backend(p, LIKE)):
        with pytest.raises(NonFiniteError) as caught:
            simulate(alg, problem, 60, metrics=[], eval_every=eval_every,
                     options=RunOptions(max_norm=50.0, on_divergence="raise"))
        messages.append(str(caught.value))
    rounds = [re.search(r"in round (\d+)", m).group(1) for m in messages]
    assert rounds[0] == rounds[1], messages
    assert int(rounds[0]) % 5 not in (0, 1)  # inside a call of 5 rounds, not at its ends
    if eval_every > 1:
        assert calls and calls[0] == 5


def test_chunk_length_keeps_calls_short():
    small = make_problem("logistic", n_clients=7)
    assert chunk_length(small, 7, None, 1) == 1  # a row every round: a call per round
    assert chunk_length(small, 7, None, 20) == 20
    assert chunk_length(small, 7, None, 10_000) == MAX_CHUNK
    per_round = 7 * small.data.max_samples * int(np.prod(small.data.feature_shape))
    participants = CHUNK_FLOATS // per_round * 7 // 2  # a round of ~half the budget
    assert chunk_length(small, participants, None, 100) == 2
    assert chunk_length(small, 100 * participants, None, 100) == 1


def test_simulated_time_and_metrics_rows_across_calls(calls):
    """A synchronous round waits for its slowest participant: ``sim_time`` adds up round by
    round inside a call as it does on NumPy, and each row's metrics are those of its round."""
    from fedcomp.runtime import ComputeTimes

    p = make_problem("logistic", n_clients=7)
    clock = ComputeTimes(mean=np.linspace(1.0, 4.0, 7), distribution="exponential")
    kwargs = dict(seed=3, eval_every=4, clients_per_round=3, metrics=["objective", "nnz"],
                  options=RunOptions(compute_times=clock))
    alg = fedavg(client_lr=0.1, local_steps=2)
    want = simulate(alg, p, 9, **kwargs)
    got = simulate(alg, on_backend(p, LIKE), 9, **kwargs)
    assert calls == [4, 4]  # rounds 0-3 and 4-7; round 8 alone
    for a, b in zip(got.history, want.history, strict=True):
        assert a["round"] == b["round"] and a["sim_time"] == b["sim_time"]
        assert a["nnz"] == b["nnz"] and a["objective"] == pytest.approx(b["objective"], rel=1e-12)
