"""One ``logging.getLogger("fedcomp")`` behind every message (issue 45).

The CLI's messages (status, notices, errors) are records of that logger, printed by the
handler the CLI installs exactly as they were printed before; a command's output (``fedcomp
list``'s table, ``fedcomp show``'s TOML) stays print. A library user routes or silences the
messages the usual way, and the fallback console keeps a bare script's lines.
"""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest

import fedcomp
from fedcomp._log import CONSOLE, MessageFormatter, get_logger
from fedcomp.cli import main
from fedcomp.experiments._runner import Progress

#: A seed000 run of a second or two: two algorithms, full gradients, one metric (one
#: figure), one seed, three clients of 20 samples, 20 rounds.
SMALL = ["--set", "rounds=20", "--set", "data.n_clients=3", "--set",
         "data.samples_per_client=20", "--set", "algorithms=[{name='za1'}, {name='fedmid'}]",
         "--set", "batch_size='full'", "--set", "metrics=['objective']", "--seeds", "0",
         "--jobs", "1"]


class Records(logging.Handler):
    """Keeps every record it receives."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def run_cli(capsys, *argv):
    """``fedcomp ARGV`` in this process: its status, stdout, stderr and the records the
    ``"fedcomp"`` logger carried."""
    capsys.readouterr()
    handler = Records()
    get_logger().addHandler(handler)
    try:
        status = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's usage errors
        status = exc.code
    finally:
        get_logger().removeHandler(handler)
    out, err = capsys.readouterr()
    return status, out, err, handler.records


def printed(records, stdout=False):
    """The lines the CLI prints for ``records`` on stdout (or stderr)."""
    return "".join(MessageFormatter().format(r) + "\n" for r in records
                   if getattr(r, "stdout", False) == stdout)


def test_every_line_a_run_prints_on_stderr_is_a_record_of_the_logger(tmp_path, capsys):
    out = tmp_path / "run"
    status, stdout, err, records = run_cli(capsys, "run", "seed000", *SMALL, "--out", out)
    assert status == 0
    assert err == printed(records)  # every stderr line, in order, and nothing else
    names = {r.name for r in records}
    assert names == {"fedcomp.cli", "fedcomp.experiments"}
    assert err.startswith("fedcomp ") and "backend: numpy" in err and "[2/2] fedmid seed 0" in err
    assert "results written to" in err and "next: fedcomp plot" in err
    assert "| algorithm |" in stdout  # the summary table is the command's output
    # an error case: the same command again, refused before it runs
    status, stdout, err, records = run_cli(capsys, "run", "seed000", *SMALL, "--out", out)
    assert status == 2 and stdout == "" and err == printed(records)
    assert [r.levelno for r in records] == [logging.ERROR]
    assert err.splitlines()[-1].startswith(f"error: {out}/results.csv already exists")
    # a status line the CLI prints on stdout, and a plot command's error
    status, stdout, err, records = run_cli(capsys, "plot", out, "--metric", "objective")
    assert status == 0 and err == "" and stdout == printed(records, stdout=True)
    assert stdout.startswith("wrote ")
    status, stdout, err, records = run_cli(capsys, "plot", out, "--metric", "nope")
    assert status == 2 and stdout == "" and err == printed(records)
    assert err.startswith("error: no column 'nope'")


def test_main_turns_a_failure_into_one_error_record(capsys):
    status, stdout, err, records = run_cli(capsys, "show", "no_such_experiment")
    assert status == 2 and stdout == "" and err == printed(records)
    assert len(records) == 1 and records[0].levelno == logging.ERROR
    assert err.startswith("error: ")
    # argparse's usage error, printed as argparse prints it
    status, stdout, err, records = run_cli(capsys, "run", "--no-such-option")
    assert status == 2 and stdout == "" and err == printed(records)
    assert err.startswith("usage: fedcomp ") and "error: unrecognized arguments" in err
    assert {r.levelno for r in records} == {logging.ERROR}


@pytest.mark.parametrize("argv", [["list"], ["show", "seed000"]])
def test_a_commands_output_is_printed_not_logged(capsys, argv):
    status, stdout, err, records = run_cli(capsys, *argv)
    assert status == 0 and stdout and err == "" and records == []


def test_a_library_user_routes_or_silences_the_messages(capsys):
    logger = logging.getLogger("fedcomp")
    Progress(True, 3, 1)  # "resuming: ..."
    assert capsys.readouterr().err == "resuming: 1 of 3 runs already finished\n"  # no config
    handler = Records()
    logger.addHandler(handler)
    try:
        Progress(True, 3, 1)
    finally:
        logger.removeHandler(handler)
    assert capsys.readouterr().err == ""  # routed: the console steps aside
    assert [r.getMessage() for r in handler.records] == [
        "resuming: 1 of 3 runs already finished"]
    level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        Progress(True, 3, 1)
    finally:
        logger.setLevel(level)
    assert capsys.readouterr().err == ""  # silenced
    assert CONSOLE in logger.handlers and fedcomp  # the console stays for the next script


def test_no_module_prints_a_message_on_stderr():
    """The survey, kept: nothing in fedcomp prints to stderr but the progress line of a run
    (:mod:`fedcomp.runtime._recording`), so a new message goes through the logger."""
    root = Path(fedcomp.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if "stderr" not in path.read_text():
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            text = ast.unparse(node) if isinstance(node, ast.Call) else ""
            if ("sys.stderr" in text and text.startswith("print(")) or text.startswith(
                    "sys.stderr.write("):
                found.append(f"{path.relative_to(root)}:{node.lineno}")
    assert {spot.split(":")[0] for spot in found} <= {"runtime/_recording.py"}, found
