"""MkDocs hook: the reproduction report's pages in the site's navigation.

``fedcomp report --out docs/report`` writes the report's first page, ``report/index.md``,
and one page per paper, ``report/paper-KEY.md`` (:func:`fedcomp.report.write_site`). The
navigation names only the first page (mkdocs.yml); this hook puts each paper's page after
it, in the order the first page links them, titled by its heading, so that a paper added
to the report needs no edit of mkdocs.yml.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

#: The report's first page, as mkdocs.yml's navigation names it.
REPORT_INDEX = "report/index.md"

#: A link of the first page to a paper's page.
PAPER_LINK = re.compile(r"\]\((paper-[\w.-]+\.md)[)#]")


def paper_pages(index: Path) -> list[str]:
    """The paper pages ``index`` links, in its order, each once (``report/paper-KEY.md``)."""
    if not index.is_file():
        return []
    found = PAPER_LINK.findall(index.read_text(encoding="utf-8"))
    return [f"report/{name}" for name in dict.fromkeys(found)]


def with_papers(nav: list[Any], pages: list[str]) -> bool:
    """Insert ``pages`` after the navigation's entry of :data:`REPORT_INDEX`, in place,
    searching its sections; whether the entry was found."""
    for i, item in enumerate(nav):
        target = next(iter(item.values())) if isinstance(item, dict) else item
        if target == REPORT_INDEX:
            nav[i + 1:i + 1] = pages
            return True
        if isinstance(target, list) and with_papers(target, pages):
            return True
    return False


def on_config(config: Any) -> Any:
    pages = paper_pages(Path(config["docs_dir"]) / REPORT_INDEX)
    if config["nav"] is None:  # no navigation configured: MkDocs lists every page itself
        return config
    if pages and not with_papers(config["nav"], pages):
        raise ValueError(f"mkdocs.yml's nav names no {REPORT_INDEX}: the report's paper "
                         f"pages ({', '.join(pages)}) would be outside the navigation; add "
                         f"'- The report: {REPORT_INDEX}' under 'Reproduction report'")
    return config
