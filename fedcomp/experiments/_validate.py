"""Between configuration and setting: every check of a configuration, key by key.

:func:`validate` checks a configuration dict (:mod:`fedcomp.config`) section by section —
the run's own keys, the data, problem and regularizer, each ``[[algorithms]]`` entry with
its ``compressor``, ``privacy`` and ``personalization`` tables, the topology, the start
``x0``, the target, the stop rule and the trackers — and fills in the defaults; the types it
produces are :mod:`._setting`'s. Errors are :class:`~fedcomp.config.ConfigError` naming
the key, the bad value and the fix.
"""

from __future__ import annotations

import copy
import inspect
import math
import numbers
from typing import Any, TypeGuard

from ..config import (
    TOP_LEVEL_KEYS,
    VARIANT_KEYS,
    ConfigError,
    _batch_modes,
    merge_variant,
    reading_config,
    readings,
)
from ..runtime._backends import BACKENDS, split_name

#: Keys of the ``[topology]`` table that configure evaluation, not the graph.
TOPOLOGY_EVAL_KEYS = {"evaluate_on", "node", "sparsity"}

#: The values of the optional top-level keys when a configuration leaves them out.
DEFAULTS: dict[str, Any] = {
    "reading": "as_written",
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
    "x0": "default",
    "tracking": {},
    "target": None,
    "stop": None,
}

#: Keys of a ``target = {...}`` table: the metric and one threshold, reached when the metric
#: is at or below ``below`` (a loss, an optimality) or at or above ``above`` (an accuracy).
TARGET_KEYS = {"metric", "below", "above"}

#: Keys of a ``stop = {...}`` table: a run ends at the first row whose measure is <= tol.
STOP_KEYS = {"tol", "measure"}

#: What a run reports about its target (:func:`fedcomp.experiments._execute.to_target`): the
#: counters at the first evaluation that reached it (``inf`` when none did).
TARGET_COLUMNS = ("rounds_to_target", "floats_up_to_target", "bits_up_to_target")

#: Keys of an ``x0 = {...}`` table: a random start, i.i.d. normal entries.
X0_KEYS = {"distribution", "scale", "seed"}

#: ``data.seed`` of a configuration whose data follow the run seed (also what an absent
#: ``data.seed`` means): every seed of the experiment draws its own data.
DATA_SEED_FOLLOWS_RUN = "run"

#: Losses whose model has one column per class: they need ``data.n_classes``.
CLASS_LOSSES = ("softmax",)

#: ``client_state`` values: stacked client states in RAM, or memory-mapped ``.npy`` files
#: (for populations whose state does not fit in memory; see ``fedcomp.simulate``).
CLIENT_STATES = ("memory", "disk")

def backend_library(name: str) -> str:
    """The array library of a configuration's ``backend`` (``"auto"`` for auto), from its
    registry entry (:data:`fedcomp.runtime._backends.BACKENDS`); ``ConfigError`` naming the
    valid backends for an unknown one."""
    try:
        base, _ = split_name(name)
    except ValueError as exc:
        raise ConfigError(f"backend: {exc}") from None
    return BACKENDS.entry(base).library


#: Keys of an ``[[algorithms]]`` entry that are not the factory's hyperparameters.
ENTRY_KEYS = ("name", "label", "clients_per_round", "compressor", "privacy", "personalization")

#: The keys of an entry's ``personalization = {name = "ditto", ...}`` table: the wrapper's
#: name and its parameters (:func:`fedcomp.algorithms.ditto`).
PERSONALIZATION_KEYS = ("name", "lam", "personal_steps", "personal_lr")

#: Keys of an entry's ``compressor = {...}`` table besides the compressor's own parameters.
COMPRESSOR_KEYS = ("name", "ef21")


def execution_of(name: str) -> str:
    """The engine an algorithm runs on: ``"rounds"``, ``"async"`` or ``"decentralized"``.

    A static fact of the algorithm registry: nothing is built to learn it.
    """
    from ..algorithms import execution_of as registered

    return registered(name)


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


