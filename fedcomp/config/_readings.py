"""A paper's readings: ``[readings.NAME]``, named lists of ``--set`` assignments.

:data:`AS_WRITTEN` is the configuration itself (the paper's equations); another reading,
e.g. the authors' official code, starts from it or from another reading, and a diagnosis
isolates one change (:func:`readings`, :func:`reading_config`).
"""

from __future__ import annotations

from typing import Any

from ._load import ConfigError
from ._overrides import apply_override

#: The reading a configuration is written in: the paper's equations. Other readings are
#: declared in its ``[readings]`` table (:func:`reading_config`).
AS_WRITTEN = "as_written"


#: Keys of a ``[readings.NAME]`` table.
READING_KEYS = {"follows", "set", "base", "diagnosis"}


def readings(config: dict[str, Any]) -> dict[str, str]:
    """The readings of a paper a configuration can run, with what each one follows.

    Always :data:`AS_WRITTEN` (the configuration as written: the paper's equations and the
    choices its comments document), then every entry of its ``[readings]`` table, e.g. the
    conventions of the authors' official code::

        [readings.as_run]
        follows = "the authors' MATLAB code (MingruiLiu-ML-Lab/Federated-Sparse-Learning)"
        set = ["algorithms.fast_fedda.weights='uniform'", "data.seed=1"]

    A reading may start from another one (``base = "as_run"``; default ``as_written``) and
    may be a *diagnosis* (:func:`diagnoses`): one change isolated to find out what moves a
    verdict, ``diagnosis`` saying in one sentence what it changes::

        [readings.gamma_constant]
        follows = "as written, with the code's constant per-step gamma"
        diagnosis = "Appendix F's L = 600 read as the code's constant step"
        set = ["algorithms.c_fedda.weights='uniform'"]

    Examples
    --------
    >>> readings({"readings": {"as_run": {"follows": "code", "set": ["rounds=3"]}}})
    {'as_written': 'the paper as written', 'as_run': 'code'}
    """
    table = config.get("readings") or {}
    if not isinstance(table, dict):
        raise ConfigError(f"readings must be a table of [readings.NAME] tables (got {table!r})")
    out = {AS_WRITTEN: "the paper as written"}
    for name, reading in table.items():
        if name == AS_WRITTEN:
            raise ConfigError(f"readings.{AS_WRITTEN} is the configuration itself: name the "
                              "other reading (e.g. readings.as_run)")
        if not isinstance(reading, dict) or set(reading) - READING_KEYS or not (
                isinstance(reading.get("follows"), str) and reading["follows"]):
            raise ConfigError(f"readings.{name} must be a table {{follows = \"what it follows\", "
                              f"set = [\"key=value\", ...]}} (optional: base = \"a reading\", "
                              f"diagnosis = \"what it isolates\"; got {reading!r})")
        for key in ("base", "diagnosis"):
            if key in reading and not (isinstance(reading[key], str) and reading[key]):
                raise ConfigError(f"readings.{name}.{key} must be a non-empty string "
                                  f"(got {reading[key]!r})")
        out[name] = reading["follows"]
    for name in table:
        _reading_chain(table, name)
    return out


def _reading_chain(table: dict[str, Any], name: str) -> list[str]:
    """The readings whose ``set`` builds reading ``name``, first to last (its bases, then it)."""
    chain = [name]
    while (base := table[chain[0]].get("base", AS_WRITTEN)) != AS_WRITTEN:
        if base not in table:
            raise ConfigError(f"readings.{chain[0]}.base = {base!r} is no reading; valid: "
                              f"{[AS_WRITTEN, *table]}")
        if base in chain:
            raise ConfigError(f"readings.{name}: its bases go round in a circle "
                              f"({' -> '.join([base, *chain])})")
        chain.insert(0, base)
    return chain


def diagnoses(config: dict[str, Any]) -> dict[str, str]:
    """The readings that are diagnoses (``diagnosis = "..."``): name → what each isolates.

    The others (:data:`AS_WRITTEN`, ``as_run``, ...) are readings of the paper, each judged
    on its own; a diagnosis is run to say which convention moves a verdict.

    Examples
    --------
    >>> diagnoses({"readings": {"as_run": {"follows": "code"},
    ...                         "gamma": {"follows": "x", "diagnosis": "constant gamma"}}})
    {'gamma': 'constant gamma'}
    """
    readings(config)  # checked
    return {name: reading["diagnosis"] for name, reading in
            (config.get("readings") or {}).items() if "diagnosis" in reading}


def reading_base(config: dict[str, Any], reading: str) -> str:
    """The reading ``reading`` starts from (:data:`AS_WRITTEN` unless its ``base`` names one)."""
    if reading == AS_WRITTEN:
        return AS_WRITTEN
    return str((config.get("readings") or {})[reading].get("base", AS_WRITTEN))


def reading_config(config: dict[str, Any], reading: str) -> dict[str, Any]:
    """``config`` in one of its :func:`readings`: its bases' ``set`` then its own, in order.

    The ``[readings]`` table is dropped (a reading is one configuration) and the
    reading's name recorded as ``reading`` (``config.json`` and the report say which
    reading ran). ``as_written`` is the configuration itself.

    Examples
    --------
    >>> cfg = {"rounds": 5, "readings": {"as_run": {"follows": "code", "set": ["rounds=3"]}}}
    >>> reading_config(cfg, "as_run")["rounds"], reading_config(cfg, "as_written")["rounds"]
    (3, 5)
    """
    known = readings(config)
    if reading not in known:
        raise ConfigError(f"reading {reading!r}: {config.get('name', 'the configuration')} has "
                          f"{list(known)}")
    out = {**{k: v for k, v in config.items() if k != "readings"}, "reading": reading}
    if reading == AS_WRITTEN:
        return out
    for step in _reading_chain(config["readings"], reading):
        assignments = config["readings"][step].get("set", [])
        if not isinstance(assignments, list) or not all(isinstance(a, str) for a in assignments):
            raise ConfigError(f"readings.{step}.set must be a list of 'key=value' strings "
                              f"(got {assignments!r})")
        for assignment in assignments:
            try:
                out = apply_override(out, assignment)
            except ConfigError as exc:
                raise ConfigError(f"readings.{step}: {exc}") from None
    return out
