"""On a real GPU: every algorithm gives NumPy's iterates, and the CLI's runs work there.

``tests/test_devices.py`` checks device discipline on CPU stand-ins that refuse what a GPU
refuses. This file runs the same cases on the GPU itself, where torch sees one (CI has none:
every test here is skipped there). ``scripts/gpu_check.sh`` runs it on a GPU machine.

* ``cuda``: the data as torch float64 tensors on ``cuda:0``; ``jax-gpu``: as jax float64
  arrays on jax's first GPU (the compiled engine where an algorithm compiles);
* every synchronous algorithm (full gradients; minibatches with client sampling), the
  wrappers, the asynchronous and the decentralized runtimes: iterates, client states and
  history rows equal to NumPy's to 1e-12, the model and every state field left on the GPU;
* a network (an MLP in float64) trained by each algorithm that trains one: the same
  iterates as on the CPU to 1e-10;
* ``fedcomp run`` of the default experiment with ``backend = "cuda-float64"`` and
  ``"jax"``: the rows NumPy's backend writes (objective to 1e-10), and ``config.json``
  names the GPU backend that ran.
"""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest
from test_contract import contract_problem, supports_sampling
from test_devices import (
    DECENTRALIZED,
    METRICS,
    WRAPPED,
    _network_problem,
    assert_on_device,
    assert_same_run,
    leaves,
    on_device,
    run_sync,
    sync_cases,
)

from fedcomp import ComputeTimes, Problem, simulate, simulate_async
from fedcomp._array import device_of, to_numpy
from fedcomp.algorithms import async_feddr
from fedcomp.runtime import simulate_decentralized
from fedcomp.topology import ring

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

KINDS = ["cuda", "jax-gpu"]
#: The algorithms that train a network (``test_devices.py`` runs the same list on ``meta``).
NETWORK_TRAINERS = ("fedavg", "fedmid", "fedda", "za1", "scaffold", "fedcanon", "feddr",
                    "fedprox", "fedpd")


def gpu(kind: str):
    """``(device, empty float64 array there)`` on the GPU of ``kind``; skip without one."""
    if kind == "cuda":
        if not torch.cuda.is_available():
            pytest.skip("torch sees no GPU")
        like = torch.zeros(0, dtype=torch.float64, device="cuda:0")
        return like.device, like
    jax = pytest.importorskip("jax")
    from fedcomp.runtime import jax_like

    try:
        device = jax.devices("gpu")[0]
    except RuntimeError:
        pytest.skip("jax sees no GPU")
    return device, jax.device_put(jax_like(), device)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alg, batch_size, sampled", sync_cases())
def test_synchronous_algorithm_on_the_gpu(alg, batch_size, sampled, kind):
    device, like = gpu(kind)
    p = contract_problem(alg)
    ref = run_sync(alg, p, batch_size, sampled)
    run = run_sync(alg, on_device(p, like), batch_size, sampled)
    assert_on_device(run, device)
    assert_same_run(run, ref)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("solver", ["exact", "sgd"])
def test_asynchronous_algorithm_on_the_gpu(solver, kind):
    device, like = gpu(kind)
    alg = async_feddr(eta=1.0, alpha=1.0, local_solver=solver)
    p = contract_problem(alg)
    clock = ComputeTimes(mean=[1.0, 2.0, 3.0, 1.0, 2.0, 3.0, 1.5], distribution="exponential")
    ref = simulate_async(alg, p, 6, compute_times=clock, batch_size=3, seed=3, metrics=METRICS)
    run = simulate_async(alg, on_device(p, like), 6, compute_times=clock, batch_size=3,
                         seed=3, metrics=METRICS)
    assert_on_device(run, device)
    assert_same_run(run, ref)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alg", DECENTRALIZED, ids=lambda a: a.name)
def test_decentralized_algorithm_on_the_gpu(alg, kind):
    device, like = gpu(kind)
    p = contract_problem(alg)
    ref = simulate_decentralized(alg, p, ring(p.n_clients), 3, batch_size=3, seed=1,
                                 metrics=METRICS)
    run = simulate_decentralized(alg, on_device(p, like), ring(p.n_clients), 3,
                                 batch_size=3, seed=1, metrics=METRICS)
    assert device_of(run.x) == device
    for field in leaves(run.client_states):
        assert device_of(field) == device
    assert_same_run(run, ref)


def sync_cases_algorithms():
    return [case.values[0] for case in sync_cases() if case.id.endswith("-full")] + WRAPPED


@pytest.mark.torch
@pytest.mark.parametrize("alg", [a for a in sync_cases_algorithms()
                                 if a.name in NETWORK_TRAINERS
                                 and a.hyperparameters.get("local_solver") != "exact"],
                         ids=lambda a: a.name)
def test_a_network_trains_on_the_gpu_as_on_the_cpu(alg):
    """An MLP in float64: the GPU's iterates are the CPU's to 1e-10 (cuBLAS and the CPU's
    BLAS sum in different orders, so not to the last bit)."""
    device, like = gpu("cuda")
    host = _network_problem()
    host = Problem(host.loss, host.regularizer,
                   host.data.to(torch.zeros(0, dtype=torch.float64)), n_classes=3)
    there = Problem(host.loss, host.regularizer, host.data.to(like), n_classes=3)
    x0 = host.initial_model()
    cpr = 4 if supports_sampling(alg, host) else None
    want = simulate(alg, host, 4, x0=x0, batch_size=3, seed=2, metrics=METRICS,
                    clients_per_round=cpr)
    got = simulate(alg, there, 4, x0=x0.to(device), batch_size=3, seed=2, metrics=METRICS,
                   clients_per_round=cpr)
    assert got.x.device == device
    np.testing.assert_allclose(to_numpy(got.x), to_numpy(want.x), rtol=0, atol=1e-10)


@pytest.mark.parametrize("backend", ["cuda-float64", "jax"])
def test_the_default_run_on_the_gpu_writes_numpys_rows(backend, tmp_path):
    """``fedcomp run`` (the default experiment, a few rounds) on the GPU: the rows of the
    NumPy backend, and ``config.json`` names the backend that ran."""
    from fedcomp.cli import main

    if backend == "jax":
        gpu("jax-gpu")
    else:
        gpu("cuda")
    runs = {}
    for name in ("numpy", backend):
        out = tmp_path / name
        assert main(["run", "--out", str(out), "--jobs", "1", "--set", "rounds=6",
                     "--set", f"backend={name}"]) == 0
        runs[name] = out
    recorded = json.loads((runs[backend] / "config.json").read_text())
    assert backend in json.dumps(recorded)
    def rows(out):
        with open(out / "results.csv", newline="") as f:
            return list(csv.DictReader(f))

    want, got = rows(runs["numpy"]), rows(runs[backend])
    assert len(got) == len(want) > 0
    for row, ref in zip(got, want, strict=True):
        assert (row["algorithm"], row["round"]) == (ref["algorithm"], ref["round"])
        assert float(row["objective"]) == pytest.approx(float(ref["objective"]), rel=1e-10)
