"""Issue 43's low findings of the command line, the configuration and the experiment runner:
each probe as a test that fails on 71822a8. Every odd input ends in one ``error:`` line naming
the value, the file or the address (never a raw traceback, a hang or a message that is not
true), and a failure before the first run leaves no output directory behind.
"""

from __future__ import annotations

import pytest

from fedcomp.config import MAX_DEPTH, ConfigError, apply_override, load, parse_seeds
from tests.product.test_robust import one_error_line, run_cli, tiny


# --- --seeds 0:10^20 ended in OverflowError (len() of a range past 2**63) --------------------
@pytest.mark.parametrize("text", ["0:100000000000000000000", "5:99999999999999999999999999"])
def test_a_seed_range_past_a_machine_integer_names_the_value_and_the_limit(text):
    with pytest.raises(ConfigError, match=rf"--seeds {text} plans \d+ runs, more than the "
                                          r"100000 .*MAX_PLANNED_RUNS"):
        parse_seeds(text)


def test_a_huge_seed_range_is_one_error_line_in_the_command(tmp_path, capsys):
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--seeds", "0:100000000000000000000",
                          "--dry-run")
    assert status == 2 and "--seeds 0:100000000000000000000 plans" in one_error_line(err)


# --- dotted TOML keys 2000 deep ended in a RecursionError -----------------------------------
def test_dotted_keys_nested_too_deeply_name_the_file_and_the_limit(tmp_path):
    path = tiny(tmp_path, "a" + ".a" * 2000 + " = 1\n",
                name="deep.toml")
    with pytest.raises(ConfigError, match=rf"deep.toml: tables or arrays nested more than "
                                          rf"{MAX_DEPTH} levels deep"):
        load(path)


def test_a_deep_configuration_is_one_error_line_in_the_command(tmp_path, capsys):
    from tests.product.test_robust import TINY

    path = tiny(tmp_path, "a" + ".a" * 2000 + " = 1\n" + TINY, name="deep.toml")
    status, err = run_cli(capsys, "run", path, "--dry-run")
    assert status == 2 and "deep.toml: tables or arrays nested more than" in one_error_line(err)


def test_the_nesting_limit_leaves_room_for_every_built_in_configuration():
    from fedcomp.config import experiment_names
    from fedcomp.config._load import nesting_depth

    deepest = max(nesting_depth(load(name)) for name in experiment_names())
    assert 2 <= deepest <= MAX_DEPTH // 2
    assert nesting_depth({"a": [[{"b": 1}]]}) == 4


# --- --set on odd input ----------------------------------------------------------------------
@pytest.mark.parametrize("assignment, message", [
    ("=", "--set: empty key in '='"),
    ("=1", "--set: empty key in '=1'"),
    (".=1", "--set: empty key"),
    ("rounds", "--set expects key=value"),
    ("a." * 3000 + "b=1", "3001 dotted parts, more than the 32 levels"),
    ("x=" + "[" * 3000 + "]" * 3000, "--set 'x': value '" + "[" * 40 + "...' is nested too "
                                      "deeply"),
    ("data.x=" + "[" * 40 + "]" * 40, "--set 'data.x': tables or arrays nested more than 32"),
    ("algorithms.fedmid.x=" + "[" * 40 + "]" * 40, "--set 'algorithms.fedmid.x': tables or "
                                                   "arrays nested"),
])
def test_odd_assignments_are_one_error_naming_them(assignment, message):
    config = {"rounds": 3, "data": {"seed": 0}, "algorithms": [{"name": "fedmid"}]}
    with pytest.raises(ConfigError) as info:
        apply_override(config, assignment)
    assert message in str(info.value) and len(str(info.value)) < 400


@pytest.mark.parametrize("assignment", ["rounds=99999999999999999999999999",
                                        "algorithms.fedmid.client_lr=1e400", "rounds=nan"])
def test_huge_numbers_reach_validation_and_are_named_there(tmp_path, capsys, assignment):
    """A number past float or int64 is set as written and judged by the configuration's
    validation (rounds of 10^26 is a valid, endless run; inf and nan are refused)."""
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--set", assignment, "--dry-run")
    assert "Traceback" not in err
    if status:
        assert status == 2 and one_error_line(err)


def test_deep_set_is_one_error_line_in_the_command(tmp_path, capsys):
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--set", "a." * 3000 + "b=1",
                          "--dry-run")
    assert status == 2 and "dotted parts" in one_error_line(err)


