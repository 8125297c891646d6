"""On a real GPU: networks and the CLI's runs (skipped where torch sees no GPU, as on CI).

``tests/engines/test_devices.py`` runs every algorithm on CPU stand-ins that refuse what a GPU
refuses, and on the GPU itself where there is one (kinds ``cuda`` and ``jax-gpu``). This
file adds what only the GPU kinds need; ``scripts/gpu_check.sh`` runs both on a GPU machine.

* a network (an MLP in float64) trained by each algorithm that trains one: the same
  iterates as on the CPU to 1e-10;
* ``fedcomp run`` of the default experiment with ``backend = "cuda-float64"`` and
  ``"jax"``: the rows NumPy's backend writes (objective to 1e-10), and ``config.json``
  names the GPU backend that ran;
* mixed precision (``autocast="bf16"`` and ``"fp16"``, a GPU option) on ``cuda``: float32
  master weights on the GPU, gradients within bfloat16's bound of float32's, a run that
  trains.
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


@pytest.mark.torch
@pytest.mark.parametrize("mode", ["bf16", "fp16"])
def test_autocast_on_the_gpu_keeps_float32_master_weights_close_and_trains(mode):
    """Mixed precision where it is meant to run: a smooth network's gradient under
    ``autocast`` on ``cuda`` is the float32 one's to bfloat16's bound (float16 keeps more
    mantissa, and its loss is scaled), in float32 and on the GPU; a short run there keeps
    its master weights in float32 and lowers the objective."""
    import fedcomp
    from fedcomp.data import synthetic_fedprox
    from fedcomp.losses import TorchModel
    from fedcomp.regularizers import L1
    from tests.core.test_torch_autocast import BF16_RTOL, block, relative, smooth_mlp

    device, _ = gpu("cuda")
    spec = dict(model=smooth_mlp, input_shape=(8,), n_classes=3)
    x, batch = block(spec, np.float32)
    on_gpu = [torch.from_numpy(np.asarray(a)).to(device) for a in (x, *batch)]
    batch_gpu = type(batch)(*on_gpu[1:])
    reference = TorchModel(**spec).grad(on_gpu[0], batch_gpu)
    mixed = TorchModel(**spec, autocast=mode).grad(on_gpu[0], batch_gpu)
    assert mixed.dtype == torch.float32 and mixed.device == device
    assert 0 < relative(mixed.cpu().numpy(), reference.cpu().numpy()) < BF16_RTOL

    data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=4, n_features=8, n_classes=3,
                             seed=0).to(torch.zeros(0, dtype=torch.float32, device=device))
    loss = TorchModel("mlp", input_shape=(8,), n_classes=3, options={"hidden": [16]},
                      autocast=mode)
    result = fedcomp.simulate(fedcomp.fedmid(client_lr=0.1, local_steps=3),
                              fedcomp.Problem(loss, L1(1e-3), data), 6, batch_size=8,
                              eval_every=6, seed=0, metrics=["objective"])
    first, last = result.history[0]["objective"], result.history[-1]["objective"]
    assert np.isfinite(last) and last < first - 0.05
    assert result.x.dtype == torch.float32 and result.x.device == device
