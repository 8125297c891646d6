"""The one policy every verdict rule applies to runs that diverged or did not run.

A rule judges a paper's claim from final metrics (:func:`~fedcomp.experiments.final_metrics`:
per run label, the median over the seeds that converged, plus :data:`DIVERGED` and
:data:`SEEDS`, how many of its seeds diverged and ran). A median over the surviving seeds
alone would let a method that diverged on most seeds "win", and a comparison with a run
that is not there would pass or fail by accident (``min`` over NaN depends on the order).
So every rule sorts its runs into the *proposed* ones (what the claim is about: ZA1, FedDR,
the GT methods, a sweep point) and the *baselines*, and:

* a proposed run that diverged on any seed, did not run, or has no value of the metric
  (NaN) cannot support the claim: the verdict is ``"not reproduced (X diverged on 2 of 3
  seeds)"`` (or ``"X missing"``, ``"X has no objective"``), from :func:`cannot_judge`;
* a baseline that diverged on any seed or did not run is infinitely bad (:func:`baseline`:
  ``+inf`` where lower is better, ``-inf`` where higher is): the proposed run beats it, and
  :func:`noted` names it in the verdict, ``"reproduced (fedpd diverged)"``;
* when no baseline ran at all there is nothing to compare: ``"not reproduced (no baseline
  ran: ...)"``, never "reproduced".

A verdict is a statistic over seeds (:func:`over_seeds`): the rule is applied to the median
over seeds *and* to every seed alone, and a level — reproduced, partly — stands only when
the median reaches it and at least two thirds of the seeds do; a margin that holds in the
median but not seed by seed is not a result.

A win has a size (:func:`paired_margin`, :data:`MARGIN_RULE`): when a rule says one run
ends better than another (:meth:`Comparisons.beats`), the two are paired seed by seed, and
the median over seeds of their relative difference must exceed its spread over the seeds
(the standard deviation); a smaller lead is a tie, however consistent its sign. Every
comparison's margin is shown with the verdict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Keys :func:`~fedcomp.experiments.final_metrics` adds to every run label's final metrics:
#: the number of its seeds that diverged, and of its seeds in all.
DIVERGED, SEEDS = "diverged", "seeds"

Finals = Mapping[tuple[str, ...], Mapping[str, float]]
Entry = Mapping[str, float] | None


class SeedFinals(dict):  # type: ignore[type-arg]
    """One run label's final metrics, the median over its converged seeds (a ``dict``), with
    each seed's own final metrics kept in :attr:`by_seed` for paired comparisons.

    ``by_seed`` maps a seed to that seed's final metrics (the seeds that converged); it is
    ``None`` when the seeds cannot be paired (two runs of one label share a seed).
    """

    by_seed: dict[Any, dict[str, float]] | None

    def __init__(self, medians: Mapping[str, float],
                 by_seed: dict[Any, dict[str, float]] | None = None) -> None:
        super().__init__(medians)
        self.by_seed = by_seed


def entry(finals: Finals, label: str, *, mode: str | None = None,
          variant: str | None = None) -> Entry:
    """The final metrics of run label ``label`` (in gradient ``mode`` and ``variant`` when
    given), or None when it did not run.

    Keys are ``(label, mode)`` or ``(label, mode, variant)``; the first match counts.

    Examples
    --------
    >>> finals = {("za1", "full"): {"optimality": 1e-9}, ("za1", "b20"): {"optimality": 0.1}}
    >>> entry(finals, "za1", mode="b20"), entry(finals, "fedmid")
    ({'optimality': 0.1}, None)
    """
    for key, metrics in finals.items():
        if (key[0] == label and (mode is None or key[1:2] == (mode,))
                and (variant is None or (len(key) > 2 and key[-1] == variant))):
            return metrics
    return None


def problem(metrics: Entry, metric: str | Sequence[str]) -> str:
    """Why ``metrics`` cannot be compared on ``metric`` (one name or several); ``""`` when
    it can.

    ``"missing"`` (no run), ``"diverged"`` / ``"diverged on k of n seeds"`` (any diverged
    seed: its median would hide it), ``"has no <metric>"`` (NaN: not recorded).

    Examples
    --------
    >>> problem({"objective": 1.0, "diverged": 2, "seeds": 3}, "objective")
    'diverged on 2 of 3 seeds'
    >>> problem({"objective": float("nan")}, "objective"), problem(None, "objective")
    ('has no objective', 'missing')
    """
    if metrics is None:
        return "missing"
    diverged, seeds = int(metrics.get(DIVERGED, 0)), int(metrics.get(SEEDS, 0))
    if diverged:
        return "diverged" if diverged >= seeds else f"diverged on {diverged} of {seeds} seeds"
    for name in [metric] if isinstance(metric, str) else metric:
        if math.isnan(metrics.get(name, math.nan)):
            return f"has no {name}"
    return ""


def baseline(metrics: Entry, metric: str, *, higher_is_better: bool = False) -> float:
    """A baseline's final ``metric``; infinitely bad when it diverged, did not run or has
    no value (``+inf``, or ``-inf`` when ``higher_is_better``), so any proposed run beats it.

    Examples
    --------
    >>> baseline({"objective": 0.5}, "objective"), baseline(None, "objective")
    (0.5, inf)
    >>> baseline({"diverged": 1, "seeds": 1}, "test_accuracy", higher_is_better=True)
    -inf
    """
    if problem(metrics, metric):
        return -math.inf if higher_is_better else math.inf
    assert metrics is not None  # problem() says "missing" otherwise
    return float(metrics[metric])


def value(metrics: Entry, metric: str) -> float:
    """A proposed run's final ``metric``, once :func:`cannot_judge` has passed (NaN if not
    there, which no comparison accepts).

    Examples
    --------
    >>> value({"objective": 0.5}, "objective"), value(None, "objective")
    (0.5, nan)
    """
    return math.nan if metrics is None else float(metrics.get(metric, math.nan))


def cannot_judge(proposed: Mapping[str, Entry], baselines: Mapping[str, Entry] | None,
                 metric: str | Sequence[str]) -> str:
    """The verdict when the claim cannot be judged, ``""`` when it can.

    Parameters
    ----------
    proposed : mapping
        Name (as the verdict shows it) → final metrics of every run the claim is about.
    baselines : mapping or None
        Name → final metrics (None: did not run) of the runs compared against; ``None``
        for a claim without baselines (a sweep).
    metric : str or sequence of str
        What the proposed runs must have.

    Returns
    -------
    str
        ``"not reproduced (X diverged on 2 of 3 seeds; Y missing)"`` when a proposed run
        cannot be used, ``"not reproduced (no baseline ran: a, b missing)"`` when no
        baseline ran, else ``""``.

    Examples
    --------
    >>> cannot_judge({"feddr": {"objective": 1.0}}, {"fedavg": None}, "objective")
    'not reproduced (no baseline ran: fedavg missing)'
    >>> cannot_judge({"feddr": {"diverged": 1, "seeds": 1}}, {"fedavg": None}, "objective")
    'not reproduced (feddr diverged)'
    """
    failed = [f"{name} {why}" for name, m in proposed.items() if (why := problem(m, metric))]
    if failed:
        return f"not reproduced ({'; '.join(failed)})"
    if baselines is not None and all(m is None for m in baselines.values()):
        missing = f": {', '.join(baselines)} missing" if baselines else ""
        return f"not reproduced (no baseline ran{missing})"
    return ""


def noted(verdict: str, baselines: Mapping[str, Entry], metric: str | Sequence[str]) -> str:
    """``verdict`` naming the baselines counted as infinitely bad (see :func:`baseline`).

    Examples
    --------
    >>> noted("reproduced", {"fedpd": {"diverged": 1, "seeds": 1}, "fedavg": {"x": 1.0}}, "x")
    'reproduced (fedpd diverged)'
    >>> noted("partly (FedPD ends lower)", {"fedavg": None}, "x")
    'partly (FedPD ends lower; fedavg missing)'
    >>> noted("reproduced", {"fedavg": {"x": 1.0}}, "x")
    'reproduced'
    """
    bad = [f"{name} {why}" for name, m in baselines.items() if (why := problem(m, metric))]
    if not bad:
        return verdict
    if verdict.endswith(")"):
        return f"{verdict[:-1]}; {'; '.join(bad)})"
    return f"{verdict} ({'; '.join(bad)})"


#: The verdict levels, weakest first.
LEVELS = ("not reproduced", "partly", "reproduced")

#: The share of seeds that must reach a level for the verdict to keep it.
SEED_SHARE = 2 / 3

#: The across-seeds rule as the report states it.
SEED_RULE = ("a level (reproduced, partly) stands when the median over seeds reaches it and "
             "at least two thirds of the seeds, each judged alone, do")


def level(verdict: str) -> int:
    """The index of a verdict's level in :data:`LEVELS` (-1 for anything else).

    Examples
    --------
    >>> level("reproduced (fedpd diverged)"), level("partly"), level("not reproduced (x)")
    (2, 1, 0)
    """
    for index, name in enumerate(LEVELS):
        if verdict.startswith(name):
            return index
    return -1


def seeds_needed(n_seeds: int, share: float = SEED_SHARE) -> int:
    """Seeds that must reach a level out of ``n_seeds``: ``ceil(share · n)``.

    Examples
    --------
    >>> [seeds_needed(n) for n in (1, 2, 3, 4, 5)]
    [1, 2, 2, 3, 4]
    """
    return math.ceil(share * n_seeds - 1e-9)


def over_seeds(median: str, per_seed: Sequence[str], share: float = SEED_SHARE) -> str:
    """The verdict over seeds: the median's, unless too few seeds reach its level.

    Parameters
    ----------
    median : str
        The rule's verdict on the medians over seeds.
    per_seed : sequence of str
        The rule's verdict on each seed alone.
    share : float
        The share of seeds a level needs (:data:`SEED_SHARE`).

    Returns
    -------
    str
        With one seed, ``median``. Otherwise the highest level that the median reaches and
        at least ``ceil(share · n)`` seeds reach, with ``"k of n seeds"`` said: the median's
        own verdict when it stands (``"reproduced (fedpd diverged; 3 of 3 seeds)"``), else
        that level and why (``"partly (reproduced on the median but in 1 of 3 seeds)"``).

    Examples
    --------
    >>> over_seeds("reproduced", ["reproduced", "reproduced", "partly"])
    'reproduced (2 of 3 seeds)'
    >>> over_seeds("reproduced", ["reproduced", "partly", "partly"])
    'partly (reproduced on the median but in 1 of 3 seeds)'
    >>> over_seeds("partly (FedPD ends lower)", ["not reproduced"] * 3)
    'not reproduced (partly on the median but in 0 of 3 seeds)'
    >>> over_seeds("reproduced", ["reproduced"])
    'reproduced'
    """
    n = len(per_seed)
    top = level(median)
    if n < 2 or top <= 0:
        return median
    reached = [level(v) for v in per_seed]

    def count(at_least: int) -> int:
        return sum(r >= at_least for r in reached)

    needed = seeds_needed(n, share)
    if count(top) >= needed:
        return _with_note(median, f"{count(top)} of {n} seeds")
    kept = max((lv for lv in range(top) if count(lv) >= needed), default=0)
    return (f"{LEVELS[kept]} ({LEVELS[top]} on the median but in {count(top)} of {n} "
            f"seeds)")


def _with_note(verdict: str, note: str) -> str:
    return f"{verdict[:-1]}; {note})" if verdict.endswith(")") else f"{verdict} ({note})"


def judge_over_seeds(rule: Callable[..., tuple[str, str]], summary: list[dict[str, Any]],
                     finals_of: Callable[[list[dict[str, Any]]], Any], *args: Any,
                     **kwargs: Any) -> tuple[str, str]:
    """``rule`` applied to the medians and to every seed; :func:`over_seeds` decides.

    ``summary`` are the runs' final rows (each with its ``seed``), ``finals_of`` turns rows
    into a rule's ``finals`` (:func:`~fedcomp.experiments.final_metrics`), and ``args`` /
    ``kwargs`` go to every call of ``rule`` (the configuration, inputs measured once).
    """
    verdict, text = rule(finals_of(summary), *args, **kwargs)
    seeds = sorted({row.get("seed") for row in summary}, key=str)
    if len(seeds) < 2:
        return verdict, text
    per_seed = [rule(finals_of([r for r in summary if r.get("seed") == seed]), *args,
                     **kwargs)[0] for seed in seeds]
    return over_seeds(verdict, per_seed), f"{text}; over seeds: {SEED_RULE}; {MARGIN_RULE}"


#: How a win is sized, as the report states it.
MARGIN_RULE = ("a comparison is won when the median over seeds of the paired relative "
               "difference (rival - run) / max(|rival|, |run|) (the other sign where higher "
               "is better) exceeds its spread, the standard deviation over seeds; a smaller "
               "lead is a tie")


def relative_difference(run: float, rival: float, *, higher_is_better: bool = False
                        ) -> float:
    """How much better ``run`` is than ``rival``, relative to the larger magnitude: in
    ``[-1, 1]`` for values of one sign, positive when ``run`` is better, 0 when both are 0.

    Examples
    --------
    >>> relative_difference(0.997, 1.0), relative_difference(0.9, 0.8, higher_is_better=True)
    (0.0030000000000000027, 0.11111111111111108)
    >>> relative_difference(2e6, math.inf), relative_difference(math.inf, math.inf)
    (1.0, 0.0)
    """
    scale = max(abs(run), abs(rival))
    if scale == 0 or run == rival:
        return 0.0
    if math.isinf(scale):  # a target never reached: anything finite is wholly better
        better = run > rival if higher_is_better else run < rival
        return 1.0 if better else -1.0
    gain = (run - rival) if higher_is_better else (rival - run)
    return gain / scale


def paired_margin(runs: Sequence[float], rivals: Sequence[float], *,
                  higher_is_better: bool = False) -> tuple[float, float]:
    """``(median, spread)`` of the paired relative differences, one pair per seed.

    ``spread`` is their standard deviation over the seeds (``ddof = 1``; 0 for one seed).

    Examples
    --------
    >>> median, spread = paired_margin([0.994, 0.994, 0.994], [1.0, 1.0, 1.0])
    >>> round(median, 6), spread
    (0.006, 0.0)
    """
    if len(runs) != len(rivals) or not runs:
        raise ValueError(f"paired_margin: one value per seed on each side (got {len(runs)} "
                         f"and {len(rivals)})")
    gains = np.array([relative_difference(r, q, higher_is_better=higher_is_better)
                      for r, q in zip(runs, rivals, strict=True)])
    spread = float(gains.std(ddof=1)) if gains.size > 1 else 0.0
    return float(np.median(gains)), spread


def outcome(median: float, spread: float) -> str:
    """``"win"`` when the median lead exceeds its spread, ``"loss"`` when the median deficit
    does, ``"tie"`` otherwise (:data:`MARGIN_RULE`).

    Examples
    --------
    >>> outcome(0.003, 0.01), outcome(0.003, 0.0005), outcome(-0.2, 0.01), outcome(0.0, 0.0)
    ('tie', 'win', 'loss', 'tie')
    """
    if median > spread:
        return "win"
    if -median > spread:
        return "loss"
    return "tie"


@dataclass(frozen=True)
class Margin:
    """One comparison: ``run`` against ``rival`` on ``metric``, its median paired relative
    difference over ``seeds`` seeds (positive: ``run`` better), its spread, the outcome."""

    run: str
    rival: str
    metric: str
    median: float
    spread: float
    seeds: int

    @property
    def outcome(self) -> str:
        return outcome(self.median, self.spread)

    def __str__(self) -> str:
        if math.isinf(self.median):
            return f"{self.run} vs {self.rival}: {self.outcome} ({self.rival} diverged or missing)"
        seeds = f", {self.seeds} seeds" if self.seeds > 1 else ""
        return (f"{self.run} vs {self.rival}: {100 * self.median:+.2f} % ± "
                f"{100 * self.spread:.2f} % {self.metric} ({self.outcome}{seeds})")


@dataclass
class Comparisons:
    """The comparisons one application of a rule makes, each sized by its seeds.

    A rule asks :meth:`beats` instead of comparing two medians with ``<``, and returns
    :meth:`rule` (its rule text with every margin) beside its verdict.

    Examples
    --------
    >>> runs = Comparisons()
    >>> a = SeedFinals({"loss": 0.5}, {0: {"loss": 0.50}, 1: {"loss": 0.60}, 2: {"loss": 0.40}})
    >>> b = SeedFinals({"loss": 0.6}, {0: {"loss": 0.49}, 1: {"loss": 0.62}, 2: {"loss": 0.45}})
    >>> runs.beats(a, b, "loss", "a", "b")
    False
    >>> str(runs.margins[0])
    'a vs b: +3.23 % ± 6.60 % loss (tie, 3 seeds)'
    """

    margins: list[Margin] = field(default_factory=list)

    def margin(self, run: Entry, rival: Entry, metric: str, run_name: str, rival_name: str,
               *, higher_is_better: bool = False) -> Margin:
        """The :class:`Margin` of ``run`` over ``rival``, recorded.

        A rival that diverged, did not run or has no value is beaten by any run (median
        ``+inf``, :func:`baseline`); a run without a value loses (``-inf``). Paired by seed
        where both keep their seeds (:class:`SeedFinals`, the seeds both converged in);
        otherwise the medians alone, with no spread.
        """
        if problem(rival, metric):
            found = Margin(run_name, rival_name, metric, math.inf, 0.0, 0)
        elif problem(run, metric):
            found = Margin(run_name, rival_name, metric, -math.inf, 0.0, 0)
        else:
            assert run is not None and rival is not None  # problem() says "missing"
            pairs = _pairs(run, rival, metric)
            if pairs:
                median, spread = paired_margin([p[0] for p in pairs], [p[1] for p in pairs],
                                               higher_is_better=higher_is_better)
            else:
                median = relative_difference(float(run[metric]), float(rival[metric]),
                                             higher_is_better=higher_is_better)
                spread = 0.0
            found = Margin(run_name, rival_name, metric, median, spread, max(1, len(pairs)))
        self.margins.append(found)
        return found

    def beats(self, run: Entry, rival: Entry, metric: str, run_name: str, rival_name: str,
              *, higher_is_better: bool = False) -> bool:
        """Whether ``run`` ends better than ``rival`` on ``metric`` by more than the spread."""
        return self.margin(run, rival, metric, run_name, rival_name,
                           higher_is_better=higher_is_better).outcome == "win"

    def rule(self, text: str) -> str:
        """``text`` with the margins of every comparison made, in order."""
        if not self.margins:
            return text
        return f"{text}; margins: {'; '.join(str(m) for m in self.margins)}"


def _pairs(run: Mapping[str, float], rival: Mapping[str, float], metric: str
           ) -> list[tuple[float, float]]:
    """``(run's, rival's)`` ``metric`` per seed both have, or ``[]`` when not pairable."""
    mine = getattr(run, "by_seed", None)
    theirs = getattr(rival, "by_seed", None)
    if not mine or not theirs:
        return []
    common = [seed for seed in mine if seed in theirs]
    values = [(mine[s].get(metric, math.nan), theirs[s].get(metric, math.nan)) for s in common]
    return [(float(a), float(b)) for a, b in values if not (math.isnan(a) or math.isnan(b))]
