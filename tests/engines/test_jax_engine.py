"""The compiled (jax) engine: the same iterates and counters as NumPy, compiled or not.

Every synchronous algorithm of the registry (the contract's instances,
``tests/core/test_contract.py``) runs a few rounds with NumPy and with jax float64: iterates
(the model, every server and client state field) agree to 1e-12 relative, every counter is
equal, and the algorithms that cannot be traced — listed below with the reason the engine
gives — are the only ones that warn (and raise with ``compile=True``). Minibatch indices
drawn inside a trace equal NumPy's draw for draw; regularizers and losses run under
``jax.jit``; float32 stays float32; a configuration with ``backend = "jax"`` runs through
``fedcomp run`` and writes the results of the NumPy backend.
"""

from __future__ import annotations

import csv
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest

from fedcomp import RunOptions, simulate
from fedcomp._array import asarray_like, to_numpy
from fedcomp._random import minibatch_indices
from fedcomp.algorithms import fedavg, host_values, za1
from fedcomp.data import Batch
from fedcomp.runtime import (
    JaxEngineWarning,
    NonFiniteError,
    NotCompilableError,
    _compiled,
    jax_like,
)
from fedcomp.runtime._compiled import RoundFrom, _Uncompilable, traced_minibatch_indices
from tests.conftest import make_problem
from tests.core.test_contract import SYNCHRONOUS, contract_problem, on_backend, supports_sampling
from tests.core.test_losses import CASES as LOSS_CASES
from tests.core.test_regularizers import EXAMPLES, draw, model_steps, scalar_steps

jax = pytest.importorskip("jax")
jnp = jax.numpy
LIKE = jax_like()  # switches on jax_enable_x64 for this process, as the backend does
LIKE32 = jax_like("float32")

def _ident(alg) -> str:
    hp = alg.hyperparameters
    if alg.name == "feddr" and hp.get("local_solver") == "exact":
        return "feddr-exact"
    if alg.name == "fedprox" and hp.get("local_epochs"):
        return "fedprox-epochs"
    if alg.name == "fedexprox" and hp.get("server_step"):
        return "fedexprox-server-step"
    return alg.name


def _expected_eager(alg, batch_size) -> dict[str, str] | None:
    """``{part: reason}`` the registry declares for this instance (its ``host_values``
    trait: those parts run eagerly on the jax arrays), or None when every part compiles."""
    return host_values(alg, batch_size, quadratic=False) or None


def relative_error(got, want) -> float:
    got, want = np.asarray(to_numpy(got), dtype=np.float64), np.asarray(want, np.float64)
    scale = max(float(np.max(np.abs(want), initial=0.0)), 1e-300)
    return float(np.max(np.abs(got - want), initial=0.0)) / scale


def assert_same_run(got, want, tol=1e-12):
    assert relative_error(got.x, want.x) <= tol
    for states_got, states_want in ((got.server_state, want.server_state),
                                    (got.client_states, want.client_states)):
        for name, a, b in zip(states_want._fields, states_got, states_want, strict=True):
            assert relative_error(a, b) <= tol, name
    assert got.counters == want.counters


def run_both(alg, problem, like=LIKE, **kwargs):
    """``(numpy run, jax run, engine warnings)`` of the same simulation."""
    want = simulate(alg, problem, 4, seed=2, metrics=[], **kwargs)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = simulate(alg, on_backend(problem, like), 4, seed=2, metrics=[], **kwargs)
    return want, got, [w for w in caught if issubclass(w.category, JaxEngineWarning)]


# --- every registered synchronous algorithm ---------------------------------------------------

@pytest.mark.parametrize("batch_size", [None, 3])
@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=_ident)
def test_every_algorithm_matches_numpy_in_float64(alg, batch_size):
    want, got, warned = run_both(alg, contract_problem(alg), batch_size=batch_size)
    assert isinstance(got.x, jax.Array) and got.x.dtype == jnp.float64
    assert_same_run(got, want)
    declared = _expected_eager(alg, batch_size)
    if declared is None:
        assert not warned, [str(w.message) for w in warned]  # compiled, round and server
    else:  # one warning per declared part, naming the registry's reason
        assert sorted(str(w.message) for w in warned) == sorted(
            f"{alg.name}: its {part} cannot run under jax.jit, it needs a value on the host: "
            f"{reason} (its registry entry's host_values); it runs eagerly on the jax arrays "
            "(same results, uncompiled)" for part, reason in declared.items())


@pytest.mark.parametrize("alg", [a for a in SYNCHRONOUS if _expected_eager(a, 3) is not None],
                         ids=_ident)
