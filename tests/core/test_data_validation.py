"""Validation at every entry of client data, before any work (issue 43).

Each case was a silent wrong answer or a crash on 71822a8: a scalar target broadcast to
every sample, a crafted ``features.npz`` that segfaulted or aborted the interpreter, sparse
data whose models could never fit in memory, mixed-type client ids. Now each ends in one
error naming the client or the file, the length or size, and the fix. Crafted files are
loaded in a subprocess: a crash there is an exit code, not a lost test worker.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import sparse

from fedcomp import Problem
from fedcomp.data import ClientData, load_libsvm
from fedcomp.losses import LeastSquares, Logistic
from fedcomp.regularizers import L1

ROWS, WIDTH = 6, 8


def two_clients(sparse_features=False, targets=None):
    """Features of two clients of 3 and ROWS samples; client 1's targets replaceable."""
    rng = np.random.default_rng(0)
    features = [rng.normal(size=(3, WIDTH)), rng.normal(size=(ROWS, WIDTH))]
    if sparse_features:
        features = [sparse.csr_array(f * (np.abs(f) > 0.5)) for f in features]
    return features, [np.ones(3), np.ones(ROWS) if targets is None else targets]


# --- targets against samples ---------------------------------------------------------------
@pytest.mark.parametrize("sparse_features", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("targets, given", [
    (np.array(-1.0), r"its target is one value \(-1\.0\)"),
    (np.ones(2), r"targets of shape \(2,\)"),
    (np.ones(ROWS + 1), r"targets of shape \(7,\)"),
    (np.ones((ROWS, 2)), r"targets of shape \(6, 2\)"),
    (np.ones((1, ROWS)), r"targets of shape \(1, 6\)"),
], ids=["scalar", "short", "long", "two-columns", "row"])
def test_targets_of_another_length_are_refused_naming_the_client(sparse_features, targets,
                                                                   given):
    features, labels = two_clients(sparse_features, targets)
    with pytest.raises(ValueError, match=rf"client 1 has 6 samples but {given}; give one "
                                         r"target per sample: an array of shape \(6,\)"):
        ClientData.from_lists(features, labels)


def test_a_column_of_targets_is_refused_with_its_fix():
    features, labels = two_clients(targets=np.ones((ROWS, 1)))
    with pytest.raises(ValueError, match=r"np\.ravel of the column \(6, 1\)"):
        ClientData.from_lists(features, labels)


def test_sample_weights_of_another_length_are_refused_naming_the_client():
    features, labels = two_clients()
    for weights in (np.array(2.0), np.ones(2)):
        with pytest.raises(ValueError, match=r"client 1 has 6 samples but .*sample weight"):
            ClientData.from_lists(features, labels, sample_weight=[np.ones(3), weights])
    with pytest.raises(ValueError, match=r"one sample weight array\) per client"):
        ClientData.from_lists(features, labels, sample_weight=[np.ones(3)])


def test_targets_that_are_not_numbers_are_refused_with_the_fix():
    features, _ = two_clients()
    with pytest.raises(ValueError, match=r"client 1: its targets are not real numbers "
                                         r"\(dtype <U1, e\.g\. 'a'\).*return_inverse"):
        ClientData.from_lists(features, [np.ones(3), np.array(list("abcdef"))])
    with pytest.raises(ValueError, match="not real numbers"):
        ClientData.from_lists(features, [np.ones(3), np.ones(ROWS) + 1j])


def test_features_of_another_width_are_refused_naming_the_client():
    with pytest.raises(ValueError, match=r"client 1's features have shape \(2, 4\) but "
                                         r"client 0's samples have shape \(3,\)"):
        ClientData.from_lists([np.ones((2, 3)), np.ones((2, 4))], [np.ones(2), np.ones(2)])


@pytest.mark.parametrize("bad, message", [
    (np.full((2, 3), "a"), r"client 1: its features are not real numbers \(dtype <U1, e\.g\. "
                           r"'a'\)"),
    (np.ones((2, 3)) * 1j, r"client 1: its features are not real numbers \(dtype complex"),
    ([[0.0] * 3, [0.0]], r"client 1: its features are not an array of one shape"),
], ids=["strings", "complex", "ragged"])
def test_features_that_are_not_an_array_of_numbers_are_refused_naming_the_client(bad,
                                                                                 message):
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # complex to real was only a ComplexWarning
        with pytest.raises(ValueError, match=message):
            ClientData.from_lists([np.ones((2, 3)), bad], [np.ones(2), np.ones(2)])


def test_an_array_of_clients_is_taken_like_the_list():
    features = np.arange(12.0).reshape(2, 3, 2)
    data = ClientData.from_lists(features, np.ones((2, 3)))
    assert data.counts.tolist() == [3, 3]
    np.testing.assert_array_equal(data.features, features)


def test_a_problem_of_per_client_pairs_refuses_a_scalar_target():
    X = np.random.default_rng(1).normal(size=(ROWS, 3))
    with pytest.raises(ValueError, match=r"client 0 has 6 samples but its target is one"):
        Problem(LeastSquares(), L1(0.1), [(X, np.array(1.0))])


def test_a_flower_node_with_a_scalar_label_names_its_client(monkeypatch, tmp_path):
    pytest.importorskip("flwr")
    from flwr.app import ConfigRecord, Context, Message, MessageType, RecordDict
    from flwr.supercore.task_identity import TaskIdentity

    from fedcomp.algorithms import make_algorithm
    from fedcomp.flower import Strategy, client_evaluate, client_train
    from fedcomp.flower._client import CONFIG_KEY
    from fedcomp.flower._strategy import DISCOVER

    monkeypatch.setenv("FLWR_HOME", str(tmp_path))
    for key, value in {"_run_id": 1, "_task_id": 1, "_node_id": 0}.items():
        monkeypatch.setattr(TaskIdentity, key, value)
    strategy = Strategy(make_algorithm("za1", client_lr=0.1), loss={"name": "logistic"},
                        regularizer={"name": "l1", "alpha": 0.1}, num_clients=3)
    spec = ConfigRecord({"phase": DISCOVER, "problem": strategy.problem_json, "n-clients": 3})
    msg = Message(RecordDict({CONFIG_KEY: spec}), dst_node_id=7,
                  message_type=MessageType.TRAIN, group_id="discover")
    context = Context(run_id=1, node_id=7, state=RecordDict(), run_config={},
                      node_config={"partition-id": 2})
    X = np.random.default_rng(2).normal(size=(ROWS, 3))
    for handler in (client_train, client_evaluate):
        for labels in (np.array(1.0), np.ones(2)):
            with pytest.raises(ValueError, match=r"client 2 \(this node's arrays\) has 6 "
                                                 r"samples but"):
                handler(msg, context, X, labels)
    reply = client_train(msg, context, X, np.where(X[:, 0] > 0, 1.0, -1.0))
    assert reply.content.config_records[CONFIG_KEY]["samples"] == ROWS


# --- mixed client ids ------------------------------------------------------------------------
@pytest.mark.parametrize("ids", [
    [0, "a", 1, 1, 0, "a"],
    np.array([0, "a", 1, 1, 0, "a"], dtype=object),
    [0, "0", 1, 1, 0, "0"],  # as text, 0 and "0" were one client: 2 clients for 3
], ids=["list", "objects", "zero-and-text-zero"])
def test_mixed_type_client_ids_are_refused_naming_them(ids):
    from fedcomp.sklearn import FederatedLinearRegression

    X = np.random.default_rng(3).normal(size=(ROWS, 3))
    with pytest.raises(ValueError, match=r"clients mixes ids of different types, e\.g\. 0 "
                                         r"\(int\) and '(a|0)' \(str\).*\[str\(c\) for c"):
        FederatedLinearRegression(alpha=0.1, max_iter=2).fit(X, X[:, 0], clients=ids)


def test_mixed_type_writer_ids_are_refused_by_the_partitions_by_writer():
    from fedcomp.data import federate

    X, y = np.arange(12.0).reshape(ROWS, 2), np.array([1.0, -1.0] * 3)
    for groups in ([0, "0", 1, 1, 0, "0"], np.array([0, "a", 1, 1, 0, "a"], dtype=object)):
        with pytest.raises(ValueError, match=r"partition_groups: groups mixes ids of "
                                             r"different types.*would be one group"):
            federate(X, y, 2, "writers", groups=groups)
    assert federate(X, y, 3, "writers", groups=[0, 2, 1, 1, 0, 2]).n_clients == 3


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_client_ids_of_one_type_keep_their_own_dtype():
    from fedcomp.sklearn import FederatedLinearRegression

    X = np.random.default_rng(3).normal(size=(ROWS, 3))
    for ids, expected in (([2, 1, 2, 1, 2, 1], [1, 2]), (list("babab" + "a"), ["a", "b"]),
                          (np.array([5, 7, 5, 7, 5, 7], dtype=object), [5, 7])):
        model = FederatedLinearRegression(alpha=0.1, max_iter=2).fit(X, X[:, 0], clients=ids)
        assert model.clients_.tolist() == expected
        assert model.clients_.dtype != object


# --- crafted sparse files: checked in full, never a crash -----------------------------------
def saved_sparse(tmp_path):
    """Sparse data of 2 clients x 3 rows x WIDTH columns, saved; its CSR parts."""
    rng = np.random.default_rng(4)
    matrices = [sparse.random(3, WIDTH, density=0.5, format="csr", random_state=rng)
                for _ in range(2)]
    data = ClientData.from_lists(matrices, [np.ones(3), -np.ones(3)])
    root = data.save(tmp_path / "data")
    with np.load(root / "features.npz") as archive:
        parts = dict(archive)
    return root, parts, data


def load_in_subprocess(root):
    """``ClientData.load(root)`` in a fresh interpreter: (exit code, its output)."""
    code = textwrap.dedent(f"""
        import sys
        import numpy as np
        from fedcomp.data import ClientData
        try:
            data = ClientData.load({str(root)!r})
        except ValueError as exc:
            print(exc)
            sys.exit(1)
        x = np.arange(2 * {WIDTH}, dtype=float).reshape(2, {WIDTH})
        print(data.full_batch().features.margins(x).tolist())
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    return done.returncode, (done.stdout + done.stderr).strip()


@pytest.mark.parametrize("part, edit, message", [
    ("indices", lambda a: a.__setitem__(0, 10**6), r"column index 1000000 of row 0 is "
                                                   r"outside 0\.\.7"),
    ("indices", lambda a: a.__setitem__(0, -1), r"column index -1 of row 0 is outside"),
    ("indices", lambda a: a.__setitem__(0, WIDTH + 1), r"column index 9 of row 0 is outside"),
    ("indptr", lambda a: a.__setitem__(2, 10**6), r"row pointers decrease at row 2"),
    ("indptr", lambda a: a.__setitem__(slice(1, 3), a[1:3][::-1].copy()),
     r"row pointers decrease at row 1"),
    ("indptr", lambda a: a.__setitem__(-1, a[-1] - 1), r"row pointers run from 0 to"),
], ids=["index-1e6", "index-negative", "index-past-width", "indptr-huge", "indptr-falls",
        "indptr-short-of-nnz"])
def test_a_crafted_csr_file_gives_one_error_naming_it_in_a_process_that_exits(
        tmp_path, part, edit, message):
    root, parts, _ = saved_sparse(tmp_path)
    edit(parts[part])
    np.savez(root / "features.npz", **parts)
    code, output = load_in_subprocess(root)
    assert code == 1, output  # 139 (segfault) and 134 (double free) on 71822a8
    assert len(output.splitlines()) == 1, output
    assert str(root / "features.npz") in output
    assert re_search(message, output)


def re_search(pattern, text):
    import re

    return re.search(pattern, text) is not None


def test_unsorted_column_indices_are_sorted_on_load(tmp_path):
    root, parts, data = saved_sparse(tmp_path)
    row = int(np.argmax(np.diff(parts["indptr"]) >= 2))  # a row of two nonzeros at least
    lo, hi = parts["indptr"][row], parts["indptr"][row + 1]
    parts["indices"][lo:hi] = parts["indices"][lo:hi][::-1].copy()
    parts["data"][lo:hi] = parts["data"][lo:hi][::-1].copy()
    np.savez(root / "features.npz", **parts)
    code, output = load_in_subprocess(root)
    assert code == 0, output
    x = np.arange(2 * WIDTH, dtype=float).reshape(2, WIDTH)
    expected = data.full_batch().features.margins(x)
    np.testing.assert_allclose(np.array(json.loads(output)), expected, rtol=1e-14)


@pytest.mark.parametrize("index", [10**6, -1], ids=["index-1e6", "index-negative"])
def test_a_crafted_sparse_matrix_given_to_from_lists_is_refused_naming_the_client(index):
    code = textwrap.dedent(f"""
        import numpy as np
        from scipy import sparse
        from fedcomp.data import ClientData
        good = sparse.csr_array(np.eye(2, {WIDTH}))
        bad = sparse.csr_array(np.eye(2, {WIDTH}))
        bad.indices[1] = {index}  # SciPy's constructor does not check the bounds
        ClientData.from_lists([good, bad], [np.ones(2), np.ones(2)])
    """)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1, done.stderr  # 134 or 139 on 71822a8
    assert re_search(rf"ValueError: the sparse features of client 1: column index {index} "
                     r"of row 1 is outside 0\.\.7", done.stderr), done.stderr


def test_an_index_past_the_width_never_lands_in_another_clients_columns():
    good = sparse.csr_array(np.eye(2, WIDTH))
    bad = sparse.csr_array(np.eye(2, WIDTH))
    bad.indices[1] = WIDTH + 1  # on 71822a8: client 1's feature 1, silently
    with pytest.raises(ValueError, match="client 0: column index 9 of row 1"):
        ClientData.from_lists([bad, good], [np.ones(2), np.ones(2)])
    coo = sparse.coo_array(np.eye(2, WIDTH))
    coo.col[0] = WIDTH  # tocsr() writes past its arrays on such coordinates
    with pytest.raises(ValueError, match="client 1: column index 8 of value 0 is outside"):
        ClientData.from_lists([good, coo], [np.ones(2), np.ones(2)])


def test_an_unsorted_matrix_is_sorted_on_a_copy():
    matrix = sparse.csr_array((np.array([1.0, 2.0]), np.array([3, 1]), np.array([0, 2])),
                              shape=(1, WIDTH))
    data = ClientData.from_lists([matrix], [np.ones(1)])
    assert matrix.indices.tolist() == [3, 1]  # the caller's matrix is not rewritten
    np.testing.assert_array_equal(data.client_arrays(0)[0].toarray(), matrix.toarray())


@given(st.sampled_from(["indices", "indptr", "data"]), st.integers(0, 40),
       st.integers(-2**40, 2**40))
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_any_edited_entry_of_a_sparse_file_loads_right_or_is_refused(tmp_path, part, where,
                                                                      value):
    root, parts, _ = saved_sparse(tmp_path)
    array = parts[part]
    array[where % len(array)] = value if part != "data" else float(value)
    np.savez(root / "features.npz", **parts)
    try:
        back = ClientData.load(root)
    except ValueError as exc:
        assert "features.npz" in str(exc)
        return
    # loaded: a valid matrix of the described shape, every column of the client's own
    matrix = back.features.to_scipy()
    assert matrix.shape == (6, WIDTH)
    assert ((matrix.indices >= 0) & (matrix.indices < WIDTH)).all()


# --- damaged files and directories -----------------------------------------------------------
@pytest.mark.parametrize("damage, reason", [
    (lambda p: p.write_bytes(b"not a zip file at all" * 4), "pickled"),
    (lambda p: p.write_bytes(b""), "EOFError"),
    (lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]), "BadZipFile"),
    (lambda p: np.savez(p, a=np.ones(3)), "KeyError: format is not a file"),
], ids=["not-a-zip", "empty", "truncated", "no-csr-keys"])
def test_a_damaged_features_npz_gives_one_error_naming_it(tmp_path, damage, reason):
    root, _, _ = saved_sparse(tmp_path)
    damage(root / "features.npz")
    with pytest.raises(ValueError) as caught:
        ClientData.load(root)
    message = str(caught.value)
    assert message.startswith(f"ClientData.load: {root / 'features.npz'} is not a readable "
                              "sparse .npz file")
    assert reason in message and "allow_pickle" not in message


@pytest.mark.parametrize("edit", [
    lambda meta: meta.__setitem__("version", "1"),
    lambda meta: meta["arrays"].__setitem__("targets", "x"),
    lambda meta: meta["arrays"]["features"].__setitem__("sparse", [4, 4]),
    lambda meta: meta["arrays"]["features"].__setitem__("sparse", "ab"),
    lambda meta: meta["arrays"]["targets"].update(file=".npz", sparse=None, nnz=1),
    lambda meta: meta["arrays"]["counts"].__setitem__("shape", ["2"]),
], ids=["version-text", "spec-text", "blocks-not-tiling", "blocks-text", "sparse-targets",
        "shape-text"])
def test_a_damaged_description_gives_one_error_naming_it(tmp_path, edit):
    root, _, _ = saved_sparse(tmp_path)
    meta = json.loads((root / "client_data.json").read_text())
    edit(meta)
    (root / "client_data.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=rf"{root / 'client_data.json'} is not a ClientData "
                                         "description"):
        ClientData.load(root)


def test_files_that_disagree_name_the_directory(tmp_path):
    root, _, _ = saved_sparse(tmp_path)
    np.save(root / "counts.npy", np.array([3, 4]))
    with pytest.raises(ValueError, match=rf"ClientData\.load: {root}: ClientData: every "
                                         r"client needs 1\.\.3 samples"):
        ClientData.load(root)


# --- memory of sparse data, like dense data's ------------------------------------------------
GIB = 2**30


@pytest.fixture
def memory_16_gib(monkeypatch):
    """This machine has 16 GiB (whatever it has): the checks' verdicts do not vary."""
    monkeypatch.setattr("fedcomp.data._checks.physical_memory", lambda: 16 * GIB)


def test_sparse_data_whose_models_cannot_fit_are_refused_before_a_run(memory_16_gib):
    d = 10**9
    matrix = sparse.csr_array((np.ones(2), np.array([0, 5]), np.array([0, 1, 2])), shape=(2, d))
    data = ClientData.from_lists([matrix], [np.array([1.0, -1.0])])  # 4 nonzeros: cheap
    with pytest.raises(ValueError, match=r"Problem: the 3 models of shape \(1000000000,\) "
                                         r"\(float64\) that a run holds at least .* need 22\.4 "
                                         r"GiB, more than this machine's 16\.0 GiB of memory; "
                                         r"the features have 1000000000 columns, but the "
                                         r"largest used is 5 \(client 0\): pass n_features"):
        Problem(Logistic(), L1(0.1), data)
    # the models of 10^8 columns fit: the same data, narrower, still make a problem
    narrow = sparse.csr_array((np.ones(2), np.array([0, 5]), np.array([0, 1, 2])),
                              shape=(2, 10**8))
    Problem(Logistic(), L1(0.1), ClientData.from_lists([narrow], [np.array([1.0, -1.0])]))


def test_a_sparse_libsvm_file_with_a_huge_index_names_the_file_and_line(tmp_path,
                                                                          memory_16_gib):
    path = tmp_path / "wide.svm"
    path.write_text("+1 1:0.5 3:2\n-1 99999999999:1\n+1 2:1\n")
    with pytest.raises(ValueError, match=rf"{path}: 3 samples x 99999999999 features \(the "
                                         r"largest index, 99999999999, is on line 2\): the 3 "
                                         r"models of a run on them need 2235\.2 GiB, more "
                                         r"than this machine's 16\.0 GiB.*pass n_features"):
        load_libsvm(path, sparse=True)
    small = tmp_path / "small.svm"
    small.write_text("+1 1:0.5 3:2\n-1 2:1\n")
    X, y = load_libsvm(small, sparse=True)
    assert X.shape == (2, 3) and y.tolist() == [1.0, -1.0]


def test_a_libsvm_index_past_int64_names_the_file_and_line(tmp_path):
    path = tmp_path / "huge.svm"
    path.write_text(f"+1 1:0.5\n-1 2:1 {2**63}:1\n")
    for as_sparse in (False, True):
        with pytest.raises(ValueError, match=rf"{path}, line 2: a feature index is 2\*\*63 "
                                             rf"or more \({2**63}\); check that index"):
            load_libsvm(path, sparse=as_sparse)


def test_dense_padding_past_memory_is_refused_naming_the_largest_client(monkeypatch):
    monkeypatch.setattr("fedcomp.data._checks.physical_memory", lambda: 2**20)
    features = [np.ones((1, 100)), np.ones((1000, 100)), np.ones((1, 100))]
    with pytest.raises(ValueError, match=r"the padded features, 3 clients x 1000 samples "
                                         r"\(client 1's, every client padded to it\)"):
        ClientData.from_lists(features, [np.ones(len(f)) for f in features])


# --- NaN and inf ---------------------------------------------------------------------------
def test_a_non_finite_holdout_is_refused_like_the_clients_data():
    data = ClientData.from_lists([np.ones((2, 3))], [np.ones(2)])
    with pytest.raises(ValueError, match="holdout features hold a NaN or infinite value of "
                                         "test sample 1"):
        data.with_holdout(np.array([[1.0, 1, 1], [1, np.inf, 1]]), np.ones(2))
    with pytest.raises(ValueError, match="holdout targets hold a NaN"):
        data.with_holdout(np.ones((2, 3)), np.array([1.0, np.nan]))
    with pytest.raises(ValueError, match="holdout features hold a NaN"):
        data.with_holdout(sparse.csr_array(np.array([[np.nan, 0, 1.0]])), np.ones(1))
