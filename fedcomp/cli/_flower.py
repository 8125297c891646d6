"""``fedcomp flower app`` and ``fedcomp flower local``: a configuration run through Flower
(:mod:`fedcomp.flower` does the work; it needs ``fedcomp[flower]``)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .. import __version__
from ._common import _complete_config, _load_config, default_out, log


def _flower_config(args: argparse.Namespace) -> dict[str, Any]:
    return _load_config(args.config, args.set)


def _import_flower() -> Any:
    """``fedcomp.flower`` (a MissingExtraError naming ``fedcomp[flower]`` without Flower)."""
    from .. import flower

    return flower


def cmd_flower_app(args: argparse.Namespace) -> int:
    _import_flower()
    from ..flower._local import write_app

    out = write_app(_flower_config(args), args.out, results_dir=args.results,
                    num_nodes=args.nodes, node_timeout=args.node_timeout,
                    round_timeout=args.round_timeout, rejoin_timeout=args.rejoin_timeout)
    log.info(f"wrote the Flower app to {out}/ (pyproject.toml with [tool.flwr.app]); run it "
             f"with\n  flwr run {out} <superlink-connection> --stream\n"
             "after starting a SuperLink and SuperNodes with --node-config "
             "'partition-id=K num-partitions=N' (see the README)")
    return 0


def cmd_flower_local(args: argparse.Namespace) -> int:
    _import_flower()
    from ..flower._local import run_local

    config = _flower_config(args)
    out = Path(args.out) if args.out else default_out(config, "flower-")
    if (out / "results.csv").exists():
        log.error("%s/results.csv already exists; pass another --out or remove it", out)
        return 2
    log.info(f"fedcomp {__version__}: running {config.get('name', '?')} on a local Flower "
             f"deployment (1 SuperLink + {args.nodes} SuperNodes) -> {out}")
    status = run_local(config, out, nodes=args.nodes, node_timeout=args.node_timeout,
                       round_timeout=args.round_timeout, timeout=args.timeout,
                       checkpoint_dir=args.checkpoint_dir, rejoin_timeout=args.rejoin_timeout,
                       insecure=args.insecure)
    if status.get("status") != "ok":
        log.error("the Flower run failed: %s", status.get("error"))
        return 1
    log.info(f"results written to {out}/ (results.csv, config.json, models/, summary.md; "
             "Flower logs in flower-logs/)")
    return 0


def add_parser(sub: Any) -> None:
    """``fedcomp flower`` and its subcommands."""
    flower = sub.add_parser("flower", help="run an experiment through Flower (fedcomp[flower])",
                            description="Run a fedcomp configuration as a Flower app.")
    fsub = flower.add_subparsers(dest="flower_command", metavar="SUBCOMMAND", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        _complete_config(p.add_argument("config", help="CONFIG.toml or a built-in experiment "
                                                      "name"))
        p.add_argument("--set", action="append", metavar="KEY=VALUE",
                       help="override a config value (repeatable), as for 'fedcomp run'")
        p.add_argument("--node-timeout", type=float, default=120.0, metavar="S",
                       help="seconds the server waits for the SuperNodes (default 120)")
        p.add_argument("--round-timeout", type=float, default=300.0, metavar="S",
                       help="seconds the server waits for a round's replies (default 300)")
        p.add_argument("--rejoin-timeout", type=float, default=0.0, metavar="S",
                       help="seconds the server waits for a silent SuperNode to come back "
                            "(needs checkpoint-dir on the nodes; default 0: fail at once)")

    app = fsub.add_parser("app", help="write a ready Flower app for a config",
                          description="Write a Flower app (pyproject.toml with [tool.flwr.app] "
                                      "and the config as run config) to run with 'flwr run'.")
    common(app)
    app.add_argument("--out", required=True, metavar="DIR", help="the app directory")
    app.add_argument("--results", metavar="DIR", help="where the ServerApp writes results.csv "
                     "etc. on the SuperLink's machine (default: a temporary directory)")
    app.add_argument("--nodes", type=int, default=0, metavar="N", help="SuperNodes to wait "
                     "for (default: num-partitions reported by the nodes)")
    app.set_defaults(func=cmd_flower_app)

    local = fsub.add_parser("local", help="run on a SuperLink + N SuperNodes on 127.0.0.1",
                            description="Start a SuperLink and N SuperNodes on 127.0.0.1 as "
                                        "separate processes, run the config, stream progress, "
                                        "and stop every process afterwards.")
    common(local)
    local.add_argument("--nodes", type=int, required=True, metavar="N",
                       help="SuperNodes (node k hosts partition k of the clients)")
    local.add_argument("--out", metavar="DIR", help="output directory (default "
                       "runs/NAME-flower-TIME)")
    local.add_argument("--timeout", type=float, default=3600.0, metavar="S",
                       help="stop the whole run after this many seconds (default 3600)")
    local.add_argument("--checkpoint-dir", metavar="DIR",
                       help="SuperNodes checkpoint their client states here")
    local.add_argument("--insecure", action="store_true",
                       help="plain HTTP and no SuperNode authentication (default: TLS with a "
                            "throwaway CA and SuperNode keys made in the temporary home; see "
                            "the README on what that protects)")
    local.set_defaults(func=cmd_flower_local)
