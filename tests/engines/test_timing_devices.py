"""Timings on any device: the device a timing names, a clock that waits for it, and the prox
implementations ``prox_cost``'s diagnoses time (each must compute the same prox)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from fedcomp.config import ConfigError, load  # noqa: E402
from fedcomp.experiments.claims import prox_cost  # noqa: E402
from fedcomp.experiments.claims._timing import best_time, check_device  # noqa: E402
from fedcomp.experiments.claims.fedcanon_vs_composite import (  # noqa: E402
    device_backend,
    on_device,
)

NO_GPU = not torch.cuda.is_available()


def test_the_timer_waits_for_the_device_before_every_clock_read():
    events: list[str] = []

    def clock() -> float:
        events.append("clock")
        return float(len(events))

    def call() -> str:
        events.append("call")
        return "result"

    def wait(result: object) -> None:
        events.append(f"wait {result}")

    best_time(call, 2, wait, clock)
    # warm-up, then per repeat: drain the queue, read, call, wait for its work, read
    once = ["wait None", "clock", "call", "wait result", "clock"]
    assert events == ["call", "wait result", *once, *once]


def test_the_timer_reports_the_fastest_repeat():
    ticks = iter([0.0, 5.0, 10.0, 12.0, 20.0, 23.0])
    assert best_time(lambda: None, 3, lambda _: None, lambda: next(ticks)) == 2.0


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
@pytest.mark.parametrize("device", ["cuda", "cuda:1"])
def test_an_unavailable_gpu_is_refused_in_one_line(device):
    with pytest.raises(ConfigError) as info:
        check_device(device)
    message = str(info.value)
    assert "\n" not in message and f"device = {device!r} is not available" in message
    assert "use device = 'cpu'" in message
    with pytest.raises(ConfigError, match="is not available"):
        prox_cost.check_config({**load("prox_cost"), "device": device})
    with pytest.raises(ConfigError, match="is not available"):
        on_device(load("fedcanon_vs_composite"), device)


def test_a_device_torch_does_not_know_is_refused():
    with pytest.raises(ConfigError, match="'tpu' is not a torch device; use 'cpu'"):
        check_device("tpu")
    assert check_device("cpu") == torch.device("cpu")


def test_the_time_table_moves_a_config_to_the_gpu_in_its_precision():
    linear = load("fedcanon_vs_composite")
    assert on_device(linear, "cpu") is linear
    assert device_backend(linear, "cuda") == "cuda-float64"  # NumPy float64 by default
    network = load("fedcanon_nn")
    assert device_backend(network, "cuda:1") == "cuda:1"  # torch float32 for networks
    assert device_backend({**network, "backend": "torch-float64"}, "cuda") == "cuda-float64"


def test_the_time_table_speaks_the_backend_registry_and_never_labels_mps_cuda():
    # Apple's GPU runs torch float32 only: a network goes to the mps backend, a float64
    # linear model is refused in one line naming the device (it was sent to cuda before)
    assert device_backend(load("fedcanon_nn"), "mps") == "mps"
    with pytest.raises(ConfigError, match=r"device = 'mps': no torch backend runs float64 "
                                          r"on device 'mps' \(registered: .*mps \(float32\)"):
        device_backend(load("fedcanon_vs_composite"), "mps")
    with pytest.raises(ConfigError, match=r"device = 'meta': timings run on 'cpu', "
                                          r"'cuda\[:N\]' or 'mps'"):
        check_device("meta")  # a torch device no backend is registered on


def test_the_cli_refuses_an_unavailable_device_in_one_line(capsys):
    if not NO_GPU:
        pytest.skip("this machine has a GPU")
    from fedcomp.cli import main

    assert main(["run", "prox_cost", "--set", "device=cuda"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "device = 'cuda' is not available" in err


def _penalties():
    return [{"name": "l1", "alpha": 0.5}, {"name": "mcp", "alpha": 0.5, "gamma": 3.0},
            {"name": "scad", "alpha": 0.5, "a": 3.7}]


@pytest.mark.parametrize("implementation", sorted(set(prox_cost.IMPLEMENTATIONS) -
                                                  {"vectorised"}))
@pytest.mark.parametrize("penalty", _penalties(), ids=lambda p: p["name"])
def test_every_prox_implementation_computes_the_same_prox(implementation, penalty):
    # every piece of each penalty: |v| from 0 to 5 alpha, both signs, across the tensors
    x = torch.linspace(-2.5, 2.5, 401, dtype=torch.float32)[None]
    sizes = [100, 1, 250, 50]
    vectorised = prox_cost.prox_call("vectorised", penalty, x, sizes)()
    other = prox_cost.prox_call(implementation, penalty, x, sizes)()
    assert other.dtype == x.dtype and other.device == x.device and other.shape == x.shape
    assert other is not x and torch.equal(x, torch.linspace(-2.5, 2.5, 401)[None])
    np.testing.assert_allclose(other.numpy(), vectorised.numpy(), rtol=2e-6, atol=1e-7)
    assert int((vectorised == 0).sum()) > 0  # the thresholded piece
    if penalty["name"] != "l1":  # and beyond the concave part, the identity
        assert int((vectorised == x).sum()) > 0


def test_a_reading_times_its_implementation_beside_the_vectorised_one(tmp_path):
    from fedcomp.experiments import run_experiment

    config = {"name": "prox_cost", "kind": "timing", "batch_size": 2, "repeats": 1,
              "implementation": "per_tensor", "device": "cpu",
              "networks": [{"name": "resnet18", "input_shape": [1, 8, 8],
                            "options": {"width": 2}}],
              "penalties": [{"name": "l1", "alpha": 1e-4}, {"name": "scad", "alpha": 1e-4}]}
    rows = run_experiment(config, tmp_path, stream=open(tmp_path / "out.txt", "w"))
    assert [(r["network"], r["implementation"], r["device"]) for r in rows] == [
        ("resnet18", "vectorised", "cpu"), ("resnet18", "per_tensor", "cpu")]
    assert rows[0]["fwd_bwd_ms"] == rows[1]["fwd_bwd_ms"]  # one pass timed for both
    verdict, rule = prox_cost.verdict(rows, config)
    assert "per_tensor on cpu" in verdict and "computed as 'per_tensor'" in rule
    # the judged row is the reading's, not the vectorised one measured beside it
    fast = [{**rows[0], "l1_ratio": 0.01, "mcp_ratio": 0.01, "scad_ratio": 0.01},
            {**rows[1], "l1_ratio": 1.0, "mcp_ratio": 2.0, "scad_ratio": 3.0}]
    assert prox_cost.verdict(fast, config)[0].startswith("reproduced (per_tensor")
    assert prox_cost.verdict(fast)[0].startswith("not reproduced (vectorised")
    summary = (tmp_path / "summary.md").read_text()
    assert "| resnet18 | per_tensor | cpu |" in summary
    assert '"device": "cpu (' in (tmp_path / "config.json").read_text()


def test_scalar_loop_needs_a_scalar_formula():
    config = {**load("prox_cost"), "implementation": "scalar_loop",
              "penalties": [{"name": "group_lasso", "alpha": 1.0}]}
    with pytest.raises(ConfigError, match="scalar formula for \\['l1', 'mcp', 'scad'\\]"):
        prox_cost.check_config(config)
    with pytest.raises(ConfigError, match="implementation must be one of"):
        prox_cost.check_config({**load("prox_cost"), "implementation": "fused"})


def test_the_runtime_waits_for_the_device_once_a_round(monkeypatch):
    from fedcomp import toy
    from fedcomp.algorithms import make_algorithm
    from fedcomp.runtime import _clients, _simulate, simulate

    waited = []
    for module in (_simulate, _clients):  # a round on its own, and the fused rounds
        monkeypatch.setattr(module, "wait_for", lambda like, result=None: waited.append(result))
    algorithm = make_algorithm("fedmid", client_lr=0.1, local_steps=2)
    simulate(algorithm, toy.tiny_problem(), 4)
    assert len(waited) == 4 and all(w is not None for w in waited)
    waited.clear()
    simulate(algorithm, toy.tiny_problem(), 4, batch_size=2)  # minibatches: round by round
    assert len(waited) == 4 and all(w is not None for w in waited)


def test_wait_for_blocks_on_a_jax_array_of_a_second_device():
    jax = pytest.importorskip("jax")
    from fedcomp._array import wait_for

    devices = jax.devices("cpu")  # two: the conftest asks XLA for a second CPU device
    x = jax.device_put(jax.numpy.ones(3), devices[1])
    wait_for(x, {"state": x * 2})
    wait_for(torch.zeros(2))
