"""MkDocs hook: the API reference's algorithm entries, written from the registry.

``docs/api/algorithms.md`` holds the marker :data:`MARKER` where every registered
algorithm's entry goes, one section per family (each registry entry's ``family``, in the
order of :data:`fedcomp.algorithms.FAMILIES`): adding an algorithm to the registry documents
it, with no edit of the page.
"""

from __future__ import annotations

from typing import Any

#: Where the page wants the algorithms' entries.
MARKER = "<!-- the registered algorithms, by family (docs/_hooks/algorithms.py) -->"


def registry_markdown(entries: Any, families: Any) -> str:
    """The Markdown of the entries: a ``##`` section per family, a mkdocstrings block per
    algorithm (its factory's own module and name), families in ``families``' order and
    then any other family an entry names."""
    order = list(families) + sorted({e.family for e in entries} - set(families))
    sections = []
    for family in order:
        blocks = [f"::: {e.factory.__module__}.{e.factory.__name__}\n    options:\n"
                  "      heading_level: 3\n" for e in entries if e.family == family]
        if blocks:
            sections.append(f"## {family}\n\n" + "\n".join(blocks))
    return "\n".join(sections)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown:
        return markdown
    from fedcomp.algorithms import FAMILIES, REGISTRY

    return markdown.replace(MARKER, registry_markdown(REGISTRY.entries(), FAMILIES))
