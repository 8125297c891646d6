"""Client-level differential privacy (fedcomp.privacy): the wrapper and the accountant."""

from __future__ import annotations

import csv
import math
from typing import NamedTuple

import numpy as np
import pytest
from scipy.stats import norm

from fedcomp import Problem
from fedcomp.algorithms import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    fedavg,
    fedda,
    fedmid,
    fedprox,
    scaffold,
)
from fedcomp.data import ClientData
from fedcomp.losses import LeastSquares
from fedcomp.privacy import (
    calibrate_noise,
    clip_uploads,
    epsilon,
    privacy_plan,
    private,
)
from fedcomp.regularizers import L1
from fedcomp.runtime import RunOptions, simulate

pytest.importorskip("dp_accounting")


def problem(n_clients=4, samples=20, d=5, seed=0):
    """Clients of equal size: the algorithms' weights are uniform, as the wrapper's are."""
    rng = np.random.default_rng(seed)
    truth = rng.normal(size=d)
    feats = [rng.normal(size=(samples, d)) for _ in range(n_clients)]
    return Problem(LeastSquares(), L1(0.01),
                   ClientData.from_lists(feats, [f @ truth + 0.1 * rng.normal(size=samples)
                                                 for f in feats]))


ALGORITHMS = {"fedavg": lambda: fedavg(client_lr=0.05, local_steps=3),
              "fedmid": lambda: fedmid(client_lr=0.05, local_steps=3),
              "fedda": lambda: fedda(client_lr=0.05, local_steps=3),
              "fedprox": lambda: fedprox(mu=0.1, client_lr=0.05, local_steps=3)}


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("clients_per_round", [None, 2])
def test_no_noise_no_clip_is_the_algorithm_bit_for_bit(name, clients_per_round):
    prob = problem()
    kw = dict(rounds=6, clients_per_round=clients_per_round, batch_size=5, seed=3,
              metrics=["objective", "nnz"])
    plain = simulate(ALGORITHMS[name](), prob, **kw)
    wrapped = simulate(private(ALGORITHMS[name](), clip=math.inf, noise_multiplier=0.0),
                       prob, **kw)
    assert np.array_equal(plain.x, wrapped.x)
    for a, b in zip(plain.history, wrapped.history, strict=True):
        assert {k: v for k, v in a.items() if k != "wall_s"} == \
            {k: v for k, v in b.items() if k != "wall_s"}


def test_clipping_bounds_every_upload_and_is_active():
    prob = problem()
    algorithm = fedavg(client_lr=0.05, local_steps=3)
    seen = []

    def spy(state, uploads, ctx):
        seen.append(np.linalg.norm(uploads.delta, axis=1))
        return algorithm.server_update(state, uploads, ctx)

    clip = 0.05
    run = simulate(private(algorithm._replace(server_update=spy), clip=clip), prob, rounds=4)
    norms = np.concatenate(seen)
    assert np.all(norms <= clip * (1 + 1e-12))
    assert np.all(norms >= clip * (1 - 1e-12))  # every update is longer than 0.05: clipped
    plain = simulate(algorithm, prob, rounds=4)
    assert not np.allclose(run.x, plain.x)


def test_clip_of_a_model_field_acts_on_its_change():
    from collections import namedtuple

    up, msg = namedtuple("Up", "g"), namedtuple("Msg", "g")
    base = np.array([10.0, -3.0])
    uploads = up(np.array([[13.0, 1.0], [10.5, -3.0]]))  # changes (3, 4) and (0.5, 0)
    out = clip_uploads(uploads, msg(base), {"g": "g"}, 1.0)
    assert np.allclose(out.g, [[10.6, -2.2], [10.5, -3.0]])
    assert out.g[1].tobytes() == uploads.g[1].tobytes()  # scale 1: the row untouched


class _Delta(NamedTuple):
    delta: np.ndarray


class _Seeded:
    """What the wrapper reads of a client oracle: the block's size and the run's seed."""

    def __init__(self, size, seed):
        self.size, self.seed = size, seed


