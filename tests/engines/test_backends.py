"""Backends are registry entries: names, device indices, ``auto``'s choice and its record.

What a backend means (library, dtype, device, whether it compiles, how rounds are cut into
blocks) is read from its entry in :data:`fedcomp.runtime._backends.BACKENDS`; these tests
check the entries against the arrays they make, the parsing of ``cuda:N``, ``auto``'s choice
with and without a GPU, the refusals before round 1, and that ``config.json`` and the first
log line say what ran where.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from fedcomp._array import device_of
from fedcomp._registry import UnknownNameError
from fedcomp.cli import main
from fedcomp.config import ConfigError
from fedcomp.experiments import build_problem
from fedcomp.experiments._setting import resolve
from fedcomp.runtime._backends import (
    BACKENDS,
    backend_of_data,
    resolve_backend,
    split_name,
)


def _library_of(array) -> str:
    module = type(array).__module__
    return "numpy" if isinstance(array, np.ndarray) else module.split(".")[0].replace(
        "jaxlib", "jax")


@pytest.mark.parametrize("name", ["numpy", pytest.param("torch", marks=pytest.mark.torch),
                                  pytest.param("torch-float64", marks=pytest.mark.torch),
                                  "jax", "jax-float32"])
def test_each_entry_makes_arrays_of_its_library_and_dtype(name):
    entry = BACKENDS.entry(name)
    if entry.extra:
        pytest.importorskip(entry.extra)
    chosen = resolve_backend(name)
    like = chosen.like()
    assert _library_of(like) == entry.library
    assert str(like.dtype).endswith(entry.dtype)
    assert backend_of_data(like) is entry  # and the data tell the same entry back
    assert entry.compiles == (entry.library == "jax")


def test_device_indices_parse_and_only_gpu_backends_take_one():
    assert split_name("cuda:3") == ("cuda", 3)
    assert resolve_backend("cuda-float64:1").device == "cuda:1"
    assert resolve_backend("cuda").device == "cuda:0"
    with pytest.raises(ValueError, match=r"only \['cuda', 'cuda-float64'\] take a device index"):
        split_name("numpy:1")
    with pytest.raises(ValueError, match="take a device index"):
        split_name("cuda:one")
    with pytest.raises(UnknownNameError, match=r"unknown backend 'tpu'; valid: .*cuda"):
        split_name("tpu")


def test_auto_picks_by_model_and_gpu_and_says_why():
    linear = resolve_backend("auto", gpu_visible=lambda: True)
    assert linear.name == "numpy" and "linear model" in linear.reason
    gpu = resolve_backend("auto", network=True, gpu_visible=lambda: True)
    assert (gpu.name, gpu.device) == ("cuda", "cuda:0") and "visible GPU" in gpu.reason
    cpu = resolve_backend("auto", network=True, gpu_visible=lambda: False)
    assert (cpu.name, cpu.device) == ("torch", "cpu") and "no visible GPU" in cpu.reason
    assert BACKENDS.entry("cuda").block_policy == "all"
    assert BACKENDS.entry("numpy").block_policy == "measured"
    assert BACKENDS.entry("torch").block_policy == "rule"  # dispatch-bound: the cache rule


def _config(backend: str) -> dict:
    from fedcomp.config import load

    cfg = load("seed000")
    cfg.update(backend=backend, rounds=2, seeds=[0])
    cfg["data"] = {**cfg["data"], "n_clients": 3, "samples_per_client": 20}
    return cfg


def test_an_unknown_or_badly_indexed_backend_is_refused_by_the_configuration():
    with pytest.raises(ConfigError, match=r"backend: unknown backend 'gpu'; valid: "):
        resolve(_config("gpu"))
    with pytest.raises(ConfigError, match=r"backend: .*take a device index"):
        resolve(_config("jax:1"))


@pytest.mark.torch
def test_cuda_without_a_gpu_fails_before_round_one_naming_the_fix():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the refusal is for machines without one")
    with pytest.raises(ConfigError, match=r"torch sees no GPU .*use backend = 'torch'"):
        build_problem(resolve(_config("cuda")).settings[0], seed=0)


@pytest.mark.torch
def test_torch_float64_moves_the_data_there():
    torch = pytest.importorskip("torch")
    problem = build_problem(resolve(_config("torch-float64")).settings[0], seed=0)
    assert isinstance(problem.data.features, torch.Tensor)
    assert problem.data.features.dtype == torch.float64
    assert str(device_of(problem.data.features)) == "cpu"


def test_config_json_and_the_first_log_line_say_which_backend_ran(tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["run", "seed000", "--set", "rounds=2", "--set", "data.n_clients=3",
                 "--set", "data.samples_per_client=20", "--seeds", "0", "--out",
                 str(out)]) == 0
    err = capsys.readouterr().err
    backend_lines = [line for line in err.splitlines() if line.startswith("backend:")]
    assert backend_lines == ["backend: numpy (auto: a linear model, NumPy on the host)"]
    meta = json.loads((out / "config.json").read_text())
    assert meta["backend"] == {"numpy": "auto: a linear model, NumPy on the host"}
    setting = next(iter(meta["settings"].values()))
    assert setting["backend"] == {"name": "numpy", "device": "cpu",
                                  "reason": "auto: a linear model, NumPy on the host"}
