"""fedcomp's messages: one :mod:`logging` logger, ``"fedcomp"``, behind every line fedcomp
writes that is not a command's output.

Status lines (``backend: ...``, ``[3/10] za1 seed 0 ...``, ``results written to ...``),
notices and errors are records of ``"fedcomp"`` or of a child (``"fedcomp.experiments"``,
``"fedcomp.cli"``). Until an application routes them, :data:`CONSOLE` writes them as the
command line has always printed them (the message; ``warning:`` or ``error:`` before a
warning or an error) on stderr, and steps aside once another handler prints them
(:func:`routed_elsewhere`). As with Flower's ``"flwr"`` and Ray's ``"ray"`` loggers:

- silence them: ``logging.getLogger("fedcomp").setLevel(logging.WARNING)``;
- route them: ``logging.getLogger("fedcomp").addHandler(handler)`` (then only ``handler``
  writes them), or ``logging.basicConfig(...)`` (they propagate to the root logger, whose
  console handler then writes them in its format); pytest's ``caplog`` sees them.

The command line installs its own :class:`ConsoleHandler` for the length of a command
(:func:`console`), so its lines do not depend on what the process configured.

Outside the logger: a command's output (``fedcomp list``'s table, ``fedcomp show``'s TOML, a
run's summary table), the per-round progress (a terminal's line, a notebook's widget), and
warnings, which stay :mod:`warnings` warnings.

Examples
--------
>>> import logging
>>> logging.getLogger("fedcomp").level == logging.INFO
True
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

#: The name of fedcomp's logger; modules log to children (``"fedcomp.experiments"``).
LOGGER_NAME = "fedcomp"

#: ``extra=`` of a record the command line prints on stdout (``wrote plot.png``), not stderr.
STDOUT = {"stdout": True}

#: ``extra=`` of a record printed as it is, whatever its level (argparse's usage and error).
VERBATIM = {"verbatim": True}

#: The command line's prefix of a record of this level (none below WARNING).
PREFIXES = {logging.WARNING: "warning: ", logging.ERROR: "error: ", logging.CRITICAL: "error: "}


def get_logger(name: str = "") -> logging.Logger:
    """``"fedcomp"``'s logger, or its child ``"fedcomp.NAME"``."""
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


class MessageFormatter(logging.Formatter):
    """A record as the command line prints it: ``warning: `` or ``error: `` before a warning
    or an error (not one logged with ``extra=VERBATIM``), the message alone otherwise (no
    time, level or logger name)."""

    def format(self, record: logging.LogRecord) -> str:
        prefix = "" if getattr(record, "verbatim", False) else PREFIXES.get(record.levelno, "")
        return prefix + record.getMessage()


class ConsoleHandler(logging.Handler):
    """Writes each record on the stream of the moment: ``sys.stdout`` for a record logged
    with ``extra=STDOUT``, else ``sys.stderr``. Looked up at each record, not kept, so
    ``contextlib.redirect_stderr`` and pytest's capture see the lines.

    Parameters
    ----------
    level : int, default logging.INFO
    fallback : bool, default False
        Write only while no other handler receives the record (on its logger, or on an
        ancestor it propagates to): :data:`CONSOLE`, the lines of a process that configured
        nothing.
    """

    def __init__(self, level: int = logging.INFO, *, fallback: bool = False) -> None:
        super().__init__(level)
        self.fallback = fallback
        self.setFormatter(MessageFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        if self.fallback and routed_elsewhere(record, self):
            return
        stream = sys.stdout if getattr(record, "stdout", False) else sys.stderr
        try:
            stream.write(self.format(record) + "\n")
            stream.flush()
        except Exception:  # noqa: BLE001 — logging's own contract: report, never raise
            self.handleError(record)


def routed_elsewhere(record: logging.LogRecord, handler: logging.Handler) -> bool:
    """Whether ``record`` reaches a handler other than ``handler``: any on ``"fedcomp"`` or
    a child (a ``NullHandler`` too: the way to leave the records to the root logger's
    handlers), or a console one of the root logger (``logging.basicConfig``'s), which
    prints them already. A root handler that only keeps them (pytest's capture, a file)
    leaves the console on."""
    logger: logging.Logger | None = logging.getLogger(record.name)
    while logger is not None:
        if logger is logging.root:
            return any(h is not handler and _prints(h) for h in logger.handlers)
        if any(h is not handler for h in logger.handlers):
            return True
        if not logger.propagate:
            return False
        logger = logger.parent  # type: ignore[assignment]
    return False


def _prints(handler: logging.Handler) -> bool:
    """Whether ``handler`` writes to this process's stderr or stdout."""
    stream = getattr(handler, "stream", None)
    return isinstance(handler, logging.StreamHandler) and stream is not None and any(
        stream is s for s in (sys.stderr, sys.stdout, sys.__stderr__, sys.__stdout__))


@contextmanager
def console(level: int = logging.INFO) -> Iterator[ConsoleHandler]:
    """A :class:`ConsoleHandler` on ``"fedcomp"`` for the length of the block (a command)."""
    handler = ConsoleHandler(level)
    logger = get_logger()
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def _configure() -> ConsoleHandler:
    """fedcomp's logger as a library finds it: INFO (unless set before), with
    :data:`CONSOLE`, the fallback that keeps a bare script's lines (as Flower's and Ray's
    loggers have a console handler of their own)."""
    logger = get_logger()
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    handler = next((h for h in logger.handlers if isinstance(h, ConsoleHandler)
                    and h.fallback), None)  # a reload keeps one
    if handler is None:
        handler = ConsoleHandler(fallback=True)
        logger.addHandler(handler)
    return handler


#: The fallback console of ``"fedcomp"``: the lines of a process that routed nothing.
CONSOLE = _configure()
