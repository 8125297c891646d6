"""Regularizers: the nonsmooth part ``g`` of ``F(x) = Σ_i π_i f_i(x) + g(x)``.

Every regularizer is a frozen dataclass holding validated hyperparameters, with two pure
functions over a block of models (leading client axes, ``param_ndim`` trailing model axes):
``value(x)`` and the exact ``prox(x, step)``, ``step`` a scalar or one value per model.
They run on NumPy, PyTorch and any Array API namespace and keep the input dtype.

Use the classes directly, or build one by name (as configuration files do) with
:func:`make_regularizer`; :data:`REGULARIZERS` and :data:`DESCRIPTIONS` list them.
"""

from __future__ import annotations

import inspect
from typing import Any

from ._base import Regularizer
from ._convex import L1, ElasticNet, Zero, soft_threshold
from ._group import GroupLasso
from ._indicators import Box, L1Ball, L1L2Ball, L2Ball
from ._masked import Masked
from ._matrix import Nuclear
from ._nonconvex import MCP, SCAD

REGULARIZERS: dict[str, type] = {
    "zero": Zero,
    "l1": L1,
    "elastic_net": ElasticNet,
    "group_lasso": GroupLasso,
    "nuclear": Nuclear,
    "mcp": MCP,
    "scad": SCAD,
    "l2_ball": L2Ball,
    "l1_ball": L1Ball,
    "box": Box,
    "l1_l2_ball": L1L2Ball,
}

DESCRIPTIONS: dict[str, str] = {
    "zero": "no regularizer (smooth problem); prox is the identity",
    "l1": "lasso alpha*||x||_1; prox is soft thresholding",
    "elastic_net": "l1*||x||_1 + l2/2*||x||^2; soft thresholding then shrinkage",
    "group_lasso": "alpha * sum_G w_G ||x_G||_2 over coordinate groups; block soft thresholding",
    "nuclear": "alpha * nuclear norm of a matrix view; singular value thresholding",
    "mcp": "minimax concave penalty (Zhang 2010), weakly convex; firm thresholding, step < gamma",
    "scad": "SCAD penalty (Fan & Li 2001), weakly convex; SCAD thresholding, step < a - 1",
    "l2_ball": "constraint ||x||_2 <= radius; radial projection",
    "l1_ball": "constraint ||x||_1 <= radius; sort-based projection (Duchi et al. 2008)",
    "box": "constraint lower <= x_i <= upper; clipping",
    "l1_l2_ball": "alpha*||x||_1 + constraint ||x||_2 <= radius; soft threshold then projection",
}


def make_regularizer(name: str, **params: Any) -> Regularizer:
    """Build the regularizer registered as ``name`` with keyword ``params``.

    Parameters
    ----------
    name : str
        A key of :data:`REGULARIZERS` (``"l1"``, ``"group_lasso"``, ``"mcp"``, ...).
    **params
        The constructor arguments of that class.

    Returns
    -------
    Regularizer

    Raises
    ------
    ValueError
        For an unknown name (the message lists the valid ones), an unknown or missing
        parameter (the message lists the accepted ones), or an invalid value.

    Examples
    --------
    >>> make_regularizer("mcp", alpha=0.1, gamma=3.0)
    MCP(alpha=0.1, gamma=3.0, param_ndim=1)
    """
    if name not in REGULARIZERS:
        raise ValueError(f"unknown regularizer {name!r}; valid names: "
                         f"{', '.join(sorted(REGULARIZERS))}")
    cls = REGULARIZERS[name]
    signature = inspect.signature(cls)
    accepted = list(signature.parameters)
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(f"regularizer {name!r} got unknown parameter(s) {unknown}; accepted: "
                         f"{', '.join(accepted)}")
    missing = [p.name for p in signature.parameters.values()
               if p.default is inspect.Parameter.empty and p.name not in params]
    if missing:
        raise ValueError(f"regularizer {name!r} needs parameter(s) {missing}; accepted: "
                         f"{', '.join(accepted)}")
    return cls(**params)


__all__ = [
    "DESCRIPTIONS", "MCP", "REGULARIZERS", "SCAD", "Box", "ElasticNet", "GroupLasso", "L1",
    "L1Ball", "L1L2Ball", "L2Ball", "Masked", "Nuclear", "Regularizer", "Zero", "make_regularizer",
    "soft_threshold",
]
