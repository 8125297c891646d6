"""Experiment configurations as data: loading, overrides, quick sizes, sweeps, variants.

The first stage of the experiment pipeline (``docs/ARCHITECTURE.md``): pure dict algebra
over TOML configurations. Nothing here validates a whole configuration or builds anything;
:func:`fedcomp.experiments.resolve` turns the result into a typed, frozen
:class:`~fedcomp.experiments.Experiment`. Every built-in experiment is one TOML file shipped
inside the package (``fedcomp/configs/NAME.toml``), loaded by name: ``load("seed000")``.

A configuration names the data, the problem (loss, regularizer, client weighting), the
algorithms with their hyperparameters, and the run settings::

    name = "seed000"
    rounds = 500
    eval_every = 5
    seeds = [0]
    batch_size = ["full", 20]          # one run per gradient mode ("full" = full gradients)
    metrics = ["objective", "optimality", "nnz"]
    reference = { tol = 1e-13 }        # centralized x* accuracy (true = 1e-10, false = none)

    [data]
    generator = "synthetic_fedprox"    # any name of fedcomp.data.DATASETS
    alpha = 10.0                       # ... its parameters

    [problem]
    loss = "logistic"
    l2 = 0.01                          # loss parameters
    weighting = "uniform"

    [regularizer]
    name = "l1"
    alpha = 1e-4

    [[algorithms]]
    name = "za1"
    client_lr = 1.0

    [topology]                         # for decentralized algorithms (dfedda_gt, ...)
    name = "chain"                     # any name of fedcomp.topology.TOPOLOGIES, grid, matrix
    evaluate_on = ["average", "node"]  # node average, node `node`, "nodes" = min/mean/max
    sparsity = 16                      # also evaluate top-s sparsified models

    streaming = true                   # fresh samples per minibatch (generators with a sampler)
    client_state = "disk"              # client states memory-mapped on disk, one block in RAM
    backend = "jax"                    # numpy (default), torch, torch-float64, cuda, jax,
                                       # jax-float32 (jax: the compiled engine)
    x0 = { distribution = "normal", scale = 1.0, seed = "run" }   # default: "default"

    [readings.as_run]                  # another reading of the paper (fedcomp run --reading)
    follows = "the authors' official code (repository, files)"
    set = ["algorithms.c_fedda.output='last'", "x0={distribution='normal'}"]

    [readings.random_start]            # a diagnosis: one change, to see what moves a verdict
    follows = "as written, with the code's random start"
    diagnosis = "the code's x0 = randn(d) alone"
    set = ["x0={distribution='normal'}"]   # base = "as_run": start from another reading

    [[variants]]                       # optional: several settings in one experiment
    label = "strong-heterogeneity"
    data = { alpha = 1.0, beta = 1.0 } # deep-merged over the base config
    clients_per_round = 10

Each entry of ``variants`` has a unique ``label`` and overrides any of :data:`VARIANT_KEYS`
(tables are merged key by key — a variant naming another data ``generator`` or ``loss``
replaces that table — other values replaced; ``algorithms`` replaces the whole
list). Every variant runs every algorithm on every seed; results get a ``variant`` column.
Without ``variants`` the base configuration is the single setting.

Seeds: every run of ``seeds`` draws its own data (synthetic data, a partition of pooled
data) unless ``data.seed`` pins them (``data.seed = "run"`` says "follow the run seed"
explicitly), and so does a random start ``x0`` unless its ``seed`` is pinned. A reading
(``[readings.NAME]``) is a named list of ``--set`` assignments, e.g. the conventions of the
authors' official code against the paper's equations (``as_written``, the configuration
itself); ``fedcomp run NAME --reading as_run`` runs it.

Pooled data sets (real data: ``breast_cancer``, ``a9a``, ``libsvm_file``, ...) are split
among clients by a named partitioner of ``fedcomp.data.PARTITIONERS``, given as a name or
as an inline table of the partitioner's own parameters (``n_clients`` and ``seed`` are
the data set's keys)::

    [data]
    generator = "breast_cancer"        # or "a9a" with path = "...", "libsvm_file", ...
    n_clients = 10
    partition = { name = "dirichlet", concentration = 0.2 }   # or partition = "iid"
    seed = 0                           # seeds the partition (absent: the run's seed)

Every pooled loader takes ``n_clients``, ``partition`` and ``seed`` (built on
``fedcomp.data.federate``), so a new loader or partitioner needs no change here.

Unknown names fail with the list of valid ones; unknown keys fail with the accepted keys
(checked by :func:`fedcomp.experiments.resolve`).
"""

from __future__ import annotations

import copy
import itertools
import math
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

#: Top-level keys of a training configuration.
TOP_LEVEL_KEYS = {"name", "description", "rounds", "eval_every", "seeds", "batch_size",
                  "clients_per_round", "client_block", "metrics", "data", "problem",
                  "regularizer", "algorithms", "reference", "claim", "variants", "topology",
                  "streaming", "compute_times", "backend", "client_state", "quick",
                  "readings", "reading", "x0", "tracking", "target", "stop"}

#: The order :func:`to_toml` writes the top-level keys in (tables after the values).
KEY_ORDER = ("name", "reading", "kind", "description", "claim", "rounds", "eval_every", "seeds",
             "batch_size", "clients_per_round", "client_block", "metrics", "reference", "target",
             "stop",
             "x0", "backend", "client_state", "streaming", "compute_times", "data", "problem",
             "regularizer", "topology", "algorithms", "variants", "tracking", "quick",
             "readings")