def test_every_declared_host_value_is_still_needed(alg, monkeypatch):
    """A trait that is no longer true (the part became traceable) must go from the
    registry: with the traits ignored, tracing each declared part fails."""
    monkeypatch.setattr(_compiled, "DECLARED_TRAITS", False)
    _, _, warned = run_both(alg, contract_problem(alg), batch_size=3)
    failed = {re.search(r"its (.*?) cannot run", str(w.message)).group(1) for w in warned}
    assert failed == set(_expected_eager(alg, 3)), [str(w.message) for w in warned]


@pytest.mark.parametrize("alg", [a for a in SYNCHRONOUS if _expected_eager(a, 3) is not None],
                         ids=_ident)
def test_algorithms_that_cannot_be_traced_raise_with_compile_true(alg):
    p = on_backend(contract_problem(alg), LIKE)
    with pytest.raises(NotCompilableError, match=r"cannot run under jax\.jit, it needs a "
                                                 r"value on the host: .*compile='auto'"):
        simulate(alg, p, 3, batch_size=3, seed=2, metrics=[], options=RunOptions(compile=True))


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=_ident)
def test_client_sampling_and_block_sizes(alg):
    p = contract_problem(alg)
    cpr = 4 if supports_sampling(alg, p) else None
    for block in (3, "auto"):
        want, got, _ = run_both(alg, p, batch_size=4, clients_per_round=cpr,
                                options=RunOptions(client_block=block))
        assert_same_run(got, want)


def test_compile_false_and_the_compile_argument():
    p = make_problem("logistic")
    alg = za1(client_lr=0.5, local_steps=3)
    want = simulate(alg, p, 4, batch_size=3, metrics=[])
    eager = simulate(alg, on_backend(p, LIKE), 4, batch_size=3, metrics=[],
                     options=RunOptions(compile=False))
    assert_same_run(eager, want)
    compiled = simulate(alg, on_backend(p, LIKE), 4, batch_size=3, metrics=[],
                        options=RunOptions(compile=True))
    assert_same_run(compiled, want)
    with pytest.raises(ValueError, match="compile=True .* needs the data on jax arrays"):
        simulate(alg, p, 1, options=RunOptions(compile=True))
    with pytest.raises(ValueError, match="compile must be 'auto', True or False"):
        simulate(alg, on_backend(p, LIKE), 1, options=RunOptions(compile="yes"))


def test_metrics_and_divergence_on_jax():
    p = make_problem("logistic")
    alg = za1(client_lr=0.5, local_steps=3)
    want = simulate(alg, p, 4, metrics=["objective", "nnz"], eval_every=2)
    got = simulate(alg, on_backend(p, LIKE), 4, metrics=["objective", "nnz"], eval_every=2)
    for a, b in zip(got.history, want.history, strict=True):
        assert a["round"] == b["round"] and a["nnz"] == b["nnz"]
        assert a["objective"] == pytest.approx(b["objective"], rel=1e-12)
    with pytest.raises(NonFiniteError, match="in round 1"):
        simulate(fedavg(client_lr=1e9, local_steps=3), on_backend(p, LIKE), 3, metrics=[],
                 options=RunOptions(on_divergence="raise"))


# --- float32 ------------------------------------------------------------------------------------

@pytest.mark.parametrize("alg", [a for a in SYNCHRONOUS if _expected_eager(a, 3) is None],
                         ids=_ident)
def test_float32_stays_float32_and_close(alg):
    p = contract_problem(alg)
    want = simulate(alg, p, 4, batch_size=3, seed=2, metrics=[])
    got = simulate(alg, on_backend(p, LIKE32), 4, batch_size=3, seed=2, metrics=["objective"])
    assert got.x.dtype == jnp.float32
    for field in (*got.server_state, *got.client_states):
        assert field.dtype == jnp.float32
    # float32 rounds each step to 6e-8 relative; 4 rounds of 3 local steps on this
    # well-conditioned problem stay within 1e-4 of float64 (the torch contract's bound)
    np.testing.assert_allclose(to_numpy(got.x), want.x, rtol=0, atol=1e-4)
    assert got.counters.grad_evals == want.counters.grad_evals
    assert got.counters.bits_up * 2 == want.counters.bits_up  # 32-bit entries on the wire


# --- the pieces ---------------------------------------------------------------------------------

