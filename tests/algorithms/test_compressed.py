"""Bit accounting in every engine, and compressed uploads (``fedcomp.algorithms.compressed``):
the identity is the uncompressed run bit for bit, rand-k FedAvg converges, EF21 checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedcomp import Problem, RunOptions, simulate
from fedcomp.algorithms import REGISTRY, compressed, fedavg, fedmid, make_algorithm, scaffold
from fedcomp.algorithms._catalog import COMPRESSED_TRAINING
from fedcomp.compressors import QSGD, Identity, Natural, RandK, TopK
from fedcomp.data import ClientData
from fedcomp.losses import LeastSquares
from fedcomp.regularizers import Zero
from fedcomp.runtime import simulate_async, simulate_decentralized
from fedcomp.topology import ring
from tests.conftest import make_problem
from tests.core.test_contract import CONTRACT_PARAMS

PARAMS = {**CONTRACT_PARAMS, "async_feddr": dict(eta=0.5)}


def _run(name: str, problem: Problem, rounds: int = 3) -> list[dict]:
    alg = make_algorithm(name, **PARAMS.get(name, dict(client_lr=0.5, local_steps=3))
                         if REGISTRY.entry(name).execution != "decentralized"
                         else PARAMS.get(name, dict(client_lr=0.05)))
    execution = REGISTRY.entry(name).execution
    if execution == "async":
        return simulate_async(alg, problem, 6, metrics=[]).history
    if execution == "decentralized":
        return simulate_decentralized(alg, problem, ring(problem.n_clients), rounds,
                                      metrics=[]).history
    return simulate(alg, problem, rounds, metrics=[]).history


@pytest.mark.parametrize("name", sorted(REGISTRY))
def test_uncompressed_messages_count_64_bits_per_float64(name: str) -> None:
    """Every algorithm on every engine: bits = 64 × floats, up and down, in every row."""
    from tests.core.test_contract import SMOOTH_ONLY

    # the smooth-only methods (no prox of g in their papers) refuse an l1 term
    reg = Zero() if name in SMOOTH_ONLY else None
    rows = _run(name, make_problem("logistic", reg=reg, n_clients=4, d=5))
    assert rows[-1]["floats_up"] > 0 and rows[-1]["floats_down"] > 0
    for row in rows:
        # the compressed-training family compresses its uploads, CDProxSGT its gossip
        if REGISTRY.entry(name).family == COMPRESSED_TRAINING or name == "cdproxsgt":
            assert 0 < row["bits_up"] < 64 * row["floats_up"] or row["floats_up"] == 0
        else:
            assert row["bits_up"] == 64 * row["floats_up"]
        if name == "cdproxsgt":  # a gossiped message is received compressed too
            assert 0 < row["bits_down"] < 64 * row["floats_down"] or row["floats_down"] == 0
        else:
            assert row["bits_down"] == 64 * row["floats_down"]


def test_float32_messages_count_32_bits() -> None:
    p = make_problem("logistic", n_clients=4, d=5)
    p32 = Problem(p.loss, p.regularizer, p.data.to(np.zeros(0, dtype=np.float32)))
    row = simulate(fedavg(client_lr=0.5), p32, 2, metrics=[]).history[-1]
    assert row["bits_up"] == 32 * row["floats_up"] == 32 * 2 * 4 * 5


def _same_rows(history: list[dict], other: list[dict]) -> None:
    """Equal rows but for the wall time (NaN equal to NaN: no reference, no optimality)."""
    np.testing.assert_equal([{k: v for k, v in row.items() if k != "wall_s"} for row in history],
                            [{k: v for k, v in row.items() if k != "wall_s"} for row in other])


@pytest.mark.parametrize("alg", [fedavg(client_lr=0.5, local_steps=3),
                                 fedmid(client_lr=0.5, local_steps=3),
                                 scaffold(client_lr=0.5, local_steps=3, server_prox=True),
                                 make_algorithm("feddr", eta=0.5)], ids=lambda a: a.name)
@pytest.mark.parametrize("clients_per_round", [None, 3])
def test_identity_compressor_is_the_uncompressed_run_bit_for_bit(alg, clients_per_round):
    p = make_problem("logistic", n_clients=6, d=5)
    if alg.name == "scaffold" and clients_per_round is not None:
        clients_per_round = None  # SCAFFOLD here needs every client
    plain = simulate(alg, p, 6, clients_per_round=clients_per_round, batch_size=4, seed=3)
    same = simulate(compressed(alg, Identity()), p, 6, clients_per_round=clients_per_round,
                    batch_size=4, seed=3)
    assert np.array_equal(same.x, plain.x)
    _same_rows(same.history, plain.history)


def _interpolation_problem(n_clients: int = 5, d: int = 10) -> tuple[Problem, np.ndarray]:
    """Least squares whose every client is solved by the same x* (y_i = A_i x*): then
    each ∇f_i(x*) = 0, so an unbiased compressor's noise vanishes at x*."""
    rng = np.random.default_rng(0)
    x_star = rng.normal(size=d)
    features = [rng.normal(size=(30, d)) for _ in range(n_clients)]
    data = ClientData.from_lists(features, [a @ x_star for a in features])
    return Problem(LeastSquares(), Zero(), data), x_star


