"""The simulator's own executor runs the rounds between two rows of a small federation in
one call (``FusedLocalClients.run_rounds``, issue 45): the same iterates, rows, counters
and client states as round by round, and a divergence reported at the same round with the
same model."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from fedcomp import RunOptions, simulate
from fedcomp.algorithms import fedavg, feddr, za1
from fedcomp.runtime import NonFiniteError
from fedcomp.runtime._clients import FusedLocalClients, LocalClients
from tests.conftest import make_problem
from tests.engines.test_one_driver import rows_without_wall


class CountedCalls(FusedLocalClients):
    """The simulator's executor, its fused calls logged as ``(first round, rounds)``."""

    log: list[tuple[int, int]] = []

    def run_rounds(self, server_state, first, participants):
        CountedCalls.log.append((first, len(participants)))
        return super().run_rounds(server_state, first, participants)


def both(algorithm, problem, rounds, **kwargs):
    """``(the simulator's run, the same run round by round on plain LocalClients)``."""
    fused = simulate(algorithm, problem, rounds, **kwargs)
    plain = simulate(algorithm, problem, rounds, **kwargs,
                     options=RunOptions(clients=LocalClients))
    return fused, plain


@pytest.mark.parametrize("algorithm", [feddr(eta=2.0, alpha=1.8, local_solver="exact"),
                                       za1(0.5, 3), fedavg(client_lr=0.3, local_steps=2)],
                         ids=["feddr-exact", "za1", "fedavg"])
def test_fused_rounds_give_the_round_by_round_run(algorithm, monkeypatch):
    p = make_problem("least_squares", n_clients=6)
    monkeypatch.setattr("fedcomp.runtime._simulate.FusedLocalClients", CountedCalls)
    CountedCalls.log = []
    fused, plain = both(algorithm, p, 23, eval_every=5, metrics=["objective", "nnz"])
    # the warm-up round of FedDR's paper start, then the rounds between rows in one call
    assert [n for _, n in CountedCalls.log if _ >= 0] == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(fused.x, plain.x)
    assert rows_without_wall(fused) == rows_without_wall(plain)
    assert fused.counters.as_dict() == plain.counters.as_dict()
    for a, b in zip(fused.client_states, plain.client_states, strict=True):
        np.testing.assert_array_equal(a, b)


def test_minibatches_sampling_and_many_blocks_run_a_round_a_call(monkeypatch):
    p = make_problem("logistic", n_clients=6)
    monkeypatch.setattr("fedcomp.runtime._simulate.FusedLocalClients", CountedCalls)
    for kwargs in (dict(batch_size=3), dict(clients_per_round=4),
                   dict(options=RunOptions(client_block=2))):
        CountedCalls.log = []
        simulate(fedavg(client_lr=0.3, local_steps=2), p, 4, eval_every=4, metrics=[],
                 **kwargs)
        assert [n for _, n in CountedCalls.log] == [1, 1, 1, 1], kwargs


@pytest.mark.parametrize("max_norm", [1e6, None])
def test_a_divergence_inside_a_fused_call_is_the_round_by_rounds(max_norm):
    """The call stops at the first model past ``max_norm`` (or not finite): the error names
    the round by round run's round, and a returned run keeps that round's model."""
    p = make_problem("least_squares")
    alg = fedavg(client_lr=50.0, local_steps=2)
    rounds = 2000 if max_norm is None else 50
    messages = []
    for clients in (None, LocalClients):
        with pytest.raises(NonFiniteError) as caught:
            simulate(alg, p, rounds, eval_every=25, metrics=[],
                     options=RunOptions(max_norm=max_norm, on_divergence="raise",
                                        clients=clients))
        messages.append(str(caught.value))
    assert messages[0] == messages[1]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the divergence's own warning, said elsewhere
        returned = [simulate(alg, p, rounds, eval_every=25, metrics=[],
                             options=RunOptions(max_norm=max_norm, on_divergence="return",
                                                clients=clients))
                    for clients in (None, LocalClients)]
    assert returned[0].n_rounds == returned[1].n_rounds < rounds
    np.testing.assert_array_equal(returned[0].x, returned[1].x)
