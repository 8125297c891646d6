"""Experiment configurations: TOML files (or dicts), dotted overrides, validation, building.

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

    [[variants]]                       # optional: several settings in one experiment
    label = "strong-heterogeneity"
    data = { alpha = 1.0, beta = 1.0 } # deep-merged over the base config
    clients_per_round = 10

Each entry of ``variants`` has a unique ``label`` and overrides any of :data:`VARIANT_KEYS`
(tables are merged key by key — a variant naming another data ``generator`` or ``loss``
replaces that table — other values replaced; ``algorithms`` replaces the whole
list). Every variant runs every algorithm on every seed; results get a ``variant`` column.
Without ``variants`` the base configuration is the single setting.

Pooled data sets (real data: ``breast_cancer``, ``a9a``, ``libsvm_file``, ...) are split
among clients by a named partitioner of ``fedcomp.data.PARTITIONERS``, given as a name or
as an inline table of the partitioner's own parameters (``n_clients`` and ``seed`` are
the data set's keys)::

    [data]
    generator = "breast_cancer"        # or "a9a" with path = "...", "libsvm_file", ...
    n_clients = 10
    partition = { name = "dirichlet", concentration = 0.2 }   # or partition = "iid"
    seed = 0                           # seeds the partition

Every pooled loader takes ``n_clients``, ``partition`` and ``seed`` (built on
``fedcomp.data.federate``), so a new loader or partitioner needs no change here.

Unknown names fail with the list of valid ones; unknown keys fail with the accepted keys.
"""

from __future__ import annotations

import copy
import inspect
import numbers
import tomllib
from pathlib import Path
from typing import Any, TypeGuard

import numpy as np

from ._extras import check_installed, require

TOP_LEVEL_KEYS = {"name", "description", "rounds", "eval_every", "seeds", "batch_size",
                  "clients_per_round", "client_block", "metrics", "data", "problem",
                  "regularizer", "algorithms", "reference", "claim", "variants", "topology",
                  "streaming", "compute_times", "backend", "client_state", "quick"}

#: What a ``[[variants]]`` entry may override.
VARIANT_KEYS = {"data", "problem", "regularizer", "algorithms", "rounds", "eval_every",
                "batch_size", "clients_per_round", "client_block", "topology", "streaming",
                "compute_times", "client_state"}

#: Keys of the ``[topology]`` table that configure evaluation, not the graph.
TOPOLOGY_EVAL_KEYS = {"evaluate_on", "node", "sparsity"}

DEFAULTS: dict[str, Any] = {
    "description": "",
    "eval_every": 1,
    "seeds": [0],
    "batch_size": "full",
    "clients_per_round": None,
    "client_block": "auto",
    "metrics": ["objective", "optimality", "nnz"],
    "reference": True,
    "claim": "",
    "variants": [],
    "topology": None,
    "streaming": False,
    "compute_times": None,
    "backend": "auto",
    "client_state": "memory",
}

#: Losses whose model has one column per class: they need ``data.n_classes``.
CLASS_LOSSES = ("softmax",)

#: ``client_state`` values: stacked client states in RAM, or memory-mapped ``.npy`` files
#: (for populations whose state does not fit in memory; see ``fedcomp.simulate``).
CLIENT_STATES = ("memory", "disk")

#: ``backend`` values: where the data and models live (``auto``: torch float32 for
#: ``torch_model`` losses, NumPy float64 otherwise).
BACKENDS = ("auto", "numpy", "torch", "torch-float64", "cuda")


class ConfigError(ValueError):
    """An invalid experiment configuration (the message names the key and the fix)."""


