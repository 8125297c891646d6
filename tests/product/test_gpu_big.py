"""``benchmarks/gpu.py``'s path for the large sizes (issue 46): data made on jax's device by
a counter-based hash, every engine on those arrays, and the agreement check on a slice of
the clients. Run here on the CPU, at a small size."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 3


@pytest.fixture(scope="module")
def gpu():
    """``benchmarks/gpu.py`` as a module (its imports: jax and torch)."""
    pytest.importorskip("jax")
    pytest.importorskip("torch")
    saved = os.environ.get("FEDCOMP_JAX_CACHE")
    spec = importlib.util.spec_from_file_location("gpu_bench", ROOT / "benchmarks" / "gpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # jax_engine.py turns the compilation cache off for its own compile timings: not for
    # the other tests of this process
    if saved is None:
        os.environ.pop("FEDCOMP_JAX_CACHE", None)
    else:
        os.environ["FEDCOMP_JAX_CACHE"] = saved
    return module


def test_device_data_give_the_host_paths_round(gpu):
    """The data made on the device run through every engine (jax's arrays as they are,
    torch's through DLPack, the hand-written rounds on them) to the model NumPy's
    ``simulate`` gives on a host copy, the ordinary path, after 3 rounds; the data are
    finite, of both labels, and the same whatever the chunks they are made in."""
    features, targets = gpu.device_data(120, 20, 10, "float64")
    host = gpu.host_problem(features, targets)
    assert np.isfinite(host.data.features).all()
    assert set(np.unique(host.data.targets).tolist()) == {-1.0, 1.0}
    assert 0.8 < host.data.features.std() < 1.2
    x_ref = gpu.final_model(host, ROUNDS)
    problems = gpu.engine_problems(features, targets, "cpu", list(gpu.ENGINES.values()))
    for name, run in gpu.model_runs(problems, "cpu").items():
        np.testing.assert_allclose(np.asarray(run(ROUNDS)), x_ref, rtol=0, atol=1e-12,
                                   err_msg=name)
    chunk = gpu.CHUNK_FLOATS
    try:  # 8 clients a chunk: 15 steps of the loop
        gpu.CHUNK_FLOATS = 8 * 20 * 10
        assert gpu._chunk_clients(120, 200) == 8
        again = gpu.device_data(120, 20, 10, "float64")
    finally:
        gpu.CHUNK_FLOATS = chunk
    assert np.array_equal(np.asarray(again[0]), np.asarray(features))
    assert np.array_equal(np.asarray(again[1]), np.asarray(targets))


def test_large_size_rows_check_a_slice_and_skip_what_does_not_fit(gpu, capsys):
    """``--data device``: a row per engine, each checked against NumPy on the first
    ``--check-clients`` clients; an engine whose memory does not fit is a row saying it
    was skipped, not a crash."""
    gpu.main(["--device", "cpu", "--sizes", "60x8x4", "--data", "device", "--check-clients",
              "20", "--block", "1", "--blocks", "1", "--repeats", "1", "--gib", "0.01",
              "--engines", "numpy,jax,jax-hand", "--host-floats", "1000"])
    out = capsys.readouterr().out
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in out.splitlines()
            if line.startswith("| 60 x")]
    assert [r[1] for r in rows] == ["numpy", "jax engine", "jax.jit(vmap) by hand"]
    assert rows[0][2].startswith("skipped: its host copy")  # 1920 floats > --host-floats
    for row in rows[1:]:
        assert float(row[4]) < 1e-12 and row[5] == "first 20 clients", row
    assert "data made on jax's cpu" in out


def test_asking_for_a_gpu_where_torch_sees_none_is_one_parser_error(gpu, capsys):
    """``--device cuda`` on a machine without a GPU (a misplaced gpu_check step): one line
    naming the device and the fix, not torch's traceback from deep inside a size."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("torch sees a GPU here")
    with pytest.raises(SystemExit):
        gpu.main(["--device", "cuda", "--sizes", "10x4x2"])
    assert "--device cuda: torch sees no GPU here; pass --device cpu" in capsys.readouterr().err
