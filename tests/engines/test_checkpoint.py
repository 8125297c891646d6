"""Checkpoints: exact resumes, and a checkpoint that knows the run it belongs to.

``RunOptions(resume_from=...)`` continues a run bit for bit, and refuses what would mix two
runs (another problem, data, hyperparameters, seed, participation...), a hand-edited meta
and a damaged file, each with one error naming the file and the field.
"""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedcomp
from fedcomp import Checkpoint, RunOptions, simulate
from fedcomp.algorithms import fedavg, feddr, scaffold, za1
from fedcomp.data import ClientData
from fedcomp.losses import Logistic
from fedcomp.regularizers import L1, Zero
from fedcomp.runtime import jax_like
from tests.conftest import heterogeneous_data, make_problem

CASES = [
    ("scaffold", lambda: scaffold(client_lr=0.3, local_steps=2), dict()),
    ("feddr warm-up", lambda: feddr(eta=1.0, alpha=1.0, local_steps=2), dict()),
    ("za1 sampled minibatches", lambda: za1(client_lr=0.3, local_steps=3),
     dict(clients_per_round=None, batch_size=4)),
    ("fedavg sampled", lambda: fedavg(0.3, 2), dict(clients_per_round=3, batch_size=4)),
]


def on(problem, like):
    return fedcomp.Problem(problem.loss, problem.regularizer, problem.data.to(like),
                           weighting=problem.weighting)


