"""The transforms: wrappers that turn an algorithm into another, one registry entry each.

A wrapped algorithm is its :class:`~fedcomp.algorithms.Recipe`: a registered base
algorithm with its hyperparameters and the transforms applied to it, in order. Each
transform is a :class:`~fedcomp._registry.TransformEntry` of :data:`TRANSFORMS` with its
own traits: the values it reads on the host inside a round (the compiled engine's
traits, :func:`fedcomp.algorithms.host_values`), how it renames the algorithm it wraps,
and how it is applied again from the parameters its recipe records (what a Flower node
does, :func:`fedcomp.algorithms.rebuild_algorithm`). :meth:`TRANSFORMS.register
<fedcomp._registry.Registry.register>` adds a user's own the same way.
"""

from __future__ import annotations

from typing import Any

from .._registry import HostValue, Registry, TransformEntry
from ._catalog import BOTH, CLIENT
from ._compressed import compress
from ._private import dp_name, private
from ._recipe import Recipe
from .ditto import ditto, ditto_name

#: Hash-keyed draws: the compressor's per (round, client), the privacy noise's per round.
COMPRESSOR_DRAWS = ("the compressor's draws are hashes of the round and the client ids, on "
                    "the host")
PRIVACY_NOISE = "the Gaussian noise is drawn on the host, keyed by a hash of the round"

#: Every transform by the name a recipe records, in the order a configuration applies them
#: (:meth:`fedcomp.experiments.AlgorithmSpec.build`): compression of the uploads, then
#: Ditto's personal models, then client-level privacy.
TRANSFORMS: Registry[TransformEntry] = Registry("transform", [
    TransformEntry("compress", compress,
                   "Compressed uploads, optional EF21 error feedback (fedcomp.algorithms."
                   "compressed)",
                   host_values=(
                       HostValue(CLIENT, COMPRESSOR_DRAWS,
                                 lambda params, batch, quadratic: not params.get("ef21")),
                       HostValue(BOTH, COMPRESSOR_DRAWS,
                                 lambda params, batch, quadratic: bool(params.get("ef21"))))),
    TransformEntry("ditto", ditto,
                   "Ditto personal models beside the global one (Li et al. 2021)",
                   rename=ditto_name),
    TransformEntry("dp", private,
                   "Client-level differential privacy: clipped uploads, Gaussian noise "
                   "(McMahan et al. 2018)",
                   unbounded=("clip",),  # inf: no clipping
                   host_values=(
                       HostValue(CLIENT, PRIVACY_NOISE,
                                 lambda params, batch, quadratic: bool(params.get("local"))),
                       HostValue(("server update",), PRIVACY_NOISE,
                                 lambda params, batch, quadratic: not params.get("local"))),
                   rename=dp_name),
], supplied=("algorithm",))


def display_name(recipe: Recipe) -> str:
    """The name of the algorithm ``recipe`` builds: its base's, renamed by each transform
    in turn (``dp_fedavg``).

    Examples
    --------
    >>> display_name(Recipe("fedavg", {}).then("compress", {}).then("dp", {}))
    'dp_fedavg'
    """
    name = recipe.base
    for step in recipe.transforms:
        name = TRANSFORMS.entry(step.transform).rename(name)
    return name


def apply_transforms(algorithm: Any, recipe: Recipe) -> Any:
    """``algorithm`` with ``recipe``'s transforms applied in order (each by its entry, from
    the parameters the recipe records)."""
    for step in recipe.transforms:
        algorithm = TRANSFORMS.make(step.transform, algorithm=algorithm, **step.params)
    return algorithm


__all__ = ["TRANSFORMS", "apply_transforms", "display_name"]
