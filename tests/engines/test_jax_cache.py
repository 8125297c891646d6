"""jax's persistent compilation cache for the compiled engine (fedcomp.runtime._jax_cache).

Each check runs a small ZA1 simulate (twice) in a fresh process, since the cache is set up
once per process and read back by the next: a first process fills the directory, a second
reads every compiled function back (jax.monitoring's cache events) and computes the very
same iterates; ``FEDCOMP_JAX_CACHE=off`` writes nothing anywhere; a directory that cannot
be created warns once and the run is still NumPy's to 1e-12; a cache set up in jax is left
exactly as the user set it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from fedcomp import Problem, simulate
from fedcomp.algorithms import za1
from fedcomp.data import synthetic_fedprox
from fedcomp.losses import Logistic
from fedcomp.regularizers import L1
from fedcomp.runtime._jax_cache import (
    configured_by_user,
    default_cache_dir,
    requested_cache_dir,
    write_error,
)

pytest.importorskip("jax")

ROOT = Path(__file__).resolve().parents[2]
ROUNDS = 3

#: One process: ZA1 twice on jax data. ``argv[1]``: "jax_like" (the backend's path),
#: "by_hand" (jax arrays made without jax_like: the engine's own check sets the cache up)
#: or "user_config" (the user points jax at ``argv[2]`` first). Prints one JSON line.
SCRIPT = """
import json, sys, warnings
import numpy as np
import jax

events = []
jax.monitoring.register_event_listener(lambda name, **kwargs: events.append(name))

import fedcomp
from fedcomp.algorithms import za1
from fedcomp.data import synthetic_fedprox
from fedcomp.losses import Logistic
from fedcomp.regularizers import L1
from fedcomp.runtime import JaxCacheWarning, jax_like

route = sys.argv[1]
if route == "user_config":
    jax.config.update("jax_compilation_cache_dir", sys.argv[2])
data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=4, n_classes=2,
                         samples_per_client=10, n_features=5, seed=0)
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    if route == "by_hand":
        jax.config.update("jax_enable_x64", True)
        like = jax.numpy.zeros(0)
    else:
        like = jax_like()
    problem = fedcomp.Problem(Logistic(l2=0.01), L1(alpha=1e-3), data.to(like))
    runs = [fedcomp.simulate(za1(client_lr=0.1, local_steps=2), problem, ROUNDS,
                             metrics=[]) for _ in range(2)]
print(json.dumps({
    "x": [np.asarray(run.x).tolist() for run in runs],
    "hits": sum(e.endswith("/compilation_cache/cache_hits") for e in events),
    "writes": sum(e.endswith("/compilation_cache/cache_misses") for e in events),
    "warnings": [str(w.message) for w in caught if issubclass(w.category, JaxCacheWarning)],
    "jax_dir": jax.config.jax_compilation_cache_dir,
    "min_compile_time": jax.config.jax_persistent_cache_min_compile_time_secs,
}))
""".replace("ROUNDS", str(ROUNDS))


def run_process(home: Path, cache: str | None, route: str = "jax_like", *args: str,
                **env: str) -> dict:
    """Run :data:`SCRIPT` in a fresh process, every default cache location under ``home``."""
    environ = {k: v for k, v in os.environ.items()
               if k not in ("FEDCOMP_JAX_CACHE", "JAX_COMPILATION_CACHE_DIR")}
    environ.update(HOME=str(home), XDG_CACHE_HOME=str(home / "xdg"),
                   FEDCOMP_CACHE_DIR=str(home / "fedcomp-cache"),
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
                   **env)
    if cache is not None:
        environ["FEDCOMP_JAX_CACHE"] = cache
    res = subprocess.run([sys.executable, "-c", SCRIPT, route, *args], env=environ,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def numpy_model() -> np.ndarray:
    """The script's run on NumPy, in this process."""
    data = synthetic_fedprox(alpha=1.0, beta=1.0, n_clients=4, n_classes=2,
                             samples_per_client=10, n_features=5, seed=0)
    problem = Problem(Logistic(l2=0.01), L1(alpha=1e-3), data)
    return np.asarray(simulate(za1(client_lr=0.1, local_steps=2), problem, ROUNDS, metrics=[]).x)