def load(path: str | Path) -> dict[str, Any]:
    """Read a TOML configuration file into a dict."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    with path.open("rb") as f:
        try:
            return tomllib.load(f)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from exc


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


def parse_seeds(text: str) -> list[int]:
    """``"0:3"`` → [0, 1, 2]; ``"4"`` → [4]; ``"1,5,7"`` → [1, 5, 7]."""
    try:
        if ":" in text:
            start, stop = text.split(":", 1)
            seeds = list(range(int(start), int(stop)))
        else:
            seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError as exc:
        raise ConfigError(f"--seeds expects START:STOP, a number or a comma list (got {text!r})"
                          ) from exc
    if not seeds:
        raise ConfigError(f"--seeds {text!r} selects no seed")
    negative = [s for s in seeds if s < 0]
    if negative:
        raise ConfigError(f"--seeds {text!r}: seeds must be non-negative integers (got "
                          f"{negative[0]}); e.g. --seeds 0:3")
    return seeds


def _check_keys(table: dict[str, Any], accepted: set[str], where: str) -> None:
    unknown = sorted(set(table) - accepted)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; accepted: {sorted(accepted)}")


def _check_table(value: Any, key: str, example: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{key} must be a table such as {example} (got {value!r})")
    return value


def _is_integer(value: Any) -> TypeGuard[int]:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_number_text(value: Any) -> bool:
    """Whether ``value`` is a quoted number (``"0.1"``): the fix is to drop the quotes."""
    try:
        float(value)
    except (TypeError, ValueError):
        return False
    return isinstance(value, str)


def _check_types(table: dict[str, Any], factory: Any, where: str) -> None:
    """Integers and numbers where ``factory``'s signature says ``int`` or ``float``.

    The factories take the values as they are: a float ``n_clients = 2.5`` would be cut
    to 2 clients (or fail deep inside NumPy), a string ``alpha = "0.1"`` fail on the first
    arithmetic; here the message names the key. A ``seed`` must also be non-negative.
    """
    params = inspect.signature(factory).parameters
    for key, value in table.items():
        if key not in params:
            continue
        annotation = params[key].annotation  # a string under ``from __future__ import``
        annotation = getattr(annotation, "__name__", str(annotation)).replace(" ", "")
        quotes = f"; write it without quotes: {key} = {value}" if _is_number_text(value) else ""
        if annotation in ("int", "int|None") and not (
                _is_integer(value) or (value is None and annotation == "int|None")):
            raise ConfigError(f"{where}.{key} must be an integer (got {value!r}){quotes}")
        if annotation in ("float", "float|None") and not (
                _is_real(value) or (value is None and annotation == "float|None")):
            raise ConfigError(f"{where}.{key} must be a number (got {value!r}){quotes}")
        if key == "seed" and _is_integer(value) and value < 0:
            raise ConfigError(f"{where}.seed must be a non-negative integer (got {value!r})")


def _check_seeds(seeds: Any) -> None:
    if not (isinstance(seeds, list) and seeds and all(_is_integer(s) and s >= 0
                                                       for s in seeds)):
        raise ConfigError(f"seeds must be a non-empty list of non-negative integers, e.g. "
                          f"seeds = [0, 1, 2] (got {seeds!r})")


def _reference_settings(value: Any) -> dict[str, Any] | None:
    """``reference = true | false`` or a table ``{tol = 1e-13}`` → settings or ``None``."""
    if value is False or value is None:
        return None
    if value is True:
        return {"tol": 1e-10}
    if isinstance(value, dict):
        _check_keys(value, {"tol"}, "reference")
        tol = value.get("tol", 1e-10)
        if not (isinstance(tol, int | float) and 0 < tol < 1):
            raise ConfigError(f"reference.tol must be a number in (0, 1) (got {tol!r})")
        return {"tol": float(tol)}
    raise ConfigError(f"reference must be true, false or a table {{tol = ...}} (got {value!r})")


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


def resolve(config: dict[str, Any]) -> dict[str, Any]:
    """Validate a configuration and fill in defaults (returns a new dict)."""

    cfg = {**copy.deepcopy(DEFAULTS), **copy.deepcopy(config)}
    _check_keys(cfg, TOP_LEVEL_KEYS, "config")
    cfg.pop("quick", None)  # how the config shrinks for --quick (see quick_config)
    for key in ("name", "rounds", "data", "problem", "regularizer", "algorithms"):
        if key not in cfg:
            raise ConfigError(f"config: missing required key {key!r}")
    if "reference" not in config and cfg["problem"].get("loss") == "torch_model":
        cfg["reference"] = False  # a network has no centralized x* to compare against
    if cfg["backend"] not in BACKENDS:
        raise ConfigError(f"backend: unknown backend {cfg['backend']!r}; valid: {list(BACKENDS)}")
    if cfg["client_state"] not in CLIENT_STATES:
        raise ConfigError(f"client_state: unknown value {cfg['client_state']!r}; valid: "
                          f"{list(CLIENT_STATES)} ('disk' keeps client states in memory-mapped "
                          "files)")
    cfg["reference"] = _reference_settings(cfg["reference"])
    _check_setting(cfg)
    _check_variants(cfg)
    return cfg


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``base`` with ``override`` merged in: tables key by key, everything else replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _check_variants(cfg: dict[str, Any]) -> None:
    variants = cfg["variants"]
    if not isinstance(variants, list):
        raise ConfigError("variants must be a list of tables ([[variants]] entries)")
    labels = []
    for entry in variants:
        if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
            raise ConfigError(f"variants: every entry needs a string 'label' (got {entry!r})")
        _check_keys(entry, {"label", *VARIANT_KEYS}, f"variants ({entry['label']})")
        labels.append(entry["label"])
        try:
            _check_setting(merge_variant(cfg, entry))
        except ConfigError as exc:
            raise ConfigError(f"variants ({entry['label']}): {exc}") from exc
    if len(set(labels)) != len(labels):
        raise ConfigError(f"variants: labels must be unique (got {labels})")


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


def _check_compute_times(value: Any) -> None:
    """``compute_times = {mean = ..., distribution = ...}`` (see ``ComputeTimes``) or absent."""
    if value is None:
        return
    from .runtime import ComputeTimes

    if not isinstance(value, dict):
        raise ConfigError(f"compute_times must be a table such as {{mean = 1.0, distribution = "
                          f"'exponential'}} (got {value!r})")
    try:
        ComputeTimes(**value)
    except TypeError as exc:
        raise ConfigError(f"compute_times: {exc}; accepted: mean, distribution, spread, "
                          "slow_fraction, slowdown") from exc
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc


def _check_setting(cfg: dict[str, Any]) -> None:
    """Validate one setting (the base config, or a variant merged over it)."""
    from .algorithms import ALGORITHMS, DECENTRALIZED
    from .data import DATASETS, SAMPLERS
    from .losses import LOSSES
    from .metrics import METRICS
    from .regularizers import REGULARIZERS

    _check_compute_times(cfg.get("compute_times"))
    if not (isinstance(cfg["rounds"], int) and not isinstance(cfg["rounds"], bool)
            and cfg["rounds"] >= 1):
        raise ConfigError(f"config: rounds must be a positive integer (got {cfg['rounds']!r})")
    _check_seeds(cfg["seeds"])
    _batch_modes(cfg["batch_size"])
    for metric in cfg["metrics"]:
        if metric not in METRICS:
            raise ConfigError(f"config: unknown metric {metric!r}; valid: {sorted(METRICS)}")

    data = _check_table(cfg["data"], "data", '{generator = "breast_cancer", n_clients = 10}')
    if data.get("generator") not in DATASETS:
        raise ConfigError(f"data.generator: unknown dataset {data.get('generator')!r}; valid: "
                          f"{sorted(DATASETS)}")
    _check_keys(data, {"generator", *inspect.signature(DATASETS[data['generator']]).parameters},
                f"data ({data['generator']})")
    _check_types(data, DATASETS[data["generator"]], "data")
    if "partition" in data:
        from .data import PARTITIONERS, partition_spec

        try:
            name, params = partition_spec(data["partition"])
        except ValueError as exc:
            raise ConfigError(f"data.partition: {exc}") from exc
        _check_types(params, PARTITIONERS[name], "data.partition")

    problem = _check_table(cfg["problem"], "problem", '{loss = "logistic"}')
    if problem.get("loss") not in LOSSES:
        raise ConfigError(f"problem.loss: unknown loss {problem.get('loss')!r}; valid: "
                          f"{sorted(LOSSES)}")
    loss_params = set(inspect.signature(LOSSES[problem["loss"]]).parameters)
    _check_keys(problem, {"loss", "weighting", *loss_params}, f"problem ({problem['loss']})")
    _check_types(problem, LOSSES[problem["loss"]], "problem")
    n_classes = data.get("n_classes")
    if problem["loss"] in CLASS_LOSSES and not (_is_integer(n_classes) and n_classes > 2):
        raise ConfigError(f"problem.loss = {problem['loss']!r} shapes a (features x classes) "
                          f"model: set data.n_classes = K, the number of classes (K >= 3; got "
                          f"{n_classes!r}); for two classes use loss = 'logistic'")

    reg = _check_table(cfg["regularizer"], "regularizer", '{name = "l1", alpha = 1e-4}')
    if reg.get("name") not in REGULARIZERS:
        raise ConfigError(f"regularizer.name: unknown regularizer {reg.get('name')!r}; valid: "
                          f"{sorted(REGULARIZERS)}")
    reg_params = set(inspect.signature(REGULARIZERS[reg["name"]]).parameters)
    _check_keys(reg, {"name", "scope", *reg_params}, f"regularizer ({reg['name']})")
    _check_types(reg, REGULARIZERS[reg["name"]], "regularizer")
    if reg.get("scope", "all") not in ("all", "weights"):
        raise ConfigError(f"regularizer.scope must be 'all' or 'weights' (network weights and "
                          f"kernels, not biases); got {reg['scope']!r}")
    _check_extras(cfg)
    if reg.get("scope") == "weights" and problem["loss"] != "torch_model":
        raise ConfigError("regularizer.scope = 'weights' needs a network (loss = "
                          "'torch_model'); other models have no biases to leave out")

    if cfg.get("streaming") and data["generator"] not in SAMPLERS:
        streamable = sorted(SAMPLERS)
        raise ConfigError(f"streaming = true needs a generator with a sampler ({streamable}); "
                          f"{data['generator']!r} has none")
    _check_topology(cfg.get("topology"))
    if not cfg["algorithms"]:
        raise ConfigError("config: algorithms is empty; add at least one [[algorithms]] entry")
    labels = []
    for entry in cfg["algorithms"]:
        name = entry.get("name")
        if name not in ALGORITHMS and name not in DECENTRALIZED:
            raise ConfigError(f"algorithms: unknown algorithm {name!r}; valid: "
                              f"{sorted([*ALGORITHMS, *DECENTRALIZED])}")
        if name in DECENTRALIZED and not cfg.get("topology"):
            raise ConfigError(f"algorithms ({name}) is decentralized: add a [topology] table, "
                              'e.g. topology = { name = "chain" }')
        accepted = set(inspect.signature(ALGORITHMS.get(name) or DECENTRALIZED[name]
                                         ).parameters)
        # clients_per_round per entry: an algorithm defined for full participation (FedPD)
        # runs beside sampled ones, as in the FedDR paper's comparisons
        _check_keys(entry, {"name", "label", "clients_per_round", *accepted},
                    f"algorithms ({name})")
        _check_types(entry, ALGORITHMS.get(name) or DECENTRALIZED[name],
                     f"algorithms.{entry.get('label', name)}")
        labels.append(entry.get("label", name))
    if len(set(labels)) != len(labels):
        raise ConfigError(f"algorithms: labels must be unique (got {labels}); give repeated "
                          "algorithms a distinct 'label'")
    _check_client_state(cfg)


def _check_extras(cfg: dict[str, Any]) -> None:
    """Refuse a setting whose data set, loss or backend needs an extra that is missing, naming
    every missing one (before any run starts or any file is written)."""
    from .data import DATASET_NEEDS

    needs, reasons = [], []
    generator = cfg["data"]["generator"]
    if generator in DATASET_NEEDS:
        needs.append(DATASET_NEEDS[generator])
        reasons.append(f"data.generator = {generator!r}")
    if cfg["problem"]["loss"] == "torch_model":
        needs.append("torch")
        reasons.append("problem.loss = 'torch_model'")
    elif cfg["backend"] not in ("auto", "numpy"):
        needs.append("torch")
        reasons.append(f"backend = {cfg['backend']!r}")
    check_installed(needs, f"config {cfg['name']!r} ({', '.join(reasons)})")


def _check_client_state(cfg: dict[str, Any]) -> None:
    """``client_state = "disk"`` (memory-mapped NumPy states) fits NumPy, synchronous runs only."""
    from .algorithms import DECENTRALIZED
    from .experiments._runner import async_entries

    if cfg.get("client_state", "memory") != "disk":
        return
    if cfg["problem"].get("loss") == "torch_model" or cfg["backend"] in ("torch", "torch-float64",
                                                                          "cuda"):
        raise ConfigError("client_state = 'disk' keeps NumPy client states in memory-mapped "
                          "files: use backend = 'numpy' (not torch or a network), or "
                          "client_state = 'memory'")
    other_engines = [entry["name"] for entry in cfg["algorithms"]
                     if entry["name"] in DECENTRALIZED]
    other_engines += [entry["name"] for entry in async_entries(cfg)]
    if other_engines:
        raise ConfigError(f"client_state = 'disk' applies to synchronous rounds of the "
                          f"simulator; algorithms ({other_engines[0]}) runs on another engine "
                          "(decentralized or asynchronous): use client_state = 'memory'")


def _check_topology(table: Any) -> None:
    from .topology import TOPOLOGIES

    if table is None:
        return
    if not isinstance(table, dict) or "name" not in table:
        raise ConfigError(f'topology must be a table with a name, e.g. {{ name = "chain" }} '
                          f"(got {table!r})")
    name = table["name"]
    if name in TOPOLOGIES:
        params = set(inspect.signature(TOPOLOGIES[name]).parameters) - {"n_nodes"}
    elif name in ("grid", "matrix"):
        params = {"rows"} if name == "grid" else {"mixing"}
    else:
        raise ConfigError(f"topology.name: unknown topology {name!r}; valid: "
                          f"{sorted([*TOPOLOGIES, 'grid', 'matrix'])}")
    _check_keys(table, {"name", *params, *TOPOLOGY_EVAL_KEYS}, f"topology ({name})")


def build_topology(cfg: dict[str, Any], n_nodes: int) -> tuple[Any, dict[str, Any]]:
    """The :class:`~fedcomp.topology.Topology` of a setting and its evaluation options."""
    from .topology import make_topology

    table = dict(cfg["topology"])
    options = {k: table.pop(k) for k in TOPOLOGY_EVAL_KEYS if k in table}
    options["evaluate_on"] = tuple(options.get("evaluate_on", ("average",)))
    return make_topology(table.pop("name"), n_nodes, **table), options


def build_problem(cfg: dict[str, Any]) -> Any:
    """The :class:`~fedcomp.problem.Problem` a resolved configuration describes."""
    from .data import DATASETS, GROUND_TRUTHS
    from .problem import Problem

    data_cfg = dict(cfg["data"])
    name = data_cfg.pop("generator")
    data = _on_backend(DATASETS[name](**data_cfg), cfg)
    truth = GROUND_TRUTHS[name](**data_cfg) if name in GROUND_TRUTHS else None
    loss, regularizer, n_classes = build_components(cfg)
    return Problem(loss, regularizer, data, weighting=cfg["problem"].get("weighting", "uniform"),
                   n_classes=n_classes, ground_truth=truth, name=cfg["name"],
                   sampler=build_sampler(cfg))


def build_sampler(cfg: dict[str, Any]) -> Any:
    """The streaming sampler of a resolved configuration (``None`` without ``streaming``).

    It draws every client's fresh samples from the generator's parameters alone, keyed by
    the global client id, so any machine holding the configuration draws the same ones.
    """
    from .data import SAMPLERS

    if not cfg.get("streaming"):
        return None
    data_cfg = dict(cfg["data"])
    return SAMPLERS[data_cfg.pop("generator")](**data_cfg)


def _on_backend(data: Any, cfg: dict[str, Any]) -> Any:
    """The data on the configuration's backend (NumPy data stay as they are)."""
    backend = cfg.get("backend", "auto")
    if backend == "auto":
        backend = "torch" if cfg["problem"].get("loss") == "torch_model" else "numpy"
    if backend == "numpy":
        return data
    torch = require("torch", f"backend = {backend!r}")
    if backend == "cuda" and not torch.cuda.is_available():
        raise ConfigError("backend = 'cuda' but torch sees no GPU; use backend = 'torch'")
    dtype = torch.float64 if backend == "torch-float64" else torch.float32
    return data.to(torch.zeros(0, dtype=dtype, device="cuda" if backend == "cuda" else "cpu"))


