"""Federated algorithms: one factory per file, a registry by name.

Every factory closes over its hyperparameters and returns a :class:`FederatedAlgorithm`
(five pure functions over NamedTuple states); the runner executes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ._base import ClientContext, EmptyState, FederatedAlgorithm, ServerContext
from ._catalog import (
    ALGORITHMS,
    DECENTRALIZED,
    DESCRIPTIONS,
    FAMILIES,
    REGISTRY,
)
from ._compressed import compressed
from ._decentralized import DecentralizedAlgorithm, NodeContext
from ._private import private
from ._recipe import Recipe, Step, recipe_of, transformed
from ._transforms import TRANSFORMS, apply_transforms, display_name
from .c_fedda import c_fedda
from .compressed_scaffnew import compressed_scaffnew
from .dfedda import dfedda, dfedda_gt, dfedmid, drefedda_gt
from .ditto import ditto
from .dproxsgt import cdproxsgt, dproxsgt
from .fast_fedda import fast_fedda
from .fedadmm import fedadmm
from .fedavg import fedavg
from .fedcanon import fedcanon, fedcanon2, fedcanon_controls
from .fedda import fedda
from .feddr import async_feddr, feddr, fedsplit
from .fedexprox import fedexprox
from .fedht import fed_ht, fediter_ht
from .fedmid import fedmid
from .fedpd import fedpd
from .fedprox import fedprox
from .locodl import locodl
from .mc_fedda import mc_fedda
from .pfedme import pfedme
from .prox_dasa import prox_dasa, prox_dasa_gt
from .refedda_gt import fedda_gt, multistep_refedda_gt, refedda_gt
from .scafflix import scafflix
from .scaffnew import scaffnew
from .scaffold import scaffold
from .sdane import sdane
from .tamuna import tamuna
from .za1 import za1, za1_correction

# the package's names are the checked factories (fedcomp.za1 is fedcomp.algorithms.za1)
globals().update({e.factory.__name__: e.factory for e in REGISTRY.entries()})


def execution_of(name: str) -> str:
    """The engine of a registered algorithm: ``"rounds"``, ``"async"`` or ``"decentralized"``.

    A static fact of its :data:`REGISTRY` entry (nothing is built to learn it).

    Examples
    --------
    >>> execution_of("async_feddr"), execution_of("dfedda_gt")
    ('async', 'decentralized')
    """
    return REGISTRY.entry(name).execution


def host_values(algorithm: FederatedAlgorithm, batch_size: int | None = None,
                quadratic: bool = False) -> dict[str, str]:
    """``{part: why}`` for the parts of a round in which ``algorithm`` reads a value on the
    host (the :class:`~fedcomp._registry.HostValue` traits of its recipe's base entry, and
    those of each transform around it, :data:`TRANSFORMS`); empty when the whole round can
    compile.

    An algorithm that is not registered (a user's own), or a transform that is not, has
    no declared traits: the compiled engine then learns by tracing it.

    Examples
    --------
    >>> sorted(host_values(scaffnew())), sorted(host_values(tamuna(s=2, cohort_size=4)))
    (['client update'], ['client update', 'server update'])
    >>> host_values(za1())
    {}
    """
    recipe = recipe_of(algorithm)
    # each trait with the parameters it reads: the base's hyperparameters, a transform's own
    traits = [(trait, recipe.params) for trait in
              (REGISTRY.entry(recipe.base).host_values if recipe.base in REGISTRY else ())]
    for step in recipe.transforms:
        if step.transform in TRANSFORMS:
            traits += [(trait, step.params)
                       for trait in TRANSFORMS.entry(step.transform).host_values]
    found: dict[str, str] = {}
    for trait, params in traits:
        if trait.applies is None or trait.applies(params, batch_size, quadratic):
            for part in trait.parts:
                found[part] = f"{found[part]}; {trait.reason}" if part in found else trait.reason
    return found


def make_algorithm(name: str, **hyperparameters: Any) -> Any:
    """Build a registered (federated or decentralized) algorithm by name.

    Parameters
    ----------
    name : str
        A name of :data:`REGISTRY`.
    **hyperparameters
        Keyword arguments of that algorithm's factory.

    Returns
    -------
    FederatedAlgorithm or DecentralizedAlgorithm

    Raises
    ------
    UnknownNameError
        For an unknown name (the message lists the valid ones).
    UnknownParameterError
        For a hyperparameter the factory does not take (the message lists the accepted ones).
    ValueError
        For an invalid value (both errors above are ``ValueError`` too).

    Examples
    --------
    >>> make_algorithm("fedavg", client_lr=0.1).name
    'fedavg'
    """
    return REGISTRY.make(name, **hyperparameters)


def rebuild_algorithm(recipe: Recipe | Mapping[str, Any]) -> Any:
    """The algorithm a :class:`Recipe` (or its JSON form, :meth:`Recipe.to_json`) describes.

    Its base algorithm by :func:`make_algorithm`, then each transform applied in order by
    its :data:`TRANSFORMS` entry, from the parameters the recipe records: what a Flower
    node does with the recipe the server sends.

    Raises
    ------
    ValueError
        For a value that is not a recipe, an unknown algorithm or transform (listing the
        valid ones), a parameter they do not take, or an invalid value.

    Examples
    --------
    >>> from fedcomp.compressors import QSGD
    >>> alg = compressed(make_algorithm("fedavg", client_lr=0.1), QSGD(levels=4))
    >>> again = rebuild_algorithm(recipe_of(alg).to_json())
    >>> again.hyperparameters == alg.hyperparameters, recipe_of(again) == recipe_of(alg)
    (True, True)
    """
    recipe = recipe if isinstance(recipe, Recipe) else Recipe.from_json(recipe)
    return apply_transforms(make_algorithm(recipe.base, **recipe.params), recipe)


__all__ = ["ALGORITHMS", "DECENTRALIZED", "DESCRIPTIONS", "REGISTRY", "ClientContext",
           "DecentralizedAlgorithm", "EmptyState", "FederatedAlgorithm", "NodeContext",
           "ServerContext", "c_fedda", "dfedda", "dfedda_gt", "dfedmid", "drefedda_gt",
           "fast_fedda", "fedavg", "fedda", "fedda_gt", "fedmid", "make_algorithm", "mc_fedda",
           "multistep_refedda_gt", "refedda_gt", "za1", "za1_correction",
           "fedcanon", "fedcanon2", "fedcanon_controls", "scaffnew", "scaffold"]
__all__ += ["fed_ht", "fedexprox", "fediter_ht", "host_values"]
__all__ += ["compressed_scaffnew", "locodl", "tamuna"]
__all__ += ["FAMILIES", "ditto", "pfedme", "private", "sdane"]
__all__ += ["Recipe", "Step", "TRANSFORMS", "display_name", "recipe_of", "transformed"]
__all__ += ["cdproxsgt", "dproxsgt"]
__all__ += ["prox_dasa", "prox_dasa_gt"]
__all__ += ["scafflix"]
__all__ += ["compressed", "rebuild_algorithm", "execution_of", "async_feddr", "fedadmm", "feddr",
            "fedpd", "fedprox", "fedsplit"]
