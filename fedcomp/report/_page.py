"""The report's two pages, ``report.md`` and ``index.html``: a header, the contents, the
summary of the verdicts and a section per paper, experiment and reading.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

from ._catalogue import PAPERS, paper_name, paper_of
from ._environment import environment
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
from ._result import ExperimentResult, verdict_class
from ._tables import mean_std_table


def _claim(config: dict[str, Any]) -> str:
    return str(config.get("claim") or config.get("description") or "")


def write_report(out: Path, results: list[ExperimentResult], quick: bool,
                 seconds: float, header: dict[str, str] | None = None) -> None:
    """Write ``index.html`` and ``report.md`` for ``results`` (``header``: :func:`environment`'s,
    taken now when not given)."""
    header = header or environment()
    (out / "report.md").write_text(markdown_report(results, quick, seconds, header))
    (out / "index.html").write_text(html_report(results, quick, seconds, header))


def _by_paper(results: list[ExperimentResult]) -> dict[str, dict[str, list[ExperimentResult]]]:
    """Paper → experiment → its readings' results, in the order they ran."""
    papers: dict[str, dict[str, list[ExperimentResult]]] = {}
    for result in results:
        papers.setdefault(paper_of(result.config), {}).setdefault(result.name, []).append(result)
    return papers


def _by_experiment(results: list[ExperimentResult]) -> dict[str, list[ExperimentResult]]:
    """Experiment → its readings' results (as written first, as they ran)."""
    groups: dict[str, list[ExperimentResult]] = {}
    for result in results:
        groups.setdefault(result.name, []).append(result)
    return groups


def _scale(quick: bool) -> str:
    return ("reduced sizes (`--quick`: each config's [quick] overrides)" if quick
            else "full sizes (the configs as written)")


def _time_spent(results: list[ExperimentResult], seconds: float) -> str:
    """How long the report took, and the experiments' own time when some were reused."""
    reused = sum(r.reused for r in results)
    if not reused:
        return f"{seconds:.0f} s in all."
    return (f"{seconds:.0f} s for this report, {reused} runs of an experiment reused from "
            f"earlier; they took {sum(r.seconds for r in results):.0f} s when they ran.")


#: How to read the report's numbers, printed above its summary table: the verdicts use the
#: median over seeds and every seed alone (:func:`fedcomp.experiments._verdict.over_seeds`),
#: which the mean ± std tables do not show; and what the readings are.
READING = ("Figures: median over seeds, min–max spread shaded; one color per algorithm "
           "throughout. Tables: final metrics, mean ± std over seeds. Verdicts: each "
           "experiment's rule applied to the final metrics' median over the seeds that "
           "converged and to every seed alone; a level (reproduced, partly) stands only when "
           "the median and at least two thirds of the seeds reach it; a method that diverged "
           "on any seed cannot win; a win over another run is sized seed by seed — the "
           "median paired relative difference must exceed its standard deviation over the "
           "seeds, else it is a tie, and every margin is printed with its rule. Readings: "
           "\"as written\" follows the paper's equations, "
           "\"as run\" the conventions of the authors' official code where it exists, each "
           "judged by the same rule; a diagnosis changes one thing to show what moves a "
           "verdict.")


def _files_md(r: ExperimentResult) -> str:
    return " · ".join(f"[{f}]({r.key}/{f})" for f in r.files)


def _contents_md(name: str, group: list[ExperimentResult]) -> str:
    links = "; ".join(f"[{reading_label(r)}](#{r.anchor}): {r.verdict}"
                      for r in readings_of(group))
    return f"  - [{name}](#{name}): {links}"


