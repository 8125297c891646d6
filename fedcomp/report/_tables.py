"""The report's tables: each run's final metrics, mean ± std over seeds, and in how many
seeds it was the best.
"""

from __future__ import annotations

import math
import re
from typing import Any

import numpy as np

from ..experiments import validate
from ..experiments._results import main_metric as metric_of
from ..experiments._setting import TARGET_COLUMNS
from ._result import ExperimentResult

#: Metrics shown in the final table besides the configured ones (cost counters).
COST_COLUMNS = ("floats_up", "wall_s")


def _run_key(row: dict[str, Any]) -> tuple[str, str]:
    algorithm = str(row.get("algorithm", row.get("network", "?")))
    variant = row.get("variant", row.get("implementation"))  # a timing's prox implementation
    return algorithm, "" if variant is None or variant != variant else str(variant)


def table_columns(result: ExperimentResult) -> list[str]:
    """The numeric columns of the final-metrics table."""
    if result.config.get("kind") == "timing":
        return [k for k in result.rows[0]
                if k not in ("network", "implementation", "device", "status")]
    metrics = [m for m in result.checked()["metrics"] if m != "support"]
    # a gossip run evaluated at single nodes ([topology] evaluate_on) has node{n}_METRIC
    # columns beside (or instead of) the node average's
    keys = dict.fromkeys(k for row in result.rows for k in row)
    per_node = {m: [k for k in keys if re.fullmatch(rf"node\d+_{re.escape(m)}", k)]
                for m in metrics}
    reached = list(TARGET_COLUMNS) if result.checked().get("target") else []
    # a personalised run's per-client medians (fedcomp.experiments._execute.personal_summary)
    personal = [k for k in keys if k == "personal_wins" or (
        k.endswith("_median") and k.startswith(("personal_", "global_", "support_")))]
    return [*(c for m in metrics for c in (m, *per_node[m])), *reached, *personal,
            *COST_COLUMNS]


def seeds_best(rows: list[dict[str, Any]], metric: str) -> dict[tuple[str, str], int]:
    """Per run (algorithm, variant): in how many seeds its final ``metric`` was the best of
    the runs compared with it (same variant and gradient mode; ties count for each).

    Lower is better, or higher for accuracy-like metrics; a diverged run is never best.

    Examples
    --------
    >>> rows = [{"algorithm": a, "batch_size": "full", "seed": s, "optimality": v}
    ...         for s, (x, y) in enumerate([(1.0, 2.0), (3.0, 2.0), (1.0, 5.0)])
    ...         for a, v in (("za1", x), ("fedmid", y))]
    >>> seeds_best(rows, "optimality")
    {('za1', ''): 2, ('fedmid', ''): 1}
    """
    from ..experiments._results import metric_mode

    sign = -1.0 if metric_mode(metric) == "max" else 1.0
    best: dict[tuple[str, str], int] = {_run_key(r): 0 for r in rows}
    contests: dict[tuple[str, str, Any], list[tuple[float, tuple[str, str]]]] = {}
    for row in rows:
        value = row.get(metric)
        score = float(value) if isinstance(value, int | float) else math.nan
        ok = row.get("status", "ok") == "ok" and math.isfinite(score)
        key = _run_key(row)
        contest = (key[1], str(row.get("batch_size", "")), row.get("seed"))
        contests.setdefault(contest, []).append((sign * score if ok else math.inf, key))
    for entries in contests.values():
        top = min(v for v, _ in entries)
        for value, key in entries:
            if math.isfinite(top) and value == top:
                best[key] += 1
    return best


def mean_std_table(result: ExperimentResult) -> tuple[list[str], list[list[str]]]:
    """Header and rows: per run (algorithm, variant), each metric's mean ± std over seeds.

    Diverged runs are counted in a last column and left out of the statistics. With
    several seeds a column counts the seeds in which the run's main metric was the best of
    its comparison (:func:`seeds_best`): the verdicts judge every seed too.
    """
    columns = table_columns(result) if result.rows else []
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in result.rows:
        groups.setdefault(_run_key(row), []).append(row)
    variants = any(key[1] for key in groups)
    several = any(len(rows) > 1 for rows in groups.values())
    timing = result.config.get("kind") == "timing"
    metric = "" if timing or not result.rows else metric_of(result.checked()["metrics"])
    won = seeds_best(result.rows, metric) if several and metric else {}
    header = ["algorithm", *(["variant"] if variants else []), "seeds", *columns,
              *([f"seeds best ({metric})"] if won else []), "diverged"]
    body = []
    for (algorithm, variant), rows in groups.items():
        ok = [r for r in rows if r.get("status", "ok") == "ok"]
        cells = [algorithm, *([variant] if variants else []), str(len(rows))]
        for column in columns:
            values = np.array([float(r[column]) for r in ok
                               if isinstance(r.get(column), int | float)], dtype=float)
            cells.append(format_mean_std(values))
        if won:
            cells.append(f"{won[(algorithm, variant)]} of {len(rows)}")
        cells.append(str(len(rows) - len(ok)))
        body.append(cells)
    return header, body


def format_mean_std(values: np.ndarray) -> str:
    """``mean ± std`` (population std over seeds; just the value for one seed; "—" if none)."""
    values = values[np.isfinite(values)]
    if values.size == 0:
        return "—"
    mean = float(values.mean())
    if values.size == 1:
        return _number(mean)
    return f"{_number(mean)} ± {_number(float(values.std()))}"


def _number(value: float) -> str:
    if value == 0 or (abs(value) >= 1e-2 and abs(value) < 1e5):
        return f"{value:.4g}"
    return f"{value:.3e}"


def main_metric(config: dict[str, Any]) -> str:
    """The metric of an experiment's figures: optimality when there is an x*, else its first."""
    return metric_of(validate(config)["metrics"])
