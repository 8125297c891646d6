"""An experiment's folder in the report: the configuration it runs (``config.toml``), and
the ``report.json`` marker by which a finished run of the same configuration is reused
and an interrupted one resumed.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from ..config import to_jsonable
from ..experiments import ConfigMismatchError, validate
from ._result import ExperimentResult

#: Configuration keys that place an experiment in the report (its paper, its claim's words)
#: but change none of its runs: a finished run whose configuration differs only in them is
#: reused (the ``paper`` key, added after the shipped report ran, did not rerun hours of it).
PLACEMENT_KEYS = ("paper", "claim", "description")


def same_runs(done: dict[str, Any], wanted: dict[str, Any]) -> bool:
    """Whether two recorded configurations run the same experiment (placement keys aside)."""
    def runs(config: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in config.items() if k not in PLACEMENT_KEYS}

    return runs(done) == runs(wanted)


def write_config(config: dict[str, Any], path: Path) -> None:
    """Write the configuration an experiment runs as TOML (what ``fedcomp show`` prints).

    A timing configuration is written as given (it has no defaults to fill in), and so is
    one that does not validate (the run reports why).
    """
    from ..config import ConfigError, to_toml
    from ..experiments import as_written

    if config.get("kind") == "timing":
        path.write_text(to_toml(config))
        return
    try:
        path.write_text(to_toml(as_written(validate(config))))
    except ConfigError:
        path.write_text(to_toml(config))


def run_or_reuse(name: str, config: dict[str, Any], out: Path, stream: TextIO,
                 run: Callable[..., Any] | None = None, jobs: int = 1) -> ExperimentResult:
    """Run one experiment into ``out`` unless a finished run of the same config is there.

    A finished run is a ``summary.json`` beside a ``report.json`` recording the same
    configuration; anything else in ``out`` is an interrupted or different run and is
    rerun. Exceptions are caught and recorded (``error``), so one failure loses nothing
    else. ``jobs`` worker processes run its runs (the numbers do not depend on it).
    """
    from ..experiments import read_summary, run_experiment

    run = run or run_experiment
    result = ExperimentResult(name, config)
    marker = out / "report.json"
    wanted = json.loads(json.dumps(to_jsonable(config), default=str))
    if marker.exists() and (out / "summary.json").exists():
        done = json.loads(marker.read_text())
        if same_runs(done.get("config", {}), wanted):
            result.rows, result.seconds, result.reused = read_summary(out), done["seconds"], True
            return result
    marker.unlink(missing_ok=True)
    tic = time.perf_counter()
    try:
        _run_resuming(run, config, out, stream, jobs)
        result.rows = read_summary(out)
    except Exception as exc:  # noqa: BLE001 — recorded in the report, the others go on
        result.error = f"{type(exc).__name__}: {exc}"
        (out / "error.txt").write_text(traceback.format_exc())
    result.seconds = time.perf_counter() - tic
    if not result.error:
        marker.write_text(json.dumps({"config": wanted, "seconds": result.seconds}, indent=1))
    return result


def _run_resuming(run: Callable[..., Any], config: dict[str, Any], out: Path,
                  stream: TextIO, jobs: int = 1) -> None:
    """Run ``config`` into ``out``, resuming an interrupted run of the same configuration.

    The runner's ``runs.jsonl`` lists the runs that finished; ``resume=True`` keeps them and
    reruns the others. A directory of another configuration (or of a timing experiment,
    which has no runs to keep) is cleared and run from the start.
    """
    timing = config.get("kind") == "timing"
    options: dict[str, Any] = {} if timing or jobs == 1 else {"jobs": jobs}
    if (out / "runs.jsonl").exists() and not timing:
        try:
            run(config, out, progress=False, stream=stream, resume=True, **options)
            return
        except ConfigMismatchError:
            pass  # another configuration ran here: start afresh
    for stale in ("results.csv", "runs.jsonl", "summary.json"):
        (out / stale).unlink(missing_ok=True)
    run(config, out, progress=False, stream=stream, **options)