def tracking_settings(value: Any) -> dict[str, Any]:
    """The ``[tracking]`` table checked, in its full form (see :mod:`fedcomp.metrics._tracking`).

    ``tensorboard = true`` (event files in ``OUT/tensorboard``) or a directory;
    ``mlflow = true`` (the SQLite store ``OUT/mlflow.db``, an experiment named after the
    configuration) or ``{uri = "...", experiment = "..."}``. ``false`` or absent: off.

    Examples
    --------
    >>> tracking_settings({"tensorboard": True, "mlflow": {"uri": "http://localhost:5000"}})
    {'tensorboard': {}, 'mlflow': {'uri': 'http://localhost:5000'}}
    >>> tracking_settings({"wandb": True})
    Traceback (most recent call last):
    ...
    fedcomp.config.ConfigError: tracking: unknown tracker 'wandb'; valid: ['mlflow', 'tensorboard']
    """
    from ..metrics._tracking import TRACKERS

    if not isinstance(value, dict):
        raise ConfigError(f"tracking must be a table such as {{tensorboard = true}} "
                          f"(got {value!r})")
    out: dict[str, Any] = {}
    for name, setting in value.items():
        if name not in TRACKERS:
            raise ConfigError(f"tracking: unknown tracker {name!r}; valid: {sorted(TRACKERS)}")
        fields = {"tensorboard": ("logdir",), "mlflow": ("uri", "experiment")}[name]
        if setting is False:
            continue
        if setting is True:
            setting = {}
        elif name == "tensorboard" and isinstance(setting, str):
            setting = {"logdir": setting}
        if not isinstance(setting, dict):
            raise ConfigError(f"tracking.{name} must be true, false or a table with "
                              f"{' / '.join(fields)} (got {setting!r})")
        _check_keys(setting, set(fields), f"tracking.{name}")
        for key, text in setting.items():
            if not (isinstance(text, str) and text.strip()):
                raise ConfigError(f"tracking.{name}.{key} must be a non-empty string "
                                  f"(got {text!r})")
        out[name] = dict(setting)
    return out


def validate(config: dict[str, Any]) -> dict[str, Any]:
    """A configuration checked key by key, with its defaults filled in (a new dict).

    The dict behind an :class:`Experiment` (its ``config``): what ``config.json`` records
    and what a verdict rule reads. :func:`resolve` calls it; call :func:`resolve` instead
    to run something.

    Raises
    ------
    ConfigError
        Naming the first bad key, its value and the fix.
    """
    if not isinstance(config, dict):
        raise ConfigError(f"a configuration is a table (dict) of keys; got {type(config).__name__}")

    cfg = {**copy.deepcopy(DEFAULTS), **copy.deepcopy(config)}
    _check_keys(cfg, TOP_LEVEL_KEYS, "config")
    cfg.pop("quick", None)  # how the config shrinks for --quick (see quick_config)
    written = dict(cfg)
    cfg.pop("readings", None)
    if not (isinstance(cfg["reading"], str) and cfg["reading"]):
        raise ConfigError(f"reading must be the name of a reading (got {cfg['reading']!r})")
    for key in ("name", "rounds", "data", "problem", "regularizer", "algorithms"):
        if key not in cfg:
            raise ConfigError(f"config: missing required key {key!r}")
    check_name(cfg["name"])
    if "reference" not in config and cfg["problem"].get("loss") == "torch_model":
        cfg["reference"] = False  # a network has no centralized x* to compare against
    if backend_library(cfg["backend"]) == "jax" and (cfg.get("problem") or {}).get(
            "loss") == "torch_model":
        raise ConfigError(f"backend = {cfg['backend']!r}: a network (problem.loss = "
                          "'torch_model') computes with torch; use backend = 'torch', "
                          "'torch-float64', 'cuda' or 'auto'")
    if cfg["client_state"] not in CLIENT_STATES:
        raise ConfigError(f"client_state: unknown value {cfg['client_state']!r}; valid: "
                          f"{list(CLIENT_STATES)} ('disk' keeps client states in memory-mapped "
                          "files)")
    cfg["reference"] = _reference_settings(cfg["reference"])
    cfg["tracking"] = tracking_settings(cfg["tracking"])
    _check_setting(cfg)
    _check_variants(cfg)
    # the other readings of the paper (see reading_config), each a configuration of its
    # own: checked after the configuration as written, whose errors come first
    for reading in list(readings(written))[1:]:
        try:
            validate(reading_config(written, reading))
        except ConfigError as exc:
            prefix = f"readings.{reading}: "
            message = str(exc)
            raise ConfigError(message if message.startswith(prefix) else prefix + message
                              ) from None
    return cfg


