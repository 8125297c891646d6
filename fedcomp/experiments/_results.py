"""The last stage of the experiment pipeline: the output directory and what is read from it.

Output directory contract (``fedcomp best``, ``fedcomp plot``, ``fedcomp report`` and
``--resume`` rely on it):

* ``results.csv`` — one row per evaluation, appended as the run goes (a crash loses nothing
  already written; with worker processes, when each run ends), columns
  :data:`~fedcomp.experiments._plan.RESULT_COLUMNS` plus the variant, the swept keys and any
  extra metrics;
* ``runs.jsonl`` — one line per finished run (its key and summary row): what ``--resume``
  skips; ``parts/`` holds the rows of runs in progress in worker processes;
* ``config.json`` — the resolved configuration, package versions, seeds, the sweep, and per
  setting the problem's fingerprint and the reference solution's accuracy;
* ``models/<run>_seed<k>.npy`` — final models (``<run>`` is the run label: the algorithm
  label, suffixed by the gradient mode when a config has several, by the variant when it
  has variants, and by ``_<param><value>`` per swept key);
* ``summary.md`` — the table printed at the end, with the claim's verdict;
* ``summary.json`` — the final row of every run (what the table and the verdict are
  computed from), written last: its presence marks a finished experiment;
* ``.lock`` — present while a run writes the directory: it holds an exclusive ``flock``
  and the writer's pid; a second run into the same directory stops at once
  (:func:`output_lock`);
* ``plot.png`` — log optimality (or objective) vs rounds, one panel per gradient mode,
  and ``plot_<metric>.png`` for every metric of the config, when matplotlib is installed.

Also here: :func:`final_metrics` and :func:`claim_verdict` (the verdict rules read the
summary), and :func:`best_settings` (``fedcomp best``).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import math
import os
import platform
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from .. import __version__
from .._extras import MissingExtraError
from .._log import get_logger
from ..config import ConfigError, to_jsonable
from ._catalog import rule_module
from ._plan import Run, cell
from ._setting import Experiment
from ._verdict import DIVERGED, SEEDS, SeedFinals, judge_over_seeds

#: Notices and warnings of the output directory (a child of ``"fedcomp"``'s logger).
log = get_logger("experiments")

#: Metrics where larger is better (``fedcomp best`` maximises them unless ``--mode`` says).
MAXIMIZED = ("accuracy", "f1", "auc", "precision", "recall")


class OutputExistsError(ConfigError):
    """The output directory already holds results (and ``resume`` was not asked for)."""


class OutputInUseError(ConfigError):
    """Another process is writing the output directory (it holds its lock)."""


class ConfigMismatchError(ConfigError):
    """``resume`` in a directory written by another configuration (the message says how)."""


def versions() -> dict[str, str]:
    """Versions of fedcomp, Python and the numerical stack (for ``config.json``)."""
    out = {"fedcomp": __version__, "python": platform.python_version(), "numpy": np.__version__}
    for name in ("scipy", "array_api_compat", "torch", "matplotlib"):
        module = sys.modules.get(name)
        if module is None:
            try:
                module = __import__(name)
            except ImportError:
                continue
        out[name] = getattr(module, "__version__", "?")
    if "flwr" in sys.modules:  # run through fedcomp.flower (never imported just for this)
        out["flwr"] = getattr(sys.modules["flwr"], "__version__", "?")
    return out



#: The lock file of an output directory (:func:`output_lock`).
LOCK_FILE = ".lock"


@contextlib.contextmanager
def output_lock(out: Path) -> Iterator[None]:
    """Hold ``out``'s lock for the duration of a run (creating ``out``).

    Two runs into one directory would delete each other's ``parts/`` and ``runs.jsonl`` and
    write rows twice; the second one stops here instead, at once, with
    :class:`OutputInUseError` naming the directory and the holder's pid. The lock is an
    exclusive, non-blocking ``fcntl.flock`` on ``out/.lock``: the kernel drops it when the
    holder exits, however it ends (a SIGKILL leaves no stale lock, only a file the next run
    locks again). The file is removed on the way out while still locked; a process that
    locked the removed file meanwhile sees that its path now names another file (or none)
    and tries again, so two holders never coexist.

    Where ``fcntl`` does not exist (Windows), or the file system cannot lock (some network
    mounts: a warning says so), no lock is taken.
    """
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    out.mkdir(parents=True, exist_ok=True)
    path = out / LOCK_FILE
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
            os.close(fd)
            raise OutputInUseError(
                f"{out} is being written by another fedcomp run (pid {holder}); pass another "
                f"--out, or wait for that run to finish") from None
        except OSError as exc:  # a file system without locks (some network mounts)
            os.close(fd)
            if exc.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                raise
            log.warning("%s: the file system does not lock files (%s); make sure no other run "
                        "writes this directory", out, exc.strerror)
            yield
            return
        try:
            same = os.fstat(fd).st_ino == os.stat(path).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed the file we locked: lock the new one
    try:
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        path.unlink(missing_ok=True)
        os.close(fd)  # releases the lock


#: The folders an experiment's run writes beside its files: every run's final model, and
#: the rows of runs in worker processes until they are merged.
RUN_FOLDERS = ("models", "parts")


def start_directory(out: Path, meta: dict[str, Any], resume: bool
                    ) -> dict[str, dict[str, Any]]:
    """Create ``out`` (a resume checked already: :mod:`~fedcomp.experiments._resume`); the
    finished runs by key. A refusal comes before anything in ``out`` changes."""
    if not resume and (out / "results.csv").exists():
        raise OutputExistsError(f"{out}/results.csv already exists; pass another --out, "
                                "remove it, or --resume")
    (out / "models").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(out / "parts", ignore_errors=True)  # an interrupted run's partial rows
    (out / "parts").mkdir()
    if not resume:
        (out / "runs.jsonl").unlink(missing_ok=True)
        return {}
    drop_torn_record(out / "runs.jsonl")
    return finished_runs(out)


def _record(line: str) -> dict[str, Any] | None:
    """A ``runs.jsonl`` line's record, or None when it is not one (a torn write)."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return None
    return record if isinstance(record, dict) and "id" in record and "row" in record else None