def test_rand_k_fedavg_converges_to_x_star_with_more_rounds() -> None:
    """FedAvg (one local step: compressed gradient descent) with rand-k, k = d/5: unbiased,
    so it converges to x* (slower than uncompressed at first); the bits are k/d of theirs."""
    p, x_star = _interpolation_problem()
    alg = fedavg(client_lr=0.2, local_steps=1)  # clients' L_i about 2.2
    rand = compressed(alg, RandK(k=2))
    scale = np.linalg.norm(x_star)
    plain_early = np.linalg.norm(simulate(alg, p, 60, metrics=[]).x - x_star)
    early = np.linalg.norm(simulate(rand, p, 60, metrics=[]).x - x_star)
    late = simulate(rand, p, 300, metrics=[])
    assert plain_early < early  # the compression's variance slows it down...
    assert np.linalg.norm(late.x - x_star) < 1e-10 * scale  # ...but not its limit
    assert late.counters.bits_up == 300 * 5 * 2 * 64  # k values, no indices
    assert late.counters.floats_up == 300 * 5 * 10  # the decoded uploads
    assert late.counters.bits_down == 64 * late.counters.floats_down


@pytest.mark.parametrize("compressor", [QSGD(levels=2), Natural()], ids=repr)
def test_unbiased_quantisers_converge_too(compressor) -> None:
    p, x_star = _interpolation_problem()
    run = simulate(compressed(fedavg(client_lr=0.2, local_steps=1), compressor), p, 300,
                   metrics=[])
    assert np.linalg.norm(run.x - x_star) < 1e-10 * np.linalg.norm(x_star)


def test_top_k_needs_ef21_on_heterogeneous_data() -> None:
    """Top-k of the upload differences (EF21) reaches the optimum of heterogeneous least
    squares as fast as uncompressed GD; plain top-k (biased) stalls far from it."""
    from fedcomp import solve_reference

    p = make_problem("least_squares", reg=Zero(), n_clients=5, d=8)
    x_star = solve_reference(p).x
    alg = fedavg(client_lr=0.5, local_steps=1)  # L_i <= 1.08
    ef = simulate(compressed(alg, TopK(k=2), ef21=True), p, 600, metrics=[])
    plain = simulate(compressed(alg, TopK(k=2)), p, 600, metrics=[])
    scale = np.linalg.norm(x_star)
    assert np.linalg.norm(ef.x - x_star) < 1e-7 * scale
    assert np.linalg.norm(plain.x - x_star) > 0.1 * scale
    assert ef.counters.bits_up == 600 * 5 * 2 * (64 + 3)  # k values + k 3-bit indices


def test_ef21_with_the_identity_follows_the_uncompressed_run() -> None:
    p = make_problem("logistic", n_clients=6, d=5)
    alg = fedmid(client_lr=0.5, local_steps=3)
    plain = simulate(alg, p, 8, clients_per_round=3, seed=1, metrics=[])
    ef = simulate(compressed(alg, Identity(), ef21=True), p, 8, clients_per_round=3, seed=1,
                  metrics=[])
    np.testing.assert_allclose(ef.x, plain.x, rtol=1e-12, atol=1e-14)
    assert ef.counters.bits_up == plain.counters.bits_up


