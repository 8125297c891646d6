"""A run keeps a quadratic client's exact-prox system (``fedcomp.oracle.BlockMemo``).

FedDR's exact local prox of a least-squares client solves ``(∇²f_i + I/η) x = c/η − ∇f_i(0)``,
whose matrix and right-hand constant do not change from round to round: the in-process
executor keeps them for the run. What must hold: the same iterates and the same counters
as a run that computes them every round (the memo is speed only), the prox equal to a
hand-solved one, and the memo's bound and its keys (another step, another block of
sampled clients) respected.
"""

from __future__ import annotations

import numpy as np
import pytest

import fedcomp.oracle as oracle_module
from fedcomp import simulate
from fedcomp.algorithms import make_algorithm
from fedcomp.oracle import BlockMemo
from tests.conftest import make_problem

ROUNDS = 12


def _feddr_run(clients_per_round=None, eta=0.7):
    problem = make_problem("least_squares", n_clients=6, d=5)
    algorithm = make_algorithm("feddr", eta=eta, alpha=1.5, local_solver="exact")
    return simulate(algorithm, problem, ROUNDS, eval_every=4, clients_per_round=clients_per_round,
                    seed=3)


@pytest.mark.parametrize("clients_per_round", [None, 3])
def test_the_memo_changes_neither_iterates_nor_counters(monkeypatch, clients_per_round):
    reads = []
    get = BlockMemo.get

    def counted_get(self, key, tag, make):
        value, kept = get(self, key, tag, make)
        reads.append(kept)
        return value, kept

    monkeypatch.setattr(BlockMemo, "get", counted_get)
    kept = _feddr_run(clients_per_round)
    if clients_per_round is None:  # the rounds after the first read the memo
        assert sum(reads) > len(reads) / 2
    else:  # sampled blocks (ids) keep nothing; the warm-up's and consecutive draws' do
        assert len(reads) < 2 * (ROUNDS + 1)
    monkeypatch.setattr(oracle_module, "MEMO_BYTES", 0)  # a memo that keeps nothing
    assert BlockMemo().limit_bytes == 0
    computed = _feddr_run(clients_per_round)
    assert not any(reads[len(reads) // 2:])
    assert np.array_equal(kept.x, computed.x)
    assert [row["objective"] for row in kept.history] == \
        [row["objective"] for row in computed.history]
    counters = ("grad_evals", "hessian_evals", "sample_grads", "prox_evals_client")
    assert {c: kept.history[-1][c] for c in counters} == \
        {c: computed.history[-1][c] for c in counters}
    # every round uses each participant's Hessian and gradient once
    participants = 6 if clients_per_round is None else 3
    assert kept.history[-1]["hessian_evals"] == 6 + ROUNDS * participants  # + the warm-up


def test_the_kept_system_solves_each_clients_prox():
    problem = make_problem("least_squares", n_clients=4, d=5)
    memo, counters = BlockMemo(), oracle_module.Counters()
    from fedcomp.algorithms._local import _quadratic_prox

    rng = np.random.default_rng(0)
    for round_ in range(3):  # the second and third read the memo
        center = rng.normal(size=(4, 5))
        oracle = oracle_module.Oracle(problem, slice(0, 4), round_, 0, None, counters,
                                      memo=memo)
        got = _quadratic_prox(oracle, center, 0.3)
        for i in range(4):
            a = problem.data.features[i, :problem.data.counts[i]]
            b = problem.data.targets[i, :problem.data.counts[i]]
            m = len(b)
            hand = np.linalg.solve(a.T @ a / m + np.eye(5) / 0.3, a.T @ b / m + center[i] / 0.3)
            np.testing.assert_allclose(got[i], hand, rtol=1e-12, atol=1e-12)
    assert counters.hessian_evals == 12 and counters.grad_evals == 12
    assert len(memo.entries) == 2


def test_the_memo_keeps_within_its_bound_and_replaces_another_step():
    memo = BlockMemo(limit_bytes=100)
    made = []

    def make(size):
        made.append(size)
        return np.zeros(size)

    small, kept = memo.get("a", 1.0, lambda: make(10))  # 80 bytes: kept
    assert not kept and memo.bytes == 80
    assert memo.get("a", 1.0, lambda: make(10))[1]
    assert not memo.get("a", 2.0, lambda: make(10))[1]  # another step: made, replaces
    assert memo.bytes == 80 and memo.entries["a"][0] == 2.0
    assert not memo.get("b", 1.0, lambda: make(10))[1]  # 160 > 100: not kept
    assert not memo.get("b", 1.0, lambda: make(10))[1] and memo.bytes == 80
    assert made == [10, 10, 10, 10]


def test_blocks_of_other_clients_have_their_own_entries():
    problem = make_problem("least_squares", n_clients=4, d=3)
    memo, counters = BlockMemo(), oracle_module.Counters()

    def block(clients):
        return oracle_module.Oracle(problem, clients, 0, 0, None, counters, memo=memo)

    assert block(slice(0, 2)).constant("x", None, lambda: 1) == (1, False)
    assert block(slice(2, 4)).constant("x", None, lambda: 2) == (2, False)
    assert block(slice(0, 2)).constant("x", None, lambda: 3) == (1, True)
    assert block(slice(0, 3)).constant("x", None, lambda: 4) == (4, False)
    # sampled clients (ids): computed every time, nothing kept
    assert block(np.array([1, 3])).constant("x", None, lambda: 5) == (5, False)
    assert block(np.array([1, 3])).constant("x", None, lambda: 6) == (6, False)
    assert len(memo.entries) == 3
