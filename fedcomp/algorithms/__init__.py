"""Federated algorithms: one factory per file, a registry by name.

Every factory closes over its hyperparameters and returns a :class:`FederatedAlgorithm`
(five pure functions over NamedTuple states); the runner executes it.
"""

from __future__ import annotations

from typing import Any

from .._registry import HostValue
from ._base import ClientContext, EmptyState, FederatedAlgorithm, ServerContext
from ._catalog import (
    ALGORITHMS,
    BOTH,
    CLIENT,
    DECENTRALIZED,
    DESCRIPTIONS,
    FAMILIES,
    REGISTRY,
)
from ._compressed import compressed
from ._decentralized import DecentralizedAlgorithm, NodeContext
from ._private import private
from .c_fedda import c_fedda
from .compressed_scaffnew import compressed_scaffnew
from .dfedda import dfedda, dfedda_gt, dfedmid, drefedda_gt
from .ditto import ditto
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
from .refedda_gt import fedda_gt, multistep_refedda_gt, refedda_gt
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
    host (its registry entry's :class:`~fedcomp._registry.HostValue` traits, and those of
    a compression or privacy wrapper around it); empty when the whole round can compile.

    An algorithm that is not registered (a user's own) has no declared traits: the
    compiled engine then learns by tracing it.

    Examples
    --------
    >>> sorted(host_values(scaffnew())), sorted(host_values(tamuna(s=2, cohort_size=4)))
    (['client update'], ['client update', 'server update'])
    >>> host_values(za1())
    {}
    """
    hp = algorithm.hyperparameters
    name = algorithm.name
    traits = list(REGISTRY.entry(name).host_values) if name in REGISTRY else []
    for prefix in ("dp_", "ditto_"):  # a wrapper's name around a registered algorithm
        if name not in REGISTRY and name.startswith(prefix) and name[len(prefix):] in REGISTRY:
            traits += REGISTRY.entry(name[len(prefix):]).host_values
    if "compressor" in hp:  # fedcomp.algorithms.compressed
        traits.append(HostValue(BOTH if hp.get("ef21") else CLIENT,
                                "the compressor's draws are hashes of the round and the "
                                "client ids, on the host"))
    if "noise_multiplier" in hp and "clip" in hp:  # fedcomp.privacy.private
        traits.append(HostValue(CLIENT if hp.get("local") else ("server update",),
                                "the Gaussian noise is drawn on the host, keyed by a hash of "
                                "the round"))
    found: dict[str, str] = {}
    for trait in traits:
        if trait.applies is None or trait.applies(hp, batch_size, quadratic):
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


def rebuild_algorithm(name: str, **hyperparameters: Any) -> Any:
    """An algorithm rebuilt from its name and its (JSON) ``hyperparameters``.

    :func:`make_algorithm`, and for the ``compressor`` / ``ef21`` entries that
    :func:`compressed` adds, the same compression around it, and for a ``dp_NAME`` with
    the ``clip`` / ``noise_multiplier`` / ``local`` entries of :func:`fedcomp.privacy.private`,
    the same privacy around that: what a Flower node does with the hyperparameters the
    server sends.

    Examples
    --------
    >>> from fedcomp.compressors import QSGD
    >>> alg = compressed(make_algorithm("fedavg", client_lr=0.1), QSGD(levels=4))
    >>> rebuild_algorithm("fedavg", **alg.hyperparameters).hyperparameters == alg.hyperparameters
    True
    """
    from ..compressors import make_compressor

    if name.startswith("dp_") and "clip" in hyperparameters:
        # private(...) named it dp_NAME and added its three keys around the rest
        clip, sigma = hyperparameters.pop("clip"), hyperparameters.pop("noise_multiplier")
        local = hyperparameters.pop("local")
        return private(rebuild_algorithm(name.removeprefix("dp_"), **hyperparameters),
                       clip=float(clip), noise_multiplier=float(sigma), local=local)
    if name.startswith("ditto_") and "ditto" in hyperparameters:
        # ditto(...) named it ditto_NAME and added its table to the rest
        table = hyperparameters.pop("ditto")
        return ditto(rebuild_algorithm(name.removeprefix("ditto_"), **hyperparameters),
                     **table)
    table = hyperparameters.pop("compressor", None)
    ef21 = hyperparameters.pop("ef21", False)
    algorithm = make_algorithm(name, **hyperparameters)
    if table is None:
        return algorithm
    params = {k: v for k, v in table.items() if k != "name"}
    return compressed(algorithm, make_compressor(table["name"], **params), ef21=ef21)


__all__ = ["ALGORITHMS", "DECENTRALIZED", "DESCRIPTIONS", "REGISTRY", "ClientContext",
           "DecentralizedAlgorithm", "EmptyState", "FederatedAlgorithm", "NodeContext",
           "ServerContext", "c_fedda", "dfedda", "dfedda_gt", "dfedmid", "drefedda_gt",
           "fast_fedda", "fedavg", "fedda", "fedda_gt", "fedmid", "make_algorithm", "mc_fedda",
           "multistep_refedda_gt", "refedda_gt", "za1", "za1_correction",
           "fedcanon", "fedcanon2", "fedcanon_controls", "scaffnew", "scaffold"]
__all__ += ["fed_ht", "fedexprox", "fediter_ht", "host_values"]
__all__ += ["compressed_scaffnew", "locodl", "tamuna"]
__all__ += ["FAMILIES", "ditto", "pfedme", "private", "sdane"]
__all__ += ["compressed", "rebuild_algorithm", "execution_of", "async_feddr", "fedadmm", "feddr",
            "fedpd", "fedprox", "fedsplit"]
