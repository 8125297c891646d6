"""Host-side launches and GPU kernels per network round, as K and the clients of a block grow.

Issue 46's target: on a GPU the launches a round makes do not grow with the local steps K
or with the clients in a block. Two counts answer different questions, and the first H100
session (docs/BENCHMARKS.md) had only the second:

* **host launches**: the calls the host makes to start work on the GPU, read from the CUDA
  runtime and driver API records of ``torch.profiler`` (CUPTI): kernel launches
  (``cudaLaunchKernel``, ``cuLaunchKernel`` and their ``Ex`` forms) and graph launches
  (``cudaGraphLaunch``, ``cuGraphLaunch``: one call replays a whole CUDA graph). This is
  what costs host time and what the target is about.
* **kernels executed**: CUPTI's kernel records, which see every kernel the GPU runs,
  launched one by one or from a graph. These grow with K whatever the engine does: K steps
  are K times the arithmetic.

XLA turns runs of consecutive kernels into CUDA graphs of its own ("command buffers",
``--xla_gpu_enable_command_buffer``, on by default for fusions, cuBLAS and cuDNN calls), so
the jax engine's host launches can stay flat while its kernels grow. Each variant runs in
its own process, as ``XLA_FLAGS`` is read once, when jax starts:

* ``torch``: the data on ``cuda`` tensors, a kernel launch per layer per step;
* ``jax-unrolled``: the compiled engine with its local steps unrolled into the round's
  program (:data:`fedcomp.runtime._compiled_trace.ROLLED_STEPS` off), XLA's defaults;
* ``jax-unrolled-no-graphs``: the same with ``--xla_gpu_enable_command_buffer=`` (every
  kernel launched by the host), the contrast that shows what the graphs do;
* ``jax-rolled``: the engine's default, its local steps one device loop (``fori_loop``),
  XLA's defaults (which may unroll a short loop again);
* ``jax-rolled-loop-graphs``: the same with while loops allowed in the command buffers and
  XLA's own unrolling of them off, so that a round's loop can be one graph.

Each is timed on FedDR (K SGD steps of batch 10) on the 60-32-10 MLP
(``benchmarks/jax_networks.py``'s ``feddr_mlp``) over R rounds after a run that compiles, at
K = 10 and 20 with 10 clients a round and at K = 10 with 20.

    python benchmarks/launch_counts.py [--rounds 4] [--variants torch,jax-rolled,...]

Needs a CUDA GPU (torch and jax on it); on a machine without one it says so and exits 0.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import warnings
from collections import Counter
from collections.abc import Iterable

#: The CUDA API calls that start one kernel, and those that replay a whole graph.
KERNEL_LAUNCHES = frozenset({"cudaLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernel",
                             "cuLaunchKernelEx", "cudaLaunchCooperativeKernel",
                             "cuLaunchCooperativeKernel"})
GRAPH_LAUNCHES = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})

#: XLA's default command-buffer kinds with while loops and conditionals added.
_WITH_LOOPS = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CUDNN,WHILE,CONDITIONAL"

#: variant -> (engine, XLA_FLAGS added, rolled local steps)
VARIANTS: dict[str, tuple[str, str, bool]] = {
    "torch": ("torch", "", False),
    "jax-unrolled": ("jax", "", False),
    "jax-unrolled-no-graphs": ("jax", "--xla_gpu_enable_command_buffer=", False),
    "jax-rolled": ("jax", "", True),
    "jax-rolled-loop-graphs": ("jax", f"--xla_gpu_enable_command_buffer={_WITH_LOOPS} "
                               "--xla_gpu_enable_while_loop_unrolling="
                               "WHILE_LOOP_UNROLLING_NO_UNROLL", True),
}
SHAPES = ((10, 10), (20, 10), (10, 20))  # (K, clients a round)


def launch_summary(names: Iterable[str], kernels: int, rounds: int) -> dict[str, float]:
    """Per-round counts from the profiler's event names (API calls) and kernel records.

    ``names``: the names of the CUDA runtime/driver API records; ``kernels``: how many
    kernel records there were.
    """
    calls = Counter(names)
    per = 1.0 / rounds
    return {"kernel_launches": per * sum(calls[n] for n in KERNEL_LAUNCHES),
            "graph_launches": per * sum(calls[n] for n in GRAPH_LAUNCHES),
            "kernels": per * kernels,
            "copies": per * sum(v for n, v in calls.items()
                                     if n.startswith(("cudaMemcpy", "cuMemcpyHtoD")))}


def _problem(engine: str):
    """``jax_networks.py``'s ``feddr_mlp`` problem (30 clients) on the engine's arrays."""
    import torch

    from fedcomp import Problem
    from fedcomp.runtime import jax_like

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from jax_networks import feddr_mlp

    case = feddr_mlp()
    device = "cuda" if torch.cuda.is_available() else "cpu"  # cpu: the smoke test only
    like = torch.zeros(0, device=device) if engine == "torch" else jax_like("float32")
    return Problem(case["loss"], case["reg"], case["data"].to(like), n_classes=10)


def _synchronize(torch) -> None:
    """Wait for the GPU (none to wait for where torch sees none: the CPU smoke test)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def count_variant(engine: str, rolled: bool, steps: int, clients: int, rounds: int
                  ) -> dict[str, float]:
    """One variant's counts a round, in this process (its ``XLA_FLAGS`` already set)."""
    from fedcomp.runtime import _compiled_trace

    before, _compiled_trace.ROLLED_STEPS = _compiled_trace.ROLLED_STEPS, rolled
    try:
        return _counted(engine, steps, clients, rounds)
    finally:  # the switch is the process's: put it back
        _compiled_trace.ROLLED_STEPS = before


