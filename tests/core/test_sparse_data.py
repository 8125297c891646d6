"""Sparse, high-dimensional client data: the same numbers as dense copies, without the memory.

The reference of every check here is the dense path, itself checked against centralized
solutions and per-client loops elsewhere: a sparse copy of the same data must give the
same iterates (1e-12) on NumPy, torch and jax, the same reference solution and the same
estimator fit — while a round never densifies the data (a patched ``toarray``) and its
memory stays a small multiple of the CSR's, far below the dense array's.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from scipy import sparse

from fedcomp import Problem, RunOptions, simulate
from fedcomp._array import to_numpy
from fedcomp.algorithms import (
    async_feddr,
    dfedda,
    dfedda_gt,
    dfedmid,
    drefedda_gt,
    fedmid,
    za1,
)
from fedcomp.data import (
    ClientData,
    libsvm_file,
    load_libsvm,
    partition_contiguous,
    sparse_text_clients,
    split_to_clients,
)
from fedcomp.data._sparse import SparseFeatures
from fedcomp.losses import LeastSquares, Logistic, Softmax, TraceRegression
from fedcomp.regularizers import L1
from fedcomp.runtime import simulate_async, simulate_decentralized
from fedcomp.topology import chain
from tests.core.test_contract import SYNCHRONOUS, contract_problem, supports_sampling

KEEP = 0.4  # the share of entries the sparse copies keep


def sparse_and_dense(problem: Problem, seed: int = 0) -> tuple[Problem, Problem]:
    """The problem's data with most entries zeroed, as a dense and as a sparse copy."""
    rng = np.random.default_rng(seed)
    features, targets = [], []
    for i in range(problem.n_clients):
        f, t = problem.data.client_arrays(i)
        features.append(f * (rng.random(f.shape) < KEEP))
        targets.append(t)
    dense = ClientData.from_lists(features, targets)
    kept = ClientData.from_lists([sparse.csr_array(f) for f in features], targets)

    def rebuilt(data: ClientData) -> Problem:
        return Problem(problem.loss, problem.regularizer, data, weighting=problem.weighting)

    return rebuilt(dense), rebuilt(kept)


def assert_same_iterates(alg, dense: Problem, kept: Problem, batch_size) -> None:
    cpr = 4 if supports_sampling(alg, dense) else None
    ref = simulate(alg, dense, 4, batch_size=batch_size, clients_per_round=cpr, seed=2,
                   metrics=[])
    run = simulate(alg, kept, 4, batch_size=batch_size, clients_per_round=cpr, seed=2,
                   metrics=[])
    np.testing.assert_allclose(to_numpy(run.x), ref.x, rtol=0, atol=1e-12)
    assert run.counters == ref.counters  # the same counted oracle


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
@pytest.mark.parametrize("batch_size", [None, 3])
def test_every_algorithm_gives_the_same_iterates_on_sparse_and_dense_copies(alg, batch_size):
    dense, kept = sparse_and_dense(contract_problem(alg))
    assert kept.data.sparse and not dense.data.sparse
    assert_same_iterates(alg, dense, kept, batch_size)


@pytest.mark.torch
@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_torch_sparse_csr_gives_the_same_iterates(alg):
    torch = pytest.importorskip("torch")
    dense, kept = sparse_and_dense(contract_problem(alg))
    on_torch = Problem(kept.loss, kept.regularizer,
                       kept.data.to(torch.zeros(0, dtype=torch.float64)),
                       weighting=kept.weighting)
    assert isinstance(on_torch.data.like, torch.Tensor)
    assert on_torch.data.full_batch().features.matrix.layout == torch.sparse_csr
    assert_same_iterates(alg, dense, on_torch, 3)


@pytest.mark.parametrize("alg", SYNCHRONOUS, ids=lambda a: a.name)
def test_jax_bcoo_gives_the_same_iterates_eagerly(alg):
    pytest.importorskip("jax")
    from jax.experimental import sparse as jsparse

    from fedcomp.runtime import jax_like

    dense, kept = sparse_and_dense(contract_problem(alg))
    on_jax = Problem(kept.loss, kept.regularizer, kept.data.to(jax_like()),
                     weighting=kept.weighting)
    assert isinstance(on_jax.data.full_batch().features.matrix, jsparse.BCOO)
    assert_same_iterates(alg, dense, on_jax, 3)  # compile="auto": the host engine


