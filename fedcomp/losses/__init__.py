"""Smooth losses ``f_i``, batched over a block of clients (see :class:`Loss`).

Every loss is a frozen dataclass of hyperparameters whose ``value``, ``grad`` and
``smoothness`` take a block of models ``(B, *param_shape)`` and a :class:`fedcomp.data.Batch`
with the same leading axis B. Register new ones in :data:`LOSSES` (name, class, one-line
description): the contract tests in ``tests/core/test_losses.py`` and
``tests/core/test_contract.py`` then cover them.
"""

from __future__ import annotations

from typing import Any

from .._extras import require
from .._registry import Entry, Registry
from ._base import Loss
from ._layout import ParamEntry, ParamLayout
from ._linear import HalfspaceViolation, LeastSquares, Logistic
from ._softmax import Softmax
from ._torch import TorchModel
from ._trace import TraceRegression

#: Loss classes by configuration name, with one line each for ``fedcomp list``.
LOSSES: Registry[Entry] = Registry("loss", [
    Entry("least_squares", LeastSquares,
          "½ mean squared residual of a linear model, optional ridge l2"),
    Entry("logistic", Logistic, "binary logistic regression, labels ±1, optional ridge l2 and "
          "nonconvex penalty (nonconvex = α: α Σ x²/(1 + x²))"),
    Entry("halfspace_violation", HalfspaceViolation,
          "mean squared violation max(<a_j, x> - b_j, 0)^2 of half-spaces <a_j, x> <= b_j "
          "(polyhedron feasibility, S-DANE's Sec. 5), b the targets, optional ridge l2"),
    Entry("softmax", Softmax, "multiclass logistic regression, (d, n_classes) model, class-id "
                              "labels, optional ridge l2"),
    Entry("trace_regression", TraceRegression, "least squares on matrix features "
                                               "y = <X, W>, (p1, p2) model, optional ridge l2"),
    Entry("torch_model", TorchModel,
          "cross-entropy of a PyTorch network (mlp, cnn, resnet18 or any nn.Module) on class "
          "ids; the model is its flat parameter vector (needs torch)", extra="torch"),
])

#: One line per loss, for ``fedcomp list``.
DESCRIPTIONS = LOSSES.describe()


def make_loss(name: str, **params: Any) -> Loss:
    """The loss registered as ``name``, built with ``params``.

    Parameters
    ----------
    name : str
        A name of :data:`LOSSES`.
    **params
        Constructor arguments of that loss (e.g. ``l2``).

    Returns
    -------
    Loss

    Raises
    ------
    ValueError
        For an unknown name (:class:`~fedcomp._registry.UnknownNameError`, listing the valid
        ones) or an unknown parameter (:class:`~fedcomp._registry.UnknownParameterError`,
        listing the accepted ones).

    Examples
    --------
    >>> make_loss("logistic", l2=0.01)
    Logistic(l2=0.01)
    >>> make_loss("hinge")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    fedcomp._registry.UnknownNameError: unknown loss 'hinge'; valid: halfspace_violation, ...
    """
    loss: Loss = LOSSES.make(name, **params)
    return loss


def __getattr__(name: str) -> object:
    # the network builders import torch: only on demand (torch is an optional extra)
    if name == "NETWORKS":
        require("torch", "fedcomp.losses.NETWORKS")
        from ._networks import NETWORKS

        return NETWORKS
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["DESCRIPTIONS", "LOSSES", "HalfspaceViolation", "LeastSquares", "Logistic", "Loss",
           "ParamEntry", "ParamLayout", "Softmax", "TorchModel", "TraceRegression", "make_loss"]
