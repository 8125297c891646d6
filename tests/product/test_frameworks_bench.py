"""``benchmarks/frameworks.py``: fedcomp, pfl and Flower compute the same FedAvg round.

The benchmark times one round of the same network in three frameworks; its ratios mean
something only if the three do the same arithmetic. One float64 round of a small cnn in
each, K in-order steps and a full batch, must give fedcomp's update. No timing assertions:
the measurements are in docs/BENCHMARKS.md.
"""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_frameworks",
                                                  ROOT / "benchmarks" / "frameworks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


bench = _bench()
#: 3 clients of 2 × 4 images of CIFAR-10's shape, fedcomp's cnn, one round.
SMALL = bench.Setting(network="cnn", clients=3, batch=4, steps=2, rounds=1, device="cpu")


def test_fedcomp_and_pfl_give_the_same_round():
    """pfl casts each update to float32, so its update is fedcomp's to float32 rounding."""
    pytest.importorskip("pfl")
    diffs = bench.agreement(SMALL, ("fedcomp", "pfl"))
    assert set(diffs) == {"in order, K x B", "full batch, K = 1"}
    for case in diffs.values():
        assert case["pfl 0.6"] < 1e-6


def test_in_order_minibatches_are_the_client_rows():
    """fedcomp's sampler hands client i its images k·B … (k+1)·B − 1 at draw k, as pfl's
    ``Dataset.iter`` and the Flower client do."""
    import torch

    images, labels = bench.federation(SMALL)
    sampler = bench.InOrder(torch.as_tensor(images), torch.as_tensor(labels))
    batch = sampler.batch(0, 5, np.array([2, 0]), 1, 4, None)
    assert np.array_equal(batch.features.numpy(), images[[2, 0], 4:8])
    assert np.array_equal(batch.targets.numpy(), labels[[2, 0], 4:8])
    assert np.allclose(batch.weights.numpy(), 0.25)
    # a client's arrays are a function of (seed, client) alone: Flower's actors make them
    again = bench.client_arrays(SMALL.seed, 2, SMALL.samples)
    assert np.array_equal(again[0], images[2]) and np.array_equal(again[1], labels[2])


def test_table_ratios_and_skipped_frameworks(monkeypatch):
    timings = [bench.Timing("fedcomp (torch)", [9.0, 2.0, 3.0], 1.0, np.ones(3)),
               bench.Timing("pfl 0.6", [9.0, 5.0, 4.0], 2.0, np.array([1.0, 1.0, 1.5]))]
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    skipped = {"flower": bench.missing("flower")}
    text = bench.table(timings, skipped, SMALL, flops=1e9, device_name="cpu",
                       start=np.zeros(3))
    assert "| fedcomp (torch) | 2000.0 | 1.00x |" in text
    assert "| pfl 0.6 | 4000.0 | 2.00x |" in text and "| 5.0e-01 |" in text
    assert "| flower | not installed (pip install 'flwr[simulation]==1.42.0') |" in text
    assert bench.peak("NVIDIA H100 80GB HBM3") == (66.9, 494.7)
    assert bench.peak("NVIDIA H100 PCIe")[1] == 378.0 and bench.peak("a CPU") is None


@pytest.mark.parametrize("argv, message", [
    (["--frameworks", "fedcomp,tff"], "unknown ['tff']"),
    (["--rounds", "1"], "--rounds must be at least 2"),
    (["--batch", "0"], "--batch must be at least 1"),
])
def test_cli_refuses_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit):
        bench.parse(argv)
    assert message in capsys.readouterr().err


def test_cli_prints_the_table(capsys):
    bench.main(["--device", "cpu", "--network", "cnn", "--clients", "2", "--batch", "2",
                "--steps", "1", "--rounds", "2", "--frameworks", "fedcomp", "--no-jax",
                "--client-loop"])
    out = capsys.readouterr().out
    assert "| framework | ms / round (best) | ratio to fedcomp |" in out
    assert "| fedcomp (torch) |" in out and "GFLOP per training image" in out
    assert "| centralized floor (K steps at batch C·B) |" in out
    assert "# fedcomp (torch)'s round / the centralized floor: " in out
    # the block client by client: the batched block's model, to float32's rounding (1e-6
    # measured; a ReLU that rounding flips would move it more, never to a wrong model's 1)
    row = next(line for line in out.splitlines()
               if line.startswith("| fedcomp (torch, client loop) |"))
    assert float(row.rstrip(" |").rsplit("|", 1)[1]) < 1e-3  # its update against fedcomp's
    assert "# fedcomp (torch, client loop)'s round / the centralized floor: " in out


def test_the_floor_is_a_rounds_arithmetic_without_the_federation():
    """The centralized floor's K steps at batch C·B are, for one client, exactly a FedAvg
    round with server step 1: the same model as fedcomp's (float64, in order)."""
    setting = bench.Setting(network="cnn", clients=1, batch=4, steps=3, rounds=1,
                            device="cpu", dtype="float64")
    images, labels = bench.federation(setting)
    ours = bench.run_fedcomp(setting, images, labels)
    floor = bench.run_floor(setting, images, labels)
    start = bench.flat(bench.initial_module(setting))
    assert np.abs(ours.model - start).max() > 1e-4  # it trained
    assert bench.update_diff(floor.model, ours.model, start) < 1e-12


@pytest.mark.slow
@pytest.mark.flower
@pytest.mark.xdist_group("serial")
def test_fedcomp_and_flower_give_the_same_round(tmp_path, monkeypatch):
    """Flower's simulation on Ray: its float64 round is fedcomp's to 1e-12, and it leaves
    no Ray instance running."""
    pytest.importorskip("flwr")
    ray = pytest.importorskip("ray")
    monkeypatch.setenv("FLWR_HOME", str(tmp_path / "flwr-home"))
    diffs = bench.agreement(SMALL, ("fedcomp", "flower"))
    for case in diffs.values():
        (name,) = case
        assert name.startswith("Flower") and case[name] < 1e-12
    assert not ray.is_initialized()
