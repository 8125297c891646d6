"""Metrics (pure functions of a model) and loggers (where evaluation rows go)."""

from ._functions import (
                         DEFAULT_METRICS,
                         DESCRIPTIONS,
                         METRICS,
                         evaluate,
                         l1_error,
                         l2_error,
                         lq_error,
                         nnz,
                         objective,
                         operator_error,
                         optimality,
                         population_gap,
                         predicted_labels,
                         prox_grad_norm,
                         rank,
                         sparsity,
                         stationarity_step,
                         suboptimality,
                         support,
                         support_f1,
                         support_scores,
                         test_accuracy,
                         test_loss,
                         train_accuracy,
                         training_loss,
)
from ._loggers import CSVLogger, JSONLLogger, MemoryLogger, MultiLogger, StdoutLogger
from ._personal import personal_metrics, support_overlap
from ._tracking import MLflowLogger, TensorBoardLogger

__all__ = ["CSVLogger", "DEFAULT_METRICS", "DESCRIPTIONS", "JSONLLogger", "METRICS",
           "MLflowLogger", "TensorBoardLogger",
           "MemoryLogger", "MultiLogger", "StdoutLogger", "evaluate", "l1_error", "l2_error",
           "lq_error", "nnz", "objective", "operator_error", "optimality", "population_gap",
           "predicted_labels", "prox_grad_norm", "rank", "sparsity", "stationarity_step",
           "suboptimality", "support", "personal_metrics", "support_overlap",
           "support_f1", "support_scores", "test_accuracy", "test_loss", "train_accuracy",
           "training_loss"]
