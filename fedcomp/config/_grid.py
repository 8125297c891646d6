"""The axes an experiment multiplies into runs: seeds, variants, sweep points, gradient modes.

``--seeds`` (:func:`parse_seeds`), ``[[variants]]`` (:func:`variant_settings`), ``--sweep``
(:func:`expand_sweep`) and ``batch_size`` (:func:`batch_modes`); their product is bounded by
:data:`MAX_PLANNED_RUNS` (:func:`check_planned`).
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

from ._load import parse_value
from ._overrides import algorithm_entries, apply_override
from ._schema import ConfigError, _batch_modes, accepted_keys

#: The most runs one experiment may plan (seeds × settings × gradient modes × algorithms):
#: a typo such as ``--seeds 0:100000000`` fails in one line instead of filling the memory.
MAX_PLANNED_RUNS = 100_000


def check_planned(count: int, what: str) -> None:
    """Raise a :class:`ConfigError` naming ``what`` when it plans more than
    :data:`MAX_PLANNED_RUNS` runs."""
    if count > MAX_PLANNED_RUNS:
        raise ConfigError(f"{what} plans {count} runs, more than the {MAX_PLANNED_RUNS} one "
                          "experiment may (fedcomp.config.MAX_PLANNED_RUNS); split it into "
                          "smaller experiments, each with its own --out")


def parse_seeds(text: str) -> list[int]:
    """``"0:3"`` → [0, 1, 2]; ``"4"`` → [4]; ``"1,5,7"`` → [1, 5, 7]."""
    try:
        if ":" in text:
            start, stop = text.split(":", 1)
            span = range(int(start), int(stop))
        else:
            span = range(0)
            seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise ConfigError(f"--seeds expects START:STOP, a number or a comma list (got {text!r})"
                          ) from exc
    if ":" in text:
        # stop - start, not len(span): len() of a range past 2**63 raises OverflowError
        check_planned(max(0, span.stop - span.start), f"--seeds {text}")  # before the list
        seeds = list(span)
    if not seeds:
        raise ConfigError(f"--seeds {text!r} selects no seed")
    negative = [s for s in seeds if s < 0]
    if negative:
        raise ConfigError(f"--seeds {text!r}: seeds must be non-negative integers (got "
                          f"{negative[0]}); e.g. --seeds 0:3")
    return seeds


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in: tables key by key, everything else replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out



def variant_settings(cfg: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """``(variant label, full setting)`` for every setting of a resolved configuration.

    ``[(None, cfg)]`` without variants; otherwise each variant merged over the base.

    Examples
    --------
    >>> cfg = {"data": {"alpha": 0.0, "beta": 0.0}, "variants": [{"label": "b1",
    ...        "data": {"beta": 1.0}}]}
    >>> [(label, s["data"]) for label, s in variant_settings(cfg)]
    [('b1', {'alpha': 0.0, 'beta': 1.0})]
    """
    if not cfg.get("variants"):
        return [(None, cfg)]
    return [(v["label"], merge_variant(cfg, v)) for v in cfg["variants"]]


def merge_variant(cfg: dict[str, Any], variant: dict[str, Any]) -> dict[str, Any]:
    """One ``[[variants]]`` entry merged over the base setting.

    Tables merge key by key, except that a variant naming another data ``generator`` (or
    another ``loss``) replaces the whole ``data`` (or ``problem``) table: the base's
    parameters belong to the base's generator (or loss).

    Examples
    --------
    >>> base = {"data": {"generator": "a9a", "path": "x"}, "rounds": 3}
    >>> merge_variant(base, {"label": "d", "data": {"generator": "digits"}})["data"]
    {'generator': 'digits'}
    >>> merge_variant(base, {"label": "p", "data": {"path": "y"}})["data"]
    {'generator': 'a9a', 'path': 'y'}
    """
    override = {k: v for k, v in variant.items() if k != "label"}
    merged = _deep_merge(cfg, override)
    for table, key in (("data", "generator"), ("problem", "loss")):
        new, old = override.get(table), cfg.get(table)
        # not a table: replaced as it is, and refused by the setting's check naming it
        if isinstance(new, dict) and key in new and (
                not isinstance(old, dict) or new[key] != old.get(key)):
            merged[table] = copy.deepcopy(new)
    return merged


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
    from ..algorithms import REGISTRY

    return list(REGISTRY.settable(name)) if name in REGISTRY else []


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
    if parts[0] not in accepted_keys():
        raise ConfigError(f"--sweep {key}: unknown key {parts[0]!r}; use algorithm.PARAM "
                          f"(every algorithm), algorithms.NAME.PARAM or one of "
                          f"{sorted(accepted_keys())}")
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
    check_planned(math.prod(len(values) for _, values in sweeps),  # at least one run a point
                  "--sweep " + " ".join(f"{k}=<{len(v)} values>" for k, v in sweeps))
    points = []
    for texts in itertools.product(*[values for _, values in sweeps]):
        cfg = config
        for key, text in zip(keys, texts, strict=True):
            cfg = apply_sweep_value(cfg, key, text)
        points.append(({k: parse_value(t) for k, t in zip(keys, texts, strict=True)}, cfg))
    return points


def batch_modes(cfg: dict[str, Any]) -> list[int | None]:
    """The gradient modes of a configuration: ``None`` (full gradients) or batch sizes.

    Examples
    --------
    >>> batch_modes({"batch_size": ["full", 20]})
    [None, 20]
    """
    return _batch_modes(cfg.get("batch_size", "full"))


def mode_name(batch_size: int | None) -> str:
    """``None`` → ``"full"``, ``20`` → ``"b20"`` (the ``batch_size`` column of results)."""
    return "full" if batch_size is None else f"b{batch_size}"
