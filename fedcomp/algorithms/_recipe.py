"""What an algorithm is: a :class:`Recipe`, the record a wrapped algorithm is rebuilt from.

A registered base algorithm with its hyperparameters, then the transforms applied to it
in order (:data:`fedcomp.algorithms.TRANSFORMS`: compressed uploads, Ditto, privacy). Each
transform records itself with :func:`transformed`; :func:`recipe_of` reads the record, and
an algorithm as its factory built it is its name and hyperparameters. The display name
(``dp_fedavg``) is the transforms' renaming of the base name: nothing reads it back.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, TypeVar


class Step(NamedTuple):
    """One transform applied to an algorithm: its name in the transforms registry
    (:data:`fedcomp.algorithms.TRANSFORMS`) and the parameters it was applied with."""

    transform: str
    params: dict[str, Any]


class Recipe(NamedTuple):
    """What an algorithm is: a registered base algorithm with its hyperparameters, and the
    transforms applied to it, innermost first.

    The record a Flower node rebuilds the algorithm from
    (:func:`fedcomp.algorithms.rebuild_algorithm`); :meth:`to_json` and :meth:`from_json`
    carry it as plain JSON values. The display name (``dp_fedavg``) is the transforms'
    renaming of the base name and says nothing the recipe does not.

    Examples
    --------
    >>> from fedcomp.algorithms import ditto, fedmid, recipe_of
    >>> recipe = recipe_of(ditto(fedmid(client_lr=0.1), lam=0.5))
    >>> recipe.base, [step.transform for step in recipe.transforms]
    ('fedmid', ['ditto'])
    >>> Recipe.from_json(recipe.to_json()) == recipe
    True
    """

    base: str
    params: dict[str, Any]
    transforms: tuple[Step, ...] = ()

    def then(self, transform: str, params: dict[str, Any]) -> Recipe:
        """This recipe with ``transform`` applied last."""
        return self._replace(transforms=(*self.transforms, Step(transform, dict(params))))

    def to_json(self) -> dict[str, Any]:
        """The recipe as JSON values (``{"base", "params", "transforms": [[name, params]]}``)."""
        return {"base": self.base, "params": self.params,
                "transforms": [[step.transform, step.params] for step in self.transforms]}

    @classmethod
    def from_json(cls, value: Any) -> Recipe:
        """The recipe :meth:`to_json` wrote; a ``ValueError`` naming what is missing."""
        try:
            return cls(str(value["base"]), dict(value["params"]),
                       tuple(Step(str(name), dict(params))
                             for name, params in value.get("transforms", ())))
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"not an algorithm recipe: {value!r} ({type(exc).__name__}: "
                             f"{exc}); expected {{'base': name, 'params': {{...}}, "
                             "'transforms': [[name, {...}], ...]}, what Recipe.to_json "
                             "writes") from None


def recipe_of(algorithm: Any) -> Recipe:
    """The :class:`Recipe` of ``algorithm``: the one its transforms recorded, else (an
    algorithm as its factory built it) its name and hyperparameters."""
    recipe = getattr(algorithm, "recipe", None)
    return recipe if recipe is not None else Recipe(algorithm.name,
                                                    dict(algorithm.hyperparameters))


class Wrappable(Protocol):
    """What a transform wraps: a :class:`~fedcomp.algorithms.FederatedAlgorithm` (named
    here by its shape, as ``_base`` names this module's :class:`Recipe`)."""

    @property
    def recipe(self) -> Recipe | None: ...

    def _replace(self: A, *, recipe: Recipe | None = ...) -> A: ...


A = TypeVar("A", bound=Wrappable)


def transformed(algorithm: A, transform: str, params: dict[str, Any], **fields: Any) -> A:
    """``algorithm`` with ``fields`` replaced (its functions, name, hyperparameters), its
    recipe recording ``transform`` applied with ``params``: how every transform of
    :data:`fedcomp.algorithms.TRANSFORMS` returns the algorithm it wraps.

    ``params`` are JSON values, the keyword arguments with which the transform's entry
    rebuilds it (:func:`fedcomp.algorithms.rebuild_algorithm`).
    """
    return algorithm._replace(recipe=recipe_of(algorithm).then(transform, params), **fields)


__all__ = ["Recipe", "Step", "recipe_of", "transformed"]