def check_name(name: Any) -> None:
    """``name`` names the default output directory ``runs/NAME-TIME``: a plain file name.

    A path (``"../../x"``, ``"/tmp/x"``) would put the outputs outside ``runs/``.
    """
    if not (isinstance(name, str) and name.strip() and name not in (".", "..")
            and not any(c in name for c in "/\\\0:") and name == name.strip()):
        raise ConfigError(f"name must be a plain file name such as 'my_experiment' (no '/', "
                          f"'\\', ':' or surrounding spaces): it names the output directory "
                          f"runs/NAME-TIME (got {name!r})")


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


def _check_compute_times(value: Any) -> None:
    """``compute_times = {mean = ..., distribution = ...}`` (see ``ComputeTimes``) or absent."""
    if value is None:
        return
    from ..runtime import ComputeTimes

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


def _check_component(registry: Any, table: dict[str, Any], key: str, where: str,
                     extra: tuple[str, ...] = (), types_where: str | None = None) -> str:
    """The registered name ``table[key]``, its table's keys and number types checked.

    One check for every family: the name must be in ``registry`` (the error lists the
    valid ones), the other keys settable parameters of its factory or ``extra``, and the
    values numbers or integers where the factory's signature says so.
    """
    name = table.get(key)
    if not isinstance(name, str) or name not in registry:
        raise ConfigError(f"{where}.{key}: unknown {registry.kind} {name!r}; valid: "
                          f"{sorted(registry)}")
    _check_keys(table, {key, *extra, *registry.settable(name)}, f"{where} ({name})")
    _check_types(table, registry[name], types_where or where)
    _check_finite({k: v for k, v in table.items() if k != key}, types_where or where,
                  registry.entry(name).unbounded)
    return name


def _check_finite(table: dict[str, Any], where: str, unbounded: tuple[str, ...] = ()) -> None:
    """:func:`~fedcomp._registry.check_finite` (the factories' own check) as a ConfigError."""
    from .._registry import NonFiniteParameterError, check_finite

    try:
        check_finite(table, where, unbounded)
    except NonFiniteParameterError as exc:
        raise ConfigError(str(exc)) from None


#: The largest minibatch, 2**31 - 1 samples: more than a client holds (a batch beyond its
#: count only redraws samples). A batch's indices are drawn in memory, 8 bytes each per
#: client, so a larger one could only fail mid-run, in NumPy's words naming no value.
MAX_BATCH_SIZE = 2**31 - 1


