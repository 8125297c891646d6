"""Regularizers: the nonsmooth part ``g`` of ``F(x) = Σ_i π_i f_i(x) + g(x)``.

Every regularizer is a frozen dataclass holding validated hyperparameters, with two pure
functions over a block of models (leading client axes, ``param_ndim`` trailing model axes):
``value(x)`` and the exact ``prox(x, step)``, ``step`` a scalar or one value per model.
They run on NumPy, PyTorch and any Array API namespace and keep the input dtype.

Use the classes directly, or build one by name (as configuration files do) with
:func:`make_regularizer`; :data:`REGULARIZERS` and :data:`DESCRIPTIONS` list them.
"""

from __future__ import annotations

from typing import Any

from .._registry import Entry, Registry
from ._base import Regularizer
from ._convex import L1, ElasticNet, Zero, soft_threshold
from ._group import GroupLasso
from ._indicators import Box, L1Ball, L1L2Ball, L2Ball
from ._masked import Masked
from ._matrix import Nuclear
from ._nonconvex import MCP, SCAD
from ._scaled import Scaled
from ._sparse import L0, L0Ball

#: Regularizer classes by configuration name, with one line each for ``fedcomp list``.
REGULARIZERS: Registry[Entry] = Registry("regularizer", [
    Entry("zero", Zero, "no regularizer (smooth problem); prox is the identity"),
    Entry("l1", L1, "lasso alpha*||x||_1; prox is soft thresholding"),
    Entry("elastic_net", ElasticNet,
          "l1*||x||_1 + l2/2*||x||^2; soft thresholding then shrinkage"),
    Entry("group_lasso", GroupLasso,
          "alpha * sum_G w_G ||x_G||_2 over coordinate groups; block soft thresholding"),
    Entry("nuclear", Nuclear, "alpha * nuclear norm of a matrix view; singular value thresholding"),
    Entry("mcp", MCP, "minimax concave penalty (Zhang 2010), weakly convex; firm thresholding, "
                      "step < gamma"),
    Entry("scad", SCAD, "SCAD penalty (Fan & Li 2001), weakly convex; SCAD thresholding, "
                        "step < a - 1"),
    Entry("l2_ball", L2Ball, "constraint ||x||_2 <= radius; radial projection"),
    Entry("l1_ball", L1Ball,
          "constraint ||x||_1 <= radius; sort-based projection (Duchi et al. 2008)"),
    Entry("box", Box, "constraint lower <= x_i <= upper; clipping",
          unbounded=("lower", "upper")),
    Entry("l1_l2_ball", L1L2Ball,
          "alpha*||x||_1 + constraint ||x||_2 <= radius; soft threshold then projection"),
    Entry("l0_ball", L0Ball,
          "constraint ||x||_0 <= sparsity, nonconvex; keep the s largest entries (hard "
          "thresholding)"),
    Entry("l0", L0, "alpha*||x||_0, nonconvex; hard threshold at sqrt(2*step*alpha)"),
])

#: One line per regularizer, for ``fedcomp list``.
DESCRIPTIONS = REGULARIZERS.describe()


def make_regularizer(name: str, **params: Any) -> Regularizer:
    """Build the regularizer registered as ``name`` with keyword ``params``.

    Parameters
    ----------
    name : str
        A name of :data:`REGULARIZERS` (``"l1"``, ``"group_lasso"``, ``"mcp"``, ...).
    **params
        The constructor arguments of that class.

    Returns
    -------
    Regularizer

    Raises
    ------
    ValueError
        For an unknown name (:class:`~fedcomp._registry.UnknownNameError`, the message lists
        the valid ones), an unknown or missing parameter
        (:class:`~fedcomp._registry.UnknownParameterError`,
        :class:`~fedcomp._registry.MissingParameterError`, the message lists the accepted
        ones), or an invalid value.

    Examples
    --------
    >>> make_regularizer("mcp", alpha=0.1, gamma=3.0)
    MCP(alpha=0.1, gamma=3.0, param_ndim=1)
    """
    regularizer: Regularizer = REGULARIZERS.make(name, **params)
    return regularizer


__all__ = [
    "DESCRIPTIONS", "MCP", "REGULARIZERS", "SCAD", "Box", "ElasticNet", "GroupLasso", "L0",
    "L0Ball", "L1", "L1Ball", "L1L2Ball", "L2Ball", "Masked", "Nuclear", "Regularizer", "Scaled",
    "Zero",
    "make_regularizer", "soft_threshold",
]
