"""One driver (issue 44): every engine's round is ``star_round`` with a server-step object;
fused rounds are an optional capability of an executor, which ``simulate`` drives with its
one loop over chunks of rounds; the compiled engine counts, draws and builds its contexts
with the package's own pieces.

The compiled engine's rows equal NumPy's: tests/engines/test_jax_engine.py and
test_jax_calls.py.
"""

from __future__ import annotations

import ast
from pathlib import Path

import numpy as np
import pytest

from fedcomp import RunOptions, simulate
from fedcomp.algorithms import fedavg
from fedcomp.oracle import Counters
from fedcomp.runtime import setup_context
from fedcomp.runtime._clients import ClientSettings, LocalClients
from fedcomp.runtime._round import EagerServer, counted_prox, star_round
from tests.conftest import make_problem

RUNTIME = Path(__file__).resolve().parents[2] / "fedcomp" / "runtime"


class FusedClients(LocalClients):
    """An executor with the fused capability (chunks of up to 3 rounds), each chunk run
    round by round through ``star_round`` and logged as ``(first round, rounds)``."""

    log: list[tuple[int, int]] = []

    def chunk_length(self, clients_per_round, batch_size, eval_every):
        return 3

    def run_rounds(self, server_state, first, participants):
        FusedClients.log.append((first, len(participants)))
        _, server_prox = counted_prox(self.problem.regularizer, self.counters)
        server = EagerServer(self.algorithm, self.problem, server_prox, self.counters,
                             self.settings.seed)
        sums = []
        for k, who in enumerate(participants):
            server_state = star_round(self.algorithm, server, self, self.counters, server_state,
                                      first + k, who)
            x = self.algorithm.output(server_state)
            sums.append(float(np.sum(x * x)))
        return server_state, sums


def rows_without_wall(run):
    return [{k: v for k, v in row.items() if k != "wall_s"} for row in run.history]


def test_an_executor_with_fused_rounds_gets_chunks_between_rows_and_the_same_run():
    p = make_problem("logistic", n_clients=7)
    kwargs = dict(seed=2, eval_every=3, clients_per_round=4, batch_size=3,
                  metrics=["objective"])
    alg = fedavg(client_lr=0.3, local_steps=2)
    FusedClients.log = []
    got = simulate(alg, p, 7, **kwargs, options=RunOptions(clients=FusedClients))
    assert FusedClients.log == [(0, 3), (3, 3), (6, 1)]  # rows at rounds 3, 6 and 7
    want = simulate(alg, p, 7, **kwargs)
    np.testing.assert_array_equal(got.x, want.x)
    assert rows_without_wall(got) == rows_without_wall(want)


def test_a_sampling_callback_runs_chunks_of_one_round():
    p = make_problem("logistic", n_clients=5)
    FusedClients.log = []
    simulate(fedavg(client_lr=0.3, local_steps=2), p, 4, eval_every=4, metrics=[],
             options=RunOptions(clients=FusedClients, sampling=lambda r: [r, 4]))
    assert FusedClients.log == [(0, 1), (1, 1), (2, 1), (3, 1)]


def test_an_executor_of_some_clients_takes_its_rows_in_their_own_order():
    # a Flower data-path node lists its clients in its file's order: rows [0, 2, 1, 3]
    # once became the block slice(0, 4), which ran client 1 in client 2's place
    p = make_problem("logistic", n_clients=7)
    alg = fedavg(client_lr=0.3, local_steps=2)
    alg = alg.prepare(setup_context(p)) or alg
    server_state, states = alg.init(p.start_model(None), p.n_clients)
    message = alg.broadcast(server_state)
    prox, _ = counted_prox(p.regularizer, Counters())
    settings = ClientSettings(seed=3, batch_size=2, block_size=4, prox=prox)
    want = LocalClients(alg, p, states, Counters(), settings).run_round(
        0, message, np.arange(4))
    order = np.array([0, 2, 1, 3])
    some = LocalClients.of_clients(alg, p, states, Counters(), settings,
                                   client_ids=np.arange(7), weights=p.weights, n_clients=7)
    got = some.run_round(0, message, order)
    for a, b in zip(got, want, strict=True):
        np.testing.assert_array_equal(a, b[order])


def _imports(path: Path) -> set[str]:
    """The modules ``path`` imports from its own package (``from .x import`` → ``x``)."""
    tree = ast.parse(path.read_text())
    return {node.module or "" for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.level == 1}


def test_the_jax_helpers_are_a_leaf_of_the_runtime():
    # jax itself and its checks: one module, which needs only the compilation cache's policy
    assert _imports(RUNTIME / "_jax.py") <= {"_jax_cache"}
    assert _imports(RUNTIME / "_jax_cache.py") == set()
    defined = {p.name for p in RUNTIME.glob("*.py")
               for node in ast.walk(ast.parse(p.read_text()))
               if isinstance(node, ast.FunctionDef)
               and node.name in ("require_jax", "_jax", "jax_like", "check_x64", "check_compile")}
    assert defined == {"_jax.py"}


@pytest.mark.parametrize("name", ["ClientContext", "ServerContext"])
def test_the_runtime_builds_the_contexts_in_one_place(name):
    calls = {p.name for p in RUNTIME.glob("*.py")
             for node in ast.walk(ast.parse(p.read_text()))
             if isinstance(node, ast.Call) and getattr(node.func, "id", None) == name}
    assert calls == {"_round.py"}


def test_splitmix64_is_written_once():
    package = RUNTIME.parent
    holders = {str(p.relative_to(package)) for p in package.rglob("*.py")
               if "9E3779B97F4A7C15" in p.read_text().upper()}
    assert holders == {"_random.py"}
