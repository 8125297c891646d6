"""Property-based tests of the public constructors and loaders (issue 43).

Every input ends in a correct result or in ONE error of an allowed class (``ValueError``,
``TypeError``, ``FileNotFoundError``, :class:`fedcomp.config.ConfigError`) whose message
names the problem: never a crash of the interpreter, never a raw library error
(``BadZipFile``, ``KeyError``, ``UnicodeDecodeError``, pandas' ``ParserError``,
``RecursionError``, ``OverflowError``, ``IndexError``, NumPy's broadcast and conversion
messages), never a silent broadcast (a result's lengths are the inputs').

Covered: ``ClientData.from_lists``, ``save``/``load``, ``load_libsvm``, configuration files
and ``--set`` (the loader and the CLI parser), checkpoints read back by
``RunOptions(resume_from=...)``, the Flower Strategy's constructor, ``load_results``.

Bounded and reproducible: the ``fedcomp-properties`` profile below (few examples per test,
``derandomize=True``, no example database) keeps the file near half a minute on one core.
Inputs that would crash the interpreter (crafted CSR indices in a ``features.npz``) are not
drawn here: their tests run in a subprocess where the data's checks are written.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import string
import tomllib
import zipfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy import sparse

from fedcomp import ClientData
from fedcomp.config import ConfigError

settings.register_profile(
    "fedcomp-properties", max_examples=40, deadline=None, derandomize=True, database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.function_scoped_fixture, HealthCheck.data_too_large])
#: Every test of this file runs under the profile (not loaded globally: other files keep
#: their own settings).
BOUNDED = settings(settings.get_profile("fedcomp-properties"))

#: Errors a user may see: the project's own words in one of these classes.
ALLOWED = (ValueError, TypeError, FileNotFoundError)
#: Raw library errors that must never reach a user, whatever their base class
#: (UnicodeDecodeError, JSONDecodeError and TOMLDecodeError are ValueErrors).
RAW = (zipfile.BadZipFile, KeyError, IndexError, UnicodeError, RecursionError, OverflowError,
       json.JSONDecodeError, tomllib.TOMLDecodeError, MemoryError, AttributeError,
       ZeroDivisionError)
#: Messages NumPy, SciPy, pandas and Python write for an input they cannot use, at the start
#: of the message (a message of fedcomp names the value and the fix first, and may quote
#: the library's reason after it).
RAW_MESSAGES = re.compile(
    r"(?:'[\w-]+' )?(?:could not broadcast|operands could not be broadcast|could not convert|"
    r"the truth value of an array|setting an array element with a sequence|invalid literal "
    r"for|object of type .* has no len|unhashable type|not supported between instances|"
    r"'[<>=]+' not supported|index -?\d+ is out of bounds|cannot reshape|codec can't decode|"
    r"expecting value|error tokenizing data|no columns to parse|maximum recursion depth|"
    r"python int too large|int too large|.*got an unexpected keyword)", re.IGNORECASE)


def _pandas_raw() -> tuple[type[BaseException], ...]:
    try:
        import pandas
    except ImportError:
        return ()
    return (pandas.errors.ParserError, pandas.errors.EmptyDataError)


def outcome(call, *, names=(), allowed=ALLOWED):
    """``(result, None)`` or ``(None, error)`` of ``call()``; an error must be allowed, not
    raw, and its message must say at least one of ``names`` (the file, the client...)."""
    try:
        return call(), None
    except BaseException as exc:  # noqa: BLE001 - the property is about what escapes
        what = f"{type(exc).__module__}.{type(exc).__name__}: {exc}"
        assert isinstance(exc, allowed), what
        assert not isinstance(exc, RAW + _pandas_raw()), what
        message = str(exc)
        assert len(message) >= 20 and not RAW_MESSAGES.match(message), what
        if names:
            assert any(name in message for name in names), (names, what)
        return None, exc


# --- ClientData.from_lists ---------------------------------------------------------------------
@st.composite
def client_lists(draw, max_clients=4):
    """Valid per-client arrays: dense or CSR features (n_i, d), float or int targets (n_i,),
    sample weights or none."""
    n_clients = draw(st.integers(1, max_clients))
    d = draw(st.integers(1, 5))
    kind = draw(st.sampled_from(["dense", "csr"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    counts = [draw(st.integers(1, 6)) for _ in range(n_clients)]
    features, targets = [], []
    for n in counts:
        x = rng.normal(size=(n, d)) * (rng.random((n, d)) < 0.5)
        features.append(sparse.csr_matrix(x) if kind == "csr" else x)
        targets.append(rng.integers(0, 3, size=n) if draw(st.booleans())
                       else rng.normal(size=n))
    weights = [rng.uniform(0.1, 2.0, size=n) for n in counts] if draw(st.booleans()) else None
    return features, targets, weights


def _dense(x):
    return x.toarray() if sparse.issparse(x) else np.asarray(x)


def _check_equal_to_lists(data, features, targets, weights):
    """No padding leaks, no broadcast: every client's rows are its own inputs."""
    counts = [f.shape[0] for f in features]
    assert data.counts.tolist() == counts
    X, y, ids = data.pooled()
    assert X.shape[0] == len(y) == len(ids) == sum(counts)
    np.testing.assert_array_equal(_dense(X), np.vstack([_dense(f) for f in features]))
    np.testing.assert_array_equal(np.asarray(y, dtype=np.float64),
                                  np.concatenate(targets).astype(np.float64))
    if weights is not None:
        for i, w in enumerate(weights):
            np.testing.assert_array_equal(data.sample_weight[i, :counts[i]], w)


