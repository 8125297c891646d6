"""What several commands share: the configuration a command names, its default output
directory and worker count, and the shell completion of a config argument."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path
from typing import Any

from .._log import get_logger

#: The commands' messages (status, notices, errors): records of ``"fedcomp.cli"``, which
#: :func:`fedcomp.cli.main` prints as they always were (:func:`fedcomp._log.console`). A
#: command's output (a table, a TOML file, a shell script) is printed, not logged.
log = get_logger("cli")

#: The experiment ``fedcomp run`` runs without a configuration.
DEFAULT_EXPERIMENT = "seed000"


def _load_config(spec: str | None, assignments: list[str] | None = None,
                 quick: bool = False, reading: str | None = None) -> dict[str, Any]:
    """The configuration a command names (a file or a built-in name): in ``reading`` (one
    of its ``[readings]``), at its ``[quick]`` sizes, then ``--set`` applied."""
    from ..config import apply_override, load, quick_config, reading_config

    config = load(spec or DEFAULT_EXPERIMENT)
    if reading is not None:
        config = reading_config(config, reading)
    if quick:
        config = quick_config(config)
    for assignment in assignments or []:
        config = apply_override(config, assignment)
    return config


def default_jobs(n_tasks: int) -> int:
    """Worker processes by default: one per (setting, seed), at most one per core."""
    return max(1, min(n_tasks, os.cpu_count() or 1))


def default_out(config: dict[str, Any], kind: str = "") -> Path:
    """``runs/NAME-[KIND]TIME``: the output directory of a run without ``--out``; ``name``
    must be a plain file name (``"../../x"`` would leave ``runs/``)."""
    from ..experiments._setting import check_name

    name = config.get("name", "run")
    check_name(name)
    return Path("runs") / f"{name}-{kind}{time.strftime('%Y%m%d-%H%M%S')}"


#: A config argument completes to the built-in experiments and *.toml files (shell
#: functions defined in :func:`~fedcomp.cli._completion.completion_preamble`).
CONFIG_COMPLETION = {"bash": "_fedcomp_configs", "zsh": "_fedcomp_configs"}


def _complete_config(action: argparse.Action) -> None:
    action.complete = CONFIG_COMPLETION  # type: ignore[attr-defined]  # read by shtab
