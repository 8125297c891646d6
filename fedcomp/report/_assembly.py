"""The report assembled: every experiment run (or reused) in each of its readings, judged by
its verdict rule, drawn, and the pages rewritten after each one.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TextIO

from .._extras import check_installed
from ..config import AS_WRITTEN, diagnoses, reading_base, readings
from ._catalogue import (
    experiment_configs,
    jobs_for,
    reading_names,
    reading_run_config,
    stale_folders,
)
from ._environment import environment
from ._figures import draw_figures
from ._markers import run_or_reuse, write_config
from ._page import write_report
from ._result import ExperimentResult
from ._site import write_site

#: An experiment's files the page links to, those its directory holds: the configuration
#: that ran (resolved: defaults filled in, ``--quick`` and ``--seeds`` applied), the
#: metrics of every evaluation, the final rows, the log and a failure's traceback.
LINKED_FILES = ("config.toml", "results.csv", "summary.json", "personal.csv", "log.txt",
                "error.txt")


def judge(result: ExperimentResult) -> tuple[str, str]:
    """``(verdict, rule)`` of an experiment from its final rows (the module's rule)."""
    from ..experiments import EXPERIMENTS, TIMINGS
    from ..experiments._results import judge as judge_claim

    module = EXPERIMENTS.get(result.config.get("name", result.name))
    if result.error:
        return "not run (error)", ""
    if module is None or not hasattr(module, "verdict"):
        return "not assessed (no verdict rule)", ""
    if result.config.get("name") in TIMINGS:
        return module.verdict(result.rows, result.config)
    judged = judge_claim(result.checked(), result.rows)
    assert judged is not None  # the module has a rule
    return judged


def run_report(out_dir: str | Path, *, quick: bool = False, only: list[str] | None = None,
               seeds: list[int] | None = None, config_dir: str | Path | None = None,
               configs: list[tuple[str, dict[str, Any]]] | None = None,
               stream: TextIO | None = None, command: str | None = None,
               only_readings: list[str] | None = None, jobs: int = 1
               ) -> list[ExperimentResult]:
    """Run (or reuse) every experiment in each of its readings and write ``index.html``
    and ``report.md`` (the report as one page) and the documentation site's pages
    (``index.md`` and ``paper-KEY.md``: :func:`~fedcomp.report.write_site`).

    Parameters
    ----------
    out_dir : path
        The report directory; experiment ``NAME`` runs into ``out_dir/NAME`` as written and
        into ``out_dir/NAME/READING`` in each other reading of its ``[readings]``.
    quick : bool
        Apply each config's ``[quick]`` reductions (:func:`fedcomp.config.quick_config`).
    only : list of str, optional
        Experiment names to include (default: every config).
    seeds : list of int, optional
        Overrides every config's seeds.
    config_dir : path
        A folder of ``*.toml`` configs to report on instead of the built-in experiments.
    configs : list of (name, config), optional
        The experiments themselves instead of ``config_dir``'s files.
    stream : text stream, optional
        Progress and the experiments' tables (default: stderr).
    command : str, optional
        The command line that made the report, for its header (``fedcomp report`` passes
        its own; :func:`environment`).
    only_readings : list of str, optional
        Only these readings (and the bases they start from; default: every reading,
        diagnoses included).
    jobs : int, default 1
        Worker processes per experiment (:func:`jobs_for`: 1 where a verdict compares wall
        times). The numbers do not depend on it.

    Returns
    -------
    list of ExperimentResult
    """
    # every experiment's figures need matplotlib: refuse before hours of runs, not after
    check_installed(["matplotlib"], "fedcomp report (its figures)")
    say = _sayer(stream)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    selected = configs if configs is not None else experiment_configs(config_dir, only)
    every = configs if configs is not None else experiment_configs(config_dir)
    stale = stale_folders(out, {name: set(readings(raw)) for name, raw in every})
    if stale:
        listed = ", ".join(str(path.relative_to(out)) for path in stale)
        raise ValueError(f"{out} holds run folders no configuration names: {listed}. A report "
                         "would mix them with what the configs run: delete them (rm -r) or "
                         "name them as a reading in their experiment's config")
    if only_readings:
        known = {reading for _, raw in selected for reading in readings(raw)}
        unknown = sorted(set(only_readings) - known)
        if unknown:
            raise ValueError(f"unknown reading(s) {unknown}; the experiments have "
                             f"{sorted(known)}")
    todo = [(name, raw, reading) for name, raw in selected
            for reading in reading_names(raw, only_readings)]
    results: list[ExperimentResult] = []
    header = environment(command)
    started = time.perf_counter()
    for index, (name, raw, reading) in enumerate(todo):
        config = reading_run_config(raw, reading, quick=quick, seeds=seeds)
        result = ExperimentResult(name, config, reading=reading, follows=readings(raw)[reading],
                                  base=reading_base(raw, reading) if reading != AS_WRITTEN
                                  else "", diagnosis=diagnoses(raw).get(reading, ""))
        elapsed = time.perf_counter() - started
        done = sum(not r.reused for r in results)
        eta = f", ETA {elapsed / done * (len(todo) - index):.0f}s" if done else ""
        say(f"[{index + 1}/{len(todo)}] {result.key} (elapsed {elapsed:.0f}s{eta})")
        folder = out / result.key
        folder.mkdir(parents=True, exist_ok=True)
        write_config(config, folder / "config.toml")
        # appended: a reused experiment keeps the log of the run that made it
        with open(folder / "log.txt", "a") as log:
            ran = run_or_reuse(name, config, folder, log, jobs=jobs_for(name, jobs))
        result.rows, result.seconds, result.reused, result.error = (
            ran.rows, ran.seconds, ran.reused, ran.error)
        if not result.error:
            try:
                result.verdict, result.rule = judge(result)
                result.figures = draw_figures(result, folder)
            except Exception as exc:  # noqa: BLE001 — a broken rule or figure is reported
                result.error = f"{type(exc).__name__}: {exc}"
        if result.error:
            result.verdict = "not run (error)"
        result.files = [f for f in LINKED_FILES if (folder / f).is_file()
                        and (f != "error.txt" or result.error)]  # not an earlier run's
        state = "reused" if result.reused else f"{result.seconds:.0f}s"
        say(f"    {state}: {result.error or result.verdict}")
        results.append(result)
        # after each one: the standalone page and the site's pages
        write_report(out, results, quick, time.perf_counter() - started, header=header)
        write_site(out, results, quick, time.perf_counter() - started, header=header)
    return results


def exit_status(results: list[ExperimentResult]) -> int:
    """0 when every experiment ran, 1 when any failed."""
    return int(any(r.error for r in results))


def _sayer(stream: TextIO | None) -> Any:
    """Where the progress lines go: ``stream`` when one is given, else ``"fedcomp.report"``'s
    logger (:mod:`fedcomp._log`; the CLI prints its records on stderr)."""
    if stream is None:
        from .._log import get_logger

        return get_logger("report").info
    return lambda line: print(line, file=stream, flush=True)
