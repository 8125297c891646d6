"""One registry mechanism: a name stands for a factory, its one-line description and static facts.

Every family of components (algorithms, regularizers, losses, data sets, partitioners,
metrics, topologies) is a :class:`Registry` of :class:`Entry` records. A registry reads as a
read-only ``Mapping`` from name to factory, so ``REGISTRY[name](**params)``, ``name in
REGISTRY`` and ``inspect.signature(REGISTRY[name])`` work as on a plain dict; on top of that
it builds by name with checked keyword names (:meth:`Registry.make`), checks a table of
keys against a factory's signature (:meth:`Registry.check_keys`) and describes itself in one
line per entry (:meth:`Registry.describe`, what ``fedcomp list`` prints).

What a configuration needs to know *before* building a component is a static fact of its
entry, not something learned by constructing it: an algorithm's ``execution`` (synchronous
rounds, asynchronous event clock, or decentralized gossip), a data set's ground truth and
streaming sampler. Family-specific facts live in subclasses of :class:`Entry`.

This module imports nothing from fedcomp (the families import it);
:func:`fedcomp.catalogue.catalogue` lists the families' registries.
"""

from __future__ import annotations

import inspect
import math
import numbers
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Generic, Literal, NamedTuple, TypeVar


class NonFiniteParameterError(ValueError):
    """A parameter that is NaN or infinite where a finite number is needed."""


def _non_finite(value: Any) -> Any:
    """The first NaN or infinite number in ``value`` (a number or nested lists of them),
    else None."""
    if isinstance(value, list | tuple):
        return next((bad for bad in map(_non_finite, value) if bad is not None), None)
    if isinstance(value, numbers.Integral) or not isinstance(value, numbers.Real):
        return None  # integers are finite; strings, arrays, tables are checked elsewhere
    return None if math.isfinite(value) else value


def check_finite(params: Mapping[str, Any], where: str, unbounded: Collection[str] = ()
                 ) -> None:
    """Raise :class:`NonFiniteParameterError` naming the first parameter of ``params`` that
    is or holds NaN or ±inf (``±inf`` allowed for the names in ``unbounded``).

    The one check behind every factory (:meth:`Registry.make`) and the configuration's
    validation: ``client_lr = inf`` would run a round and fail with no algorithm named,
    ``alpha = inf`` run to the end on NaN objectives, ``l2 = inf`` iterate on NaN.

    Parameters
    ----------
    params : mapping
        Parameter names and values (non-numbers are left alone).
    where : str
        The owner, the message's prefix (``"fedmid"``, ``"algorithms.fedmid"``).
    unbounded : collection of str
        Names that may be ``±inf`` (never NaN).

    Examples
    --------
    >>> check_finite({"client_lr": 0.1, "name": "x"}, "fedmid")
    >>> check_finite({"client_lr": float("inf")}, "fedmid")
    Traceback (most recent call last):
    ...
    fedcomp._registry.NonFiniteParameterError: fedmid.client_lr must be a finite number (got inf)
    """
    for name, value in params.items():
        bad = _non_finite(value)
        if bad is None:
            continue
        if name in unbounded and not math.isnan(float(bad)) and bad is value:
            continue
        raise NonFiniteParameterError(f"{where}.{name} must be a finite number (got {value!r})")


class UnknownNameError(ValueError):
    """A name that no entry of the registry has; the message lists the valid names."""


class UnknownParameterError(ValueError):
    """Keyword names the factory does not accept; the message lists the accepted ones."""


class MissingParameterError(ValueError):
    """A required parameter of the factory was not given; the message lists the accepted ones."""


@dataclass(frozen=True)
class Entry:
    """One registered component.

    Parameters
    ----------
    name : str
        The name configurations and the command line use.
    factory : callable
        What the name stands for: a class or a builder called with keyword parameters
        (for metrics, the metric function itself).
    description : str
        One line for ``fedcomp list``.
    extra : str or None, default None
        The optional dependency group the component needs (``pip install fedcomp[extra]``),
        or None when the core dependencies suffice.
    unbounded : tuple of str, default ()
        Parameters that may be ``±inf`` (never NaN); every other number must be finite.
    """

    name: str
    factory: Callable[..., Any]
    description: str
    _: KW_ONLY
    extra: str | None = None
    #: Parameters for which ``±inf`` means something (a box's open side, no ball): every
    #: other number the factory gets must be finite (:func:`check_finite`).
    unbounded: tuple[str, ...] = ()


#: How the runner executes an algorithm: synchronous rounds, an asynchronous event clock,
#: or decentralized gossip over a topology.
Execution = Literal["rounds", "async", "decentralized"]
EXECUTIONS: tuple[Execution, ...] = ("rounds", "async", "decentralized")


