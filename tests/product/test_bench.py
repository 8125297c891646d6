"""The benchmark's functions at tiny sizes, and ``RunOptions(client_state="disk")``.

No timing assertions: performance claims live in ``docs/BENCHMARKS.md``, not in tests.
"""

import importlib.util
import io
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from fedcomp import RunOptions, simulate
from fedcomp.algorithms import make_algorithm
from fedcomp.config import ConfigError
from fedcomp.experiments import run_experiment, validate

ROOT = Path(__file__).resolve().parents[2]


def _bench():
    spec = importlib.util.spec_from_file_location("bench_run", ROOT / "benchmarks" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench = _bench()


@pytest.fixture(scope="module")
def tiny():
    return bench.build(bench.config(8, 10, rounds=3))


def test_engine_rows_tiny():
    rows = bench.engine_rows(6, 5, rounds=2, repeats=1, engines=["loop", "numpy", "torch"])
    engines = [r["engine"] for r in rows]
    assert engines[:2] == ["loop", "numpy"]
    assert all(r["size"] == "6x5" for r in rows)
    for r in rows:
        assert math.isfinite(r["ms"]) and r["ms"] > 0
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0
        assert r["max_diff"] < 1e-10  # every engine computes the loop's iterate
    table = bench.engine_table(rows)
    assert table.count("\n") == len(rows) + 1 and "| 6x5 | numpy |" in table


def test_scaling_rows_tiny():
    rows = bench.scaling_rows(1, 1, clients=(4, 8), features=(6,), fixed_d=6, fixed_clients=4)
    assert [(r["axis"], r["n_clients"], r["d"]) for r in rows] == [
        ("clients", 4, 6), ("clients", 8, 6), ("d", 4, 6)]
    assert all(r["ms"] > 0 and math.isfinite(r["us_per_client"]) for r in rows)


def test_write_section_replaces_between_markers(tmp_path):
    doc = tmp_path / "B.md"
    doc.write_text("# Bench\n\nkept\n")
    bench.write_section(doc, "first")
    bench.write_section(doc, "second")
    text = doc.read_text()
    assert text.startswith("# Bench\n\nkept\n") and "second" in text and "first" not in text
    assert text.count(bench.MARK_START) == 1


def test_parse_sizes():
    assert bench.parse_sizes("30x60, 100X1024") == [(30, 60), (100, 1024)]


def test_jax_engine_rows_compute_the_loops_iterate():
    """The ``jax`` row (the compiled engine) and the ``jax-hand`` row compute the loop's
    model."""
    pytest.importorskip("jax")
    rows = bench.engine_rows(6, 5, rounds=3, repeats=2, engines=["loop", "jax", "jax-hand"])
    by_engine = {r["engine"]: r for r in rows}
    for name in ("jax", "jax-hand"):
        assert by_engine[name]["max_diff"] < 1e-12 and by_engine[name]["ms"] > 0
    assert "compiled engine" in by_engine["jax"]["note"]


def test_an_unknown_engine_is_named():
    with pytest.raises(SystemExit, match="unknown engine.*jaxx.*choose among loop"):
        bench.main(["--engines", "loop,jaxx", "--quick"])


def test_jax_round_equals_simulator(tiny):
    pytest.importorskip("jax")
    x_jax = bench.jax_za1(tiny)(3)
    x_sim = simulate(bench._algorithm(), tiny, 3, metrics=[]).x
    np.testing.assert_allclose(x_jax, x_sim, rtol=0, atol=1e-10)


@pytest.mark.parametrize("name, params, per_round", [
    ("za1", dict(client_lr=0.1, local_steps=3), None),
    ("scaffold", dict(client_lr=0.1, local_steps=3), 5),  # non-contiguous blocks
])
def test_disk_states_equal_memory_states(tiny, tmp_path, name, params, per_round):
    def run(**kw):
        return simulate(make_algorithm(name, **params), tiny, 4, metrics=[],
                        clients_per_round=per_round, options=RunOptions(client_block=3, **kw))

    memory = run()
    disk = run(client_state="disk", state_dir=tmp_path)
    assert np.array_equal(memory.x, disk.x)
    for a, b in zip(memory.client_states, disk.client_states, strict=True):
        assert np.array_equal(a, b)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        f"{f}.npy" for f in memory.client_states._fields)
    scratch = run(client_state="disk")  # a temporary directory
    assert np.array_equal(memory.x, scratch.x)