@BOUNDED
@given(client_lists())
def test_from_lists_keeps_every_clients_rows(lists):
    features, targets, weights = lists
    data = ClientData.from_lists(features, targets, sample_weight=weights)
    _check_equal_to_lists(data, features, targets, weights)


#: Ways to damage one client's input, by name (applied to client ``i``'s arrays).
def _target_shapes(n):
    return st.sampled_from([(), (0,), (max(n - 1, 0),), (n + 1,), (n, 1), (1, n), (n, 2)])


@BOUNDED
@given(client_lists(), st.data())
def test_from_lists_refuses_targets_and_weights_of_other_lengths(lists, data):
    """A target or weight array whose shape is not ``(n_i,)`` is one error naming the
    client, never broadcast (a scalar label for every sample: issue 43)."""
    features, targets, weights = lists
    i = data.draw(st.integers(0, len(features) - 1))
    n = features[i].shape[0]
    which = data.draw(st.sampled_from(["targets", "weights"]))
    shape = data.draw(_target_shapes(n))
    assume(shape != (n,))
    if which == "targets":
        targets = [*targets[:i], np.ones(shape), *targets[i + 1:]]
    else:
        weights = [np.ones(f.shape[0]) for f in features]
        weights[i] = np.ones(shape)
    result, error = outcome(lambda: ClientData.from_lists(features, targets,
                                                          sample_weight=weights),
                            names=(f"client {i}",))
    assert error is not None, f"{which} of shape {shape} for {n} samples were accepted"


#: Element types from_lists cannot hold, each in place of client 1's features or targets.
#: Strings, complex numbers, ragged rows and an ndarray of clients were NumPy's words (or a
#: ComplexWarning dropping the imaginary part), found here; fixed in fedcomp/data (03a3238).
BAD_ELEMENTS = [
    pytest.param("features", lambda n, d: np.full((n, d), "a"), id="features-str"),
    pytest.param("features", lambda n, d: np.ones((n, d)) * 1j, id="features-complex"),
    pytest.param("features", lambda n, d: [[0.0] * d, [0.0]], id="features-ragged"),
    pytest.param("features", lambda n, d: np.full((n, d), None, dtype=object),
                 id="features-none-objects"),
    pytest.param("features", lambda n, d: [[[0.0]] * d] * n, id="features-3d-list"),
    pytest.param("features", lambda n, d: None, id="features-none"),
    pytest.param("features", lambda n, d: {"x": 1}, id="features-dict"),
    pytest.param("targets", lambda n, d: np.full(n, None, dtype=object), id="targets-none-objects"),
    pytest.param("targets", lambda n, d: np.ones(n) * 1j, id="targets-complex"),
    pytest.param("targets", lambda n, d: None, id="targets-none"),
    pytest.param("targets", lambda n, d: {"y": 1}, id="targets-dict"),
]


@pytest.mark.parametrize("where, make", BAD_ELEMENTS)
def test_from_lists_names_the_client_of_an_element_it_cannot_hold(where, make):
    import warnings

    features, targets = [np.ones((2, 3)), np.ones((2, 3))], [np.ones(2), np.ones(2)]
    if where == "features":
        features[1] = make(2, 3)
    else:
        targets[1] = make(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a ComplexWarning is a silent loss of data
        result, error = outcome(lambda: ClientData.from_lists(features, targets),
                                names=("client 1",))
    assert error is not None, f"{where} {make(2, 3)!r} of client 1 were accepted"


def test_from_lists_takes_an_array_of_clients_like_the_list():
    """An ndarray of clients was NumPy's 'The truth value of an array with more than one
    element is ambiguous' (found here; fixed in fedcomp/data, 03a3238)."""
    features, targets = np.arange(12.0).reshape(2, 3, 2), np.ones((2, 3))
    result, error = outcome(lambda: ClientData.from_lists(features, targets))
    if error is None:
        _check_equal_to_lists(result, list(features), list(targets), None)


# --- the regularizers' constructors -----------------------------------------------------------
PARAMETER_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10), st.sampled_from([10**400, 2**63, -0.0]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=4),
    st.lists(st.integers(0, 2), max_size=4).map(tuple), st.dictionaries(st.text(max_size=2),
                                                                       st.integers(), max_size=1))
