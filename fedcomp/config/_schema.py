"""The schema of a training configuration: every top-level key declared once, with its check.

:class:`Schema` has one field per top-level key, in the order ``fedcomp show`` and
``config.json`` write them: its type, its default, and in its metadata (:func:`key`) whether
a ``[[variants]]`` entry may set it and the check of its value. Every list of keys the
pipeline reads is a view of these fields: :func:`accepted_keys` (``TOP_LEVEL_KEYS``),
:func:`key_order` (``KEY_ORDER``), :func:`variant_keys` (``VARIANT_KEYS``),
:func:`required_keys` and :func:`defaults`. Adding a key is one field here plus its check;
``tests/core/test_schema.py`` adds one and nothing else.

A key's check sees its value and the setting it is in (the base configuration, or a
variant merged over it) and returns the value the configuration keeps (``reference =
true`` becomes ``{"tol": 1e-10}``). The tables ``data``, ``problem``, ``regularizer``,
``topology`` and ``algorithms``, with ``streaming`` and ``backend``, are checked together
by :func:`fedcomp.experiments.validate`: each reads the others' registries (a loss's
classes from ``data``, ``streaming`` from the generator, the extras a backend needs).
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
from typing import Any, TypeGuard

from ..metrics import DEFAULT_METRICS


class ConfigError(ValueError):
    """An invalid experiment configuration (the message names the key and the fix)."""


# Named where users import it from (tracebacks, doctests and pickles say fedcomp.config,
# as before the module became a package)
ConfigError.__module__ = "fedcomp.config"

#: A key's check: ``check(value, setting) -> the value kept``, raising ConfigError.
Check = Callable[[Any, dict[str, Any]], Any]


class _Absent:
    """The default of a key that may be left out and has no value then (``quick``)."""

    def __repr__(self) -> str:
        return "ABSENT"


#: The default of an optional key without a value (left out of the checked configuration).
ABSENT: Any = _Absent()


def key(default: Any = MISSING, *, check: Check | None = None, variant: bool = False,
        recorded: bool = True, training: bool = True) -> Any:
    """One top-level key: a field of :class:`Schema`.

    Parameters
    ----------
    default : optional
        Its value when a configuration leaves it out; none: the key is required;
        :data:`ABSENT`: it may be left out and then has no value.
    check : callable, optional
        ``check(value, setting) -> value``: raises :class:`ConfigError` naming the key, the
        bad value and the fix; returns the value the checked configuration keeps.
    variant : bool
        A ``[[variants]]`` entry may set it (it is then checked in every setting).
    recorded : bool
        It stays in the checked configuration (``config.json``); False for keys consumed
        before (``quick``, ``readings``).
    training : bool
        A key of training configurations; False for one of timing experiments only
        (``kind``), ordered by :func:`key_order` but refused by a training configuration.
    """
    metadata = {"check": check, "variant": variant, "recorded": recorded, "training": training}
    if isinstance(default, list | dict):  # a fresh copy for every configuration
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def is_integer(value: Any) -> TypeGuard[int]:
    """An integer that is not a bool (TOML's ``true`` is Python's 1)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def is_real(value: Any) -> bool:
    """A real number that is not a bool."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def check_keys(table: dict[str, Any], accepted: set[str] | frozenset[str], where: str) -> None:
    """Refuse keys of ``table`` outside ``accepted``, naming them and the accepted ones."""
    unknown = sorted(set(table) - accepted)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {unknown}; accepted: {sorted(accepted)}")


def check_small_table(value: Any, keys: set[str], name: str, example: str) -> None:
    """``value`` is a table of the keys ``keys`` (an inline table such as ``example``)."""
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a table such as {example} (got {value!r})")
    check_keys(value, keys, name)


def check_name(name: Any) -> None:
    """``name`` names the default output directory ``runs/NAME-TIME``: a plain file name.

    A path (``"../../x"``, ``"/tmp/x"``) would put the outputs outside ``runs/``.
    """
    if not (isinstance(name, str) and name.strip() and name not in (".", "..")
            and not any(c in name for c in "/\\\0:") and name == name.strip()):
        raise ConfigError(f"name must be a plain file name such as 'my_experiment' (no '/', "
                          f"'\\', ':' or surrounding spaces): it names the output directory "
                          f"runs/NAME-TIME (got {name!r})")


def _name(value: Any, setting: dict[str, Any]) -> Any:
    check_name(value)
    return value


def _paper(value: Any, setting: dict[str, Any]) -> Any:
    if not (isinstance(value, str) and value.strip() and value == value.strip()):
        raise ConfigError(f"paper must name the paper the experiment follows, e.g. paper = "
                          f"'seed000' (the report groups experiments by it; got {value!r})")
    return value


def _reading(value: Any, setting: dict[str, Any]) -> Any:
    if not (isinstance(value, str) and value):
        raise ConfigError(f"reading must be the name of a reading (got {value!r})")
    return value


def _rounds(value: Any, setting: dict[str, Any]) -> Any:
    if not (is_integer(value) and value >= 1):
        raise ConfigError(f"config: rounds must be a positive integer (got {value!r})")
    return value


def _eval_every(value: Any, setting: dict[str, Any]) -> Any:
    if not (is_integer(value) and value >= 1):
        raise ConfigError(f"eval_every must be a positive integer, the rounds between "
                          f"evaluations (got {value!r})")
    return value


def _seeds(value: Any, setting: dict[str, Any]) -> Any:
    if not (isinstance(value, list) and value and all(is_integer(s) and s >= 0
                                                       for s in value)):
        raise ConfigError(f"seeds must be a non-empty list of non-negative integers, e.g. "
                          f"seeds = [0, 1, 2] (got {value!r})")
    return value


#: The largest minibatch, 2**31 - 1 samples: more than a client holds (a batch beyond its
#: count only redraws samples). A batch's indices are drawn in memory, 8 bytes each per
#: client, so a larger one could only fail mid-run, in NumPy's words naming no value.
MAX_BATCH_SIZE = 2**31 - 1


def _batch_modes(value: Any) -> list[int | None]:
    """``batch_size`` as gradient modes: ``None`` (full gradients) or batch sizes."""
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


def _batch_size(value: Any, setting: dict[str, Any]) -> Any:
    modes = _batch_modes(value)
    if not modes or len(set(modes)) != len(modes):  # no runs at all, or one run label twice
        raise ConfigError(f"batch_size must be 'full', a positive integer or a list of distinct "
                          f"ones, e.g. batch_size = ['full', 32] (got {value!r})")
    for mode in modes:  # NumPy would fail mid-run ("Maximum allowed size exceeded")
        if mode is not None and mode > MAX_BATCH_SIZE:
            raise ConfigError(f"batch_size = {mode} is above the largest minibatch, "
                              f"{MAX_BATCH_SIZE} (2**31 - 1) samples; use 'full' for full "
                              "gradients, or a batch below the clients' sample counts")
    return value


def _metrics(value: Any, setting: dict[str, Any]) -> Any:
    from ..metrics import METRICS

    if not (isinstance(value, list) and value and all(isinstance(m, str) for m in value)):
        raise ConfigError(f"metrics must be a non-empty list of names, e.g. metrics = "
                          f"['objective'] (a single name too is written as a list) "
                          f"(got {value!r})")
    for metric in value:
        if metric not in METRICS:
            raise ConfigError(f"metrics: unknown metric {metric!r}; valid: {sorted(METRICS)}")
    return value


def _reference(value: Any, setting: dict[str, Any]) -> dict[str, Any] | None:
    """``reference = true | false`` or a table ``{tol = 1e-13}`` → settings or ``None``."""
    if value is False or value is None:
        return None
    if value is True:
        return {"tol": 1e-10}
    if isinstance(value, dict):
        check_keys(value, {"tol"}, "reference")
        tol = value.get("tol", 1e-10)
        if not (isinstance(tol, int | float) and 0 < tol < 1):
            raise ConfigError(f"reference.tol must be a number in (0, 1) (got {tol!r})")
        return {"tol": float(tol)}
    raise ConfigError(f"reference must be true, false or a table {{tol = ...}} (got {value!r})")


#: Keys of a ``target = {...}`` table: the metric and one threshold, reached when the metric
#: is at or below ``below`` (a loss, an optimality) or at or above ``above`` (an accuracy).
TARGET_KEYS = {"metric", "below", "above"}


def _target(value: Any, setting: dict[str, Any]) -> Any:
    """``target = {metric = "train_accuracy", above = 0.97}`` (or ``below = ...``): a metric
    the runs record and one finite threshold."""
    if value is None:
        return value
    example = 'target = { metric = "train_accuracy", above = 0.97 }'
    check_small_table(value, TARGET_KEYS, "target", example)
    metrics = setting["metrics"]
    if value.get("metric") not in metrics:
        raise ConfigError(f"target.metric must be one of the recorded metrics {metrics} "
                          f"(got {value.get('metric')!r}); add it to metrics")
    given = [k for k in ("below", "above") if k in value]
    if len(given) != 1 or not is_real(value[given[0]]) or not math.isfinite(value[given[0]]):
        raise ConfigError(f"target needs one finite threshold, below (a loss, an optimality) "
                          f"or above (an accuracy), e.g. {example} (got {value!r})")
    return value


#: Keys of a ``stop = {...}`` table: a run ends at the first row whose measure is <= tol.
STOP_KEYS = {"tol", "measure"}


def _stop(value: Any, setting: dict[str, Any]) -> Any:
    """``stop = {tol = 1e-8}`` (and optionally ``measure``, one of
    :data:`fedcomp.runtime.STOP_MEASURES`): a number ``tol >= 0``."""
    from ..runtime import STOP_MEASURES

    if value is None:
        return value
    example = 'stop = { tol = 1e-8, measure = "relative_prox_step" }'
    check_small_table(value, STOP_KEYS, "stop", example)
    if not (is_real(value.get("tol")) and math.isfinite(value["tol"]) and value["tol"] >= 0):
        raise ConfigError(f"stop.tol must be a number >= 0, e.g. {example} (got "
                          f"{value.get('tol')!r})")
    if value.get("measure", "relative_prox_step") not in STOP_MEASURES:
        raise ConfigError(f"stop.measure must be one of {sorted(STOP_MEASURES)} (got "
                          f"{value.get('measure')!r})")
    return value


#: Keys of an ``x0 = {...}`` table: a random start, i.i.d. normal entries.
X0_KEYS = {"distribution", "scale", "seed"}

#: ``data.seed`` of a configuration whose data follow the run seed (also what an absent
#: ``data.seed`` means): every seed of the experiment draws its own data.
DATA_SEED_FOLLOWS_RUN = "run"


def _x0(value: Any, setting: dict[str, Any]) -> Any:
    """``x0 = "default"`` (the problem's own start) or a random start table."""
    if value == "default":
        return value
    example = 'x0 = { distribution = "normal", scale = 1.0, seed = "run" }'
    if not isinstance(value, dict):
        raise ConfigError(f'x0 must be "default" or a table such as {example} (got {value!r})')
    check_keys(value, X0_KEYS, "x0")
    if value.get("distribution", "normal") != "normal":
        raise ConfigError(f"x0.distribution: only 'normal' (i.i.d. N(0, scale^2) entries, as "
                          f"Bao et al.'s randn start) is known (got {value['distribution']!r})")
    scale = value.get("scale", 1.0)
    if not (is_real(scale) and 0 < scale < float("inf")):
        raise ConfigError(f"x0.scale must be a positive finite number (got {scale!r})")
    seed = value.get("seed", DATA_SEED_FOLLOWS_RUN)
    if not (seed == DATA_SEED_FOLLOWS_RUN or (is_integer(seed) and seed >= 0)):
        raise ConfigError(f'x0.seed must be "run" (the run\'s seed) or an integer >= 0 '
                          f"(got {seed!r})")
    return value


#: ``client_state`` values: stacked client states in RAM, or memory-mapped ``.npy`` files
#: (for populations whose state does not fit in memory; see ``fedcomp.simulate``).
CLIENT_STATES = ("memory", "disk")


def _client_state(value: Any, setting: dict[str, Any]) -> Any:
    if value not in CLIENT_STATES:
        raise ConfigError(f"client_state: unknown value {value!r}; valid: "
                          f"{list(CLIENT_STATES)} ('disk' keeps client states in memory-mapped "
                          "files)")
    return value


def _compute_times(value: Any, setting: dict[str, Any]) -> Any:
    """``compute_times = {mean = ..., distribution = ...}`` (see ``ComputeTimes``) or absent."""
    if value is None:
        return value
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
    return value


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
        names = {"tensorboard": ("logdir",), "mlflow": ("uri", "experiment")}[name]
        if setting is False:
            continue
        if setting is True:
            setting = {}
        elif name == "tensorboard" and isinstance(setting, str):
            setting = {"logdir": setting}
        if not isinstance(setting, dict):
            raise ConfigError(f"tracking.{name} must be true, false or a table with "
                              f"{' / '.join(names)} (got {setting!r})")
        check_keys(setting, set(names), f"tracking.{name}")
        for item, text in setting.items():
            if not (isinstance(text, str) and text.strip()):
                raise ConfigError(f"tracking.{name}.{item} must be a non-empty string "
                                  f"(got {text!r})")
        out[name] = dict(setting)
    return out


def _tracking(value: Any, setting: dict[str, Any]) -> dict[str, Any]:
    return tracking_settings(value)


@dataclass(frozen=True, kw_only=True)
class Schema:
    """The top-level keys of a training configuration, one field each, in written order.

    Never instantiated: its fields are the declaration every key list is a view of (see
    the module). Tables stay plain dicts; the types say what TOML holds.
    """

    name: str = key(check=_name)
    reading: str = key("as_written", check=_reading)
    kind: str = key(ABSENT, training=False)  # a timing experiment's mark (kind = "timing")
    description: str = key("")
    claim: str = key("")
    paper: str = key(ABSENT, check=_paper)  # the report's paper (fedcomp.report.PAPERS)
    rounds: int = key(check=_rounds, variant=True)
    eval_every: int = key(1, check=_eval_every, variant=True)
    seeds: list[int] = key([0], check=_seeds)
    batch_size: str | int | list[str | int] = key("full", check=_batch_size, variant=True)
    clients_per_round: int | None = key(None, variant=True)  # the engines check it
    client_block: str | int = key("auto", variant=True)  # the engines check it
    metrics: list[str] = key(list(DEFAULT_METRICS), check=_metrics)
    reference: bool | dict[str, float] | None = key(True, check=_reference)
    target: dict[str, Any] | None = key(None, check=_target)
    stop: dict[str, Any] | None = key(None, check=_stop)
    x0: str | dict[str, Any] = key("default", check=_x0, variant=True)
    backend: str = key("auto")  # with the sections (its library decides the extras)
    client_state: str = key("memory", check=_client_state, variant=True)
    streaming: bool = key(False, variant=True)  # with the sections (the generator's sampler)
    compute_times: dict[str, Any] | None = key(None, check=_compute_times, variant=True)
    # the sections: checked together by fedcomp.experiments.validate
    data: dict[str, Any] = key(variant=True)
    problem: dict[str, Any] = key(variant=True)
    regularizer: dict[str, Any] = key(variant=True)
    topology: dict[str, Any] | None = key(None, variant=True)
    algorithms: list[dict[str, Any]] = key(variant=True)
    variants: list[dict[str, Any]] = key([])  # each one a setting, checked as the base
    tracking: dict[str, Any] = key({}, check=_tracking)
    quick: dict[str, Any] = key(ABSENT, recorded=False)  # read by quick_config
    readings: dict[str, Any] = key(ABSENT, recorded=False)  # each checked as a configuration


#: The schema the pipeline reads (a test extends it by one field, as a new key would).
SCHEMA: type[Schema] = Schema


def schema_fields() -> tuple[Field[Any], ...]:
    """The fields of :data:`SCHEMA`, in written order."""
    return fields(SCHEMA)


def key_order() -> tuple[str, ...]:
    """The order :func:`fedcomp.config.to_toml` and ``config.json`` write the keys in."""
    return tuple(f.name for f in schema_fields())


def accepted_keys() -> frozenset[str]:
    """The top-level keys of a training configuration."""
    return frozenset(f.name for f in schema_fields() if f.metadata["training"])


def variant_keys() -> frozenset[str]:
    """What a ``[[variants]]`` entry may set (besides its ``label``)."""
    return frozenset(f.name for f in schema_fields() if f.metadata["variant"])


def required_keys() -> tuple[str, ...]:
    """The keys a training configuration must give (no default)."""
    return tuple(f.name for f in schema_fields()
                 if f.default is MISSING and f.default_factory is MISSING)


def defaults() -> dict[str, Any]:
    """The values of the keys a configuration leaves out (a fresh dict, in written order)."""
    out = {}
    for f in schema_fields():
        if f.default_factory is not MISSING:
            out[f.name] = f.default_factory()
        elif f.default is not MISSING and f.default is not ABSENT:
            out[f.name] = f.default
    return out


def unrecorded_keys() -> tuple[str, ...]:
    """Keys consumed before a configuration is checked (not in ``config.json``)."""
    return tuple(f.name for f in schema_fields() if not f.metadata["recorded"])


def check_values(setting: dict[str, Any], *, variant: bool) -> None:
    """Run the checks of the keys a variant may set (``variant=True``: once per setting)
    or of the others (once per configuration), in written order, keeping what they return.
    """
    for f in schema_fields():
        check = f.metadata["check"]
        if check is not None and f.metadata["variant"] == variant and f.name in setting:
            setting[f.name] = check(setting[f.name], setting)


# The views as constants, for readers of the package: the pipeline calls the functions,
# which read the schema it runs with
#: Top-level keys of a training configuration.
TOP_LEVEL_KEYS = accepted_keys()
#: The order :func:`~fedcomp.config.to_toml` writes the top-level keys in.
KEY_ORDER = key_order()
#: What a ``[[variants]]`` entry may override (besides its ``label``).
VARIANT_KEYS = variant_keys()