DECENTRALIZED = [dfedda(0.05, 3, p=6.0), dfedda_gt(0.05, 3, p=6.0),
                 drefedda_gt(0.05, 3, p=6.0, radius_sq=1.0, sparsity=3), dfedmid(0.05, 3)]


@pytest.mark.parametrize("alg", DECENTRALIZED, ids=lambda a: a.name)
def test_decentralized_algorithms_give_the_same_iterates_on_sparse_data(alg):
    dense, kept = sparse_and_dense(contract_problem(alg, n_clients=6))
    runs = [simulate_decentralized(alg, p, chain(6), 3, batch_size=3, seed=1, metrics=[])
            for p in (dense, kept)]
    np.testing.assert_allclose(runs[1].x, runs[0].x, rtol=0, atol=1e-12)


def test_the_asynchronous_engine_gives_the_same_iterates_on_sparse_data():
    alg = async_feddr(eta=0.5)
    dense, kept = sparse_and_dense(contract_problem(alg))
    runs = [simulate_async(alg, p, 6, metrics=[]) for p in (dense, kept)]
    np.testing.assert_allclose(runs[1].x, runs[0].x, rtol=0, atol=1e-12)


def test_compile_true_refuses_sparse_jax_data_naming_the_eager_engine():
    pytest.importorskip("jax")
    from fedcomp.runtime import jax_like

    _, kept = sparse_and_dense(contract_problem(SYNCHRONOUS[0]))
    on_jax = Problem(kept.loss, kept.regularizer, kept.data.to(jax_like()))
    with pytest.raises(ValueError, match="compile='auto' or compile=False"):
        simulate(fedmid(client_lr=0.5), on_jax, 1, options=RunOptions(compile=True))


def test_softmax_and_least_squares_agree_on_sparse_blocks():
    rng = np.random.default_rng(3)
    matrices = [sparse.random(k, 30, density=0.2, random_state=k, format="csr")
                for k in (5, 9, 2)]
    classes = [rng.integers(0, 4, size=m.shape[0]) for m in matrices]
    kept = ClientData.from_lists(matrices, classes)
    dense = ClientData.from_lists([m.toarray() for m in matrices], classes)
    w = rng.normal(size=(3, 30, 4))
    for batch_of in (lambda d: d.full_batch(), lambda d: d.full_batch(np.array([2, 0])),
                     lambda d: d.minibatch(np.array([1, 2]), np.array([[0, 4], [1, 1]]))):
        sb, db = batch_of(kept), batch_of(dense)
        b = sb.targets.shape[0]
        np.testing.assert_allclose(Softmax(0.1).grad(w[:b], sb), Softmax(0.1).grad(w[:b], db),
                                   rtol=0, atol=1e-14)
        np.testing.assert_allclose(Softmax().value(w[:b], sb), Softmax().value(w[:b], db),
                                   rtol=1e-14)
        x = w[:b, :, 0]
        np.testing.assert_allclose(LeastSquares(0.1).hessian(x, sb),
                                   LeastSquares(0.1).hessian(x, db), rtol=0, atol=1e-14)
        np.testing.assert_allclose(Logistic().smoothness(sb), Logistic().smoothness(db),
                                   rtol=1e-12)


def test_the_largest_eigenvalue_of_a_wide_client_comes_from_lanczos(monkeypatch):
    import fedcomp.data._sparse as module

    matrix = sparse.random(40, 60, density=0.3, random_state=0, format="csr")
    data = ClientData.from_lists([matrix], [np.ones(40)])
    exact = np.linalg.eigvalsh(matrix.toarray().T @ matrix.toarray() / 40)[-1]
    monkeypatch.setattr(module, "DENSE_GRAM_SIDE", 10)  # both sides "too large"
    assert float(LeastSquares().smoothness(data.full_batch())[0]) == pytest.approx(exact,
                                                                                  rel=1e-10)


# --- the container --------------------------------------------------------------------------
def small_sparse(seed: int = 0) -> ClientData:
    matrices = [sparse.random(k, 50, density=0.1, random_state=seed + k, format="csr")
                for k in (4, 7, 1, 5)]
    return ClientData.from_lists(matrices, [np.sign(np.arange(m.shape[0]) - 1.5)
                                            for m in matrices])


def test_memory_is_proportional_to_the_nonzeros():
    data = sparse_text_clients((3000, 200_000, 0.001), n_clients=30, n_topics=5)
    nnz = data.features.nnz
    assert data.features.nbytes <= nnz * 12 + 8 * (data.n_clients * data.max_samples + 1)
    # the dense array it stands for would be thousands of times larger
    assert data.features.nbytes * 1000 < 8 * data.n_clients * data.max_samples * 200_000