#: The parts of a round that an engine runs (and the compiled engine traces) on their own.
PARTS = ("client update", "server update")


class HostValue(NamedTuple):
    """A value an algorithm reads on the host inside a round (a trait of its entry).

    The compiled (jax) engine cannot trace such a part: it runs it eagerly on the jax
    arrays from the first round, saying why (or, with ``compile=True``, refuses before
    round 1). A GPU engine pays a device-to-host copy there each round.

    Parameters
    ----------
    parts : tuple of str
        The parts that read it (of :data:`PARTS`).
    reason : str
        What is read on the host and why, in a few words.
    applies : callable, optional
        ``applies(hyperparameters, batch_size, quadratic) -> bool``: only for these
        settings (an exact local solver on a non-quadratic loss, epochs of minibatches);
        always when omitted.
    """

    parts: tuple[str, ...]
    reason: str
    applies: Callable[[Mapping[str, Any], int | None, bool], bool] | None = None


#: What an algorithm may require of the problem and the run (an entry's ``requires``):
#: ``"smooth"``, ``g = 0`` only (its paper has no prox); ``"full_participation"``, every
#: client in every round (``clients_per_round = None``). Its ``prepare`` refuses the
#: rest with its own message; the entry states the fact for whoever must know it first.
REQUIREMENTS = ("smooth", "full_participation")


@dataclass(frozen=True, kw_only=True)
class AlgorithmEntry(Entry):
    """An algorithm, with how the runner executes it (one of :data:`EXECUTIONS`), the
    values it reads on the host inside a round (:class:`HostValue`) and what it requires
    (of :data:`REQUIREMENTS`)."""

    execution: Execution = "rounds"
    host_values: tuple[HostValue, ...] = ()
    #: Its line color in every figure and the report (``#rrggbb``), chosen apart from the
    #: colors of the methods it is drawn beside (:mod:`fedcomp.plotting`).
    color: str = ""
    #: The section of the API reference it is documented under (docs/api/algorithms.md).
    family: str = "Other algorithms"
    #: What the privacy wrapper (:func:`fedcomp.privacy.private`) clips: each upload field
    #: and the broadcast field it is the new value of (``None``: already a change).
    private_uploads: Mapping[str, str | None] | None = None
    #: Why the privacy wrapper refuses the algorithm (``None``: not refused).
    not_private: str | None = None
    #: What it requires (of :data:`REQUIREMENTS`): the problems and runs its ``prepare``
    #: refuses otherwise.
    requires: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.requires) - set(REQUIREMENTS))
        if unknown:
            raise ValueError(f"{self.name}: unknown requirement(s) {unknown} in requires; "
                             f"valid: {_names(REQUIREMENTS)}")
        if not re.fullmatch(r"#[0-9a-fA-F]{6}", self.color):
            raise ValueError(f"{self.name}: give the algorithm its line color, color='#rrggbb' "
                             f"(got {self.color!r}); see fedcomp.plotting for the rule")
        if self.private_uploads is not None and self.not_private is not None:
            raise ValueError(f"{self.name}: private_uploads and not_private exclude each other")
        if self.execution not in EXECUTIONS:
            raise ValueError(f"{self.name}: execution must be one of {EXECUTIONS} "
                             f"(got {self.execution!r})")
        for host in self.host_values:
            if not host.parts or not set(host.parts) <= set(PARTS):
                raise ValueError(f"{self.name}: a host value's parts must be among {PARTS} "
                                 f"(got {host.parts!r})")


@dataclass(frozen=True, kw_only=True)
class TransformEntry(Entry):
    """A transform: a wrapper that turns an algorithm into another (compression, Ditto,
    privacy), with its own traits.

    ``factory(algorithm, **params)`` applies it, ``params`` being what the transform
    records of itself in the wrapped algorithm's recipe (JSON values): how a Flower node
    rebuilds it. The name is the one the recipe records.

    Parameters
    ----------
    host_values : tuple of HostValue
        The values it reads on the host inside a round, beside those of the algorithm it
        wraps; a trait's ``applies`` gets the transform's own ``params``.
    rename : callable
        ``rename(name) -> name``: the display name of the wrapped algorithm (the name in
        result files and figures); the name unchanged when omitted.
    """

    host_values: tuple[HostValue, ...] = ()
    rename: Callable[[str], str] = str


@dataclass(frozen=True, kw_only=True)
class DatasetEntry(Entry):
    """A data set, with what is known about it besides its samples.

    ``ground_truth(**params)`` and ``sampler(**params)`` take the generator's parameters
    (ignoring those they do not need) and return the model the data were generated from,
    and a streaming sampler of fresh samples, where the data set has one. ``pooled`` marks
    a pooled data set split among clients by a partitioner (its ``partition`` parameter).
    """

    ground_truth: Callable[..., Any] | None = None
    sampler: Callable[..., Any] | None = None
    pooled: bool = False


