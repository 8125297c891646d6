"""Compressors: unbiasedness (statistical, with bounds from the exact variance), exact bit
counts, counter-based draws independent of the block, EF21 error feedback."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedcomp.compressors import (
    COMPRESSORS,
    QSGD,
    Identity,
    Natural,
    PermS,
    RandK,
    TopK,
    ef21_step,
    make_compressor,
)

#: One instance or more of every registered compressor.
EXAMPLES = [Identity(), RandK(k=3), RandK(fraction=0.5), TopK(k=3), TopK(fraction=0.25),
            Natural(), QSGD(levels=1), QSGD(levels=4), PermS(s=2, n=32)]

X = np.array([0.3, -1.7, 2.5, 0.0, -0.05, 4.0, 1.1, -3.3])  # no structure in the magnitudes


def test_every_registered_compressor_has_an_example() -> None:
    assert {c.name for c in EXAMPLES} == set(COMPRESSORS)


def _exact_variance(compressor: object, x: np.ndarray) -> np.ndarray:
    """Per-entry variance of C(x)_j, from the definition of each compressor."""
    d = x.size
    if isinstance(compressor, RandK):
        k = compressor.k_of(d)
        return x ** 2 * (d / k - 1)  # (d/k)x_j w.p. k/d, else 0
    if isinstance(compressor, Natural):  # rounding between the powers a <= |t| < 2a
        low = np.where(x == 0, 0.0, 2.0 ** np.floor(np.log2(np.where(x == 0, 1, np.abs(x)))))
        return (np.abs(x) - low) * (2 * low - np.abs(x))
    if isinstance(compressor, QSGD):  # rounding between neighbouring levels ‖x‖ l / s
        step = np.linalg.norm(x) / compressor.levels
        frac = np.abs(x) / step - np.floor(np.abs(x) / step)
        return step ** 2 * frac * (1 - frac)
    raise AssertionError(compressor)


def _mean_within_bound(decoded: np.ndarray, x: np.ndarray, variance: np.ndarray) -> bool:
    """The sample mean of N draws lies within 5 standard errors of x in every entry."""
    n = decoded.shape[0]
    return bool(np.all(np.abs(decoded.mean(axis=0) - x) <= 5 * np.sqrt(variance / n) + 1e-12))


@pytest.mark.parametrize("compressor", [c for c in EXAMPLES if c.unbiased and c.random
                                        and not isinstance(c, PermS)],  # per round: test_condat
                         ids=repr)
def test_unbiased_compressors_are_unbiased(compressor: object) -> None:
    """E[C(x)] = x: the mean of 20000 independent (client-keyed) draws within 5 standard
    errors of the exact per-entry variance; a 5% bias (scaled rand-k by 0.95) fails it."""
    n = 20_000
    block = np.broadcast_to(X, (n, X.size)).copy()
    decoded, _ = compressor.compress(block, seed=3, round_=7, client_ids=np.arange(n))
    variance = _exact_variance(compressor, X)
    assert _mean_within_bound(decoded, X, variance)
    assert not _mean_within_bound(0.95 * decoded, X, variance)  # the bound has teeth


def test_biased_top_k_is_biased_and_contractive() -> None:
    decoded, _ = TopK(k=3).compress(X[None, :], 0, 0, [0])
    assert decoded[0].tolist() == [0, 0, 2.5, 0, 0, 4.0, 0, -3.3]
    assert np.sum((decoded[0] - X) ** 2) <= (1 - 3 / X.size) * np.sum(X ** 2)


@pytest.mark.parametrize("compressor", EXAMPLES, ids=repr)
def test_block_size_does_not_change_the_draws(compressor: object) -> None:
    """Five clients at once or one by one: the same decoded rows and bits, bit for bit."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(5, 3, 4))  # a matrix model: rows are flattened
    ids = np.array([4, 11, 2, 7, 30])
    together, bits = compressor.compress(x, 5, 9, ids, purpose=1)
    for i in range(5):
        alone, bit = compressor.compress(x[i:i + 1], 5, 9, ids[i:i + 1], purpose=1)
        assert np.array_equal(alone[0], together[i]) and bit[0] == bits[i]
    assert together.shape == x.shape and together.dtype == x.dtype


@pytest.mark.parametrize("compressor", [c for c in EXAMPLES if c.random], ids=repr)
def test_draws_are_keyed_by_seed_round_client_and_purpose(compressor: object) -> None:
    x = np.broadcast_to(np.random.default_rng(5).normal(size=40), (2, 40))
    base, _ = compressor.compress(x, 1, 2, [0, 0], purpose=0)
    assert np.array_equal(base[0], base[1])  # same client, same keys
    for args in [(2, 2, [0, 0], 0), (1, 3, [0, 0], 0), (1, 2, [1, 1], 0), (1, 2, [0, 0], 1)]:
        other, _ = compressor.compress(x, *args[:3], purpose=args[3])
        assert not np.array_equal(other[0], base[0])


@pytest.mark.parametrize(("compressor", "dtype", "bits"), [
    (Identity(), np.float64, 10 * 64),
    (Identity(), np.float32, 10 * 32),
    (RandK(k=3), np.float64, 3 * 64),               # values only: indices from the seed
    (RandK(fraction=0.25), np.float32, 3 * 32),     # k = ceil(2.5) = 3
    (TopK(k=3), np.float64, 3 * (64 + 4)),          # ceil(log2 10) = 4 index bits
    (Natural(), np.float32, 10 * 9),                # sign + 8-bit exponent
    (Natural(), np.float64, 10 * 12),               # sign + 11-bit exponent
    (QSGD(levels=1), np.float64, 64 + 10 * 2),      # norm + sign + 1 level bit
    (QSGD(levels=4), np.float32, 32 + 10 * 4),      # levels 0..4: 3 bits
    (QSGD(levels=3), np.float64, 64 + 10 * 3),      # levels 0..3: 2 bits
])
def test_encoded_sizes(compressor: object, dtype: type, bits: int) -> None:
    x = np.random.default_rng(1).normal(size=(2, 10)).astype(dtype)
    decoded, got = compressor.compress(x, 0, 0, [0, 1])
    assert got.tolist() == [bits, bits] and decoded.dtype == dtype


