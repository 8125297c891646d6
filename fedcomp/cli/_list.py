"""``fedcomp list``: the registries' entries (algorithms, regularizers, ...) and the built-in
experiments, one line each."""

from __future__ import annotations

import argparse
from typing import Any


def _catalogue() -> dict[str, dict[str, str]]:
    from ..catalogue import catalogue

    return {kind: dict(registry.describe()) for kind, registry in catalogue().items()}


def _experiments() -> dict[str, str]:
    """Every built-in experiment and the first sentence of its description."""
    from ..config import experiment_names, load

    out = {}
    for name in experiment_names():
        text = " ".join(str(load(name).get("description", "")).split())
        out[name] = text if len(text) <= 90 else text[:88].rsplit(" ", 1)[0] + " …"
    return out


def cmd_list(args: argparse.Namespace) -> int:
    catalogue = {**_catalogue(), "experiments": _experiments()}
    kinds = [args.kind] if args.kind else list(catalogue)
    for kind in kinds:
        print(f"{kind}:")
        entries = catalogue[kind]
        width = max(map(len, entries), default=0)
        for name, text in entries.items():
            print(f"  {name.ljust(width)}  {text}")
        print()
    return 0


def add_parser(sub: Any) -> None:
    """``fedcomp list [KIND]``."""
    lst = sub.add_parser("list", help="list algorithms, regularizers, losses, datasets, "
                         "experiments, ...")
    lst.add_argument("kind", nargs="?", choices=["algorithms", "regularizers", "losses",
                                                 "datasets", "partitioners", "metrics",
                                                 "topologies", "compressors", "backends",
                                                 "experiments"])
    lst.set_defaults(func=cmd_list)
