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
    backend = "jax"                    # numpy (default), torch, torch-float64, cuda, mps,
                                       # jax, jax-float32 (jax: the compiled engine)
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

The package's modules, one job each: ``_schema`` (:class:`Schema`: every top-level key
declared once, with its default, whether a variant may set it and the check of its value;
:class:`ConfigError`), ``_load`` (files and TOML), ``_overrides`` (``--set`` and
``[quick]``), ``_readings`` (``[readings]``) and ``_grid`` (seeds, variants, sweeps,
gradient modes, the bound on their product).

Unknown names fail with the list of valid ones; unknown keys fail with the accepted keys
(checked by :func:`fedcomp.experiments.resolve`, which runs each key's check and checks
the tables together).
"""

from __future__ import annotations

from ._grid import (
    MAX_PLANNED_RUNS,
    apply_sweep_value,
    batch_modes,
    check_planned,
    expand_sweep,
    merge_variant,
    mode_name,
    parse_seeds,
    parse_sweep,
    variant_settings,
)
from ._load import (
    MAX_DEPTH,
    experiment_names,
    experiment_source,
    load,
    parse_value,
    to_jsonable,
    to_toml,
)
from ._overrides import algorithm_entries, apply_override, quick_config, select_algorithms
from ._readings import (
    AS_WRITTEN,
    READING_KEYS,
    diagnoses,
    reading_base,
    reading_config,
    readings,
)
from ._schema import (
    KEY_ORDER,
    TOP_LEVEL_KEYS,
    VARIANT_KEYS,
    ConfigError,
    Schema,
    _batch_modes,
    accepted_keys,
    defaults,
    key,
    key_order,
    variant_keys,
)

__all__ = [
    # _schema: the keys, their defaults and checks; the error of every stage
    "Schema", "key", "accepted_keys", "key_order", "variant_keys", "defaults",
    "TOP_LEVEL_KEYS", "KEY_ORDER", "VARIANT_KEYS", "ConfigError",
    # _load: files, TOML
    "MAX_DEPTH", "experiment_names",
    "experiment_source", "load", "to_toml", "parse_value", "to_jsonable",
    # _overrides: --set, [quick]
    "algorithm_entries", "select_algorithms", "apply_override", "quick_config",
    # _readings: [readings]
    "AS_WRITTEN", "READING_KEYS", "readings", "diagnoses", "reading_base", "reading_config",
    # _grid: seeds, variants, sweeps, gradient modes
    "MAX_PLANNED_RUNS", "check_planned", "parse_seeds", "variant_settings", "merge_variant",
    "parse_sweep", "apply_sweep_value", "expand_sweep", "batch_modes", "mode_name",
    "_batch_modes",  # private, read by experiments._validate and experiments._setting
]
