"""Robustness under concurrency, faults and bad input (issue 20): every failure a user or a
broken file can cause ends in one ``error:`` line naming what is wrong, never a traceback,
a silent wrong result or a half-written output directory."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from fedcomp.regularizers import L1, MCP, ElasticNet, Nuclear
from tests.product.test_cli import BC_CONFIG


# --- 13: a float32 mixing matrix is checked to float32's rounding ----------------------------
def test_a_float32_mixing_matrix_is_accepted_to_its_rounding():
    from fedcomp.topology import Topology

    rng = np.random.default_rng(0)
    n = 12
    u = rng.uniform(size=(n, n))
    u = u + u.T
    for _ in range(200):  # symmetric Sinkhorn: a dense doubly stochastic matrix in float64
        d = 1 / np.sqrt(u.sum(axis=1))
        u = d[:, None] * u * d[None, :]
    u32 = u.astype(np.float32)
    rows = np.abs(u32.astype(np.float64).sum(axis=1) - 1.0).max()
    assert 1e-10 < rows < 1e-6  # float32 entries: off by float32's rounding, not 1e-10
    assert Topology(u32).n_nodes == n
    bad = u32.copy()  # a real defect stays an error whatever the dtype
    bad[0, 0] += np.float32(1e-2)
    with pytest.raises(ValueError, match="doubly stochastic"):
        Topology(bad)
    noisy = u32.astype(np.float64) + 1e-8 * rng.standard_normal((n, n))
    with pytest.raises(ValueError, match="symmetric"):  # float64: the tight tolerance
        Topology(noisy)


# --- a tiny configuration the CLI tests run: test_cli's, on 3 clients with 1 local step ------
TINY = BC_CONFIG.replace('name = "bc"', 'name = "tiny"').replace(
    "n_clients = 5", "n_clients = 3").replace("local_steps = 2", "local_steps = 1")


def tiny(tmp_path, text=TINY, name="tiny.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def run_cli(capsys, *argv):
    """``fedcomp ARGV`` in this process: (exit status, stderr)."""
    from fedcomp.cli import main

    status = main([*map(str, argv)])
    return status, capsys.readouterr().err


def one_error_line(err):
    """The single ``error:`` line of ``err`` (no traceback)."""
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# --- 9: a name cannot lead the default output directory out of runs/ ------------------------
@pytest.mark.parametrize("name", ["../../x", "/tmp/abs", "a/b", ".."])
def test_a_name_that_is_a_path_is_refused(tmp_path, capsys, monkeypatch, name):
    work = tmp_path / "a" / "b"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)
    config = tiny(tmp_path, TINY.replace('name = "tiny"', f"name = {name!r}"))
    status, err = run_cli(capsys, "run", config, "--quiet")
    assert status == 2 and "name must be a plain file name" in one_error_line(err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "tiny.toml"]
    assert not (work / "runs").exists() and not list((tmp_path / "a").glob("x*"))


# --- 7: resume after a torn record, and of a run whose rows were lost -----------------------
def _rows(path):
    import csv

    with (path / "results.csv").open(newline="") as f:
        return list(csv.DictReader(f))


#: Two seeds, one after the other in this process.
TWO_SEEDS = ["--seeds", "0:2", "--jobs", "1", "--quiet"]


def _timeless(rows):
    """Rows without their wall-clock column (the only one a rerun changes)."""
    return [{k: v for k, v in r.items() if k != "wall_s"} for r in rows]


def test_resume_ignores_a_torn_last_record(tmp_path, capsys):
    config, out = tiny(tmp_path), tmp_path / "out"
    assert run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out)[0] == 0
    whole = _rows(out)
    records = (out / "runs.jsonl").read_text().splitlines(keepends=True)
    # seed 1 was killed while writing its record: half a line, no newline; its rows too
    (out / "runs.jsonl").write_text(records[0] + records[1][: len(records[1]) // 2])
    status, err = run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out, "--resume")
    assert status == 0, err
    assert _timeless(_rows(out)) == _timeless(whole)  # seed 1 ran again, same numbers
    lines = (out / "runs.jsonl").read_text().splitlines()
    assert [json.loads(line)["key"]["seed"] for line in lines] == ["0", "1"]  # no fragment


def test_a_damaged_record_before_the_last_is_one_error_line(tmp_path, capsys):
    config, out = tiny(tmp_path), tmp_path / "out"
    assert run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out)[0] == 0
    records = (out / "runs.jsonl").read_text().splitlines(keepends=True)
    (out / "runs.jsonl").write_text("{garbage\n" + records[1])
    status, err = run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out, "--resume")
    assert status == 2 and "runs.jsonl, line 1: not a run record" in one_error_line(err)


def test_resume_reruns_a_finished_run_whose_rows_are_missing(tmp_path, capsys):
    import csv

    config, out = tiny(tmp_path), tmp_path / "out"
    assert run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out)[0] == 0
    whole = _rows(out)
    with (out / "results.csv").open("w", newline="") as f:  # seed 1's rows lost
        writer = csv.DictWriter(f, fieldnames=list(whole[0]))
        writer.writeheader()
        writer.writerows(r for r in whole if r["seed"] == "0")
    status, err = run_cli(capsys, "run", config, *TWO_SEEDS, "--out", out, "--resume")
    assert status == 0, err
    assert "1 run(s) recorded as finished have no rows in results.csv" in err
    assert "fedmid 1" in err and "running them again" in err
    assert _timeless(_rows(out)) == _timeless(whole)


# --- 2: two runs into one output directory ------------------------------------------------
def test_a_second_run_into_a_busy_directory_stops_at_once(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    config, out = tiny(tmp_path), tmp_path / "out"
    command = [sys.executable, "-m", "fedcomp", "run", str(config), "--set", "rounds=1000000",
               "--set", "eval_every=1000000", "--out", str(out), "--quiet", "--jobs", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    first = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             env=env)
    try:
        lock = out / ".lock"
        deadline = time.monotonic() + 120
        while not (out / "config.json").exists():  # the first run has started its runs
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.05)
        # the same command again (--resume gets past the results.csv check): refused
        tic = time.monotonic()
        second = subprocess.run([*command, "--resume"], capture_output=True, text=True,
                                env=env, timeout=120)
        assert second.returncode == 2, second.stderr
        line = one_error_line(second.stderr)
        assert str(out) in line and f"pid {first.pid}" in line and "another --out" in line
        assert time.monotonic() - tic < 60 and first.poll() is None  # the first goes on
        assert (out / "parts").is_dir() and not (out / "runs.jsonl").exists()
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    from fedcomp.experiments._results import output_lock

    with output_lock(out):  # the kernel released a killed holder's lock
        assert lock.read_text().strip() == str(os.getpid())
    assert not lock.exists()


# --- 8: a bad value found late leaves nothing behind ----------------------------------------
def test_a_failure_before_any_run_finished_leaves_no_output(tmp_path, capsys):
    svm = TINY.replace('generator = "breast_cancer"',
                       f'generator = "libsvm_file"\npath = "{tmp_path / "missing.svm"}"')
    config = tiny(tmp_path, svm)
    out = tmp_path / "new"
    status, err = run_cli(capsys, "run", config, "--out", out, "--quiet")
    assert status == 2 and "missing.svm" in one_error_line(err)
    assert not out.exists()
    existing = tmp_path / "existing"  # a directory the user made: kept, and left as it was
    existing.mkdir()
    (existing / "notes.txt").write_text("mine")
    status, err = run_cli(capsys, "run", config, "--out", existing, "--quiet")
    assert status == 2 and "missing.svm" in one_error_line(err)
    assert [p.name for p in existing.iterdir()] == ["notes.txt"]


# --- 5: non-finite parameters are refused where numbers enter factories ---------------------
@pytest.mark.parametrize("override, message", [
    ("algorithms.fedmid.client_lr=inf", "algorithms.fedmid.client_lr must be a finite number"),
    ("algorithms.fedmid.client_lr=nan", "algorithms.fedmid.client_lr must be a finite number"),
    ("regularizer.alpha=inf", "regularizer.alpha must be a finite number (got inf)"),
    ("problem.l2=inf", "problem.l2 must be a finite number (got inf)"),
    ("problem.l2=-inf", "problem.l2 must be a finite number (got -inf)"),
    ('data.partition={name="dirichlet", concentration=inf}',
     "data.partition.concentration must be a finite number"),
])
def test_non_finite_parameters_are_one_error_line(tmp_path, capsys, override, message):
    refused(tmp_path, capsys, override, message)


def refused(tmp_path, capsys, override, message):
    """``fedcomp run TINY --set OVERRIDE``: exit 2, one error line with ``message``, and
    nothing in ``--out``."""
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--set", override, "--out", out,
                          "--quiet")
    assert status == 2 and message in one_error_line(err)
    assert not out.exists()


def test_factories_refuse_non_finite_numbers_and_name_them():
    from fedcomp._registry import NonFiniteParameterError
    from fedcomp.algorithms import make_algorithm
    from fedcomp.losses import make_loss
    from fedcomp.regularizers import make_regularizer

    inf, nan = float("inf"), float("nan")
    with pytest.raises(NonFiniteParameterError, match=r"fedmid.client_lr .* \(got inf\)"):
        make_algorithm("fedmid", client_lr=inf)
    with pytest.raises(NonFiniteParameterError, match=r"l1.alpha .* \(got nan\)"):
        make_regularizer("l1", alpha=nan)
    with pytest.raises(NonFiniteParameterError, match=r"logistic.l2 .* \(got inf\)"):
        make_loss("logistic", l2=inf)
    with pytest.raises(NonFiniteParameterError, match=r"mc_fedda.stage_rounds"):
        make_algorithm("mc_fedda", stage_rounds=[10, inf])
    # where an infinity means something it stays allowed: a box open on one side, no ball
    assert make_regularizer("box", lower=0.0, upper=inf).upper == inf
    assert make_algorithm("c_fedda", radius=inf).hyperparameters["radius"] == inf
    with pytest.raises(NonFiniteParameterError, match="box.upper"):  # but never NaN
        make_regularizer("box", lower=0.0, upper=nan)


@pytest.mark.parametrize("make", [
    lambda: L1(alpha=float("inf")), lambda: L1(alpha=float("nan")),
    lambda: ElasticNet(l1=0.1, l2=float("inf")), lambda: MCP(alpha=float("inf")),
    lambda: Nuclear(alpha=float("inf")),
], ids=["l1-inf", "l1-nan", "elastic-net-inf", "mcp-inf", "nuclear-inf"])
def test_regularizers_built_directly_refuse_non_finite_strengths(make):
    """The constructors check too: ``L1(alpha=inf)`` bypasses the registry's check."""
    with pytest.raises(ValueError, match=r"must be (finite|>= 0) \(got \w+=(inf|nan)\)"):
        make()