# --- load_results on a damaged file gave UnicodeDecodeError or ParserError -------------------
@pytest.mark.parametrize("content", [
    b"\xff\xfe\x00\x81 not text\n\x89PNG",          # UnicodeDecodeError
    b"algorithm,seed\nfedmid,0\nfedmid,0,1,2,3,4\n",  # ParserError: a ragged row
    b'algorithm,seed\n"fedmid,0\n',                 # ParserError: EOF inside a quote
    b"",                                            # EmptyDataError
])
def test_load_results_of_a_damaged_file_names_it(tmp_path, content):
    pytest.importorskip("pandas")
    import fedcomp

    (tmp_path / "results.csv").write_bytes(content)
    with pytest.raises(ValueError, match=r"results.csv: not a results.csv fedcomp can read"):
        fedcomp.load_results(tmp_path)


# --- Ray: an address where something listens but is not Ray hung for 590 s and more --------
@pytest.fixture
def http_server():
    """An HTTP server on a free loopback port (what the Ray dashboard's 8265 is), in a thread."""
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # no request lines in the test's output
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def silent_listener():
    """A loopback port that accepts connections (the kernel's backlog) and never answers:
    what a frozen or dying Ray head looks like from outside."""
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    try:
        yield sock
    finally:
        sock.close()


@pytest.mark.xdist_group("serial")
@pytest.mark.parametrize("scheme", ["", "ray://"])
def test_an_http_server_as_ray_address_fails_at_once_naming_it(tmp_path, capsys, http_server,
                                                              scheme):
    import time

    pytest.importorskip("ray")
    out = tmp_path / "out"
    tic = time.perf_counter()
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--out", out, "--executor", "ray",
                          "--ray-address", scheme + http_server, "--quiet")
    assert time.perf_counter() - tic < 60  # before: Ray's lines for 590 s and more
    line = one_error_line(err)
    assert status == 2 and f"{scheme}{http_server} answers, but not as a Ray cluster" in line
    assert "ray start --head" in line
    assert not out.exists()  # before: .lock, config.json, models/, parts/


@pytest.mark.xdist_group("serial")
def test_a_head_that_accepts_but_never_answers_fails_after_the_deadline(
        tmp_path, capsys, silent_listener, monkeypatch):
    from fedcomp.runtime import _ray_address

    pytest.importorskip("ray")
    monkeypatch.setattr(_ray_address, "HANDSHAKE_TIMEOUT", 2.0)
    address = f"127.0.0.1:{silent_listener.getsockname()[1]}"
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--out", out, "--executor", "ray",
                          "--ray-address", address, "--quiet")
    line = one_error_line(err)
    assert status == 2 and f"no Ray cluster answered at {address} within 2 s" in line
    assert not out.exists()  # before: a stale .lock and the run's files


@pytest.mark.xdist_group("serial")
def test_sigterm_while_connecting_to_ray_exits_promptly_leaving_nothing(tmp_path,
                                                                        silent_listener):
    """Before: SIGTERM was not honoured within 10 s, and .lock, config.json, models/ and
    parts/ were left behind; and the message named a directory that did not exist."""
    import signal
    import subprocess
    import sys
    import time

    pytest.importorskip("ray")
    address = f"127.0.0.1:{silent_listener.getsockname()[1]}"
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "fedcomp", "run", str(tiny(tmp_path)),
                             "--out", str(out), "--executor", "ray", "--ray-address", address,
                             "--quiet"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    connections = []
    try:
        silent_listener.settimeout(120)  # the command connects once its imports are done
        connections.append(silent_listener.accept()[0])
        silent_listener.settimeout(10)  # the TCP check, then the handshake's connection
        try:
            connections.append(silent_listener.accept()[0])
        except TimeoutError:
            pass
        time.sleep(0.5)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)  # before: not within 10 s (Ray's C++ loop)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for conn in connections:
            conn.close()
    assert proc.returncode == 128 + signal.SIGTERM, err
    assert "Traceback" not in err and "nothing was kept" in err and "kept in" not in err
    assert not out.exists()


# --- an interrupt before the first row pointed to a directory that was removed ---------------
def test_an_interrupt_before_any_run_finished_says_nothing_was_kept(tmp_path, capsys,
                                                                   monkeypatch):
    from fedcomp.experiments import _runner

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(_runner, "execute_all", interrupted)
    out = tmp_path / "out"
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--out", out, "--quiet")
    assert status == 130 and not out.exists()
    assert f"no run had finished: nothing was kept ({out} does not exist)" in err
    assert "kept in" not in err and "--resume" not in err  # before: "kept in OUT/"


# --- --resume kept a finished run's torn rows -------------------------------------------------
HEADER = "algorithm,seed,round,objective\r\n"
WHOLE = "fedmid,0,0,0.69\r\nfedmid,0,1,0.68\r\nfedmid,1,0,0.69\r\n"