def test_decoded_values_are_what_the_encoding_can_carry() -> None:
    rng = np.random.default_rng(2)
    x = rng.normal(size=(50, 10)) * 10.0 ** rng.integers(-3, 3, size=(50, 1))
    ids = np.arange(50)
    rand, _ = RandK(k=3).compress(x, 0, 0, ids)
    assert np.all((rand != 0).sum(axis=1) == 3)
    assert np.allclose(rand[rand != 0], (x * 10 / 3)[rand != 0], rtol=1e-15, atol=0)
    nat, _ = Natural().compress(x, 0, 0, ids)
    mantissa, _ = np.frexp(nat)
    assert np.all(np.abs(mantissa) == 0.5) and np.all(np.sign(nat) == np.sign(x))
    assert np.all((np.abs(x) / 2 <= np.abs(nat)) & (np.abs(nat) <= 2 * np.abs(x)))
    q, _ = QSGD(levels=4).compress(x, 0, 0, ids)
    levels = np.abs(q) / np.linalg.norm(x, axis=1, keepdims=True) * 4
    assert np.allclose(levels, np.round(levels), atol=1e-12) and levels.max() <= 4 + 1e-12
    assert np.all(np.abs(levels - 4 * np.abs(x) / np.linalg.norm(x, axis=1, keepdims=True))
                  < 1 + 1e-12)  # a neighbouring level


def test_natural_keeps_powers_of_two_and_rounds_subnormals_to_the_smallest_normal() -> None:
    tiny = np.finfo(np.float64).tiny
    x = np.array([[0.25, -8.0, 0.0, 1.0]])
    assert np.array_equal(Natural().compress(x, 0, 0, [0])[0], x)
    sub = np.full((4000, 1), tiny / 4)
    out, _ = Natural().compress(sub, 0, 0, np.arange(4000))
    assert set(out.ravel().tolist()) == {0.0, tiny}
    assert abs(np.mean(out == tiny) - 0.25) < 5 * math.sqrt(0.25 * 0.75 / 4000)


def test_identity_returns_the_block_itself() -> None:
    x = np.ones((3, 4))
    assert Identity().compress(x, 0, 0, [0, 1, 2])[0] is x
    assert np.array_equal(RandK(k=4).compress(x, 0, 0, [0, 1, 2])[0], x)  # rand-d: identity


@pytest.mark.parametrize(("name", "params", "message"), [
    ("top_k", {}, "exactly one of k"),
    ("rand_k", {"k": 2, "fraction": 0.5}, "exactly one of k"),
    ("rand_k", {"k": 0}, "k must be an integer >= 1"),
    ("top_k", {"fraction": 1.5}, r"fraction must be a number in \(0, 1\]"),
    ("qsgd", {"levels": 0}, "levels must be an integer >= 1"),
    ("qsgd", {"levels": 2.5}, "levels must be an integer >= 1"),
    ("natural", {"k": 2}, "accepted"),
    ("top_q", {}, "top_k"),
])
def test_bad_parameters_name_the_fix(name: str, params: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        make_compressor(name, **params)


def test_k_larger_than_the_row_is_refused() -> None:
    with pytest.raises(ValueError, match=r"k=5 exceeds .* \(d=4\); lower k"):
        TopK(k=5).compress(np.ones((1, 4)), 0, 0, [0])


def test_ef21_with_the_identity_sends_exactly_the_difference() -> None:
    rng = np.random.default_rng(3)
    g = np.zeros((2, 6))
    for r in range(5):
        x = rng.normal(size=(2, 6))
        c, g_new, bits = ef21_step(Identity(), x, g, 0, r, [0, 1])
        assert np.array_equal(c, x - g) and bits.tolist() == [6 * 64] * 2
        if r == 0:
            assert np.array_equal(g_new, x)  # from g = 0: the vector itself
        np.testing.assert_allclose(g_new, x, rtol=0, atol=4 * np.finfo(float).eps * 8)
        g = g_new


def test_ef21_with_top_k_converges_to_a_repeated_vector() -> None:
    """A fixed vector sent repeatedly: EF21's error ‖x − g‖ never grows and is exactly 0
    after ⌈d/k⌉ messages; top-k without error feedback stays wrong forever."""
    x = np.random.default_rng(4).normal(size=(3, 10))
    g, server = np.zeros_like(x), np.zeros_like(x)
    errors = []
    for r in range(6):
        c, g, _ = ef21_step(TopK(k=3), x, g, 0, r, [0, 1, 2])
        server = server + c  # the server's copy follows the same c
        errors.append(np.linalg.norm(x - server))
    assert np.array_equal(server, g)
    assert all(b <= a for a, b in zip(errors, errors[1:], strict=False))
    assert errors[2] > 0 and errors[3] == 0.0  # ceil(10/3) = 4 messages
    plain, _ = TopK(k=3).compress(x, 0, 0, [0, 1, 2])
    assert np.linalg.norm(x - plain) > 0.3 * np.linalg.norm(x)