E = TypeVar("E", bound=Entry)


def _names(names: Iterable[str]) -> str:
    return ", ".join(names) or "(none)"


class Registry(Mapping[str, Callable[..., Any]], Generic[E]):
    """A read-only ``Mapping`` from name to factory, in registration order.

    Parameters
    ----------
    kind : str
        What one entry is, singular (``"algorithm"``); error messages use it.
    entries : iterable of Entry
        Unique names, each with a non-empty one-line description.
    supplied : collection of str, default ()
        Parameters the caller fills, which a configuration does not name (a topology's
        ``n_nodes``, a partitioner's labels and seed, a metric's problem and model):
        :meth:`check_keys` rejects them, :meth:`make` takes them.

    Examples
    --------
    >>> def shift(by=1.0):
    ...     '''Add ``by``.'''
    ...     return lambda v: v + by
    >>> OPS = Registry("op", [Entry("shift", shift, "adds a constant")])
    >>> OPS.make("shift", by=2.0)(1.0)
    3.0
    >>> OPS["shift"] is shift, "shift" in OPS, OPS.parameters("shift")
    (True, True, ('by',))
    >>> OPS.make("shift", step=2.0)
    Traceback (most recent call last):
    ...
    fedcomp._registry.UnknownParameterError: op 'shift': unknown parameter(s) ['step']; accepted: by
    """

    def __init__(self, kind: str, entries: Iterable[E], *, supplied: Collection[str] = ()
                 ) -> None:
        self.kind = kind
        self.supplied = tuple(supplied)
        self._entries: dict[str, E] = {}
        self._signatures: dict[str, inspect.Signature] = {}
        for entry in entries:
            self.register(entry)

    def _check(self, entry: E) -> None:
        if entry.name in self._entries:
            raise ValueError(f"{self.kind} {entry.name!r} is registered twice")
        if not entry.description.strip() or "\n" in entry.description:
            raise ValueError(f"{self.kind} {entry.name!r} needs a one-line description "
                             f"(got {entry.description!r})")

    # --- the Mapping: name -> factory ----------------------------------------------------
    def __getitem__(self, name: str) -> Callable[..., Any]:
        return self._entries[name].factory  # a KeyError, as from a dict (.get relies on it)

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}, [{_names(self._entries)}])"

    # --- entries and their facts ---------------------------------------------------------
    def entry(self, name: str) -> E:
        """The entry registered as ``name``; :class:`UnknownNameError` lists the valid ones."""
        try:
            return self._entries[name]
        except (KeyError, TypeError):  # TypeError: an unhashable name from a config
            raise UnknownNameError(f"unknown {self.kind} {name!r}; valid: "
                                   f"{_names(sorted(self._entries))}") from None

    def entries(self) -> tuple[E, ...]:
        """Every entry, in registration order."""
        return tuple(self._entries.values())

    def filter(self, keep: Callable[[E], bool]) -> Registry[E]:
        """The live view of the entries for which ``keep(entry)`` is true (same kind): an
        entry :meth:`register` adds later appears in it too."""
        return _View(self, keep)

    def register(self, entry: E) -> E:
        """Add ``entry`` (a user's own algorithm, data set, ...): every view, lookup and
        check of the registry sees it from now on. Returns it."""
        self._check(entry)
        self._entries[entry.name] = entry
        return entry

    def unregister(self, name: str) -> None:
        """Remove the entry ``name`` (what :meth:`register` added)."""
        self.entry(name)  # an unknown name says so
        del self._entries[name]
        self._signatures.pop(name, None)

    def describe(self) -> Mapping[str, str]:
        """``{name: one-line description}`` in registration order (read-only, live: an
        entry :meth:`register` adds appears in it)."""
        return self.facts("description")

    def facts(self, attribute: str) -> Mapping[str, Any]:
        """``{name: entry.attribute}`` for the entries that set it (not ``None``), in
        registration order, read live; the same object on every call.

        Examples
        --------
        >>> from fedcomp.algorithms import REGISTRY
        >>> REGISTRY.facts("color")["za1"]
        '#d62728'
        """
        cache = self.__dict__.setdefault("_facts", {})
        if attribute not in cache:
            cache[attribute] = _Facts(self, attribute)
        return cache[attribute]

    # --- parameters ----------------------------------------------------------------------
    def _signature(self, name: str) -> inspect.Signature:
        if name not in self._signatures:
            self._signatures[name] = inspect.signature(self.entry(name).factory)
        return self._signatures[name]

    def parameters(self, name: str) -> tuple[str, ...]:
        """The keyword names the factory of ``name`` accepts, in signature order.

        Variadic ``*args`` / ``**kwargs`` are not names and are left out; a factory with
        ``**kwargs`` accepts any key besides these (:meth:`check_keys`).
        """
        return tuple(p.name for p in self._signature(name).parameters.values()
                     if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))

    def settable(self, name: str) -> tuple[str, ...]:
        """The parameters of ``name`` a configuration may set: :meth:`parameters` less
        :attr:`supplied`."""
        return tuple(p for p in self.parameters(name) if p not in self.supplied)

    def check_keys(self, name: str, keys: Iterable[str], where: str | None = None, *,
                   extra: Collection[str] = ()) -> None:
        """Raise unless every key is a settable parameter of ``name``'s factory.

        Parameters
        ----------
        name : str
            A registered name (else :class:`UnknownNameError`).
        keys : iterable of str
            The keys given, e.g. those of a configuration table.
        where : str, optional
            Where the keys come from, the prefix of the message (default: ``"<kind> 'name'"``).
        extra : collection of str
            Keys accepted besides the parameters (a table's own ``"name"``, ``"label"``).

        Raises
        ------
        UnknownNameError
            For an unknown ``name``.
        UnknownParameterError
            Naming the unknown keys (a :attr:`supplied` one among them) and listing the
            accepted ones.
        """
        self._reject_unknown(name, keys, where, [*self.settable(name), *extra])

    def _reject_unknown(self, name: str, keys: Iterable[str], where: str | None,
                        accepted: list[str]) -> None:
        if any(p.kind is p.VAR_KEYWORD for p in self._signature(name).parameters.values()):
            return  # the factory takes **kwargs: any key is a parameter
        unknown = sorted(set(keys) - set(accepted))
        if unknown:
            raise UnknownParameterError(f"{where or f'{self.kind} {name!r}'}: unknown "
                                        f"parameter(s) {unknown}; accepted: {_names(accepted)}")

    def make(self, name: str, **params: Any) -> Any:
        """Build ``name``'s component: its factory called with the keyword ``params``.

        ``params`` may include the :attr:`supplied` parameters (the caller supplies them).

        Raises
        ------
        UnknownNameError
            For an unknown name (listing the valid ones).
        UnknownParameterError
            For a keyword the factory does not take (listing the accepted ones).
        MissingParameterError
            For a required parameter left out (listing the accepted ones).
        ValueError
            From the factory itself, for an invalid value.
        """
        self._reject_unknown(name, params, None, list(self.parameters(name)))
        required = [p.name for p in self._signature(name).parameters.values()
                    if p.default is p.empty and p.name not in params
                    and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if required:
            raise MissingParameterError(f"{self.kind} {name!r} needs parameter(s) {required}; "
                                        f"accepted: {_names(self.parameters(name))}")
        entry = self.entry(name)
        check_finite(params, name, entry.unbounded)
        return entry.factory(**params)



class _Facts(Mapping[str, Any]):
    """``{name: entry.attribute}`` over a registry's entries that set it (not ``None``), read
    live (:meth:`Registry.facts`): an entry registered later appears in it."""

    def __init__(self, registry: Registry[Any], attribute: str) -> None:
        self._registry, self._attribute = registry, attribute

    def _table(self) -> dict[str, Any]:
        return {name: value for name, entry in self._registry._entries.items()
                if (value := getattr(entry, self._attribute)) is not None}

    def __getitem__(self, name: str) -> Any:
        return self._table()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table())

    def __len__(self) -> int:
        return len(self._table())

    def __repr__(self) -> str:
        return repr(self._table())


class _View(Registry[E]):
    """The entries of ``base`` that ``keep`` accepts, read live (:meth:`Registry.filter`)."""

    def __init__(self, base: Registry[E], keep: Callable[[E], bool]) -> None:
        self.kind, self.supplied = base.kind, base.supplied
        self._base, self._keep = base, keep
        self._signatures = base._signatures

    @property  # type: ignore[override]
    def _entries(self) -> dict[str, E]:  # type: ignore[override]
        return {name: e for name, e in self._base._entries.items() if self._keep(e)}

    def register(self, entry: E) -> E:
        raise TypeError(f"register {entry.name!r} in the full {self.kind} registry; this is a "
                        "view of some of its entries")

    def unregister(self, name: str) -> None:
        raise TypeError(f"unregister {name!r} from the full {self.kind} registry")

__all__ = ["EXECUTIONS", "REQUIREMENTS", "AlgorithmEntry", "DatasetEntry", "Entry", "Execution",
           "TransformEntry",
           "MissingParameterError", "NonFiniteParameterError", "Registry", "UnknownNameError",
           "UnknownParameterError", "check_finite"]
