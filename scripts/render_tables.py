"""Rewrite the README's and the documentation pages' generated blocks from the registry.

The algorithm tables and the counts (algorithms, families, experiments, papers) between
``<!-- registry:NAME -->`` and ``<!-- /registry:NAME -->`` are rendered from the built-in
algorithms' registry entries and the built-in experiments by the documentation's own hook
(docs/_hooks/algorithms.py), which renders them on the site too. Run from the repository's root::

    python -m scripts.render_tables           # rewrite the blocks that are out of date
    python -m scripts.render_tables --check   # only list them; exit status 1 if any

tests/product/test_readme.py runs the check.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
HOOK = ROOT / "docs" / "_hooks" / "algorithms.py"
#: What a check that finds a stale block tells the reader to do.
REGENERATE_HINT = "regenerate them with `python -m scripts.render_tables` (repository root)"


def load_hook() -> ModuleType:
    """The docs' algorithms hook, loaded from its file (as MkDocs loads it)."""
    spec = importlib.util.spec_from_file_location("fedcomp_docs_algorithms_hook", HOOK)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(f"no docs hook at {HOOK}; run from a checkout of fedcomp")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


def pages(root: Path = ROOT) -> list[Path]:
    """The README and the documentation pages (not the generated report)."""
    docs = root / "docs"
    return [root / "README.md", *sorted(p for p in docs.rglob("*.md")
                                        if "report" not in p.relative_to(docs).parts)]


def stale(root: Path = ROOT) -> dict[Path, list[str]]:
    """``{page: names of its out-of-date blocks}`` for the pages with any, against the
    built-in algorithms (an algorithm registered in this process is not shown)."""
    from fedcomp.algorithms import FAMILIES, REGISTRY

    hook = load_hook()
    entries = hook.builtin_entries(REGISTRY)
    found = {}
    for page in pages(root):
        names = hook.stale_blocks(page.read_text(encoding="utf-8"), entries, FAMILIES,
                                  where=str(page.relative_to(root)))
        if names:
            found[page] = names
    return found


def rewrite(root: Path = ROOT) -> list[Path]:
    """Rewrite every out-of-date block from the built-in algorithms; the pages rewritten."""
    from fedcomp.algorithms import FAMILIES, REGISTRY

    hook = load_hook()
    entries = hook.builtin_entries(REGISTRY)
    changed = []
    for page in stale(root):
        text = page.read_text(encoding="utf-8")
        page.write_text(hook.render_blocks(text, entries, FAMILIES,
                                           where=str(page.relative_to(root))),
                        encoding="utf-8")
        changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.render_tables",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="list the out-of-date blocks and exit 1 if any; write nothing")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for page, names in found.items():
            print(f"{page.relative_to(ROOT)}: out of date: {', '.join(names)}")
        if found:
            print(REGENERATE_HINT)
        return 1 if found else 0
    for page in rewrite():
        print(f"rewrote {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