#: A valid value of each parameter some regularizer needs, for the ones not drawn.
VALID = {"alpha": 0.1, "groups": (0, 0, 1), "shape": (1, 3), "sparsity": 1, "radius": 1.0}


@BOUNDED
@given(st.data())
def test_a_regularizer_is_built_or_one_error_naming_its_parameter(data):
    """Every registered regularizer, any value of one of its parameters: a regularizer
    whose prox works, or one error naming the parameter (``L1(alpha="x")`` was Python's
    "'>=' not supported between instances of 'str' and 'int'", ``L1(alpha=10**400)`` an
    OverflowError, ``L1(param_ndim=True)`` a vector regularizer)."""
    from fedcomp.regularizers import REGULARIZERS, make_regularizer

    name = data.draw(st.sampled_from(list(REGULARIZERS)))
    accepted = REGULARIZERS.parameters(name)
    parameter = data.draw(st.sampled_from(list(accepted)))
    value = data.draw(PARAMETER_VALUES)
    params = {key: VALID[key] for key in accepted if key in VALID and key != parameter}
    params[parameter] = value
    result, error = outcome(lambda: make_regularizer(name, **params), names=(parameter,))
    if error is None:
        if parameter == "param_ndim":
            assert type(result.param_ndim) is int and result.param_ndim in (1, 2)
        ndim = result.param_ndim
        x = np.linspace(-2.0, 2.0, 3).reshape((1, 3) if ndim == 1 else (1, 1, 3))
        outcome(lambda: result.prox(x, 0.5), names=(parameter, "step"))


#: (class, keyword arguments but the one tried, the one tried) of the regularizers whose
#: constructors compared a strength before checking it was a number.
STRENGTHS = {"L1.alpha": ("L1", {}, "alpha"), "ElasticNet.l2": ("ElasticNet", {"l1": 0.1}, "l2"),
             "L2Ball.radius": ("L2Ball", {}, "radius"),
             "MCP.gamma": ("MCP", {"alpha": 0.1}, "gamma"),
             "SCAD.a": ("SCAD", {"alpha": 0.1}, "a"),
             "Box.upper": ("Box", {"lower": -1.0}, "upper")}


@pytest.mark.parametrize("value", ["0.1", None, [1], 10**400],
                         ids=["text", "none", "list", "10**400"])
@pytest.mark.parametrize("strength", list(STRENGTHS))
def test_a_strength_that_is_not_a_real_number_is_one_error_naming_it(strength, value):
    """Found by the property above (fedcomp/regularizers, fixed): each was a raw TypeError
    of a comparison ("'>=' not supported between instances of 'str' and 'int'"), or an
    OverflowError; now a TypeError for a non-number (Box: its ValueError, as before) and a
    ValueError for an integer beyond a float."""
    import fedcomp.regularizers as regularizers

    name, others, parameter = STRENGTHS[strength]
    expected = ValueError if isinstance(value, int) or name == "Box" else TypeError
    with pytest.raises(expected, match=f"{name}: {parameter} ") as caught:
        getattr(regularizers, name)(**others, **{parameter: value})
    assert not RAW_MESSAGES.match(str(caught.value)), caught.value


@pytest.mark.parametrize("param_ndim", [True, 1.0, "1", None])
def test_param_ndim_is_an_integer_not_a_flag_or_a_float(param_ndim):
    """Found by the property above (fixed): ``True == 1`` and ``1.0 == 1`` passed the check
    ``param_ndim in (1, 2)`` and were stored as the model's number of axes."""
    from fedcomp.regularizers import L1

    with pytest.raises(ValueError, match="L1: param_ndim must be 1"):
        L1(0.1, param_ndim=param_ndim)


# --- the scikit-learn estimators ----------------------------------------------------------------
ESTIMATOR_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 6), st.sampled_from([10**400, 0.5, -0.1, "auto"]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=3),
    st.lists(st.integers(0, 2), max_size=2), st.sampled_from([{}, {"local_steps": 2},
                                                               {"nope": 1}]))