def files_under(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*") if p.is_file()}


def test_a_second_process_reads_every_compilation_back(tmp_path):
    cache = tmp_path / "jax-cache"
    first = run_process(tmp_path, str(cache))
    entries = files_under(cache)
    assert first["jax_dir"] == str(cache) and first["min_compile_time"] == 0.0
    assert first["writes"] > 0 and len(entries) == first["writes"]
    # the second simulate of the first process already reads its round back
    assert first["x"][1] == first["x"][0] and first["hits"] > 0

    second = run_process(tmp_path, str(cache))
    assert second["writes"] == 0 and second["hits"] >= first["writes"]
    assert files_under(cache) == entries
    assert second["x"] == first["x"]  # bit for bit
    np.testing.assert_allclose(second["x"][0], numpy_model(), rtol=1e-12, atol=1e-15)
    assert first["warnings"] == second["warnings"] == []


def test_the_default_directory_and_the_off_switch(tmp_path):
    on = run_process(tmp_path / "on", None)  # unset: $FEDCOMP_CACHE_DIR/jax
    assert on["jax_dir"] == str(tmp_path / "on" / "fedcomp-cache" / "jax")
    assert len(files_under(tmp_path / "on" / "fedcomp-cache" / "jax")) == on["writes"] > 0

    (tmp_path / "off").mkdir()
    off = run_process(tmp_path / "off", "off")
    assert off["jax_dir"] is None and off["hits"] == off["writes"] == 0
    assert files_under(tmp_path / "off") == set()
    assert off["x"] == on["x"]


def test_an_unwritable_directory_warns_once_and_the_run_goes_on(tmp_path):
    blocker = tmp_path / "a-file"  # a directory cannot be made under a file, even as root
    blocker.write_text("")
    # jax arrays made without jax_like: the engine's own check (check_x64) sets the cache up
    out = run_process(tmp_path, str(blocker / "jax"), "by_hand")
    assert len(out["warnings"]) == 1  # two simulate calls, one warning
    assert str(blocker / "jax") in out["warnings"][0] and "FEDCOMP_JAX_CACHE" in out["warnings"][0]
    assert out["jax_dir"] is None and out["writes"] == 0
    np.testing.assert_allclose(out["x"][0], numpy_model(), rtol=1e-12, atol=1e-15)
    assert out["x"][1] == out["x"][0]


def test_a_cache_the_user_set_up_in_jax_is_left_alone(tmp_path):
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    by_env = run_process(tmp_path, str(ours), JAX_COMPILATION_CACHE_DIR=str(theirs))
    assert by_env["jax_dir"] == str(theirs)
    by_config = run_process(tmp_path, str(ours), "user_config", str(theirs))
    assert by_config["jax_dir"] == str(theirs)
    for out in (by_env, by_config):
        # jax's own threshold (1 s) stays: nothing of this small run is written
        assert out["min_compile_time"] == 1.0 and out["warnings"] == []
    assert not ours.exists()


# --- the policy's pure parts ------------------------------------------------------------------

def test_where_the_cache_lives():
    assert default_cache_dir({}) == Path.home() / ".cache" / "fedcomp" / "jax"
    assert default_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/fedcomp/jax")
    assert default_cache_dir({"XDG_CACHE_HOME": "/x", "FEDCOMP_CACHE_DIR": "/f"}) == \
        Path("/f/jax")
    for off in ("off", "OFF", " off ", "", "0", "false", "no", "none"):
        assert requested_cache_dir({"FEDCOMP_JAX_CACHE": off}) is None, off
    assert requested_cache_dir({"FEDCOMP_JAX_CACHE": "~/jc"}) == Path.home() / "jc"
    assert requested_cache_dir({"FEDCOMP_JAX_CACHE": "rel"}) == Path.cwd() / "rel"
    assert requested_cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/fedcomp/jax")


def test_what_counts_as_the_users_own_setting():
    def jax(folder=None, enabled=True):
        return SimpleNamespace(config=SimpleNamespace(jax_compilation_cache_dir=folder,
                                                      jax_enable_compilation_cache=enabled))

    assert not configured_by_user(jax(), {})
    assert configured_by_user(jax("/mine"), {})
    assert configured_by_user(jax(), {"JAX_COMPILATION_CACHE_DIR": "/mine"})
    assert configured_by_user(jax(enabled=False), {})  # switched off in jax: stays off


def test_write_error_names_the_cause(tmp_path):
    assert write_error(tmp_path / "new" / "dir") is None
    assert (tmp_path / "new" / "dir").is_dir() and not any((tmp_path / "new" / "dir").iterdir())
    (tmp_path / "file").write_text("")
    assert "NotADirectoryError" in write_error(tmp_path / "file" / "dir")


def test_a_jax_that_refuses_the_setting_warns_and_the_run_goes_on(tmp_path, monkeypatch):
    import fedcomp._extras
    from fedcomp.runtime import JaxCacheWarning
    from fedcomp.runtime._jax_cache import use_compilation_cache

    class Config:  # a later jax whose flags are read and set differently
        jax_compilation_cache_dir = None
        jax_enable_compilation_cache = True

        def update(self, name, value):
            raise AttributeError(f"no flag {name}")

    monkeypatch.setattr(fedcomp._extras, "require",
                        lambda *args: SimpleNamespace(config=Config()))
    monkeypatch.setenv("FEDCOMP_JAX_CACHE", str(tmp_path / "cache"))
    with pytest.warns(JaxCacheWarning, match="AttributeError: no flag"):
        assert use_compilation_cache.__wrapped__() is None  # uncached: this call only
