"""``fedcomp bench``: the benchmark scripts of a source checkout, arguments forwarded."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

#: The benchmark scripts of a source checkout (``fedcomp bench`` runs them). A wheel has
#: none: there the command is not offered (``--help`` does not list it).
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def cmd_bench(args: argparse.Namespace) -> int:
    """Run ``benchmarks/run.py`` of the source checkout with the remaining arguments
    (``fedcomp bench scale ...``: ``benchmarks/scale.py``, 10^5 and 10^6 clients;
    ``fedcomp bench sparse ...``: ``benchmarks/sparse_round.py``, rcv1-shaped rounds)."""
    import importlib.util

    name, forwarded = "run", list(args.bench_args)
    scripts = {"scale": "scale", "sparse": "sparse_round"}
    if forwarded[:1] and forwarded[0] in scripts:
        name, forwarded = scripts[forwarded[0]], forwarded[1:]
    script = BENCHMARKS / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"fedcomp_bench_{name}", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return int(module.main(forwarded))


def add_parser(sub: Any) -> None:
    """``fedcomp bench``, only where the benchmarks are."""
    if not (BENCHMARKS / "run.py").exists():
        return
    # prefix_chars="+": every "-..." argument goes through to benchmarks/run.py untouched
    bench = sub.add_parser("bench", add_help=False, prefix_chars="+",
                           help="ms per round on every engine (simulator NumPy/torch, "
                                "per-client loop, JAX, Flower), scaling, peak memory; "
                                "'bench scale': 10^5 and 10^6 clients, in one process and "
                                "on Ray actors; 'bench sparse': rcv1-shaped sparse rounds "
                                "against hand-written scipy.sparse ones",
                           description="Forwards its arguments to benchmarks/run.py "
                                       "(fedcomp bench --help lists them).")
    bench.add_argument("bench_args", nargs=argparse.REMAINDER)
    bench.set_defaults(func=cmd_bench)