def test_save_and_load_keep_the_data_sparse(tmp_path):
    data = small_sparse().with_holdout(sparse.random(6, 50, density=0.2, format="csr",
                                                     random_state=9), np.ones(6))
    back = ClientData.load(data.save(tmp_path / "d"))
    assert back.sparse and (tmp_path / "d" / "features.npz").is_file()
    assert not (tmp_path / "d" / "features.npy").exists()
    assert sparse.issparse(back.holdout[0])
    np.testing.assert_array_equal(back.features.to_scipy().toarray(),
                                  data.features.to_scipy().toarray())
    np.testing.assert_array_equal(back.counts, data.counts)
    # a dense save into the same directory removes the sparse file
    dense = ClientData.from_lists([np.ones((2, 3))], [np.ones(2)])
    dense.save(tmp_path / "d")
    assert not (tmp_path / "d" / "features.npz").exists()
    assert not ClientData.load(tmp_path / "d").sparse


def test_subset_and_moves_between_libraries_keep_every_value():
    torch = pytest.importorskip("torch")
    data = small_sparse()
    part = data.subset(np.array([3, 1]))
    for mine, theirs in ((0, 3), (1, 1)):
        np.testing.assert_array_equal(part.client_arrays(mine)[0].toarray(),
                                      data.client_arrays(theirs)[0].toarray())
    there = data.to(torch.zeros(0, dtype=torch.float32))
    assert there.features.values.dtype == torch.float32 and there.sparse
    back = there.to(np.zeros(0))
    np.testing.assert_allclose(back.features.to_scipy().toarray(),
                               data.features.to_scipy().toarray(), rtol=1e-7)


def test_bad_sparse_input_is_refused_naming_the_fix():
    with pytest.raises(ValueError, match=r"clients \[1\] are dense"):
        ClientData.from_lists([sparse.eye(2, 3, format="csr"), np.ones((2, 3))],
                              [np.ones(2), np.ones(2)])
    bad = sparse.csr_array(np.array([[1.0, 0.0, np.inf]]))
    with pytest.raises(ValueError, match="feature 2 of sample 0 of client 1 is inf"):
        ClientData.from_lists([sparse.eye(1, 3, format="csr"), bad], [np.ones(1), np.ones(1)])
    xps = pytest.importorskip("array_api_strict")
    with pytest.raises(ValueError, match="sparse features run on NumPy"):
        small_sparse().to(xps.zeros(0, dtype=xps.float64))
    with pytest.raises(ValueError, match="TraceRegression computes on dense features"):
        Problem(TraceRegression(), L1(0.1), small_sparse())


def test_splits_by_rows_by_a_column_and_by_a_partitioner(tmp_path):
    X = sparse.random(40, 12, density=0.3, random_state=1, format="csr")
    y = np.where(np.arange(40) % 2, 1.0, -1.0)
    by_rows = split_to_clients(X, y, partition_contiguous(40, 4))
    assert by_rows.sparse and by_rows.counts.tolist() == [10, 10, 10, 10]
    np.testing.assert_array_equal(by_rows.client_arrays(1)[0].toarray(), X[10:20].toarray())
    path = tmp_path / "f.svm"
    from sklearn.datasets import dump_svmlight_file

    groups = np.repeat([1.0, 2.0, 3.0, 4.0], 10)
    dump_svmlight_file(sparse.hstack([groups[:, None], X]).tocsr(), y, str(path))
    by_column = libsvm_file(str(path), n_clients=4, partition="writers", sparse=True,
                            group_column=0)
    assert by_column.sparse
    for i in range(4):  # each client holds exactly one value of column 0
        assert len(np.unique(by_column.client_arrays(i)[0][:, [0]].toarray())) == 1
    dirichlet = libsvm_file(str(path), n_clients=3, sparse=True, standardize=True,
                            partition={"name": "dirichlet", "concentration": 1.0})
    assert dirichlet.sparse and dirichlet.n_samples == 40


