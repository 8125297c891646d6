"""The second stage of the experiment pipeline: a configuration resolved once.

:func:`resolve` checks a configuration (a dict from :mod:`fedcomp.config`) key by key,
fills in its defaults and returns an :class:`Experiment`: frozen, typed, one
:class:`Setting` per sweep point and variant, each algorithm an :class:`AlgorithmSpec`
whose execution engine (rounds, asynchronous, decentralized) is a static fact of the
algorithm registry. Every later stage (build, plan, execute, results) reads these objects;
none of them looks at the raw dict again, and none validates again.

Errors are :class:`~fedcomp.config.ConfigError` naming the key, the bad value and the fix.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

from ..config import (
    ConfigError,
    _batch_modes,
    check_planned,
    expand_sweep,
    parse_value,
    to_jsonable,
    variant_settings,
)
from ._validate import (
    COMPRESSOR_KEYS,
    DATA_SEED_FOLLOWS_RUN,
    ENTRY_KEYS,
    TARGET_COLUMNS,
    TOPOLOGY_EVAL_KEYS,
    check_name,
    validate,
)


class AlgorithmSpec(NamedTuple):
    """One ``[[algorithms]]`` entry of a setting, resolved.

    Attributes
    ----------
    label : str
        The entry's ``label`` (its name unless the configuration gives one).
    name : str
        The registered algorithm.
    params : dict
        The factory's keyword arguments.
    clients_per_round : int or None
        Participants per round (the entry's own, else the setting's; None: every client).
    compressor : dict or None
        The entry's ``compressor`` table (``name``, the compressor's parameters, ``ef21``):
        the uploads are compressed (:func:`fedcomp.algorithms.compressed`); None: not.
    privacy : dict or None
        The entry's checked ``privacy`` table (:func:`fedcomp.privacy.privacy_plan`), or
        None for a non-private run.
    personalization : dict or None
        The entry's ``personalization`` table: every client also trains a personal model
        (``name = "ditto"``, :func:`fedcomp.algorithms.ditto`); None: global model only.
    """

    label: str
    name: str
    params: dict[str, Any]
    clients_per_round: int | None
    compressor: dict[str, Any] | None = None
    privacy: dict[str, Any] | None = None
    personalization: dict[str, Any] | None = None

    @property
    def execution(self) -> str:
        """``"rounds"``, ``"async"`` or ``"decentralized"``: the algorithm's registry entry's."""
        from ..algorithms import execution_of

        return execution_of(self.name)

    def recipe(self, rounds: int | None = None, n_clients: int | None = None) -> Any:
        """The entry as a :class:`~fedcomp.algorithms.Recipe`: its algorithm, then its
        transforms in the one order a configuration applies them (compressed uploads,
        Ditto's personal models, client-level privacy).

        Privacy needs the run: its ``σ`` is the table's, or the one whose ``rounds`` spend
        the table's ``target_epsilon`` on ``n_clients`` (:mod:`fedcomp.privacy`). Without
        ``n_clients`` the recipe stops before privacy: what a check of the entry's
        hyperparameters builds before any problem exists.
        """
        from ..algorithms import Recipe

        recipe = Recipe(self.name, copy.deepcopy(self.params))
        if self.compressor is not None:
            table = {k: v for k, v in self.compressor.items() if k not in COMPRESSOR_KEYS}
            recipe = recipe.then("compress", {
                "compressor": {"name": self.compressor["name"], **table},
                "ef21": self.compressor.get("ef21", False)})
        if self.personalization is not None:
            recipe = recipe.then(self.personalization["name"], {
                k: v for k, v in self.personalization.items() if k != "name"})
        if self.privacy is not None and n_clients is not None:
            if rounds is None:
                raise TypeError(f"{self.label}: a private entry's recipe for a run needs its "
                                "rounds beside n_clients (they set the noise)")
            plan = self.privacy_plan()
            sigma = plan.noise(rounds, n_clients, self.clients_per_round)
            recipe = recipe.then("dp", {"clip": plan.clip, "noise_multiplier": sigma,
                                        "local": plan.local})
        return recipe

    def privacy_plan(self) -> Any:
        """The entry's checked privacy table (:func:`fedcomp.privacy.privacy_plan`)."""
        from ..privacy import privacy_plan

        return privacy_plan(self.privacy, self.name)

    def build(self, rounds: int | None = None, n_clients: int | None = None) -> Any:
        """The algorithm object of :meth:`recipe` (a fresh one per call: factories are pure)."""
        from ..algorithms import rebuild_algorithm

        return rebuild_algorithm(self.recipe(rounds, n_clients))

    def entry(self) -> dict[str, Any]:
        """The ``[[algorithms]]`` table this spec was resolved from (for ``config.json``)."""
        return {"name": self.name, **({"label": self.label} if self.label != self.name else {}),
                **({} if self.compressor is None else {"compressor": self.compressor}),
                **({"privacy": self.privacy} if self.privacy is not None else {}),
                **({"personalization": self.personalization}
                   if self.personalization is not None else {}),
                **self.params}


@dataclass(frozen=True)
class Setting:
    """One fully resolved setting: the base configuration, a variant of it, or a sweep point.

    A field named as a configuration key (:class:`fedcomp.config.Schema`) holds that key's
    checked value, copied as it is; the others are resolved from keys (``batch_modes``
    from ``batch_size``, ``reference_tol`` from ``reference``) or say where the setting
    sits (``variant``, ``swept``).

    Read-only: the tables (``data``, ``problem``, ``regularizer``, ``topology``,
    ``compute_times``) are plain dicts so that a setting pickles into worker processes;
    no stage writes to them.
    """

    name: str
    rounds: int
    eval_every: int
    batch_modes: tuple[int | None, ...]
    clients_per_round: int | None
    client_block: Any
    metrics: tuple[str, ...]
    data: dict[str, Any]
    problem: dict[str, Any]
    regularizer: dict[str, Any]
    algorithms: tuple[AlgorithmSpec, ...]
    reference_tol: float | None
    topology: dict[str, Any] | None
    streaming: bool
    compute_times: dict[str, Any] | None
    backend: str
    client_state: str
    variant: str | None = None
    swept: dict[str, Any] = field(default_factory=dict)
    #: ``None``: the problem's own start (zeros, a network's seeded parameters); else a
    #: random start ``{"distribution": "normal", "scale": s, "seed": int | "run"}``.
    x0: dict[str, Any] | None = None
    #: ``None``, or ``{"metric": m, "below": v}`` / ``{"metric": m, "above": v}``: the
    #: summary row gets the counters at the first evaluation reaching it (TARGET_COLUMNS).
    target: dict[str, Any] | None = None
    #: ``None``, or ``{"tol": t, "measure": m}``: every run stops at the first evaluation
    #: whose stopping measure is at most ``t`` (:func:`fedcomp.simulate`'s ``tol``, ``stop``)
    stop: dict[str, Any] | None = None

    def data_seed(self, run_seed: int | None) -> int:
        """The seed that draws the data of a run with seed ``run_seed``.

        ``data.seed`` when the configuration pins it; otherwise the run's own seed, so that
        every seed of an experiment re-draws the data (synthetic data, a partition of
        pooled data) — a verdict over seeds then covers the data's randomness too. Without
        a run (``run_seed=None``) an unpinned seed is 0, the generators' default.

        Examples
        --------
        >>> from fedcomp.config import load
        >>> free = resolve(load("seed000")).base       # synthetic data: not pinned
        >>> pinned = resolve({**load("seed000"), "data": {**load("seed000")["data"],
        ...                                               "seed": 0}}).base
        >>> pinned.data_seed(3), free.data_seed(3), free.data_seed(None)
        (0, 3, 0)
        """
        pinned = self.data.get("seed", DATA_SEED_FOLLOWS_RUN)
        if pinned != DATA_SEED_FOLLOWS_RUN:
            return int(pinned)
        return 0 if run_seed is None else int(run_seed)

    @property
    def data_follows_seed(self) -> bool:
        """Whether the data are re-drawn for every run seed (``data.seed`` not pinned)."""
        return self.data.get("seed", DATA_SEED_FOLLOWS_RUN) == DATA_SEED_FOLLOWS_RUN

    def problem_key(self, data_seed: int) -> str:
        """What determines the problem and its reference (runs sharing it share them)."""
        return json.dumps(to_jsonable([self.name, self.data, data_seed, self.problem,
                                       self.regularizer, self.backend, self.streaming,
                                       self.reference_tol, self.topology]),
                          sort_keys=True, default=str)


@dataclass(frozen=True)
class Experiment:
    """A configuration resolved once: what every later pipeline stage reads.

    Attributes
    ----------
    name, description, claim : str
    config : dict
        The validated configuration with its defaults (``config.json``; the verdict rules
        read it). Read-only.
    seeds : tuple of int
    sweep : tuple of (key, tuple of value texts)
        The ``--sweep`` grid (empty without one).
    settings : tuple of Setting
        In run order: sweep point, then variant.
    """

    name: str
    description: str
    claim: str
    config: dict[str, Any]
    seeds: tuple[int, ...]
    sweep: tuple[tuple[str, tuple[str, ...]], ...]
    settings: tuple[Setting, ...]

    @property
    def has_variants(self) -> bool:
        return bool(self.config.get("variants"))

    @property
    def sweep_values(self) -> dict[str, list[Any]]:
        """The swept keys and their parsed values (``config.json``'s ``sweep``)."""
        return {key: [parse_value(v) for v in values] for key, values in self.sweep}

    @property
    def base(self) -> Setting:
        """The base configuration's own setting (no variant merged, no sweep applied)."""
        return _setting(self.config, None, {})


def as_written(config: dict[str, Any]) -> dict[str, Any]:
    """A validated configuration as one a user would write: what ``fedcomp show`` prints.

    :func:`validate` turns ``reference = false`` into ``None``, which TOML cannot hold (it
    would be left out and the default, a reference solution, come back); here it is
    ``false`` again, in the base and in every variant.
    """
    out = copy.deepcopy(config)
    for table in [out, *(v for v in out.get("variants") or [] if isinstance(v, dict))]:
        if "reference" in table and table["reference"] is None:
            table["reference"] = False
    return out


def resolve(config: dict[str, Any], *, seeds: list[int] | None = None,
            sweep: list[tuple[str, list[str]]] | None = None) -> Experiment:
    """Check ``config`` and resolve it into an :class:`Experiment` (once per run).

    Parameters
    ----------
    config : dict
        A training configuration (:mod:`fedcomp.config`).
    seeds : list of int, optional
        Replace the configuration's seeds (``--seeds``).
    sweep : list of (key, values), optional
        A grid (``--sweep``, :func:`fedcomp.config.expand_sweep`): every point becomes
        settings of its own, each checked.

    Raises
    ------
    ConfigError
        The first bad key, naming it, its value and the fix.

    Examples
    --------
    >>> from fedcomp.config import load
    >>> experiment = resolve(load("seed000"), seeds=[0, 1])
    >>> experiment.seeds, [a.label for a in experiment.settings[0].algorithms][:3]
    ((0, 1), ['za1', 'fedmid', 'fedda'])
    """
    if isinstance(config, dict) and config.get("kind") == "timing":
        raise ConfigError(f"{config.get('name')!r} is a timing experiment (kind = 'timing'), "
                          "not a training configuration: run it with 'fedcomp run'")
    base = {**config, **({"seeds": list(seeds)} if seeds is not None else {})}
    cfg = validate(base)
    grid = [(values, validate(point)) for values, point in expand_sweep(base, sweep or [])]
    settings = tuple(_setting(setting, variant, values) for values, point in grid
                     for variant, setting in variant_settings(point))
    check_planned(len(cfg["seeds"]) * sum(len(s.batch_modes) * len(s.algorithms)
                                          for s in settings), f"{cfg['name']!r}")
    return Experiment(name=cfg["name"], description=cfg["description"], claim=cfg["claim"],
                      config=cfg, seeds=tuple(cfg["seeds"]),
                      sweep=tuple((k, tuple(vs)) for k, vs in sweep or []), settings=settings)


def _setting(cfg: dict[str, Any], variant: str | None, swept: dict[str, Any]) -> Setting:
    """The :class:`Setting` of a validated dict (the base, or a variant merged over it)."""
    specs = []
    for entry in cfg["algorithms"]:
        params = {k: copy.deepcopy(v) for k, v in entry.items() if k not in ENTRY_KEYS}
        specs.append(AlgorithmSpec(
            label=entry.get("label", entry["name"]), name=entry["name"], params=params,
            clients_per_round=entry.get("clients_per_round", cfg["clients_per_round"]),
            compressor=copy.deepcopy(entry.get("compressor")),
            privacy=copy.deepcopy(entry.get("privacy")),
            personalization=copy.deepcopy(entry.get("personalization"))))
    reference = cfg["reference"]
    resolved: dict[str, Any] = {  # the fields a key does not give as it is
        "batch_modes": tuple(_batch_modes(cfg["batch_size"])), "metrics": tuple(cfg["metrics"]),
        "algorithms": tuple(specs), "streaming": bool(cfg["streaming"]),
        "reference_tol": None if reference is None else reference["tol"],
        "x0": None if cfg["x0"] == "default" else {"distribution": "normal", "scale": 1.0,
                                                   "seed": "run", **cfg["x0"]},
        "variant": variant, "swept": dict(swept)}
    as_given = {f.name: copy.deepcopy(cfg[f.name]) for f in fields(Setting)
                if f.name in cfg and f.name not in resolved}
    return Setting(**as_given, **resolved)




__all__ = ["COMPRESSOR_KEYS", "TARGET_COLUMNS", "TOPOLOGY_EVAL_KEYS", "AlgorithmSpec",
           "Experiment", "Setting", "as_written", "check_name", "resolve", "validate"]
