"""Property test of the configuration path (issue 20): whatever value any key of a tiny
configuration gets — a string, a negative number, zero, NaN, ±inf, a huge number, a wrong
type, a nested table, an unknown key — ``fedcomp run`` either finishes the tiny run or
exits 2 with one ``error:`` line naming the key and nothing written in ``--out``. Never a
traceback.

Reproducible: ``derandomize=True`` draws the same examples on every run, and no example
database is read or written.
"""

from __future__ import annotations

import contextlib
import io
import math
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

#: The tiny base: 3 clients of the breast-cancer data, 2 rounds, no reference solution.
BASE = {
    "name": "fuzz", "rounds": 2, "reference": False, "metrics": ["objective"],
    "data": {"generator": "breast_cancer", "n_clients": 3, "partition": "iid", "seed": 0},
    "problem": {"loss": "logistic", "l2": 0.0},
    "regularizer": {"name": "l1", "alpha": 0.01},
    "algorithms": [{"name": "fedmid", "client_lr": 0.01, "local_steps": 1}],
}

#: Every key the fuzzer sets: (table path, key). ``algorithms`` is the first entry.
KEYS = [((), k) for k in (
    "name", "rounds", "eval_every", "seeds", "batch_size", "clients_per_round",
    "client_block", "metrics", "reference", "description", "claim", "variants", "topology",
    "streaming", "compute_times", "backend", "client_state", "x0", "reading", "readings",
    "data", "problem", "regularizer", "algorithms", "unknown_key")] + [
    (("data",), k) for k in ("generator", "n_clients", "partition", "seed", "standardize",
                             "unknown_key")] + [
    (("problem",), k) for k in ("loss", "l2", "weighting", "unknown_key")] + [
    (("regularizer",), k) for k in ("name", "alpha", "scope", "unknown_key")] + [
    (("algorithms",), k) for k in ("name", "label", "client_lr", "local_steps", "server_lr",
                                   "clients_per_round", "unknown_key")]

#: Keys whose valid values scale the work of the run: a huge valid value there is a long
#: run, not an error, so their integers stay small (every other kind of value still comes).
WORK_KEYS = {"rounds", "local_steps", "n_clients", "seeds", "batch_size", "eval_every",
             "clients_per_round"}

SCALARS = st.one_of(
    st.text(max_size=6),
    st.sampled_from(["", "za1", "objective", "../../x", "nan", "1e9", "full", "run",
                     "default", "auto"]),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([-1, 0, 1, 2, 10**9, 2**63]),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, 1e-308, 0.5]),
    st.booleans(),
)
VALUES = st.one_of(
    SCALARS,
    st.lists(SCALARS, max_size=3),
    st.dictionaries(st.sampled_from(["name", "alpha", "tol", "mean", "label", "x"]), SCALARS,
                    max_size=2),
)
SMALL_INTS = st.one_of(st.integers(min_value=-3, max_value=6),
                       st.lists(st.integers(min_value=-2, max_value=3), max_size=3))


@st.composite
def mutations(draw):
    """1 to 3 (path, key, value) changes of the base configuration."""
    changes = []
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path, key = draw(st.sampled_from(KEYS))
        value = draw(st.one_of(SMALL_INTS, VALUES.filter(
            lambda v: not isinstance(v, int) or abs(v) < 50)) if key in WORK_KEYS else VALUES)
        changes.append((path, key, value))
    return changes


def mutated(changes):
    import copy

    config = copy.deepcopy(BASE)
    for path, key, value in changes:
        table = config
        for part in path:  # a table an earlier change replaced by a non-table is left alone
            table = table.get(part) if isinstance(table, dict) else None
            if part == "algorithms":
                table = table[0] if isinstance(table, list) and table else None
        if isinstance(table, dict):
            table[key] = value
    return config


def _named(line, changes):
    """Whether the error line names one of the changed keys (or its table)."""
    return any(key in line or (path and path[-1] in line) for path, key, _ in changes)


@settings(max_examples=200, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(mutations())
def test_any_value_of_any_key_runs_or_is_one_error_line(changes):
    import tomli_w

    from fedcomp.cli import main

    config = mutated(changes)
    with tempfile.TemporaryDirectory(prefix="fedcomp-fuzz-") as tmp:
        path, out = Path(tmp) / "fuzz.toml", Path(tmp) / "out"
        path.write_text(tomli_w.dumps(config))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main(["run", str(path), "--out", str(out), "--quiet", "--jobs", "1"])
        err = err.getvalue()
        assert "Traceback" not in err, err
        if status == 2:
            lines = [line for line in err.splitlines() if line.startswith("error:")]
            assert len(lines) == 1, err
            assert _named(lines[0], changes), (changes, lines[0])
            assert not out.exists(), (changes, lines[0], sorted(out.iterdir()))
        else:  # a run: finished (0) or with a diverged run reported (1)
            assert status in (0, 1), (changes, err)
            assert (out / "results.csv").exists() and (out / "summary.json").exists()