@pytest.mark.parametrize("backend", ["numpy", "jax"])
@pytest.mark.parametrize("name, build, kwargs", CASES, ids=[c[0] for c in CASES])
def test_a_checkpoint_resumes_to_the_iterates_of_an_uninterrupted_run(
        tmp_path, backend, name, build, kwargs):
    p = make_problem("logistic")
    if backend == "jax":
        p = on(p, jax_like())
    common = dict(eval_every=2, seed=3, metrics=["objective", "nnz"], **kwargs)
    whole = simulate(build(), p, 10, **common)
    path = tmp_path / "run.npz"
    checkpoint = Checkpoint(path, every=3)  # rows 0, 2, 4, 6: written at 0 and 6
    cut = simulate(build(), p, 10, **common,
                   options=RunOptions(callbacks=[checkpoint, lambda v: v.round >= 8]))
    assert cut.status == "stopped" and checkpoint.last_round == 6 and path.exists()
    resumed = simulate(build(), p, 10, **common, options=RunOptions(resume_from=path))
    assert resumed.status == "completed" and resumed.n_rounds == 10
    np.testing.assert_array_equal(np.asarray(resumed.x), np.asarray(whole.x))
    for a, b in zip(resumed.client_states, whole.client_states, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    strip = [{k: v for k, v in row.items() if k != "wall_s"} for row in whole.history]
    assert [{k: v for k, v in row.items() if k != "wall_s"} for row in resumed.history] == strip


def test_a_checkpoint_of_another_algorithm_or_problem_is_refused(tmp_path):
    p = make_problem("logistic")
    path = tmp_path / "c.npz"
    simulate(za1(0.3, 2), p, 2, metrics=[], options=RunOptions(callbacks=[Checkpoint(path)]))
    with pytest.raises(ValueError, match="checkpoint of 'za1', not of 'fedavg'"):
        simulate(fedavg(0.3, 2), p, 4, options=RunOptions(resume_from=path))
    # another client count: refused by the data's hash before the states' shapes
    with pytest.raises(ValueError, match="its data .* is 'sha256:"):
        simulate(za1(0.3, 2), make_problem("logistic", n_clients=4), 4,
                 options=RunOptions(resume_from=path))
    with pytest.raises(ValueError, match="past this run's rounds=1"):
        simulate(za1(0.3, 2), p, 1, options=RunOptions(resume_from=path))
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        simulate(za1(0.3, 2), p, 4, options=RunOptions(resume_from=tmp_path / "none.npz"))


# --- a checkpoint of another run ----------------------------------------------------------
BASE = dict(seed=1)  # fedavg(0.3, 2) on the logistic problem, every client


def _schedule(round_):
    return [0, 2, 4]


def _other_schedule(round_):
    return [1, 2, 4]


def _reweighted():
    p = make_problem("logistic")
    return fedcomp.Problem(p.loss, p.regularizer, p.data, weighting="samples")


# (what changes, this run's arguments, the field named, the checkpoint's value, this run's)
OTHER_RUNS = [
    ("data of the same shapes", dict(problem=lambda: make_problem("logistic", seed=5)),
     "data", "sha256:", "sha256:"),
    ("regularizer", dict(problem=lambda: make_problem("logistic", reg=L1(0.5))),
     "regularizer", "L1(alpha=0.001", "L1(alpha=0.5"),
    ("regularizer kind", dict(problem=lambda: make_problem("logistic", reg=Zero())),
     "regularizer", "L1(", "Zero("),
    ("loss", dict(problem=lambda: fedcomp.Problem(
        Logistic(l2=0.02), L1(1e-3), heterogeneous_data(), weighting="uniform")),
     "loss", "Logistic(l2=0.01)", "Logistic(l2=0.02)"),
    ("weighting", dict(problem=_reweighted), "weighting", "uniform", "samples"),
    ("hyperparameter", dict(algorithm=lambda: fedavg(0.1, 2)),
     "hyperparameters.client_lr", "0.3", "0.1"),
    ("local steps", dict(algorithm=lambda: fedavg(0.3, 3)),
     "hyperparameters.local_steps", "2", "3"),
    ("seed", dict(seed=7), "seed", "1", "7"),
    ("participation", dict(clients_per_round=3), "participation", "every client",
     "3 per round"),
    ("batch size", dict(batch_size=4), "batch_size", "None", "4"),
    ("sampling", dict(options=RunOptions(sampling=_other_schedule),
                      base=dict(options=RunOptions(sampling=_schedule))),
     "participation", "_schedule", "_other_schedule"),
    ("x0", dict(x0=np.full(6, 0.1)), "start", "sha256:", "sha256:"),
    ("compute times", dict(options=RunOptions(compute_times=2.0),
                           base=dict(options=RunOptions(compute_times=1.0))),
     "compute_times", "mean=1.0", "mean=2.0"),
]


@pytest.mark.parametrize("what, change, field, theirs, ours", OTHER_RUNS,
                         ids=[case[0] for case in OTHER_RUNS])
def test_a_checkpoint_of_another_run_is_refused_naming_the_field(
        tmp_path, what, change, field, theirs, ours):
    change = dict(change)
    base = {**BASE, **change.pop("base", {})}
    options = base.pop("options", RunOptions())
    path = tmp_path / "c.npz"
    simulate(fedavg(0.3, 2), make_problem("logistic"), 2, metrics=[], **base,
             options=replace(options, callbacks=[Checkpoint(path)]))
    algorithm = change.pop("algorithm", lambda: fedavg(0.3, 2))()
    problem = change.pop("problem", lambda: make_problem("logistic"))()
    args = {**base, **change}
    other = args.pop("options", options)
    pattern = (rf"{re.escape(str(path))} is a checkpoint of another run: its "
               rf"{re.escape(field)}( \([^)]*\))? is .*{re.escape(theirs)}.*, this run's is "
               rf".*{re.escape(ours)}")
    with pytest.raises(ValueError, match=pattern):
        simulate(algorithm, problem, 4, metrics=[], **args,
                 options=replace(other, resume_from=path))
    # the run itself resumes (same arguments)
    run = simulate(fedavg(0.3, 2), make_problem("logistic"), 4, metrics=[], **base,
                   options=replace(options, resume_from=path))
    assert [row["round"] for row in run.history] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("backend", ["numpy", "torch", "jax", "sparse"])
def test_every_backend_fingerprints_its_data_on_the_host(tmp_path, backend):
    def problem(seed):
        p = make_problem("logistic", seed=seed)
        if backend == "torch":
            import torch

            return on(p, torch.zeros(0, dtype=torch.float64))
        if backend == "jax":
            return on(p, jax_like())
        if backend == "sparse":
            data = heterogeneous_data(seed=seed)
            clients = range(data.n_clients)
            rows = [scipy.sparse.csr_array(np.where(np.abs(x) > 0.3, x, 0.0)[:n])
                    for x, n in zip(data.features, data.counts, strict=True)]
            targets = [y[:n] for y, n in zip(data.targets, data.counts, strict=True)]
            assert len(rows) == len(clients)
            return fedcomp.Problem(p.loss, p.regularizer, ClientData.from_lists(rows, targets),
                                   weighting="uniform")
        return p

    path = tmp_path / "c.npz"
    whole = simulate(za1(0.3, 2), problem(0), 4, metrics=["objective"], seed=2)
    simulate(za1(0.3, 2), problem(0), 2, metrics=["objective"], seed=2,
             options=RunOptions(callbacks=[Checkpoint(path)]))
    resumed = simulate(za1(0.3, 2), problem(0), 4, metrics=["objective"], seed=2,
                       options=RunOptions(resume_from=path))
    np.testing.assert_array_equal(fedcomp._array.to_numpy(resumed.x),
                                  fedcomp._array.to_numpy(whole.x))
    with pytest.raises(ValueError, match="its data .* is 'sha256:"):
        simulate(za1(0.3, 2), problem(5), 4, metrics=["objective"], seed=2,
                 options=RunOptions(resume_from=path))


def test_a_checkpoint_without_a_fingerprint_is_refused(tmp_path):
    p = make_problem("logistic")
    path = tmp_path / "c.npz"
    simulate(za1(0.3, 2), p, 2, metrics=[], options=RunOptions(callbacks=[Checkpoint(path)]))
    # the format before the fingerprint: no "format", no "fingerprint"
    rewrite(path, path, lambda meta: {k: v for k, v in meta.items()
                                      if k not in ("format", "fingerprint")})
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))} was written by an earlier "
                                         r"fedcomp.*"
                                         "run again from the start"):
        simulate(za1(0.3, 2), p, 4, options=RunOptions(resume_from=path))
    # a Checkpoint that simulate does not see writes no fingerprint: refused, not trusted
    checkpoint = Checkpoint(tmp_path / "hidden.npz")
    simulate(za1(0.3, 2), p, 2, metrics=[],
             options=RunOptions(callbacks=[lambda view: checkpoint(view)]))
    with pytest.raises(ValueError, match="without its run's fingerprint"):
        simulate(za1(0.3, 2), p, 4, options=RunOptions(resume_from=checkpoint.path))