def drop_torn_record(path: Path) -> None:
    """Cut a torn last line off ``runs.jsonl`` (a run killed while recording itself).

    A record is written as one line ending in a newline; a last line without its newline,
    or one that is not a whole record, is an unfinished write: that run is not finished
    (it runs again), and the next record must not be glued onto the fragment.
    """
    if not path.exists():
        return
    data = path.read_bytes()
    cut = data.rfind(b"\n") + 1  # the end of the last whole line
    tail = data[cut:]
    if tail.strip() and _record(tail.decode("utf-8", "replace")) is None:
        with path.open("r+b") as f:
            f.truncate(cut)


def finished_runs(out: Path) -> dict[str, dict[str, Any]]:
    """The summary rows of the runs recorded in ``out/runs.jsonl``, by run key.

    A torn last line (a run killed while recording itself) is not a record: that run is
    not finished. A damaged line before it is an error naming the file and line.
    """
    finished: dict[str, dict[str, Any]] = {}
    path = out / "runs.jsonl"
    if path.exists():
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            record = _record(line)
            if record is None:
                if number == len(lines):  # an unfinished write (drop_torn_record cuts it)
                    continue
                raise ConfigError(f"{path}, line {number}: not a run record ({line[:60]!r}); "
                                  "the file is damaged: delete that line (its run is then "
                                  "rerun by --resume) or use another --out")
            finished[record["id"]] = record["row"]
    return finished


