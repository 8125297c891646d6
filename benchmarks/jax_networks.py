"""Network rounds: torch eager vs the jax compiled engine, and a centralized floor.

Two rounds of the report's network experiments, at their shapes:

* **feddr_mlp**: FedDR (SGD local solver, K = 20 steps of batch 10) on the 60-32-10 MLP,
  Synthetic(1,1), 30 clients, 10 per round, g = 0.01‖x‖₁;
* **fedcanon_nn**: FedCanon (K = 10 steps of batch 20) on the 16/32-channel 3×3 CNN at the
  digits' shape 1×8×8, 10 clients of 144 samples, every one per round, SCAD on the weights.

Each round runs through ``fedcomp.simulate`` on the same data, in float32:

* **torch eager**: the data on torch tensors (backend ``torch``, or ``cuda``): each local
  step is a batched forward/backward of the block, one kernel per layer per step;
* **jax compiled**: the data on jax arrays (backend ``jax-float32``): the engine traces a
  round — every client's K local steps, the minibatch draws, the server update — into one
  XLA program, and runs the rounds between two evaluation rows as one call
  (:func:`fedcomp.runtime._compiled.chunk_length` rounds per call) where the round traces
  under a loop over rounds, else a call per round: the "jax calls a round" column counts
  the engine's compiled calls in a run (:func:`compiled_calls`; not a profiler's count of
  kernels);
* **floor**: a hand-written ``jax.jit`` centralized loop, K SGD steps at batch C·B on the
  same network (the issue's anchor: the same arithmetic as a round, with no federation).

Each timing is the best of ``--repeats`` runs after a first run that compiles, and a
round's time is the slope between runs of R and 3R rounds (a run's fixed cost left out;
the last column is a run of R rounds, fixed cost included); ratios are from the same
process. ``--device gpu`` puts torch on ``cuda`` and leaves jax on its default device (its
GPU where it sees one; the table names the device).

    python benchmarks/jax_networks.py [--device cpu|gpu] [--rounds 20] [--repeats 3]
        [--cases feddr_mlp,fedcanon_nn] [--no-torch] [--compare-unrolled]

``--compare-unrolled`` adds the jax engine with its local steps unrolled, timed in the same
process, so that a GPU's pass says whether rolled steps (the default, chosen on a CPU)
suit it too.
"""

from __future__ import annotations

import argparse
import platform
import time
import warnings

import numpy as np
import torch

import fedcomp
from fedcomp import ClientData, Problem
from fedcomp.data import synthetic_fedprox
from fedcomp.losses import TorchModel
from fedcomp.regularizers import L1, SCAD, Masked
from fedcomp.runtime import jax_like


def feddr_mlp() -> dict:
    data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=30, n_features=60, n_classes=10,
                             seed=0)
    loss = TorchModel("mlp", input_shape=(60,), n_classes=10, options={"hidden": [32]})
    return {"name": "feddr_mlp", "data": data, "loss": loss, "reg": L1(0.01),
            "alg": fedcomp.feddr(eta=1.0, alpha=1.95, client_lr=0.01, local_steps=20),
            "batch": 10, "clients": 10, "steps": 20}


def fedcanon_nn() -> dict:
    rng = np.random.default_rng(0)
    data = ClientData.from_lists([rng.random((144, 1, 8, 8)) for _ in range(10)],
                                 [rng.integers(0, 10, 144).astype(float) for _ in range(10)])
    loss = TorchModel("cnn", input_shape=(1, 8, 8), n_classes=10,
                      options={"channels": [16, 32], "kernel_size": 3})
    reg = Masked(SCAD(1e-4, 10.0), loss.layout().weight_mask())
    return {"name": "fedcanon_nn", "data": data, "loss": loss, "reg": reg,
            "alg": fedcomp.fedcanon(client_lr=0.1, local_steps=10, server_lr=1.0),
            "batch": 20, "clients": None, "steps": 10}