ESTIMATOR_PARAMETERS = ["penalty", "alpha", "l1_ratio", "gamma", "algorithm",
                        "algorithm_params", "client_lr", "tol", "warm_start", "fit_intercept",
                        "n_clients", "clients_per_round", "batch_size", "eval_every",
                        "random_state"]
FIT_INPUTS = st.sampled_from([
    {}, {"sample_weight": "ones"}, {"sample_weight": "short"}, {"sample_weight": "text"},
    {"sample_weight": "negative"}, {"sample_weight": "nan"}, {"clients": "short"},
    {"clients": "mixed"}, {"clients": "none"}, {"clients": "nan"}, {"clients": "column"},
    {"y": "short"}, {"y": "scalar"}, {"y": "column"}, {"y": "text"}])


def _fit_arguments(kind: dict, n: int) -> dict:
    """The arguments of ``fit`` a FIT_INPUTS entry names, on n samples of 3 clients."""
    made = {
        "ones": np.ones(n), "short": np.ones(n - 2), "text": np.array(["a"] * n),
        "negative": -np.ones(n), "nan": np.r_[np.nan, np.ones(n - 1)],
        "mixed": np.array([1, "a", 2.5] * (n // 3), dtype=object),
        "none": np.array([None] * n), "column": np.zeros((n, 1)), "scalar": np.float64(1.0)}
    arguments = {"clients": np.arange(n) % 3}
    for name, what in kind.items():
        if name == "y" and what == "short":
            arguments["y"] = np.ones(n - 1)
        elif name == "clients" and what == "nan":
            arguments["clients"] = np.r_[np.nan, np.zeros(n - 1)]
        else:
            arguments[name] = made[what]
    return arguments


@BOUNDED
@given(st.dictionaries(st.sampled_from(ESTIMATOR_PARAMETERS), ESTIMATOR_VALUES, max_size=2),
       FIT_INPUTS)
def test_an_estimator_fits_or_is_one_error_naming_the_parameter(params, inputs):
    """FederatedLinearRegression with any value of one or two parameters and damaged
    ``fit`` inputs: a fit whose coefficients match the data's shape, or one error naming
    what is wrong (found here and fixed: gamma="x", client_lr="x", eval_every="x",
    algorithm_params=[1], alpha=10**400, sample_weight of text were NumPy's words; string
    flags were taken as True)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning, DataConversionWarning

    from fedcomp.sklearn import FederatedLinearRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 3))
    arguments = {"y": X @ np.array([1.0, -1.0, 0.5]), **_fit_arguments(inputs, 12)}
    model = FederatedLinearRegression(max_iter=20)
    names = (*params, *inputs, "sample", "client", "target", "y", "Input", "Found input")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", DataConversionWarning)
        result, error = outcome(lambda: model.set_params(**params).fit(X, **arguments),
                                names=names)
    if error is None:
        assert result.coef_.shape == (3,) and np.isfinite(result.coef_).all()
        # damage is never accepted; a column y is scikit-learn's DataConversionWarning
        assert inputs in ({}, {"sample_weight": "ones"}, {"y": "column"}), inputs


@pytest.mark.parametrize("params, fit, match", [
    ({"penalty": "mcp", "gamma": "x"}, {}, "gamma must be a finite number"),
    ({"penalty": "scad", "gamma": 10**400}, {}, "gamma must be a finite number"),
    ({"alpha": 10**400}, {}, "alpha must be a number >= 0"),
    ({"client_lr": "x"}, {}, "client_lr must be 'auto' or a number > 0"),
    ({"eval_every": "x"}, {}, "eval_every must be an integer >= 1"),
    ({"eval_every": 2.5}, {}, "eval_every must be an integer >= 1"),
    ({"algorithm_params": [1]}, {}, "algorithm_params must be a dict"),
    ({"warm_start": "no"}, {}, "warm_start must be True or False"),
    ({"fit_intercept": "no"}, {}, "fit_intercept must be True or False"),
    ({}, {"sample_weight": "text"}, "sample_weight must hold numbers"),
    ({}, {"y": "text"}, "y must hold numbers"),
])
def test_the_estimators_name_each_bad_parameter(params, fit, match):
    """Found by the property above (fedcomp/sklearn, fixed): NumPy's "could not convert
    string to float", "invalid literal for int()", "ufunc 'isfinite' not supported", a raw
    TypeError of dict(), an OverflowError, or a string flag taken as True."""
    from fedcomp.sklearn import FederatedLinearRegression

    X = np.random.default_rng(0).normal(size=(12, 3))
    arguments = {"y": X[:, 0], **_fit_arguments(fit, 12)}
    with pytest.raises(ValueError, match=re.escape(match)):
        FederatedLinearRegression(max_iter=5, **params).fit(X, **arguments)


# --- save / load -------------------------------------------------------------------------------
@BOUNDED
@given(client_lists())
def test_save_then_load_gives_the_same_data(tmp_path_factory, lists):
    features, targets, weights = lists
    data = ClientData.from_lists(features, targets, sample_weight=weights)
    root = tmp_path_factory.mktemp("saved")
    back = ClientData.load(data.save(root))
    _check_equal_to_lists(back, features, targets, weights)


#: Damage done to one saved file: cut it, overwrite bytes in it, replace or remove it.
DAMAGE = st.sampled_from(["truncate", "overwrite", "garbage", "empty", "remove"])


def _damage(path: Path, how: str, rng: np.random.Generator) -> None:
    raw = path.read_bytes()
    if how == "truncate":
        path.write_bytes(raw[: int(rng.integers(0, max(len(raw), 1)))])
    elif how == "overwrite":
        buf = bytearray(raw)
        for at in rng.integers(0, len(buf), size=int(rng.integers(1, 9))):
            buf[at] = int(rng.integers(0, 256))
        path.write_bytes(bytes(buf))
    elif how == "garbage":
        path.write_bytes(rng.bytes(int(rng.integers(1, 300))))
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.unlink()


def _damaged_save_loads_or_names_the_file(tmp_path_factory, lists, how, seed, pick):
    features, targets, weights = lists
    saved = ClientData.from_lists(features, targets, sample_weight=weights)
    root = saved.save(tmp_path_factory.mktemp("damaged"))
    name = pick(sorted(p.name for p in root.iterdir()))
    _damage(root / name, how, np.random.default_rng(seed))
    result, error = outcome(lambda: ClientData.load(root), names=(str(root), name))
    if error is None:  # the damage missed what is read (a padding byte, say)
        _check_equal_to_lists(result, features, targets, weights)


@BOUNDED
@given(client_lists(max_clients=3), DAMAGE, st.integers(0, 2**16), st.data())
def test_load_of_a_damaged_save_is_the_data_or_one_error_naming_the_file(
        tmp_path_factory, lists, how, seed, data):
    """Any file of a save cut, replaced, emptied or removed, and bytes overwritten in the
    .npy and .json files (a CSR archive's bytes: the test below)."""
    assume(not (how == "overwrite" and sparse.issparse(lists[0][0])))
    _damaged_save_loads_or_names_the_file(tmp_path_factory, lists, how, seed,
                                          lambda files: data.draw(st.sampled_from(files)))


@BOUNDED
@given(client_lists(max_clients=3).filter(lambda lists: sparse.issparse(lists[0][0])),
       st.integers(0, 2**16))
def test_load_of_a_csr_archive_with_bytes_overwritten_names_the_file(tmp_path_factory, lists,
                                                                      seed):
    """Safe in process since the full CSR check of ``load`` (f6ad6a4): decoded garbage
    indices are refused before SciPy reads them (400 random damages, no crash)."""
    _damaged_save_loads_or_names_the_file(tmp_path_factory, lists, "overwrite", seed,
                                          lambda files: "features.npz")


@pytest.mark.parametrize("offset, value", [(6, 99), (8, 0x41), (10, 77)],
                         ids=["version-9.9", "encryption-flag", "compression-method"])
def test_a_csr_archive_with_an_unreadable_zip_header_names_the_file(tmp_path, offset, value):
    """The reproduction of the property above: one byte of the first central directory
    entry of ``features.npz``."""
    data = ClientData.from_lists([sparse.random(5, 4, density=0.5, format="csr",
                                                random_state=i) for i in range(3)],
                                 [np.ones(5)] * 3)
    root = data.save(tmp_path / "data")
    damaged = bytearray((root / "features.npz").read_bytes())
    damaged[damaged.find(b"PK\x01\x02") + offset] = value
    (root / "features.npz").write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match="features.npz"):
        ClientData.load(root)


#: Edits of client_data.json: a field given another value of any JSON type.
JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=False),
              st.text(max_size=5), st.sampled_from(["<f8", "|O", "<U3", "float64"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=4), inner, max_size=2)),
    max_leaves=5)


