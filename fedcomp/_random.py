"""Counter-based randomness.

Every random draw of client ``i`` in round ``r`` is a pure function of
``(seed, stream, round, client_id, counter)``: a SplitMix64 hash evaluated on whole arrays
at once. Results therefore never depend on how clients are grouped into blocks, in which
order they run, or whether they run in the simulator or on a Flower node — the property
the block-size-invariance and simulator/Flower equivalence tests assert.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

#: SplitMix64's constants (as Python ints: each namespace makes its own uint64 of them).
GOLDEN = 0x9E3779B97F4A7C15
MUL1 = 0xBF58476D1CE4E5B9
MUL2 = 0x94D049BB133111EB
_GOLDEN = np.uint64(GOLDEN)

#: Stream identifiers keep independent uses of the same (seed, round, client) apart.
STREAM_MINIBATCH = 1
STREAM_SAMPLING = 2
STREAM_ALGORITHM = 3
#: Draws shared by every client of a round (a common coin), keyed by (seed, round) only.
STREAM_COMMON = 4
#: A run's random starting model (a configuration's ``x0`` table), keyed by its seed.
STREAM_START = 5
#: A compressor's draws (rand-k's coordinates, QSGD's and natural compression's rounding),
#: keyed by (seed, round, client) and a purpose number (which message field is compressed).
STREAM_COMPRESSION = 6
#: Differential privacy's Gaussian noise (:mod:`fedcomp.privacy`): a client's own noise is
#: keyed by (seed, round, client), the server's by (seed, round, :data:`SERVER_ID`).
STREAM_PRIVACY = 7
#: The "client id" of draws the server makes (no client has it: ids are < 2**63).
SERVER_ID = 0xFFFFFFFFFFFFFFFF
#: A pattern shared by the clients of a round (CompressedScaffnew's and TAMUNA's masks,
#: TAMUNA's cohort), keyed by (seed, round) and a purpose number only.
STREAM_PATTERN = 8


def _mix(z: Any, xp: Any = np) -> Any:
    """SplitMix64 finaliser (wrapping uint64 arithmetic, vectorised) on ``xp``'s arrays:
    NumPy's, or jax's inside the compiled engine's trace, whose uint64 wraps alike."""
    u64 = xp.uint64
    with np.errstate(over="ignore"):
        z = (z ^ (z >> u64(30))) * u64(MUL1)
        z = (z ^ (z >> u64(27))) * u64(MUL2)
    return z ^ (z >> u64(31))


def _absorb(key: Any, value: Any, xp: Any = np) -> Any:
    """``key`` with ``value`` (uint64, or a host int >= 0) hashed in."""
    u64 = xp.uint64
    with np.errstate(over="ignore"):
        return _mix(key ^ (xp.asarray(value, dtype=u64) + u64(GOLDEN)), xp)


def client_keys(seed: int, stream: int, round_: Any, client_ids: Any, xp: Any = None) -> Any:
    """One 64-bit key per client, a hash of ``(seed, stream, round, client_id)``.

    ``xp`` (jax's namespace) computes the keys of a traced ``round_`` and ``client_ids``
    (int64) inside ``jax.jit``: the key of ``(seed, stream)`` on the host, the rest in
    wrapping uint64, where int64 -> uint64 wraps as ``& 0xFFFFFFFFFFFFFFFF`` does.
    """
    key = _mix(np.asarray(seed & 0xFFFFFFFFFFFFFFFF, dtype=np.uint64) + _GOLDEN)
    key = _absorb(key, stream)
    if xp is not None:
        u64 = xp.uint64
        key = _absorb(u64(int(key)), xp.asarray(round_, dtype=xp.int64).astype(u64), xp)
        ids = xp.asarray(client_ids).astype(xp.int64).astype(u64)
        return _absorb(xp.full(ids.shape, key, dtype=u64), ids, xp)
    key = _absorb(key, round_ & 0xFFFFFFFFFFFFFFFF)  # round −1 is a warm-up round
    return _absorb(np.full(len(client_ids), key, dtype=np.uint64),
                   np.asarray(client_ids, dtype=np.uint64))


def uniform(keys: Any, counter: Any, size: int, xp: Any = np) -> Any:
    """Uniform [0, 1) floats of shape ``(len(keys), size)``; ``counter`` selects a sub-stream
    (``xp``: the keys' namespace; on jax's, ``counter`` may be a traced integer >= 0)."""
    u64 = xp.uint64
    base = _absorb(keys, counter, xp)[:, None]
    with np.errstate(over="ignore"):
        z = _mix(base + (xp.arange(1, size + 1, dtype=u64) * u64(GOLDEN))[None, :], xp)
    return (z >> u64(11)).astype(xp.float64) * (1.0 / 9007199254740992.0)