def _best(fn, repeats: int) -> float:
    fn()  # compile / warm up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def round_seconds(case: dict, like, rounds: int, repeats: int) -> tuple[float, float]:
    """``(seconds a round, seconds a round of a run of rounds)``: the slope of a run's time
    between ``rounds`` and ``3 rounds`` rounds, rows every ``rounds`` (one compiled program
    for both), which leaves out a run's fixed cost (e.g. the engine tracing its round
    again for each ``simulate`` call), and the short run's time over its rounds."""
    problem = Problem(case["loss"], case["reg"], case["data"].to(like), n_classes=10)

    def run(n):
        # rows at round 0 and at the end only, in both runs: a row's evaluation is not a
        # round's cost (rows every R rounds gave the 3R run two rows more, 0.3 s each on a
        # GPU, which the slope counted as rounds: 24 ms a round where a round takes 0.3 ms)
        result = fedcomp.simulate(case["alg"], problem, n, batch_size=case["batch"],
                                  clients_per_round=case["clients"], eval_every=3 * rounds,
                                  metrics=["objective"])
        float(np.asarray(fedcomp._array.to_numpy(result.x)).sum())  # wait for the device

    with warnings.catch_warnings():
        warnings.simplefilter("error", fedcomp.runtime.JaxEngineWarning)  # compiled or fail
        short = _best(lambda: run(rounds), repeats)
        long = _best(lambda: run(3 * rounds), repeats)
    return (long - short) / (2 * rounds), short / rounds


def unrolled_round_seconds(case: dict, like, rounds: int, repeats: int
                           ) -> tuple[float, float]:
    """:func:`round_seconds` with the engine's local steps unrolled into the round's
    program (:data:`fedcomp.runtime._compiled_trace.ROLLED_STEPS` off), put back after."""
    from fedcomp.runtime import _compiled_trace

    before, _compiled_trace.ROLLED_STEPS = _compiled_trace.ROLLED_STEPS, False
    try:
        return round_seconds(case, like, rounds, repeats)
    finally:
        _compiled_trace.ROLLED_STEPS = before


def compiled_calls(case: dict, like, rounds: int) -> float:
    """Compiled calls a round of the jax engine, counted in one run: a call of a whole run's
    rounds and rows (:meth:`CompiledEngine.run_rows`) or of several rounds
    (:meth:`CompiledEngine._chunk`) counts once for its rounds; a round of its own
    (:meth:`CompiledEngine._step`, where the round does not trace under a loop over
    rounds, e.g. FedDR's branch on its first round) once, or once per part where its
    client and server updates run apart."""
    from fedcomp.runtime import _compiled

    problem = Problem(case["loss"], case["reg"], case["data"].to(like), n_classes=10)
    count = [0]
    engine = _compiled.CompiledEngine
    chunk, step, parts, rows = engine._chunk, engine._step, engine._parts, engine.run_rows

    def counted(fn, calls):
        def wrapped(*args, **kwargs):
            out = fn(*args, **kwargs)
            count[0] += calls if out is not _compiled.EAGER and out is not None else 0
            return out
        return wrapped

    engine._chunk, engine._step = counted(chunk, 1), counted(step, 1)
    engine._parts = counted(parts, 1)  # its client and server calls: one more than _step's
    engine.run_rows = counted(rows, 1)  # rounds and their rows in one call (None: it cannot)
    try:
        fedcomp.simulate(case["alg"], problem, rounds, batch_size=case["batch"],
                         clients_per_round=case["clients"], eval_every=rounds,
                         metrics=["objective"])
    finally:
        engine._chunk, engine._step, engine._parts, engine.run_rows = chunk, step, parts, rows
    return count[0] / rounds


def floor_seconds(case: dict, repeats: int) -> float:
    """K SGD steps at batch C·B of the same network, jitted centralized (one call)."""
    import jax

    from fedcomp.losses._jax_forward import _client_loss, _entries, jax_layers

    loss = case["loss"]
    layers, entries = jax_layers(loss), _entries(loss)
    features, targets, _ = case["data"].pooled()
    n_clients = case["clients"] or case["data"].n_clients
    batch = n_clients * case["batch"]
    rng = np.random.default_rng(0)
    idx = rng.integers(0, len(targets), (case["steps"], batch))
    feats = jax.numpy.asarray(np.asarray(features)[idx], dtype=jax.numpy.float32)
    targs = jax.numpy.asarray(np.asarray(targets)[idx].round().astype(np.int64))
    weights = jax.numpy.full((batch,), 1.0 / batch, dtype=jax.numpy.float32)
    x0 = jax.numpy.asarray(loss.initial_model(), dtype=jax.numpy.float32)
    grad = jax.grad(lambda x, f, t: _client_loss(layers, entries, 0.0, x, f, t, weights))

    @jax.jit
    def steps(x):
        # unrolled: the floor takes its steps the way a hand-written loop would (the
        # engine's own steps are a device loop since ROLLED_STEPS; an earlier session
        # measured XLA's CPU convolutions 2x slower in a while loop, a later one did not)
        return jax.lax.fori_loop(0, case["steps"],
                                 lambda k, x: x - 0.01 * grad(x, feats[k], targs[k]), x,
                                 unroll=True)

    return _best(lambda: steps(x0).block_until_ready(), repeats)


