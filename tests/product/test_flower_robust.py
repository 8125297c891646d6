"""Refusals of what would silently change or damage a Flower run (issue 43): the ``flwr``
partitioner's ``num_partitions``, ``partition_by`` and its count of partitions, a
``group_column`` that the partition would ignore, the teardown of a local deployment, the
``fedcomp.flower.Strategy`` constructor's arguments and a SuperNode's ``data-path`` file."""

from __future__ import annotations

import json
import zipfile

import numpy as np
import pytest

from fedcomp.data import federate, libsvm_file

LABELS = np.array([1.0, -1.0] * 20)
FEATURES = np.arange(40.0)[:, None]


def flwr_split(n_clients, partitioner, **options):
    pytest.importorskip("flwr_datasets")
    return federate(FEATURES, LABELS, n_clients,
                    {"name": "flwr", "partitioner": partitioner, **options}, seed=0)


def test_num_partitions_other_than_n_clients_is_refused_naming_both():
    with pytest.raises(ValueError, match=r"num_partitions=3 but the data set's n_clients=5; "
                                         r"num_partitions is n_clients: drop it, or set "
                                         r"n_clients = 3"):
        flwr_split(5, "IidPartitioner", num_partitions=3)
    # the same number is only redundant
    assert flwr_split(5, "IidPartitioner", num_partitions=5).n_clients == 5


def test_natural_id_partitioner_refuses_another_count_naming_the_natural_ids():
    with pytest.raises(ValueError, match=r"NaturalIdPartitioner makes one client per natural "
                                         r"id .* these samples have 2 natural ids, but "
                                         r"n_clients=5 was asked; set n_clients = 2"):
        flwr_split(5, "NaturalIdPartitioner")
    assert flwr_split(2, "NaturalIdPartitioner").n_clients == 2  # one client per label


def test_a_partition_by_column_the_table_lacks_is_refused():
    with pytest.raises(ValueError, match=r"partition_by='writer', but the table fedcomp hands "
                                         r"it holds only the samples' labels"):
        flwr_split(2, "NaturalIdPartitioner", partition_by="writer")


def test_group_column_with_a_partition_that_ignores_groups_is_refused(tmp_path):
    path = tmp_path / "grouped.svm"
    path.write_text("+1 1:1 3:2\n-1 1:2 2:1\n+1 1:1\n-1 1:2 3:1\n")
    with pytest.raises(ValueError, match=r"group_column=0 gives each sample a group, but "
                                         r"partition 'iid' does not split by groups .* use "
                                         r"partition = 'writers'"):
        libsvm_file(str(path), n_clients=2, group_column=0)
    with pytest.raises(ValueError, match="partition 'flwr' does not split by groups"):
        libsvm_file(str(path), n_clients=2, group_column=0,
                    partition={"name": "flwr", "partitioner": "IidPartitioner"})
    # with a partition by groups, each client holds whole groups (column 0's values 1 and 2)
    data = libsvm_file(str(path), n_clients=2, group_column=0, partition="writers")
    assert sorted({tuple(np.unique(data.features[i, :data.counts[i], 0]))
                   for i in range(2)}) == [(1.0,), (2.0,)]


# --- the teardown of a local deployment: bounded, and it reaches every process -------------------
def start_shell(group, tmp_path, script):
    """``bash -c script`` started in ``group``; waits until it wrote ``ready``."""
    import os
    import time

    proc = group.start("shell", ["bash", "-c", f"{script}"], dict(os.environ),
                       tmp_path / "shell.log")
    deadline = time.monotonic() + 60
    while not (tmp_path / "ready").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "ready").exists(), (tmp_path / "shell.log").read_text()
    return proc


@pytest.mark.xdist_group("serial")
def test_the_teardown_reaches_a_process_orphaned_while_it_runs(tmp_path, monkeypatch):
    """A process that starts another as it is stopped and exits (Flower's SuperExec starting
    a ClientApp) leaves an orphan that no walk of /proc from our processes finds: under load,
    a SIGTERM once left 12 Flower processes running. Its process group reaches it."""
    import os
    import signal

    from fedcomp._lifetime import alive
    from fedcomp.flower._local import ProcessGroup

    monkeypatch.chdir(tmp_path)
    group = ProcessGroup()
    start_shell(group, tmp_path, 'trap "sleep 300 & echo \\$! > child; exit 0" TERM; '
                                 "touch ready; while :; do sleep 0.05; done")
    group.stop(grace=2.0)
    child = int((tmp_path / "child").read_text())
    try:
        assert wait_until_dead([child], 30) == []
    finally:
        if alive(child):
            os.kill(child, signal.SIGKILL)


