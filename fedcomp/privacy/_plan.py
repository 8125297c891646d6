"""A configuration's privacy table, checked: ``privacy = {clip = 1.0, noise_multiplier = 1.1}``.

The ``[[algorithms]]`` key of the experiment pipeline; kept here, in the core, so that the
table's meaning lives beside the wrapper and the accountant it drives.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

from ..algorithms._private import PRIVATE_UPLOADS, REFUSED, private
from ._accounting import ACCOUNTANTS, SAMPLINGS, calibrate_noise, epsilon

#: The keys of a privacy table.
PRIVACY_KEYS = ("clip", "noise_multiplier", "target_epsilon", "delta", "local", "sampling",
                "accountant")
#: ``δ`` when the table gives none.
DEFAULT_DELTA = 1e-5


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(
        value)


class PrivacyPlan(NamedTuple):
    """A checked privacy table (:func:`privacy_plan`).

    Attributes
    ----------
    clip : float
        ``C`` (``inf``: no clipping, only with ``noise_multiplier = 0``).
    noise_multiplier : float or None
        ``σ``, or ``None`` when ``target_epsilon`` sets it (:meth:`noise`).
    target_epsilon : float or None
    delta : float
    local : bool
    sampling : str
        ``"fixed"`` or ``"poisson"`` (:func:`~fedcomp.privacy.dp_event`).
    accountant : str
        ``"rdp"`` or ``"pld"``.
    """

    clip: float
    noise_multiplier: float | None
    target_epsilon: float | None
    delta: float
    local: bool
    sampling: str
    accountant: str

    def noise(self, rounds: int, n_clients: int, clients_per_round: int | None) -> float:
        """``σ``: the table's, or the one whose ``rounds`` spend ``target_epsilon``."""
        if self.noise_multiplier is not None:
            return self.noise_multiplier
        assert self.target_epsilon is not None
        return calibrate_noise(self.target_epsilon, self.delta, rounds, n_clients=n_clients,
                               clients_per_round=clients_per_round, sampling=self.sampling,
                               local=self.local, accountant=self.accountant)

    def epsilon(self, noise_multiplier: float, rounds: int, n_clients: int,
                clients_per_round: int | None) -> float:
        """``ε(δ)`` after ``rounds`` rounds at ``noise_multiplier``."""
        if math.isinf(self.clip):
            return 0.0 if rounds == 0 else math.inf
        return epsilon(noise_multiplier, rounds, self.delta, n_clients=n_clients,
                       clients_per_round=clients_per_round, sampling=self.sampling,
                       local=self.local, accountant=self.accountant)

    def wrap(self, algorithm: Any, noise_multiplier: float) -> Any:
        """``algorithm`` made private with this table's clip and ``noise_multiplier``."""
        return private(algorithm, self.clip, noise_multiplier, self.local)


def privacy_plan(table: Any, algorithm: str, where: str = "privacy") -> PrivacyPlan:
    """Check an ``[[algorithms]]`` entry's privacy table; a ``ValueError`` names the fix.

    Parameters
    ----------
    table : dict
        ``clip`` (required, > 0 or inf), exactly one of ``noise_multiplier`` (>= 0) and
        ``target_epsilon`` (> 0), ``delta`` (in (0, 1), default 1e-5), ``local`` (bool,
        default false), ``sampling`` ("fixed" or "poisson", default "fixed"),
        ``accountant`` ("rdp" or "pld", default "rdp").
    algorithm : str
        The registered algorithm it applies to (refused where privacy is not meaningful).
    where : str
        The table's place, for the messages.

    Examples
    --------
    >>> privacy_plan({"clip": 1.0, "target_epsilon": 3.0}, "fedavg").delta
    1e-05
    >>> privacy_plan({"clip": 1.0}, "fedavg")
    Traceback (most recent call last):
    ...
    ValueError: privacy: give noise_multiplier (sigma >= 0) or target_epsilon (> 0), not both \
or neither (got neither)
    """
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table, e.g. {{clip = 1.0, noise_multiplier = 1.1, "
                         f"delta = 1e-5}} (got {table!r})")
    unknown = sorted(set(table) - set(PRIVACY_KEYS))
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; valid: {list(PRIVACY_KEYS)}")
    if algorithm in REFUSED:
        raise ValueError(f"{where}: {algorithm} cannot be made private: {REFUSED[algorithm]}")
    if algorithm not in PRIVATE_UPLOADS:
        raise ValueError(f"{where}: {algorithm} has no declared private upload; privacy applies "
                         f"to {sorted(PRIVATE_UPLOADS)}")
    clip: Any = table.get("clip")
    if not (_number(clip) and clip > 0):
        raise ValueError(f"{where}.clip must be a number > 0, the L2 bound of one client's "
                         f"upload (got {clip!r}); inf turns clipping off")
    given = [k for k in ("noise_multiplier", "target_epsilon") if k in table]
    if len(given) != 1:
        raise ValueError(f"{where}: give noise_multiplier (sigma >= 0) or target_epsilon (> 0), "
                         f"not both or neither (got {' and '.join(given) or 'neither'})")
    sigma, target = table.get("noise_multiplier"), table.get("target_epsilon")
    if sigma is not None and not (_number(sigma) and 0 <= sigma < math.inf):
        raise ValueError(f"{where}.noise_multiplier must be a finite number >= 0 (got {sigma!r})")
    if target is not None and not (_number(target) and 0 < target < math.inf):
        raise ValueError(f"{where}.target_epsilon must be a finite number > 0 (got {target!r})")
    if math.isinf(clip) and (target is not None or sigma):
        raise ValueError(f"{where}: clip = inf bounds no client's influence: noise cannot make "
                         "it private; give a finite clip (or noise_multiplier = 0 for the "
                         "non-private run)")
    delta = table.get("delta", DEFAULT_DELTA)
    if not (_number(delta) and 0 < delta < 1):
        raise ValueError(f"{where}.delta must be in (0, 1), e.g. 1e-5 (got {delta!r})")
    local = table.get("local", False)
    if not isinstance(local, bool):
        raise ValueError(f"{where}.local must be true or false (got {local!r})")
    sampling = table.get("sampling", "fixed")
    if sampling not in SAMPLINGS:
        raise ValueError(f"{where}.sampling must be one of {list(SAMPLINGS)} (got {sampling!r})")
    accountant = table.get("accountant", "rdp")
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"{where}.accountant must be one of {list(ACCOUNTANTS)} "
                         f"(got {accountant!r})")
    if accountant == "pld" and sampling == "fixed" and not local:
        raise ValueError(f"{where}: the pld accountant has no fixed-size (without replacement) "
                         "sampling; use accountant = 'rdp' or sampling = 'poisson'")
    return PrivacyPlan(float(clip), None if sigma is None else float(sigma),
                       None if target is None else float(target), float(delta), local,
                       sampling, accountant)
