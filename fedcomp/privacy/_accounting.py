"""Privacy accounting of client-level DP with Google's ``dp-accounting`` library.

One round of :func:`~fedcomp.privacy.private` is a sampled Gaussian mechanism on the sum
of the participants' clipped uploads; ``R`` rounds compose. The accountant (Rényi DP,
``dp_accounting.rdp.RdpAccountant``; or privacy-loss distributions, ``dp_accounting.pld``)
turns the composition into ``ε`` for a given ``δ``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from collections.abc import Iterator
from typing import Any

from .._extras import require

#: How clients are sampled, for the accountant (see :func:`dp_event`).
SAMPLINGS = ("fixed", "poisson")
#: The accountants: Rényi DP (the default) and privacy-loss distributions.
ACCOUNTANTS = ("rdp", "pld")

_FEATURE = "fedcomp.privacy"


def _dp() -> Any:
    return require("dp_accounting", _FEATURE)


def _check(noise_multiplier: Any, rounds: Any, n_clients: Any, clients_per_round: Any,
           sampling: Any) -> None:
    if not (isinstance(noise_multiplier, int | float) and noise_multiplier >= 0):
        raise ValueError(f"noise_multiplier must be a number >= 0 (got {noise_multiplier!r})")
    if not (isinstance(rounds, int) and rounds >= 0):
        raise ValueError(f"rounds must be an integer >= 0 (got {rounds!r})")
    if not (isinstance(n_clients, int) and n_clients >= 1):
        raise ValueError(f"n_clients must be an integer >= 1 (got {n_clients!r})")
    if clients_per_round is not None and not (isinstance(clients_per_round, int)
                                              and 1 <= clients_per_round <= n_clients):
        raise ValueError(f"clients_per_round must be an integer in 1..{n_clients} or None "
                         f"(got {clients_per_round!r})")
    if sampling not in SAMPLINGS:
        raise ValueError(f"sampling must be one of {SAMPLINGS} (got {sampling!r})")


def neighboring_relation(sampling: str) -> Any:
    """``REPLACE_ONE`` for fixed-size sampling, ``ADD_OR_REMOVE_ONE`` for Poisson sampling."""
    rel = _dp().NeighboringRelation
    return rel.REPLACE_ONE if sampling == "fixed" else rel.ADD_OR_REMOVE_ONE


def dp_event(noise_multiplier: float, rounds: int, *, n_clients: int,
             clients_per_round: int | None = None, sampling: str = "fixed",
             local: bool = False) -> Any:
    """The ``dp_accounting`` event of ``rounds`` rounds of :func:`~fedcomp.privacy.private`.

    Parameters
    ----------
    noise_multiplier : float
        ``σ``: noise standard deviation ``σC`` on the sum of uploads clipped to ``C``.
    rounds : int
    n_clients : int
    clients_per_round : int, optional
        ``m``; ``None`` (every client every round) is ``m = n``.
    sampling : {"fixed", "poisson"}, default "fixed"
        ``"fixed"``: ``m`` clients drawn uniformly without replacement, as the simulator
        does; neighbouring data sets differ in one client's data *replaced* (``n`` is
        public), so the sum's sensitivity is ``2C`` and the event is
        ``SampledWithoutReplacementDpEvent(n, m, Gaussian(σ/2))`` (Wang, Balle,
        Kasiviswanathan, AISTATS 2019). ``"poisson"``: each client takes part with
        probability ``q = m/n``, one client *added or removed*, sensitivity ``C``:
        ``PoissonSampledDpEvent(q, Gaussian(σ))`` (McMahan et al. 2018's accounting; for
        the simulator's fixed-size draws an approximation, the usual one).
    local : bool, default False
        Local noise (every client adds ``N(0, σ²C²)``): the server sees who took part, so
        no amplification by sampling is counted: the client's own Gaussian mechanism,
        composed over every round (the most a client can take part in).

    Returns
    -------
    dp_accounting.DpEvent
    """
    _check(noise_multiplier, rounds, n_clients, clients_per_round, sampling)
    dp = _dp()
    # sensitivity 2C when a client's data are replaced, C when added or removed
    sigma = noise_multiplier / 2 if sampling == "fixed" else noise_multiplier
    gaussian = dp.GaussianDpEvent(sigma)
    m = n_clients if clients_per_round is None else clients_per_round
    if local or m == n_clients:
        one = gaussian
    elif sampling == "fixed":
        one = dp.SampledWithoutReplacementDpEvent(n_clients, m, gaussian)
    else:
        one = dp.PoissonSampledDpEvent(m / n_clients, gaussian)
    return dp.SelfComposedDpEvent(one, rounds)


def epsilon(noise_multiplier: float, rounds: int, delta: float, *, n_clients: int,
            clients_per_round: int | None = None, sampling: str = "fixed",
            local: bool = False, accountant: str = "rdp") -> float:
    """``ε`` of ``rounds`` rounds of :func:`~fedcomp.privacy.private` at ``δ``.

    Parameters
    ----------
    noise_multiplier, rounds, n_clients, clients_per_round, sampling, local
        As in :func:`dp_event`.
    delta : float
        In ``(0, 1)``.
    accountant : {"rdp", "pld"}, default "rdp"
        ``"rdp"``: ``dp_accounting.rdp.RdpAccountant`` (Mironov 2017; the library's
        default orders), an upper bound. ``"pld"``: ``dp_accounting.pld.PLDAccountant``
        (privacy-loss distributions, tight up to its discretisation; Poisson and
        unsampled events only).

    Returns
    -------
    float
        ``inf`` for ``σ = 0`` after a round; ``0`` before any round.

    Examples
    --------
    >>> eps = epsilon(1.0, 100, 1e-5, n_clients=100, clients_per_round=10, sampling="poisson")
    >>> 0 < eps < epsilon(1.0, 200, 1e-5, n_clients=100, clients_per_round=10,
    ...                   sampling="poisson")
    True
    """
    if not (isinstance(delta, int | float) and 0 < delta < 1):
        raise ValueError(f"delta must be in (0, 1) (got delta={delta!r})")
    if accountant not in ACCOUNTANTS:
        raise ValueError(f"accountant must be one of {ACCOUNTANTS} (got {accountant!r})")
    _check(noise_multiplier, rounds, n_clients, clients_per_round, sampling)
    return _epsilon(float(noise_multiplier), rounds, float(delta), n_clients,
                    clients_per_round, sampling, bool(local), accountant)


def _epsilon(noise_multiplier: float, rounds: int, delta: float, n_clients: int,
             clients_per_round: int | None, sampling: str, local: bool,
             accountant: str) -> float:
    if rounds == 0:
        return 0.0
    if noise_multiplier == 0:
        return math.inf
    dp = _dp()
    if accountant == "rdp":
        # RDP composes by addition: one round's RDP curve (the costly part, cached) times
        # the rounds, then the library's conversion to ε(δ) — one per evaluated round
        orders, curve = _one_round_rdp(noise_multiplier, n_clients, clients_per_round,
                                       sampling, local)
        eps, _ = dp.rdp.rdp_privacy_accountant.compute_epsilon(orders, rounds * curve, delta)
        return float(eps)
    event = dp_event(noise_multiplier, rounds, n_clients=n_clients,
                     clients_per_round=clients_per_round, sampling=sampling, local=local)
    # the PLD's REPLACE_ONE moves a Gaussian by two sensitivities (remove, then add), where
    # dp_event's σ/2 has counted the replaced client's 2C already: the unsampled Gaussian
    # at σ/2 and unit shift is the add-or-remove one (REPLACE_ONE gave 33 for 13 at σ=0.8)
    m = n_clients if clients_per_round is None else clients_per_round
    unsampled = local or m == n_clients
    acc = dp.pld.PLDAccountant(neighboring_relation=neighboring_relation(
        "poisson" if unsampled else sampling))
    if not acc.supports(event):
        raise ValueError(f"the 'pld' accountant does not support {sampling!r} sampling here; "
                         "use accountant='rdp'")
    with _quiet():
        acc.compose(event)
        return float(acc.get_epsilon(delta))


@functools.lru_cache(maxsize=256)
def _one_round_rdp(noise_multiplier: float, n_clients: int, clients_per_round: int | None,
                   sampling: str, local: bool) -> tuple[Any, Any]:
    """The orders and RDP curve of one round (``dp_accounting.rdp.RdpAccountant``)."""
    dp = _dp()
    acc = dp.rdp.RdpAccountant(neighboring_relation=neighboring_relation(sampling))
    with _quiet():
        acc.compose(dp_event(noise_multiplier, 1, n_clients=n_clients,
                             clients_per_round=clients_per_round, sampling=sampling,
                             local=local))
    return acc.orders, acc.rdp


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    """Silence the library's absl warnings (fractional orders it leaves out of the
    minimum over orders: ε stays a valid bound, the lines would only flood stderr)."""
    log = logging.getLogger("absl")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


#: Relative tolerance of :func:`calibrate_noise`: ``ε(σ)`` lies in
#: ``[(1 − CALIBRATION_RTOL) ε_target, ε_target]``.
CALIBRATION_RTOL = 1e-3


def calibrate_noise(target_epsilon: float, delta: float, rounds: int, *, n_clients: int,
                    clients_per_round: int | None = None, sampling: str = "fixed",
                    local: bool = False, accountant: str = "rdp",
                    rtol: float = CALIBRATION_RTOL) -> float:
    """The noise multiplier ``σ`` whose ``rounds`` rounds spend ``target_epsilon`` at ``delta``.

    Bisection on ``log σ`` over the accountant's ``ε(σ)`` (decreasing in ``σ``): the
    bracket ``[σ_lo, σ_hi]`` keeps ``ε(σ_lo) > target ≥ ε(σ_hi)`` and shrinks until
    ``ε(σ_hi) ≥ (1 − rtol)·target``; ``σ_hi`` is returned, so the run never spends more
    than the target.

    Parameters
    ----------
    target_epsilon : float
        ``> 0``.
    delta, rounds, n_clients, clients_per_round, sampling, local, accountant
        As in :func:`epsilon`.
    rtol : float, default 1e-3
        The tolerance above.

    Returns
    -------
    float

    Raises
    ------
    ValueError
        For ``target_epsilon <= 0`` or ``rounds < 1``, and when no ``σ ≤ 1e6`` reaches it.

    Examples
    --------
    >>> sigma = calibrate_noise(3.0, 1e-5, 50, n_clients=100, clients_per_round=10)
    >>> eps = epsilon(sigma, 50, 1e-5, n_clients=100, clients_per_round=10)
    >>> 3.0 * (1 - 1e-3) <= eps <= 3.0
    True
    """
    if not (isinstance(target_epsilon, int | float) and 0 < target_epsilon < math.inf):
        raise ValueError(f"target_epsilon must be a finite number > 0 (got {target_epsilon!r})")
    if not (isinstance(rounds, int) and rounds >= 1):
        raise ValueError(f"target_epsilon needs the planned rounds >= 1 (got {rounds!r})")

    def eps(sigma: float) -> float:
        return epsilon(sigma, rounds, delta, n_clients=n_clients,
                       clients_per_round=clients_per_round, sampling=sampling, local=local,
                       accountant=accountant)

    lo, hi = 1e-2, 1.0
    while eps(lo) <= target_epsilon:  # lo must be too little noise
        lo /= 10
        if lo < 1e-8:
            return lo  # ε stays below the target with almost no noise (tiny q, few rounds)
    while eps(hi) > target_epsilon:
        lo, hi = hi, hi * 4
        if hi > 1e6:
            raise ValueError(f"no noise_multiplier <= 1e6 reaches epsilon={target_epsilon} at "
                             f"delta={delta} over {rounds} rounds; raise target_epsilon or delta")
    for _ in range(200):  # ε is continuous in σ: the bracket closes on the target
        if eps(hi) >= (1 - rtol) * target_epsilon:
            break
        mid = math.sqrt(lo * hi)
        if eps(mid) > target_epsilon:
            lo = mid
        else:
            hi = mid
    return hi