def config_differences(before: Any, after: Any, path: str = "") -> list[str]:
    """Human-readable differences between two JSON-like values (``"rounds: 10 -> 20"``).

    Examples
    --------
    >>> config_differences({"a": 1, "b": {"c": 2}}, {"a": 1, "b": {"c": 3}, "d": 0})
    ['b.c: 2 -> 3', 'd: (absent) -> 0']
    """
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            where = f"{path}.{key}" if path else str(key)
            if key not in before or key not in after:
                out.append(f"{where}: {before.get(key, '(absent)')} -> "
                           f"{after.get(key, '(absent)')}")
            else:
                out += config_differences(before[key], after[key], where)
        return out
    return [] if before == after else [f"{path}: {before} -> {after}"]


def keep_finished_rows(path: Path, finished: dict[str, Any], key_columns: list[str]
                       ) -> set[str]:
    """Drop from ``results.csv`` the rows of runs not recorded as finished (a crash's);
    the keys of the runs that have rows there.

    A torn row (a last line cut mid-write, without its line end, or a row of another
    length than the header) is dropped with every row of its run, and a warning names
    the file and line: that run's rows are incomplete, so it is not counted as present
    (:func:`without_rows` then runs it again).
    """
    if not path.exists():
        return set()
    with path.open(newline="") as f:
        text = f.read()
    reader = csv.reader(text.splitlines(keepends=True))
    header = next(reader, None)
    rows = list(reader)
    if header is None:
        return set()
    index = [header.index(c) if c in header else None for c in key_columns]
    keys = [json.dumps([r[i] if i is not None and i < len(r) else "" for i in index])
            for r in rows]
    torn = _torn_runs(path, header, rows, keys, index, cut=not text.endswith("\n"))
    keep = [r for r, key in zip(rows, keys, strict=True) if key in finished and key not in torn]
    if len(keep) != len(rows):
        tmp = path.with_suffix(".tmp")
        with tmp.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(header)
            writer.writerows(keep)
        tmp.replace(path)
    return {key for key in keys if key in finished and key not in torn}


def _torn_runs(path: Path, header: list[str], rows: list[list[str]], keys: list[str],
               index: list[int | None], cut: bool) -> set[str]:
    """The keys of the runs with a torn row in ``rows`` (``cut``: the file's last line has
    no line end), each named in a warning with its line. A row cut inside its key columns
    (``index``) may belong to the run of the row before it, a run's rows being written one
    after another: that run runs again too (rerunning a whole run is harmless)."""
    last_key = max((i for i in index if i is not None), default=-1)
    torn: set[str] = set()
    for number, row in enumerate(rows):
        end = cut and number == len(rows) - 1
        if len(row) == len(header) and not end:
            continue
        torn.add(keys[number])
        if len(row) <= last_key + 1 and number:  # its key itself may be cut
            torn.add(keys[number - 1])
        how = ", cut without its line end" if end else ""
        log.warning(f"--resume: {path}, line {number + 2}: a torn row ({len(row)} of "
                    f"{len(header)} fields{how}); dropped with the rest of its run, which "
                    "runs again")
    return torn


def without_rows(finished: dict[str, dict[str, Any]], present: set[str]
                 ) -> dict[str, dict[str, Any]]:
    """The finished runs of ``finished`` that have rows in ``results.csv`` (``present``)
    or did not end ``ok``; a warning on stderr names the others, which run again.

    An ``ok`` run recorded in ``runs.jsonl`` without rows lost them (``results.csv``
    edited, restored from an older copy, a full disk between the rows and the record):
    skipping it would leave a hole in the results.
    """
    lost = [key for key, row in finished.items()
            if key not in present and row.get("status", "ok") == "ok"]
    if lost:
        names = ", ".join(" ".join(json.loads(key)) for key in lost[:5])
        log.warning(f"--resume: {len(lost)} run(s) recorded as finished have no rows in "
                    f"results.csv ({names}{', ...' if len(lost) > 5 else ''}); running them "
                    "again")
    return {key: row for key, row in finished.items() if key not in lost}



