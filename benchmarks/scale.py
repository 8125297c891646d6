"""Time per round and peak memory at 10^5 and 10^6 clients (issue 23's scale targets).

The problem: l1-regularised logistic regression, a small linear model (d = 20 by default),
10 samples per client held in memory (Gaussian features, labels of a planted sparse model),
float64. The algorithm: SCAFFOLD with its server prox (3 local steps, client_lr = 0.1) —
stateful (a control variate of d floats per client) and defined under client sampling —
with every client in every round and with 1 % of them. Engines, each in a fresh subprocess:

* ``memory``: :func:`fedcomp.simulate`, client states in memory, ``client_block="auto"``;
* ``disk``: the same with ``client_state="disk"`` (states in memory-mapped files);
* ``ray2``: ``RunOptions(clients=ray_clients(shards=2))`` on a two-node Ray cluster started on
  this machine (``ray.cluster_utils.Cluster``, one CPU per node): each actor holds half of
  the clients' data and states;
* ``ray2-npy`` and ``ray2-mmap``: the same, the data saved beforehand by another process
  (``ClientData.save``) and loaded by the server-loop process into memory
  (``ClientData.load(..., mmap=False)``) or memory-mapped (``mmap=True``: each actor then
  reads its own rows from the files, and the server loop reads the data only for the
  finiteness check, through the file, and the targets' check of the loss).

Reported: milliseconds per round (after one warm-up round; no evaluation between rounds),
the peak resident memory of the process that runs the server loop (``VmHWM``) and, for
Ray, of each actor; the set-up time (data generation and, for Ray, shipping the shards).

    python benchmarks/scale.py [--clients 100000,1000000] [--d 20] [--rounds 3]
                               [--engines memory,disk,ray2,ray2-npy,ray2-mmap]
                               [--write docs/BENCHMARKS.md]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import write_section  # noqa: E402  (the bench section writer, other markers)

from fedcomp.runtime._allocator import peak_memory_mb  # noqa: E402

MARK_START, MARK_END = "<!-- scale:start -->", "<!-- scale:end -->"
ENGINES = ("memory", "disk", "ray2", "ray2-npy", "ray2-mmap")
#: The engines whose data another process saved first: ``ClientData.load``'s ``mmap``.
LOADED = {"ray2-npy": False, "ray2-mmap": True}
SAMPLES = 10


def make_problem(n_clients: int, d: int, seed: int = 0) -> Any:
    """Logistic + l1 on ``n_clients`` x 10 Gaussian samples of a planted 5-sparse model."""
    from fedcomp import Problem
    from fedcomp.data import ClientData
    from fedcomp.losses import Logistic
    from fedcomp.regularizers import L1

    rng = np.random.default_rng(seed)
    truth = np.zeros(d)
    truth[:min(5, d)] = rng.normal(size=min(5, d))
    features = rng.standard_normal((n_clients, SAMPLES, d))
    margins = features @ truth
    targets = np.where(rng.random(margins.shape) < 1 / (1 + np.exp(-margins)), 1.0, -1.0)
    data = ClientData(features, targets, np.full(n_clients, SAMPLES))
    return Problem(Logistic(), L1(1e-3), data)


def loaded_problem(directory: str, mmap: bool) -> Any:
    """:func:`make_problem`'s problem from the data it saved in ``directory``."""
    from fedcomp import Problem
    from fedcomp.data import ClientData
    from fedcomp.losses import Logistic
    from fedcomp.regularizers import L1

    return Problem(Logistic(), L1(1e-3), ClientData.load(directory, mmap=mmap))


def one(n_clients: int, d: int, fraction: float, engine: str, rounds: int,
        data: str | None = None) -> dict[str, Any]:
    """One measurement in this (fresh) process (``data``: the directory of a LOADED engine)."""
    from fedcomp import simulate
    from fedcomp.algorithms import scaffold
    from fedcomp.runtime._options import split_options

    tic = time.perf_counter()
    if engine in LOADED:
        assert data is not None, f"{engine} needs the saved data's directory"
        problem = loaded_problem(data, LOADED[engine])
    else:
        problem = make_problem(n_clients, d)
    per_round = None if fraction >= 1 else max(1, round(fraction * n_clients))
    # metrics=[]: a row holds only the counters and wall_s, the time spent in rounds
    kwargs: dict[str, Any] = dict(clients_per_round=per_round, metrics=[], eval_every=1,
                                  progress=False, seed=0)
    actors: list[float] = []
    cluster = None
    if engine == "disk":
        kwargs["client_state"] = "disk"
    elif engine.startswith("ray2"):
        import ray
        from ray.cluster_utils import Cluster

        from fedcomp.runtime._ray_clients import RayClients

        cluster = Cluster(initialize_head=True,
                          head_node_args={"num_cpus": 1, "include_dashboard": False})
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False, include_dashboard=False)

        class Measured(RayClients):
            def close(self) -> None:
                actors.extend(self.peak_memory_mb())
                super().close()

        def build(*args: Any) -> RayClients:
            return Measured(*args, shards=2)

        kwargs["clients"] = build
    set_up = time.perf_counter() - tic
    algorithm = scaffold(client_lr=0.1, local_steps=3, server_prox=True)
    try:
        tic = time.perf_counter()
        own, options = split_options(kwargs)
        run = simulate(algorithm, problem, 1 + rounds, options=options, **own)
        total = time.perf_counter() - tic
    finally:
        if cluster is not None:
            import ray

            ray.shutdown()
            cluster.shutdown()
    wall = {row["round"]: row["wall_s"] for row in run.history}
    ms = (wall[1 + rounds] - wall[1]) / rounds * 1e3  # after the warm-up round
    return {"clients": n_clients, "d": d, "fraction": fraction, "engine": engine,
            "ms_per_round": ms, "first_call_s": total - (wall[1 + rounds] - wall[1]),
            "set_up_s": set_up, "peak_mb": peak_memory_mb(), "actor_peak_mb": actors}


