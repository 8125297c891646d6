"""Paper experiments: one module per experiment (its config and its claim) and the runner."""

from . import liang2024, liang2024_linear, liang2024_logistic, seed000
from ._runner import RESULT_COLUMNS, final_metrics, run_experiment

EXPERIMENTS = {"seed000": seed000, "liang2024_linear": liang2024_linear,
               "liang2024_logistic": liang2024_logistic}

__all__ = ["EXPERIMENTS", "RESULT_COLUMNS", "final_metrics", "liang2024", "liang2024_linear",
           "liang2024_logistic", "run_experiment",
           "seed000"]
