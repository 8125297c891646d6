"""``resume``'s identity check: the runs an output directory keeps were computed on what the
configuration describes now.

``--resume`` keeps the finished runs of ``runs.jsonl`` and runs the rest. The configuration
alone does not fix a run's numbers: a ``libsvm_file`` (any data file) read again may hold
other samples, and ``backend = "auto"`` may pick another library or device on another
machine. Kept and new runs would then be averaged into one summary over two problems. So
before anything in the directory changes, every setting that has a finished run is built
again (its data, for the data seed it was recorded with) and its problem's fingerprint and
backend are compared with those ``config.json`` recorded; any difference is one
:class:`~fedcomp.experiments.ConfigMismatchError` naming the setting, the field and the fix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ._build import backend_of, build_problem
from ._plan import Run, key_columns, plan, run_key
from ._results import ConfigMismatchError, config_differences, finished_runs
from ._setting import Experiment

#: What a refused resume tells the user to do instead.
FIX = ("the kept runs would be summarised with runs on another problem: pass a new --out, or "
       "drop --resume to run every run again")


def check_resume(out: Path, experiment: Experiment, meta: dict[str, Any]
                 ) -> dict[str, Any]:
    """Refuse a resume in ``out`` whose kept runs differ from what ``experiment`` runs now;
    the recorded per-setting metadata to keep in ``config.json``.

    Only reads ``out``. A directory without ``config.json`` has nothing to compare.

    Parameters
    ----------
    out : Path
        The output directory being resumed.
    experiment : Experiment
        The experiment as resolved now.
    meta : dict
        The ``config.json`` the run will write (its ``config`` and ``sweep`` are compared).

    Returns
    -------
    dict
        ``config.json``'s recorded ``settings``, less those of planned settings without a
        finished run (they run again and record themselves afresh).

    Raises
    ------
    ConfigMismatchError
        The configuration or sweep differs (seeds may), or a setting with a finished run
        has another problem fingerprint or backend now.
    """
    path = out / "config.json"
    if not path.exists():
        return {}
    before = json.loads(path.read_text())
    _check_same_config(out, before, meta)
    recorded = dict(before.get("settings") or {})
    finished, keys = finished_runs(out), key_columns(experiment)
    first: dict[str, Run] = {}  # every planned setting: its first run
    kept: set[str] = set()  # the settings with a finished run
    for run in plan(experiment):
        first.setdefault(run.setting_name, run)
        if run_key(run.tags, keys) in finished:
            kept.add(run.setting_name)
    fingerprints: dict[str, str] = {}  # by problem: the sweep of a step size shares one
    for name in sorted(kept):
        if recorded.get(name):
            difference = setting_difference(first[name], recorded[name], fingerprints)
            if difference:
                raise ConfigMismatchError(f"--resume in {out}: {difference}; {FIX}")
    return {name: value for name, value in recorded.items()
            if name in kept or name not in first}


def _check_same_config(out: Path, before: dict[str, Any], meta: dict[str, Any]) -> None:
    """Refuse another configuration or sweep than ``config.json``'s (the seeds may differ)."""
    differences = config_differences(
        {"config": {k: v for k, v in before.get("config", {}).items() if k != "seeds"},
         "sweep": before.get("sweep", {})},
        json.loads(json.dumps({"config": {k: v for k, v in meta["config"].items()
                                          if k != "seeds"}, "sweep": meta["sweep"]},
                              default=str)))
    if differences:
        raise ConfigMismatchError(
            f"--resume: {out} was run with another configuration; differing: "
            f"{'; '.join(differences[:8])}. Use the same config, --set and --sweep (seeds "
            "may differ), or another --out")


def setting_difference(run: Run, recorded: dict[str, Any],
                       fingerprints: dict[str, str] | None = None) -> str | None:
    """What differs between a setting as ``config.json`` recorded it and as ``run``'s
    setting builds now (its backend, then its problem's fingerprint), or None.

    The problem is built for the run's seed: a setting's name in ``config.json`` holds
    its data seed, so that is the data the recorded fingerprint is of. ``fingerprints``
    caches the problems' fingerprints by :meth:`~fedcomp.experiments.Setting.problem_key`.
    """
    name = run.setting_name
    chosen = backend_of(run.setting)
    then = recorded.get("backend") or {}
    if then and (then.get("name"), then.get("device")) != (chosen.name, chosen.device):
        return (f"the backend of setting {name!r}: recorded {then.get('name')} on "
                f"{then.get('device')}, now {chosen.name} on {chosen.device} ({chosen.reason})")
    fingerprint = (recorded.get("problem") or {}).get("fingerprint")
    if not fingerprint:  # recorded without one: nothing to compare
        return None
    fingerprints = {} if fingerprints is None else fingerprints
    key = run.setting.problem_key(run.setting.data_seed(run.seed))
    if key not in fingerprints:
        fingerprints[key] = build_problem(run.setting, run.seed).fingerprint()
    now = fingerprints[key]
    if fingerprint != now:
        return (f"the data of setting {name!r}: problem fingerprint recorded "
                f"sha256:{fingerprint}, now sha256:{now} (the data read now are not "
                "those the kept runs used)")
    return None