#: The reading a configuration is written in: the paper's equations. Other readings are
#: declared in its ``[readings]`` table (:func:`reading_config`).
AS_WRITTEN = "as_written"

#: What a ``[[variants]]`` entry may override.
VARIANT_KEYS = {"data", "problem", "regularizer", "algorithms", "rounds", "eval_every",
                "batch_size", "clients_per_round", "client_block", "topology", "streaming",
                "compute_times", "client_state", "x0"}


class ConfigError(ValueError):
    """An invalid experiment configuration (the message names the key and the fix)."""




def experiment_names() -> list[str]:
    """The built-in experiments: the TOML files shipped in ``fedcomp/configs/``, by name.

    Examples
    --------
    >>> "seed000" in experiment_names()
    True
    """
    folder = resources.files("fedcomp") / "configs"
    return sorted(item.name.removesuffix(".toml") for item in folder.iterdir()
                  if item.name.endswith(".toml"))


def experiment_source(name: str) -> str:
    """The text of the built-in experiment ``name`` (its TOML file, comments included)."""
    if name not in experiment_names():
        raise ConfigError(f"no built-in experiment {name!r}; built-in: "
                          f"{', '.join(experiment_names())}")
    return (resources.files("fedcomp") / "configs" / f"{name}.toml").read_text(encoding="utf-8")


def _looks_like_path(spec: str) -> bool:
    return spec.endswith(".toml") or "/" in spec or "\\" in spec


def load(spec: str | Path) -> dict[str, Any]:
    """A configuration as a dict: from a TOML file, or a built-in experiment by name.

    ``spec`` is a path when such a file exists (or it ends in ``.toml`` or contains a
    directory separator), otherwise the name of a built-in experiment
    (:func:`experiment_names`).

    Raises
    ------
    ConfigError
        A missing file, invalid TOML (naming the file), or an unknown name (listing the
        built-in ones).

    Examples
    --------
    >>> load("seed000")["rounds"]
    500
    """
    path = Path(spec)
    if path.is_file() or _looks_like_path(str(spec)):
        if not path.exists():
            raise ConfigError(f"config file {str(path)!r} does not exist; give a TOML file or "
                              f"a built-in experiment ({', '.join(experiment_names())})")
        text, where = path.read_bytes(), str(path)
    elif str(spec) in experiment_names():
        text, where = experiment_source(str(spec)).encode(), f"fedcomp/configs/{spec}.toml"
    else:
        raise ConfigError(f"{str(spec)!r} is neither a config file nor a built-in experiment "
                          f"({', '.join(experiment_names())})")
    try:
        return tomllib.loads(text.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                          "save the configuration as UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{where}: invalid TOML: {exc}") from None
    except RecursionError:  # tomllib parses nested arrays and tables recursively
        raise ConfigError(f"{where}: arrays or tables nested too deeply for a configuration "
                          "(Python's recursion limit); a configuration nests a few levels"
                          ) from None


def to_toml(config: dict[str, Any]) -> str:
    """A configuration as TOML text (``None`` values, which TOML cannot hold, left out).

    Examples
    --------
    >>> print(to_toml({"name": "x", "rounds": 3, "topology": None, "data": {"seed": 0}}))
    name = "x"
    rounds = 3
    <BLANKLINE>
    [data]
    seed = 0
    <BLANKLINE>
    """
    import tomli_w

    def clean(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items() if v is not None}
        if isinstance(value, list | tuple):
            return [clean(v) for v in value if v is not None]
        return value

    order = {key: i for i, key in enumerate(KEY_ORDER)}
    ordered = dict(sorted(config.items(), key=lambda item: order.get(item[0], len(order))))
    return tomli_w.dumps(clean(to_jsonable(ordered)))


def parse_value(text: str) -> Any:
    """A command-line value as TOML (numbers, booleans, lists, quoted strings), else a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


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
    value = parse_value(text.strip())
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set: empty key in {assignment!r}")
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
        return config
    node = config
    for part in parts[:-1]:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {key}: {part!r} is not a table")
    node[parts[-1]] = value
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
        check_planned(len(span), f"--seeds {text}")  # before the list is made
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
        new = override.get(table, {})
        if key in new and new[key] != cfg.get(table, {}).get(key):
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
    from .algorithms import REGISTRY

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
    check_planned(math.prod(len(values) for _, values in sweeps),  # at least one run a point
                  "--sweep " + " ".join(f"{k}=<{len(v)} values>" for k, v in sweeps))
    points = []
    for texts in itertools.product(*[values for _, values in sweeps]):
        cfg = config
        for key, text in zip(keys, texts, strict=True):
            cfg = apply_sweep_value(cfg, key, text)
        points.append(({k: parse_value(t) for k, t in zip(keys, texts, strict=True)}, cfg))
    return points


def _batch_modes(value: Any) -> list[int | None]:
    values = value if isinstance(value, list) else [value]
    modes: list[int | None] = []
    for v in values:
        if v in ("full", None, 0):
            modes.append(None)
        elif isinstance(v, int) and not isinstance(v, bool) and v > 0:
            modes.append(v)
        else:
            raise ConfigError(f"batch_size entries must be 'full' or a positive integer "
                              f"(got {v!r})")
    return modes


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


def to_jsonable(value: Any) -> Any:
    """Configuration values as JSON-serialisable Python objects."""
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
