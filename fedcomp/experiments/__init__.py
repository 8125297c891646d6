"""The experiment pipeline and the paper experiments' claims.

Data flow one way (``docs/ARCHITECTURE.md``)::

    fedcomp.config        a configuration as a dict: load by name or path, --set, [quick],
                          --sweep, [[variants]]
    _setting.resolve      → Experiment / Setting / AlgorithmSpec: checked once, frozen
    _build                → the problem, the topology, the reference solution
    _plan                 → Run: every (setting, seed, gradient mode, algorithm)
    _execute              → the engines (rounds, event clock, gossip), here or in workers
    _results              → the output directory, summaries, verdicts, ``fedcomp best``

:func:`run_experiment` (``_runner``) drives them. Each built-in experiment is a TOML file in
``fedcomp/configs/`` plus, when it tests a claim, a module here with its verdict rule
(``_catalog``).
"""

from ._build import build_components, build_problem, build_sampler, build_topology, prepare
from ._catalog import EXPERIMENTS, TIMINGS, rule_module
from ._plan import RESULT_COLUMNS, Run, plan
from ._results import (
    ConfigMismatchError,
    OutputExistsError,
    best_settings,
    best_table,
    final_metrics,
    read_summary,
)
from ._runner import run_experiment
from ._setting import AlgorithmSpec, Experiment, Setting, as_written, resolve, validate

__all__ = ["EXPERIMENTS", "RESULT_COLUMNS", "TIMINGS", "AlgorithmSpec", "ConfigMismatchError",
           "Experiment", "OutputExistsError", "Run", "Setting", "as_written", "best_settings",
           "best_table",
           "build_components", "build_problem", "build_sampler", "build_topology",
           "final_metrics", "plan", "prepare", "read_summary", "resolve", "rule_module",
           "run_experiment", "validate"]