def _server_noise(local, sigma, clip, m, rounds=400, d=5):
    """The noise on the average the server steps with, one round per seed, all uploads 0."""
    got = []

    def server_update(state, uploads, ctx):
        got.append(np.asarray(ctx.weights) @ uploads.delta)
        return state

    def client_update(msg, states, ctx):
        return _Delta(np.zeros((ctx.oracle.size, d))), states

    probe = FederatedAlgorithm("probe", lambda x0, n: (x0, ()), lambda s: s, client_update,
                               server_update, lambda s: s, {})
    wrapped = private(probe, clip=clip, noise_multiplier=sigma, local=local,
                      fields={"delta": None})
    ids, weights = np.arange(m), np.full(m, 1 / m)
    for seed in range(rounds):
        uploads, _ = wrapped.client_update(None, (), ClientContext(_Seeded(m, seed), None, 0,
                                                                   ids, weights, m))
        wrapped.server_update(None, uploads, ServerContext(None, 0, ids, weights, weights, m,
                                                           seed=seed))
    return np.array(got)


@pytest.mark.parametrize("local", [False, True])
def test_noise_variance_of_the_average(local):
    sigma, clip, m = 0.7, 0.3, 4
    noise = _server_noise(local, sigma, clip, m)  # 400 rounds × 5 coordinates
    expected = (sigma * clip) ** 2 / m ** 2 * (m if local else 1)
    # the sample variance of 2000 normals is within 4 standard errors (sqrt(2/1999))
    assert abs(noise.var() / expected - 1) < 4 * math.sqrt(2 / (noise.size - 1))
    assert abs(noise.mean()) < 4 * math.sqrt(expected / noise.size)


def test_private_fedavg_decreases_the_objective_to_a_noise_floor():
    # DP-FedAvg with a constant step: the objective falls, then hovers at a floor the
    # noise sets, above the non-private run's
    prob = problem(n_clients=8, samples=30)
    kw = dict(rounds=30, clients_per_round=4, seed=1)
    plain = simulate(fedavg(client_lr=0.05, local_steps=3), prob, **kw)
    run = simulate(private(fedavg(client_lr=0.05, local_steps=3), clip=0.5,
                           noise_multiplier=0.5), prob, **kw)
    start = run.history[0]["objective"]
    floor = np.mean([row["objective"] for row in run.history[-10:]])
    assert floor < 0.25 * start
    assert floor > np.mean([row["objective"] for row in plain.history[-10:]])


@pytest.mark.parametrize("local", [False, True])
def test_block_size_does_not_change_the_noise(local):
    prob = problem(n_clients=6)
    algorithm = private(fedmid(client_lr=0.05, local_steps=2), clip=0.2, noise_multiplier=1.0,
                        local=local)
    runs = [simulate(algorithm, prob, rounds=5, clients_per_round=4, seed=2,
                     options=RunOptions(client_block=b)).x for b in (1, 3, "all")]
    assert np.array_equal(runs[0], runs[1]) and np.array_equal(runs[0], runs[2])
    other_seed = simulate(algorithm, prob, rounds=5, clients_per_round=4, seed=3).x
    assert not np.array_equal(runs[0], other_seed)


def test_refused_algorithms_say_why():
    with pytest.raises(ValueError, match="control variate"):
        private(scaffold())
    with pytest.raises(ValueError, match="clip=inf"):
        private(fedavg(), clip=math.inf, noise_multiplier=1.0)
    with pytest.raises(ValueError, match="clip must be a positive number"):
        private(fedavg(), clip=0.0)
    from fedcomp.algorithms import feddr
    with pytest.raises(ValueError, match="warm-up|running sum"):
        private(feddr())


# --- the accountant ----------------------------------------------------------------------


def _analytic_gaussian_delta(eps, sigma):
    """The exact δ(ε) of the Gaussian mechanism at sensitivity 1 (Balle & Wang, ICML 2018,
    Theorem 8), written out here independently of the library."""
    return norm.cdf(-eps * sigma + 1 / (2 * sigma)) - math.exp(eps) * norm.cdf(
        -eps * sigma - 1 / (2 * sigma))