@pytest.mark.xdist_group("serial")
def test_a_second_ctrl_c_does_not_cut_the_teardown_short(tmp_path, monkeypatch):
    """A process that ignores SIGTERM is SIGKILLed after the grace period, even when a
    second SIGINT (here sent by that process itself) arrives meanwhile."""
    import time

    from fedcomp.flower._local import ProcessGroup

    monkeypatch.chdir(tmp_path)
    group = ProcessGroup()
    proc = start_shell(group, tmp_path, 'trap "kill -INT $PPID" TERM; touch ready; '
                                        "while :; do sleep 0.05; done")
    start = time.monotonic()
    try:
        group.stop(grace=2.0)
    except KeyboardInterrupt:
        pytest.fail("a SIGINT during the teardown interrupted it")
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.wait(timeout=30) == -9  # SIGKILLed after the grace period
    assert time.monotonic() - start < 60  # bounded (2 s of grace; generous for a busy machine)


def wait_until_dead(pids, timeout):
    import time

    from fedcomp._lifetime import alive

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(pid) for pid in pids):
        time.sleep(0.1)
    return [pid for pid in pids if alive(pid)]


@pytest.mark.xdist_group("serial")
def test_without_proc_the_teardown_still_kills_what_ignores_sigterm(tmp_path, monkeypatch):
    """Where there is no /proc (macOS), the teardown goes by our own processes."""
    from fedcomp.flower import _local

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(_local, "_process_table", lambda: None)
    monkeypatch.setattr(_local, "descendants", lambda roots: set())
    group = _local.ProcessGroup()
    proc = start_shell(group, tmp_path, 'trap "" TERM; touch ready; while :; do sleep 0.05; done')
    try:
        group.stop(grace=1.0)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.wait(timeout=30) == -9  # SIGKILLed after the grace period


# --- the Strategy's constructor: one error naming the argument (issue 43) ------------------------
def strategy(**changes):
    pytest.importorskip("flwr")
    from fedcomp.flower import Strategy

    arguments = dict(algorithm="za1", loss="logistic", regularizer="l1", num_clients=4)
    arguments.update(changes)
    return Strategy(arguments.pop("algorithm"), **arguments)


@pytest.mark.flower
@pytest.mark.parametrize(("changes", "message"), [
    ({"regularizer": {"alpha": 0.1}}, r"the regularizer table \{'alpha': 0.1\} needs 'name', "
                                      r"a registered regularizer \(zero, l1"),
    ({"loss": {"name": 3}}, r"the loss table \{'name': 3\} needs 'name'"),
    ({"regularizer": {"name": "l1", "alpha": "big"}},
     r"regularizer=\{'name': 'l1', 'alpha': 'big'\}: L1: alpha must be a real number"),
    ({"loss": {"name": "logistic", "x": 1.0}},
     r"loss=\{'name': 'logistic', 'x': 1.0\}: loss 'logistic': unknown parameter"),
    ({"evaluate_every": True}, r"evaluate_every must be an integer >= 0 \(got True\)"),
    ({"clients_per_round": True}, r"clients_per_round must be an integer in 1\.\.4 or None "
                                  r"for all clients \(got True\)"),
    ({"batch_size": False}, r"batch_size must be a positive integer or None for full "
                            r"gradients \(got False\)"),
    ({"n_classes": 1.5}, r"n_classes must be an integer >= 2.*\(got n_classes=1.5\)"),
    ({"node_timeout": float("inf")}, r"node_timeout must be > 0 and finite \(got "
                                     r"node_timeout=inf\); give the seconds"),
    ({"max_norm": "x"}, r"max_norm must be a real number \(got max_norm='x'"),
    ({"weighting": [1.0, 2.0]}, r"weighting must be 4 nonnegative numbers"),
    ({"weighting": "by_samples"}, r"unknown weighting 'by_samples'; use 'uniform', 'samples'"),
    ({"minibatch": ["with_replacement"]}, r"minibatch must be one of \('with_replacement'"),
    ({"algorithm": 3}, r"algorithm must be a fedcomp algorithm .* or a registered name .*"
                       r"\(got algorithm=3\)"),
], ids=repr)
def test_the_strategy_names_each_bad_argument_and_its_fix(changes, message):
    with pytest.raises((ValueError, TypeError), match=message):
        strategy(**changes)


