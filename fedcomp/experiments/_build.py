"""The third stage of the experiment pipeline: what a :class:`Setting` describes, built.

The problem (data on its backend, loss, regularizer, client weighting, ground truth, the
streaming sampler), the topology of decentralized runs and the centralized reference
solution. Each function reads a resolved :class:`~fedcomp.experiments.Setting` only.
"""

from __future__ import annotations

import time
from typing import Any, NamedTuple

from ..config import ConfigError
from ..runtime._backends import Chosen, data_backend, resolve_backend
from ._setting import TOPOLOGY_EVAL_KEYS, Setting, resolve


def as_setting(setting: Setting | dict[str, Any]) -> Setting:
    """A :class:`Setting`, or a configuration dict resolved to its base setting.

    Examples
    --------
    >>> from fedcomp.config import load
    >>> as_setting(load("seed000")).data["n_clients"]
    30
    """
    return setting if isinstance(setting, Setting) else resolve(setting).base


class Prepared(NamedTuple):
    """A setting's problem, its reference solution (or None) and their metadata.

    ``meta`` is what ``config.json`` records per setting: the problem's fingerprint and
    sizes, the reference's accuracy, the graph's spectral gap, the set-up time.
    """

    problem: Any
    reference: Any
    meta: dict[str, Any]


def build_topology(setting: Setting | dict[str, Any], n_nodes: int
                   ) -> tuple[Any, dict[str, Any]]:
    """The :class:`~fedcomp.topology.Topology` of a setting (or of a configuration's
    ``[topology]`` table) and its evaluation options."""
    from ..topology import make_topology

    topology = setting.topology if isinstance(setting, Setting) else setting.get("topology")
    if topology is None:
        raise ConfigError("no [topology] table to build a graph from")
    table = dict(topology)
    options = {k: table.pop(k) for k in TOPOLOGY_EVAL_KEYS if k in table}
    options["evaluate_on"] = tuple(options.get("evaluate_on", ("average",)))
    return make_topology(table.pop("name"), n_nodes, **table), options


def _data_table(setting: Setting, seed: int | None) -> dict[str, Any]:
    """The generator's keyword arguments, with the data seed of a run seed ``seed``."""
    return {**setting.data, "seed": setting.data_seed(seed)}


def build_problem(setting: Setting | dict[str, Any], seed: int | None = None) -> Any:
    """The :class:`~fedcomp.problem.Problem` a setting (or a configuration's base) describes.

    ``seed`` is the run's seed: the data follow it unless the configuration pins
    ``data.seed`` (:meth:`Setting.data_seed`).
    """
    from ..data import DATASETS, GROUND_TRUTHS
    from ..problem import Problem

    setting = as_setting(setting)
    data_cfg = _data_table(setting, seed)
    name = data_cfg.pop("generator")
    data = _on_backend(DATASETS[name](**data_cfg), setting)
    truth = GROUND_TRUTHS[name](**data_cfg) if name in GROUND_TRUTHS else None
    loss, regularizer, n_classes = build_components(setting)
    return Problem(loss, regularizer, data, weighting=setting.problem.get("weighting", "uniform"),
                   n_classes=n_classes, ground_truth=truth, name=setting.name,
                   sampler=build_sampler(setting, seed),
                   minibatch=setting.problem.get("minibatch", "with_replacement"))


def build_sampler(setting: Setting | dict[str, Any], seed: int | None = None) -> Any:
    """The streaming sampler of a setting (``None`` without ``streaming``).

    It draws every client's fresh samples from the generator's parameters alone, keyed by
    the global client id, so any machine holding the configuration draws the same ones.
    """
    from ..data import SAMPLERS

    setting = as_setting(setting)
    if not setting.streaming:
        return None
    data_cfg = _data_table(setting, seed)
    return SAMPLERS[data_cfg.pop("generator")](**data_cfg)


def backend_of(setting: Setting) -> Chosen:
    """The setting's backend resolved (``auto`` decided: torch for networks, on a GPU when
    torch sees one, else NumPy), with the reason (:func:`fedcomp.runtime._backends.
    resolve_backend`)."""
    try:
        return resolve_backend(setting.backend,
                               network=setting.problem.get("loss") == "torch_model")
    except ValueError as exc:
        raise ConfigError(f"backend: {exc}") from None


