"""One experiment's outcome in the report (:class:`ExperimentResult`) and its verdict's level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..config import AS_WRITTEN
from ..experiments import validate


@dataclass
class ExperimentResult:
    """One experiment's outcome in the report."""

    name: str
    config: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    reused: bool = False
    error: str = ""
    verdict: str = ""
    rule: str = ""
    figures: list[str] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    #: The reading of the paper that ran (:func:`fedcomp.config.readings`), what it follows,
    #: the reading it starts from, and for a diagnosis the one change it isolates.
    reading: str = AS_WRITTEN
    follows: str = "the paper as written"
    base: str = ""
    diagnosis: str = ""
    _checked: dict[str, Any] | None = field(default=None, init=False, repr=False,
                                            compare=False)

    @property
    def key(self) -> str:
        """Its folder in the report: ``NAME`` as written, ``NAME/READING`` in another reading."""
        return self.name if self.reading == AS_WRITTEN else f"{self.name}/{self.reading}"

    @property
    def anchor(self) -> str:
        """Its section's id on the page, ``NAME--READING`` (``NAME`` is the experiment's)."""
        return f"{self.name}--{self.reading}"

    def checked(self) -> dict[str, Any]:
        """The configuration validated, defaults filled in (once: every table and figure
        of the page reads it)."""
        if self._checked is None:
            self._checked = validate(self.config)
        return self._checked


def verdict_class(verdict: str) -> str:
    """``reproduced`` / ``partly`` / ``not-reproduced`` / ``other`` (for styling and counts)."""
    for word in ("reproduced", "partly", "not reproduced"):
        if verdict.startswith(word):
            return word.replace(" ", "-")
    return "other"
