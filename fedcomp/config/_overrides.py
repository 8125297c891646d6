"""Changing a configuration by assignment: ``--set key=value`` and ``[quick]``.

``algorithms.SELECTOR.PARAM`` addresses algorithm entries by label or name, in the base
list and in every variant's own (:func:`select_algorithms`).
"""

from __future__ import annotations

import copy
from typing import Any

from ._load import MAX_DEPTH, ConfigError, _short, check_depth, parse_value


def algorithm_entries(config: dict[str, Any]) -> list[dict[str, Any]]:
    """Every ``[[algorithms]]`` entry of ``config``: the base list, then each variant's own.

    A variant with an ``algorithms`` list replaces the base's (see :func:`merge_variant`), so
    an override of an algorithm's hyperparameter has to reach those lists too.

    Examples
    --------
    >>> cfg = {"algorithms": [{"name": "feddr"}],
    ...        "variants": [{"label": "v", "algorithms": [{"name": "feddr", "label": "E5"}]}]}
    >>> [a.get("label", a["name"]) for a in algorithm_entries(cfg)]
    ['feddr', 'E5']
    """
    lists = [config.get("algorithms")]
    variants = config.get("variants")
    if isinstance(variants, list):
        lists += [v.get("algorithms") for v in variants if isinstance(v, dict)]
    return [entry for entries in lists if isinstance(entries, list)
            for entry in entries if isinstance(entry, dict)]


def _label(entry: dict[str, Any]) -> Any:
    return entry.get("label", entry.get("name"))


def select_algorithms(config: dict[str, Any], selector: str, key: str) -> list[dict[str, Any]]:
    """The entries of :func:`algorithm_entries` that ``algorithms.SELECTOR.PARAM`` addresses.

    ``*`` selects every entry; a label (an entry's ``label``, else its ``name``) selects the
    entries with that label, in the base list and in the variants' lists; otherwise a
    ``name`` selects the entries of that algorithm, but only when they share one label —
    a name behind several labels (FedAvg as ``{name = "fedprox", label = "fedavg", mu =
    0}`` beside FedProx) is ambiguous, and the error lists the labels to use.

    Raises
    ------
    ConfigError
        When nothing matches, or a name matches entries with different labels; ``key``
        (the command-line key) is named in the message.

    Examples
    --------
    >>> cfg = {"algorithms": [{"name": "fedprox", "label": "fedavg", "mu": 0.0},
    ...                       {"name": "fedprox", "mu": 1.0}]}
    >>> [a["mu"] for a in select_algorithms(cfg, "fedprox", "algorithms.fedprox.mu")]
    [1.0]
    """
    entries = algorithm_entries(config)
    if selector == "*":
        return entries
    by_label = [entry for entry in entries if _label(entry) == selector]
    if by_label:
        return by_label
    by_name = [entry for entry in entries if entry.get("name") == selector]
    labels = list(dict.fromkeys(str(_label(entry)) for entry in by_name))
    if len(labels) > 1:
        param = key.rsplit(".", 1)[-1]
        raise ConfigError(f"{key}: {selector!r} names {len(by_name)} algorithm entries with "
                          f"different labels {labels}; address one by its label, e.g. "
                          f"algorithms.{labels[0]}.{param}, or all with algorithms.*.{param}")
    if not by_name:
        known = list(dict.fromkeys(str(_label(entry)) for entry in entries))
        raise ConfigError(f"{key}: no algorithm named {selector!r}; the config has {known} "
                          "(or use '*' for all)")
    return by_name


def apply_override(config: dict[str, Any], assignment: str) -> dict[str, Any]:
    """Apply ``key.path=value`` to a copy of ``config``.

    ``algorithms.SELECTOR.key=value`` sets ``key`` on the algorithm entries that SELECTOR
    addresses (:func:`select_algorithms`: a label, else an unambiguous name, or ``*`` for
    all), in the base list and in every variant's own ``algorithms`` list; other dotted
    paths address nested tables.

    Examples
    --------
    >>> cfg = {"rounds": 10, "algorithms": [{"name": "za1", "client_lr": 1.0}]}
    >>> apply_override(cfg, "algorithms.za1.client_lr=0.5")["algorithms"][0]["client_lr"]
    0.5
    >>> apply_override(cfg, "data.n_clients=5")["data"]
    {'n_clients': 5}
    """
    if "=" not in assignment:
        raise ConfigError(f"--set expects key=value (got {assignment!r}), e.g. --set rounds=100")
    key, text = assignment.split("=", 1)
    try:
        value = parse_value(text.strip())
    except ConfigError as exc:  # a value nested too deeply: say which --set
        raise ConfigError(f"--set {_short(key.strip())}: {exc}") from None
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set: empty key in {assignment!r}")
    if len(parts) > MAX_DEPTH:
        raise ConfigError(f"--set {_short(key.strip())}: {len(parts)} dotted parts, more than "
                          f"the {MAX_DEPTH} levels a configuration may nest "
                          "(fedcomp.config.MAX_DEPTH)")
    config = copy.deepcopy(config)
    if parts[0] == "algorithms" and len(parts) > 1:  # (algorithms=[...] replaces the list)
        # the parameter is the last part; the selector is everything between, so a label
        # may contain dots (fedcanon_stepsizes labels its entries a0.01_b0.02, ...)
        selector, _, param = key.strip()[len("algorithms."):].rpartition(".")
        if not selector or not param:
            raise ConfigError(f"--set {key.strip()}: use algorithms.LABEL.PARAM (or "
                              "algorithms.*.PARAM for every entry)")
        for entry in select_algorithms(config, selector, f"--set {key.strip()}"):
            entry[param] = value
        check_depth(config, f"--set {_short(key.strip())}")  # a value of nested arrays
        return config
    node = config
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: {part!r} is not a table")
    node[parts[-1]] = value
    check_depth(config, f"--set {_short(key.strip())}")  # a value of nested arrays
    return config


def quick_config(config: dict[str, Any]) -> dict[str, Any]:
    """The reduced-size version of ``config``: its ``[quick]`` overrides applied.

    A configuration declares how it shrinks for a fast run (``fedcomp report --quick``)
    in a table ``[quick]`` with ``set``, a list of ``--set`` assignments applied in order;
    a configuration without one is returned unchanged. The ``[quick]`` table itself is
    dropped (a normal run ignores it).

    Examples
    --------
    >>> cfg = {"rounds": 500, "quick": {"set": ["rounds=50", "seeds=[0, 1]"]}}
    >>> quick_config(cfg)
    {'rounds': 50, 'seeds': [0, 1]}
    """
    quick = config.get("quick") or {}
    if not isinstance(quick, dict) or set(quick) - {"set"}:
        raise ConfigError(f"quick must be a table {{set = [\"key=value\", ...]}} (got {quick!r})")
    assignments = quick.get("set", [])
    if not isinstance(assignments, list) or not all(isinstance(a, str) for a in assignments):
        raise ConfigError(f"quick.set must be a list of 'key=value' strings (got {assignments!r})")
    config = {k: v for k, v in config.items() if k != "quick"}
    for assignment in assignments:
        config = apply_override(config, assignment)
    return config
