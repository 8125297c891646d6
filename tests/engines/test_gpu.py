"""On a real GPU: networks and the CLI's runs (skipped where torch sees no GPU, as on CI).

``tests/engines/test_devices.py`` runs every algorithm on CPU stand-ins that refuse what a GPU
refuses, and on the GPU itself where there is one (kinds ``cuda`` and ``jax-gpu``). This
file adds what only the GPU kinds need; ``scripts/gpu_check.sh`` runs both on a GPU machine.

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

from fedcomp import Problem, simulate
from fedcomp._array import to_numpy
from tests.core.test_contract import supports_sampling
from tests.engines.test_devices import METRICS, WRAPPED, _network_problem, gpu, sync_cases

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.gpu

#: The algorithms that train a network (``test_devices.py`` runs the same list on ``meta``).
NETWORK_TRAINERS = ("fedavg", "fedmid", "fedda", "za1", "scaffold", "fedcanon", "feddr",
                    "fedprox", "fedpd")


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
