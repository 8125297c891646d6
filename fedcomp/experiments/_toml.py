"""Experiments whose configuration is a TOML file of the repository's ``configs/``.

Such a module sets ``__getattr__ = toml_config(NAME)``: its ``CONFIG`` is read from
``configs/<NAME>.toml`` on first use (``fedcomp run NAME`` from a source checkout), so the
file stays the one definition of the experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs"


def load_config(name: str) -> dict[str, Any]:
    """The configuration ``configs/<name>.toml`` of a source checkout."""
    from ..config import load

    path = CONFIG_DIR / f"{name}.toml"
    if not path.exists():
        raise AttributeError(f"{name}: {path} is not there (the experiment configs ship with "
                             "the source repository); pass the TOML file to 'fedcomp run'")
    return load(path)


def toml_config(name: str) -> Callable[[str], Any]:
    """A module ``__getattr__`` (PEP 562) that serves ``CONFIG`` from ``configs/<name>.toml``."""

    def module_getattr(attribute: str) -> Any:
        if attribute == "CONFIG":
            return load_config(name)
        raise AttributeError(attribute)

    return module_getattr