def normal(keys: np.ndarray, counter: int, size: int) -> np.ndarray:
    """Standard normal floats of shape ``(len(keys), size)`` (Box-Muller on two sub-streams).

    ``counter`` and ``counter + 1`` select the two uniform sub-streams, so a caller that
    draws normals more than once per key steps ``counter`` by 2. ``1 − u`` lies in
    ``(0, 1]``: the logarithm is finite.
    """
    radius = np.sqrt(-2.0 * np.log1p(-uniform(keys, counter, size)))
    return radius * np.cos(2.0 * np.pi * uniform(keys, counter + 1, size))


def minibatch_indices(
    seed: int, round_: Any, client_ids: Any, counts: Any, draw: Any, batch_size: int,
    replace: bool = True, *, xp: Any = None, max_samples: int | None = None
) -> Any:
    """Indices ``(B, batch_size)`` drawn uniformly from each client's data.

    ``draw`` is the number of the gradient call within the round (0, 1, ...), so the k-th
    minibatch of client i in round r is the same whatever else runs beside it.

    With ``replace`` (the default) every index is an independent uniform draw. Without it a
    minibatch holds ``batch_size`` distinct samples, a uniformly random subset (MATLAB's
    ``datasample(..., 'Replace', false)``, which Bao et al.'s code uses): the client's
    samples sorted by one uniform key each, the first ``batch_size`` taken. Sample j's key
    is the j-th value of the client's ``(seed, round, client, draw)`` stream, whatever the
    block's largest count, so the draw stays a function of the client alone.

    ``xp`` (jax's namespace) draws the same indices inside ``jax.jit``, from a traced
    ``round_``, ``client_ids``, ``counts`` and ``draw`` (rolled local steps);
    ``max_samples`` (a Python int, at least every count) then sizes the keys drawn without
    replacement, as the host's largest count cannot be read.
    """
    traced = xp is not None
    xp = np if xp is None else xp
    counts = xp.asarray(counts)
    keys = client_keys(seed, STREAM_MINIBATCH, round_, client_ids, xp if traced else None)
    if replace:
        u = uniform(keys, draw, batch_size, xp)
        idx = xp.floor(u * counts[:, None].astype(xp.float64)).astype(xp.int64)
        return xp.minimum(idx, counts[:, None] - 1)
    if not traced and counts.size and int(counts.min()) < batch_size:
        short = int(np.asarray(client_ids)[int(np.argmin(counts))])
        raise ValueError(f"minibatches without replacement need batch_size <= every client's "
                         f"sample count: client {short} has {int(counts.min())} samples, "
                         f"batch_size={batch_size}; lower batch_size or draw with replacement")
    size = int(counts.max(initial=0)) if max_samples is None else max_samples
    u = uniform(keys, draw, size, xp)
    # not this client's samples: sorted last
    u = xp.where(xp.arange(size)[None, :] >= counts[:, None], xp.inf, u)
    return xp.argsort(u, axis=1, stable=True)[:, :batch_size].astype(xp.int64)


def sample_clients(seed: int, round_: int, n_clients: int, clients_per_round: int | None
                   ) -> np.ndarray:
    """Sorted participants of a round, uniform without replacement (all when ``None``)."""
    if clients_per_round is None or clients_per_round >= n_clients:
        return _every_client(n_clients)
    rng = np.random.default_rng([seed, STREAM_SAMPLING, round_])
    return np.sort(rng.choice(n_clients, size=clients_per_round, replace=False))


@functools.lru_cache(maxsize=2)
def _every_client(n_clients: int) -> np.ndarray:
    """``0 .. n_clients - 1``, read-only, made once: every round's participants under full
    participation (made anew, 0.8 GB and 0.2 s a round at 10^8 clients)."""
    ids = np.arange(n_clients)
    ids.flags.writeable = False
    return ids


def common_uniform(seed: int, round_: int, size: int, counter: int = 0) -> np.ndarray:
    """Uniform [0, 1) floats of shape ``(size,)`` shared by all clients of a round.

    Keyed by ``(seed, round, counter)`` only, so every client (and the server) draws the
    same values whatever block it runs in: the common coin of ProxSkip/Scaffnew.
    """
    keys = client_keys(seed, STREAM_COMMON, round_, np.zeros(1, dtype=np.uint64))
    return uniform(keys, counter, size)[0]


def generator(seed: int, *counters: int) -> np.random.Generator:
    """A NumPy generator for host-side draws keyed by ``(seed, *counters)``."""
    return np.random.default_rng([seed, *counters])