def _check_setting(cfg: dict[str, Any]) -> None:
    """Validate one setting (the base config, or a variant merged over it)."""
    from ..algorithms import REGISTRY
    from ..data import DATASETS, PARTITIONERS, partition_noise, partition_spec
    from ..losses import LOSSES
    from ..metrics import METRICS
    from ..regularizers import REGULARIZERS

    _check_compute_times(cfg.get("compute_times"))
    if not (isinstance(cfg["rounds"], int) and not isinstance(cfg["rounds"], bool)
            and cfg["rounds"] >= 1):
        raise ConfigError(f"config: rounds must be a positive integer (got {cfg['rounds']!r})")
    if not (_is_integer(cfg["eval_every"]) and cfg["eval_every"] >= 1):
        raise ConfigError(f"eval_every must be a positive integer, the rounds between "
                          f"evaluations (got {cfg['eval_every']!r})")
    _check_seeds(cfg["seeds"])
    modes = _batch_modes(cfg["batch_size"])
    if not modes or len(set(modes)) != len(modes):  # no runs at all, or one run label twice
        raise ConfigError(f"batch_size must be 'full', a positive integer or a list of distinct "
                          f"ones, e.g. batch_size = ['full', 32] (got {cfg['batch_size']!r})")
    for mode in modes:  # NumPy would fail mid-run ("Maximum allowed size exceeded")
        if mode is not None and mode > MAX_BATCH_SIZE:
            raise ConfigError(f"batch_size = {mode} is above the largest minibatch, "
                              f"{MAX_BATCH_SIZE} (2**31 - 1) samples; use 'full' for full "
                              "gradients, or a batch below the clients' sample counts")
    if not (isinstance(cfg["metrics"], list) and cfg["metrics"]
            and all(isinstance(m, str) for m in cfg["metrics"])):
        raise ConfigError(f"metrics must be a non-empty list of names, e.g. metrics = "
                          f"['objective'] (a single name too is written as a list) "
                          f"(got {cfg['metrics']!r})")
    for metric in cfg["metrics"]:
        if metric not in METRICS:
            raise ConfigError(f"metrics: unknown metric {metric!r}; valid: {sorted(METRICS)}")

    data = _check_table(cfg["data"], "data", '{generator = "breast_cancer", n_clients = 10}')
    # data.seed = "run" (or no data.seed): every run seed draws its own data
    generator = _check_component(DATASETS, {k: v for k, v in data.items() if not (
        k == "seed" and v == DATA_SEED_FOLLOWS_RUN)}, "generator", "data")
    _check_data_size(generator, data)
    if "partition" in data:
        try:
            name, params = partition_spec(data["partition"])
            partition_noise(data["partition"])
        except ValueError as exc:
            raise ConfigError(f"data.partition: {exc}") from exc
        _check_types(params, PARTITIONERS[name], "data.partition")
        _check_finite(params, "data.partition")

    problem = _check_table(cfg["problem"], "problem", '{loss = "logistic"}')
    loss = _check_component(LOSSES, problem, "loss", "problem", extra=("weighting", "minibatch"))
    n_classes = data.get("n_classes")
    if loss in CLASS_LOSSES and not (_is_integer(n_classes) and n_classes > 2):
        raise ConfigError(f"problem.loss = {loss!r} shapes a (features x classes) "
                          f"model: set data.n_classes = K, the number of classes (K >= 3; got "
                          f"{n_classes!r}); for two classes use loss = 'logistic'")

    reg = _check_table(cfg["regularizer"], "regularizer", '{name = "l1", alpha = 1e-4}')
    _check_component(REGULARIZERS, reg, "name", "regularizer", extra=("scope",))
    if reg.get("scope", "all") not in ("all", "weights"):
        raise ConfigError(f"regularizer.scope must be 'all' or 'weights' (network weights and "
                          f"kernels, not biases); got {reg['scope']!r}")
    _check_extras(cfg)
    if reg.get("scope") == "weights" and loss != "torch_model":
        raise ConfigError("regularizer.scope = 'weights' needs a network (loss = "
                          "'torch_model'); other models have no biases to leave out")

    if cfg.get("streaming") and DATASETS.entry(generator).sampler is None:
        streamable = sorted(n for n in DATASETS if DATASETS.entry(n).sampler is not None)
        raise ConfigError(f"streaming = true needs a generator with a sampler ({streamable}); "
                          f"{generator!r} has none")
    _check_topology(cfg.get("topology"))
    if not isinstance(cfg["algorithms"], list) or not all(
            isinstance(entry, dict) for entry in cfg["algorithms"]):
        raise ConfigError("algorithms must be a list of tables ([[algorithms]] entries with a "
                          f"name), got {cfg['algorithms']!r}")
    if not cfg["algorithms"]:
        raise ConfigError("config: algorithms is empty; add at least one [[algorithms]] entry")
    labels = []
    for entry in cfg["algorithms"]:
        # clients_per_round per entry: an algorithm defined for full participation (FedPD)
        # runs beside sampled ones, as in the FedDR paper's comparisons
        # the privacy table is checked by its own rules (clip = inf is allowed there)
        name = _check_component(REGISTRY, {k: v for k, v in entry.items() if k != "privacy"},
                                "name", "algorithms",
                                extra=("label", "clients_per_round", "compressor",
                                       "personalization"),
                                types_where=f"algorithms.{entry.get('label', entry.get('name'))}")
        _check_compressor(entry, name)
        _check_personalization(entry, name)
        if "privacy" in entry:
            _check_privacy(entry["privacy"], name, entry.get("label", name))
            if "compressor" in entry and entry["privacy"].get("local", False) is True:
                # a client's own noise makes its compressed upload dense: the encoding
                # (and bits_up) would no longer be what is sent
                raise ConfigError(
                    f"algorithms.{entry.get('label', name)}: privacy.local = true with a "
                    "compressor would send a dense noisy upload, not the compressed one; "
                    "use central noise (local = false) or drop the compressor")
        if REGISTRY.entry(name).execution == "decentralized" and not cfg.get("topology"):
            raise ConfigError(f"algorithms ({name}) is decentralized: add a [topology] table, "
                              'e.g. topology = { name = "chain" }')
        label = entry.get("label", name)
        if not (isinstance(label, str) and label.strip()):
            raise ConfigError(f"algorithms ({name}): label must be a non-empty string, the "
                              f"run's name in results.csv (got {label!r})")
        labels.append(label)
    if len(set(labels)) != len(labels):
        raise ConfigError(f"algorithms: labels must be unique (got {labels}); give repeated "
                          "algorithms a distinct 'label'")
    _check_client_state(cfg)
    _check_x0(cfg["x0"])
    _check_target(cfg["target"], cfg["metrics"])
    _check_stop(cfg["stop"])