def record_run(out: Path, index: int, run: Run, key: str, row: dict[str, Any],
               columns: list[str], meta: dict[str, Any]) -> None:
    """Move a finished run's rows into ``results.csv``, save its model, mark it finished."""
    part = out / "parts" / f"{index}.csv"
    if part.exists():  # a worker's rows (in-process runs log to results.csv directly)
        lines = part.read_text().splitlines(keepends=True)[1:]
        results = out / "results.csv"
        new = not (results.exists() and results.stat().st_size > 0)
        with results.open("a", newline="") as f:
            if new:
                csv.writer(f).writerow(columns)
            f.writelines(lines)
    x = row.get("_x")
    if row["status"] == "ok" and x is not None:
        np.save(out / "models" / f"{run.model}_seed{run.seed}.npy", x)
    if row.get("_personal"):  # a personalised run: its clients' rows, tagged with the run
        write_personal_rows(out / "personal.csv", run.tags, row["_personal"])
    if run.setting_name not in meta["settings"]:
        meta["settings"][run.setting_name] = row.get("_setting_meta")
        (out / "config.json").write_text(json.dumps(meta, indent=2, default=str) + "\n")
    summary = {k: v for k, v in row.items() if not k.startswith("_")}
    with (out / "runs.jsonl").open("a") as f:  # this line marks the run finished
        f.write(json.dumps({"id": key, "key": {c: cell(v) for c, v in run.tags.items()},
                            "row": summary}, default=_json_default) + "\n")
    part.unlink(missing_ok=True)


def write_personal_rows(path: Path, tags: dict[str, Any], rows: list[dict[str, Any]]
                        ) -> None:
    """Append a personalised run's per-client rows (its tags first) to ``personal.csv``."""
    columns = [*tags, *rows[0]]
    new = not (path.exists() and path.stat().st_size > 0)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        if new:
            writer.writeheader()
        for row in rows:
            writer.writerow({**{k: cell(v) for k, v in tags.items()}, **row})


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return str(value)


def main_metric(metrics: list[str]) -> str:
    """An experiment's main metric: optimality when there is an x*, else its first metric
    (``plot.png``, the report's figures, "seeds best").

    Examples
    --------
    >>> main_metric(["objective", "optimality"]), main_metric(["test_accuracy"])
    ('optimality', 'test_accuracy')
    """
    return "optimality" if "optimality" in metrics else metrics[0]


def write_outputs(experiment: Experiment, out: Path, summary: list[dict[str, Any]],
                  stream: TextIO) -> None:
    """``summary.md`` (table, verdict), printed too, ``summary.json`` and the plots."""
    cfg = experiment.config
    sweep_keys = list(experiment.sweep_values)
    table = summary_table(summary, cfg["metrics"], experiment.has_variants, sweep_keys)
    # a sweep changes the paper's hyperparameters: its claim is not judged on the grid
    verdict = "" if sweep_keys else claim_verdict(cfg, summary)
    # a sweep's points are told apart by the per-run table only (the medians pool them)
    medians = table if sweep_keys else median_table(summary, cfg["metrics"])
    text = (f"# {cfg['name']}\n\n{cfg['description']}\n\n" + (
        f"## Median over seeds\n\n{medians}\n\n## Every run\n\n" if not sweep_keys else "")
        + f"{table}\n")
    if verdict:
        text += f"\nClaim: {cfg['claim']}\n\n{verdict}\n"
    (out / "summary.md").write_text(text)
    write_summary(out, summary)
    print(medians, file=stream)
    if verdict:
        print(verdict, file=stream)
    shutil.rmtree(out / "parts", ignore_errors=True)
    try:
        from ..plotting import choose_metric, plot_results, read_results

        plot_results(out / "results.csv", out / "plot.png", metric=main_metric(cfg["metrics"]),
                     title=cfg["name"])
        rows = read_results(out / "results.csv")
        for metric in cfg["metrics"]:  # one figure per recorded metric
            # not one undefined for every run (all NaN, e.g. rank of a vector model)
            if metric not in ("support",) and choose_metric(rows, metric) == metric:
                plot_results(out / "results.csv", out / f"plot_{metric}.png", metric=metric,
                             title=cfg["name"], fallback=False)
    except MissingExtraError as exc:
        log.info("no plot.png: %s", exc)