def test_a_checkpoint_reused_by_a_second_run_carries_the_second_runs_fingerprint(tmp_path):
    p = make_problem("logistic")
    checkpoint = Checkpoint(tmp_path / "c.npz")
    simulate(za1(0.3, 2), p, 2, metrics=[], seed=1, options=RunOptions(callbacks=[checkpoint]))
    simulate(za1(0.3, 2), p, 2, metrics=[], seed=2, options=RunOptions(callbacks=[checkpoint]))
    simulate(za1(0.3, 2), p, 3, metrics=[], seed=2,
             options=RunOptions(resume_from=checkpoint.path))
    with pytest.raises(ValueError, match="its seed is 2, this run's is 1"):
        simulate(za1(0.3, 2), p, 3, metrics=[], seed=1,
                 options=RunOptions(resume_from=checkpoint.path))


# --- a hand-edited or damaged checkpoint --------------------------------------------------
def rewrite(source, target, edit_meta=None, edit_arrays=None):
    """``source``'s checkpoint written to ``target`` with its meta / arrays edited."""
    with np.load(source) as npz:
        arrays = {name: npz[name] for name in npz.files}
    if edit_meta is not None:
        arrays["meta"] = np.array(json.dumps(edit_meta(json.loads(str(arrays["meta"])))))
    if edit_arrays is not None:
        edit_arrays(arrays)
    with open(target, "wb") as f:
        np.savez(f, **arrays)