def _check_compressor(entry: dict[str, Any], name: str) -> None:
    """An ``[[algorithms]]`` entry's ``compressor = {name = ..., ef21 = ...}`` table."""
    from ..algorithms import REGISTRY
    from ..compressors import COMPRESSORS

    if "compressor" not in entry:
        return
    where = f"algorithms.{entry.get('label', name)}.compressor"
    table = entry["compressor"]
    if not isinstance(table, dict):
        raise ConfigError(f"{where} must be a table such as {{name = \"top_k\", k = 5}} "
                          f"(got {table!r}); 'fedcomp list compressors' names them")
    if REGISTRY.entry(name).execution == "decentralized":
        raise ConfigError(f"{where}: {name} is decentralized (gossip, no uploads); compress "
                          "the uploads of a star-topology algorithm")
    _check_component(COMPRESSORS, table, "name", where, extra=("ef21",))
    if not isinstance(table.get("ef21", False), bool):
        raise ConfigError(f"{where}.ef21 must be true or false (got {table['ef21']!r})")


def _check_personalization(entry: dict[str, Any], name: str) -> None:
    """An ``[[algorithms]]`` entry's ``personalization = {name = "ditto", lam = ...}``."""
    from ..algorithms import REGISTRY

    if "personalization" not in entry:
        return
    where = f"algorithms.{entry.get('label', name)}.personalization"
    table = entry["personalization"]
    if not (isinstance(table, dict) and table.get("name") == "ditto"):
        raise ConfigError(f"{where} must be a table {{name = \"ditto\", lam = 0.1}} (Ditto is "
                          f"the personalisation fedcomp has; got {table!r})")
    _check_keys(table, set(PERSONALIZATION_KEYS), where)
    if "lam" not in table:
        raise ConfigError(f"{where}: missing lam, the pull toward the global model (0: local "
                          "training; large: the global model), e.g. lam = 0.1")
    if REGISTRY.entry(name).execution != "rounds":
        raise ConfigError(f"{where}: {name} does not run in synchronous rounds; Ditto wraps "
                          "a star-topology algorithm run in rounds")
    if "privacy" in entry:
        raise ConfigError(f"{where}: a private algorithm with personal models is not "
                          "supported (the personal steps would see unclipped data); drop "
                          "one of privacy and personalization")
    from ..algorithms import ditto, make_algorithm

    try:  # the values, checked by the wrapper itself
        ditto(make_algorithm(name, **{k: v for k, v in entry.items() if k not in ENTRY_KEYS}),
              **{k: v for k, v in table.items() if k != "name"})
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _check_privacy(table: Any, name: str, label: str) -> None:
    """An ``[[algorithms]]`` entry's ``privacy`` table (:func:`fedcomp.privacy.privacy_plan`),
    and the accountant installed (``pip install 'fedcomp[privacy]'``)."""
    from .._extras import check_installed
    from ..privacy import privacy_plan

    try:
        privacy_plan(table, name, f"algorithms.{label}.privacy")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    check_installed(["dp_accounting"], f"algorithms.{label}.privacy")