@BOUNDED
@given(client_lists(max_clients=3).filter(lambda lists: not sparse.issparse(lists[0][0])),
       st.sampled_from(["format", "version", "arrays", "features", "targets", "counts",
                        "shape", "dtype"]), JSON_VALUES)
def test_load_of_an_edited_client_data_json_is_one_error_naming_the_file(
        tmp_path_factory, lists, field, value):
    features, targets, weights = lists
    root = ClientData.from_lists(features, targets, sample_weight=weights).save(
        tmp_path_factory.mktemp("edited"))
    meta = json.loads((root / "client_data.json").read_text())
    if field in ("format", "version", "arrays"):
        meta[field] = value
    elif field in ("features", "targets", "counts"):
        meta["arrays"][field] = value
    else:
        meta["arrays"]["targets"][field] = value
    (root / "client_data.json").write_text(json.dumps(meta))
    result, error = outcome(lambda: ClientData.load(root), names=(str(root),))
    if error is None:
        _check_equal_to_lists(result, features, targets, weights)


# --- load_libsvm -------------------------------------------------------------------------------
LABELS = st.sampled_from(["+1", "-1", "0", "2.5", "1e3", "x", "", "nan", "inf", "--1"])
INDICES = st.one_of(st.integers(-2, 40).map(str), st.sampled_from(["", "a", "1.5", "0x3"]))
VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32).map(repr),
                   st.sampled_from(["", "a", "1e400", "-0", "1:2"]))
