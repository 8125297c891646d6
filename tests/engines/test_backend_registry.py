"""Adding a backend is one registry entry: a stand-in backend registered with one
``BACKENDS.register(BackendEntry(...))`` is named by a configuration, listed by the CLI,
moved to, and run with the traits its entry declares, with no other edit; a device no entry
names is refused by name, never given another device's label (MPS data were ``cuda``)."""

from __future__ import annotations

import numpy as np
import pytest

from fedcomp import toy
from fedcomp.algorithms import make_algorithm
from fedcomp.cli import main
from fedcomp.config import ConfigError, load
from fedcomp.experiments import build_problem, validate
from fedcomp.experiments._setting import resolve
from fedcomp.problem import Problem
from fedcomp.runtime import auto_block_size, simulate
from fedcomp.runtime._backends import (
    BACKENDS,
    BackendEntry,
    backend_for,
    backend_of_data,
    data_backend,
)


def _numpy_like(dtype: str, device: str) -> np.ndarray:
    return np.zeros(0, dtype=dtype)


@pytest.fixture
def register():
    """``register(entry)`` for the test's duration: unregistered however the test ends."""
    added: list[str] = []

    def add(entry: BackendEntry) -> BackendEntry:
        added.append(BACKENDS.register(entry).name)
        return entry

    yield add
    for name in added:
        BACKENDS.unregister(name)


@pytest.fixture
def blocks_by_rule(monkeypatch):
    """A CPU backend's blocks of one client each (the cache rule with a tiny cache, even on a
    small population), so a backend's one block per round shows."""
    from fedcomp.runtime import _blocks, _clients

    monkeypatch.setenv("FEDCOMP_BLOCKS", "rule")
    monkeypatch.setattr(_blocks, "SMALL_BYTES", 0)
    monkeypatch.setattr(_clients, "BLOCK_BYTES", 1)


def _config(backend: str) -> dict:
    cfg = load("seed000")
    cfg.update(backend=backend, rounds=2, seeds=[0])
    cfg["data"] = {**cfg["data"], "n_clients": 3, "samples_per_client": 20}
    return cfg


def test_a_stand_in_backend_is_one_entry_used_end_to_end(register, blocks_by_rule, capsys):
    entry = register(BackendEntry(
        "numpy-float32", _numpy_like, "NumPy float32 on the host, one block a round",
        dtype="float32", block_policy="all", disk_states=True))
    # a configuration names it, client states on disk included (the entry allows them)
    assert validate({**_config("numpy-float32"), "client_state": "disk"})["backend"] == \
        "numpy-float32"
    assert main(["list", "backends"]) == 0
    assert "numpy-float32  NumPy float32 on the host, one block a round" in \
        capsys.readouterr().out
    # the data move there and record it; simulate runs on it with its block policy
    problem = build_problem(resolve(_config("numpy-float32")).settings[0], seed=0)
    assert problem.data.backend is entry and problem.data.features.dtype == np.float32
    assert auto_block_size(problem) == problem.n_clients  # block_policy = "all"
    run = simulate(make_algorithm("fedmid", client_lr=0.1, local_steps=2), problem, 2)
    assert run.x.dtype == np.float32 and np.isfinite(run.history[-1]["objective"])
    # the built-in NumPy backend on the same rule cuts the round into blocks
    numpy = build_problem(resolve(_config("numpy")).settings[0], seed=0)
    assert auto_block_size(numpy) == 1


def test_a_configuration_reads_the_traits_of_the_entry(register):
    register(BackendEntry("numpy-memory", _numpy_like, "NumPy float64, states in memory"))
    with pytest.raises(ConfigError, match=r"client_state = 'disk' .* use backend = "
                                          r"'numpy' \(not 'numpy-memory' or a network\)"):
        validate({**_config("numpy-memory"), "client_state": "disk"})
    register(BackendEntry("numpy-no-networks", _numpy_like, "NumPy float64, no networks",
                          networks=False))
    network = {**load("fedcanon_nn"), "backend": "numpy-no-networks"}
    with pytest.raises(ConfigError, match=r"'numpy-no-networks': a network .* computes with "
                                          r"torch; use backend = one of \[.*'numpy-memory'"):
        validate(network)


def test_simulate_reads_the_entry_the_data_were_moved_to_not_their_arrays(register,
                                                                          blocks_by_rule):
    entry = register(BackendEntry("numpy-one-block", _numpy_like,
                                  "NumPy float64 in one block a round", block_policy="all"))
    tiny = toy.tiny_problem()
    moved = Problem(tiny.loss, tiny.regularizer, tiny.data.to(entry))
    # the same float64 NumPy arrays: by their type alone they are the numpy backend's
    assert backend_of_data(moved.data.like) is BACKENDS.entry("numpy")
    assert data_backend(moved.data) is entry and data_backend(tiny.data).name == "numpy"
    assert (auto_block_size(moved), auto_block_size(tiny)) == (tiny.n_clients, 1)
    assert moved.data.subset(np.arange(2)).backend is entry  # a node's shard keeps it
    algorithm = make_algorithm("fedmid", client_lr=0.1, local_steps=2)
    same = [simulate(algorithm, p, 3).history[-1]["objective"] for p in (moved, tiny)]
    assert same[0] == same[1]  # one block or three: the same rounds


def test_a_device_no_entry_names_is_refused_never_labelled_cuda(register):
    torch = pytest.importorskip("torch")
    on_meta = torch.zeros((2, 3, 4), device="meta")  # a torch device this machine has
    with pytest.raises(ValueError, match=r"data on torch device 'meta': no backend is "
                                         r"registered for it .*device='meta'"):
        backend_of_data(on_meta)
    with pytest.raises(ValueError, match=r"no backend runs float32 on device 'meta:0'"):
        backend_for("meta:0", "float32")
    entry = register(BackendEntry(
        "meta", lambda dtype, device: torch.zeros(0, dtype=getattr(torch, dtype),
                                                  device=device),
        "PyTorch float32 on torch's meta device (a stand-in)", library="torch",
        dtype="float32", device="meta", block_policy="all"))
    assert backend_of_data(on_meta) is entry and backend_for("meta", "float32") is entry
    # Apple's GPU has its own entry (float32 only); an NVIDIA GPU keeps its own
    assert backend_for("mps", "float32", "torch").name == "mps"
    with pytest.raises(ValueError, match="no torch backend runs float64 on device 'mps'"):
        backend_for("mps", "float64", "torch")
    assert [backend_for(f"cuda:{i}", dtype).name for i, dtype in
            [(0, "float32"), (1, "float64")]] == ["cuda", "cuda-float64"]
