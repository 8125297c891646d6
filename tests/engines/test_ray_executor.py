"""Past one machine on Ray (issue 23): ``fedcomp run --executor ray`` (seeds and sweeps as
tasks) and ``RunOptions(clients=ray_clients(...))`` (one run's clients on actors).

The cluster is real: a head and a second node, each a raylet with one CPU, started by Ray's
own ``ray.cluster_utils.Cluster``. The command joins it by address from a separate process,
as a user's would; its ``results.csv`` must hold the same rows as a ``--jobs 1`` run, and
``--resume`` must add the missing seeds only. The actors must give every synchronous
algorithm the single-process simulator's iterates, client states and counters, bit for bit.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from fedcomp import RunOptions, simulate
from fedcomp.cli import main
from fedcomp.data import ClientData
from fedcomp.data._checks import whole_npy_file
from fedcomp.runtime import ray_clients
from fedcomp.runtime._ray_clients import ShardOnDisk, ray_address, shard_bounds, shard_problem
from tests.core.test_contract import SYNCHRONOUS, contract_problem, supports_sampling

ADDRESS_VARIABLE = "RAY_ADDRESS"
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
    assert ray_address("10.0.0.2:6379") == "10.0.0.2:6379"
    assert ray_address(None) == "10.0.0.1:6379"
    monkeypatch.delenv(ADDRESS_VARIABLE)
    assert ray_address(None) == "local"  # a Ray instance on this machine


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
def assert_same_run_bitwise(remote, local):
    """The model, client states, counters and objective curve, bit for bit."""
    np.testing.assert_array_equal(remote.x, local.x)
    for a, b in zip(remote.client_states, local.client_states, strict=True):
        np.testing.assert_array_equal(a, b)
    assert remote.counters == local.counters
    assert [r["objective"] for r in remote.history] == [r["objective"] for r in local.history]


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_clients_on_two_actors_give_the_simulators_iterates(joined, alg):
    """Two shards (clients 0-3 and 4-6) on the two nodes; minibatches, and client sampling
    where the algorithm allows it: the same model, client states and counters, bit for bit."""
    problem = contract_problem(alg)
    sampled = 4 if supports_sampling(alg, problem) else None
    kwargs = dict(batch_size=3, clients_per_round=sampled, seed=5, metrics=["objective"])
    local = simulate(alg, problem, 4, **kwargs)
    remote = simulate(alg, problem, 4, **kwargs, options=RunOptions(clients=ray_clients(shards=2)))
    assert_same_run_bitwise(remote, local)


@pytest.mark.slow
def test_more_actors_than_free_cpus_is_a_clear_error(joined, monkeypatch):
    import fedcomp.runtime._ray_clients as module

    monkeypatch.setattr(module, "PLACEMENT_TIMEOUT", 3.0)
    alg = SYNCHRONOUS[0]
    with pytest.raises(RuntimeError, match="found no free CPU.*lower shards or add nodes"):
        simulate(alg, contract_problem(alg), 1, options=RunOptions(clients=ray_clients(shards=3)))


def test_shards_are_contiguous_and_even():
    assert shard_bounds(7, 2).tolist() == [0, 4, 7]
    assert shard_bounds(3, 3).tolist() == [0, 1, 2, 3]
    with pytest.raises(ValueError, match="shards must be an integer >= 1"):
        ray_clients(shards=0)


# --- data on disk: ClientData.save / load and actors that read their own rows ------------------
def saved_data(directory, holdout=True):
    """Three clients of 4, 2 and 3 samples (float32 features, integer class ids) saved to
    ``directory``, with the ClientData they came from."""
    rng = np.random.default_rng(3)
    data = ClientData.from_lists([rng.normal(size=(n, 5)) for n in (4, 2, 3)],
                                 [rng.integers(0, 3, size=n) for n in (4, 2, 3)],
                                 dtype=np.float32)
    if holdout:
        data = data.with_holdout(rng.normal(size=(6, 5)), rng.integers(0, 3, size=6))
    data.save(directory)
    return data


def arrays_of(data):
    return [data.features, data.targets, data.counts,
            *(() if data.holdout is None else data.holdout)]


@pytest.mark.parametrize("mmap", [True, False])
def test_client_data_round_trips_through_npy_files(tmp_path, mmap):
    data = saved_data(tmp_path / "data")
    back = ClientData.load(tmp_path / "data", mmap=mmap)
    for saved, loaded in zip(arrays_of(data), arrays_of(back), strict=True):
        assert loaded.dtype == saved.dtype and loaded.shape == saved.shape
        np.testing.assert_array_equal(loaded, saved)
    mapped = [isinstance(a, np.memmap) for a in arrays_of(back)]
    assert mapped == ([True, True, False, True, True] if mmap else [False] * 5)
    # saving again without a holdout leaves no stale holdout behind
    ClientData(data.features, data.targets, data.counts).save(tmp_path / "data")
    assert ClientData.load(tmp_path / "data").holdout is None


def resident_kb():
    """This process's resident memory (anonymous, and the pages of mapped files), kB."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_loading_memory_maps_checks_the_data_without_holding_it(tmp_path):
    """64 MB of features behind a memory map: the process's resident memory grows by far
    less than the array — neither a copy nor the map's pages (the finiteness check reads
    the file in blocks) — yet the check read all of it."""
    n = 40_000
    features = np.lib.format.open_memmap(tmp_path / "f.npy", "w+", np.float64, (n, 10, 20))
    features[:] = 1.0
    ClientData(features, np.ones((n, 10)), np.full(n, 10)).save(tmp_path / "data")
    del features
    import fedcomp.data._checks as module

    before = resident_kb()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(module, "FINITE_CHECK_BYTES", 2**20)  # 1 MiB blocks
        data = ClientData.load(tmp_path / "data")
    assert resident_kb() - before < 8 * 1024
    assert isinstance(data.features, np.memmap) and data.features.shape == (n, 10, 20)
    # the check did read everything: a NaN in the last client is found through the map
    patched = np.load(tmp_path / "data" / "features.npy", mmap_mode="r+")
    patched[-1, 9, 19] = np.nan
    patched.flush()
    del patched
    with pytest.raises(ValueError, match=f"feature 19 of sample 9 of client {n - 1}"):
        ClientData.load(tmp_path / "data")