# --- 4: non-finite data are refused where they enter ----------------------------------------
def _svm_config(tmp_path, lines):
    path = tmp_path / "data.svm"
    path.write_bytes(lines if isinstance(lines, bytes) else lines.encode())
    return tiny(tmp_path, TINY.replace('generator = "breast_cancer"',
                                       f'generator = "libsvm_file"\npath = "{path}"'))


SVM_LINES = "".join(f"{1 if i % 2 else -1} 1:{i * 0.1} 2:{1 - i * 0.05}\n" for i in range(12))


@pytest.mark.parametrize("bad, message", [
    ("+1 1:0.5 2:nan\n", "line 4: feature 2 = nan is not finite"),
    ("+1 1:inf\n", "line 4: feature 1 = inf is not finite"),
    ("nan 1:0.5\n", "line 4: label nan is not finite"),
])
def test_a_non_finite_libsvm_value_names_the_file_and_line(tmp_path, capsys, bad, message):
    lines = SVM_LINES.splitlines(keepends=True)
    config = _svm_config(tmp_path, "".join([*lines[:3], bad, *lines[3:]]))
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", config, "--out", out, "--quiet")
    line = one_error_line(err)
    assert status == 2 and "data.svm" in line and message in line, line
    assert not out.exists()


def test_client_data_names_the_client_sample_and_feature_of_a_non_finite_value():
    from fedcomp.data import ClientData

    features = [np.ones((2, 3)), np.ones((4, 3))]
    features[1][2, 1] = np.inf
    with pytest.raises(ValueError, match="feature 1 of sample 2 of client 1 is inf"):
        ClientData.from_lists(features, [np.ones(2), np.ones(4)])
    with pytest.raises(ValueError, match="target of sample 3 of client 1 is nan"):
        ClientData.from_lists([np.ones((2, 3)), np.ones((4, 3))],
                              [np.ones(2), np.array([1.0, 1.0, 1.0, np.nan])])
    torch = pytest.importorskip("torch")
    data = ClientData.from_lists([np.ones((2, 3))], [np.ones(2)])
    bad = data.features.copy()
    bad[0, 1, 2] = np.nan
    with pytest.raises(ValueError, match="feature 2 of sample 1 of client 0 is nan"):
        ClientData(torch.as_tensor(bad), torch.as_tensor(data.targets), data.counts)


