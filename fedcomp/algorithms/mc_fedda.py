"""MC-FedDA: multistage constrained federated dual averaging for statistical recovery.

Stages of C-FedDA with shrinking regularization and constraint radius, each warm-started
at the previous stage's output.

References
----------
Bao, Y., Crawshaw, M., Luo, S., Liu, M. "Fast Composite Optimization and Statistical
Recovery in Federated Learning." ICML 2022 (``shared/papers/seed001_*``), Algorithm 3.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any, NamedTuple

from .._array import Array, namespace
from ._base import (
    ClientContext,
    FederatedAlgorithm,
    ServerContext,
    SetupContext,
    average,
    check_local_steps,
    check_positive,
    replicate,
)
from .c_fedda import (
    CPROX,
    CFedDARules,
    c_fedda_rules,
    check_readings,
    constrained_prox_solver,
    constraint_norm,
    round_weight,
    round_weight_sum,
)
from .fast_fedda import placeholder


class ServerState(NamedTuple):
    w0: Array            # ŵ_m: the current stage's centre (the previous stage's output)
    g: Array             # Σ π_k g^k of the last round
    w_tilde_prev: Array  # w̃_{r−1} of the stage
    w_tilde: Array       # w̃_r
    w: Array             # w̄_r
    w_avg: Array         # the stage's output so far, Σ α_r w̄_{r+1} / A_r


class Message(NamedTuple):
    g: Array
    w_tilde: Array  # w̃_{r−1}
    w0: Array       # the stage's centre (clients cannot know the previous stage's output)


class Upload(NamedTuple):
    g: Array


class Schedule(NamedTuple):
    """Stage boundaries and per-stage constants."""

    starts: list[int]          # first (global) round of every stage
    reg_strengths: list[float]
    radii: list[float]

    def locate(self, round_: int) -> tuple[int, int]:
        """``(stage m, round within the stage)`` of a global round."""
        m = bisect.bisect_right(self.starts, round_) - 1
        return m, round_ - self.starts[m]

    def ends_stage(self, round_: int) -> bool:
        """Whether ``round_`` is the last round of a stage followed by another."""
        return round_ + 1 in self.starts[1:]


def _sequence(name: str, value: Any, stages: int, zero: bool = False) -> list[float] | None:
    if value is None:
        return None
    values = [float(v) for v in value]
    if len(values) != stages:
        raise ValueError(f"mc_fedda: {name} needs one value per stage ({stages}), got "
                         f"{len(values)}: {values}")
    if not all(v > 0 or (zero and v == 0) for v in values):
        raise ValueError(f"mc_fedda: every entry of {name} must be {'>=' if zero else '>'} 0 "
                         f"(got {values})")
    return values


def _stage_lengths(stage_rounds: int | Sequence[int], stages: int) -> list[int]:
    lengths = ([stage_rounds] * (stages - 1) if isinstance(stage_rounds, int)
               else list(stage_rounds))
    if len(lengths) not in (stages - 1, stages) or not all(
            isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in lengths):
        raise ValueError(f"mc_fedda: stage_rounds must be a positive integer or one positive "
                         f"integer per stage (the last may be left out: it runs to the end of "
                         f"the run); got {stage_rounds!r} for {stages} stages")
    return lengths[: stages - 1]


def mc_fedda(stages: int = 3, stage_rounds: int | Sequence[int] = 100, radius: float = 1.0,
             radii: Sequence[float] | None = None, reg_strengths: Sequence[float] | None = None,
             smoothness: float | str = "auto", strong_convexity: float = 0.0,
             local_steps: int = 10, domain_radius: float | None = None, cprox: str = "exact",
             weights: str = "increasing", proximal_weight: str = "paper",
             order: str = "gradient_first", output: str = "average",
             warm_start: str = "average") -> FederatedAlgorithm:
    """MC-FedDA (Bao et al. 2022, Algorithm 3).

    Parameters
    ----------
    stages : int, default 3
        ``M``.
    stage_rounds : int or sequence of int, default 100
        Rounds ``R_m`` of each stage; the last stage runs until the run ends, so its length
        may be left out. An int gives every stage that length. The run must be longer than
        the first ``M − 1`` stages together (``Σ_{m<M−1} R_m``, 200 rounds by default) to
        reach the last stage: see the warning in the Notes.
    radius : float, default 1.0
        ``ε_0``; the default radii halve: ``ε_m = 2^{−m} ε_0``.
    radii : sequence of float, optional
        ``ε_m`` for every stage (overrides ``radius``).
    reg_strengths : sequence of float, optional
        ``λ_m`` for every stage. By default they halve towards the problem's λ:
        ``λ_m = 2^{M−1−m} λ``, so the last stage solves the problem's own regularization
        (the paper's {0.5³, 0.5⁴, 0.5⁵} for λ = 0.5⁵).
    smoothness, strong_convexity, local_steps, domain_radius, cprox
        As for :func:`~fedcomp.algorithms.c_fedda`.
    weights, proximal_weight, order
        The readings of every stage's C-FedDA, as for :func:`~fedcomp.algorithms.c_fedda`
        (the authors' MC-FedDA: ``LassoRun.m`` lines 238-258, ``NuclearRun.m`` lines
        202-220).
    output : {"average", "last"}, default "average"
        Evaluate the current stage's C-FedDA output ``Σ_r α_r w̄_{r+1} / A_r`` (the paper:
        ``ŵ_{m+1}`` of Algorithm 3 and the estimator of Theorem 3.2), or its last server
        model (as run: ``LassoRun.m`` line 260, ``NuclearRun.m`` line 222 evaluate ``wr``).
    warm_start : {"average", "last"}, default "average"
        What the next stage starts from and is centred on: the stage's C-FedDA output (the
        paper, Algorithm 3: ``ŵ_{m+1} = C-FedDA(ŵ_m, ...)``), or the stage's last server
        model (as run: ``x0 = wr; xr = wr; gr = 0``, ``LassoRun.m`` lines 233-235,
        ``NuclearRun.m`` lines 197-199).

    Returns
    -------
    FederatedAlgorithm

    Notes
    -----
    ``ŵ_0 = x0``; stage m runs C-FedDA for ``R_m`` rounds from
    ``ŵ_m`` with constraint ``R(w − ŵ_m) ≤ ε_m`` and regularization ``λ_m``:
    ``ŵ_{m+1} = C-FedDA(ŵ_m, R_m, E, ε_m, μ, L, λ_m)`` (its weights restart at α_0 = 1).
    Output: the current stage's C-FedDA output. Communication: the server also broadcasts
    the stage centre ``ŵ_m`` (3d floats down per client per round instead of C-FedDA's
    2d), since a client cannot know the previous stage's output otherwise.

    **As run.** The defaults are the paper's equations. The authors' MATLAB
    (github.com/MingruiLiu-ML-Lab/Federated-Sparse-Learning) made Figs. 1-2 with
    ``cprox="soft_then_project", weights="uniform", proximal_weight="constant",
    output="last", warm_start="last"``, plus ``order="prox_first"`` for the nuclear norm,
    ``smoothness=600``, ``strong_convexity=0.1``, ``radius=5000`` (radii 5000, 2500, 1250:
    ``rho_set``), ``reg_strengths`` 0.5³, 0.5⁴, 0.5⁵ (lasso) or 0.3, 0.15, 0.1 (nuclear),
    ``stage_rounds=[250, 250]`` with 2000 rounds for the lasso (1500 for the nuclear norm,
    last stage 1000) and a random start ``x0 = randn`` (``simulate(x0=...)``;
    ``LassoRun.m`` lines 218-266, ``NuclearRun.m`` lines 181-228). Their
    ``nuc_prox_cs.m`` projects only when every singular value of ``A_st − W0`` exceeds ρ
    (line 10) and then multiplies by ``Vv``, not ``Vv'`` (line 12): at those radii its
    ball never acts, whereas ``soft_then_project`` projects correctly.
    Tested in ``tests/papers/test_bao_readings.py``.

    .. warning::
        The stages are a round schedule, and the algorithm cannot see how many rounds the
        run has (``simulate``'s ``rounds`` reaches no hook before the run). A run with
        ``rounds ≤ Σ_{m<M−1} R_m`` stops inside an earlier stage and returns that stage's
        C-FedDA output — the solution for the larger ``λ_m`` and radius ``ε_m``, not the
        problem's λ. Give the run more rounds, or use fewer or shorter stages
        (``stages``, ``stage_rounds``).

    Examples
    --------
    >>> mc_fedda(stages=2, stage_rounds=50, radius=4.0).hyperparameters["stages"]
    2
    >>> from fedcomp.toy import tiny_run
    >>> alg = mc_fedda(stages=2, stage_rounds=10, radius=2.0, local_steps=2)
    >>> print(f"{tiny_run(alg):.3f}")  # F after 20 rounds; min 0.241
    0.245
    """
    if not (isinstance(stages, int) and not isinstance(stages, bool) and stages >= 1):
        raise ValueError(f"mc_fedda: stages must be an integer >= 1 (got {stages!r})")
    lengths = _stage_lengths(stage_rounds, stages)
    check_positive("mc_fedda", radius=radius)
    if domain_radius is not None:
        check_positive("mc_fedda", domain_radius=domain_radius)
    check_local_steps("mc_fedda", local_steps)
    if smoothness != "auto":
        check_positive("mc_fedda", smoothness=smoothness)
    if not strong_convexity >= 0:
        raise ValueError(f"mc_fedda: strong_convexity must be >= 0 (got {strong_convexity!r})")
    if cprox not in CPROX:
        raise ValueError(f"mc_fedda: cprox must be one of {CPROX} (got {cprox!r})")
    check_readings("mc_fedda", weights=weights, proximal_weight=proximal_weight, order=order,
                   output=output, warm_start=warm_start)
    radii_m = _sequence("radii", radii, stages) or [radius * 0.5**m for m in range(stages)]
    # λ_m = 0 is no regularization (a Zero regularizer resolves to it in prepare)
    lams = _sequence("reg_strengths", reg_strengths, stages, zero=True)
    starts = [0]
    for n in lengths:
        starts.append(starts[-1] + n)
    hyperparameters = dict(stages=stages, stage_rounds=stage_rounds, radius=radius,
                           radii=radii, reg_strengths=reg_strengths, smoothness=smoothness,
                           strong_convexity=strong_convexity, local_steps=local_steps,
                           domain_radius=domain_radius, cprox=cprox, weights=weights,
                           proximal_weight=proximal_weight, order=order, output=output,
                           warm_start=warm_start)

    def prepare(setup: SetupContext) -> FederatedAlgorithm:
        norm, lam, shape = constraint_norm(setup.regularizer)
        lip = float(smoothness if smoothness != "auto" else setup.client_smoothness().max())
        schedule = Schedule(starts, lams or [lam * 2.0 ** (stages - 1 - m)
                                             for m in range(stages)], radii_m)
        # resolved L and λ_m become hyperparameters (Flower nodes rebuild from them)
        resolved = {**hyperparameters, "smoothness": lip,
                    "reg_strengths": list(schedule.reg_strengths)}
        rules = c_fedda_rules(lip, strong_convexity, local_steps, domain_radius,
                              constrained_prox_solver(norm, cprox, shape), weights,
                              proximal_weight, order)
        return _mc_fedda(schedule, lip, rules, weights, output, warm_start, resolved)

    return placeholder("mc_fedda", hyperparameters, prepare)


def _fresh_stage(w0: Array) -> ServerState:
    zero = namespace(w0).zeros_like(w0)
    return ServerState(w0, zero, zero, w0, w0, w0)


def _mc_fedda(schedule: Schedule, lip: float, rules: CFedDARules, weights: str, output: str,
              warm_start: str, hyperparameters: dict[str, Any]) -> FederatedAlgorithm:

    def init(x0: Array, n_clients: int) -> tuple[ServerState, tuple]:
        from ._base import EmptyState

        return _fresh_stage(x0), EmptyState()

    def broadcast(state: ServerState) -> Message:
        return Message(state.g, state.w_tilde_prev, state.w0)

    def client_update(msg: Message, states: Any, ctx: ClientContext) -> tuple[Upload, Any]:
        m, r = schedule.locate(ctx.round)
        w0 = replicate(msg.w0, ctx.oracle.size)
        g = rules.client(msg.g, msg.w_tilde, w0, r, ctx, schedule.reg_strengths[m],
                         schedule.radii[m])
        return Upload(g), states

    def server_update(state: ServerState, uploads: Upload, ctx: ServerContext) -> ServerState:
        m, r = schedule.locate(ctx.round)
        g = average(uploads.g, ctx.weights)
        w, w_tilde = rules.server(g, state.w_tilde, state.w0, r, schedule.reg_strengths[m],
                                  schedule.radii[m])
        w_avg = state.w_avg + (round_weight(r, weights) / round_weight_sum(r, weights)) * (
            w - state.w_avg)
        if schedule.ends_stage(ctx.round):  # warm start: ŵ_{m+1} is this stage's output
            return _fresh_stage(w_avg if warm_start == "average" else w)
        return ServerState(state.w0, g, state.w_tilde, w_tilde, w, w_avg)

    return FederatedAlgorithm(
        name="mc_fedda", init=init, broadcast=broadcast, client_update=client_update,
        server_update=server_update,
        output=(lambda state: state.w_avg) if output == "average" else (lambda state: state.w),
        hyperparameters=hyperparameters,
        divergence_hint=(f"raise smoothness (L={lip:g}): L must bound every client's local "
                         "smoothness"))