@pytest.mark.flower
def test_the_strategy_keeps_good_arguments_exactly():
    """What the checks let through is stored as given: the seed not truncated, a NumPy
    integer taken, a weighting name on a large federation checked without per-client arrays."""
    built = strategy(seed=np.int64(7), node_timeout=2, max_norm=None, n_classes=3,
                     num_clients=10**12, weighting="uniform", clients_per_round=5)
    assert (built.seed, built.node_timeout, built.norm_limit) == (7, 2.0, float("inf"))
    assert built.num_clients == 10**12 and built.clients_per_round == 5
    assert strategy(weighting=[1.0, 0.0, 2.0, 1.0]).weighting == [1.0, 0.0, 2.0, 1.0]


# --- a SuperNode's data-path file: damage is one error naming the file and the node --------------
def node_file_config():
    from fedcomp.experiments import validate

    return json.dumps(validate({
        "name": "node-file", "rounds": 1, "seeds": [0], "batch_size": [10], "reference": False,
        "metrics": ["objective"], "problem": {"loss": "logistic"},
        "data": {"generator": "synthetic_fedprox", "alpha": 1.0, "beta": 1.0, "n_clients": 4,
                 "samples_per_client": 5, "n_features": 3, "n_classes": 2},
        "regularizer": {"name": "l1", "alpha": 1e-3}, "algorithms": [{"name": "za1"}]}),
        sort_keys=True)


def write_node_file(path, **changes):
    """A good data-path file of clients 2 and 0 (2 samples of 3 features each), changed."""
    arrays = dict(features=np.ones((2, 2, 3)), targets=np.array([[1.0, -1.0], [-1.0, 1.0]]),
                  counts=np.array([2, 2]), client_ids=np.array([2, 0]))
    arrays.update(changes)
    np.savez(path, **{k: v for k, v in arrays.items() if v is not None})
    return path


def load_node_file(path):
    pytest.importorskip("flwr")
    from fedcomp.flower._data import load_node_data

    return load_node_data(node_file_config(), (("data-path", str(path)), ("partition-id", 7)))