def environment() -> dict[str, str]:
    root = Path(__file__).resolve().parents[1]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(root), os.environ.get("PYTHONPATH", "")])}


def save_data(n_clients: int, d: int, directory: str) -> None:
    """:func:`make_problem`'s data saved to ``directory`` by another process (so that the
    measured process never held them)."""
    subprocess.run([sys.executable, __file__, "--save", str(n_clients), str(d), directory],
                   env=environment(), check=True)


def measure(n_clients: int, d: int, fraction: float, engine: str, rounds: int,
            data: str | None = None) -> dict[str, Any]:
    """:func:`one` in a fresh subprocess (peak memory is per process)."""
    out = subprocess.run([sys.executable, __file__, "--one", str(n_clients), str(d),
                          str(fraction), engine, str(rounds)]
                         + ([] if data is None else ["--data", data]),
                         capture_output=True, text=True, env=environment(), check=False)
    if out.returncode != 0:
        return {"clients": n_clients, "d": d, "fraction": fraction, "engine": engine,
                "error": (out.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def table(rows: Sequence[dict[str, Any]]) -> str:
    lines = ["| clients | participation | engine | ms / round | peak MB (server loop) | "
             "peak MB (actors) | set-up, warm-up round (s) |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        share = "all" if r["fraction"] >= 1 else f"{r['fraction']:.0%}"
        if "error" in r:
            lines.append(f"| {r['clients']:,} | {share} | {r['engine']} | error: "
                         f"{r['error']} | | | |")
            continue
        actors = " + ".join(f"{m:.0f}" for m in r["actor_peak_mb"]) or "–"
        lines.append(f"| {r['clients']:,} | {share} | {r['engine']} | {r['ms_per_round']:.4g} "
                     f"| {r['peak_mb']:.0f} | {actors} | "
                     f"{r['set_up_s'] + r['first_call_s']:.1f} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", default="100000,1000000")
    p.add_argument("--d", type=int, default=20)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--fractions", default="1,0.01")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--write", help="write the section into this Markdown file")
    p.add_argument("--one", nargs=5, help=argparse.SUPPRESS)
    p.add_argument("--data", help=argparse.SUPPRESS)
    p.add_argument("--save", nargs=3, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        n, d, fraction, engine, rounds = args.one
        print(json.dumps(one(int(n), int(d), float(fraction), engine, int(rounds), args.data)))
        return 0
    if args.save:
        n, d, directory = args.save
        make_problem(int(n), int(d)).data.save(directory)
        return 0
    engines = args.engines.split(",")
    load_before = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="fedcomp-scale-") as scratch:
        for n in (int(v) for v in args.clients.split(",")):
            data = None
            if LOADED.keys() & set(engines):
                data = os.path.join(scratch, str(n))
                save_data(n, args.d, data)
            for fraction in (float(v) for v in args.fractions.split(",")):
                for engine in engines:
                    row = measure(n, args.d, fraction, engine, args.rounds, data)
                    print(json.dumps(row), file=sys.stderr, flush=True)
                    rows.append(row)
            if data is not None:
                shutil.rmtree(data)
    load_after = os.getloadavg()
    command = "python benchmarks/scale.py " + " ".join(argv if argv is not None else sys.argv[1:])
    body = (f"SCAFFOLD (server prox, 3 local steps) on l1 logistic regression, d = {args.d}, "
            f"{SAMPLES} samples per client, float64 (ray2-npy, ray2-mmap: saved by another "
            f"process and loaded); {args.rounds} timed rounds "
            f"after a warm-up round, no evaluation. Command: `{command.strip()}`. Machine: "
            f"{platform.machine()}, {os.cpu_count()} CPUs, {platform.python_version()}; load "
            f"average {load_before[0]:.2f} before, {load_after[0]:.2f} after.\n\n"
            + table(rows))
    print(body)
    if args.write:
        write_section(args.write, body, MARK_START, MARK_END)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
