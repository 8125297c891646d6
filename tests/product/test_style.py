"""Lint and type checks as part of the suite (STYLE.md: ruff, mypy on the core package)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


def tool(name: str) -> str:
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (pip install 'fedcomp[dev]')")
    return found


def test_ruff_is_clean():
    res = subprocess.run([tool("ruff"), "check", "fedcomp", "tests", "benchmarks",
                          "examples"], cwd=ROOT,
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
def test_mypy_is_clean():
    res = subprocess.run([tool("mypy"), "fedcomp"], cwd=ROOT, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