@pytest.mark.parametrize("replace", [True, False])
def test_traced_minibatch_indices_equal_numpy(replace):
    ids = np.array([0, 3, 17, 2**40 + 5, 2**62 + 11])
    counts = np.array([20, 37, 25, 64, 21])

    @jax.jit
    def traced(round_, ids, counts):
        return [traced_minibatch_indices(seed, round_, ids, counts, draw, 7, replace, 64)
                for seed in (0, 12345, 2**63 + 3) for draw in (0, 1, 9)]

    for round_ in (-1, 0, 1, 417, 2**31 + 7):
        got = traced(round_, jnp.asarray(ids), jnp.asarray(counts))
        want = [minibatch_indices(seed, round_, ids, counts, draw, 7, replace=replace)
                for seed in (0, 12345, 2**63 + 3) for draw in (0, 1, 9)]
        for g, w in zip(got, want, strict=True):
            np.testing.assert_array_equal(np.asarray(g), w)


@pytest.mark.parametrize("reg, shape", EXAMPLES, ids=lambda v: repr(v)[:30])
def test_regularizers_under_jit(reg, shape):
    x = draw(shape, 21)
    steps, s = model_steps(reg, 5, 21), scalar_steps(reg)[2]

    @jax.jit
    def both(v, per_model):
        return reg.value(v), reg.prox(v, s), reg.prox(v, per_model)

    got = both(jnp.asarray(x), jnp.asarray(steps))
    want = reg.value(x), reg.prox(x, s), reg.prox(x, steps)
    for g, w in zip(got, want, strict=True):
        finite = np.isfinite(w)
        np.testing.assert_allclose(np.asarray(g)[finite], w[finite], rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(np.isfinite(np.asarray(g)), finite)


@pytest.mark.parametrize("case", LOSS_CASES, ids=repr)
def test_losses_under_jit(case):
    data = case.data()
    x = case.models(data)
    batch = data.full_batch()
    on_jax = data.to(LIKE).full_batch()

    @jax.jit
    def evaluate(model, features, targets, weights):
        b = Batch(features, targets, weights)
        return case.loss.value(model, b), case.loss.grad(model, b)

    got = evaluate(asarray_like(x, LIKE), *on_jax)
    want = case.loss.value(x, batch), case.loss.grad(x, batch)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-12, atol=1e-14)


def test_round_from_decides_only_what_its_bound_decides():
    r = RoundFrom(jnp.asarray(7), 1)
    assert not (r < 0) and not (r < 1) and r > 0 and r >= 1 and r != 0 and not (r == -1)
    assert int(r * 2 + 1) == 15 and float((r + 1) / 2) == 4.0 and int(3 - r) == -4
    for undecided in (lambda: r < 2, lambda: r == 1, lambda: r > 1, lambda: bool(r),
                      lambda: int(r), lambda: r & 0xFF, lambda: range(r), lambda: {r: 1}):
        with pytest.raises((_Uncompilable, TypeError)):
            undecided()


# --- the configuration path -----------------------------------------------------------------------

CONFIG = """\
name = "jax_cli"
rounds = 6
eval_every = 3
seeds = [0]
batch_size = ["full", 10]
metrics = ["objective", "nnz"]
reference = false
backend = "{backend}"

[data]
generator = "synthetic_fedprox"
alpha = 1.0
beta = 1.0
n_classes = 2
n_clients = 6
samples_per_client = 40
n_features = 12

[problem]
loss = "logistic"
l2 = 0.01

[regularizer]
name = "l1"
alpha = 1e-3

[[algorithms]]
name = "za1"
client_lr = 0.5
local_steps = 3

[[algorithms]]
name = "feddr"
eta = 0.5
local_steps = 3
"""


def _results(folder):
    with (folder / "results.csv").open(newline="") as f:
        return {(r["algorithm"], r["round"]): r for r in csv.DictReader(f)}


def test_a_jax_config_runs_through_fedcomp_run(tmp_path):
    for backend in ("numpy", "jax"):
        config = tmp_path / f"{backend}.toml"
        config.write_text(CONFIG.format(backend=backend))
        res = subprocess.run([sys.executable, "-m", "fedcomp", "run", str(config), "--out",
                              str(tmp_path / backend), "--quiet"], capture_output=True,
                             text=True, timeout=600)
        assert res.returncode == 0, res.stderr
        assert "JaxEngineWarning" not in res.stderr  # both algorithms compile
    want, got = _results(tmp_path / "numpy"), _results(tmp_path / "jax")
    assert got.keys() == want.keys() and len(got) == 2 * 2 * 3
    for key, row in want.items():
        for column in ("grad_evals", "prox_evals_client", "floats_up", "bits_up", "nnz"):
            assert got[key][column] == row[column], (key, column)
        assert float(got[key]["objective"]) == pytest.approx(float(row["objective"]),
                                                             rel=1e-12)
    for model in (tmp_path / "numpy" / "models").iterdir():
        np.testing.assert_allclose(np.load(tmp_path / "jax" / "models" / model.name),
                                   np.load(model), rtol=0, atol=1e-12)
