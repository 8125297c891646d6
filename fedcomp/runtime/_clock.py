"""Simulated compute times: the event clock of asynchronous (and timed synchronous) runs.

Each client has a compute-time distribution — a mean ``mean_i`` (heterogeneous clients have
different means) and a shape — and the time of its j-th local update is a counter-based draw
keyed by ``(seed, job j, client i)`` (:mod:`fedcomp._random`), so the clock, and hence the
order in which a server sees arrivals, is reproducible from the seed alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._random import client_keys, uniform

#: Stream identifier of compute-time draws (apart from minibatches, sampling, algorithms).
STREAM_CLOCK = 4

DISTRIBUTIONS = ("exponential", "uniform", "constant")


@dataclass(frozen=True)
class ComputeTimes:
    """Per-client compute-time distributions.

    Parameters
    ----------
    mean : float or sequence of float, default 1.0
        Mean compute time of one local update, one value for all clients or one per client.
    distribution : {"exponential", "uniform", "constant"}, default "exponential"
        ``mean_i · Exp(1)``, ``mean_i · U(1 − spread, 1 + spread)`` or exactly ``mean_i``.
    spread : float, default 0.5
        Half-width of the uniform distribution relative to the mean (``0 <= spread <= 1``).
    slow_fraction, slowdown : float, default 0.0 and 1.0
        Convenience for heterogeneous systems: the last ``⌈slow_fraction · n⌉`` clients get
        their mean multiplied by ``slowdown`` (stragglers).

    Examples
    --------
    >>> clock = ComputeTimes(mean=[1.0, 2.0], distribution="constant")
    >>> clock.draw(seed=0, job=3, client_ids=np.array([0, 1]), n_clients=2).tolist()
    [1.0, 2.0]
    """

    mean: Any = 1.0
    distribution: str = "exponential"
    spread: float = 0.5
    slow_fraction: float = 0.0
    slowdown: float = 1.0

    def __post_init__(self) -> None:
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"compute_times: distribution must be one of {DISTRIBUTIONS} "
                             f"(got {self.distribution!r})")
        mean = np.asarray(self.mean, dtype=np.float64)
        if mean.ndim > 1 or (mean < 0).any() or not np.isfinite(mean).all():
            raise ValueError(f"compute_times: mean must be a nonnegative number or one per "
                             f"client (got {self.mean!r})")
        if not 0 <= self.spread <= 1:
            raise ValueError(f"compute_times: spread must be in [0, 1] (got {self.spread!r})")
        if not (0 <= self.slow_fraction <= 1 and self.slowdown > 0):
            raise ValueError(f"compute_times: slow_fraction must be in [0, 1] and slowdown > 0 "
                             f"(got {self.slow_fraction!r}, {self.slowdown!r})")

    @classmethod
    def build(cls, spec: Any, n_clients: int) -> ComputeTimes:
        """A :class:`ComputeTimes` from itself, a dict of its parameters or a mean."""
        if isinstance(spec, ComputeTimes):
            clock = spec
        elif isinstance(spec, dict):
            clock = cls(**spec)
        else:
            clock = cls(mean=spec)
        clock.means(n_clients)  # checks the length
        return clock

    def means(self, n_clients: int) -> np.ndarray:
        """The mean compute time of every client, shape ``(n_clients,)``."""
        mean = np.asarray(self.mean, dtype=np.float64)
        if mean.ndim == 1 and mean.shape != (n_clients,):
            raise ValueError(f"compute_times: mean has {mean.shape[0]} entries but there are "
                             f"{n_clients} clients")
        out = np.broadcast_to(mean, (n_clients,)).copy()
        n_slow = int(np.ceil(self.slow_fraction * n_clients))
        if n_slow:
            out[n_clients - n_slow:] *= self.slowdown
        return out

    def draw(self, seed: int, job: int, client_ids: np.ndarray, n_clients: int) -> np.ndarray:
        """Compute times of job ``job`` (a round, or the client's update count) per client."""
        client_ids = np.asarray(client_ids, dtype=np.int64)
        mean = self.means(n_clients)[client_ids]
        if self.distribution == "constant":
            return mean
        u = uniform(client_keys(seed, STREAM_CLOCK, job, client_ids), 0, 1)[:, 0]
        if self.distribution == "uniform":
            return mean * (1.0 - self.spread + 2.0 * self.spread * u)
        return mean * -np.log1p(-u)  # Exp(1) by inversion; u < 1 so finite