# --- 6: one line instead of a traceback ----------------------------------------------------
@pytest.mark.parametrize("edit, message", [
    # a string where a list is wanted is refused (not read letter by letter)
    (('metrics = ["objective"]', 'metrics = "objective"'),
     "metrics must be a non-empty list of names"),
    (("[[algorithms]]", 'algorithms = "za1"\n[[unused]]'), "unknown key(s) ['unused']"),
    (('[[algorithms]]\nname = "fedmid"\nclient_lr = 0.01\nlocal_steps = 1\n', ""),
     "algorithms must be"),
])
def test_bad_config_shapes_are_one_error_line(tmp_path, capsys, edit, message):
    text = TINY.replace(*edit)
    if edit[0] == '[[algorithms]]\nname = "fedmid"\nclient_lr = 0.01\nlocal_steps = 1\n':
        text = text.replace('name = "tiny"\n', 'name = "tiny"\nalgorithms = "za1"\n')
    status, err = run_cli(capsys, "run", tiny(tmp_path, text), "--out", tmp_path / "o",
                          "--quiet")
    assert status == 2 and message in one_error_line(err)


def test_data_larger_than_memory_is_refused_before_allocating(tmp_path, capsys):
    status, err = run_cli(capsys, "run", "seed000", "--set", "data.n_features=1000000000000",
                          "--out", tmp_path / "o", "--quiet")
    line = one_error_line(err)
    assert status == 2 and "n_features = 1000000000000 need" in line and "GiB" in line
    assert "reduce data.n_features" in line and not (tmp_path / "o").exists()


