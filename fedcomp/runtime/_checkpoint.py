"""Checkpoints: a run's state written to disk and read back.

A checkpoint (:class:`Checkpoint`, :func:`save_checkpoint`) is one ``.npz`` file: the
server's and the clients' states field by field, the counters, the rows so far and the
round, so that ``simulate(..., resume_from=path)`` continues to the iterates an
uninterrupted run reaches, bit for bit (every random draw is keyed by the round).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .._array import asarray_like, to_numpy
from ..oracle import Counters
from ._stopping import RunView


class Checkpoint:
    """Write the run's state to ``path`` every ``every`` evaluated rounds (and never stop it).

    The file is replaced atomically (written beside it, then renamed), so an interrupted
    run leaves the last complete checkpoint. Resume with
    ``simulate(..., resume_from=path)``.
    """

    def __init__(self, path: str | os.PathLike[str], every: int = 1) -> None:
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"every must be an integer >= 1 (got {every!r})")
        self.path, self.every = Path(path), every
        self.last_round: int | None = None

    def __call__(self, view: RunView) -> None:
        if view.round % self.every == 0:
            save_checkpoint(self.path, view)
            self.last_round = view.round


# --- checkpoints --------------------------------------------------------------------------
def _fields(prefix: str, state: Any) -> dict[str, np.ndarray]:
    if state is None:
        return {}
    if not hasattr(state, "_fields"):
        raise TypeError(f"a checkpoint stores NamedTuples of arrays; this state is a "
                        f"{type(state).__name__}")
    return {f"{prefix}/{name}": to_numpy(value) for name, value in
            zip(state._fields, state, strict=True)}


def save_checkpoint(path: str | os.PathLike[str], view: RunView) -> Path:
    """Write ``view``'s states, counters and rows to ``path`` (``.npz``), atomically."""
    if view.client_states is None:
        raise ValueError("this client executor keeps its client states out of this process "
                         "(Ray actors, Flower nodes): a checkpoint needs the in-process "
                         "simulator")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = {"round": view.round, "algorithm": view.algorithm,
            "counters": view.counters.as_dict(), "history": view.history}
    arrays = {**_fields("server", view.server_state), **_fields("clients", view.client_states),
              "meta": np.array(json.dumps(meta, default=float))}
    scratch = path.with_name(path.name + ".partial.npz")
    np.savez(scratch, **arrays)  # type: ignore[arg-type]  # numpy's stubs: allow_pickle
    os.replace(scratch, path)
    return path


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


class Restored(NamedTuple):
    """A checkpoint read back: the states on the data's device, the rest as saved."""

    round: int
    server_state: Any
    client_states: Any
    counters: Counters
    history: list[dict[str, Any]]


def _restore(npz: Any, prefix: str, template: Any) -> Any:
    """The ``prefix`` state of a checkpoint, adopted into ``template``'s type, namespace and
    device by :func:`adopt_states` (which checks the shapes)."""
    missing = [f"{prefix}/{name}" for name in template._fields if f"{prefix}/{name}" not in npz]
    if missing:
        raise ValueError(f"the checkpoint has no {missing[0]!r}: it was written by another "
                         "algorithm or fedcomp version")
    saved = type(template)(*(npz[f"{prefix}/{name}"] for name in template._fields))
    return adopt_states(saved, template, f"the checkpoint's {prefix} state")


def load_checkpoint(path: str | os.PathLike[str], algorithm: str, server_template: Any,
                    client_template: Any) -> Restored:
    """Read a checkpoint of ``algorithm`` into states shaped as the templates (``init``'s)."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    with np.load(path, allow_pickle=False) as npz:
        meta = json.loads(str(npz["meta"]))
        if meta["algorithm"] != algorithm:
            raise ValueError(f"{path} is a checkpoint of {meta['algorithm']!r}, not of "
                             f"{algorithm!r}")
        server = _restore(npz, "server", server_template)
        clients = _restore(npz, "clients", client_template)
    counters = Counters()
    for name, value in meta["counters"].items():
        setattr(counters, name, value)
    return Restored(int(meta["round"]), server, clients, counters, list(meta["history"]))