TOKENS = st.one_of(st.tuples(INDICES, VALUES).map(":".join),
                   st.sampled_from(["qid:3", "#", "# comment", ":", "::", "1:", ":1"]))
LINES = st.tuples(LABELS, st.lists(TOKENS, max_size=4)).map(
    lambda pair: " ".join([pair[0], *pair[1]]))


def _data_lines(text: str) -> int:
    return sum(1 for line in text.splitlines() if line.split("#", 1)[0].strip())


@BOUNDED
@given(st.lists(LINES, min_size=1, max_size=6), st.booleans(),
       st.sampled_from([None, 1, 5, 50]))
def test_load_libsvm_is_the_files_rows_or_one_error_naming_the_file(
        tmp_path_factory, lines, as_sparse, n_features):
    from fedcomp.data import load_libsvm

    text = "\n".join(lines) + "\n"
    path = tmp_path_factory.mktemp("libsvm") / "data.svm"
    path.write_text(text)
    result, error = outcome(lambda: load_libsvm(path, n_features=n_features,
                                                sparse=as_sparse),
                            names=(str(path), "line", "n_features"))
    if error is None:
        X, y = result
        assert X.shape[0] == len(y) == _data_lines(text), (text, X.shape, len(y))
        assert n_features is None or X.shape[1] == n_features
        assert np.isfinite(_dense(X)).all()


@BOUNDED
@given(st.binary(min_size=1, max_size=200))
def test_load_libsvm_of_bytes_is_rows_or_one_error_naming_the_file(tmp_path_factory, raw):
    from fedcomp.data import load_libsvm

    path = tmp_path_factory.mktemp("libsvm-bytes") / "data.svm"
    path.write_bytes(raw)
    outcome(lambda: load_libsvm(path), names=(str(path), "line"))


@pytest.mark.parametrize("index", [99_999_999_999, 2**62, 2**63, 10**30])
def test_load_libsvm_of_a_huge_index_is_one_error_not_a_memory_error(tmp_path, index):
    """Issue 43: a LIBSVM index of 99999999999 gave a 745 GiB MemoryError traceback; one of
    2**63 or more a raw OverflowError (found here; fixed in fedcomp/data, 03a3238)."""
    from fedcomp.data import load_libsvm

    path = tmp_path / "huge.svm"
    path.write_text(f"+1 1:0.5 {index}:1\n")
    for as_sparse in (False, True):
        result, error = outcome(lambda: load_libsvm(path, sparse=as_sparse),  # noqa: B023
                                names=(str(path), "line", str(index)))
        assert error is not None or (result[0].shape[1] == index and as_sparse)


# --- configuration files and --set -------------------------------------------------------------
KEY_PARTS = st.text(alphabet=string.ascii_lowercase + "_", min_size=1, max_size=6)
TOML_VALUES = st.one_of(
    st.integers(-10**20, 10**20).map(str), st.floats().map(lambda f: repr(f).lower()),
    st.sampled_from(['"za1"', "true", "[1, 2]", "{a = 1}", "[[[[1]]]]", '"\\u00e9"', "nan",
                     "inf", "1979-05-27", "'''x'''", "[", '"', "{", "0x1f"]))