def test_pld_matches_the_analytic_gaussian_mechanism():
    # R rounds of the unsampled Gaussian mechanism (add/remove) = one with sigma / sqrt(R)
    sigma, rounds, delta = 4.0, 9, 1e-5
    eps = epsilon(sigma, rounds, delta, n_clients=10, sampling="poisson", accountant="pld")
    assert _analytic_gaussian_delta(eps, sigma / math.sqrt(rounds)) == pytest.approx(
        delta, rel=0.02)


def test_rdp_bounds_pld_within_the_known_slack():
    # RDP's conversion to (ε, δ) is an upper bound: above the tight PLD value, not far
    for q_clients, sigma in [(10, 1.1), (20, 2.0)]:
        kw = dict(n_clients=100, clients_per_round=q_clients, sampling="poisson")
        rdp = epsilon(sigma, 60, 1e-5, **kw)
        pld = epsilon(sigma, 60, 1e-5, accountant="pld", **kw)
        assert pld < rdp < 1.3 * pld


def test_fixed_size_sampling_without_amplification_is_the_gaussian_at_half_sigma():
    # every client every round, a client replaced: sensitivity 2C
    full = epsilon(2.0, 5, 1e-5, n_clients=10, sampling="fixed")
    assert full == pytest.approx(epsilon(1.0, 5, 1e-5, n_clients=10, sampling="poisson"))
    sampled = epsilon(2.0, 5, 1e-5, n_clients=10, clients_per_round=3, sampling="fixed")
    assert sampled < full  # amplification by sampling


def test_epsilon_monotone_in_rounds_and_noise():
    kw = dict(n_clients=50, clients_per_round=5)
    by_rounds = [epsilon(1.5, r, 1e-5, **kw) for r in (1, 10, 100)]
    by_sigma = [epsilon(s, 50, 1e-5, **kw) for s in (0.8, 1.5, 3.0)]
    assert by_rounds == sorted(by_rounds) and len(set(by_rounds)) == 3
    assert by_sigma == sorted(by_sigma, reverse=True) and len(set(by_sigma)) == 3
    assert epsilon(1.5, 0, 1e-5, **kw) == 0.0
    assert epsilon(0.0, 1, 1e-5, **kw) == math.inf


@pytest.mark.parametrize("sampling", ["fixed", "poisson"])
def test_target_epsilon_is_reproduced_to_the_tolerance(sampling):
    kw = dict(n_clients=100, clients_per_round=10, sampling=sampling)
    sigma = calibrate_noise(2.0, 1e-5, 40, **kw)
    eps = epsilon(sigma, 40, 1e-5, **kw)
    assert 2.0 * (1 - 1e-3) <= eps <= 2.0
    assert epsilon(sigma * 0.99, 40, 1e-5, **kw) > 2.0  # no much smaller sigma would do


# --- configurations ------------------------------------------------------------------------

CONFIG = """\
name = "dp"
rounds = 4
reference = false
metrics = ["objective"]
clients_per_round = 2
[data]
generator = "synthetic_fedprox"
alpha = 0.5
beta = 0.5
n_clients = 4
n_features = 5
n_classes = 3
samples_per_client = 20
seed = 0
[problem]
loss = "softmax"
[regularizer]
name = "l1"
alpha = 0.01
[[algorithms]]
name = "fedavg"
client_lr = 0.05
local_steps = 2
[[algorithms]]
name = "fedavg"
label = "dp_fedavg"
client_lr = 0.05
local_steps = 2
privacy = {clip = 0.5, target_epsilon = 5.0, delta = 1e-5}
"""


def test_config_runs_write_epsilon_per_evaluation(tmp_path):
    import tomllib

    from fedcomp.experiments import run_experiment

    run_experiment(tomllib.loads(CONFIG), tmp_path / "out", progress=False,
                   stream=open("/dev/null", "w"))
    rows = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    private_rows = [r for r in rows if r["algorithm"] == "dp_fedavg"]
    assert [r["epsilon"] for r in rows if r["algorithm"] == "fedavg"] == [""] * 5
    eps = [float(r["epsilon"]) for r in private_rows]
    assert eps[0] == 0.0 and eps == sorted(eps) and 5.0 * (1 - 1e-3) <= eps[-1] <= 5.0


