"""Hyperparameter grids (``fedcomp run --sweep``) and picking the best setting (``fedcomp best``).

A sweep ``KEY=V1,V2,...`` (repeatable: the Cartesian product) turns one configuration into
several *settings*; every setting runs every algorithm on every seed, and ``results.csv``
carries the swept keys as extra columns. :func:`best_settings` then reads a run directory
and, per algorithm, picks the setting whose final metric (median over seeds) is best, as
the papers tune their step sizes.
"""

from __future__ import annotations

import copy
import csv
import inspect
import itertools
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..config import (
    TOP_LEVEL_KEYS,
    ConfigError,
    algorithm_entries,
    apply_override,
    parse_value,
)

#: Metrics where larger is better (``fedcomp best`` maximises them unless ``--mode`` says).
MAXIMIZED = ("accuracy", "f1", "auc", "precision", "recall")


def parse_sweep(assignment: str) -> tuple[str, list[str]]:
    """``"algorithm.client_lr=0.01,0.1"`` → ``("algorithm.client_lr", ["0.01", "0.1"])``.

    The values stay text: they are parsed like ``--set`` values when applied.

    Examples
    --------
    >>> parse_sweep("rounds=10, 20")
    ('rounds', ['10', '20'])
    """
    if "=" not in assignment:
        raise ConfigError(f"--sweep expects KEY=V1,V2,... (got {assignment!r}), e.g. "
                          "--sweep algorithm.client_lr=0.01,0.1")
    key, text = (s.strip() for s in assignment.split("=", 1))
    values = [v.strip() for v in text.split(",") if v.strip()]
    if not key or not values:
        raise ConfigError(f"--sweep {assignment!r}: needs a key and at least one value")
    return key, values


def _accepted(name: str) -> list[str]:
    """The hyperparameters an algorithm's factory accepts (empty for an unknown name)."""
    from ..algorithms import ALGORITHMS, DECENTRALIZED

    factory = ALGORITHMS.get(name) or DECENTRALIZED.get(name)
    return [] if factory is None else list(inspect.signature(factory).parameters)


def apply_sweep_value(config: dict[str, Any], key: str, text: str) -> dict[str, Any]:
    """``config`` (a copy) with the swept ``key`` set to the value ``text``.

    ``algorithm.PARAM`` sets PARAM on every algorithm entry that has or accepts it, in the
    base ``algorithms`` list and in every variant's own (the ``results.csv`` column then
    holds for every row); ``algorithms.LABEL.PARAM`` and top-level dotted keys (``rounds``,
    ``data.n_clients``) behave as ``--set`` (:func:`fedcomp.config.apply_override`).

    Examples
    --------
    >>> cfg = {"algorithms": [{"name": "fedmid", "client_lr": 1.0}, {"name": "fedda"}]}
    >>> [a["client_lr"] for a in apply_sweep_value(cfg, "algorithm.client_lr", "0.5")
    ...  ["algorithms"]]
    [0.5, 0.5]
    """
    parts = key.split(".")
    if parts[0] == "algorithm":
        if len(parts) != 2:
            raise ConfigError(f"--sweep {key}: 'algorithm.PARAM' names one parameter of every "
                              "algorithm; use algorithms.NAME.PARAM for a single one")
        config = copy.deepcopy(config)
        entries = algorithm_entries(config)  # the variants' own lists too
        matched = [e for e in entries if parts[1] in e or parts[1] in _accepted(e.get("name", ""))]
        if not matched:
            accepted = sorted({p for e in entries for p in _accepted(e.get("name", ""))})
            raise ConfigError(f"--sweep {key}: no algorithm of the config accepts "
                              f"{parts[1]!r}; accepted parameters: {accepted}")
        value = parse_value(text)
        for entry in matched:
            entry[parts[1]] = copy.deepcopy(value)
        return config
    if parts[0] not in TOP_LEVEL_KEYS:
        raise ConfigError(f"--sweep {key}: unknown key {parts[0]!r}; use algorithm.PARAM "
                          f"(every algorithm), algorithms.NAME.PARAM or one of "
                          f"{sorted(TOP_LEVEL_KEYS)}")
    return apply_override(config, f"{key}={text}")


def expand_sweep(config: dict[str, Any], sweeps: list[tuple[str, list[str]]]
                 ) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """``(swept values, configuration)`` for every point of the grid (Cartesian product).

    Without sweeps, ``[({}, config)]``. The values are parsed like ``--set`` values.

    Examples
    --------
    >>> points = expand_sweep({"rounds": 1, "eval_every": 1},
    ...                       [("rounds", ["2", "4"]), ("eval_every", ["1", "2"])])
    >>> [values for values, _ in points][:2]
    [{'rounds': 2, 'eval_every': 1}, {'rounds': 2, 'eval_every': 2}]
    >>> points[3][1]
    {'rounds': 4, 'eval_every': 2}
    """
    keys = [key for key, _ in sweeps]
    if len(set(keys)) != len(keys):
        raise ConfigError(f"--sweep: a key is given twice in {keys}; list all its values once")
    points = []
    for texts in itertools.product(*[values for _, values in sweeps]):
        cfg = config
        for key, text in zip(keys, texts, strict=True):
            cfg = apply_sweep_value(cfg, key, text)
        points.append(({k: parse_value(t) for k, t in zip(keys, texts, strict=True)}, cfg))
    return points


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
        written in ``results.csv``), ``value``, ``seeds`` and ``runner_up`` (the next setting's
        ``{"setting", "value"}``, or None).
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
                     else None})
    return best


def _setting_text(setting: dict[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in setting.items()) or "(no sweep)"


def _value_text(value: float) -> str:
    return f"{value:.4g}" if math.isfinite(value) else "diverged"


def best_table(best: list[dict[str, Any]], metric: str) -> str:
    """A Markdown table of :func:`best_settings`' result (non-finite values: "diverged")."""
    variants = any(b["variant"] is not None for b in best)
    head = ["algorithm", *(["variant"] if variants else []), "best setting", metric,
            "runner-up", f"runner-up {metric}"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for b in best:
        runner = b["runner_up"]
        cells = [b["algorithm"], *([b["variant"] or ""] if variants else []),
                 _setting_text(b["setting"]), _value_text(b["value"]),
                 _setting_text(runner["setting"]) if runner else "—",
                 _value_text(runner["value"]) if runner else "—"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