@pytest.fixture
def written(tmp_path):
    """A checkpoint at round 3 of za1 on the logistic problem (5 rounds planned)."""
    path = tmp_path / "c.npz"
    simulate(za1(0.3, 2), make_problem("logistic"), 3, metrics=["objective"],
             options=RunOptions(callbacks=[Checkpoint(path)]))
    return path


def resume(path, rounds=5):
    return simulate(za1(0.3, 2), make_problem("logistic"), rounds, metrics=["objective"],
                    options=RunOptions(resume_from=path))


def _set(key, value):
    def edit(meta):
        meta[key] = value
        return meta
    return edit


def _row(i, key, value):
    def edit(meta):
        meta["history"][i][key] = value
        return meta
    return edit


def _counter(name, value):
    def edit(meta):
        meta["counters"][name] = value
        return meta
    return edit


BAD_META = [
    ("round -5", _set("round", -5), "round", "-5"),
    ("round a float", _set("round", 2.5), "round", "2.5"),
    ("round true", _set("round", True), "round", "True"),
    ("round a string", _set("round", "3"), "round", "'3'"),
    ("no round", lambda m: {k: v for k, v in m.items() if k != "round"}, "round", "missing"),
    ("round earlier than the rows", _set("round", 2), "history", "ends at round 3"),
    ("history a table", _set("history", {"round": 3}), "history", "not a list"),
    ("history empty", _set("history", []), "history", "not a list"),
    ("a row a number", lambda m: {**m, "history": [1, *m["history"][1:]]}, r"history\[0\]",
     "not a row"),
    ("a row without a round", _row(1, "round", None), r"history\[1\]", "integer round"),
    ("rows repeated", lambda m: {**m, "history": m["history"][:2] + m["history"][1:]},
     r"history\[2\]\['round'\]", "rounds must rise"),
    ("wall time a string", _row(-1, "wall_s", "abc"), r"history\[-1\]\['wall_s'\]",
     "not a time"),
    ("counters a list", _set("counters", [1, 2]), "counters", "not a table"),
    ("an unknown counter", _counter("bogus", 1), "counters.*bogus", "not a counter"),
    ("a negative counter", _counter("grad_evals", -3), "counters.*grad_evals", "-3"),
    ("a fractional counter", _counter("grad_evals", 1.5), "counters.*grad_evals", "1.5"),
    ("a counter against its row", _counter("grad_evals", 1), "counters.*grad_evals",
     "the last row says"),
    ("fingerprint a list", _set("fingerprint", [1]), "fingerprint", "not a table"),
]


@pytest.mark.parametrize("what, edit, field, detail", BAD_META, ids=[c[0] for c in BAD_META])
def test_a_hand_edited_meta_is_one_error_naming_the_file_and_field(written, what, edit, field,
                                                                   detail):
    bad = written.with_name("bad.npz")
    rewrite(written, bad, edit)
    with pytest.raises(ValueError,
                       match=rf"{re.escape(str(bad))}: the checkpoint's {field}.*{detail}"):
        resume(bad)


def test_a_round_past_the_budget_is_refused_and_one_within_it_resumes(written):
    assert [row["round"] for row in resume(written, 5).history] == [0, 1, 2, 3, 4, 5]
    assert resume(written, 3).n_rounds == 3  # at its end already: nothing to run
    with pytest.raises(ValueError, match=rf"the checkpoint {re.escape(str(written))} is at "
                                         r"round 3, past "
                                         "this run's rounds=2"):
        resume(written, 2)


