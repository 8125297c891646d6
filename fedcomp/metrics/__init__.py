"""Metrics (pure functions of a model) and loggers (where evaluation rows go)."""

from ._functions import (
                         DEFAULT_METRICS,
                         DESCRIPTIONS,
                         METRICS,
                         evaluate,
                         l1_error,
                         l2_error,
                         nnz,
                         objective,
                         operator_error,
                         optimality,
                         prox_grad_norm,
                         rank,
                         suboptimality,
                         support,
                         support_f1,
                         support_scores,
                         train_accuracy,
                         training_loss,
)
from ._loggers import CSVLogger, JSONLLogger, MemoryLogger, MultiLogger, StdoutLogger

__all__ = ["CSVLogger", "DEFAULT_METRICS", "DESCRIPTIONS", "JSONLLogger", "METRICS",
           "MemoryLogger", "MultiLogger", "StdoutLogger", "evaluate", "l1_error", "l2_error", "nnz",
           "objective", "operator_error", "optimality", "prox_grad_norm", "rank",
           "suboptimality", "support", "support_f1", "support_scores", "train_accuracy",
           "training_loss"]
