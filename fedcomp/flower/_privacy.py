"""ε of a private run through Flower's ``PrivacyAccountant`` protocol, from fedcomp's accountant.

Flower's ``flwr.serverapp.PrivacyAccountant`` (public in 1.43; flwr-nightly
1.43.0.dev20261026 and the 1.42.0 installed here define it alike, in
``flwr/supercore/privacy_accounting/__init__.py``) is a ``typing.Protocol``::

    class PrivacyAccountant(Protocol):
        @property
        def config(self) -> PrivacyConfig: ...
        @property
        def num_releases(self) -> int: ...
        def compose(self, event: GaussianPrivacyEvent, count: int = 1) -> None: ...
        def get_epsilon(self, delta: float) -> float: ...
        def get_delta(self, epsilon: float) -> float: ...
        def get_privacy_spent(self, delta: float | None = None) -> PrivacySpent: ...
        def would_exceed(self, event: GaussianPrivacyEvent, max_epsilon: float | None = None,
                         count: int = 1) -> bool: ...
        def state_dict(self) -> dict[str, object]: ...
        def load_state_dict(self, state: dict[str, object]) -> None: ...

:class:`FedcompAccountant` has these methods (it satisfies the protocol structurally and
imports nothing of it) and computes with fedcomp's own accountant
(:func:`fedcomp.privacy.epsilon`: one round's Rényi curve of
:func:`~fedcomp.privacy.dp_event`, times the rounds, then ``dp-accounting``'s conversion),
so a Flower run's ``ε`` is the simulator's. Where Flower lacks the protocol's value types
(``PrivacyConfig``, ``PrivacySpent``), plain named tuples with the same fields stand in.

An event's ``noise_multiplier`` is Flower's: the noise over the sensitivity of the
configuration's neighbouring relation. fedcomp's ``σ`` is over the clip ``C``: with
fixed-size sampling a client's data are *replaced* (sensitivity ``2C``), so Flower's
multiplier is ``σ/2``; with Poisson sampling one client is added or removed (``C``), so it
is ``σ`` (:func:`flower_multiplier`). So :class:`FedcompAccountant` and Flower's own
``RdpAccountant`` give the same ``ε`` for the same events.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..privacy import DEFAULT_DELTA, SAMPLINGS
from ..privacy._accounting import _dp, _one_round_rdp


class StandInConfig(NamedTuple):
    """Flower's ``PrivacyConfig``'s fields, where Flower lacks it."""

    target_delta: float
    population_size: int
    neighboring_relation: str
    sampling_method: str
    max_epsilon: float | None = None


class StandInSpent(NamedTuple):
    """Flower's ``PrivacySpent``'s fields, where Flower lacks it."""

    epsilon: float
    delta: float
    num_releases: int
    accounting_method: str
    optimal_order: float | None = None


class StandInEvent(NamedTuple):
    """Flower's ``GaussianPrivacyEvent``'s fields, where Flower lacks it."""

    noise_multiplier: float
    sample_size: int
    population_size: int


def _flower(name: str, stand_in: Any) -> Any:
    """Flower's public privacy type ``name`` (``flwr.serverapp``), else ``stand_in``."""
    import flwr.serverapp

    return getattr(flwr.serverapp, name, stand_in)


#: (Flower's sampling method, its neighbouring relation) of fedcomp's accounting
_MODELS = {"fixed": ("without-replacement", "replace-one"),
           "poisson": ("poisson", "add-or-remove-one"),
           "local": ("no-amplification", "add-or-remove-one")}
#: the version of :meth:`FedcompAccountant.state_dict`'s layout
STATE_VERSION = 1
ACCOUNTING_METHOD = "fedcomp-rdp"


def flower_multiplier(noise_multiplier: float, sampling: str) -> float:
    """Flower's event ``noise_multiplier`` of fedcomp's ``σ`` (see the module docstring)."""
    return noise_multiplier / 2 if sampling == "fixed" else noise_multiplier


