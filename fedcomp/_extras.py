"""Optional extras: importing what a feature needs, or one line naming the extra to install."""

from __future__ import annotations

import importlib
from typing import Any


class MissingExtraError(ImportError):
    """A feature needs an optional dependency that is not installed (the message names it)."""


def require(module: str, extra: str, feature: str) -> Any:
    """``import module``, or raise :class:`MissingExtraError` naming ``fedcomp[extra]``."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise MissingExtraError(f"{feature} needs {module}: pip install 'fedcomp[{extra}]'"
                                ) from None