@st.composite
def toml_texts(draw):
    lines = []
    for _ in range(draw(st.integers(1, 5))):
        form = draw(st.sampled_from(["pair", "table", "array-table", "deep", "junk"]))
        if form == "pair":
            key = ".".join(draw(st.lists(KEY_PARTS, min_size=1, max_size=3)))
            lines.append(f"{key} = {draw(TOML_VALUES)}")
        elif form == "table":
            lines.append(f"[{draw(KEY_PARTS)}]")
        elif form == "array-table":
            lines.append(f"[[{draw(KEY_PARTS)}]]")
        elif form == "deep":  # dotted keys or nested arrays thousands deep (issue 43)
            depth = draw(st.sampled_from([50, 2000, 5000]))
            lines.append(".".join(["k"] * depth) + " = 1" if draw(st.booleans())
                         else "x = " + "[" * depth + "]" * depth)
        else:
            lines.append(draw(st.text(max_size=12)))
    return "\n".join(lines)


@BOUNDED
@given(st.one_of(toml_texts(), st.binary(max_size=80).map(lambda b: b"\xff" + b)))
def test_a_config_file_is_a_table_or_one_config_error_naming_the_file(tmp_path_factory, text):
    from fedcomp.config import load

    path = tmp_path_factory.mktemp("config") / "c.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    result, error = outcome(lambda: load(path), names=(str(path),), allowed=(ConfigError,))
    assert error is not None or isinstance(result, dict)


ASSIGNMENTS = st.one_of(
    st.text(max_size=20),
    st.tuples(st.lists(st.one_of(KEY_PARTS, st.sampled_from(["algorithms", "*", "za1", "",
                                                              "data", "0"])),
                       min_size=0, max_size=4).map(".".join),
              st.one_of(TOML_VALUES, st.text(max_size=8),
                        st.sampled_from(["[" * 3000, "{a=" * 100])))
    .map("=".join),
    st.sampled_from(["rounds=" + "[" * 2000 + "]" * 2000, ".".join(["k"] * 3000) + "=1",
                     "=1", "rounds=", "algorithms.=1", "algorithms.za1.=2"]),
)


@BOUNDED
@given(st.lists(ASSIGNMENTS, min_size=1, max_size=3))
def test_set_overrides_are_a_config_or_one_config_error(assignments):
    from fedcomp.config import apply_override, load

    config = load("seed000")
    for assignment in assignments:
        config, error = outcome(lambda: apply_override(config, assignment),  # noqa: B023
                                names=("--set",), allowed=(ConfigError,))
        if error is not None:
            return
        assert isinstance(config, dict)


@BOUNDED
@given(st.lists(ASSIGNMENTS, min_size=1, max_size=2))
def test_the_cli_parser_with_set_is_a_dry_run_or_one_error_line(assignments):
    from fedcomp.cli import main

    argv = ["run", "seed000", "--dry-run"]
    for assignment in assignments:
        argv += ["--set", assignment]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            status = main(argv)
        except SystemExit as exc:  # argparse's own usage errors
            status = exc.code
    err = err.getvalue()
    assert "Traceback" not in err, err
    assert status in (0, 2), (status, err)
    if status == 2:  # one line naming the problem (argparse's own: its usage, then one)
        assert len([line for line in err.splitlines() if line.startswith("error:")
                    or ": error: " in line]) == 1, err


# --- checkpoints -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoint_run(tmp_path_factory):
    """A two-round run of ZA1 with its checkpoint, and how to resume it."""
    from fedcomp import Checkpoint, RunOptions, simulate
    from fedcomp.algorithms import za1
    from tests.conftest import make_problem

    problem = make_problem("logistic", n_clients=3, d=4)
    path = tmp_path_factory.mktemp("checkpoint") / "run.npz"
    simulate(za1(0.3, 2), problem, 2, metrics=["objective"],
             options=RunOptions(callbacks=[Checkpoint(path)]))

    def resume(where):
        return simulate(za1(0.3, 2), problem, 4, metrics=["objective"],
                        options=RunOptions(resume_from=where))

    return path.read_bytes(), resume


def _damaged_checkpoint_resumes_or_names_the_file(tmp_path_factory, checkpoint_run, how, seed):
    raw, resume = checkpoint_run
    path = tmp_path_factory.mktemp("damaged-checkpoint") / "run.npz"
    path.write_bytes(raw)
    _damage(path, how, np.random.default_rng(seed))
    result, error = outcome(lambda: resume(path), names=(str(path),))
    if error is None:  # the damage missed what is read
        assert result.n_rounds == 4 and np.isfinite(np.asarray(result.x)).all()


@BOUNDED
@given(st.sampled_from(["truncate", "garbage", "empty"]), st.integers(0, 2**16))
def test_a_damaged_checkpoint_resumes_or_is_one_error_naming_the_file(
        tmp_path_factory, checkpoint_run, how, seed):
    _damaged_checkpoint_resumes_or_names_the_file(tmp_path_factory, checkpoint_run, how, seed)


