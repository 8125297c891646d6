"""``fedcomp show``: an experiment's configuration as TOML, resolved or as shipped."""

from __future__ import annotations

import argparse
from typing import Any

from ._common import _complete_config, _load_config


def cmd_show(args: argparse.Namespace) -> int:
    """Print an experiment's configuration: resolved (defaults filled in) or as shipped."""
    from ..config import experiment_source, to_toml
    from ..experiments import as_written, validate

    if args.source:
        if args.set or args.quick or args.reading:
            raise ValueError("--source prints the file as shipped: leave out --set, --quick "
                             "and --reading")
        print(experiment_source(args.config), end="")
        return 0
    config = _load_config(args.config, args.set, quick=args.quick, reading=args.reading)
    if config.get("kind") == "timing":
        from ..experiments._catalog import timing_module

        timing_module(config).check_config(config)
        print(to_toml(config), end="")
        return 0
    print(to_toml(as_written(validate(config))), end="")
    return 0


def add_parser(sub: Any) -> None:
    """``fedcomp show``: the configuration, ``--set``, ``--quick``, ``--reading``, ``--source``."""
    show = sub.add_parser("show", help="print an experiment's resolved configuration (TOML)",
                          description="Print a configuration as TOML with every default filled "
                                      "in (what 'fedcomp run' would run), or the shipped file "
                                      "with its comments (--source). Save it, edit it, and "
                                      "run the file.")
    _complete_config(show.add_argument("config", help="a built-in experiment name or "
                                       "CONFIG.toml"))
    show.add_argument("--set", action="append", metavar="KEY=VALUE",
                      help="override a config value first (repeatable)")
    show.add_argument("--quick", action="store_true", help="with its [quick] reduced sizes")
    show.add_argument("--reading", metavar="NAME", help="in one of its [readings] (e.g. "
                      "as_run: the conventions of the authors' code); default as_written")
    show.add_argument("--source", action="store_true", help="the built-in experiment's TOML "
                      "file as shipped, comments included")
    show.set_defaults(func=cmd_show)
