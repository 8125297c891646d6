"""TABLE V of seed 002 (FedCanon): total training time per algorithm for K in {10, 20, 40, 80}.

Fixed rounds (T = 200), the iid setting of ``fedcomp/configs/fedcanon_vs_composite.toml`` (linear
model, logistic + l1 on the bundled breast-cancer set, 10 clients). Every method runs in
the same process; times are the runner's ``wall_s`` (rounds only, no evaluation), the best
of ``--repeats`` runs. Ratios are against FedCanon at the same K (the paper's blue numbers)
and against the same method at the previous K (red numbers).

A second table times the prox-heavier SCAD penalty (FedDA left out: it needs a convex
regularizer) to show how the gap depends on the cost of one prox relative to a gradient.

With ``--config`` the table is taken on another FedCanon configuration instead, e.g. the
network version ``fedcomp/configs/fedcanon_nn.toml`` (CNN + SCAD on digits; its first variant),
for the methods that configuration lists.

Usage::

    python benchmarks/fedcanon_time_table.py [--rounds 200] [--repeats 3]
    python benchmarks/fedcanon_time_table.py --config fedcanon_nn --rounds 10
    python benchmarks/fedcanon_time_table.py --device cuda   # on a GPU (timings synchronised)
    python benchmarks/fedcanon_time_table.py --config fedcanon_nn --device mps
"""

from __future__ import annotations

import argparse
import copy

from fedcomp.config import ConfigError, load
from fedcomp.experiments.claims import fedcanon_vs_composite as exp
from fedcomp.runtime._backends import devices


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--config", help="a FedCanon configuration file (default: the linear "
                        "fedcanon_vs_composite setting, with a second SCAD table)")
    gpus = ", ".join(kind for kind in devices("torch") if kind != "cpu")
    parser.add_argument("--device", default="cpu", help="cpu (default), or a device a torch "
                        f"backend is registered on: {gpus} (cuda:N for the N-th GPU)")
    args = parser.parse_args()
    config = load(args.config) if args.config else {}
    try:  # an unavailable device, or none for the config's precision: one line, before any run
        exp.on_device(config, args.device)
    except ConfigError as exc:
        parser.exit(2, f"error: {exc}\n")
    where = f", on {args.device}"
    if args.config:
        methods = tuple(entry["name"] for entry in config["algorithms"])
        variant = config["variants"][0]["label"] if config.get("variants") else None
        rows = exp.time_table(config, rounds=args.rounds, repeats=args.repeats,
                              methods=methods, variant=variant, device=args.device)
        print(f"{config['name']} ({variant or 'base'}, T={args.rounds}, best of "
              f"{args.repeats}{where}):\n")
        print(exp.time_table_markdown(rows))
        return
    rows = exp.time_table(rounds=args.rounds, repeats=args.repeats, device=args.device)
    print(f"l1 (iid, T={args.rounds}, best of {args.repeats}{where}):\n")
    print(exp.time_table_markdown(rows))
    scad = copy.deepcopy(load("fedcanon_vs_composite"))
    scad["regularizer"] = {"name": "scad", "alpha": 0.01, "a": 3.7}
    scad["algorithms"] = [e for e in scad["algorithms"] if e["name"] != "fedda"]
    rows = exp.time_table(scad, rounds=args.rounds, repeats=args.repeats,
                          methods=("fedcanon", "fedmid", "za1"), device=args.device)
    print(f"\nSCAD (iid, T={args.rounds}, best of {args.repeats}{where}):\n")
    print(exp.time_table_markdown(rows))


if __name__ == "__main__":
    main()