@BOUNDED
@given(st.integers(0, 2**16))
def test_a_checkpoint_with_bytes_overwritten_resumes_or_names_the_file(
        tmp_path_factory, checkpoint_run, seed):
    """Bytes overwritten in a zip header were zipfile's raw NotImplementedError ('strong
    encryption (flag bit 6)', 'zip file version ...'): found here, fixed in
    runtime/_checkpoint.py (c87e86d)."""
    _damaged_checkpoint_resumes_or_names_the_file(tmp_path_factory, checkpoint_run,
                                                  "overwrite", seed)


def test_a_checkpoint_whose_member_claims_encryption_names_the_file(tmp_path, checkpoint_run):
    """The reproduction: flag bit 6 (strong encryption) set in the central directory."""
    raw, resume = checkpoint_run
    damaged = bytearray(raw)
    damaged[damaged.rfind(b"PK\x01\x02") + 8] |= 0x40
    path = tmp_path / "run.npz"
    path.write_bytes(bytes(damaged))
    with pytest.raises(ValueError, match=re.escape(str(path))):
        resume(path)


# --- the Flower Strategy's constructor ---------------------------------------------------------
STRATEGY_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**12), st.floats(allow_nan=True),
    st.text(max_size=6), st.sampled_from(["za1", "fedavg", "l1", "logistic", "samples",
                                          "uniform", "without_replacement", "async_feddr"]),
    st.lists(st.integers(0, 3), max_size=3), st.dictionaries(st.sampled_from(
        ["name", "alpha", "l2", "x"]), st.one_of(st.floats(-1, 2), st.text(max_size=3)),
        max_size=2))
STRATEGY_ARGUMENTS = ["algorithm", "loss", "regularizer", "num_clients", "clients_per_round",
                      "batch_size", "seed", "weighting", "minibatch", "n_classes",
                      "evaluate_every", "node_timeout", "max_norm"]


@pytest.mark.flower
@BOUNDED
@given(st.dictionaries(st.sampled_from(STRATEGY_ARGUMENTS), STRATEGY_VALUES, min_size=1,
                       max_size=3))
def test_the_strategys_constructor_builds_or_is_one_error_naming_the_argument(changes):
    pytest.importorskip("flwr")
    from fedcomp.flower import Strategy

    arguments = dict(algorithm="za1", loss="logistic", regularizer="l1", num_clients=4)
    arguments.update(changes)
    algorithm = arguments.pop("algorithm")
    result, error = outcome(lambda: Strategy(algorithm, **arguments),
                            names=(*changes, *map(str, changes.values())))
    if error is None:
        assert result.num_clients == arguments["num_clients"]


@pytest.mark.flower
@pytest.mark.parametrize("changes", [
    {"loss": {}}, {"regularizer": {}}, {"seed": "x"}, {"seed": None}, {"seed": 1.5},
    {"node_timeout": "x"}, {"node_timeout": None}, {"node_timeout": -1.0},
    {"node_timeout": float("nan")}, {"max_norm": "x"}, {"weighting": "x"},
    {"minibatch": "x"}, {"n_classes": -1}, {"n_classes": "x"}, {"num_clients": True},
    {"algorithm": None}], ids=repr)
def test_the_strategy_refuses_each_bad_argument_naming_it(changes):
    pytest.importorskip("flwr")
    from fedcomp.flower import Strategy

    arguments = dict(algorithm="za1", loss="logistic", regularizer="l1", num_clients=4)
    arguments.update(changes)
    algorithm = arguments.pop("algorithm")
    (name,) = changes
    result, error = outcome(lambda: Strategy(algorithm, **arguments),
                            names=(name,))
    assert error is not None, f"{changes} was accepted"
    assert "gossip" not in str(error), error


# --- load_results ------------------------------------------------------------------------------
CSV_CELLS = st.one_of(st.sampled_from(["round", "objective", "algorithm", "seed", "", '"',
                                       "nan", "1e309", "za1", "\x00"]),
                      st.floats().map(repr), st.text(max_size=4))


@BOUNDED
@given(st.one_of(
    st.lists(st.lists(CSV_CELLS, min_size=1, max_size=4).map(",".join), max_size=5).map(
        "\n".join).map(str.encode),
    st.binary(max_size=120)))
def test_load_results_is_a_frame_or_one_error_naming_the_file(tmp_path_factory, raw):
    pytest.importorskip("pandas")
    from fedcomp import load_results

    path = tmp_path_factory.mktemp("results") / "results.csv"
    path.write_bytes(raw)
    result, error = outcome(lambda: load_results(path), names=(str(path),))
    assert error is not None or hasattr(result, "columns")
