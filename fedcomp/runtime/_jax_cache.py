"""jax's persistent compilation cache for the compiled engine: compile a round once per machine.

Each :func:`~fedcomp.simulate` call on jax arrays traces and compiles its round anew (1–2 s
on a 2-core CPU), and so does every process: each ``fedcomp run``, each worker of
``--jobs N``, each Ray task. jax can keep compiled executables on disk, keyed by the
canonical XLA module (source locations stripped, so a Python id or a line number does not
enter the key), jaxlib's version, the platform, the XLA flags and the compile options; a
later compilation of the same module — in this process or another — then reads the
executable back instead of compiling it.

The policy, applied once per process by :func:`use_compilation_cache` when fedcomp first
moves data to jax (``fedcomp.runtime.jax_like``) or runs the compiled engine:

* the directory is ``$FEDCOMP_JAX_CACHE`` if set, else ``$FEDCOMP_CACHE_DIR/jax``, else
  ``$XDG_CACHE_HOME/fedcomp/jax``, else ``~/.cache/fedcomp/jax``;
* ``FEDCOMP_JAX_CACHE=off`` (or ``0``, ``false``, ``no``, ``none``, empty) leaves jax's
  cache off;
* a cache the user configured in jax (``jax_compilation_cache_dir`` set, the
  ``JAX_COMPILATION_CACHE_DIR`` variable, or ``jax_enable_compilation_cache`` off) is left
  exactly as it is;
* a directory that cannot be created or written leaves the cache off for the process with
  one :class:`JaxCacheWarning`; the run itself goes on, it only compiles.

jax writes an executable only when its compilation took at least
``jax_persistent_cache_min_compile_time_secs``, 1 s by default; that would store nothing of
a small round, whose two compiled functions take about 0.3 s each and whose eager helpers
(the divergence check, array set-up) 20–40 ms each on a 2-core CPU. fedcomp lowers the
threshold to 0 — unless the user changed it — since reading an entry back takes about 4 ms.
The cache grows by one entry per distinct compiled function (a few KB to a few hundred KB
each) and is never pruned by fedcomp: delete the directory at any time.
"""

from __future__ import annotations

import functools
import os
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: The environment variable that moves the cache, or switches it off.
CACHE_ENV = "FEDCOMP_JAX_CACHE"
#: Values of :data:`CACHE_ENV` that switch the cache off (compared case-insensitively).
OFF_VALUES = frozenset({"", "off", "0", "false", "no", "none"})
#: jax's own environment variable for the cache directory (read by jax at import).
JAX_DIR_ENV = "JAX_COMPILATION_CACHE_DIR"
#: jax's environment variable for the write threshold, and the threshold's default.
JAX_MIN_TIME_ENV = "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"
JAX_DEFAULT_MIN_COMPILE_TIME = 1.0


class JaxCacheWarning(UserWarning):
    """The persistent compilation cache is off for this process (its directory is not
    writable); runs compile as without it."""


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    """``$FEDCOMP_CACHE_DIR/jax``, else ``$XDG_CACHE_HOME/fedcomp/jax``, else
    ``~/.cache/fedcomp/jax``.

    Examples
    --------
    >>> default_cache_dir({"FEDCOMP_CACHE_DIR": "/scratch/fc"}).as_posix()
    '/scratch/fc/jax'
    >>> default_cache_dir({"XDG_CACHE_HOME": "/var/cache/me"}).as_posix()
    '/var/cache/me/fedcomp/jax'
    """
    if environ.get("FEDCOMP_CACHE_DIR"):  # beside the reference solutions (fedcomp.reference)
        return Path(environ["FEDCOMP_CACHE_DIR"]).expanduser() / "jax"
    if environ.get("XDG_CACHE_HOME"):
        return Path(environ["XDG_CACHE_HOME"]).expanduser() / "fedcomp" / "jax"
    return Path.home() / ".cache" / "fedcomp" / "jax"


def requested_cache_dir(environ: Mapping[str, str]) -> Path | None:
    """The directory :data:`CACHE_ENV` asks for (absolute), or ``None`` when it says off.

    Examples
    --------
    >>> requested_cache_dir({"FEDCOMP_JAX_CACHE": "OFF"}) is None
    True
    >>> requested_cache_dir({"FEDCOMP_JAX_CACHE": "/tmp/jc"}).as_posix()
    '/tmp/jc'
    """
    if CACHE_ENV not in environ:
        return default_cache_dir(environ).absolute()
    value = environ[CACHE_ENV].strip()
    if value.lower() in OFF_VALUES:
        return None
    # absolute now, so that a later chdir of the process does not move the cache
    return Path(value).expanduser().absolute()


def configured_by_user(jax: Any, environ: Mapping[str, str]) -> bool:
    """Whether the user set jax's cache up (or off) themselves: then fedcomp leaves it."""
    return (bool(jax.config.jax_compilation_cache_dir) or JAX_DIR_ENV in environ
            or not jax.config.jax_enable_compilation_cache)


def write_error(path: Path) -> str | None:
    """Why ``path`` cannot hold the cache (created if missing), or ``None`` if it can."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path, prefix=".fedcomp-write-check-"):
            pass
    except OSError as error:
        return f"{type(error).__name__}: {error}"
    return None


@functools.cache
def use_compilation_cache() -> Path | None:
    """Point jax's persistent compilation cache at fedcomp's directory, once per process.

    Returns
    -------
    pathlib.Path or None
        The directory jax now caches in, or ``None`` where fedcomp left the cache alone: off
        by :data:`CACHE_ENV`, configured by the user in jax, or not usable (then with one
        :class:`JaxCacheWarning`).
    """
    from .._extras import require

    jax = require("jax", "the jax backend's compilation cache")
    environ = os.environ
    path = requested_cache_dir(environ)
    try:
        if path is None or configured_by_user(jax, environ):
            return None
        error = write_error(path)
        if error is None:
            _point_jax_at(jax, path, environ)
    except Exception as exc:  # the cache only saves time: no change in jax may fail a run
        error = f"jax's configuration: {type(exc).__name__}: {exc}"
    if error is not None:
        warnings.warn(f"fedcomp runs without jax's compilation cache (every process compiles "
                      f"its rounds again): cannot use {path} ({error}); set {CACHE_ENV} to "
                      f"a writable directory, or {CACHE_ENV}=off to silence this",
                      JaxCacheWarning, stacklevel=3)
        return None
    return path


def _point_jax_at(jax: Any, path: Path, environ: Mapping[str, str]) -> None:
    """Set jax's cache directory to ``path`` and, unless the user changed it, the write
    threshold to 0 s."""
    jax.config.update("jax_compilation_cache_dir", str(path))
    if (jax.config.jax_persistent_cache_min_compile_time_secs == JAX_DEFAULT_MIN_COMPILE_TIME
            and JAX_MIN_TIME_ENV not in environ):
        # a small round compiles in well under jax's 1 s threshold (module docstring)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