def test_client_state_is_checked(tiny):
    with pytest.raises(ValueError, match="client_state"):
        simulate(bench._algorithm(), tiny, 1, metrics=[], options=RunOptions(client_state="ram"))


def test_config_client_state_disk_gives_the_same_results(tmp_path):
    from tests.product.test_sweeps import rows_of, tiny_config

    for label, state in (("memory", "memory"), ("disk", "disk")):
        cfg = {**tiny_config(), "client_state": state}
        run_experiment(cfg, tmp_path / label, stream=io.StringIO(), progress=False)
    assert rows_of(tmp_path / "memory") == rows_of(tmp_path / "disk")


@pytest.mark.parametrize("change, message", [
    ({"client_state": "ram"}, "client_state: unknown value 'ram'"),
    ({"backend": "torch"}, "use backend = 'numpy'"),
    ({"algorithms": [{"name": "async_feddr"}]}, r"algorithms \(async_feddr\)"),
])
def test_config_client_state_is_checked(change, message):
    from tests.product.test_sweeps import tiny_config

    cfg = {**tiny_config(), "client_state": "disk", **change}
    with pytest.raises(ConfigError, match=message):
        validate(cfg)


def test_disk_states_use_less_memory():
    # ZA1 at 2000 clients x d = 2000: two state arrays of 32 MB each
    memory, disk = (bench.peak_rss(2000, 2000, 1, mode, batch_size=1,
                                   generator="liang_sparse_linear") for mode in ("memory", "disk"))
    assert disk["delta_mb"] < memory["delta_mb"] - 32


def test_cli_bench_quick(capsys):
    from fedcomp.cli import main

    assert main(["bench", "--quick", "--no-scaling", "--no-memory", "--engines",
                 "loop,numpy"]) == 0
    out = capsys.readouterr().out
    assert "| 8x10 | loop |" in out and "| 8x10 | numpy |" in out


@pytest.mark.slow
def test_cli_bench_ray_engine_matches_the_loop(capsys):
    """The ``ray`` engine (two actors, a Ray instance started here) computes the loop's
    iterate: its row's max abs diff is rounding."""
    pytest.importorskip("ray")
    rows = bench.engine_rows(6, 5, rounds=2, repeats=1, engines=["loop", "ray"])
    ray_row = next(r for r in rows if r["engine"] == "ray")
    assert ray_row["max_diff"] < 1e-12 and ray_row["ms"] > 0


def test_cli_bench_scale_runs_tiny_and_writes_its_section(capsys, tmp_path):
    """``fedcomp bench scale``: every engine in its own process, the section between its own
    markers (the Ray engine is measured by the slow tests' cluster, not here)."""
    from fedcomp.cli import main

    doc = tmp_path / "BENCH.md"
    doc.write_text("# bench\n")
    assert main(["bench", "scale", "--clients", "300", "--d", "4", "--rounds", "1",
                 "--engines", "memory,disk", "--write", str(doc)]) == 0
    out = capsys.readouterr().out
    assert "| 300 | all | memory |" in out and "| 300 | 1% | disk |" in out
    assert "error" not in out
    assert doc.read_text().count("<!-- scale:start -->") == 1


def test_cli_bench_sparse_runs_tiny_and_checks_every_round_against_the_hand_written_one(
        capsys, tmp_path):
    """``fedcomp bench sparse``: the hand-written scipy.sparse rounds, fedcomp's on NumPy,
    torch and jax and the dense copy, each asserted to reach the same iterate."""
    from fedcomp.cli import main

    doc = tmp_path / "BENCH.md"
    doc.write_text("# bench\n")
    assert main(["bench", "sparse", "--shape", "300,2000,0.01", "--clients", "5",
                 "--rounds", "2", "--repeats", "1", "--dense-samples", "200",
                 "--dense-features", "500", "--dense-clients", "2",
                 "--write", str(doc)]) == 0
    out = capsys.readouterr().out
    for row in ("`scipy-hand`", "`scipy-hand-block`", "`numpy`", "`numpy-dense, fewer",
                "`numpy-dense, smaller vocabulary`", "`numpy-dense, first 2 clients`"):
        assert row in out
    assert doc.read_text().count("<!-- sparse:start -->") == 1


