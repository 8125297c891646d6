"""The report's header: when, with what and on what machine it was made, and the command."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def git_commit() -> str:
    """The short commit of the checkout fedcomp is imported from, "+ uncommitted changes"
    when its tracked files differ; "not a git checkout" for an installed package (even one
    installed inside another repository's ignored virtual environment)."""
    import subprocess

    package = Path(__file__).resolve().parents[1]  # fedcomp/, above this report/

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=package, capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()

    try:
        if Path(git("rev-parse", "--show-toplevel")).resolve() != package.parent:
            return "not a git checkout"
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "not a git checkout"
    return f"{commit} + uncommitted changes" if dirty else commit


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``, else :func:`platform.processor`)."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("model name", "Model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpu_models() -> str:
    """The GPUs this machine has, by ``nvidia-smi`` (``"none"`` without one or the tool):
    the report's header names them, since a timing's verdict depends on the device."""
    import shutil
    import subprocess

    tool = shutil.which("nvidia-smi")
    if tool is None:
        return "none"
    try:
        listed = subprocess.run([tool, "--query-gpu=name", "--format=csv,noheader"],
                                capture_output=True, text=True, timeout=20, check=True)
    except (OSError, subprocess.SubprocessError):
        return "none (nvidia-smi failed)"
    names = [line.strip() for line in listed.stdout.splitlines() if line.strip()]
    return ", ".join(names) or "none"


def environment(command: str | None = None) -> dict[str, str]:
    """The report's header: when, with what and on what it was made, and the command.

    PyTorch's version is read from its installed metadata (not imported: seconds).
    """
    import datetime
    import os
    import platform
    from importlib import metadata

    from .. import __version__

    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "not installed"
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    return {
        "date": datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "fedcomp": __version__,
        "git commit": git_commit(),
        "Python": platform.python_version(),
        "NumPy": np.__version__,
        "PyTorch": torch,
        "CPU": f"{cpu_model()}, {cores} cores" + (f" ({usable} usable)" if usable != cores
                                                   else ""),
        "GPU": gpu_models(),
        "command": command or "not recorded (run_report called from Python)",
    }