def write_summary(out: Path, summary: list[dict[str, Any]]) -> Path:
    """Write ``summary.json``: the final rows of the runs (NaN as ``null``)."""
    def clean(value: Any) -> Any:
        value = to_jsonable(value)
        return None if isinstance(value, float) and value != value else value

    rows = [{k: clean(v) for k, v in row.items() if not k.startswith("_")} for row in summary]
    path = out / "summary.json"
    path.write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return path


def read_summary(out: str | Path) -> list[dict[str, Any]]:
    """The rows :func:`write_summary` wrote (``null`` back to NaN)."""
    rows = json.loads((Path(out) / "summary.json").read_text())
    return [{k: (math.nan if v is None else v) for k, v in row.items()} for row in rows]



def final_metrics(summary: list[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, float]]:
    """Median over seeds of every final metric, keyed by (label, mode[, variant]).

    ``label`` is the algorithm entry's label (its name unless the config gives one),
    ``mode`` is ``"full"`` or ``"b<batch size>"``; the variant is appended when the
    configuration has variants. The medians are over the seeds that converged; every key
    also gets ``"diverged"`` and ``"seeds"``, how many of its seeds diverged and ran (a key
    whose every seed diverged has only those two), so that a verdict rule sees a method
    that diverged on some seeds (:mod:`fedcomp.experiments._verdict`) instead of the median
    of its survivors.
    """
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in summary:
        key = (row["label"], row["batch_size"]) + (
            (row["variant"],) if "variant" in row else ())
        groups.setdefault(key, []).append(row)
    finals: dict[tuple[str, ...], dict[str, float]] = {}
    for key, rows in groups.items():
        ok = [r for r in rows if r.get("status") == "ok"]
        first: dict[str, Any] = ok[0] if ok else {}
        numeric = {m for m, v in first.items()
                   if isinstance(v, int | float) and not isinstance(v, bool)}
        medians = {m: float(np.median([float(r[m]) for r in ok])) for m in numeric}
        medians |= {DIVERGED: float(len(rows) - len(ok)), SEEDS: float(len(rows))}
        # each seed's own finals, for the paired margins of the rules' comparisons
        seeds = [r.get("seed") for r in ok]
        by_seed = ({r.get("seed"): {m: float(r[m]) for m in numeric} for r in ok}
                   if len(set(seeds)) == len(seeds) else None)
        finals[key] = SeedFinals(medians, by_seed)
    return finals


def judge(cfg: dict[str, Any], summary: list[dict[str, Any]]) -> tuple[str, str] | None:
    """``(verdict, rule)`` of a paper experiment (by config name), or None without a rule.

    The rule lives in the experiment module: ``verdict(finals, config, **inputs)`` with
    ``finals`` from :func:`final_metrics` returns ``(verdict, rule)``; ``inputs`` are what
    the module's optional ``verdict_inputs(config)`` measures once (FedCanon's re-timed
    runs) and its optional ``run_inputs(summary)`` reads from all the runs' rows at once
    (the data they recorded having). The rule is applied over seeds
    (:func:`~fedcomp.experiments._verdict.over_seeds`).
    """
    module = rule_module(cfg["name"])
    if module is None or not hasattr(module, "verdict"):
        return None
    inputs = module.verdict_inputs(cfg) if hasattr(module, "verdict_inputs") else {}
    if hasattr(module, "run_inputs"):
        inputs |= module.run_inputs(summary)
    return judge_over_seeds(module.verdict, summary, final_metrics, cfg, **inputs)


def claim_verdict(cfg: dict[str, Any], summary: list[dict[str, Any]]) -> str:
    """"Verdict: ... (rule: ...)" of a paper experiment (:func:`judge`), or ``""``."""
    judged = judge(cfg, summary)
    return "" if judged is None else f"Verdict: {judged[0]} (rule: {judged[1]})"


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # a metric undefined for this run (see summary_table)
            return "—"
        if value.is_integer() and abs(value) < 1e9:
            return str(int(value))
        return f"{value:.3e}"
    return str(value)