@pytest.mark.parametrize("ef21", [False, True])
def test_compressed_runs_do_not_depend_on_the_block_size(ef21) -> None:
    p = make_problem("logistic", n_clients=7, d=5)
    alg = compressed(fedavg(client_lr=0.5, local_steps=2), RandK(k=2), ef21=ef21)
    runs = [simulate(alg, p, 5, clients_per_round=4, batch_size=3, seed=2,
                     options=RunOptions(client_block=b))
            for b in (1, 3, "all")]
    for run in runs[1:]:
        assert np.array_equal(run.x, runs[0].x)
        _same_rows(run.history, runs[0].history)


def test_compressed_async_counts_the_encoded_bits() -> None:
    p = make_problem("logistic", n_clients=4, d=5)
    run = simulate_async(compressed(make_algorithm("async_feddr", eta=0.5), TopK(k=1)), p, 6,
                         metrics=[])
    assert run.history[-1]["bits_up"] == (4 + 6) * (64 + 3)  # FedDR's warm-up: every client


def test_ef21_refuses_an_upload_of_several_fields_naming_the_fix() -> None:
    p = make_problem("logistic", n_clients=4, d=5)
    alg = compressed(scaffold(client_lr=0.5), TopK(k=1), ef21=True)
    with pytest.raises(ValueError, match=r"scaffold.*\['delta', 'delta_c'\].*ef21=false"):
        simulate(alg, p, 1)


def test_bad_arguments_name_the_fix() -> None:
    with pytest.raises(TypeError, match="make_compressor"):
        compressed(fedavg(), "top_k")
    with pytest.raises(TypeError, match="decentralized"):
        compressed(make_algorithm("dfedmid"), Identity())
    with pytest.raises(ValueError, match="ef21 must be True or False"):
        compressed(fedavg(), Identity(), ef21="yes")


# --- configurations: compressor = {name = ..., ef21 = ...} in an [[algorithms]] entry ------

def _config(**compressor):
    from tests.product.test_sweeps import tiny_config

    cfg = tiny_config()
    cfg.update(seeds=[0], rounds=3, eval_every=1)
    cfg["algorithms"] = [{"name": "fedavg", "client_lr": 0.5, "local_steps": 2},
                         {"name": "fedavg", "label": "fedavg_top2", "client_lr": 0.5,
                          "local_steps": 2, "compressor": compressor}]
    return cfg


def test_a_configuration_compresses_an_entry_and_results_have_the_bits(tmp_path):
    import csv
    import io

    from fedcomp.experiments import RESULT_COLUMNS, run_experiment

    run_experiment(_config(name="top_k", k=2, ef21=True), tmp_path, progress=False,
                   stream=io.StringIO())
    with (tmp_path / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    columns = list(rows[0])
    assert columns[:len(RESULT_COLUMNS)] == RESULT_COLUMNS
    assert columns.index("bits_up") == columns.index("floats_down") + 1
    last = {r["algorithm"]: r for r in rows if r["round"] == "3"}
    plain, top = last["fedavg"], last["fedavg_top2"]
    n, d = 4, int(plain["floats_up"]) // (3 * 4)  # 3 rounds x 4 clients x the model size
    assert int(plain["bits_up"]) == 64 * int(plain["floats_up"])
    assert int(top["bits_up"]) == 3 * n * 2 * (64 + math.ceil(math.log2(d)))  # values+indices
    assert int(top["bits_down"]) == int(plain["bits_down"]) == 64 * 3 * n * d
    written = (tmp_path / "config.json").read_text()
    assert '"ef21": true' in written and '"top_k"' in written


@pytest.mark.parametrize(("compressor", "message"), [
    ({"name": "top_q"}, r"compressor.name: unknown compressor 'top_q'; valid: .*top_k"),
    ({"name": "top_k", "kk": 2}, r"unknown .*kk.*accepted"),
    ({"name": "qsgd", "levels": "four"}, r"levels must be an integer"),
    ({"name": "top_k", "k": 2, "ef21": "yes"}, r"ef21 must be true or false"),
    ({"name": "top_k", "k": 0}, r"k must be an integer >= 1"),
])
def test_a_bad_compressor_table_is_refused_naming_the_key(tmp_path, compressor, message):
    import io

    from fedcomp.config import ConfigError
    from fedcomp.experiments import run_experiment

    with pytest.raises((ConfigError, ValueError), match=message):
        run_experiment(_config(**compressor), tmp_path / "out", progress=False,
                       stream=io.StringIO())
    assert not (tmp_path / "out").exists()
