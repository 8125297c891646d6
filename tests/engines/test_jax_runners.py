"""The asynchronous and the decentralized runners on jax arrays: eager, with NumPy's iterates.

Only :func:`fedcomp.simulate` compiles (``tests/engines/test_jax_engine.py``);
:func:`~fedcomp.runtime.simulate_async` and :func:`~fedcomp.runtime.simulate_decentralized`
run every update eagerly on the jax arrays. Every registered asynchronous and decentralized
algorithm runs a few steps with NumPy and with jax float64: the model, every state field
and every evaluated row agree to 1e-12 relative, the counters are equal (and the async
runner's arrival order, times, delays and barrier idle time); jax float32 stays float32 (on
the gossip runner); a configuration with ``backend = "jax"`` holding one algorithm of each
engine runs through ``fedcomp run`` and writes the results of the NumPy backend.
"""

from __future__ import annotations

import tomllib

import numpy as np
import pytest

from fedcomp import ComputeTimes, Problem, simulate_async
from fedcomp._array import to_numpy
from fedcomp.algorithms import REGISTRY, compressed, make_algorithm
from fedcomp.cli import main
from fedcomp.compressors import make_compressor
from fedcomp.data import LiangSampler, liang_linear_models, liang_sparse_linear
from fedcomp.experiments import build_problem
from fedcomp.losses import LeastSquares
from fedcomp.regularizers import L1
from fedcomp.runtime import jax_like, simulate_decentralized
from fedcomp.topology import chain, ring
from tests.engines.test_jax_engine import _results

jax = pytest.importorskip("jax")
jnp = jax.numpy
LIKE = jax_like()  # switches on jax_enable_x64 for this process, as the backend does
LIKE32 = jax_like("float32")

#: One small problem for every test: eager jax compiles each operation once per shape and
#: dtype (most of this file's time), so the configuration's data serve the Python API tests
#: too. Unequal client sizes make SGD epochs differ per client (masked steps) and, with
#: ``weighting = "samples"``, the node weights n·π_i differ from 1.
CONFIG = """
name = "jax_runners"
description = "asyncFedDR on an event clock and DFedDA-GT on a ring, on {backend} arrays"
backend = "{backend}"
rounds = 3
eval_every = 1
seeds = [0]
batch_size = 5
metrics = ["objective", "nnz"]
reference = false
compute_times = {{ mean = [1.0, 2.0, 3.0, 1.0, 2.0, 3.0], distribution = "exponential" }}

[data]
generator = "synthetic_fedprox"
alpha = 1.0
beta = 1.0
n_classes = 2
n_clients = 6
samples_per_client = [12, 20, 16, 24, 9, 30]
n_features = 8
seed = 0

[problem]
loss = "logistic"
l2 = 0.01
weighting = "samples"

[regularizer]
name = "l1"
alpha = 1e-3

[topology]
name = "ring"
evaluate_on = ["average", "nodes"]

[[algorithms]]
name = "async_feddr"
eta = 1.0
client_lr = 0.3
local_steps = 3
max_delay = 3

[[algorithms]]
name = "dfedda_gt"
client_lr = 0.3
local_steps = 3
p = 4.0
"""


def config(backend: str) -> dict:
    return tomllib.loads(CONFIG.format(backend=backend))


PROBLEM = build_problem(config("numpy"))
CLOCK = ComputeTimes.build(config("numpy")["compute_times"], PROBLEM.n_clients)

#: Hyperparameters of each registered asynchronous algorithm: the exact (Newton) local
#: solver, and SGD epochs over unequal clients (masked steps) with a staleness bound.
ASYNC_CASES = {"async_feddr": [dict(eta=2.0, alpha=1.2, local_solver="exact"),
                               dict(eta=2.0, alpha=1.2, client_lr=0.3, local_epochs=2,
                                    max_delay=2)]}
#: Hyperparameters of each registered decentralized algorithm.
DECENTRALIZED_CASES = {"dfedda": dict(client_lr=0.3, local_steps=3, p=4.0),
                       "dfedda_gt": dict(client_lr=0.3, local_steps=3, p=4.0),
                       "drefedda_gt": dict(client_lr=0.3, local_steps=3, p=4.0, radius_sq=1.0,
                                           sparsity=3),
                       "dfedmid": dict(client_lr=0.3, local_steps=3),
                       "dproxsgt": dict(client_lr=0.3),
                       "cdproxsgt": dict(client_lr=0.3, codec_x={"name": "qsgd", "levels": 4}),
                       "prox_dasa": dict(client_lr=0.3, averaging_rate=0.5,
                                         schedule="diminishing"),
                       "prox_dasa_gt": dict(client_lr=0.3, averaging_rate=0.5)}