def _truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[:len(data) // 2])


def _without(name):
    return lambda arrays: arrays.pop(name)


def _encrypted(path):
    """Flag bit 6 (strong encryption) set in the central directory: zipfile's own
    NotImplementedError."""
    data = bytearray(path.read_bytes())
    data[data.rfind(b"PK\x01\x02") + 8] |= 0x40
    path.write_bytes(bytes(data))


DAMAGED = [
    ("not a zip", lambda p: p.write_bytes(b"hello world"), "not an .npz archive"),
    ("empty", lambda p: p.write_bytes(b""), "not an .npz archive"),
    ("truncated", _truncated, "not an .npz archive"),
    ("no meta", lambda p: rewrite(p, p, edit_arrays=_without("meta")), "no 'meta'"),
    ("meta a number", lambda p: rewrite(p, p, edit_arrays=lambda a: a.update(meta=np.ones(2))),
     "no 'meta'"),
    ("meta not JSON", lambda p: rewrite(
        p, p, edit_arrays=lambda a: a.update(meta=np.array("{round: 3"))), "not JSON"),
    ("meta a list", lambda p: rewrite(
        p, p, edit_arrays=lambda a: a.update(meta=np.array("[1, 2]"))), "a list, not a table"),
    ("a state missing", lambda p: rewrite(p, p, edit_arrays=_without("server/x")),
     "no 'server/x'"),
    ("a state of another shape", lambda p: rewrite(
        p, p, edit_arrays=lambda a: a.update({"server/x": np.zeros(3)})), "shape"),
    ("a state of text", lambda p: rewrite(
        p, p, edit_arrays=lambda a: a.update({"server/x": np.full(6, "a")})), "<U1 values"),
    ("a state of complex numbers", lambda p: rewrite(
        p, p, edit_arrays=lambda a: a.update({"server/x": np.zeros(6, complex)})),
     "complex128 values"),
    ("a header claiming encryption", _encrypted, r"damaged checkpoint \(NotImplementedError"),
]


@pytest.mark.parametrize("what, damage, message", DAMAGED, ids=[c[0] for c in DAMAGED])
def test_a_damaged_checkpoint_is_one_error_naming_the_file(written, what, damage, message):
    damage(written)
    with pytest.raises(ValueError, match=message) as error:
        resume(written)
    assert str(written) in str(error.value)


def test_a_corrupted_member_is_named_as_damage_not_a_zipfile_error(written):
    # flip one byte of the meta's stored bytes: the CRC no longer matches
    with zipfile.ZipFile(written) as z:
        info = z.getinfo("meta.npy")
    data = bytearray(written.read_bytes())
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + info.file_size - 5
    data[at] ^= 0xFF
    written.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=rf"{re.escape(str(written))} is a damaged checkpoint "
                                         r"\(BadZipFile"):
        resume(written)


def test_a_directory_is_neither_a_checkpoint_nor_where_to_write_one(tmp_path):
    with pytest.raises(ValueError, match=rf"{re.escape(str(tmp_path))} is a directory, not a "
                                         "checkpoint"):
        resume(tmp_path)
    with pytest.raises(ValueError, match=rf"{re.escape(str(tmp_path))} is a directory; name a "
                                         "file in it"):
        Checkpoint(tmp_path)
    later = tmp_path / "later"
    checkpoint = Checkpoint(later)
    later.mkdir()  # made a directory after the Checkpoint: refused when it writes
    with pytest.raises(ValueError, match="is a directory; name a file in it"):
        simulate(za1(0.3, 2), make_problem("logistic"), 1, metrics=[],
                 options=RunOptions(callbacks=[checkpoint]))
    assert not list(tmp_path.glob("*.partial.npz"))


