"""``fedcomp flower app`` and ``fedcomp flower local``: a Flower app directory, and a
SuperLink plus N SuperNodes on 127.0.0.1 as separate processes.

``run_local`` starts every process in its own session (process group), streams the run's
log, waits with bounded timeouts only, and always tears the groups down — after success,
on failure, on Ctrl-C and on SIGTERM/SIGHUP (which the command line turns into an
interrupt): the signal is forwarded to every process group, and what is left after a grace
period of a few seconds is SIGKILLed, so the command exits within a bounded time whatever
the machine's load; a watchdog process does it should fedcomp be SIGKILLed. It uses a private
``FLWR_HOME`` so the user's Flower configuration is never touched, disables Flower's update
check, telemetry and runtime dependency installation, binds only loopback addresses (each
server on a port it is seen to own, started again on another if one was taken meanwhile),
and by default serves TLS and admits only its own SuperNodes (:mod:`._secure`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._lifetime import Watchdog, _stat, descendants, send, start_time
from .._log import get_logger
from ._secure import Credentials, make_credentials
from ._server import RUN_CONFIG_DEFAULTS, STATUS_FILE

LOOPBACK = "127.0.0.1"
CONNECTION = "fedcomp-local"
APP_PACKAGE = "fedcomp_flower_app"


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string


def write_app(config: dict[str, Any], out: str | Path, *, results_dir: str | Path | None = None,
              num_nodes: int = 0, node_timeout: float = 120.0,
              round_timeout: float = 300.0, rejoin_timeout: float = 0.0) -> Path:
    """Write a ready Flower app for ``config`` into ``out``; returns ``out``.

    The app's ``pyproject.toml`` has ``[tool.flwr.app]`` components pointing to
    :data:`fedcomp.flower.server_app` / :data:`fedcomp.flower.client_app` and a
    ``[tool.flwr.app.config]`` holding the resolved fedcomp configuration (JSON) and the
    run settings, overridable with ``flwr run --run-config``.
    """
    from ..config import to_jsonable
    from ..experiments import validate

    cfg = validate(config)
    out = Path(out)
    pkg = out / APP_PACKAGE
    pkg.mkdir(parents=True, exist_ok=True)
    (pkg / "__init__.py").write_text('"""A fedcomp experiment as a Flower app."""\n')
    (pkg / "server_app.py").write_text(
        '"""The ServerApp: fedcomp\'s round loop (configuration from the run config)."""\n\n'
        "from fedcomp.flower import server_app as app\n\n__all__ = [\"app\"]\n")
    (pkg / "client_app.py").write_text(
        '"""The ClientApp: client_update on the SuperNode\'s own clients."""\n\n'
        "from fedcomp.flower import client_app as app\n\n__all__ = [\"app\"]\n")
    run_config = {**RUN_CONFIG_DEFAULTS,
                  "fedcomp-config": json.dumps(to_jsonable(cfg), sort_keys=True),
                  "out-dir": str(Path(results_dir).resolve()) if results_dir else "",
                  "num-nodes": int(num_nodes), "node-timeout": float(node_timeout),
                  "round-timeout": float(round_timeout),
                  "rejoin-timeout": float(rejoin_timeout)}
    from .. import __version__

    lines = [
        "# Written by `fedcomp flower app`: run it with `flwr run . <superlink-connection>`.",
        "[build-system]", 'requires = ["hatchling"]', 'build-backend = "hatchling.build"', "",
        "[project]", 'name = "fedcomp-app"', 'version = "1.0.0"',
        f"description = {_toml_value('fedcomp experiment ' + cfg['name'])}",
        'license = "MIT"', f'dependencies = ["fedcomp[flower]=={__version__}"]', "",
        "[tool.hatch.build.targets.wheel]", 'packages = ["."]', "",
        "[tool.flwr.app]", 'publisher = "fedcomp"', "",
        "[tool.flwr.app.components]",
        f'serverapp = "{APP_PACKAGE}.server_app:app"',
        f'clientapp = "{APP_PACKAGE}.client_app:app"', "",
        "[tool.flwr.app.config]",
        *(f"{key} = {_toml_value(value)}" for key, value in run_config.items()), ""]
    (out / "pyproject.toml").write_text("\n".join(lines))
    return out