def _check_data_size(generator: str, data: dict[str, Any]) -> None:
    """Refuse data the generator cannot build (a parameter without a default missing) or
    that cannot fit in memory, before the generator tries to allocate them.

    The estimate is the float64 features of a generated data set, ``n_clients ×
    samples_per_client × n_features`` (a ``size × size`` matrix for matrix data; one
    sample per client where the counts are random), from the table and the generator's
    defaults: ``n_features = 1_000_000_000`` would otherwise end in a bare MemoryError.
    Data read from files are checked by their loaders.
    """
    from ..data import DATASETS
    from ..data._checks import check_memory

    params = {name: p.default for name, p in
              inspect.signature(DATASETS[generator]).parameters.items()}
    # a parameter without a default was Python's "missing 2 required positional arguments"
    missing = [name for name, default in params.items() if default is inspect.Parameter.empty
               and name != "seed" and name not in data]  # the seed is the run's
    if missing:
        raise ConfigError(f"data: the generator {generator!r} needs {', '.join(missing)} (no "
                          f"default); add them to the [data] table, e.g. {missing[0]} = ...")
    params.update(data)
    n_clients, per_client = params.get("n_clients"), params.get("samples_per_client")
    width = params.get("n_features", params.get("size"))
    if "size" in params and "n_features" not in params and _is_integer(width):
        width = width * width
    if isinstance(per_client, list) and per_client and all(map(_is_integer, per_client)):
        per_client = max(per_client)
    per_client = per_client if _is_integer(per_client) else 1
    if not (_is_integer(n_clients) and _is_integer(width)):
        return
    key = "n_features" if "n_features" in params else "size"
    try:
        check_memory(8 * max(n_clients, 1) * max(per_client, 1) * max(width, 1),
                     f"data: the features of {generator} with n_clients = {n_clients}, "
                     f"samples_per_client = {params.get('samples_per_client')}, {key} = "
                     f"{params.get(key)}", f"reduce data.{key} or the samples")
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _check_x0(value: Any) -> None:
    """``x0 = "default"`` (the problem's own start) or a random start table."""
    if value == "default":
        return
    example = 'x0 = { distribution = "normal", scale = 1.0, seed = "run" }'
    if not isinstance(value, dict):
        raise ConfigError(f'x0 must be "default" or a table such as {example} (got {value!r})')
    _check_keys(value, X0_KEYS, "x0")
    if value.get("distribution", "normal") != "normal":
        raise ConfigError(f"x0.distribution: only 'normal' (i.i.d. N(0, scale^2) entries, as "
                          f"Bao et al.'s randn start) is known (got {value['distribution']!r})")
    scale = value.get("scale", 1.0)
    if not (_is_real(scale) and 0 < scale < float("inf")):
        raise ConfigError(f"x0.scale must be a positive finite number (got {scale!r})")
    seed = value.get("seed", DATA_SEED_FOLLOWS_RUN)
    if not (seed == DATA_SEED_FOLLOWS_RUN or (_is_integer(seed) and seed >= 0)):
        raise ConfigError(f'x0.seed must be "run" (the run\'s seed) or an integer >= 0 '
                          f"(got {seed!r})")