ASYNC = [make_algorithm(name, **params) for name, cases in ASYNC_CASES.items()
         for params in cases]
DECENTRALIZED = [make_algorithm(name, **params) for name, params in DECENTRALIZED_CASES.items()]


def _ident(alg) -> str:
    return f"{alg.name}-{alg.hyperparameters.get('local_solver', '')}".rstrip("-")


def registered(execution: str) -> set[str]:
    return {name for name in REGISTRY if REGISTRY.entry(name).execution == execution}


def on_backend(problem: Problem, like) -> Problem:
    return Problem(problem.loss, problem.regularizer, problem.data.to(like),
                   weighting=problem.weighting, sampler=problem.sampler)


def relative_error(got, want) -> float:
    got, want = np.asarray(to_numpy(got), dtype=np.float64), np.asarray(to_numpy(want),
                                                                        np.float64)
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    return float(np.max(np.abs(got - want), initial=0.0)) / scale


def assert_same_states(got, want, tol=1e-12):
    """Every array of two (nested) NamedTuple states: jax float64 and NumPy's to ``tol``."""
    if want is None:
        assert got is None
        return
    for name, a, b in zip(want._fields, got, want, strict=True):
        if isinstance(b, tuple):  # a wrapper's state holds the inner algorithm's
            assert_same_states(a, b, tol)
            continue
        assert isinstance(a, jax.Array) and a.dtype == jnp.float64, name
        assert relative_error(a, b) <= tol, name


def assert_same_history(got, want):
    """Every evaluated value of every row equal to rounding (wall time aside).

    A consensus error of nodes that agree (the complete graph) is rounding noise, hence the
    absolute floor; a wrong gossip step moves it by far more.
    """
    assert [row.keys() for row in got] == [row.keys() for row in want]
    for row_got, row_want in zip(got, want, strict=True):
        for key, value in row_want.items():
            if key != "wall_s":
                np.testing.assert_allclose(row_got[key], value, rtol=1e-12, atol=1e-20,
                                           err_msg=key)


def test_every_async_and_decentralized_algorithm_has_a_case():
    # a newly registered one needs its hyperparameters here
    assert set(ASYNC_CASES) == registered("async")
    assert set(DECENTRALIZED_CASES) == registered("decentralized")


# --- the asynchronous runner -----------------------------------------------------------------

def run_async(alg, problem, **kwargs):
    return simulate_async(alg, problem, 12, compute_times=CLOCK, seed=4, eval_every=4,
                          metrics=["objective", "nnz"], **kwargs)


def assert_same_async_run(got, want):
    assert isinstance(got.x, jax.Array) and got.x.dtype == jnp.float64
    assert relative_error(got.x, want.x) <= 1e-12
    assert_same_states(got.server_state, want.server_state)
    assert_same_states(got.client_states, want.client_states)
    assert got.counters == want.counters
    for name in ("order", "times", "delays"):
        np.testing.assert_array_equal(getattr(got, name), getattr(want, name), err_msg=name)
    assert got.waited == want.waited
    assert_same_history(got.history, want.history)


@pytest.mark.parametrize("alg", ASYNC, ids=_ident)
def test_async_algorithms_match_numpy_in_float64(alg):
    batch_size = None if alg.hyperparameters["local_solver"] == "exact" else 5
    want = run_async(alg, PROBLEM, batch_size=batch_size)
    got = run_async(alg, on_backend(PROBLEM, LIKE), batch_size=batch_size)
    assert_same_async_run(got, want)
    if alg.hyperparameters["max_delay"] is not None:  # the barrier really held clients back
        assert got.delays.max() <= 2 and got.waited > 0


def test_async_zero_delay_ablation_and_compressed_uploads_match_numpy():
    alg = make_algorithm("async_feddr", eta=2.0, alpha=1.2, client_lr=0.3, local_steps=3)
    want = run_async(alg, PROBLEM, stale=False)
    assert_same_async_run(run_async(alg, on_backend(PROBLEM, LIKE), stale=False), want)
    # error feedback keeps a per-client state of the compressed uploads
    top = compressed(alg, make_compressor("top_k", k=2), ef21=True)
    assert_same_async_run(run_async(top, on_backend(PROBLEM, LIKE)), run_async(top, PROBLEM))


# --- the decentralized runner ----------------------------------------------------------------

def run_gossip(alg, problem, topology, **kwargs):
    return simulate_decentralized(alg, problem, topology, 3, seed=1, metrics=["objective", "nnz"],
                                  **kwargs)