def markdown_report(results: list[ExperimentResult], quick: bool, seconds: float,
                    header: dict[str, str] | None = None) -> str:
    """The report as Markdown (images and files linked relative to the report directory).

    A header (what made the report: :func:`environment`), the contents (papers, then their
    experiments and each reading's verdict, linked), the summary table and a section per
    experiment: the claim, whether its readings agree, one sentence per diagnosis, then a
    subsection per reading (verdict, figures, table); explicit ``<a id>`` anchors, so that
    the links do not depend on a renderer's heading ids.
    """
    header = header or environment()
    lines = ["# fedcomp reproduction report", "", "| made with | |", "|---|---|"]
    lines += [f"| {key} | {f'`{value}`' if key == 'command' else value} |"
              for key, value in header.items()]
    papers = _by_paper(results)
    groups = _by_experiment(results)
    lines += ["", f"{len(groups)} experiments ({len(results)} runs of an experiment: readings "
              f"and diagnoses) at {_scale(quick)}; {_time_spent(results, seconds)}", "",
              READING, "", '<a id="contents"></a>', "", "## Contents", "",
              "- [Summary](#summary)"]
    for paper, experiments in papers.items():
        lines.append(f"- [{paper_name(paper)}](#paper-{paper})")
        lines += [_contents_md(name, group) for name, group in experiments.items()]
    lines += ["", '<a id="summary"></a>', "", "## Summary", "",
              "| experiment | paper | as written | other readings | diagnoses | time (s) |",
              "|---|---|---|---|---|---:|"]
    for name, group in groups.items():
        paper = paper_of(group[0].config)
        lines.append(f"| [{name}](#{name}) | {paper_name(paper)} | {group[0].verdict} | "
                     f"{verdicts_cell(group)} | {diagnoses_cell(group)} | "
                     f"{seconds_cell(group)} |")
    lines += ["", BACK_MD]
    for paper, experiments in papers.items():
        lines += ["", f'<a id="paper-{paper}"></a>', "", f"## {paper_name(paper)}", "",
                  f"*{PAPERS.get(paper, 'Experiments of no paper above.')}*"]
        for name, group in experiments.items():
            lead, verdicts = readings_lead(group)
            lines += ["", f'<a id="{name}"></a>', "", f"### {name}", "",
                      f"**Claim.** {_claim(group[0].config)}", "",
                      f"**Readings.** {f'**{lead}** ' if lead else ''}{verdicts}"]
            diagnosed = diagnosis_sentences(group)
            if diagnosed:
                lines += ["", "**Diagnoses.**", "", *[f"- {s}" for s in diagnosed]]
            for r in group:
                lines += ["", f'<a id="{r.anchor}"></a>', "", f"#### {reading_title(r)}", ""]
                if r.files:
                    lines += [f"Files: {_files_md(r)}", ""]
                if r.error:
                    lines += [f"**Error.** `{r.error}` (traceback in `{r.key}/error.txt`)", "",
                              BACK_MD]
                    continue
                lines += [f"**Verdict: {r.verdict}.** Rule: {r.rule}", ""]
                lines += [f"![{r.key} {fig}]({r.key}/{fig})" for fig in r.figures]
                header_row, body = mean_std_table(r)
                lines += ["", "| " + " | ".join(header_row) + " |",
                          "|" + "---|" * len(header_row)]
                lines += ["| " + " | ".join(row) + " |" for row in body]
                lines += ["", BACK_MD]
    return "\n".join(lines) + "\n"


#: The back-link after each section.
BACK_MD = "[↑ contents](#contents)"


_BACK_HTML = "<p class='back'><a href='#contents'>↑ contents</a></p>"


_CSS = """
body { font-family: system-ui, sans-serif; max-width: 1200px; margin: 2em auto;
       padding: 0 1em; color: #222; line-height: 1.45; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: 0.2em; margin-top: 2em; }
h3 { margin-top: 1.6em; }
h4 { margin: 1.4em 0 0.4em; color: #333; }
table { border-collapse: collapse; margin: 0.8em 0; font-size: 0.85em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.5em; text-align: right; }
th:first-child, td:first-child { text-align: left; }
table.meta th, table.meta td { text-align: left; border: none; padding: 0.1em 0.8em 0.1em 0; }
table.meta th { color: #555; font-weight: normal; }
table.summary td, table.summary th { text-align: left; }
table.summary td:last-child, table.summary th:last-child { text-align: right; }
nav ol { padding-left: 1.4em; } nav li { margin: 0.15em 0; }
nav .verdict { font-weight: normal; font-size: 0.9em; }
.figures { display: flex; flex-wrap: wrap; gap: 0.6em; align-items: flex-start; }
.figures img { max-width: 100%; height: auto; display: block; }
.claim { background: #f5f5f5; padding: 0.5em 0.8em; border-left: 4px solid #888; }
.readings { padding: 0.5em 0.8em; border-left: 4px solid #4a6fa5; background: #f3f6fa; }
.readings ul { margin: 0.3em 0 0; }
.disagree { color: #cf222e; font-weight: bold; }
.paper { color: #555; font-style: italic; margin-top: -0.5em; }
.files { font-size: 0.9em; }
.verdict { font-weight: bold; }
.reproduced { color: #1a7f37; } .partly { color: #9a6700; }
.not-reproduced, .error { color: #cf222e; } .other { color: #555; }
.rule { color: #555; font-size: 0.9em; }
.back { font-size: 0.85em; text-align: right; margin: 0.4em 0 0; }
.back a, nav a, .files a { text-decoration: none; }
"""


def _html_table(header: list[str], body: list[list[str]], css: str = "") -> str:
    """A table of text cells (escaped here)."""
    return _raw_table([html.escape(h) for h in header],
                      [[html.escape(c) for c in row] for row in body], css)


def _raw_table(header: list[str], body: list[list[str]], css: str = "") -> str:
    """A table of HTML cells (escaped by the caller)."""
    head = "".join(f"<th>{h}</th>" for h in header)
    rows = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in body)
    attribute = f" class='{css}'" if css else ""
    return f"<table{attribute}><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"


def _figure_html(key: str, png: str) -> str:
    """A figure as its SVG, the PNG beside it where the browser shows no SVG."""
    esc = html.escape
    svg = png.removesuffix(".png") + ".svg"
    return (f"<picture><source srcset='{esc(key)}/{esc(svg)}' type='image/svg+xml'>"
            f"<img src='{esc(key)}/{esc(png)}' alt='{esc(key)} {esc(png)}'></picture>")