@pytest.mark.flower
@pytest.mark.parametrize(("damage", "message"), [
    ("truncated", r"is not an \.npz archive \(truncated, damaged"),
    ("not a zip", r"is not an \.npz archive"),
    ("a .npy", r"is not an \.npz archive"),
    ("no counts", r"is not a readable \.npz with the arrays features, targets, counts, "
                  r"client_ids \(KeyError: counts is not a file"),
    ("pickled ids", r"is not a readable \.npz .*\(ValueError: Object arrays cannot be loaded"),
    ("damaged member", r"is not a readable \.npz .*\((BadZipFile|error)"),
    ("float ids", r"client_ids must be distinct nonnegative integers, one per row "
                  r"\(got float64 of shape \(2,\)\)"),
    ("repeated ids", r"client_ids must be distinct nonnegative integers"),
    ("one row short", r"\['features'\] must hold one row per client id \(2 rows; got shapes "
                      r"\[\(1, 2, 3\)\]\)"),
    ("counts too big", r"\(node_config \{'partition-id': 7\}\): ClientData: every client "
                       r"needs 1\.\.2 samples, got counts in \[2, 5\]"),
    ("0/1 labels", r"\(node_config \{'partition-id': 7\}\): Logistic needs labels -1 and \+1"),
], ids=str)
def test_a_damaged_node_file_is_one_error_naming_the_file_and_the_node(tmp_path, damage,
                                                                       message):
    path = write_node_file(tmp_path / "node.npz")
    raw = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(raw[:len(raw) // 2])
    elif damage == "not a zip":
        path.write_text("client_id,feature\n0,1.5\n")
    elif damage == "a .npy":
        np.save(tmp_path / "node.npy", np.ones(3))
        (tmp_path / "node.npy").rename(path)
    elif damage == "no counts":
        write_node_file(path, counts=None)
    elif damage == "pickled ids":
        write_node_file(path, client_ids=np.array([2, 0], dtype=object))
    elif damage == "damaged member":  # a compressed member whose deflate stream is garbage
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
            for name in ("features", "targets", "counts", "client_ids"):
                archive.writestr(f"{name}.npy", b"\x00" * 64)
        data = bytearray(path.read_bytes())
        start = data.find(b"counts.npy") + len("counts.npy")
        data[start:start + 8] = b"\xff" * 8
        path.write_bytes(bytes(data))
    elif damage == "float ids":
        write_node_file(path, client_ids=np.array([2.0, 0.5]))
    elif damage == "repeated ids":
        write_node_file(path, client_ids=np.array([2, 2]))
    elif damage == "one row short":
        write_node_file(path, features=np.ones((1, 2, 3)))
    elif damage == "counts too big":
        write_node_file(path, counts=np.array([2, 5]))
    elif damage == "0/1 labels":  # the configuration's loss (logistic) refuses them
        write_node_file(path, targets=np.array([[1.0, 0.0], [0.0, 1.0]]))
    with pytest.raises(ValueError, match=message) as error:
        load_node_file(path)
    assert f"data-path {str(path)!r} (node_config {{'partition-id': 7}})" in str(error.value)
    assert "save_partition" in str(error.value) or damage in ("counts too big", "0/1 labels")


@pytest.mark.flower
def test_a_good_node_file_loads_its_rows_in_client_id_order(tmp_path):
    node = load_node_file(write_node_file(tmp_path / "node.npz",
                                          targets=np.array([[1.0, 1.0], [-1.0, -1.0]])))
    assert node.client_ids.tolist() == [0, 2] and node.n_clients == 4
    np.testing.assert_array_equal(node.problem.data.targets, [[-1.0, -1.0], [1.0, 1.0]])


@pytest.mark.flower
@pytest.mark.parametrize(("key", "value"), [("partition-id", 1.5), ("num-partitions", "two"),
                                            ("num-partitions", True)])
def test_a_node_config_that_is_not_an_integer_is_refused_naming_the_key(key, value):
    """1.5 was truncated to partition 1, 'two' was int()'s 'invalid literal', True was 1."""
    pytest.importorskip("flwr")
    from fedcomp.flower._data import load_node_data

    node_config = {"num-partitions": 2, "partition-id": 1, key: value}
    with pytest.raises(ValueError, match=rf"node_config {key}={value!r} is not an integer; "
                                         rf"start the SuperNode with --node-config '{key}=K'"):
        load_node_data(node_file_config(), tuple(sorted(node_config.items())))
    # digits as text are an integer, as before
    node = load_node_data(node_file_config(), (("num-partitions", "2"), ("partition-id", 1)))
    assert node.client_ids.tolist() == [2, 3]


# --- Flower 1.43 renames pull_messages' argument; None there means every message ------------
def test_replies_are_pulled_by_keyword_under_either_flowers_name():
    """1.41-1.42's ``pull_messages(message_ids)`` and 1.43's
    ``pull_messages(reply_to_message_ids=None)``: called by the keyword each declares, with
    the ids waited on, never None or an empty list (which 1.43 reads as every message)."""
    pytest.importorskip("flwr")
    from fedcomp.flower._server import pull_replies

    calls = []

    class Grid142:
        def pull_messages(self, message_ids):
            calls.append(("message_ids", message_ids))
            return []

    class Grid143:
        def pull_messages(self, reply_to_message_ids=None):
            calls.append(("reply_to_message_ids", reply_to_message_ids))
            return []

    pull_replies(Grid142(), {"a"})
    pull_replies(Grid143(), ("b", "c"))
    assert calls == [("message_ids", ["a"]), ("reply_to_message_ids", ["b", "c"])]
    with pytest.raises(ValueError, match="every message"):
        pull_replies(Grid143(), [])
