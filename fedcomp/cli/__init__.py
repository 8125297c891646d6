"""The ``fedcomp`` command line: ``run``, ``show``, ``report``, ``list``, ``best``, ``plot``,
``data``, ``flower``, ``bench``, ``completion``.

``fedcomp run`` with no configuration runs the built-in default, the seed-000 comparison
(ZA1 vs FedMiD vs FedDA, full gradients and minibatches), prints the table and writes
``results.csv``, ``config.json``, ``models/``, ``summary.md`` and ``plot.png``.

One module per command (``_run``, ``_show``, ``_best``, ``_report``, ``_list``, ``_plot``,
``_data``, ``_flower``, ``_bench``, ``_completion``), each with ``add_parser(sub)`` and its
``cmd_*`` functions; ``_common`` holds what several share. This module assembles their
parsers (:func:`build_parser`) and turns a command's failure into one ``error:`` line
(:func:`main`).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .. import __version__
from .._lifetime import exit_code, signals_as_interrupt
from .._log import VERBATIM, console
from . import _bench, _best, _completion, _data, _flower, _list, _plot, _report, _run, _show
from ._common import DEFAULT_EXPERIMENT, default_jobs, default_out, log
from ._common import _load_config as _load_config  # tests/product/test_readme.py reads it
from ._plot import PLOT_AXES
from ._run import dry_run, idle_sweeps, resolve_run, resume_command, with_trackers

__all__ = ["DEBUG_ENV", "DEFAULT_EXPERIMENT", "PLOT_AXES", "build_parser", "default_jobs",
           "default_out", "dry_run", "idle_sweeps", "main", "resolve_run", "resume_command",
           "with_trackers"]

#: Environment variable: when set, ``fedcomp`` shows the traceback of an error instead
#: of the one-line ``error: ...`` message.
DEBUG_ENV = "FEDCOMP_DEBUG"
#: The exit status when stdout's reader closed the pipe early (128 + SIGPIPE, as a shell
#: reports a command that SIGPIPE ended).
BROKEN_PIPE = 141


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose usage errors are records of the ``"fedcomp"`` logger (printed
    as argparse prints them); ``--help`` and ``--version`` are output, on stdout."""

    def _print_message(self, message: str, file: Any = None) -> None:
        # argparse writes every message through this method; stderr is its errors' stream
        if message and file is sys.stderr:
            log.error(message.removesuffix("\n"), extra=VERBATIM)
        else:
            super()._print_message(message, file)


def build_parser() -> argparse.ArgumentParser:
    """The ``fedcomp`` parser: each command's module adds its subparser, in the order
    ``fedcomp --help`` lists them."""
    parser = _Parser(
        prog="fedcomp", description="Composite federated optimization: simulate, compare, plot.")
    parser.add_argument("--version", action="version", version=f"fedcomp {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in (_run, _best, _report, _list, _show, _plot, _data, _flower, _bench):
        command.add_parser(sub)
    _completion.add_parser(sub, parser)  # its script covers the whole parser
    return parser


def main(argv: list[str] | None = None) -> int:
    """``fedcomp ARGS``: the command's exit status. Its messages are records of the
    ``"fedcomp"`` logger, printed here as the CLI's lines for the length of the command."""
    with console():
        return _main(argv)


def _main(argv: list[str] | None) -> int:
    from .._extras import MissingExtraError
    from ..config import ConfigError

    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = argv
    if args.command is None:
        parser.print_help()
        return 0
    from ..runtime import reuse_freed_memory

    reuse_freed_memory()  # batched network rounds free and re-request MBs per operation
    try:
        # SIGTERM/SIGHUP (timeout, a scheduler, a closed terminal) tear down like Ctrl-C
        with signals_as_interrupt():
            return int(args.func(args))
    except BrokenPipeError:
        # the reader went away (`fedcomp list | head`): nothing more to say, and stdout
        # pointed at /dev/null so that Python's flush at exit does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE
    except (ConfigError, MissingExtraError, ValueError, OSError, TypeError) as exc:
        if os.environ.get(DEBUG_ENV):
            raise
        # MissingExtraError: an optional extra not installed (the message names the pip
        # install); OSError: a data or output file missing or unwritable; TypeError: a value
        # of the wrong type that validation let through (the message names it)
        hint = (f" (set {DEBUG_ENV}=1 for the traceback)" if isinstance(exc, TypeError)
                else "")
        log.error("%s%s", exc, hint)
        return 2
    except KeyboardInterrupt as exc:
        # cmd_run says where its rows are; any other command wrote none
        log.info("\ninterrupted")
        return exit_code(exc)