def test_a_checkpoint_path_is_a_path_not_under_a_file(tmp_path):
    (tmp_path / "notes.txt").write_text("a file")
    with pytest.raises(ValueError, match="notes.txt, which is a file, not a directory"):
        Checkpoint(tmp_path / "notes.txt" / "c.npz")
    with pytest.raises(TypeError, match="Checkpoint's path must be a file path .* got int 3"):
        Checkpoint(3)
    with pytest.raises(TypeError, match="resume_from must be a file path .* got bool True"):
        resume(True)


@pytest.mark.parametrize("every", [True, 0, 1.0, "2"])
def test_checkpoint_every_is_a_positive_integer(tmp_path, every):
    with pytest.raises(ValueError, match=f"every must be an integer >= 1 \\(got {every!r}"):
        Checkpoint(tmp_path / "c.npz", every=every)


def test_initial_states_must_be_a_pair_of_states():
    p = make_problem("logistic")
    run = simulate(za1(0.3, 2), p, 2, metrics=[])
    with pytest.raises(ValueError, match=r"initial_states must be a pair .*\(got a "
                                         r"RunResult of 7\)"):
        simulate(za1(0.3, 2), p, 2, metrics=[], options=RunOptions(initial_states=run))
    warm = simulate(za1(0.3, 2), p, 2, metrics=[],
                    options=RunOptions(initial_states=(run.server_state, run.client_states)))
    assert warm.status == "completed"


# --- any edit: a correct resume or one error naming the file ------------------------------
JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10) | st.floats()
                    | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=3), max_leaves=6)
FIELDS = st.sampled_from(["round", "history", "counters", "fingerprint", "algorithm",
                          "format"])


@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(FIELDS, JSON), min_size=1, max_size=3),
       flip=st.none() | st.tuples(st.floats(0, 1), st.integers(1, 255)))
def test_any_edit_of_a_checkpoint_resumes_correctly_or_names_the_file(written, edits, flip):
    bad = written.with_name("edited.npz")
    rewrite(written, bad, lambda meta: {**meta, **dict(edits)})
    if flip is not None:
        data = bytearray(bad.read_bytes())
        data[int(flip[0] * (len(data) - 1))] ^= flip[1]
        bad.write_bytes(bytes(data))
    try:
        run = resume(bad)
    except ValueError as error:
        assert str(bad) in str(error)
    else:  # an edit that changes nothing the resume reads (e.g. "format")
        assert [row["round"] for row in run.history] == [0, 1, 2, 3, 4, 5]


def test_a_checkpoint_of_the_same_wrappers_in_another_order_is_refused(tmp_path):
    """dp around a compressed fedavg and a compressed dp fedavg share their name
    (``dp_fedavg``) and hyperparameters, not their iterates: the fingerprint holds the
    wrappers in the order they were applied."""
    from fedcomp.algorithms import compressed
    from fedcomp.compressors import make_compressor
    from fedcomp.privacy import private

    def dp_of_compressed():
        return private(compressed(fedavg(0.3, 2), make_compressor("qsgd", levels=4)),
                       clip=1.0, noise_multiplier=0.5)

    def compressed_dp():
        return compressed(private(fedavg(0.3, 2), clip=1.0, noise_multiplier=0.5),
                          make_compressor("qsgd", levels=4))

    assert dp_of_compressed().name == compressed_dp().name
    assert dp_of_compressed().hyperparameters == compressed_dp().hyperparameters
    p, path = make_problem("logistic"), tmp_path / "c.npz"
    simulate(dp_of_compressed(), p, 2, metrics=[],
             options=RunOptions(callbacks=[Checkpoint(path)]))
    with pytest.raises(ValueError, match=r"another run: its transforms .* is .*compress.*dp"):
        simulate(compressed_dp(), p, 4, metrics=[], options=RunOptions(resume_from=path))
    resumed = simulate(dp_of_compressed(), p, 4, metrics=[],
                       options=RunOptions(resume_from=path))
    whole = simulate(dp_of_compressed(), p, 4, metrics=[])
    np.testing.assert_array_equal(resumed.x, whole.x)