def build_components(cfg: dict[str, Any]) -> tuple[Any, Any, int | None]:
    """``(loss, regularizer, n_classes)`` of a resolved configuration, without its data."""
    from .losses import make_loss
    from .regularizers import make_regularizer

    problem_cfg = dict(cfg["problem"])
    loss = make_loss(problem_cfg.pop("loss"), **{k: v for k, v in problem_cfg.items()
                                                   if k != "weighting"})
    reg_cfg = dict(cfg["regularizer"])
    param_ndim = loss.param_ndim
    reg_name = reg_cfg.pop("name")
    scope = reg_cfg.pop("scope", "all")
    if "param_ndim" in inspect.signature(make_regularizer_class(reg_name)).parameters:
        reg_cfg.setdefault("param_ndim", param_ndim)
    regularizer: Any = make_regularizer(reg_name, **reg_cfg)
    if scope == "weights":  # a network's kernels and weight matrices, not its biases
        from .regularizers import Masked

        network: Any = loss  # scope = "weights" was validated to come with a TorchModel
        regularizer = Masked(regularizer, network.layout().weight_mask())
    n_classes = cfg["data"].get("n_classes")
    if n_classes is not None and n_classes <= 2:
        n_classes = None  # binary ±1 labels: a vector model
    return loss, regularizer, n_classes


def make_regularizer_class(name: str) -> Any:
    from .regularizers import REGULARIZERS

    return REGULARIZERS[name]


def batch_modes(cfg: dict[str, Any]) -> list[int | None]:
    """The gradient modes of a configuration: ``None`` (full gradients) or batch sizes."""
    return _batch_modes(cfg["batch_size"])


def mode_name(batch_size: int | None) -> str:
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