def _readings_html(group: list[ExperimentResult]) -> str:
    """The box under an experiment's claim: do its readings agree, and its diagnoses."""
    esc = html.escape
    lead, verdicts = readings_lead(group)
    css = "disagree" if lead == "The readings disagree." else ""
    lead_html = f"<span class='{css}'>{esc(lead)}</span> " if lead else ""
    diagnosed = diagnosis_sentences(group)
    items = "".join(f"<li>{esc(s)}</li>" for s in diagnosed)
    return (f"<div class='readings'><b>Readings.</b> {lead_html}{esc(verdicts)}"
            + (f"<br><b>Diagnoses.</b><ul>{items}</ul>" if items else "") + "</div>")


def _reading_html(r: ExperimentResult) -> str:
    """One reading's subsection: files, verdict and rule, figures, table."""
    esc = html.escape
    parts = [f"<section id='{esc(r.anchor)}'><h4>{esc(reading_title(r))}</h4>"]
    if r.files:
        links = " · ".join(f"<a href='{esc(r.key)}/{esc(f)}'>{esc(f)}</a>" for f in r.files)
        parts.append(f"<p class='files'>Files: {links}</p>")
    if r.error:
        parts.append(f"<p class='error'><b>Error.</b> {esc(r.error)} (traceback in "
                     f"{esc(r.key)}/error.txt)</p>")
    else:
        parts.append(f"<p><span class='verdict {verdict_class(r.verdict)}'>Verdict: "
                     f"{esc(r.verdict)}</span><br><span class='rule'>Rule: {esc(r.rule)}</span>"
                     "</p>")
        figures = "".join(_figure_html(r.key, fig) for fig in r.figures)
        parts.append(f"<div class='figures'>{figures}</div>")
        parts.append(_html_table(*mean_std_table(r)))
    parts.append(f"{_BACK_HTML}</section>")
    return "".join(parts)


def html_report(results: list[ExperimentResult], quick: bool, seconds: float,
                header: dict[str, str] | None = None) -> str:
    """The report as one HTML page (no scripts, no external resources): a header, the
    contents, the summary and a section per experiment, as :func:`markdown_report`."""
    esc = html.escape
    header = header or environment()
    meta = "".join(f"<tr><th>{esc(key)}</th><td>"
                   f"{f'<code>{esc(value)}</code>' if key == 'command' else esc(value)}"
                   f"</td></tr>" for key, value in header.items())
    papers = _by_paper(results)
    groups = _by_experiment(results)
    contents = ["<nav id='contents'><h2>Contents</h2><ol>",
                "<li><a href='#summary'>Summary of the verdicts</a></li>"]
    for paper, experiments in papers.items():
        contents.append(f"<li><a href='#paper-{esc(paper)}'>{esc(paper_name(paper))}</a><ol>")
        for name, group in experiments.items():
            links = "; ".join(
                f"<a href='#{esc(r.anchor)}'>{esc(reading_label(r))}</a>: <span class='verdict "
                f"{verdict_class(r.verdict)}'>{esc(r.verdict)}</span>" for r in readings_of(group))
            contents.append(f"<li><a href='#{esc(name)}'>{esc(name)}</a> — {links}</li>")
        contents.append("</ol></li>")
    contents.append("</ol></nav>")
    summary = _raw_table(["experiment", "paper", "as written", "other readings", "diagnoses",
                          "time (s)"], [
        [f"<a href='#{esc(name)}'>{esc(name)}</a>",
         f"<a href='#paper-{esc(paper_of(group[0].config))}'>"
         f"{esc(paper_name(paper_of(group[0].config)))}</a>",
         f"<span class='{verdict_class(group[0].verdict)}'>{esc(group[0].verdict)}</span>",
         esc(verdicts_cell(group)), esc(diagnoses_cell(group)), seconds_cell(group)]
        for name, group in groups.items()], "summary")
    parts = ["<!DOCTYPE html>", "<html lang='en'><head><meta charset='utf-8'>",
             "<meta name='viewport' content='width=device-width, initial-scale=1'>",
             "<title>fedcomp reproduction report</title>", f"<style>{_CSS}</style></head><body>",
             "<h1>fedcomp reproduction report</h1>", f"<table class='meta'>{meta}</table>",
             f"<p>{len(groups)} experiments ({len(results)} runs of an experiment: readings "
             f"and diagnoses) at {esc(_scale(quick))}; {esc(_time_spent(results, seconds))}</p>",
             f"<p>{esc(READING)}</p>", *contents,
             "<h2 id='summary'>Summary of the verdicts</h2>", summary, _BACK_HTML]
    for paper, experiments in papers.items():
        parts.append(f"<section id='paper-{esc(paper)}'><h2>{esc(paper_name(paper))}</h2>")
        parts.append(f"<p class='paper'>{esc(PAPERS.get(paper, 'Experiments of no paper above.'))}"
                     "</p>")
        for name, group in experiments.items():
            parts.append(f"<section id='{esc(name)}'><h3>{esc(name)}</h3>")
            parts.append(f"<p class='claim'><b>Claim.</b> {esc(_claim(group[0].config))}</p>")
            parts.append(_readings_html(group))
            parts += [_reading_html(r) for r in group]
            parts.append("</section>")
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