def test_load_libsvm_keeps_the_file_sparse_through_scikit_learns_parser(tmp_path, monkeypatch):
    from sklearn.datasets import dump_svmlight_file, load_svmlight_file

    X = sparse.random(200, 5000, density=0.002, random_state=2, format="csr")
    path = tmp_path / "wide.svm"
    dump_svmlight_file(X, np.ones(200), str(path), zero_based=False)
    theirs, _ = load_svmlight_file(str(path), n_features=5000)

    def densified(*_args, **_kwargs):
        raise AssertionError("densified")

    monkeypatch.setattr(sparse.csr_matrix, "toarray", densified)
    ours, labels = load_libsvm(path, n_features=5000, sparse=True)
    assert sparse.issparse(ours) and ours.nnz == theirs.nnz
    assert (ours != theirs).nnz == 0 and labels.tolist() == [1.0] * 200
    # without scikit-learn: fedcomp's own reader, also sparse
    monkeypatch.setattr("fedcomp.data._libsvm._read_with_scikit_learn", lambda *_: None)
    own, _ = load_libsvm(path, n_features=5000, sparse=True)
    assert sparse.issparse(own) and (own != theirs).nnz == 0


# --- a round never densifies, and its memory follows the nonzeros ----------------------------
def test_a_round_never_densifies_the_data(monkeypatch):
    data = sparse_text_clients((600, 4000, 0.01), n_clients=6, n_topics=3)
    problem = Problem(Logistic(l2=1e-3), L1(1e-4), data)
    problem.smoothness()  # set-up: the Gram of each client's few rows, formed once
    width = data.feature_shape[0]

    def refuse_wide(matrix, *_args, **_kwargs):
        if matrix.shape[1] >= width:  # the data (or a block-diagonal of it), not a Gram
            raise AssertionError(f"densified a {matrix.shape} sparse matrix")
        return sparse.coo_array(matrix).toarray()

    for kind in (sparse.csr_array, sparse.csc_array, sparse.csr_matrix, sparse.csc_matrix):
        monkeypatch.setattr(kind, "toarray", refuse_wide)
        monkeypatch.setattr(kind, "todense", refuse_wide)
    for alg in (za1(client_lr=0.5, local_steps=3), fedmid(client_lr=0.5, local_steps=3)):
        for batch_size in (None, 8):
            run = simulate(alg, problem, 2, batch_size=batch_size, clients_per_round=None,
                           metrics=["objective"])
            assert np.isfinite(run.history[-1]["objective"])


def test_an_rcv1_shaped_round_takes_memory_like_its_nonzeros():
    """rcv1's shape (20 242 x 47 236, 0.16 %, 100 clients): a FedMiD round allocates at its
    peak less than 3x the CSR's 17.8 MiB — the clients' uploaded 47 236-vectors (36 MiB,
    stacked once: block results are copied into one array as they come, and averaged
    without an array of products) and one block's work. The dense features would be
    15 GB."""
    data = sparse_text_clients("rcv1", n_clients=100)
    problem = Problem(Logistic(l2=1e-4), L1(1e-4), data)
    alg = fedmid(client_lr=0.5, local_steps=5)
    simulate(alg, problem, 1, metrics=[])  # the block measurement, cached
    tracemalloc.start()
    try:
        simulate(alg, problem, 1, metrics=[])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 3 * data.features.nbytes, (peak / 2**20, data.features.nbytes / 2**20)


@pytest.mark.slow
def test_a_news20_shaped_round_runs_in_under_4_gb():
    data = sparse_text_clients("news20", n_clients=100)
    problem = Problem(Logistic(l2=1e-4), L1(1e-4), data)
    tracemalloc.start()
    try:
        run = simulate(fedmid(client_lr=0.5, local_steps=2), problem, 1, metrics=[])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert np.all(np.isfinite(run.x))
    assert peak < 4 * 2**30, peak / 2**30


