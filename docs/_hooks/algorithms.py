"""MkDocs hook: the algorithm pages' entries, tables and counts, written from the registry.

``docs/api/algorithms.md`` holds the marker :data:`MARKER` where every registered
algorithm's entry goes, one section per family (each registry entry's ``family``, in the
order of :data:`fedcomp.algorithms.FAMILIES`): adding an algorithm to the registry documents
it, with no edit of the page.

The tables and counts of the README and the pages (algorithms, families, experiments,
papers) are *generated blocks*, between
``<!-- registry:NAME -->`` and ``<!-- /registry:NAME -->`` (NAME one of :data:`RENDERERS`;
a count's markers stand inside a line of text, since a line that starts with ``<!--`` is an
HTML block to GitHub's Markdown). On the site this hook renders each block afresh from the
registry, so the site never shows a stale table. The README is no page of the site, and
GitHub shows the pages' Markdown as written: ``python -m scripts.render_tables`` rewrites
the blocks of both from the package's built-in algorithms, and tests/product/test_readme.py
fails, naming that command, where a block is out of date. Both read every fact from the
algorithms' :class:`~fedcomp._registry.AlgorithmEntry` records.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

#: Where the page wants the algorithms' entries.
MARKER = "<!-- the registered algorithms, by family (docs/_hooks/algorithms.py) -->"

#: A generated block: ``<!-- registry:NAME (any note) -->body<!-- /registry:NAME -->``.
BLOCK = re.compile(r"<!-- registry:(?P<name>[\w-]+)(?P<note>[^>]*?)-->(?P<body>.*?)"
                   r"<!-- /registry:(?P=name) -->", re.S)

#: Each family's page of the algorithm pages (docs/algorithms/); a family without one (a
#: user's own) is linked to the API reference, which documents it under its own heading.
FAMILY_PAGES = {
    "Local steps and the server prox": "local-steps.md",
    "Dual averaging": "dual-averaging.md",
    "FedDR, ADMM and primal–dual": "splitting.md",
    "Hard thresholding": "hard-thresholding.md",
    "Local training with compression": "compressed-local-training.md",
    "Personalised": "personalized.md",
    "Decentralized": "decentralized.md",
}


def family_order(entries: Sequence[Any], families: Sequence[str]) -> list[str]:
    """The families of ``entries``: those of ``families`` in its order, then any other
    family an entry names (a user's own), sorted."""
    named = {e.family for e in entries}
    return [f for f in families if f in named] + sorted(named - set(families))


def registry_markdown(entries: Sequence[Any], families: Sequence[str]) -> str:
    """The Markdown of the entries: a ``##`` section per family, a mkdocstrings block per
    algorithm (its factory's own module and name), families in ``families``' order and
    then any other family an entry names."""
    sections = []
    for family in family_order(entries, families):
        blocks = [f"::: {e.factory.__module__}.{e.factory.__name__}\n    options:\n"
                  "      heading_level: 3\n" for e in entries if e.family == family]
        sections.append(f"## {family}\n\n" + "\n".join(blocks))
    return "\n".join(sections)


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell (a ``|`` would end the cell)."""
    return text.replace("|", "\\|")


def algorithm_count(entries: Sequence[Any], families: Sequence[str]) -> str:
    """``"32 algorithms"``: how many are registered."""
    return f"{len(entries)} algorithms"


def family_count(entries: Sequence[Any], families: Sequence[str]) -> str:
    """``"7 families"``: how many families the algorithms fall into."""
    return f"{len(family_order(entries, families))} families"


def algorithm_table(entries: Sequence[Any], families: Sequence[str]) -> str:
    """One row per algorithm, family by family (the family named on its first row): its
    configuration name and its registry description, which cites its paper."""
    rows = ["| family | name | method (paper) |", "|---|---|---|"]
    for family in family_order(entries, families):
        members = [e for e in entries if e.family == family]
        rows += [f"| {_cell(family) if i == 0 else ''} | `{e.name}` | {_cell(e.description)} |"
                 for i, e in enumerate(members)]
    return "\n".join(rows)


def family_table(entries: Sequence[Any], families: Sequence[str]) -> str:
    """One row per family: the family, linked to its page from docs/algorithms/ (a family
    without a page of its own, to the API reference), and its algorithms."""
    rows = ["| family | algorithms |", "|---|---|"]
    for family in family_order(entries, families):
        names = ", ".join(f"`{e.name}`" for e in entries if e.family == family)
        page = FAMILY_PAGES.get(family, "../api/algorithms.md")
        rows.append(f"| [{_cell(family)}]({page}) | {names} |")
    return "\n".join(rows)


def experiment_count(entries: Sequence[Any], families: Sequence[str]) -> str:
    """``"18 experiments"``: the built-in experiments (``fedcomp list experiments``)."""
    from fedcomp.config import experiment_names

    return f"{len(experiment_names())} experiments"


def paper_count(entries: Sequence[Any], families: Sequence[str]) -> str:
    """``"10 papers"``: the papers the built-in experiments follow (each configuration's
    ``paper``; a series of papers judged together, such as Condat et al.'s, counts once), as
    the reproduction report groups them."""
    from fedcomp.config import experiment_names, load
    from fedcomp.report import paper_of

    return f"{len({paper_of(load(name)) for name in experiment_names()})} papers"


#: What each generated block holds, by its NAME; each renderer takes the entries and the
#: families' order (the experiments' and papers' counts read the built-in configurations).
RENDERERS: dict[str, Callable[[Sequence[Any], Sequence[str]], str]] = {
    "algorithm-count": algorithm_count,
    "family-count": family_count,
    "experiment-count": experiment_count,
    "paper-count": paper_count,
    "algorithm-table": algorithm_table,
    "family-table": family_table,
}


def render_blocks(text: str, entries: Sequence[Any], families: Sequence[str], *,
                  keep_markers: bool = True, where: str = "the page") -> str:
    """``text`` with each generated block's body rendered afresh from ``entries``.

    A table block's body stands apart from its markers by blank lines (an HTML comment
    followed by a table is one HTML block to some Markdown readers); a count's is inline.
    ``keep_markers=False`` drops the markers (the site's copy). An unknown block name is a
    ValueError naming it, ``where`` it is, and the names known.
    """
    def render(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in RENDERERS:
            raise ValueError(f"{where}: unknown generated block 'registry:{name}'; "
                             f"known: {', '.join(RENDERERS)}")
        body = RENDERERS[name](entries, families)
        if "\n" in body:  # a table: apart from its markers by blank lines
            body = f"\n\n{body}\n\n"
        if not keep_markers:
            return body
        return f"<!-- registry:{name}{match['note']}-->{body}<!-- /registry:{name} -->"

    return BLOCK.sub(render, text)


def stale_blocks(text: str, entries: Sequence[Any], families: Sequence[str],
                 where: str = "the page") -> list[str]:
    """The names of ``text``'s generated blocks whose body is not what ``entries`` render."""
    fresh = BLOCK.finditer(render_blocks(text, entries, families, where=where))
    return [now["name"] for now, want in zip(BLOCK.finditer(text), fresh, strict=True)
            if now["body"] != want["body"]]


def builtin_entries(registry: Any) -> tuple[Any, ...]:
    """The entries of the algorithms fedcomp ships (their factory is a module of the
    package), in registration order: what the committed README and pages show, whoever
    registered more algorithms of their own in this process."""
    return tuple(e for e in registry.entries() if e.factory.__module__.startswith("fedcomp."))


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if MARKER not in markdown and not BLOCK.search(markdown):
        return markdown
    from fedcomp.algorithms import FAMILIES, REGISTRY

    entries = REGISTRY.entries()
    where = getattr(getattr(page, "file", None), "src_path", "the page")
    markdown = render_blocks(markdown, entries, FAMILIES, keep_markers=False, where=where)
    return markdown.replace(MARKER, registry_markdown(entries, FAMILIES))
