"""No process fedcomp starts outlives it: signals become interrupts, children watch us.

* :func:`signals_as_interrupt` turns SIGTERM and SIGHUP (what ``timeout``, a batch
  scheduler or a closed terminal send) into :class:`Terminated`, a
  :class:`KeyboardInterrupt`, so every ``finally`` / ``except KeyboardInterrupt`` that
  already tears down after Ctrl-C runs for them too.
* :class:`Watchdog` is a separate process that remembers every descendant of fedcomp
  (Flower's SuperLink, SuperNodes, ``flwr run`` and what *they* start) and, should fedcomp
  die without tearing them down (SIGKILL, a crash of the interpreter), kills them and
  removes the temporary directories it was given. It learns of the death from a pipe: the
  kernel closes fedcomp's end whatever killed it.
* :func:`watch_parent` makes a worker process (``fedcomp run --jobs N``) exit when the
  process that started it is gone.

This file imports the standard library only: the watchdog runs it as a script
(``python -I _lifetime.py``), without importing fedcomp.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

#: signals that mean "stop" besides SIGINT (Ctrl-C)
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP")
                     if hasattr(signal, name))

#: the line the owner writes to the watchdog when it has torn everything down itself
_DONE = "done"


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP received: stop like Ctrl-C (``signum`` says which)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"received {signal.Signals(signum).name}")
        self.signum = signum


def exit_code(exc: KeyboardInterrupt) -> int:
    """The shell's status for a process stopped by ``exc``: 128 + the signal number."""
    return 128 + int(getattr(exc, "signum", signal.SIGINT))


@contextmanager
def signals_as_interrupt() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` in the main thread.

    Only the first such signal raises: later ones are ignored while the teardown it started
    runs (SIGKILL still ends the process, and the watchdogs then clean up). Outside the main
    thread (signal handlers cannot be installed there) the block runs unchanged.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise Terminated(signum)

    previous = {sig: signal.signal(sig, handler) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# --- the process table (Linux /proc; elsewhere a signal-0 probe) ---------------------------
def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of ``/proc/PID/stat`` (state, ppid, ...), None when it does not exist."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()


def start_time(pid: int) -> str | None:
    """When ``pid`` started (clock ticks since boot; tells a reused PID apart)."""
    fields = _stat(pid)
    return None if fields is None else fields[19]


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists and is not a zombie."""
    fields = _stat(pid)
    if fields is None:
        if Path("/proc").is_dir():
            return False
        try:  # no /proc (macOS): signal 0 probes existence
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
    return fields[0] != "Z"


def descendants(roots: list[int] | set[int]) -> set[int]:
    """All live descendants of ``roots`` (from ``/proc``; empty where there is none)."""
    children: dict[int, list[int]] = {}
    proc = Path("/proc")
    if not proc.is_dir():
        return set()
    for entry in proc.iterdir():
        if entry.name.isdigit():
            fields = _stat(int(entry.name))
            if fields is not None:
                children.setdefault(int(fields[1]), []).append(int(entry.name))
    out: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


def send(pid: int, sig: int) -> None:
    """``os.kill`` that ignores a process already gone (or not ours)."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def kill_tree(known: dict[int, str | None], grace: float = 3.0) -> None:
    """SIGTERM the processes of ``known`` (pid → start time) and their descendants, SIGKILL
    what is left after ``grace`` s; repeated until none is alive (no PID reused since is
    touched: a start time must match)."""
    def current() -> set[int]:
        mine = {pid for pid, started in known.items() if start_time(pid) == started
                or (started is None and alive(pid))}
        return {pid for pid in mine | descendants(mine) if alive(pid)}

    for pid in current():
        send(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and current():
        time.sleep(0.05)
    for _ in range(50):
        left = current()
        if not left:
            return
        for pid in left:
            send(pid, signal.SIGKILL)
        time.sleep(0.1)


# --- the watchdog ---------------------------------------------------------------------------
class Watchdog:
    """A process that kills the processes we started and removes ``cleanup`` if we die first.

    Start it before the processes it guards and :meth:`add` each one; :meth:`close` after
    tearing them down tells it to exit without touching anything. Every ``poll`` s it
    records the live descendants of the added processes (with their start times); when the
    pipe from us closes without :data:`_DONE` — this process died — it kills every recorded
    process and their descendants (:func:`kill_tree`; Flower's SuperExec runs in a session
    of its own, so only the record finds it) and removes ``cleanup``. On a system without
    ``/proc`` it kills the added processes only.
    """

    def __init__(self, cleanup: list[Path] | None = None, poll: float = 0.2) -> None:
        read, self._write = os.pipe()
        args = [sys.executable, "-I", str(Path(__file__).resolve()), str(os.getpid()),
                str(poll), *(str(p) for p in cleanup or [])]
        try:  # its own session: a terminal's SIGHUP/SIGINT to our group does not reach it
            self.proc = subprocess.Popen(args, stdin=read, stdout=subprocess.DEVNULL,
                                         start_new_session=True)
        finally:
            os.close(read)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _tell(self, line: str) -> None:
        if self._write >= 0:
            try:
                os.write(self._write, f"{line}\n".encode())
            except OSError:  # it is gone: nothing to tell
                pass

    def add(self, pid: int) -> None:
        """Guard process ``pid`` and its descendants."""
        self._tell(str(pid))

    def close(self) -> None:
        """We cleaned up ourselves: the watchdog exits and does nothing."""
        if self._write < 0:
            return
        self._tell(_DONE)
        os.close(self._write)
        self._write = -1
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - it reads the pipe every poll
            self.proc.kill()
            self.proc.wait()


def _watch(owner: int, poll: float, cleanup: list[Path]) -> None:
    """The watchdog's loop (see :class:`Watchdog`)."""
    known: dict[int, str | None] = {}
    roots: set[int] = set()
    data = b""
    while True:
        ready, _, _ = select.select([sys.stdin.fileno()], [], [], poll)
        if ready:
            chunk = os.read(sys.stdin.fileno(), 4096)
            data += chunk
            *lines, rest = data.split(b"\n")
            data = rest
            for line in lines:
                if line.decode() == _DONE:
                    return  # the owner tore everything down
                pid = int(line)
                roots.add(pid)
                known.setdefault(pid, start_time(pid))
            if not chunk:
                break  # EOF without "done": the owner died
        if not alive(owner):  # belt and braces: a closed pipe is the usual sign
            break
        live = {pid for pid in roots if start_time(pid) == known[pid] and alive(pid)}
        for pid in descendants(live):
            known.setdefault(pid, start_time(pid))
    kill_tree(known)
    for path in cleanup:
        shutil.rmtree(path, ignore_errors=True)


def watch_parent(poll: float = 0.5) -> threading.Thread:
    """In a worker process: exit at once (status 1) when its parent is gone.

    A daemon thread compares ``os.getppid()`` with the parent at start every ``poll`` s: a
    worker whose parent was SIGKILLed is re-parented and would otherwise run its task to the
    end (and its multiprocessing resource tracker with it).
    """
    parent = os.getppid()

    def loop() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(1)

    thread = threading.Thread(target=loop, name="fedcomp-watch-parent", daemon=True)
    thread.start()
    return thread


if __name__ == "__main__":  # the watchdog: python -I _lifetime.py OWNER POLL [CLEANUP...]
    for _sig in (signal.SIGINT, *STOP_SIGNALS):  # only the owner's death ends it
        signal.signal(_sig, signal.SIG_IGN)
    _watch(int(sys.argv[1]), float(sys.argv[2]), [Path(p) for p in sys.argv[3:]])