def damage(directory, how):
    if how == "no directory":
        return directory / "elsewhere"
    if how == "no description":
        (directory / "client_data.json").unlink()
    elif how == "corrupt description":
        (directory / "client_data.json").write_text("{not json")
    elif how == "missing file":
        (directory / "targets.npy").unlink()
    elif how == "truncated file":
        path = directory / "features.npy"
        path.write_bytes(path.read_bytes()[:-8])
    elif how == "not an npy file":
        (directory / "counts.npy").write_text("hello")
    elif how == "another save's file":
        np.save(directory / "targets.npy", np.zeros((3, 4)))
    return directory


@pytest.mark.parametrize("how, error, message", [
    ("no directory", FileNotFoundError, r"elsewhere is not a directory; write it again with "
                                        r"ClientData\.save"),
    ("no description", FileNotFoundError, r"client_data\.json is missing.*ClientData\.save"),
    ("corrupt description", ValueError, r"client_data\.json is not a ClientData description"),
    ("missing file", FileNotFoundError, r"targets\.npy is missing"),
    ("truncated file", ValueError, r"features\.npy is not a readable \.npy file"),
    ("not an npy file", ValueError, r"counts\.npy is not a readable \.npy file"),
    ("another save's file", ValueError, r"targets\.npy holds <f8 of shape \[3, 4\] but .*"
                                        r"says <i8 of shape \[3, 4\]"),
])
@pytest.mark.parametrize("mmap", [True, False])
def test_a_damaged_directory_is_refused_naming_the_path_and_the_fix(tmp_path, how, error,
                                                                    message, mmap):
    saved_data(tmp_path / "data")
    directory = damage(tmp_path / "data", how)
    with pytest.raises(error, match=message) as caught:
        ClientData.load(directory, mmap=mmap)
    assert str(tmp_path) in str(caught.value) and "ClientData.save" in str(caught.value)


def test_only_whole_npy_files_are_sent_as_paths(tmp_path):
    data = saved_data(tmp_path / "data", holdout=False)
    loaded = ClientData.load(tmp_path / "data")
    assert whole_npy_file(loaded.features) == str(tmp_path / "data" / "features.npy")
    assert whole_npy_file(loaded.features[1:]) is None  # a slice: not the file's rows
    assert whole_npy_file(loaded.features.view(np.int32)) is None  # another dtype
    assert whole_npy_file(np.asarray(data.features)) is None  # in memory
    assert whole_npy_file(ClientData.load(tmp_path / "data", mmap=False).features) is None


@pytest.mark.slow
def test_actors_read_their_rows_from_disk_and_give_the_simulators_iterates(joined, tmp_path,
                                                                          monkeypatch):
    """A memory-mapped problem on two actors: every actor is sent the paths (pickling any
    memory map in this process fails the test) and the run equals the in-process run of
    the in-memory problem — model, client states, counters and objective curve."""
    alg = next(a for a in SYNCHRONOUS if a.name == "scaffold")
    problem = contract_problem(alg)
    problem.data.save(tmp_path / "data")
    on_disk = dataclasses.replace(problem, data=ClientData.load(tmp_path / "data"))
    assert isinstance(on_disk.data.features, np.memmap)

    def refuse(self, *args):
        raise AssertionError("a memory map was pickled: its rows went through the driver")

    kwargs = dict(batch_size=3, clients_per_round=4, seed=5, metrics=["objective"])
    local = simulate(alg, problem, 4, **kwargs)
    with monkeypatch.context() as patch:
        patch.setattr(np.memmap, "__reduce_ex__", refuse, raising=False)
        patch.setattr(np.memmap, "__reduce__", refuse, raising=False)
        remote = simulate(alg, on_disk, 4, **kwargs,
                          options=RunOptions(clients=ray_clients(shards=2)))
    assert_same_run_bitwise(remote, local)


