"""Every registered component, family by family: what ``fedcomp list`` prints.

The families' registries (:mod:`fedcomp._registry`) in one place, for the command line,
configuration checks and the documentation.
"""

from __future__ import annotations

from typing import Any

from . import algorithms, compressors, data, losses, metrics, regularizers, topology
from ._registry import Registry
from .runtime._backends import BACKENDS


def catalogue() -> dict[str, Registry[Any]]:
    """Every family's registry, in the order ``fedcomp list`` prints them.

    Examples
    --------
    >>> list(catalogue())  # doctest: +NORMALIZE_WHITESPACE
    ['algorithms', 'regularizers', 'losses', 'datasets', 'partitioners', 'metrics', 'topologies',
     'compressors', 'backends']
    >>> catalogue()["algorithms"].entry("async_feddr").execution
    'async'
    """
    return {
        "algorithms": algorithms.REGISTRY,
        "regularizers": regularizers.REGULARIZERS,
        "losses": losses.LOSSES,
        "datasets": data.DATASETS,
        "partitioners": data.PARTITIONERS,
        "metrics": metrics.METRICS,
        "topologies": topology.TOPOLOGIES,
        "compressors": compressors.COMPRESSORS,
        "backends": BACKENDS,
    }


__all__ = ["catalogue"]