def free_port() -> int:
    """A TCP port on the loopback interface that was free a moment ago.

    Flower's servers take a port number, not a socket (and refuse ``--port 0``), so the
    number is released before the server binds it: another process may take it meanwhile.
    :func:`_wait_for_port` notices (the listener is not ours) and the caller starts the
    process again on another port (:func:`_start_listening`).
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


class PortTaken(RuntimeError):
    """Another process listens on the port our server was to bind."""


def _executable(name: str) -> str:
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        raise FileNotFoundError(f"{name} not found next to {sys.executable} nor on PATH; "
                                "pip install 'fedcomp[flower]'")
    return found


def flower_env(home: str | Path) -> dict[str, str]:
    """The environment of every Flower process: private FLWR_HOME, no update check."""
    # Flower starts flower-superexec / flwr-serverapp by name: our environment's bin first
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    # SuperExec checks for ClientApp/ServerApp work to launch every second by default;
    # on one machine polling every 0.1 s costs nothing and saves up to a second a round
    poll = os.environ.get("FLWR_SUPEREXEC_TASK_POLL_INTERVAL", "0.1")
    return {**os.environ, "PATH": path, "FLWR_HOME": str(home),
            "FLWR_DISABLE_UPDATE_CHECK": "1", "FLWR_TELEMETRY_ENABLED": "0",
            "FLWR_SUPEREXEC_TASK_POLL_INTERVAL": poll, "PYTHONUNBUFFERED": "1"}


class ProcessGroup:
    """Processes we started, and everything they start, torn down by process group and PID.

    Each process runs in its own session, so its process group holds it and every
    descendant that does not start a session of its own — even one started during the
    teardown, or orphaned by its parent's death, which no walk of ``/proc`` finds. Flower's
    SuperLink starts its SuperExec detached (a new session), so :meth:`refresh` also
    records the descendants and their groups. :meth:`stop` signals every live group and
    process we know, waits a grace period, then SIGKILLs them, group by group, until none
    is left. Given a :class:`~fedcomp._lifetime.Watchdog`, every process started is handed
    to it, so they die with us even when we are SIGKILLed.
    """

    #: seconds :meth:`stop` waits after SIGKILL for the processes to be gone (a process in
    #: uninterruptible sleep cannot be hurried; the watchdog has them in its record)
    KILL_WAIT = 10.0

    def __init__(self, watchdog: Watchdog | None = None) -> None:
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.launch: dict[str, tuple[list[str], dict[str, str], Path]] = {}
        self.seen: set[int] = set()
        #: start time of every PID seen (a PID reused since by another process is not ours)
        self.started: dict[int, str | None] = {}
        #: the process groups of our processes (each started in a session of its own)
        self.groups: set[int] = set()
        self.watchdog = watchdog
        self.closed = False  # stop() began: nothing is started any more
        self._lock = threading.Lock()

    def start(self, name: str, args: list[str], env: dict[str, str], log: Path
              ) -> subprocess.Popen[bytes]:
        with self._lock:  # either stop() sees this process or it is never started
            if self.closed:  # a thread restarting a node while we tear down would orphan it
                raise RuntimeError(f"cannot start {name}: the deployment is being stopped")
            with log.open("ab") as f:
                proc = subprocess.Popen(args, stdout=f, stderr=subprocess.STDOUT, env=env,
                                        stdin=subprocess.DEVNULL, start_new_session=True)
            if self.watchdog is not None:
                self.watchdog.add(proc.pid)
            self.procs.append((name, proc))
            self.launch[name] = (args, env, log)
            self._see(proc.pid)
        return proc

    def _see(self, pid: int) -> None:
        if pid not in self.started:
            self.seen.add(pid)
            self.started[pid] = start_time(pid)

    def kill(self, name: str) -> None:
        """SIGKILL process ``name`` and its descendants at once (a crash, for tests)."""
        proc = dict(self.procs)[name]
        for pid in [proc.pid, *descendants([proc.pid])]:
            self._see(pid)
            send(pid, signal.SIGKILL)
        _signal_group(proc.pid, signal.SIGKILL)  # and what it started meanwhile
        proc.wait(timeout=10)

    def discard(self, name: str) -> None:
        """Kill process ``name`` (a failed start) and forget it."""
        proc = dict(self.procs)[name]
        if proc.poll() is None:
            self.kill(name)
        self.procs = [(n, p) for n, p in self.procs if n != name]

    def restart(self, name: str, retry_for: float = 0.0) -> subprocess.Popen[bytes]:
        """Start process ``name`` again with the same command, environment and log.

        A SuperNode with an authentication key keeps its node id, and the SuperLink refuses
        to activate it while it still counts the previous process as connected — until two
        heartbeats are missed, about 60 s after a crash (Flower 1.41, 1.42); the new process then
        exits ("Failed to activate SuperNode"), at once or, on a loaded machine, seconds
        later. With ``retry_for > 0`` this watches it for ``retry_for`` s and starts it again
        whenever it has exited (until the group stops); the last process started is returned.
        """
        deadline = time.monotonic() + retry_for
        proc = self._start_again(name)
        while time.monotonic() < deadline and not self.closed:
            if proc.poll() is not None:
                time.sleep(1.0)
                if self.closed:
                    break
                proc = self._start_again(name)
            time.sleep(0.5)
        return proc

    def _start_again(self, name: str) -> subprocess.Popen[bytes]:
        args, env, log = self.launch[name]
        self.procs = [(n, p) for n, p in self.procs if n != name or p.poll() is None]
        return self.start(name, args, env, log)

    @property
    def pids(self) -> list[int]:
        """Every PID started here or seen as a descendant."""
        return sorted(self.seen)

    def refresh(self) -> set[int]:
        """Add to :attr:`seen` the current descendants of our processes, and every member
        of a process group of ours (one orphaned by its parent's death is no descendant)."""
        self._update()
        return self.seen

    def _update(self) -> dict[int, tuple[int, int, str]] | None:
        """:meth:`refresh`; the process table it read (None without ``/proc``)."""
        table = _process_table()
        for pid in descendants([p.pid for _, p in self.procs]):
            self._see(pid)
        if table is None:
            return None
        self.groups |= {table[pid][1] for pid in self.seen if self._is_ours(pid, table)}
        if self.groups - {group for _, group, _ in table.values()}:
            # /proc is read entry by entry, not at once: a process forked as its parent
            # exits can be missing from the listing while the parent already reads as
            # exited, and its group looks empty. A second read, begun after the first
            # ended, lists it (the clean-clone suite once left such an orphan running).
            table = _process_table() or {}
        # a group with no member is gone for good: its number may be reused by another
        self.groups = {group for _, group, _ in table.values()
                       if group in self.groups and group != os.getpgrp()}
        for pid, (_, group, _) in table.items():
            if group in self.groups:
                self._see(pid)
        return table

    def _is_ours(self, pid: int, table: dict[int, tuple[int, int, str]]) -> bool:
        """Whether ``pid`` runs (not a zombie) and is the process we saw (same start)."""
        return pid in table and table[pid][2] == self.started.get(pid)

    def live(self) -> set[int]:
        """The processes of ours still running (zombies are dead)."""
        table = self._update()
        if table is None:  # no /proc (macOS): our own processes, as far as we can tell
            return {p.pid for _, p in self.procs if p.poll() is None}
        return {pid for pid in self.seen if self._is_ours(pid, table)}

    def _signal(self, sig: int, live: set[int]) -> None:
        """``sig`` to each of ``live`` and to every process group of ours (our own
        processes' groups included while we have not reaped them: their PIDs are ours)."""
        groups = self.groups | {p.pid for _, p in self.procs if p.returncode is None}
        for group in groups - {0, 1, os.getpgrp()}:
            _signal_group(group, sig)
        for pid in live:
            send(pid, sig)

    def stop(self, grace: float = 5.0, sig: int = signal.SIGTERM) -> None:
        """``sig`` to everything, wait up to ``grace`` s, SIGKILL what is left (again and
        again for up to :attr:`KILL_WAIT` s: a process may start another as it dies), reap.

        Bounded whatever the machine's load: at most ``grace + KILL_WAIT`` s and the reaps.
        A second Ctrl-C meanwhile is ignored, so that it cannot cut the teardown short.
        """
        with self._lock:
            self.closed = True
        with _no_interrupt():
            self._signal(sig, self.live())
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and self.live():
                time.sleep(0.1)
            deadline = time.monotonic() + self.KILL_WAIT
            while (live := self.live()) and time.monotonic() < deadline:
                self._signal(signal.SIGKILL, live)
                time.sleep(0.1)
            for _, proc in self.procs:  # our children: dead now, reaped here
                try:
                    proc.wait(timeout=max(0.1, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILLed above
                    pass


def _process_table() -> dict[int, tuple[int, int, str]] | None:
    """PID → (parent, process group, start time) of every running process (zombies left
    out; None without ``/proc``)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return None
    table = {}
    for entry in proc.iterdir():
        fields = _stat(int(entry.name)) if entry.name.isdigit() else None
        if fields is not None and fields[0] != "Z":
            table[int(entry.name)] = (int(fields[1]), int(fields[2]), fields[19])
    return table


def _signal_group(group: int, sig: int) -> None:
    """``os.killpg`` that ignores a group already gone (or not ours)."""
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass


@contextmanager
def _no_interrupt() -> Iterator[None]:
    """SIGINT ignored within the block (in the main thread; elsewhere it cannot arrive)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _listening_inodes(port: int) -> set[str] | None:
    """Inodes of the sockets listening on ``LOOPBACK:port`` (None without ``/proc``)."""
    try:
        lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return None
    wanted = f"{socket.inet_aton(LOOPBACK)[::-1].hex().upper()}:{port:04X}"
    any_addr = f"00000000:{port:04X}"
    return {fields[9] for fields in (line.split() for line in lines)
            if fields[1] in (wanted, any_addr) and fields[3] == "0A"}  # 0A: LISTEN


def _holds_socket(pids: set[int], inodes: set[str]) -> bool:
    names = {f"socket:[{inode}]" for inode in inodes}
    for pid in pids:
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{pid}/fd/{fd}") in names:
                    return True
            except OSError:
                continue
    return False


def _wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float, what: str,
                   log: Path) -> None:
    """Wait until ``proc`` (or a child of it) listens on ``LOOPBACK:port``.

    Raises :class:`PortTaken` when another process listens there (or ``proc`` exits
    saying the address is in use): a port handed out by :func:`free_port` was taken
    between its release and the bind. Where there is no ``/proc``, a connection accepted
    on the port counts as ours.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            if any("address already in use" in line.lower() and f"{port})" in line
                   for line in _tail(log).splitlines()):
                raise PortTaken(f"{what}: port {port} was taken by another process")
            raise RuntimeError(f"{what} exited with code {proc.returncode} while starting; "
                               f"its log ({log}):\n{_tail(log)}")
        inodes = _listening_inodes(port)
        if inodes is None:  # no /proc: accept a listener
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                s.settimeout(0.5)
                if s.connect_ex((LOOPBACK, port)) == 0:
                    return
        elif inodes:
            if _holds_socket({proc.pid, *descendants([proc.pid])}, inodes):
                return
            if proc.poll() is None:  # theirs; ours cannot bind it (unless it just did)
                time.sleep(0.1)
                if not _holds_socket({proc.pid, *descendants([proc.pid])}, inodes):
                    raise PortTaken(f"{what}: port {port} was taken by another process")
        time.sleep(0.2)
    raise TimeoutError(f"{what} did not listen on {LOOPBACK}:{port} within {timeout:g} s; "
                       f"its log ({log}):\n{_tail(log)}")


def _start_listening(group: ProcessGroup, name: str, command: Callable[[int], list[str]],
                     env: dict[str, str], log: Path, what: str, timeout: float = 60.0,
                     attempts: int = 5) -> tuple[subprocess.Popen[bytes], int]:
    """Start ``command(port)`` on a free port and wait until it listens there; on a port
    taken meanwhile (a concurrent deployment, an outgoing connection), again on another."""
    for attempt in range(attempts):
        port = free_port()
        proc = group.start(name, command(port), env, log)
        try:
            _wait_for_port(port, proc, timeout, what, log)
            return proc, port
        except PortTaken:
            group.discard(name)
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")  # pragma: no cover


def _tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def run_local(config: dict[str, Any], out_dir: str | Path, *, nodes: int,
              node_timeout: float = 60.0, round_timeout: float = 120.0,
              timeout: float = 3600.0, checkpoint_dir: str | Path | None = None,
              rejoin_timeout: float = 0.0, insecure: bool = False,
              echo: Callable[[str], Any] | None = None,
              on_start: Callable[[ProcessGroup], Any] | None = None) -> dict[str, Any]:
    """Run ``config`` on a SuperLink and ``nodes`` SuperNodes started on 127.0.0.1.

    Parameters
    ----------
    config : dict
        A fedcomp configuration.
    out_dir : path
        Results (``results.csv``, ``config.json``, ``flower_status.json``, ...) and the
        processes' logs (``flower-logs/``).
    nodes : int
        SuperNodes; node ``k`` gets ``--node-config 'partition-id=k num-partitions=N'``.
    node_timeout, round_timeout : float
        Seconds the server waits for the nodes to connect and for a round's replies.
    timeout : float
        Seconds for the whole run before it is stopped.
    checkpoint_dir : path, optional
        Where each SuperNode checkpoints its client states (one subdirectory per node).
    rejoin_timeout : float
        Seconds the server waits for a silent node to come back (0: fail at once).
    insecure : bool
        Plain HTTP and any SuperNode admitted, as Flower's ``--insecure``. By default the
        deployment uses TLS with a throwaway CA and SuperNode authentication with keys
        generated in its temporary home (:mod:`fedcomp.flower._secure`).
    echo : callable, optional
        Receives every line of the run's streamed log (default: stderr).
    on_start : callable, optional
        Called with the :class:`ProcessGroup` once every process is up (for tests).

    Returns
    -------
    dict
        The server's ``flower_status.json`` plus ``pids``: ``{"status": "ok", ...}`` or
        ``{"status": "failed", "error": ...}``.
    """
    from ..experiments import validate

    _check_nodes(nodes)
    cfg = validate(config)
    out = Path(out_dir).resolve()

    def node_config(k: int) -> str:
        text = f"partition-id={k} num-partitions={nodes}"
        if checkpoint_dir is not None:
            text += f' checkpoint-dir="{Path(checkpoint_dir).resolve() / f"node{k}"}"'
        return text

    def app(work: Path) -> Path:
        return write_app(cfg, work / "app", results_dir=out, num_nodes=nodes,
                         node_timeout=node_timeout, round_timeout=round_timeout,
                         rejoin_timeout=rejoin_timeout)

    return run_local_app(app, out, nodes=nodes, node_config=node_config, timeout=timeout,
                         insecure=insecure, echo=echo, on_start=on_start,
                         status_file=out / STATUS_FILE)


def run_local_app(app: str | Path | Callable[[Path], Path], out_dir: str | Path, *,
                  nodes: int, node_config: Callable[[int], str] | None = None,
                  timeout: float = 3600.0, insecure: bool = False,
                  echo: Callable[[str], Any] | None = None,
                  on_start: Callable[[ProcessGroup], Any] | None = None,
                  status_file: Path | None = None) -> dict[str, Any]:
    """Run any Flower app directory on a SuperLink and ``nodes`` SuperNodes on 127.0.0.1.

    What :func:`run_local` does for fedcomp's own app, for a user's app (a directory with a
    ``pyproject.toml`` naming its ServerApp and ClientApp): TLS, SuperNode authentication,
    a private ``FLWR_HOME`` whose Flower configuration names the local SuperLink, every
    process stopped at the end.

    Parameters
    ----------
    app : path or callable
        The app directory, or ``app(work)`` writing one into the run's temporary directory.
    out_dir : path
        The processes' logs go to ``out_dir/flower-logs``.
    nodes : int
        SuperNodes to start.
    node_config : callable, optional
        ``node_config(k)``: SuperNode ``k``'s ``--node-config`` (default
        ``partition-id=k num-partitions=nodes``).
    timeout : float
        Seconds for the whole run before it is stopped.
    insecure, echo, on_start
        As :func:`run_local`.
    status_file : path, optional
        A file the ServerApp writes when it is done (fedcomp's app: ``flower_status.json``);
        without one the run ends when ``flwr run`` does, ``"ok"`` when it exits with 0.

    Returns
    -------
    dict
        ``{"status": "ok" | "failed", ...}`` plus ``pids``.
    """
    _check_nodes(nodes)
    echo = echo or get_logger("flower").info
    node_config = node_config or (lambda k: f"partition-id={k} num-partitions={nodes}")
    out = Path(out_dir).resolve()
    logs = out / "flower-logs"
    logs.mkdir(parents=True, exist_ok=True)
    if status_file is not None:
        status_file.unlink(missing_ok=True)
    work = Path(tempfile.mkdtemp(prefix="fedcomp-flower-"))
    # should this process be killed outright (SIGKILL), the watchdog stops the deployment
    # and removes the temporary home; SIGTERM/SIGHUP are interrupts (fedcomp._lifetime)
    watchdog = Watchdog(cleanup=[work])
    group = ProcessGroup(watchdog)
    status: dict[str, Any] = {"status": "failed", "error": "the run did not finish"}
    forward = int(signal.SIGTERM)  # what the processes get first when the run ends
    try:
        home = work / "flwr-home"
        home.mkdir()
        env = flower_env(home)
        app_dir = app(work) if callable(app) else Path(app).resolve()
        link_args, node_args, cli_config = ["--insecure"], [["--insecure"]] * nodes, \
            "insecure = true\n"
        if not insecure:
            creds = make_credentials(home / "credentials", nodes)
            tls = ["--ssl-ca-certfile", str(creds.ca_cert), "--ssl-certfile",
                   str(creds.server_cert), "--ssl-keyfile", str(creds.server_key)]
            link_args = [*tls, "--enable-supernode-auth"]
            node_args = [[*tls, "--root-certificates", str(creds.ca_cert),
                          "--auth-supernode-private-key", str(key)]
                         for key in creds.node_keys]
            cli_config = f"root-certificates = {_toml_value(str(creds.ca_cert))}\n"
        link_log = logs / "superlink.log"
        link, port = _start_listening(group, "superlink", lambda p: [
            _executable("flower-superlink"), *link_args, "--host", LOOPBACK,
            "--port", str(p), "--isolation", "subprocess",
            "--disable-runtime-dependency-installation"], env, link_log, "the SuperLink")
        # Flower's central configuration ($FLWR_HOME/config.toml) names the connection
        (home / "config.toml").write_text(
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{LOOPBACK}:{port}"\n{cli_config}')
        echo(f"fedcomp: SuperLink on {LOOPBACK}:{port} (pid {link.pid}"
             f"{', insecure' if insecure else ', TLS, SuperNode authentication'})")
        if not insecure:
            _register_nodes(creds, env, logs / "register.log")
        for k in range(nodes):
            def node_command(p: int, c: str = node_config(k), a: list[str] = node_args[k]
                             ) -> list[str]:
                return [_executable("flower-supernode"), *a, "--superlink",
                        f"{LOOPBACK}:{port}", "--host", LOOPBACK, "--port", str(p),
                        "--node-config", c]

            proc, _ = _start_listening(group, f"supernode {k}", node_command, env,
                                       logs / f"supernode{k}.log", f"SuperNode {k}")
            echo(f"fedcomp: SuperNode {k} ({node_config(k)}, pid {proc.pid})")
        if on_start is not None:
            on_start(group)
        runner = group.start("flwr run", [
            _executable("flwr"), "run", str(app_dir), CONNECTION, "--stream"], env,
            logs / "flwr-run.log")
        status = _follow(runner, logs / "flwr-run.log", status_file, group, timeout, echo)
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP: the same to every process
        forward = int(getattr(exc, "signum", signal.SIGINT))
        raise
    finally:
        group.stop(sig=forward)
        shutil.rmtree(work, ignore_errors=True)
        watchdog.close()
    status["pids"] = group.pids
    return status


def _check_nodes(nodes: Any) -> None:
    if not (isinstance(nodes, int) and nodes >= 1):
        raise ValueError(f"--nodes must be a positive integer (got {nodes!r})")


def _register_nodes(creds: Credentials, env: dict[str, str], log: Path,
                    timeout: float = 120.0) -> None:
    """``flwr supernode register`` each node's public key (in parallel): with
    ``--enable-supernode-auth`` the SuperLink admits registered keys only."""
    with log.open("ab") as f:
        procs = [subprocess.Popen([_executable("flwr"), "supernode", "register",
                                   str(creds.node_public(k)), CONNECTION],
                                  stdout=f, stderr=subprocess.STDOUT, env=env,
                                  stdin=subprocess.DEVNULL)
                 for k in range(len(creds.node_keys))]
        try:
            codes = [p.wait(timeout=timeout) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
    if any(codes):
        raise RuntimeError(f"registering the SuperNodes' keys failed (exit codes {codes}); "
                           f"its log ({log}):\n{_tail(log)}")


def _follow(runner: subprocess.Popen[bytes], log: Path, status_file: Path | None,
            group: ProcessGroup, timeout: float, echo: Callable[[str], Any]) -> dict[str, Any]:
    """Stream ``log`` until the run's status file appears or the runner ends (bounded);
    without a status file, until the runner ends."""
    deadline = time.monotonic() + timeout
    position = 0
    ended_at: float | None = None
    while True:
        position = _echo_new(log, position, echo)
        if status_file is None and runner.poll() is not None:
            _echo_new(log, position, echo)
            if runner.returncode == 0:
                return {"status": "ok"}
            return {"status": "failed",
                    "error": f"`flwr run` exited with code {runner.returncode}; see the logs "
                             f"in {log.parent}"}
        if status_file is not None and status_file.exists():
            try:
                status = json.loads(status_file.read_text())
                _echo_new(log, position, echo)
                return dict(status)
            except json.JSONDecodeError:
                pass  # being written
        now = time.monotonic()
        if runner.poll() is not None and ended_at is None:
            ended_at = now
        if ended_at is not None and now - ended_at > 10.0:
            return {"status": "failed",
                    "error": f"`flwr run` exited with code {runner.returncode} before the "
                             f"server reported a result; see the logs in {log.parent}"}
        for name, proc in group.procs[:1]:  # the SuperLink
            if proc.poll() is not None:
                return {"status": "failed",
                        "error": f"the {name} exited with code {proc.returncode}; see "
                                 f"{log.parent}"}
        group.refresh()  # remember Flower's children while their parents live
        if now > deadline:
            return {"status": "failed", "error": f"the run did not finish within "
                                                 f"{timeout:g} s; see {log.parent}"}
        time.sleep(0.2)


def _echo_new(log: Path, position: int, echo: Callable[[str], Any]) -> int:
    try:
        with log.open("rb") as f:
            f.seek(position)
            chunk = f.read()
    except OSError:
        return position
    end = chunk.rfind(b"\n") + 1
    for line in chunk[:end].decode(errors="replace").splitlines():
        if line.strip():
            echo(line)
    return position + end