@pytest.mark.parametrize("tail, line", [
    ("fedmid,1,1,0.6", 5),      # the last value cut, no line end
    ("fedmid,1,1\r\n", 5),      # a row short of fields
    ("fedmid,1", 5),            # cut inside its key: its run is the row before's
])
def test_resume_drops_a_torn_row_with_its_run_naming_the_file_and_line(
        tmp_path, capsys, tail, line):
    import json

    from fedcomp.experiments._results import keep_finished_rows

    path = tmp_path / "results.csv"
    path.write_text(HEADER + WHOLE + tail, newline="")
    finished = {json.dumps(["fedmid", "0"]): {}, json.dumps(["fedmid", "1"]): {}}
    present = keep_finished_rows(path, finished, ["algorithm", "seed"])
    assert present == {json.dumps(["fedmid", "0"])}  # before: seed 1 too, its torn row kept
    assert path.read_bytes().decode() == (HEADER + WHOLE).replace("fedmid,1,0,0.69\r\n", "")
    err = capsys.readouterr().err
    assert f"{path}, line {line}: a torn row" in err and "runs again" in err


@pytest.mark.slow  # two runs and a resume: about 10 s on a busy machine
def test_resume_reruns_the_run_whose_last_row_was_cut(tmp_path, capsys):
    config, out = tiny(tmp_path), tmp_path / "out"
    assert run_cli(capsys, "run", config, "--seeds", "0:2", "--out", out, "--quiet",
                   "--jobs", "1")[0] == 0
    whole = (out / "results.csv").read_bytes()
    (out / "results.csv").write_bytes(whole[:-12])  # the last row's wall_s cut mid-write
    status, err = run_cli(capsys, "run", config, "--seeds", "0:2", "--out", out, "--quiet",
                          "--jobs", "1", "--resume")
    assert status == 0 and "line 7: a torn row" in err
    again = (out / "results.csv").read_bytes()
    assert again.endswith(b"\r\n") and len(again.splitlines()) == len(whole.splitlines())
    # every cell but wall_s (the last) as in the untorn file
    assert ([r.rsplit(b",", 1)[0] for r in again.splitlines()]
            == [r.rsplit(b",", 1)[0] for r in whole.splitlines()])


# --- an unreachable HTTP MLflow store gave 253 s of silence -----------------------------------
@pytest.mark.xdist_group("serial")
def test_an_unreachable_mlflow_server_is_one_error_naming_it(tmp_path, capsys):
    import socket
    import time

    from tests.product.test_robust import TINY

    pytest.importorskip("mlflow")
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        uri = f"http://127.0.0.1:{s.getsockname()[1]}"
    config = tiny(tmp_path, TINY + f'[tracking]\nmlflow = {{uri = "{uri}"}}\n')
    out = tmp_path / "out"
    tic = time.perf_counter()
    status, err = run_cli(capsys, "run", config, "--out", out, "--quiet")
    assert time.perf_counter() - tic < 60  # before: 253 s of silence
    line = one_error_line(err)
    assert status == 2 and f"the MLflow server {uri} does not answer" in line
    assert "sqlite:///" in line and not out.exists()


@pytest.mark.xdist_group("serial")
def test_an_mlflow_server_that_answers_passes_the_check(http_server):
    from fedcomp.experiments._runner import check_mlflow_server

    check_mlflow_server(f"http://{http_server}")  # a 404 for /health is an answer
    check_mlflow_server("sqlite:///nowhere/mlflow.db")  # not a server: left to MLflow


@pytest.mark.xdist_group("serial")
def test_auto_is_checked_at_the_address_ray_would_join(silent_listener, monkeypatch):
    """--ray-address auto (or RAY_ADDRESS=auto) joins the cluster named in Ray's address
    file, which may be one that died: that address gets the handshake too."""
    services = pytest.importorskip("ray._private.services")
    from fedcomp.runtime._ray_address import check_ray_address

    address = f"127.0.0.1:{silent_listener.getsockname()[1]}"
    monkeypatch.setattr(services, "get_ray_address_from_environment", lambda *a: address)
    with pytest.raises(ValueError, match=rf"no Ray cluster answered at {address} \(the "
                                         r"cluster 'auto' finds\) within 1 s"):
        check_ray_address("auto", handshake=1.0)


# --- `fedcomp list | head` ended with "error: [Errno 32] Broken pipe" ------------------------
def test_a_reader_that_closes_the_pipe_ends_the_command_quietly():
    """stdout's reader is gone before the command writes (its imports take far longer than
    closing the pipe): the status says so (128 + SIGPIPE) and stderr stays empty."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader went away, as `head` does after its lines
    try:
        proc = subprocess.run([sys.executable, "-m", "fedcomp", "list"], stdout=write,
                              stderr=subprocess.PIPE, text=True, timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 141 and proc.stderr == "", proc.stderr
