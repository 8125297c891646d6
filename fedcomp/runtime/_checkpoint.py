"""Checkpoints: a run's state written to disk and read back.

A checkpoint (:class:`Checkpoint`, :func:`save_checkpoint`) is one ``.npz`` file: the
server's and the clients' states field by field, the counters, the rows so far and the
round, so that ``RunOptions(resume_from=path)`` continues to the iterates an
uninterrupted run reaches, bit for bit (every random draw is keyed by the round).

A checkpoint knows the run it belongs to: its ``meta`` holds the run's fingerprint
(:mod:`fedcomp.runtime._fingerprint`: the algorithm and its hyperparameters, the loss, the
regularizer, a hash of the clients' data, the weighting, the seed, the participation, the
batch size and the start), and ``resume_from`` refuses a checkpoint whose fingerprint is
not the resuming run's, naming the field that differs; the shapes of the states alone
would accept another problem's or another seed's. A checkpoint without a fingerprint
(written by an earlier fedcomp) is refused too: nothing tells whose it is. Its ``meta``
(round, rows, counters) is checked before anything is restored, and a damaged file is one
``ValueError`` naming the file, never a raw ``zipfile`` or ``json`` error.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import zipfile
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._array import asarray_like, to_numpy
from ..oracle import Counters
from ._fingerprint import FINGERPRINT_FIELDS, first_difference
from ._stopping import RunView, check_callbacks

#: ``meta["format"]`` of the checkpoints this version writes (2: with the run's fingerprint).
FORMAT = 2

class Checkpoint:
    """Write the run's state to ``path`` every ``every`` evaluated rounds (and never stop it).

    The file is replaced atomically (written beside it, then renamed), so an interrupted
    run leaves the last complete checkpoint. Resume with
    ``simulate(..., options=RunOptions(resume_from=path))``:
    :func:`~fedcomp.runtime.simulate` ties each ``Checkpoint`` of the options' ``callbacks``
    to the run (:meth:`bind`), so that the file carries the run's fingerprint, which
    ``resume_from`` checks.
    """

    def __init__(self, path: str | os.PathLike[str], every: int = 1) -> None:
        if not (isinstance(every, int) and not isinstance(every, bool) and every >= 1):
            raise ValueError(f"every must be an integer >= 1 (got {every!r})")
        self.path, self.every = checkpoint_path(path), every
        _check_writable(self.path)
        self.last_round: int | None = None
        self._run: tuple[list[dict[str, Any]], dict[str, Any]] | None = None

    def bind(self, history: list[dict[str, Any]], fingerprint: dict[str, Any]) -> None:
        """Tie the checkpoint to the run whose rows are ``history``: the files it writes
        for that run carry ``fingerprint``, the run's
        :func:`~fedcomp.runtime._fingerprint.run_fingerprint`."""
        self._run = (history, fingerprint)

    def __call__(self, view: RunView) -> None:
        if view.round % self.every == 0:
            # the rows' list is the run's identity: a Checkpoint reused by a later run of
            # another runner never writes an earlier run's fingerprint
            bound = self._run is not None and self._run[0] is view.history
            save_checkpoint(self.path, view, self._run[1] if bound else None)  # type: ignore[index]
            self.last_round = view.round


def bind_checkpoints(callbacks: Any, history: list[dict[str, Any]],
                     fingerprint: dict[str, Any]) -> None:
    """Tie every :class:`Checkpoint` of ``callbacks`` to the run whose rows are
    ``history``."""
    for callback in check_callbacks(callbacks):
        if isinstance(callback, Checkpoint):
            callback.bind(history, fingerprint)


def has_checkpoint(callbacks: Any) -> bool:
    """Whether ``callbacks`` hold a :class:`Checkpoint`."""
    return any(isinstance(callback, Checkpoint) for callback in check_callbacks(callbacks))


def checkpoint_path(path: Any, what: str = "Checkpoint's path") -> Path:
    """``path`` (a ``str`` or ``os.PathLike``) as a :class:`~pathlib.Path`."""
    if not isinstance(path, str | os.PathLike):
        raise TypeError(f"the {what} must be a file path (str or os.PathLike), got "
                        f"{type(path).__name__} {path!r}")
    return Path(path)


def _check_writable(path: Path) -> None:
    """Where a checkpoint can be written: not a directory, nor under a file."""
    if path.is_dir():
        raise ValueError(f"the checkpoint path {path} is a directory; name a file in it, "
                         f"e.g. {path / 'checkpoint.npz'}")
    above = next((parent for parent in path.parents if parent.exists()), None)
    if above is not None and not above.is_dir():
        raise ValueError(f"the checkpoint path {path} is under {above}, which is a file, "
                         "not a directory; name another path")


def check_fingerprint(path: Path, meta: dict[str, Any], fingerprint: dict[str, Any]) -> None:
    """Refuse a checkpoint whose fingerprint is not ``fingerprint`` (this run's), or that
    has none."""
    if "fingerprint" not in meta:
        raise ValueError(f"{path} was written by an earlier fedcomp, without the fingerprint "
                         "of its run (algorithm, hyperparameters, data, seed, ...): nothing "
                         "tells whether it belongs to this run, so it is refused; run again "
                         "from the start (without resume_from)")
    saved = meta["fingerprint"]
    if saved is None:
        raise ValueError(f"{path} was written without its run's fingerprint (by a Checkpoint "
                         "called outside simulate's callbacks, or by another runner), so it "
                         "is refused; pass the Checkpoint itself in RunOptions(callbacks=[...]) "
                         "and run again")
    if not isinstance(saved, dict):
        raise _meta_error(path, "fingerprint", f"is {saved!r}, not a table")
    found = first_difference(saved, fingerprint)
    if found is not None:
        field, theirs, ours = found
        what = FINGERPRINT_FIELDS.get(field.split(".")[0])
        raise ValueError(f"{path} is a checkpoint of another run: its {field}"
                         f"{f' ({what})' if what else ''} is "
                         f"{theirs!r}, this run's is {ours!r}; resume with the arguments of "
                         "the run that wrote it, or start afresh without resume_from")


# --- writing --------------------------------------------------------------------------------
def _fields(prefix: str, state: Any) -> dict[str, np.ndarray]:
    if state is None:
        return {}
    if not hasattr(state, "_fields"):
        raise TypeError(f"a checkpoint stores NamedTuples of arrays; this state is a "
                        f"{type(state).__name__}")
    return {f"{prefix}/{name}": to_numpy(value) for name, value in
            zip(state._fields, state, strict=True)}


def save_checkpoint(path: str | os.PathLike[str], view: RunView,
                    fingerprint: dict[str, Any] | None = None) -> Path:
    """Write ``view``'s states, counters and rows to ``path`` (``.npz``), atomically, with
    the run's ``fingerprint`` (:func:`~fedcomp.runtime._fingerprint.run_fingerprint`;
    without it, ``resume_from`` refuses the file)."""
    if view.client_states is None:
        raise ValueError("this client executor keeps its client states out of this process "
                         "(Ray actors, Flower nodes): a checkpoint needs the in-process "
                         "simulator")
    path = Path(path)
    _check_writable(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"format": FORMAT, "round": view.round, "algorithm": view.algorithm,
            "fingerprint": fingerprint, "counters": view.counters.as_dict(),
            "history": view.history}
    arrays = {**_fields("server", view.server_state), **_fields("clients", view.client_states),
              "meta": np.array(json.dumps(meta, default=float))}
    scratch = path.with_name(path.name + ".partial.npz")
    np.savez(scratch, **arrays)  # type: ignore[arg-type]  # numpy's stubs: allow_pickle
    os.replace(scratch, path)
    return path


# --- reading --------------------------------------------------------------------------------
def adopt_states(given: Any, template: Any, what: str) -> Any:
    """``given`` states (a previous run's) in the type, namespace and device of
    ``template`` (this run's ``init``), their shapes checked: ``what`` names them."""
    if type(given) is not type(template):
        raise ValueError(f"{what} are {type(given).__name__}, this algorithm's "
                         f"{type(template).__name__}: states of another algorithm")
    values = []
    for name, value, start in zip(template._fields, given, template, strict=True):
        if hasattr(start, "shape"):
            if tuple(np.shape(value)) != tuple(start.shape):
                raise ValueError(f"{what}: field {name} has shape {tuple(np.shape(value))}, "
                                 f"this run's {tuple(start.shape)}: another problem or client "
                                 "count")
            values.append(asarray_like(to_numpy(value), start))
        else:  # a Python number
            values.append(type(start)(value))
    return type(template)(*values)


def adopt_initial_states(given: Any, server_template: Any, client_template: Any
                         ) -> tuple[Any, Any]:
    """``simulate``'s ``initial_states`` (a pair) adopted into ``init``'s states."""
    if not (isinstance(given, tuple | list) and len(given) == 2):
        raise ValueError(f"initial_states must be a pair (server_state, client_states), e.g. "
                         f"(run.server_state, run.client_states) of an earlier RunResult "
                         f"(got a {type(given).__name__}"
                         f"{f' of {len(given)}' if isinstance(given, tuple | list) else ''})")
    return (adopt_states(given[0], server_template, "initial_states' server state"),
            adopt_states(given[1], client_template, "initial_states' client states"))


class Restored(NamedTuple):
    """A checkpoint read back: the states on the data's device, the rest as saved."""

    round: int
    server_state: Any
    client_states: Any
    counters: Counters
    history: list[dict[str, Any]]


def _meta_error(path: Path, field: str, problem: str) -> ValueError:
    return ValueError(f"{path}: the checkpoint's {field} {problem}; the file was edited or "
                      "damaged: resume from another checkpoint, or start afresh without "
                      "resume_from")


def _read(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """The meta (a JSON table) and the arrays of the checkpoint at ``path``."""
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    if path.is_dir():
        raise ValueError(f"{path} is a directory, not a checkpoint: name the .npz file that "
                         "a Checkpoint wrote")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path} is not a checkpoint: not an .npz archive (truncated, "
                         "damaged, or another kind of file)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {name: npz[name] for name in npz.files}
    except Exception as exc:
        # whatever the archive's bytes make zipfile or NumPy raise is damage: BadZipFile,
        # zlib.error, EOFError, a NumPy header's ValueError, struct.error, and a flag bit
        # or version overwritten in a zip header gives NotImplementedError
        raise ValueError(f"{path} is a damaged checkpoint ({type(exc).__name__}: {exc}); "
                         "resume from another checkpoint, or start afresh") from None
    text = arrays.pop("meta", None)
    if text is None or text.shape != () or text.dtype.kind != "U":
        raise ValueError(f"{path} is not a checkpoint: it has no 'meta' text (the run's round, "
                         "rows and fingerprint)")
    try:
        meta = json.loads(str(text))
    except json.JSONDecodeError as exc:
        raise _meta_error(path, "meta", f"is not JSON ({exc})") from None
    if not isinstance(meta, dict):
        raise _meta_error(path, "meta", f"is a {type(meta).__name__}, not a table")
    return meta, arrays


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:
    """A nonnegative whole number (JSON may have written an integer as ``12.0``)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0 and value == int(value))


def _check_history(path: Path, history: Any, round_: int) -> list[dict[str, Any]]:
    """The rows: tables whose rounds rise from 0 or more to the checkpoint's round."""
    if not (isinstance(history, list) and history):
        raise _meta_error(path, "history", f"is {str(history)[:60]}, not a list of rows")
    previous = -1
    for i, row in enumerate(history):
        if not (isinstance(row, dict) and _is_int(row.get("round"))):
            raise _meta_error(path, f"history[{i}]", f"is {str(row)[:60]}, not a row with "
                              "an integer round")
        if row["round"] <= previous:
            raise _meta_error(path, f"history[{i}]['round']", f"is {row['round']}, after a "
                              f"row of round {previous}: rounds must rise")
        previous = row["round"]
    if previous != round_:
        raise _meta_error(path, "history", f"ends at round {previous}, not at the checkpoint's "
                          f"round {round_}")
    for column in ("wall_s", "sim_time"):
        value = history[-1].get(column, 0.0)
        if not (isinstance(value, int | float) and not isinstance(value, bool)
                and math.isfinite(value) and value >= 0):
            raise _meta_error(path, f"history[-1][{column!r}]", f"is {value!r}, not a time "
                              ">= 0")
    return history


def _check_counters(path: Path, counters: Any, last_row: dict[str, Any]) -> Counters:
    """The counters: known names with nonnegative whole numbers, those of the last row."""
    known = [f.name for f in dataclasses.fields(Counters)]
    if not isinstance(counters, dict):
        raise _meta_error(path, "counters", f"are {counters!r}, not a table")
    restored = Counters()
    for name, value in counters.items():
        if name not in known:
            raise _meta_error(path, f"counters[{name!r}]", f"is not a counter (those are "
                              f"{', '.join(known)})")
        if not _is_count(value):
            raise _meta_error(path, f"counters[{name!r}]", f"is {value!r}, not a whole "
                              "number >= 0")
        if name in last_row and last_row[name] != value:
            raise _meta_error(path, f"counters[{name!r}]", f"is {value!r}, but the last row "
                              f"says {last_row[name]!r}")
        setattr(restored, name, int(value))
    return restored


def _restore(path: Path, arrays: dict[str, np.ndarray], prefix: str, template: Any) -> Any:
    """The ``prefix`` state of the checkpoint at ``path``, adopted into ``template``'s type,
    namespace and device by :func:`adopt_states` (which checks the shapes)."""
    if template is None:
        return None
    names = [f"{prefix}/{name}" for name in template._fields]
    missing = [name for name in names if name not in arrays]
    if missing:
        raise ValueError(f"{path} has no {missing[0]!r}: a checkpoint of another algorithm "
                         "or fedcomp version")
    for name in names:
        if arrays[name].dtype.kind not in "biuf":  # strings, bytes, complex: not a state
            raise _meta_error(path, name, f"holds {arrays[name].dtype} values, not real "
                              "numbers")
    saved = type(template)(*(arrays[name] for name in names))
    return adopt_states(saved, template, f"{path}: the checkpoint's {prefix} state")


def load_checkpoint(path: str | os.PathLike[str], fingerprint: dict[str, Any], rounds: int,
                    server_template: Any, client_template: Any) -> Restored:
    """Read a checkpoint of the run whose fingerprint is ``fingerprint``
    (:func:`~fedcomp.runtime._fingerprint.run_fingerprint`) and whose budget is ``rounds``,
    into states shaped as the templates (``init``'s).

    Raises ``FileNotFoundError`` without a file, else one ``ValueError`` naming the file
    and what is wrong: not a checkpoint or damaged, a meta field out of shape (round,
    rows, counters), a checkpoint of another algorithm or another run (the fingerprint
    field that differs), a round past ``rounds``, states of other shapes.
    """
    path = checkpoint_path(path, "resume_from")
    meta, arrays = _read(path)
    round_: Any = meta.get("round")
    if not (_is_int(round_) and round_ >= 0):
        raise _meta_error(path, "round", f"is {round_!r}, not an integer >= 0"
                          if "round" in meta else "is missing")
    history = _check_history(path, meta.get("history"), round_)
    counters = _check_counters(path, meta.get("counters"), history[-1])
    algorithm = fingerprint["algorithm"]
    if meta.get("algorithm") != algorithm:
        raise ValueError(f"{path} is a checkpoint of {meta.get('algorithm')!r}, not of "
                         f"{algorithm!r}")
    check_fingerprint(path, meta, fingerprint)
    if round_ > rounds:
        raise ValueError(f"the checkpoint {path} is at round {round_}, past this run's "
                         f"rounds={rounds}")
    server = _restore(path, arrays, "server", server_template)
    clients = _restore(path, arrays, "clients", client_template)
    return Restored(round_, server, clients, counters, history)