def _positive_int(name: str, value: Any, fix: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be an integer >= 1 (got {name}={value!r}); {fix}")
    return value


def _open_unit(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1:
        raise ValueError(f"{name} must be in (0, 1), e.g. 1e-5 (got {name}={value!r})")
    return float(value)


def _positive_finite(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not 0 < value < math.inf:
        raise ValueError(f"{name} must be a finite number > 0 (got {name}={value!r})")
    return float(value)


def _merged(releases: list[tuple[float, int, int]], release: tuple[float, int, int]
            ) -> list[tuple[float, int, int]]:
    """``releases`` and ``release``, counted into the last one where it is the same event:
    a run's rounds stay one entry, whose curve is ``rounds × curve`` as
    :func:`fedcomp.privacy.epsilon` computes it (bit for bit, and one product a round)."""
    sigma, size, count = release
    if releases and releases[-1][:2] == (sigma, size):
        return [*releases[:-1], (sigma, size, releases[-1][2] + count)]
    return [*releases, release]


class FedcompAccountant:
    """Flower's ``PrivacyAccountant`` protocol over fedcomp's client-level DP accountant.

    Parameters
    ----------
    n_clients : int
        The federation's clients (Flower's ``population_size``).
    sampling : {"fixed", "poisson"}, default "fixed"
        As :func:`fedcomp.privacy.dp_event`; a Strategy samples a fixed number of clients.
    local : bool, default False
        Local noise (no amplification by sampling), as :func:`~fedcomp.privacy.private`.
    delta : float, default 1e-5
        The ``δ`` at which :meth:`get_privacy_spent` reports ``ε`` (``target_delta``).
    max_epsilon : float, optional
        The budget :meth:`would_exceed` checks against by default.

    Examples
    --------
    >>> from fedcomp.privacy import epsilon
    >>> accountant = FedcompAccountant(100)
    >>> accountant.compose(accountant.event(1.0, 10), count=50)
    >>> accountant.get_epsilon(1e-5) == epsilon(1.0, 50, 1e-5, n_clients=100,
    ...                                         clients_per_round=10)
    True
    """

    def __init__(self, n_clients: int, *, sampling: str = "fixed", local: bool = False,
                 delta: float = DEFAULT_DELTA, max_epsilon: float | None = None) -> None:
        _positive_int("n_clients", n_clients, "give the federation's client count")
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling must be one of {SAMPLINGS} (got sampling={sampling!r})")
        if not isinstance(local, bool):
            raise ValueError(f"local must be True or False (got local={local!r})")
        method, relation = _MODELS["local" if local else sampling]
        self.n_clients, self.sampling, self.local = n_clients, sampling, local
        self._config = self._make_config(
            _open_unit("delta", delta), method, relation,
            None if max_epsilon is None else _positive_finite("max_epsilon", max_epsilon))
        #: composed releases: (Flower's noise multiplier, sample size, count)
        self._releases: list[tuple[float, int, int]] = []

    def _make_config(self, delta: float, method: str, relation: str,
                     max_epsilon: float | None) -> Any:
        sampling = _flower("SamplingMethod", None)
        neighbours = _flower("NeighboringRelation", None)
        config = _flower("PrivacyConfig", StandInConfig)
        if config is StandInConfig:
            return StandInConfig(delta, self.n_clients, relation, method, max_epsilon)
        return config(target_delta=delta, population_size=self.n_clients,
                      neighboring_relation=neighbours(relation),
                      sampling_method=sampling(method), max_epsilon=max_epsilon)

    # --- the protocol --------------------------------------------------------------------
    @property
    def config(self) -> Any:
        """Flower's ``PrivacyConfig`` of this accounting (a stand-in where Flower lacks it)."""
        return self._config

    @property
    def num_releases(self) -> int:
        """The private releases (rounds) composed so far."""
        return sum(count for _, _, count in self._releases)

    def event(self, noise_multiplier: float, participants: int) -> Any:
        """Flower's ``GaussianPrivacyEvent`` of one round of ``private(..., noise_multiplier)``
        (fedcomp's ``σ``) with ``participants`` clients."""
        event = _flower("GaussianPrivacyEvent", StandInEvent)
        return event(noise_multiplier=flower_multiplier(noise_multiplier, self.sampling),
                     sample_size=participants, population_size=self.n_clients)

    def compose(self, event: Any, count: int = 1) -> None:
        """Add ``count`` releases of ``event`` (a ``GaussianPrivacyEvent``)."""
        self._releases = _merged(self._releases, self._checked(event, count))

    def get_epsilon(self, delta: float) -> float:
        """``ε`` at ``delta`` of the releases so far (:func:`fedcomp.privacy.epsilon`'s)."""
        return self._epsilon(self._releases, _open_unit("delta", delta))[0]

    def get_delta(self, epsilon: float) -> float:
        """``δ`` at ``epsilon`` of every release so far (the same Rényi curve)."""
        if isinstance(epsilon, bool) or not isinstance(epsilon, int | float) or epsilon < 0:
            raise ValueError(f"epsilon must be a number >= 0 (got epsilon={epsilon!r})")
        curve = self._curve(self._releases)
        if curve is None:
            return 0.0
        return float(_dp().rdp.rdp_privacy_accountant.compute_delta(*curve, epsilon)[0])

    def get_privacy_spent(self, delta: float | None = None) -> Any:
        """Flower's ``PrivacySpent``: ``ε`` at ``delta`` (default: the config's ``δ``)."""
        delta = self._config.target_delta if delta is None else _open_unit("delta", delta)
        eps, order = self._epsilon(self._releases, delta)
        spent = _flower("PrivacySpent", StandInSpent)
        return spent(epsilon=eps, delta=delta, num_releases=self.num_releases,
                     accounting_method=ACCOUNTING_METHOD, optimal_order=order)

    def would_exceed(self, event: Any, max_epsilon: float | None = None,
                     count: int = 1) -> bool:
        """Whether ``count`` more releases of ``event`` would spend more than
        ``max_epsilon`` (default: the config's) at the config's ``δ``; nothing is composed."""
        limit = self._config.max_epsilon if max_epsilon is None else max_epsilon
        if limit is None:
            raise ValueError("would_exceed needs a budget: pass max_epsilon=..., or build "
                             "FedcompAccountant(..., max_epsilon=...)")
        limit = _positive_finite("max_epsilon", limit)
        projected = _merged(self._releases, self._checked(event, count))
        return self._epsilon(projected, self._config.target_delta)[0] > limit

    def state_dict(self) -> dict[str, object]:
        """The accounting as JSON-ready values (:meth:`load_state_dict` restores it)."""
        return {"schema_version": STATE_VERSION, "backend": ACCOUNTING_METHOD,
                "config": self._config_values(),
                "releases": [list(release) for release in self._releases]}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Restore :meth:`state_dict`'s accounting, of the same configuration."""
        if not isinstance(state, dict) or state.get("schema_version") != STATE_VERSION \
                or state.get("backend") != ACCOUNTING_METHOD:
            raise ValueError(f"the state is not a FedcompAccountant.state_dict() of schema "
                             f"{STATE_VERSION} (got {str(state)[:120]}); restore a state this "
                             "accountant wrote")
        if state.get("config") != self._config_values():
            raise ValueError(f"the state's configuration {state.get('config')} differs from "
                             f"this accountant's {self._config_values()}; build the "
                             "accountant with the run's n_clients, sampling, local and delta")
        releases = state.get("releases")
        if not isinstance(releases, list):
            raise ValueError(f"the state's 'releases' must be a list (got {releases!r})")
        restored = []
        for k, release in enumerate(releases):
            if not (isinstance(release, list | tuple) and len(release) == 3):
                raise ValueError(f"release {k} of the state is {release!r}, not [noise "
                                 "multiplier, sample size, count]")
            sigma, size, count = release
            restored.append(self._checked(StandInEvent(sigma, size, self.n_clients), count))
        self._releases = restored

    # --- fedcomp's accountant ------------------------------------------------------------
    def _config_values(self) -> dict[str, object]:
        config = self._config
        return {"target_delta": config.target_delta, "population_size": self.n_clients,
                "neighboring_relation": str(getattr(config.neighboring_relation, "value",
                                                    config.neighboring_relation)),
                "sampling_method": str(getattr(config.sampling_method, "value",
                                               config.sampling_method)),
                "max_epsilon": config.max_epsilon}

    def _checked(self, event: Any, count: Any) -> tuple[float, int, int]:
        """``(noise multiplier, sample size, count)`` of a valid event of this federation."""
        count = _positive_int("count", count, "compose one or more releases")
        try:
            sigma, size, population = (event.noise_multiplier, event.sample_size,
                                       event.population_size)
        except AttributeError as exc:
            raise TypeError(f"event must be a GaussianPrivacyEvent (noise_multiplier, "
                            f"sample_size, population_size); got {event!r}") from exc
        if population != self.n_clients:
            raise ValueError(f"the event's population_size={population!r} is not this "
                             f"accountant's n_clients={self.n_clients}; build the event with "
                             "accountant.event(noise_multiplier, participants)")
        _positive_finite("noise_multiplier", sigma)
        _positive_int("sample_size", size, f"the participants of a round, 1..{self.n_clients}")
        if size > self.n_clients:
            raise ValueError(f"sample_size={size} exceeds the {self.n_clients} clients")
        return float(sigma), int(size), count

    def _curve(self, releases: list[tuple[float, int, int]]) -> tuple[Any, Any] | None:
        """The orders and the Rényi curve of ``releases``: each round's curve
        (:func:`fedcomp.privacy.epsilon`'s, cached) times its count, summed."""
        total, orders = None, None
        for sigma, size, count in releases:
            fedcomp_sigma = sigma * 2 if self.sampling == "fixed" else sigma
            orders, curve = _one_round_rdp(fedcomp_sigma, self.n_clients, size,
                                           self.sampling, self.local)
            total = count * curve if total is None else total + count * curve
        return None if total is None else (orders, total)

    def _epsilon(self, releases: list[tuple[float, int, int]], delta: float
                 ) -> tuple[float, float | None]:
        curve = self._curve(releases)
        if curve is None:
            return 0.0, None
        eps, order = _dp().rdp.rdp_privacy_accountant.compute_epsilon(*curve, delta)
        return float(eps), float(order)


def private_noise(algorithm: Any) -> tuple[float, bool] | None:
    """``(σ, local)`` of a :func:`~fedcomp.privacy.private` ``algorithm`` (its last ``dp``
    transform); ``None`` where it adds no noise (not private, or ``σ = 0``)."""
    from ..algorithms import recipe_of

    steps = [step.params for step in recipe_of(algorithm).transforms if step.transform == "dp"]
    if not steps or not steps[-1]["noise_multiplier"]:
        return None
    return float(steps[-1]["noise_multiplier"]), bool(steps[-1]["local"])


__all__ = ["FedcompAccountant", "StandInConfig", "StandInEvent", "StandInSpent",
           "flower_multiplier", "private_noise"]
