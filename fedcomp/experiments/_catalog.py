"""The built-in experiments' rules: which module judges which experiment.

An experiment is its TOML file (``fedcomp/configs/NAME.toml``, :func:`fedcomp.config.load`)
and, when it makes a claim, a module ``fedcomp/experiments/claims/NAME.py`` holding the claim's
verdict rule (``verdict(finals, config) -> (verdict, rule)``) and whatever else code must
compute for it. The module is found by the experiment's name, so adding an experiment
touches no list. A timing experiment (``kind = "timing"`` in its TOML) is measured by its
module's ``run(config, out_dir, stream)`` after ``check_config(config)``.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

from ..config import ConfigError, experiment_names, load


def rule_module(name: str) -> ModuleType | None:
    """The module judging experiment ``name``: ``fedcomp.experiments.claims.NAME``, or None (a
    configuration of the user's, or an experiment without a claim)."""
    if not name.isidentifier() or name.startswith("_"):
        return None
    module = f"{__package__}.claims.{name}"
    if importlib.util.find_spec(module) is None:
        return None
    return importlib.import_module(module)


class _Rules(Mapping[str, ModuleType]):
    """Built-in experiment name → its rule module (read-only, imported on first use)."""

    def __init__(self, kind: str | None = None) -> None:
        self._kind = kind

    def _ruled(self, name: str) -> bool:
        """Whether built-in experiment ``name`` has a rule module (of this kind)."""
        return rule_module(name) is not None and (
            self._kind is None or load(name).get("kind") == self._kind)

    def _names(self) -> list[str]:
        return [n for n in experiment_names() if self._ruled(n)]

    def __getitem__(self, name: str) -> ModuleType:
        if name not in experiment_names() or not self._ruled(name):
            raise KeyError(name)
        module = rule_module(name)
        assert module is not None
        return module

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())


#: Every built-in experiment with a rule module, by name.
EXPERIMENTS: Mapping[str, ModuleType] = _Rules()

#: The timing experiments (``kind = "timing"``), by name.
TIMINGS: Mapping[str, ModuleType] = _Rules("timing")


def timing_module(config: dict[str, Any]) -> ModuleType:
    """The module measuring a ``kind = "timing"`` configuration (it must have one)."""
    module = rule_module(str(config.get("name", "")))
    if module is None or not hasattr(module, "run") or not hasattr(module, "check_config"):
        raise ConfigError(f"kind = 'timing' needs name = one of {sorted(TIMINGS)} (got "
                          f"{config.get('name')!r})")
    return module