def _on_backend(data: Any, setting: Setting) -> Any:
    """The data on the setting's backend, which they record (:meth:`ClientData.to`); data
    whose arrays already are that backend's (the generators' NumPy float64) stay as they
    are, and the runtime reads the same entry from their arrays."""
    chosen = backend_of(setting)
    if data_backend(data) is chosen.entry:
        return data
    try:
        # float32 backends make float32 data; the jax backends switch on jax_enable_x64
        # for the process (the engine's uint64 hashes and the float64 backend need it)
        return data.to(chosen)
    except ValueError as exc:  # no GPU where the backend needs one
        raise ConfigError(str(exc)) from None


def build_components(setting: Setting | dict[str, Any]) -> tuple[Any, Any, int | None]:
    """``(loss, regularizer, n_classes)`` of a setting, without its data."""
    from ..losses import make_loss
    from ..regularizers import REGULARIZERS, Masked, make_regularizer

    setting = as_setting(setting)
    problem_cfg = dict(setting.problem)
    loss = make_loss(problem_cfg.pop("loss"), **{k: v for k, v in problem_cfg.items()
                                                   if k not in ("weighting", "minibatch")})
    reg_cfg = dict(setting.regularizer)
    reg_name = reg_cfg.pop("name")
    scope = reg_cfg.pop("scope", "all")
    if "param_ndim" in REGULARIZERS.parameters(reg_name):
        reg_cfg.setdefault("param_ndim", loss.param_ndim)
    regularizer: Any = make_regularizer(reg_name, **reg_cfg)
    if scope == "weights":  # a network's kernels and weight matrices, not its biases
        network: Any = loss  # scope = "weights" was validated to come with a TorchModel
        regularizer = Masked(regularizer, network.layout().weight_mask())
    n_classes = setting.data.get("n_classes")
    if n_classes is not None and n_classes <= 2:
        n_classes = None  # binary ±1 labels: a vector model
    return loss, regularizer, n_classes


def start_model(setting: Setting, problem: Any, seed: int) -> Any:
    """The run's starting model: ``None`` for the problem's own (zeros, a network's seeded
    parameters), else the configuration's random start for run seed ``seed``.

    A random start has i.i.d. ``N(0, scale²)`` entries drawn from a stream of its own keyed
    by ``x0.seed`` (the run's seed unless pinned): Bao et al.'s MATLAB scripts start every
    method from ``randn(d)``. MATLAB's own stream is not reproduced, only its law.
    """
    if setting.x0 is None:
        return None
    from .._random import STREAM_START, generator

    x0_seed = seed if setting.x0["seed"] == "run" else int(setting.x0["seed"])
    draw = generator(x0_seed, STREAM_START).standard_normal(problem.param_shape)
    return problem.as_model(setting.x0["scale"] * draw)


def prepare(setting: Setting, seed: int | None = None) -> Prepared:
    """The problem of a setting (for the run seed ``seed``), its reference solution (or
    None) and their metadata."""
    from ..reference import solve_reference

    tic = time.perf_counter()
    problem = build_problem(setting, seed)
    reference = (solve_reference(problem, tol=setting.reference_tol)
                 if setting.reference_tol is not None else None)
    chosen = backend_of(setting)
    meta: dict[str, Any] = {
        "backend": {"name": chosen.name, "device": chosen.device, "reason": chosen.reason},
        "data_seed": setting.data_seed(seed),
        "problem": {"fingerprint": problem.fingerprint(), "n_clients": problem.n_clients,
                    "param_shape": list(problem.param_shape),
                    "n_samples": problem.data.n_samples},
        "reference": None if reference is None else
        {"objective": reference.objective, "prox_grad_norm": reference.prox_grad_norm,
         "iterations": reference.iterations},
        "setup_s": time.perf_counter() - tic}
    if setting.topology:  # the graph's mixing: σ₂(U) and the spectral gap
        topology, _ = build_topology(setting, problem.n_clients)
        meta["topology"] = {"name": topology.name, "sigma2": topology.sigma2,
                            "spectral_gap": topology.spectral_gap}
    return Prepared(problem, reference, meta)
