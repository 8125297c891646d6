"""Device discipline: every algorithm runs on data that live on a second device.

A GPU refuses to mix its arrays with the host's (``Expected all tensors to be on the same
device``). CI has no GPU, so two CPU stand-ins refuse the same mixing here:

* array-api-strict's ``Device("device1")``: an operation between arrays of two devices
  raises, and NumPy cannot read an array on it except through :func:`fedcomp._array.to_numpy`
  (which moves it to the default device first, as a GPU array must be copied to the host);
* jax's second virtual CPU device (``XLA_FLAGS=--xla_force_host_platform_device_count=2``,
  set by the root ``conftest.py`` before jax is imported): committed arrays of two devices
  cannot meet in one computation;
* on a machine with a GPU, the GPU itself: torch ``cuda:0`` (kind ``cuda``) and jax's
  first GPU (``jax-gpu``), skipped elsewhere (CI); ``scripts/gpu_check.sh`` runs them;
* for torch, whose CPU has one device: torch's default device set to ``meta`` (tensors with
  no data), so that a tensor made without ``device=`` — on a GPU run, a host tensor — breaks
  the run (linear models and networks alike).

Every registered algorithm — synchronous (full gradients, and minibatches with client
sampling), asynchronous, decentralized; compression and privacy wrappers — runs a few rounds
with its data on that device, gives NumPy's iterates to 1e-12 and leaves the model and every
state field on it. Evaluation rows (objective, nnz) are read through the one host helper.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from fedcomp import ComputeTimes, Problem, simulate, simulate_async
from fedcomp._array import device_of, to_numpy
from fedcomp.algorithms import async_feddr, compressed, ditto, fedavg, fedmid, za1
from fedcomp.compressors import RandK, TopK
from fedcomp.privacy import private
from fedcomp.runtime import simulate_decentralized
from fedcomp.topology import ring
from tests.algorithms.test_decentralized import DECENTRALIZED
from tests.core.test_contract import SYNCHRONOUS, contract_problem, supports_sampling

xps = pytest.importorskip("array_api_strict")

STRICT_DEVICE = xps.Device("device1")
STRICT_LIKE = xps.zeros(0, dtype=xps.float64, device=STRICT_DEVICE)
#: The second devices: the two CPU stand-ins, and a GPU where there is one.
KINDS = ["array-api-strict", "jax", "cuda", "jax-gpu"]
METRICS = ["objective", "nnz"]


def on_device(problem: Problem, like) -> Problem:
    return Problem(problem.loss, problem.regularizer, problem.data.to(like),
                   weighting=problem.weighting)


def leaves(tree):
    """Every array of a NamedTuple of arrays (nested ones too: wrappers nest states)."""
    for field in tree:
        if isinstance(field, tuple):
            yield from leaves(field)
        elif hasattr(field, "shape"):
            yield field


def assert_on_device(run, device) -> None:
    """The model and every server and client state field live on ``device``."""
    assert device_of(run.x) == device, f"the model is on {device_of(run.x)}"
    for name, tree in (("server", run.server_state), ("client", run.client_states)):
        for field in leaves(tree):
            assert device_of(field) == device, f"a {name} state field is on {device_of(field)}"


def assert_same_run(run, ref) -> None:
    np.testing.assert_allclose(to_numpy(run.x), ref.x, rtol=0, atol=1e-12)
    for a, b in zip(leaves(run.client_states), leaves(ref.client_states), strict=True):
        np.testing.assert_allclose(to_numpy(a), b, rtol=0, atol=1e-12)
    assert [row["round"] for row in run.history] == [row["round"] for row in ref.history]
    for row, ref_row in zip(run.history, ref.history, strict=True):
        assert row["nnz"] == ref_row["nnz"]
        assert abs(row["objective"] - ref_row["objective"]) <= 1e-12 * max(
            1.0, abs(ref_row["objective"]))
        assert row["grad_evals"] == ref_row["grad_evals"]


#: The wrappers: compressed uploads (with and without EF21), client-level DP (server noise
#: and local noise), Ditto's personal models, each around an algorithm with client state.
WRAPPED = [compressed(fedavg(client_lr=0.3, local_steps=2), TopK(k=2), ef21=True),
           compressed(za1(client_lr=0.3, local_steps=2), RandK(k=3)),
           private(za1(client_lr=0.3, local_steps=2), clip=0.5, noise_multiplier=0.7),
           private(fedmid(client_lr=0.3, local_steps=2), clip=0.5, noise_multiplier=0.7,
                   local=True),
           ditto(za1(client_lr=0.3, local_steps=2), lam=0.5)]  # personal steps per client


def sync_cases():
    """Every synchronous algorithm with full gradients and with minibatches and client
    sampling; each wrapper with minibatches and client sampling."""
    cases = []
    for alg in SYNCHRONOUS:
        cases.append(pytest.param(alg, None, False, id=f"{alg.name}-full"))
        cases.append(pytest.param(alg, 3, True, id=f"{alg.name}-sampled-minibatch"))
    cases += [pytest.param(alg, 3, True, id=f"wrapped-{alg.name}") for alg in WRAPPED]
    return cases


def run_sync(alg, problem, batch_size, sampled):
    cpr = 4 if sampled and supports_sampling(alg, problem) else None
    return simulate(alg, problem, 4, batch_size=batch_size, clients_per_round=cpr, seed=2,
                    metrics=METRICS)


# --- array-api-strict's second device (and jax's, for the synchronous engines) -----------------

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("alg, batch_size, sampled", sync_cases())
def test_synchronous_algorithm_on_a_second_device(alg, batch_size, sampled, kind):
    device, like = second_device(kind)
    p = contract_problem(alg)
    ref = run_sync(alg, p, batch_size, sampled)
    run = run_sync(alg, on_device(p, like), batch_size, sampled)
    assert_on_device(run, device)
    assert_same_run(run, ref)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("solver", ["exact", "sgd"])
def test_asynchronous_algorithm_on_a_second_device(solver, kind):
    device, like = second_device(kind)
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
def test_decentralized_algorithm_on_a_second_device(alg, kind):
    device, like = second_device(kind)
    p = contract_problem(alg)
    ref = simulate_decentralized(alg, p, ring(p.n_clients), 3, batch_size=3, seed=1,
                                 metrics=METRICS)
    run = simulate_decentralized(alg, on_device(p, like), ring(p.n_clients), 3,
                                 batch_size=3, seed=1, metrics=METRICS)
    assert device_of(run.x) == device
    for field in leaves(run.client_states):
        assert device_of(field) == device
    assert_same_run(run, ref)


def test_every_metric_on_a_second_device():
    """Every registered metric evaluates a model on device1 as on the host (rows equal to
    1e-12; NaN where a metric does not apply to this problem, on both)."""
    from fedcomp import solve_reference
    from fedcomp.metrics import METRICS as ALL_METRICS

    p = contract_problem(fedavg())
    reference = solve_reference(p)
    names = list(ALL_METRICS)
    alg = za1(client_lr=0.5, local_steps=3)
    want = simulate(alg, p, 2, metrics=names, reference=reference).history
    got = simulate(alg, on_device(p, STRICT_LIKE), 2, metrics=names,
                   reference=reference).history
    for row, ref_row in zip(got, want, strict=True):
        for key, value in ref_row.items():
            if key == "wall_s":
                continue
            if isinstance(value, float) and math.isnan(value):
                assert math.isnan(row[key]), key
            else:
                assert row[key] == pytest.approx(value, rel=1e-12, abs=1e-12), key


def test_the_stand_in_refuses_what_a_gpu_refuses():
    """The check is real: mixing the second device with the default one raises, and NumPy
    cannot read an array there except through ``to_numpy``."""
    a = xps.ones(3, dtype=xps.float64, device=STRICT_DEVICE)
    with pytest.raises(ValueError, match="different devices"):
        a + xps.ones(3, dtype=xps.float64)
    with pytest.raises(RuntimeError, match="device1"):
        np.asarray(a)
    np.testing.assert_array_equal(to_numpy(a), np.ones(3))


# --- jax's second virtual CPU device ------------------------------------------------------------

def second_device(kind: str):
    """``(device, empty float64 array there)`` of a stand-in for a GPU, or of the GPU."""
    if kind == "array-api-strict":
        return STRICT_DEVICE, STRICT_LIKE
    if kind in ("cuda", "jax-gpu"):
        return gpu(kind)
    _, device, like = jax_second_device()
    return device, like


def gpu(kind: str):
    """``(device, empty float64 array there)`` on the GPU of ``kind`` (torch's ``cuda:0``,
    or jax's first GPU); skip where there is none."""
    if kind == "cuda":
        torch = pytest.importorskip("torch")
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


def jax_second_device():
    jax = pytest.importorskip("jax")
    from fedcomp.runtime import jax_like

    cpus = jax.devices("cpu")
    assert len(cpus) >= 2, (
        "jax sees one CPU device: XLA_FLAGS must hold --xla_force_host_platform_device_count=2 "
        f"before jax is imported (the root conftest.py sets it; XLA_FLAGS="
        f"{os.environ.get('XLA_FLAGS')!r})")
    return jax, cpus[1], jax.device_put(jax_like(), cpus[1])


def test_jax_second_device_refuses_mixing():
    jax, device, like = jax_second_device()
    here = jax.device_put(jax.numpy.ones(3), jax.devices("cpu")[0])
    there = jax.device_put(jax.numpy.ones(3), device)
    with pytest.raises(ValueError, match="(?i)device"):
        jax.jit(lambda a, b: a + b)(here, there)


# --- torch: nothing made on torch's default device ---------------------------------------------

def _network_problem():
    import torch

    from fedcomp import ClientData
    from fedcomp.losses import TorchModel
    from fedcomp.regularizers import L1

    rng = np.random.default_rng(0)
    data = ClientData.from_lists([rng.normal(size=(12, 8)) for _ in range(4)],
                                 [rng.integers(0, 3, size=12).astype(float) for _ in range(4)])
    loss = TorchModel("mlp", input_shape=(8,), n_classes=3, options={"hidden": (6,)})
    return Problem(loss, L1(1e-3), data.to(torch.zeros(0)), n_classes=3)


@pytest.mark.torch
@pytest.mark.parametrize("alg", SYNCHRONOUS + WRAPPED, ids=lambda a: a.name)
def test_torch_makes_nothing_on_the_default_device(alg):
    """A tensor made without ``device=`` lands on torch's default device, which on a GPU
    run is the host: the run then fails at its first operation. With the default device
    set to ``meta`` (tensors without data) such a tensor breaks the run here too; every
    algorithm on torch data (a linear model, and a network where the algorithm trains
    one) must give the same iterates as without, on the data's device."""
    torch = pytest.importorskip("torch")
    assert torch.zeros(1, device="meta").is_meta  # the stand-in: no data behind it
    problems = [on_device(contract_problem(alg), torch.zeros(0, dtype=torch.float64))]
    if alg.name in ("fedavg", "fedmid", "fedda", "za1", "scaffold", "fedcanon", "feddr",
                    "fedprox", "fedpd") and alg.hyperparameters.get("local_solver") != "exact":
        problems.append(_network_problem())
    for problem in problems:
        x0 = problem.initial_model()
        want = run_sync(alg, problem, 3, True)
        try:
            torch.set_default_device("meta")
            assert torch.zeros(1).is_meta
            got = simulate(alg, problem, 4, x0=x0, batch_size=3, seed=2, metrics=METRICS,
                           clients_per_round=4 if supports_sampling(alg, problem) else None)
        finally:
            torch.set_default_device(None)
        assert got.x.device == want.x.device
        np.testing.assert_allclose(to_numpy(got.x), to_numpy(want.x), rtol=0, atol=1e-12)