CASES = {"feddr_mlp": feddr_mlp, "fedcanon_nn": fedcanon_nn}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--cases", default=",".join(CASES),
                        help="which rounds to time (comma-separated)")
    parser.add_argument("--compare-unrolled", action="store_true",
                        help="also the jax engine with its local steps unrolled into the "
                             "round's program (ROLLED_STEPS off), in the same process: "
                             "which the platform's default should be")
    parser.add_argument("--no-torch", action="store_true",
                        help="time the jax engine and the floor only (a GPU's MLP round is "
                             "0.3 ms: its slope needs --rounds 200, too long for torch eager)")
    args = parser.parse_args()
    unknown = sorted(set(args.cases.split(",")) - set(CASES))
    if unknown:
        raise SystemExit(f"unknown cases {unknown}; choose from {', '.join(CASES)}")
    import jax

    jax_like_ = jax_like("float32")
    torch_like = torch.zeros(0, dtype=torch.float32,
                             device="cuda" if args.device == "gpu" else "cpu")
    print(f"# {platform.node()} {platform.processor() or platform.machine()}, torch "
          f"{torch.__version__} on {torch_like.device} ({torch.get_num_threads()} threads), "
          f"jax {jax.__version__} on {jax_like_.devices()}; float32, {args.rounds} rounds "
          f"a run, best of {args.repeats}")
    # on a GPU, torch eager on the host's cores too: the "n x faster than the host"
    host = args.device == "gpu" and not args.no_torch
    print("| round | torch eager ms/round | jax compiled ms/round | jax speed-up | jax calls "
          "a round | floor ms (jit, batch C·B) | jax / floor | ms/round of a run of R: "
          "torch, jax |" + (" host torch ms/round | host / jax |" if host else ""))
    print("|---|---|---|---|---|---|---|---|" + ("---|---|" if host else ""))
    for case in (CASES[name]() for name in args.cases.split(",")):
        t_jax, run_jax = round_seconds(case, jax_like_, args.rounds, args.repeats)
        t_torch, run_torch = ((float("nan"),) * 2 if args.no_torch else
                              round_seconds(case, torch_like, args.rounds, args.repeats))
        t_floor = floor_seconds(case, args.repeats)
        calls = compiled_calls(case, jax_like_, args.rounds)
        extra = ""
        if host:
            t_host, _ = round_seconds(case, torch.zeros(0, dtype=torch.float32), args.rounds,
                                      args.repeats)
            extra = f" {1e3 * t_host:.2f} | {t_host / t_jax:.2f}x |"
        print(f"| {case['name']} | {1e3 * t_torch:.2f} | {1e3 * t_jax:.2f} | "
              f"{t_torch / t_jax:.2f}x | {calls:.2f} | {1e3 * t_floor:.2f} | "
              f"{t_jax / t_floor:.2f}x | {1e3 * run_torch:.1f}, {1e3 * run_jax:.1f} |" + extra,
              flush=True)
        if args.compare_unrolled:
            t_unrolled, run_unrolled = unrolled_round_seconds(case, jax_like_, args.rounds,
                                                              args.repeats)
            print(f"# {case['name']}: jax with its local steps unrolled {1e3 * t_unrolled:.2f} "
                  f"ms/round (a run of R: {1e3 * run_unrolled:.1f}) against rolled (the "
                  f"default) {1e3 * t_jax:.2f} (a run of R: {1e3 * run_jax:.1f}): unrolled / "
                  f"rolled {t_unrolled / t_jax:.2f}x", flush=True)


if __name__ == "__main__":
    main()