def _check_small_table(value: Any, keys: set[str], name: str, example: str) -> None:
    """``value`` is a table of the keys ``keys`` (an inline table such as ``example``)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a table such as {example} (got {value!r})")
    _check_keys(value, keys, name)


def _check_target(value: Any, metrics: list[str]) -> None:
    """``target = {metric = "train_accuracy", above = 0.97}`` (or ``below = ...``): a metric
    the runs record and one finite threshold."""
    if value is None:
        return
    example = 'target = { metric = "train_accuracy", above = 0.97 }'
    _check_small_table(value, TARGET_KEYS, "target", example)
    if value.get("metric") not in metrics:
        raise ConfigError(f"target.metric must be one of the recorded metrics {metrics} "
                          f"(got {value.get('metric')!r}); add it to metrics")
    given = [k for k in ("below", "above") if k in value]
    if len(given) != 1 or not _is_real(value[given[0]]) or not math.isfinite(value[given[0]]):
        raise ConfigError(f"target needs one finite threshold, below (a loss, an optimality) "
                          f"or above (an accuracy), e.g. {example} (got {value!r})")


def _check_stop(value: Any) -> None:
    """``stop = {tol = 1e-8}`` (and optionally ``measure``, one of
    :data:`fedcomp.runtime.STOP_MEASURES`): a number ``tol >= 0``."""
    from ..runtime import STOP_MEASURES

    if value is None:
        return
    example = 'stop = { tol = 1e-8, measure = "relative_prox_step" }'
    _check_small_table(value, STOP_KEYS, "stop", example)
    if not (_is_real(value.get("tol")) and math.isfinite(value["tol"]) and value["tol"] >= 0):
        raise ConfigError(f"stop.tol must be a number >= 0, e.g. {example} (got "
                          f"{value.get('tol')!r})")
    if value.get("measure", "relative_prox_step") not in STOP_MEASURES:
        raise ConfigError(f"stop.measure must be one of {sorted(STOP_MEASURES)} (got "
                          f"{value.get('measure')!r})")


def _check_extras(cfg: dict[str, Any]) -> None:
    """Refuse a setting whose data set, loss or backend needs an extra that is missing, naming
    every missing one (before any run starts or any file is written)."""
    from .._extras import check_installed
    from ..data import DATASET_NEEDS

    needs, reasons = [], []
    generator = cfg["data"]["generator"]
    if generator in DATASET_NEEDS:
        needs.append(DATASET_NEEDS[generator])
        reasons.append(f"data.generator = {generator!r}")
    if cfg["problem"]["loss"] == "torch_model":
        needs.append("torch")
        reasons.append("problem.loss = 'torch_model'")
    elif backend_library(cfg["backend"]) == "jax":
        needs.append("jax")
        reasons.append(f"backend = {cfg['backend']!r}")
    elif backend_library(cfg["backend"]) == "torch":
        needs.append("torch")
        reasons.append(f"backend = {cfg['backend']!r}")
    check_installed(needs, f"config {cfg['name']!r} ({', '.join(reasons)})")


def _check_client_state(cfg: dict[str, Any]) -> None:
    """``client_state = "disk"`` (memory-mapped NumPy states) fits NumPy, synchronous runs only."""
    if cfg.get("client_state", "memory") != "disk":
        return
    if cfg["problem"].get("loss") == "torch_model" or backend_library(cfg["backend"]) in (
            "torch", "jax"):
        raise ConfigError("client_state = 'disk' keeps NumPy client states in memory-mapped "
                          "files: use backend = 'numpy' (not torch, jax or a network), or "
                          "client_state = 'memory'")
    other_engines = [entry["name"] for entry in cfg["algorithms"]
                     if execution_of(entry["name"]) != "rounds"]
    if other_engines:
        raise ConfigError(f"client_state = 'disk' applies to synchronous rounds of the "
                          f"simulator; algorithms ({other_engines[0]}) runs on another engine "
                          "(decentralized or asynchronous): use client_state = 'memory'")


def _check_topology(table: Any) -> None:
    from ..topology import TOPOLOGIES

    if table is None:
        return
    if not isinstance(table, dict) or "name" not in table:
        raise ConfigError(f'topology must be a table with a name, e.g. {{ name = "chain" }} '
                          f"(got {table!r})")
    _check_component(TOPOLOGIES, table, "name", "topology", extra=tuple(TOPOLOGY_EVAL_KEYS))
