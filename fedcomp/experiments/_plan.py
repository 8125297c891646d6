"""The fourth stage of the experiment pipeline: every run of an experiment, planned.

A :class:`Run` is one (setting, seed, gradient mode, algorithm): what the execute stage
runs and what the results stage records under :func:`run_key`. The plan also fixes the
columns of ``results.csv`` (:func:`result_columns`) before anything runs.
"""

from __future__ import annotations

import json
from typing import Any, NamedTuple

from ..config import mode_name
from ..metrics._loggers import _format
from ._setting import AlgorithmSpec, Experiment, Setting

#: The columns every ``results.csv`` starts with.
RESULT_COLUMNS = ["algorithm", "method", "batch_size", "seed", "round", "objective",
                  "optimality", "nnz", "grad_evals", "sample_grads", "prox_evals_client",
                  "prox_evals_server", "floats_up", "floats_down", "bits_up", "bits_down",
                  "wall_s"]


class Run(NamedTuple):
    """One run of an experiment.

    Attributes
    ----------
    setting : Setting
    algorithm : AlgorithmSpec
    batch_size : int or None
        None: full gradients.
    seed : int
    tags : dict
        Its identifying cells of ``results.csv``: algorithm (the run label), method (the
        registered name), batch_size, seed, the variant and the swept values.
    model : str
        The stem of its saved model (``models/<model>_seed<k>.npy``).
    setting_name : str
        The key of its setting in ``config.json``'s ``settings``.
    """

    setting: Setting
    algorithm: AlgorithmSpec
    batch_size: int | None
    seed: int
    tags: dict[str, Any]
    model: str
    setting_name: str

    def server_steps(self, n_clients: int) -> int:
        """Server updates of the run: its rounds, or for an asynchronous algorithm one per
        client update (rounds × clients per round; ``n_clients`` when all take part)."""
        if self.algorithm.execution != "async":
            return self.setting.rounds
        return self.setting.rounds * (self.algorithm.clients_per_round or n_clients)


def run_labels(setting: Setting) -> list[tuple[str, AlgorithmSpec, int | None]]:
    """``(label, algorithm, batch_size)`` for every run of one seed of a setting.

    The label is the algorithm's, suffixed by the gradient mode when there are several.
    """
    runs = []
    for batch_size in setting.batch_modes:
        for spec in setting.algorithms:
            label = spec.label
            if len(setting.batch_modes) > 1:
                label = f"{label}_{mode_name(batch_size)}"
            runs.append((label, spec, batch_size))
    return runs


def plan(experiment: Experiment) -> list[Run]:
    """Every run, in order: setting (sweep point, variant), seed, gradient mode, algorithm."""
    runs = []
    for setting in experiment.settings:
        values, variant = setting.swept, setting.variant
        for seed in experiment.seeds:
            for label, spec, batch_size in run_labels(setting):
                tags = {"algorithm": label, "method": spec.name,
                        "batch_size": mode_name(batch_size), "seed": seed, **values}
                if variant is not None:
                    tags["variant"] = variant
                suffix = "".join(f"_{k.split('.')[-1]}{_format(v)}" for k, v in values.items())
                model = (label if variant is None else f"{label}_{variant}") + suffix
                setting_name = f"{variant or 'base'}" + (f" {json.dumps(values)}" if values
                                                         else "")
                if setting.data_follows_seed:  # its own data, problem and reference
                    setting_name += f" (data seed {setting.data_seed(seed)})"
                runs.append(Run(setting, spec, batch_size, seed, tags, model, setting_name))
    return runs


def key_columns(experiment: Experiment) -> list[str]:
    """The ``results.csv`` columns that identify a run (:func:`run_key`)."""
    return ["algorithm", *(["variant"] if experiment.has_variants else []),
            *experiment.sweep_values, "seed"]


def cell(value: Any) -> str:
    """A value as its ``results.csv`` cell."""
    return "" if value is None else str(_format(value))


def run_key(tags: dict[str, Any], columns: list[str]) -> str:
    """A run's identity as its ``results.csv`` cells (algorithm, variant, swept values, seed)."""
    return json.dumps([cell(tags.get(c)) for c in columns])


def result_columns(experiment: Experiment) -> list[str]:
    """The columns of the experiment's ``results.csv``, fixed before any run starts."""
    settings = experiment.settings
    columns = RESULT_COLUMNS + (["variant"] if experiment.has_variants else []) + list(
        experiment.sweep_values) + [m for m in experiment.config["metrics"]
                                    if m not in RESULT_COLUMNS] + decentralized_columns(settings)
    measures = {s.stop.get("measure", "relative_prox_step") for s in settings if s.stop}
    columns += [m for m in sorted(measures) if m not in columns]  # the stopping measure
    asynchronous = any(spec.execution == "async" for s in settings for spec in s.algorithms)
    if asynchronous or any(s.compute_times for s in settings):
        columns += ["sim_time"]  # simulated time (rounds wait for their slowest client)
    if asynchronous:
        # the asynchronous runner's staleness: the largest delay applied so far and the
        # clients' idle time at the max_delay barrier (empty in the synchronous runs' rows)
        columns += ["max_delay", "waited"]
    if any(spec.privacy is not None for s in settings for spec in s.algorithms):
        # ε(δ) spent up to each evaluated round (fedcomp.privacy); empty in non-private rows
        columns += ["epsilon"]
    return columns


def decentralized_columns(settings: tuple[Setting, ...] | list[Setting]) -> list[str]:
    """Result columns of decentralized runs: per-node metrics, sparsified ones, consensus."""
    extra: list[str] = []
    for setting in settings:
        if not setting.topology:
            continue
        options = setting.topology
        evaluate_on = options.get("evaluate_on", ["average"])
        node = options.get("node", 0)
        suffixes = [""] + (["_sparse"] if options.get("sparsity") else [])
        for suffix in suffixes:
            for m in setting.metrics:
                names = ([f"{m}{suffix}"] if suffix and "average" in evaluate_on else [])
                if "node" in evaluate_on:
                    names.append(f"node{node}_{m}{suffix}")
                if "nodes" in evaluate_on:
                    names += [f"{m}{suffix}_{s}" for s in ("min", "mean", "max")]
                extra += [n for n in names if n not in extra]
        if "consensus_error" not in extra:
            extra.append("consensus_error")
    return extra