def _counted(engine: str, steps: int, clients: int, rounds: int) -> dict[str, float]:
    """:func:`count_variant` with the local-steps switch set."""
    import numpy as np
    import torch
    from torch.profiler import ProfilerActivity, profile

    import fedcomp

    problem = _problem(engine)
    algorithm = fedcomp.feddr(eta=1.0, alpha=1.95, client_lr=0.01, local_steps=steps)

    def run() -> None:
        result = fedcomp.simulate(algorithm, problem, rounds, batch_size=10,
                                  clients_per_round=clients, eval_every=rounds,
                                  metrics=["objective"])
        float(np.asarray(fedcomp._array.to_numpy(result.x)).sum())  # wait for the device

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        run()  # compiles (jax), warms the caching allocator (torch)
        _synchronize(torch)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run()
            _synchronize(torch)
    events = prof.events()
    gpu = [e for e in events if e.device_type == torch.autograd.DeviceType.CUDA]
    kernels = sum(1 for e in gpu if "memcpy" not in e.name.lower()
                  and "memset" not in e.name.lower())
    api = [e.name for e in events if e.device_type != torch.autograd.DeviceType.CUDA
           and e.name.startswith(("cu", "cuda"))]
    summary = launch_summary(api, kernels, rounds)
    summary["gpu_busy_ms"] = sum(e.device_time_total for e in gpu) / rounds / 1e3
    summary["api_seen"] = Counter(api).most_common(8)
    return summary


def _child(variant: str, rounds: int) -> None:
    engine, _, rolled = VARIANTS[variant]
    for steps, clients in SHAPES:
        try:
            row = count_variant(engine, rolled, steps, clients, rounds)
        except Exception as exc:  # report and go on: one variant's failure is a finding
            row = {"error": f"{type(exc).__name__}: {str(exc)[:160]}"}
        print(json.dumps({"variant": variant, "K": steps, "clients": clients, **row}),
              flush=True)


def _table_row(row: dict) -> str:
    head = f"| {row['variant']} | {row['K']} | {row['clients']} |"
    if "error" in row:
        return f"{head} failed: {row['error']} | | | | |"
    return (f"{head} {row['kernel_launches']:.0f} | {row['graph_launches']:.0f} | "
            f"{row['kernels']:.0f} | {row['copies']:.0f} | {row['gpu_busy_ms']:.2f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child, args.rounds)
        return
    names = args.variants.split(",")
    unknown = sorted(set(names) - set(VARIANTS))
    if unknown:
        parser.error(f"--variants: unknown {unknown}; choose from {', '.join(VARIANTS)}")
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU here: nothing to count")
        return
    print(f"# launches a round on {torch.cuda.get_device_name(0)}, {args.rounds} rounds "
          "counted after a compiling run (torch.profiler: CUDA API records and kernel records)")
    print("| variant | K | clients a round | host kernel launches | host graph launches "
          "| kernels executed | host-issued copies | GPU busy ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    rows = []
    for name in names:
        env = dict(os.environ)
        env["XLA_FLAGS"] = " ".join(filter(None, (env.get("XLA_FLAGS", ""), VARIANTS[name][1])))
        done = subprocess.run([sys.executable, __file__, "--child", name,
                               "--rounds", str(args.rounds)],
                              env=env, capture_output=True, text=True, timeout=600)
        lines = [json.loads(x) for x in done.stdout.splitlines() if x.startswith("{")]
        if not lines:
            print(f"| {name} | | | failed (rc {done.returncode}): "
                  f"{done.stderr.strip()[-300:]} | | | | |", flush=True)
        for row in lines:
            rows.append(row)
            print(_table_row(row), flush=True)
    print("\nCUDA API records seen (per variant, first shape):")
    for row in rows:
        if row["K"] == SHAPES[0][0] and row["clients"] == SHAPES[0][1] and "api_seen" in row:
            print(f"  {row['variant']}: {row['api_seen']}")


if __name__ == "__main__":
    main()
