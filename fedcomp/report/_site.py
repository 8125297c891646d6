"""The report as pages of the documentation site: ``index.md`` (what made it, the summary of
the verdicts and the papers) and one ``paper-KEY.md`` per paper (its experiments, each
reading's verdict, figures and table), in the site's theme, navigation and search.

The pages link the compact PNG figures and the small files (:data:`SITE_FILES`); the site
leaves out the report's bulk (SVGs, ``results.csv``, ``summary.json``: mkdocs.yml's
``exclude_docs``), so the whole report stays under the site's size limit. MkDocs puts the
paper pages in the navigation in the order ``index.md`` links them (docs/_hooks/report.py).
The standalone ``index.html`` / ``report.md`` of :mod:`._page` are the same report as one
page, for a report folder read without the site.
"""

from __future__ import annotations

import re
from pathlib import Path

from ._catalogue import PAPERS, paper_name, paper_of
from ._page import READING, _by_experiment, _by_paper, _claim, _scale, _time_spent
from ._readings import (
    diagnoses_cell,
    diagnosis_sentences,
    reading_label,
    reading_title,
    readings_lead,
    readings_of,
    seconds_cell,
    verdicts_cell,
)
from ._result import ExperimentResult
from ._tables import mean_std_table

#: An experiment's files the site serves beside its figures (small: the configuration that
#: ran, the log, a failure's traceback); the others stay in the report folder only.
SITE_FILES = ("config.toml", "log.txt", "error.txt")

#: The site's first page of the report.
SITE_INDEX = "index.md"

#: A paper's page of the report.
PAPER_PAGE = re.compile(r"paper-[\w.-]+\.md")


def paper_page(paper: str) -> str:
    """The file of ``paper``'s page (``paper-seed000.md``)."""
    return f"paper-{paper}.md"


def _cell(text: str) -> str:
    """``text`` as a Markdown table cell (a ``|`` would end it)."""
    return str(text).replace("|", "\\|")


def _table(header: list[str], body: list[list[str]]) -> list[str]:
    return ["| " + " | ".join(_cell(h) for h in header) + " |", "|" + "---|" * len(header),
            *["| " + " | ".join(_cell(c) for c in row) + " |" for row in body]]


def _files(r: ExperimentResult) -> str:
    """The reading's files: the site's linked, the others named in the report folder."""
    served = " · ".join(f"[{f}]({r.key}/{f})" for f in r.files if f in SITE_FILES)
    kept = ", ".join(f"`{r.key}/{f}`" for f in r.files if f not in SITE_FILES)
    return "Files: " + "; ".join(part for part in (
        served, kept and f"in the report folder also {kept}") if part)


def _reading_section(r: ExperimentResult) -> list[str]:
    """One reading's subsection: its anchor and title, files, verdict and rule, figures
    (PNG) and table of final metrics."""
    lines = ["", f'<a id="{r.anchor}"></a>', "", f"### {reading_title(r)}", ""]
    if r.files:
        lines += [_files(r), ""]
    if r.error:
        return [*lines, f"**Error.** `{r.error}`"]
    lines += [f"**Verdict: {r.verdict}.** Rule: {r.rule}", ""]
    lines += [f"![{r.key} {fig}]({r.key}/{fig})" for fig in r.figures]
    return [*lines, "", *_table(*mean_std_table(r))]


def _experiment_section(name: str, group: list[ExperimentResult]) -> list[str]:
    """An experiment's section: its claim, whether its readings agree, its diagnoses and a
    subsection per reading."""
    lead, verdicts = readings_lead(group)
    lines = ["", f'<a id="{name}"></a>', "", f"## {name}", "",
             f"**Claim.** {_claim(group[0].config)}", "",
             f"**Readings.** {f'**{lead}** ' if lead else ''}{verdicts}"]
    diagnosed = diagnosis_sentences(group)
    if diagnosed:
        lines += ["", "**Diagnoses.**", "", *[f"- {s}" for s in diagnosed]]
    for r in group:
        lines += _reading_section(r)
    return lines


def paper_markdown(paper: str, experiments: dict[str, list[ExperimentResult]]) -> str:
    """A paper's page: its name, the full reference and each experiment's section."""
    lines = [f"# {paper_name(paper)}", "",
             f"*{PAPERS.get(paper, 'Experiments of no paper above.')}*", "",
             "[The summary of every verdict](index.md) says how to read the figures, tables "
             "and verdicts."]
    for name, group in experiments.items():
        lines += _experiment_section(name, group)
    return "\n".join(lines) + "\n"


def index_markdown(results: list[ExperimentResult], quick: bool, seconds: float,
                   header: dict[str, str]) -> str:
    """The report's first page: what made it, how to read it, the summary of the verdicts
    (each experiment linked to its section) and the papers' pages with each reading's
    verdict."""
    papers = _by_paper(results)
    groups = _by_experiment(results)
    lines = ["# Reproduction report", "",
             *_table(["made with", ""], [[key, f"`{value}`" if key == "command" else value]
                                         for key, value in header.items()]),
             "", f"{len(groups)} experiments ({len(results)} runs of an experiment: readings "
             f"and diagnoses) of {len(papers)} papers at {_scale(quick)}; "
             f"{_time_spent(results, seconds)}", "", READING, "", "## Summary", ""]
    body = []
    for name, group in groups.items():
        paper = paper_of(group[0].config)
        body.append([f"[{name}]({paper_page(paper)}#{name})",
                     f"[{paper_name(paper)}]({paper_page(paper)})", group[0].verdict,
                     verdicts_cell(group), diagnoses_cell(group), seconds_cell(group)])
    lines += _table(["experiment", "paper", "as written", "other readings", "diagnoses",
                     "time (s)"], body)
    lines += ["", "## Papers", ""]
    for paper, experiments in papers.items():
        lines.append(f"- [{paper_name(paper)}]({paper_page(paper)})")
        for name, group in experiments.items():
            links = "; ".join(f"[{reading_label(r)}]({paper_page(paper)}#{r.anchor}): "
                              f"{r.verdict}" for r in readings_of(group))
            lines.append(f"    - [{name}]({paper_page(paper)}#{name}): {links}")
    return "\n".join(lines) + "\n"


def site_pages(results: list[ExperimentResult], quick: bool, seconds: float,
               header: dict[str, str]) -> dict[str, str]:
    """``{file name: Markdown}``: :data:`SITE_INDEX` and each paper's page."""
    pages = {SITE_INDEX: index_markdown(results, quick, seconds, header)}
    for paper, experiments in _by_paper(results).items():
        pages[paper_page(paper)] = paper_markdown(paper, experiments)
    return pages


def write_site(out: Path, results: list[ExperimentResult], quick: bool, seconds: float,
               header: dict[str, str]) -> None:
    """Write :func:`site_pages` into ``out``, and remove a paper page no result has left
    (a paper dropped from the report)."""
    pages = site_pages(results, quick, seconds, header)
    for stale in out.glob("paper-*.md"):
        if stale.name not in pages:
            stale.unlink()
    for name, text in pages.items():
        (out / name).write_text(text, encoding="utf-8")