def test_a_huge_libsvm_index_is_refused_before_allocating(tmp_path, capsys):
    lines = SVM_LINES.splitlines(keepends=True)
    config = _svm_config(tmp_path, "".join([*lines[:5], "+1 99999999999:1\n", *lines[5:]]))
    status, err = run_cli(capsys, "run", config, "--out", tmp_path / "o", "--quiet")
    line = one_error_line(err)
    assert status == 2 and "GiB" in line and "99999999999, is on line 6" in line, line


def test_a_non_utf8_libsvm_file_is_named(tmp_path, capsys):
    config = _svm_config(tmp_path, SVM_LINES.encode() + b"+1 1:\xff\xfe\n")
    status, err = run_cli(capsys, "run", config, "--out", tmp_path / "o", "--quiet")
    assert status == 2 and "data.svm: not UTF-8 text" in one_error_line(err)


def test_a_non_utf8_toml_is_named(tmp_path, capsys):
    config = tiny(tmp_path)
    config.write_bytes(TINY.encode().replace(b'"tiny"', b'"t\xe9\xff"'))
    status, err = run_cli(capsys, "run", config, "--out", tmp_path / "o", "--quiet")
    assert status == 2 and "tiny.toml: not UTF-8" in one_error_line(err)


def _idx(dims, dtype_code=0x08):
    import struct

    count = int(np.prod(dims))
    return struct.pack(f">4B{len(dims)}I", 0, 0, dtype_code, len(dims), *dims) + bytes(
        i % 251 for i in range(count))


