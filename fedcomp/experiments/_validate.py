"""Between configuration and setting: every check of a configuration, key by key.

:func:`validate` checks a configuration dict (:mod:`fedcomp.config`) against its schema
(:class:`fedcomp.config.Schema`: the accepted and required keys, the defaults it fills
in, each key's own check, once or in every variant) and then checks the sections that read
each other's registries — the data, problem and regularizer, each ``[[algorithms]]`` entry
with its ``compressor``, ``privacy`` and ``personalization`` tables, the topology, the
backend — in the base setting and in every variant; the types it produces are
:mod:`._setting`'s. Errors are :class:`~fedcomp.config.ConfigError` naming the key, the bad
value and the fix.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

from ..config import (
    ConfigError,
    accepted_keys,
    defaults,
    key_order,
    merge_variant,
    reading_config,
    readings,
    variant_keys,
)
from ..config._schema import (
    DATA_SEED_FOLLOWS_RUN,
    check_values,
    required_keys,
    unrecorded_keys,
)
from ..config._schema import MAX_BATCH_SIZE as MAX_BATCH_SIZE  # read from here by tests
from ..config._schema import check_keys as _check_keys
from ..config._schema import check_name as check_name  # read from here by _setting
from ..config._schema import is_integer as _is_integer
from ..config._schema import is_real as _is_real
from ..runtime._backends import BACKENDS, BackendEntry, resolve_backend

#: Keys of the ``[topology]`` table that configure evaluation, not the graph.
TOPOLOGY_EVAL_KEYS = {"evaluate_on", "node", "sparsity"}

#: What a run reports about its target (:func:`fedcomp.experiments._execute.to_target`): the
#: counters at the first evaluation that reached it (``inf`` when none did).
TARGET_COLUMNS = ("rounds_to_target", "floats_up_to_target", "bits_up_to_target")

#: Losses whose model has one column per class: they need ``data.n_classes``.
CLASS_LOSSES = ("softmax",)


def is_network(cfg: dict[str, Any]) -> bool:
    """Whether the model is a network (``problem.loss = "torch_model"``); False for a
    ``problem`` that is not a table (refused, naming it, by the setting's check)."""
    problem = cfg.get("problem")
    return isinstance(problem, dict) and problem.get("loss") == "torch_model"


def backend_entry(cfg: dict[str, Any]) -> BackendEntry:
    """The registry entry of a configuration's ``backend``
    (:data:`fedcomp.runtime._backends.BACKENDS`), whose fields say what it needs and allows;
    ``ConfigError`` naming the valid backends for an unknown one.

    ``auto`` is decided as on a machine without a GPU: what the checks read (the extra,
    networks, disk states) is the same for torch on the CPU and on a GPU."""
    network = is_network(cfg)
    try:
        return resolve_backend(cfg["backend"], network=network, gpu_visible=lambda: False).entry
    except ValueError as exc:
        raise ConfigError(f"backend: {exc}") from None


#: Keys of an ``[[algorithms]]`` entry that are not the factory's hyperparameters.
ENTRY_KEYS = ("name", "label", "clients_per_round", "compressor", "privacy", "personalization")

#: The keys of an entry's ``personalization = {name = "ditto", ...}`` table: the wrapper's
#: name and its parameters (:func:`fedcomp.algorithms.ditto`).
PERSONALIZATION_KEYS = ("name", "lam", "personal_steps", "personal_lr")

#: Keys of an entry's ``compressor = {...}`` table besides the compressor's own parameters.
COMPRESSOR_KEYS = ("name", "ef21")


def _check_table(value: Any, key: str, example: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{key} must be a table such as {example} (got {value!r})")
    return value


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

    cfg = {**defaults(), **copy.deepcopy(config)}
    _check_keys(cfg, accepted_keys(), "config")
    written = dict(cfg)
    for key in unrecorded_keys():  # quick (see quick_config), readings (checked below)
        cfg.pop(key, None)
    for key in required_keys():
        if key not in cfg:
            raise ConfigError(f"config: missing required key {key!r}")
    if "reference" not in config and is_network(cfg):
        cfg["reference"] = False  # a network has no centralized x* to compare against
    if not backend_entry(cfg).networks and is_network(cfg):
        raise ConfigError(f"backend = {cfg['backend']!r}: a network (problem.loss = "
                          "'torch_model') computes with torch; use backend = one of "
                          f"{[e.name for e in BACKENDS.entries() if e.networks]}")
    if backend_entry(cfg).library == "jax" and is_network(cfg):
        _check_jax_network(cfg)
    check_values(cfg, variant=False)  # each key of the whole configuration, by its own check
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
    return {key: cfg[key] for key in key_order() if key in cfg}  # fedcomp show's order


def _check_jax_network(cfg: dict[str, Any]) -> None:
    """A network on a jax backend is one jax's forward computes (fedcomp's mlp and cnn:
    :mod:`fedcomp.losses._jax_forward`); any other keeps the refusal, naming why."""
    from ..losses import make_loss
    from ..losses._jax_forward import covered

    params = {k: v for k, v in cfg["problem"].items()
              if k not in ("loss", "weighting", "minibatch")}
    try:
        loss = make_loss("torch_model", **params)
    except (ImportError, TypeError, ValueError):
        return  # torch missing or a bad problem table: named by their own checks
    if not covered(loss):
        raise ConfigError(f"backend = {cfg['backend']!r}: the network "
                          f"{params.get('model', 'mlp')!r} computes with torch (jax computes "
                          "a plain nn.Sequential of Conv2d / ReLU / MaxPool2d / Flatten / "
                          "Linear without buffers, such as mlp and cnn); use backend = one of "
                          f"{[e.name for e in BACKENDS.entries() if e.library == 'torch']}")


def _check_variants(cfg: dict[str, Any]) -> None:
    variants = cfg["variants"]
    if not isinstance(variants, list):
        raise ConfigError("variants must be a list of tables ([[variants]] entries)")
    labels = []
    for entry in variants:
        if not isinstance(entry, dict) or not isinstance(entry.get("label"), str):
            raise ConfigError(f"variants: every entry needs a string 'label' (got {entry!r})")
        _check_keys(entry, {"label", *variant_keys()}, f"variants ({entry['label']})")
        labels.append(entry["label"])
        try:
            _check_setting(merge_variant(cfg, entry))
        except ConfigError as exc:
            raise ConfigError(f"variants ({entry['label']}): {exc}") from exc
    if len(set(labels)) != len(labels):
        raise ConfigError(f"variants: labels must be unique (got {labels})")


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


def _check_setting(cfg: dict[str, Any]) -> None:
    """Validate one setting (the base config, or a variant merged over it)."""
    from ..algorithms import REGISTRY
    from ..data import DATASETS, PARTITIONERS, partition_noise, partition_spec
    from ..losses import LOSSES
    from ..regularizers import REGULARIZERS

    check_values(cfg, variant=True)  # each key a variant may set, by its own check
    # the sections: each reads the others' registries
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
    elif (extra := backend_entry(cfg).extra) is not None:
        needs.append(extra)
        reasons.append(f"backend = {cfg['backend']!r}")
    check_installed(needs, f"config {cfg['name']!r} ({', '.join(reasons)})")


def _check_client_state(cfg: dict[str, Any]) -> None:
    """``client_state = "disk"`` (memory-mapped NumPy states) fits NumPy, synchronous runs only."""
    if cfg.get("client_state", "memory") != "disk":
        return
    if cfg["problem"].get("loss") == "torch_model" or not backend_entry(cfg).disk_states:
        keeps = " or ".join(repr(e.name) for e in BACKENDS.entries() if e.disk_states)
        raise ConfigError("client_state = 'disk' keeps NumPy client states in memory-mapped "
                          f"files: use backend = {keeps} (not {cfg['backend']!r} or a "
                          "network), or client_state = 'memory'")
    from ..algorithms import execution_of

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
