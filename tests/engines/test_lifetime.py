"""No process fedcomp starts outlives it (fedcomp._lifetime), with real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from fedcomp._lifetime import Terminated, alive, exit_code, signals_as_interrupt

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc (Linux)")

#: a process that starts a watchdog, a child in its own session and a grandchild, prints
#: their pids, then sleeps until killed
OWNER = textwrap.dedent("""
    import subprocess, sys, time
    from pathlib import Path
    from fedcomp._lifetime import Watchdog
    work = Path(sys.argv[1]); work.mkdir()
    dog = Watchdog(cleanup=[work], poll=0.05)
    child = subprocess.Popen([sys.executable, "-c",
        "import subprocess, sys, time; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], "
        "start_new_session=True); print(p.pid, flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, start_new_session=True, text=True)
    dog.add(child.pid)
    grandchild = int(child.stdout.readline())
    time.sleep(0.5)  # a poll or more: the watchdog records the grandchild
    if sys.argv[2] == "close":
        child.kill(); child.wait(); subprocess.run(["kill", "-9", str(grandchild)])
        dog.close()
    print(dog.pid, child.pid, grandchild, flush=True)
    time.sleep(600)
""")


def wait_dead(pids, timeout=20.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def start_owner(tmp_path, mode):
    env = {**os.environ, "PYTHONPATH": os.getcwd() + os.pathsep + os.environ.get("PYTHONPATH", "")}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(tmp_path / "work"), mode],
                             stdout=subprocess.PIPE, text=True, env=env)
    pids = [int(p) for p in owner.stdout.readline().split()]
    assert len(pids) == 3, pids
    return owner, pids


def test_sigkilled_owner_its_processes_die_and_its_directory_goes(tmp_path):
    owner, pids = start_owner(tmp_path, "keep")
    try:
        assert all(alive(p) for p in pids) and (tmp_path / "work").is_dir()
        owner.kill()
        owner.wait()
        assert wait_dead(pids) == []  # the watchdog, the child and the detached grandchild
        assert not (tmp_path / "work").exists()
    finally:
        for pid in pids:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_a_closed_watchdog_leaves_everything_alone(tmp_path):
    owner, (dog, *_) = start_owner(tmp_path, "close")
    try:
        assert wait_dead([dog], 10) == []  # it exits when told "done"...
        assert (tmp_path / "work").is_dir()  # ...and removes nothing
    finally:
        owner.kill()
        owner.wait()
    time.sleep(0.3)
    assert (tmp_path / "work").is_dir()


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_stop_signals_become_an_interrupt_with_the_shells_status(sig):
    signum = getattr(signal, sig)
    before = signal.getsignal(signum)
    with pytest.raises(KeyboardInterrupt) as caught, signals_as_interrupt():
        os.kill(os.getpid(), signum)
        time.sleep(5)  # the handler raises during the sleep
    assert isinstance(caught.value, Terminated) and exit_code(caught.value) == 128 + signum
    assert signal.getsignal(signum) is before  # restored
    assert exit_code(KeyboardInterrupt()) == 130