@pytest.mark.slow
def test_za1_on_news20_shaped_data_runs_in_under_4_gb_with_its_states_on_disk(tmp_path):
    """ZA1 keeps two d-vectors per client (2 x 1 GiB at news20's width with 100 clients),
    held in memory three times over during a round; with ``client_state="disk"`` the whole
    process — data generation included — stays under 4 GiB of resident memory."""
    import subprocess
    import sys

    # VmHWM, not getrusage's ru_maxrss: Linux carries the parent's peak (this test
    # session's) over fork + exec into the child's ru_maxrss
    script = (
        "from fedcomp import Problem, RunOptions, simulate\n"
        "from fedcomp.runtime._allocator import peak_memory_mb\n"
        "from fedcomp.algorithms import za1\n"
        "from fedcomp.data import sparse_text_clients\n"
        "from fedcomp.losses import Logistic\n"
        "from fedcomp.regularizers import L1\n"
        "data = sparse_text_clients('news20', n_clients=100)\n"
        "problem = Problem(Logistic(l2=1e-4), L1(1e-4), data)\n"
        f"simulate(za1(client_lr=0.5, local_steps=2), problem, 1, metrics=[], "
        f"options=RunOptions(client_state='disk', state_dir={str(tmp_path)!r}))\n"
        "print(peak_memory_mb())\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600, check=True)
    peak_mib = float(done.stdout.split()[-1])
    assert peak_mib < 4 * 1024, f"peak RSS {peak_mib / 1024:.2f} GiB"


# --- the reference solution, the metrics and the estimators on sparse data --------------------
def test_the_reference_solution_is_the_dense_one():
    dense, kept = sparse_and_dense(contract_problem(SYNCHRONOUS[0]), seed=4)
    from fedcomp.reference import solve_reference

    ref_dense = solve_reference(dense, use_cache=False)
    ref_sparse = solve_reference(kept, use_cache=False)
    np.testing.assert_allclose(ref_sparse.x, ref_dense.x, rtol=0, atol=1e-10)
    assert kept.fingerprint() != dense.fingerprint()


def test_skglm_solves_the_sparse_problem_too():
    pytest.importorskip("skglm")
    from fedcomp.reference import solve_reference

    data = sparse_text_clients((800, 3000, 0.01), n_clients=5, n_topics=3)
    problem = Problem(Logistic(), L1(1e-3), data)
    ours = solve_reference(problem, use_cache=False)
    theirs = solve_reference(problem, solver="skglm", use_cache=False)
    np.testing.assert_allclose(theirs.x, ours.x, rtol=0, atol=1e-5)
    assert np.count_nonzero(ours.x) < 0.2 * ours.x.size  # the l1 fit is sparse


def test_accuracies_and_test_loss_read_sparse_samples():
    from fedcomp.metrics import evaluate

    dense, kept = sparse_and_dense(contract_problem(SYNCHRONOUS[0]), seed=5)
    holdout = sparse.random(9, dense.data.feature_shape[0], density=0.5, random_state=1,
                            format="csr")
    labels = np.where(np.arange(9) % 3, 1.0, -1.0)
    dense = Problem(dense.loss, dense.regularizer,
                    dense.data.with_holdout(holdout.toarray(), labels))
    kept = Problem(kept.loss, kept.regularizer, kept.data.with_holdout(holdout, labels))
    x = np.linspace(-1, 1, dense.data.feature_shape[0])
    names = ["train_accuracy", "test_accuracy", "test_loss", "objective"]
    ours, theirs = evaluate(kept, x, names), evaluate(dense, x, names)
    for name in names:
        assert ours[name] == pytest.approx(theirs[name], rel=1e-12), name


def test_lasso_on_sparse_data_matches_scikit_learn():
    from sklearn.base import clone
    from sklearn.linear_model import Lasso

    from fedcomp.sklearn import FederatedLinearRegression

    rng = np.random.default_rng(0)
    X = sparse.random(300, 40, density=0.2, format="csr", random_state=1)
    w = np.zeros(40)
    w[:5] = 3.0
    y = X @ w + 0.1 * rng.normal(size=300)
    ids = rng.integers(4, size=300)
    ours = FederatedLinearRegression("l1", alpha=0.01, max_iter=3000).fit(X, y, clients=ids)
    theirs = Lasso(alpha=0.01, tol=1e-12, max_iter=100_000).fit(X, y)
    assert ours.converged_
    np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=0,
                               atol=1e-5 * np.abs(theirs.coef_).max())
    assert ours.intercept_ == pytest.approx(theirs.intercept_, abs=1e-4)
    # the same iterates from sparse and dense storage: unpreconditioned (preconditioning
    # centers a dense X but only scales a sparse one, whose zeros centering would fill)
    plain = FederatedLinearRegression("l1", alpha=0.01, max_iter=3000, precondition=False)
    stored_sparse = clone(plain).fit(X, y, clients=ids)
    dense = clone(plain).fit(X.toarray(), y, clients=ids)
    np.testing.assert_allclose(stored_sparse.coef_, dense.coef_, rtol=0, atol=1e-12)


def test_sparse_features_describe_themselves_in_one_line():
    features = small_sparse().features
    assert isinstance(features, SparseFeatures)
    assert repr(features).startswith("SparseFeatures(shape=(4, 7, 50), nnz=")
