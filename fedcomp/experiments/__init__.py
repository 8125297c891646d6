"""Paper experiments: one module per experiment (its config and its claim) and the runner."""

from . import (
    bao2022_emnist,
    bao2022_lowrank,
    bao2022_sparse_regression,
    fedcanon_nn,
    fedcanon_stepsizes,
    fedcanon_vs_composite,
    feddr_async,
    feddr_mlp,
    feddr_synthetic,
    liang2024,
    liang2024_linear,
    liang2024_logistic,
    prox_cost,
    seed000,
)
from ._runner import RESULT_COLUMNS, final_metrics, run_experiment
from ._sweep import best_settings, best_table, expand_sweep, parse_sweep

EXPERIMENTS = {
    "seed000": seed000,
    "bao2022_sparse_regression": bao2022_sparse_regression,
    "bao2022_lowrank": bao2022_lowrank,
    "fedcanon_stepsizes": fedcanon_stepsizes,
    "fedcanon_vs_composite": fedcanon_vs_composite,
    "liang2024_linear": liang2024_linear,
    "liang2024_logistic": liang2024_logistic,
}
EXPERIMENTS |= {"feddr_async": feddr_async, "feddr_synthetic": feddr_synthetic,
                "fedcanon_nn": fedcanon_nn, "feddr_mlp": feddr_mlp,
                "bao2022_emnist": bao2022_emnist}

#: Timing experiments (``kind = "timing"`` configs): ``run(config, out_dir, stream)``.
TIMINGS = {"prox_cost": prox_cost}
EXPERIMENTS |= TIMINGS

__all__ = ["EXPERIMENTS", "RESULT_COLUMNS", "TIMINGS", "best_settings", "best_table",
           "expand_sweep",           "final_metrics", "parse_sweep", "run_experiment", "seed000",
           "fedcanon_stepsizes", "fedcanon_vs_composite", "liang2024", "liang2024_linear",
           "liang2024_logistic"]
