"""Run a fedcomp configuration in Flower's Simulation Engine (one process, Ray actors)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._extras import check_installed
from ._client import make_client_app
from ._server import make_server_app


def run_simulation(config: dict[str, Any], out_dir: str | Path, *, num_nodes: int | None = None,
                   num_cpus: int | None = None, round_timeout: float = 300.0,
                   node_timeout: float = 120.0, verbose: bool = False) -> Path:
    """Run every (seed, mode, algorithm) of ``config`` through Flower's simulation engine.

    Parameters
    ----------
    config : dict
        A fedcomp configuration (as for ``fedcomp run``).
    out_dir : path
        Where ``results.csv``, ``config.json``, ``models/``, ... go.
    num_nodes : int, optional
        Virtual SuperNodes (default: one per client); node ``k`` hosts partition ``k``
        of the clients (``fedcomp.flower.partition_clients``).
    num_cpus : int, optional
        CPUs Ray may use (default: all); each ClientApp actor takes one.
    round_timeout, node_timeout : float
        Seconds to wait for a round's replies and for the nodes to connect.
    verbose : bool
        Flower's DEBUG logs.

    Returns
    -------
    Path
        ``out_dir``.
    """
    # Flower's simulation engine runs on Ray (flwr[simulation]); without it Flower would
    # sys.exit() from inside this call
    check_installed(["ray"], "fedcomp.flower.run_simulation")
    # Ray writes its own PYTHONPATH (this process's sys.path), PYTHONBREAKPOINT and RAY_*
    # variables into the environment of the process that imports and starts it, where every
    # later subprocess inherits them (a pip run into another venv then finds this fedcomp on
    # PYTHONPATH and installs nothing): the caller's environment is restored afterwards
    environment = dict(os.environ)
    try:
        return _run(config, Path(out_dir), num_nodes, num_cpus, round_timeout, node_timeout,
                    verbose)
    finally:
        os.environ.clear()
        os.environ.update(environment)


def _run(config: dict[str, Any], out: Path, num_nodes: int | None, num_cpus: int | None,
         round_timeout: float, node_timeout: float, verbose: bool) -> Path:
    """:func:`run_simulation`'s body (its caller restores the environment)."""
    from flwr.simulation import run_simulation as flwr_run_simulation

    from ..experiments import validate

    cfg = validate(config)
    if num_nodes is None:
        from ._server import _n_clients

        num_nodes = _n_clients(cfg)
    server = make_server_app(cfg, out_dir=str(out), num_nodes=num_nodes,
                             round_timeout=round_timeout, node_timeout=node_timeout)
    # address "local": a Ray instance of its own, never a cluster that another process
    # started (or one that died and left /tmp/ray/ray_current_cluster behind, which Ray
    # would try to join: "Simulation Runtime crashed")
    init_args: dict[str, Any] = {"address": "local", "include_dashboard": False,
                                 "log_to_driver": verbose, "configure_logging": verbose}
    init_args["num_cpus"] = num_cpus or max(1, min(num_nodes, os.cpu_count() or 1))
    os.environ.setdefault("RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO", "0")  # silences a Ray notice
    flwr_run_simulation(server_app=server, client_app=make_client_app(),
                        num_supernodes=num_nodes,
                        backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                        "init_args": init_args},
                        verbose_logging=verbose)
    return out
