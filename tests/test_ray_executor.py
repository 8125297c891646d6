"""Past one machine on Ray (issue 23): ``fedcomp run --executor ray`` (seeds and sweeps as
tasks) and ``simulate(clients=ray_clients(...))`` (one run's clients on actors).

The cluster is real: a head and a second node, each a raylet with one CPU, started by Ray's
own ``ray.cluster_utils.Cluster``. The command joins it by address from a separate process,
as a user's would; its ``results.csv`` must hold the same rows as a ``--jobs 1`` run, and
``--resume`` must add the missing seeds only. The actors must give every synchronous
algorithm the single-process simulator's iterates, client states and counters, bit for bit.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from fedcomp import simulate
from fedcomp.cli import main
from fedcomp.experiments._ray_executor import ADDRESS_VARIABLE, cluster_address
from fedcomp.runtime import ray_clients
from fedcomp.runtime._ray_clients import shard_bounds
from tests.test_contract import SYNCHRONOUS, contract_problem, supports_sampling

SMALL = ["seed000", "--set", "rounds=3", "--set", "data.n_clients=4",
         "--set", "data.samples_per_client=40", "--quiet"]


def rows_of(directory):
    """results.csv rows without the timing column, in a fixed order."""
    with (directory / "results.csv").open(newline="") as f:
        rows = [{k: v for k, v in r.items() if k != "wall_s"} for r in csv.DictReader(f)]
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True))


@pytest.fixture(scope="module")
def cluster():
    """A two-node Ray cluster on this machine (one CPU each), shut down afterwards."""
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    two_nodes = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False})
    try:
        two_nodes.add_node(num_cpus=1)
        yield two_nodes.address
    finally:
        two_nodes.shutdown()


def fedcomp_on(address, *args):
    """``fedcomp run`` in its own process, joining the cluster at ``address``."""
    env = {k: v for k, v in os.environ.items() if k != ADDRESS_VARIABLE}
    return subprocess.run([sys.executable, "-m", "fedcomp", "run", *SMALL, "--executor", "ray",
                           "--ray-address", address, *args], env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_seeds_on_a_two_node_cluster_equal_a_local_run_and_resume(cluster, tmp_path):
    assert main(["run", *SMALL, "--seeds", "0:2", "--jobs", "1",
                 "--out", str(tmp_path / "local")]) == 0
    first = fedcomp_on(cluster, "--seeds", "0:1", "--out", str(tmp_path / "ray"))
    assert first.returncode == 0, first.stderr
    assert "(on Ray)" in first.stderr
    done = (tmp_path / "ray" / "runs.jsonl").read_text().splitlines()
    # --resume with one more seed runs only that seed's runs
    second = fedcomp_on(cluster, "--seeds", "0:2", "--resume", "--out", str(tmp_path / "ray"))
    assert second.returncode == 0, second.stderr
    lines = (tmp_path / "ray" / "runs.jsonl").read_text().splitlines()
    assert lines[:len(done)] == done and len(lines) == 2 * len(done)
    assert rows_of(tmp_path / "ray") == rows_of(tmp_path / "local")
    assert not (tmp_path / "ray" / "parts").exists()
    models = sorted(p.name for p in (tmp_path / "ray" / "models").iterdir())
    assert models == sorted(p.name for p in (tmp_path / "local" / "models").iterdir())


@pytest.mark.slow
def test_a_sweep_on_the_cluster_equals_a_local_sweep(cluster, tmp_path):
    sweep = ["--sweep", "algorithms.za1.client_lr=0.5,1.0", "--seeds", "0:1"]
    assert main(["run", *SMALL, *sweep, "--jobs", "1", "--out", str(tmp_path / "local")]) == 0
    remote = fedcomp_on(cluster, *sweep, "--out", str(tmp_path / "ray"))
    assert remote.returncode == 0, remote.stderr
    assert rows_of(tmp_path / "ray") == rows_of(tmp_path / "local")


def test_the_address_comes_from_the_flag_then_the_environment(monkeypatch):
    monkeypatch.setenv(ADDRESS_VARIABLE, "10.0.0.1:6379")
    assert cluster_address("10.0.0.2:6379") == "10.0.0.2:6379"
    assert cluster_address(None) == "10.0.0.1:6379"
    monkeypatch.delenv(ADDRESS_VARIABLE)
    assert cluster_address(None) is None  # a Ray instance on this machine


@pytest.mark.parametrize("args, message", [
    (["--ray-address", "1.2.3.4:6379"], "--ray-address needs --executor ray"),
    (["--executor", "ray", "--jobs", "2"], "drop --jobs"),
    (["--executor", "ray", "--track", "tensorboard"], "trackers"),
])
def test_bad_combinations_are_refused_before_anything_is_written(tmp_path, capsys, args,
                                                                 message):
    out = tmp_path / "out"
    assert main(["run", *SMALL, "--out", str(out), *args]) == 2
    assert message in capsys.readouterr().err
    assert not out.exists()


# --- one run's clients on actors --------------------------------------------------------------
@pytest.fixture(scope="module")
def joined(cluster):
    """This process joined to the two-node cluster (the driver of the actor tests)."""
    import ray

    ray.init(address=cluster, log_to_driver=False, include_dashboard=False)
    yield cluster
    ray.shutdown()


@pytest.mark.slow
@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_clients_on_two_actors_give_the_simulators_iterates(joined, alg):
    """Two shards (clients 0-3 and 4-6) on the two nodes; minibatches, and client sampling
    where the algorithm allows it: the same model, client states and counters, bit for bit."""
    problem = contract_problem(alg)
    sampled = 4 if supports_sampling(alg, problem) else None
    kwargs = dict(batch_size=3, clients_per_round=sampled, seed=5, metrics=["objective"])
    local = simulate(alg, problem, 4, **kwargs)
    remote = simulate(alg, problem, 4, clients=ray_clients(shards=2), **kwargs)
    np.testing.assert_array_equal(remote.x, local.x)
    for a, b in zip(remote.client_states, local.client_states, strict=True):
        np.testing.assert_array_equal(a, b)
    assert remote.counters == local.counters
    assert [r["objective"] for r in remote.history] == [r["objective"] for r in local.history]


@pytest.mark.slow
def test_more_actors_than_free_cpus_is_a_clear_error(joined, monkeypatch):
    import fedcomp.runtime._ray_clients as module

    monkeypatch.setattr(module, "PLACEMENT_TIMEOUT", 3.0)
    alg = SYNCHRONOUS[0]
    with pytest.raises(RuntimeError, match="found no free CPU.*lower shards or add nodes"):
        simulate(alg, contract_problem(alg), 1, clients=ray_clients(shards=3))


def test_shards_are_contiguous_and_even():
    assert shard_bounds(7, 2).tolist() == [0, 4, 7]
    assert shard_bounds(3, 3).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="shards must be an integer >= 1"):
        ray_clients(shards=0)
