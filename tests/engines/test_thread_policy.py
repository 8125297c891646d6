"""fedcomp's OpenMP wait policy: PASSIVE unless the user set one (see fedcomp/__init__.py)."""

from __future__ import annotations

import os
import subprocess
import sys


def _policy_after_import(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    return subprocess.run(
        [sys.executable, "-c", "import fedcomp, os; print(os.environ['OMP_WAIT_POLICY'])"],
        env=env, check=True, capture_output=True, text=True).stdout.strip()


def test_importing_fedcomp_makes_idle_openmp_threads_sleep():
    assert _policy_after_import(None) == "PASSIVE"


def test_a_policy_the_user_set_is_kept():
    assert _policy_after_import("ACTIVE") == "ACTIVE"