def test_broken_idx_gz_files_are_named(tmp_path):
    import gzip

    from fedcomp.data._image_files import load_idx

    whole = gzip.compress(_idx((50, 28, 28)))
    good = tmp_path / "good.gz"
    good.write_bytes(whole)
    assert load_idx(good).shape == (50, 28, 28)
    cut = tmp_path / "cut.gz"  # a download cut short
    cut.write_bytes(whole[: len(whole) // 2])
    with pytest.raises(ValueError, match=r"cut.gz: damaged or truncated gzip file"):
        load_idx(cut)
    corrupt = tmp_path / "corrupt.gz"
    corrupt.write_bytes(whole[:10] + bytes(255 - b for b in whole[10:]))
    with pytest.raises(ValueError, match=r"corrupt.gz: damaged or truncated gzip file"):
        load_idx(corrupt)


def test_an_idx_gz_is_not_inflated_beyond_its_header(tmp_path, monkeypatch):
    import gzip
    import struct

    from fedcomp.data import _image_files as _images

    # a header announcing 10 bytes, then 64 MiB of zeros (a few KiB compressed)
    bomb = tmp_path / "bomb.gz"
    bomb.write_bytes(gzip.compress(_idx((10,)) + bytes(64 << 20)))
    read = []
    real_open = gzip.open

    def counting_open(*args, **kwargs):
        stream = real_open(*args, **kwargs)
        original = stream.read

        def read_counted(size=-1):
            data = original(size)
            read.append(len(data))
            return data

        stream.read = read_counted
        return stream

    monkeypatch.setattr(_images.gzip, "open", counting_open)
    with pytest.raises(ValueError, match="bomb.gz: the header announces .* but more than 10"):
        _images.load_idx(bomb)
    assert sum(read) < 1 << 20  # it stopped reading right after the announced size
    huge = tmp_path / "huge.idx"  # a header announcing more than any memory: refused unread
    huge.write_bytes(struct.pack(">4B3I", 0, 0, 0x08, 3, *[2**32 - 1] * 3))
    with pytest.raises(ValueError, match="huge.idx: the IDX header's .* GiB"):
        _images.load_idx(huge)


def test_an_invalid_leaf_json_is_named(tmp_path):
    from fedcomp.data._image_files import load_leaf

    bad = tmp_path / "all_data_0.json"
    bad.write_text('{"users": ["w1"], "user_data": {')
    with pytest.raises(ValueError, match="all_data_0.json: not LEAF JSON"):
        load_leaf(tmp_path)
    bad.write_bytes(b'{"users": ["\xff"]}')
    with pytest.raises(ValueError, match="all_data_0.json: not LEAF JSON"):
        load_leaf(bad)


def test_plot_on_a_missing_x_column_names_the_columns(tmp_path, capsys):
    (tmp_path / "results.csv").write_text(
        "algorithm,method,batch_size,seed,round,objective,optimality,floats_up\n"
        "za1,za1,full,0,0,1.0,1.0,0\nza1,za1,full,0,1,0.5,0.1,10\n")
    status, err = run_cli(capsys, "plot", tmp_path, "--x", "sim_time")
    line = one_error_line(err)
    assert status == 2 and "no column 'sim_time'" in line and "'optimality'" in line
    assert "--x takes one of ['round', 'floats_up']" in line  # floats needs floats_down too
    assert not list(tmp_path.glob("*.png"))


def test_a_start_of_the_wrong_shape_is_named():
    from fedcomp.algorithms import make_algorithm
    from fedcomp.config import load
    from fedcomp.experiments import build_problem
    from fedcomp.runtime import simulate

    cfg = load("seed000")
    problem = build_problem({**cfg, "data": {**cfg["data"], "n_clients": 3,
                                             "samples_per_client": 10}})
    shape = tuple(problem.param_shape)
    message = f"(x0) of shape (7,) was given; this problem's models have shape {shape}"
    with pytest.raises(ValueError, match=re.escape(message)):
        simulate(make_algorithm("fedavg", client_lr=0.1), problem, 1, x0=np.zeros(7))


# --- 12: --timeout bounds the whole download -----------------------------------------------
@pytest.fixture
def trickling_server():
    """An HTTP server that sends a 400-byte file one byte every 50 ms (20 s in all)."""
    import http.server
    import threading
    import time

    stop = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "400")
            self.end_headers()
            for _ in range(400):
                if stop.is_set():
                    return
                try:
                    self.wfile.write(b"1")
                    self.wfile.flush()
                except OSError:  # the client gave up
                    return
                time.sleep(0.05)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()


def test_download_timeout_bounds_the_whole_download(trickling_server, tmp_path, capsys):
    import time

    from fedcomp.data import download

    tic = time.monotonic()
    with pytest.raises(TimeoutError, match="took longer than timeout=1 s"):
        download(f"{trickling_server}/file", tmp_path / "file", None, timeout=1.0)
    assert time.monotonic() - tic < 5  # each read alone never waits a whole second
    assert not list(tmp_path.iterdir())  # no partial file
    tic = time.monotonic()
    status, err = run_cli(capsys, "data", "download", "a9a", "--data-dir", tmp_path,
                          "--url", f"{trickling_server}/a9a", "--timeout", "1")
    assert status == 2 and "took longer than timeout=1 s" in one_error_line(err)
    assert time.monotonic() - tic < 5


# --- found by the property test (tests/core/test_config_fuzz.py) ---------------------------------
@pytest.mark.parametrize("override, message", [
    ("batch_size=[]", "batch_size must be 'full', a positive integer or a list of distinct"),
    ("batch_size=[4, 4]", "batch_size must be 'full', a positive integer or a list of distinct"),
    ("metrics=[]", "metrics must be a non-empty list of names"),
    ("metrics=['']", "metrics: unknown metric ''"),
    ("algorithms.fedmid.label=0", "label must be a non-empty string"),
    ("problem.weighting={a=1}", "weighting must be 'uniform', 'samples' or 3 nonnegative"),
    ("eval_every=0", "eval_every must be a positive integer"),
])
def test_values_the_fuzzer_found_are_one_error_line(tmp_path, capsys, override, message):
    refused(tmp_path, capsys, override, message)


def test_a_file_system_without_locks_runs_unlocked_with_a_warning(tmp_path, capsys,
                                                                 monkeypatch):
    import errno
    import fcntl

    from fedcomp.experiments._results import output_lock

    def no_locks(fd, operation):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(fcntl, "flock", no_locks)
    with output_lock(tmp_path / "out"):
        pass
    assert "does not lock files (No locks available)" in capsys.readouterr().err
