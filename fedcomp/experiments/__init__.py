"""Paper experiments: one module per experiment (its config and its claim) and the runner."""

from . import feddr_async, feddr_synthetic, seed000
from ._runner import RESULT_COLUMNS, final_metrics, run_experiment

EXPERIMENTS = {"seed000": seed000}
EXPERIMENTS |= {"feddr_async": feddr_async, "feddr_synthetic": feddr_synthetic}

__all__ = ["EXPERIMENTS", "RESULT_COLUMNS", "final_metrics", "run_experiment", "seed000"]