def summary_table(rows: list[dict[str, Any]], metrics: list[str], variants: bool = False,
                  swept: list[str] | None = None) -> str:
    """A Markdown table of the final row of every run (the swept keys as columns).

    A NaN metric is one the run does not define (``rank`` of a vector model, ``optimality``
    without a reference, ``support_f1`` without a ground truth) and shows as "—".
    """
    columns = ["algorithm", *(["variant"] if variants else []), *(swept or []), "seed", "round",
               *[m for m in metrics if m != "support"],
               "grad_evals", "prox_evals_client", "prox_evals_server", "floats_up", "wall_s",
               "status"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        status = row.get("status", "ok")
        row = {**row, "status": status if len(status) < 60 else status[:57] + "..."}
        lines.append("| " + " | ".join(_fmt(row.get(c, "")) for c in columns) + " |")
    return "\n".join(lines)


def median_table(summary: list[dict[str, Any]], metrics: list[str]) -> str:
    """A Markdown table of one row per algorithm and gradient mode (and variant): the
    median over seeds of each final metric (:func:`final_metrics`), with the seeds run and
    how many diverged — what the command line prints; ``summary.md`` also holds every
    run's row (:func:`summary_table`)."""
    finals = final_metrics(summary)
    shown = [m for m in metrics if m != "support"]
    variants = any(len(key) > 2 for key in finals)
    columns = ["algorithm", "mode", *(["variant"] if variants else []), *shown,
               "wall_s", "seeds", "diverged"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for key, values in finals.items():
        cells = [str(key[0]), str(key[1]), *([str(key[2])] if variants else []),
                 *(_fmt(values.get(m, math.nan)) for m in [*shown, "wall_s"]),
                 str(int(values[SEEDS])), str(int(values[DIVERGED]))]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def metric_mode(metric: str) -> str:
    """``"max"`` for accuracy-like metrics (``test_accuracy``, ``support_f1``), else ``"min"``."""
    return "max" if any(metric.endswith(s) for s in MAXIMIZED) else "min"


def _number(text: str) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return math.nan


def final_values(run_dir: str | Path, metric: str) -> tuple[list[str], list[dict[str, Any]]]:
    """The swept keys and, per run, its setting, seed and final value of ``metric``.

    A run whose status in ``runs.jsonl`` is not ``ok`` (diverged) gets ``nan``.
    """
    run_dir = Path(run_dir)
    path = run_dir / "results.csv"
    if not path.exists():
        raise ValueError(f"{path} not found; give a directory written by 'fedcomp run'")
    meta_path = run_dir / "config.json"
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    keys = list(meta.get("sweep") or {})
    with path.open(newline="") as f:
        rows = list(csv.DictReader(f))
    if rows and metric not in rows[0]:
        numeric = [c for c in rows[0] if c not in ("algorithm", "method", "batch_size")]
        raise ValueError(f"no column {metric!r} in {path}; columns: {numeric}")
    group = ["algorithm", *(["variant"] if rows and "variant" in rows[0] else []), *keys, "seed"]
    last: dict[tuple[str, ...], dict[str, str]] = {}
    for row in rows:  # the last row of a run is its final evaluation
        last[tuple(row.get(c, "") for c in group)] = row
    failed = _failed_runs(run_dir / "runs.jsonl", group)
    out = []
    for key, row in last.items():
        value = math.nan if key in failed else _number(row[metric])
        out.append({"algorithm": row["algorithm"], "variant": row.get("variant"),
                    "setting": {k: row.get(k, "") for k in keys}, "seed": row["seed"],
                    "value": value})
    return keys, out


def _failed_runs(path: Path, group: list[str]) -> set[tuple[str, ...]]:
    if not path.exists():
        return set()
    failed = set()
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("row", {}).get("status", "ok") != "ok":
            failed.add(tuple(record["key"].get(c, "") for c in group))
    return failed


def best_settings(run_dir: str | Path, metric: str = "optimality", mode: str | None = None,
                  aggregate: str = "median") -> list[dict[str, Any]]:
    """Per algorithm (and variant), the swept setting with the best final ``metric``.

    Parameters
    ----------
    run_dir : str or Path
        A directory written by ``fedcomp run`` (``results.csv``, ``config.json``).
    metric : str, default "optimality"
        A column of ``results.csv``; its value at each run's last evaluation counts.
    mode : {"min", "max"}, optional
        Direction; default :func:`metric_mode` (max for accuracy-like metrics).
    aggregate : {"median", "mean"}, default "median"
        How the seeds of a setting combine. A setting with a diverged seed (non-finite value
        or a failed status) scores ``nan`` and ranks after every finite one.

    Returns
    -------
    list of dict
        One per algorithm: ``algorithm``, ``variant``, ``setting`` (swept key → value as
        written in ``results.csv``), ``value``, ``seeds``, ``runner_up`` (the next setting's
        ``{"setting", "value"}``, or None) and ``tie``: True when the runner-up scores exactly
        the same, so no setting won — e.g. an algorithm that does not take the swept key
        (fast_fedda under ``--sweep algorithm.client_lr``) runs identically for every value.
    """
    mode = mode or metric_mode(metric)
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max' (got {mode!r})")
    combine: Any = {"median": np.median, "mean": np.mean}.get(aggregate)
    if combine is None:
        raise ValueError(f"aggregate must be 'median' or 'mean' (got {aggregate!r})")
    _, runs = final_values(run_dir, metric)
    groups: dict[tuple[Any, ...], list[float]] = {}
    for run in runs:
        key = (run["algorithm"], run["variant"], tuple(run["setting"].items()))
        groups.setdefault(key, []).append(run["value"])
    ranked: dict[tuple[Any, ...], list[tuple[float, dict[str, str], int]]] = {}
    for (algorithm, variant, setting), values in groups.items():
        score = float(combine(values)) if all(map(math.isfinite, values)) else math.nan
        ranked.setdefault((algorithm, variant), []).append((score, dict(setting), len(values)))
    sign = 1.0 if mode == "min" else -1.0
    best = []
    for (algorithm, variant), candidates in ranked.items():
        candidates.sort(key=lambda c: (not math.isfinite(c[0]),
                                       sign * c[0] if math.isfinite(c[0]) else 0.0))
        (value, setting, seeds), rest = candidates[0], candidates[1:]
        best.append({"algorithm": algorithm, "variant": variant, "setting": setting,
                     "value": value, "seeds": seeds,
                     "runner_up": {"setting": rest[0][1], "value": rest[0][0]} if rest
                     else None,
                     "tie": bool(rest) and math.isfinite(value) and rest[0][0] == value})
    return best


def _setting_text(setting: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "(no sweep)"


def _value_text(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "diverged"


def best_table(best: list[dict[str, Any]], metric: str) -> str:
    """A Markdown table of :func:`best_settings`' result (non-finite values: "diverged").

    A tie shows as ``tie`` in the best-setting column, and a note under the table says what
    it means, so the first of equal settings is never read as a winner.
    """
    variants = any(b["variant"] is not None for b in best)
    head = ["algorithm", *(["variant"] if variants else []), "best setting", metric,
            "runner-up", f"runner-up {metric}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in best:
        runner = b["runner_up"]
        chosen = "tie (no setting better)" if b.get("tie") else _setting_text(b["setting"])
        cells = [b["algorithm"], *([b["variant"] or ""] if variants else []),
                 chosen, _value_text(b["value"]),
                 _setting_text(runner["setting"]) if runner else "—",
                 _value_text(runner["value"]) if runner else "—"]
        lines.append("| " + " | ".join(cells) + " |")
    if any(b.get("tie") for b in best):
        lines += ["", "tie: the best settings score exactly the same (the swept keys do not "
                      "change the runs, e.g. a parameter the algorithm does not take)"]
    return "\n".join(lines)