def test_conv_batching_ways_run_tiny():
    pytest.importorskip("torch")
    spec = importlib.util.spec_from_file_location("conv_batching",
                                                  ROOT / "benchmarks" / "conv_batching.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    ways = module.variants(2)
    assert set(ways) == {"grouped", "grouped, channels-last", "im2col", "bmm only", "loop"}
    for run in ways.values():
        assert module.best_ms(run, repeats=1) > 0


def test_torch_round_benchmark_runs_tiny(tmp_path):
    """``benchmarks/torch_round.py`` end to end on 2 clients (its own process: it changes
    malloc's settings), rows written as JSON."""
    pytest.importorskip("torch")
    out = tmp_path / "rows.json"
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "torch_round.py"), "--clients", "2",
         "--rounds", "1", "--repeats", "1", "--models", "mlp,cnn_digits", "--json", str(out)],
        capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    rows = json.loads(out.read_text())
    assert [(r["model"], r["clients"]) for r in rows] == [("mlp", 2), ("cnn_digits", 2)]
    assert all(r["vmap_ms"] > 0 and r["loop_ms"] > 0 and r["bound"] > 0 for r in rows)
    assert "| cnn_digits | 2 |" in done.stdout


def test_gpu_benchmark_runs_tiny_on_the_cpu():
    """``benchmarks/gpu.py`` end to end with ``--device cpu`` at one tiny size and one
    network experiment: every engine has a row, each agrees with NumPy's model, and the
    network rows come from ``fedcomp run``'s pipeline on the host."""
    pytest.importorskip("torch")
    pytest.importorskip("jax")
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "gpu.py"), "--device", "cpu", "--sizes",
         "12x6x4", "--block", "2", "--blocks", "2", "--repeats", "1", "--gib", "0.01",
         "--networks", "feddr_mlp", "--network-rounds", "2"],
        capture_output=True, text=True, timeout=400, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line.split("|") for line in done.stdout.splitlines() if line.startswith("| 12 x")]
    assert [r[2].strip() for r in rows] == ["numpy", "jax engine", "jax.jit(vmap) by hand",
                                            "fedcomp torch", "torch by hand"]
    assert all(float(r[5]) < 1e-12 for r in rows), rows  # the max abs diff to NumPy
    assert "copy bandwidth" in done.stdout
    assert "| feddr_mlp | fedavg (batch b10) | host CPU (torch) |" in done.stdout


def test_launch_counts_read_host_launches_apart_from_kernels():
    """``benchmarks/launch_counts.py`` counts the host's launch calls (kernel and graph
    launches, from the CUDA API records) apart from the kernels the GPU ran: a graph
    replay is one launch however many kernels it runs."""
    spec = importlib.util.spec_from_file_location("launch_counts",
                                                  ROOT / "benchmarks" / "launch_counts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    names = (["cudaLaunchKernel"] * 4 + ["cuLaunchKernel"] * 2 + ["cuGraphLaunch"] * 2
             + ["cudaMemcpyAsync"] * 2 + ["cudaStreamSynchronize"] * 6)
    assert module.launch_summary(names, kernels=40, rounds=2) == {
        "kernel_launches": 3.0, "graph_launches": 1.0, "kernels": 20.0, "copies": 1.0}


@pytest.mark.parametrize(("engine", "rolled"), [("torch", False), ("jax", True)])
def test_launch_counts_measure_a_variant_end_to_end_on_the_cpu(engine, rolled):
    """One variant's whole measurement (its problem, the compiling run, the profiled run,
    the counts a round) runs on this CPU as it would on the GPU, where no GPU launch is
    seen: the GPU pass finds no Python error of its own (the counts need a GPU)."""
    pytest.importorskip("torch")
    if engine == "jax":
        pytest.importorskip("jax")
    spec = importlib.util.spec_from_file_location("launch_counts",
                                                  ROOT / "benchmarks" / "launch_counts.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    row = module.count_variant(engine, rolled, steps=2, clients=3, rounds=2)
    assert {k: row[k] for k in ("kernel_launches", "graph_launches", "kernels", "copies",
                                "gpu_busy_ms")} == dict.fromkeys(
        ("kernel_launches", "graph_launches", "kernels", "copies", "gpu_busy_ms"), 0.0)
