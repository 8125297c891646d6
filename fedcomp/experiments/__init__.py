"""Paper experiments: one module per experiment (its config and its claim) and the runner."""

from . import seed000
from ._runner import RESULT_COLUMNS, final_metrics, run_experiment

EXPERIMENTS = {"seed000": seed000}

__all__ = ["EXPERIMENTS", "RESULT_COLUMNS", "final_metrics", "run_experiment", "seed000"]