def test_an_actor_that_cannot_read_the_files_says_which_and_why(tmp_path):
    """What an actor does with what it is sent, here in this process: a file missing on its
    machine, or another copy of different shape there, is refused naming path and fix."""
    alg = SYNCHRONOUS[0]
    problem = contract_problem(alg)
    problem.data.save(tmp_path / "data")
    on_disk = dataclasses.replace(problem, data=ClientData.load(tmp_path / "data"))
    sent = shard_problem(on_disk, slice(4, 7))
    assert isinstance(sent, ShardOnDisk)
    part = sent.problem()
    np.testing.assert_array_equal(part.data.features, problem.data.features[4:7])
    assert type(part.data.features) is np.ndarray  # copied out of the map
    np.save(tmp_path / "data" / "targets.npy", np.ones((3, 2)))
    with pytest.raises(ValueError, match=r"targets\.npy holding <f8 of shape \[3, 2\].*same "
                                         r"path"):
        sent.problem()
    (tmp_path / "data" / "features.npy").unlink()
    with pytest.raises(FileNotFoundError, match=r"cannot read .*features\.npy.*needs the data "
                                                r"directory at the same path"):
        sent.problem()


@pytest.mark.slow
def test_an_actor_failing_to_read_its_rows_stops_the_run_with_its_reason(joined, tmp_path,
                                                                       monkeypatch):
    import fedcomp.runtime._ray_clients as module

    alg = SYNCHRONOUS[0]
    problem = contract_problem(alg)
    problem.data.save(tmp_path / "data")
    on_disk = dataclasses.replace(problem, data=ClientData.load(tmp_path / "data"))

    def elsewhere(problem, rows):  # as if the directory were missing on the actors' machine
        sent = shard_problem(problem, rows)
        moved = tuple((path.replace("data", "gone"), *rest) for path, *rest in sent.files)
        return dataclasses.replace(sent, files=moved)

    monkeypatch.setattr(module, "shard_problem", elsewhere)
    with pytest.raises(Exception, match=r"cannot read .*gone.*features\.npy"):
        simulate(alg, on_disk, 1, options=RunOptions(clients=ray_clients(shards=2)))


@pytest.mark.parametrize("on_disk", [False, True])
def test_the_blocked_finiteness_check_finds_the_first_bad_value(tmp_path, monkeypatch, on_disk):
    """Blocks of 3 clients (in memory: slices; on disk: reads of the file): the first NaN or
    inf in C order is named, however the blocks cut the array."""
    import fedcomp.data._checks as module

    values = np.ones((10, 4, 2))
    values[7, 0, 1], values[5, 3, 0] = np.inf, np.nan
    if on_disk:
        np.save(tmp_path / "v.npy", values)
        values = np.load(tmp_path / "v.npy", mmap_mode="r")
        assert whole_npy_file(values) is not None
    monkeypatch.setattr(module, "FINITE_CHECK_BYTES", 3 * values[:1].nbytes)
    assert module.first_non_finite(values) == (5, 3, 0)
    assert module.first_non_finite(values[:5]) is None


@pytest.mark.slow
def test_a_cluster_that_dies_mid_run_ends_with_one_line_and_the_resume_command(tmp_path):
    """Before: exit 1 with Ray's traceback and log lines, no word of what was kept."""
    cluster_utils = pytest.importorskip("ray.cluster_utils")
    doomed = cluster_utils.Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False})
    address = doomed.address  # None once it is shut down
    out = tmp_path / "ray"
    env = {k: v for k, v in os.environ.items() if k != ADDRESS_VARIABLE}
    run = subprocess.Popen([sys.executable, "-m", "fedcomp", "run", *SMALL, "--set",
                            "rounds=400", "--seeds", "0:3", "--executor", "ray",
                            "--ray-address", address, "--out", str(out)],
                           env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 240
        while not (out / "runs.jsonl").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        assert (out / "runs.jsonl").exists(), "no run finished on the cluster"
    finally:
        doomed.shutdown()
    _, err = run.communicate(timeout=240)
    assert run.returncode == 1, err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "Traceback" not in err, err
    assert f"the Ray cluster at {address} failed during the runs" in errors[0]
    assert "--resume" in errors[0] and "finished runs are kept" in errors[0]
    assert (out / "runs.jsonl").read_text().strip()  # what finished is recorded