def assert_same_gossip_run(got, want):
    assert isinstance(got.x, jax.Array) and got.x.dtype == jnp.float64
    assert relative_error(got.x, want.x) <= 1e-12
    assert_same_states(got.client_states, want.client_states)
    assert got.server_state is None
    assert got.counters == want.counters
    assert_same_history(got.history, want.history)


@pytest.mark.parametrize("alg", DECENTRALIZED, ids=lambda a: a.name)
def test_decentralized_algorithms_match_numpy_in_float64(alg):
    # unequal client weights (node i scales its gradient by n·π_i), minibatches, neighbour
    # gathers, every evaluation variant and the sparsified models
    kwargs = dict(batch_size=5, evaluate_on=("average", "node", "nodes"), sparsity=2,
                  sparse_mixing=True)
    want = run_gossip(alg, PROBLEM, chain(6), **kwargs)
    got = run_gossip(alg, on_backend(PROBLEM, LIKE), chain(6), **kwargs)
    assert_same_gossip_run(got, want)
    assert want.history[-1]["consensus_error"] > 1e-6  # the nodes still disagree


def test_decentralized_dense_gossip_in_blocks_matches_numpy():
    alg = make_algorithm("dfedmid", **DECENTRALIZED_CASES["dfedmid"])
    kwargs = dict(sparse_mixing=False, node_block=2)  # one product with U, nodes in pairs
    assert_same_gossip_run(run_gossip(alg, on_backend(PROBLEM, LIKE), ring(6), **kwargs),
                           run_gossip(alg, PROBLEM, ring(6), **kwargs))


def test_decentralized_streaming_samples_match_numpy():
    # fresh samples every gradient call, drawn on the host and moved to the data's namespace
    alg = make_algorithm("dfedmid", **DECENTRALIZED_CASES["dfedmid"])
    w_tilde, w_star = liang_linear_models(6, 8, 2, seed=0)
    streaming = Problem(LeastSquares(), L1(0.0), liang_sparse_linear(6, 5, 8, 2, seed=0),
                        sampler=LiangSampler("linear", w_tilde), ground_truth=w_star)
    assert_same_gossip_run(run_gossip(alg, on_backend(streaming, LIKE), chain(6), batch_size=5),
                           run_gossip(alg, streaming, chain(6), batch_size=5))


# --- float32 ----------------------------------------------------------------------------------

def test_jax_float32_stays_float32():
    # the gossip runner only: the float32 compilations of asyncFedDR's operations would
    # double this file's time, and both runners leave the dtype to the same algorithm code
    alg = make_algorithm("dfedmid", **DECENTRALIZED_CASES["dfedmid"])
    got = run_gossip(alg, on_backend(PROBLEM, LIKE32), ring(6), batch_size=5)
    want = run_gossip(alg, PROBLEM, ring(6), batch_size=5)
    assert got.x.dtype == jnp.float32
    assert all(field.dtype == jnp.float32 for field in got.client_states)
    assert relative_error(got.x, want.x) <= 1e-4
    assert got.counters.floats_up == want.counters.floats_up
    assert 2 * got.counters.bits_up == want.counters.bits_up  # 32-bit floats


# --- a configuration with backend = "jax" --------------------------------------------------

def test_a_jax_config_runs_both_runners_through_fedcomp_run(tmp_path):
    for backend in ("numpy", "jax"):
        path = tmp_path / f"{backend}.toml"
        path.write_text(CONFIG.format(backend=backend))
        assert main(["run", str(path), "--out", str(tmp_path / backend), "--quiet"]) == 0
    want, got = _results(tmp_path / "numpy"), _results(tmp_path / "jax")
    # async: 3 rounds x 6 clients = 18 server steps, a row every 6; gossip: 3 rounds
    assert got.keys() == want.keys()
    assert sorted(got) == [(alg, str(r)) for alg in ("async_feddr", "dfedda_gt")
                           for r in ((0, 12, 18, 6) if alg == "async_feddr" else (0, 1, 2, 3))]
    for key, row in want.items():
        for column, value in row.items():
            if column == "wall_s":
                continue
            try:
                expected = float(value)
            except ValueError:  # names, labels, empty cells
                assert got[key][column] == value, (key, column)
                continue
            assert float(got[key][column]) == pytest.approx(expected, rel=1e-12, abs=1e-20), \
                (key, column)
    models = sorted((tmp_path / "numpy" / "models").iterdir())
    assert len(models) == 2
    for model in models:
        np.testing.assert_allclose(np.load(tmp_path / "jax" / "models" / model.name),
                                   np.load(model), rtol=1e-12, atol=0)