@pytest.mark.parametrize("table, message", [
    ({"clip": 1.0}, "noise_multiplier .* or target_epsilon"),
    ({"clip": 1.0, "noise_multiplier": 1.0, "target_epsilon": 2.0}, "not both"),
    ({"clip": -1.0, "noise_multiplier": 1.0}, "clip must be a number > 0"),
    ({"clip": math.inf, "target_epsilon": 1.0}, "clip = inf"),
    ({"clip": 1.0, "noise_multiplier": 1.0, "delta": 2.0}, "delta must be in"),
    ({"clip": 1.0, "noise_multiplier": 1.0, "sampling": "x"}, "sampling must be one of"),
    ({"clip": 1.0, "noise_multiplier": 1.0, "sigma": 1.0}, "unknown key"),
    ({"clip": 1.0, "noise_multiplier": 1.0, "local": "yes"}, "local must be true or false"),
])
def test_bad_privacy_tables_name_the_fix(table, message):
    with pytest.raises(ValueError, match=message):
        privacy_plan(table, "fedavg")


def test_bad_privacy_in_a_config_is_a_config_error():
    import tomllib

    from fedcomp.config import ConfigError
    from fedcomp.experiments import resolve

    config = tomllib.loads(CONFIG.replace('name = "fedavg"\nlabel', 'name = "scaffold"\nlabel')
                           .replace("client_lr = 0.05\nlocal_steps = 2\nprivacy",
                                    "privacy"))
    with pytest.raises(ConfigError, match="scaffold cannot be made private"):
        resolve(config)


def _with_compressor(local: bool) -> str:
    return CONFIG.replace("privacy = {clip = 0.5, target_epsilon = 5.0, delta = 1e-5}",
                          "compressor = {name = \"rand_k\", k = 2}\n"
                          f"privacy = {{clip = 0.5, noise_multiplier = 1.0, "
                          f"local = {str(local).lower()}}}")


def test_compressed_private_run_keeps_the_compressed_bits(tmp_path):
    """Central noise on a compressed upload: the bits are the compressed run's, the iterates
    move (noise is added) and epsilon is written."""
    import tomllib

    from fedcomp.experiments import run_experiment

    private_cfg = tomllib.loads(_with_compressor(local=False))
    plain_cfg = tomllib.loads(_with_compressor(local=False))
    del plain_cfg["algorithms"][1]["privacy"]
    for cfg, out in ((private_cfg, "private"), (plain_cfg, "plain")):
        cfg["algorithms"] = cfg["algorithms"][1:]
        run_experiment(cfg, tmp_path / out, progress=False, stream=open("/dev/null", "w"))
    private_rows = list(csv.DictReader(open(tmp_path / "private" / "results.csv")))
    plain_rows = list(csv.DictReader(open(tmp_path / "plain" / "results.csv")))
    assert [r["bits_up"] for r in private_rows] == [r["bits_up"] for r in plain_rows]
    assert int(private_rows[-1]["bits_up"]) < 32 * 5 * 3 * 2 * 4  # below dense float32
    assert [r["objective"] for r in private_rows] != [r["objective"] for r in plain_rows]
    assert float(private_rows[-1]["epsilon"]) > 0


def test_local_noise_with_a_compressor_is_refused():
    import tomllib

    from fedcomp.config import ConfigError
    from fedcomp.experiments import resolve

    with pytest.raises(ConfigError, match="local = true with a compressor"):
        resolve(tomllib.loads(_with_compressor(local=True)))


def test_za1_without_noise_or_clip_is_za1_bit_for_bit():
    from fedcomp.algorithms import za1

    prob = problem()
    kw = dict(rounds=6, batch_size=5, seed=3, metrics=["objective"])
    plain = simulate(za1(client_lr=0.05, local_steps=3), prob, **kw)
    wrapped = simulate(private(za1(client_lr=0.05, local_steps=3), clip=math.inf,
                               noise_multiplier=0.0), prob, **kw)
    assert np.array_equal(plain.x, wrapped.x)
