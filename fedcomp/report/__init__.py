"""The reproduction report: every experiment config run and assembled into one page.

``fedcomp report [--quick] --out DIR`` runs each built-in experiment (``fedcomp/configs/*.toml``,
the reduced sizes of
its ``[quick]`` table with ``--quick``) into ``DIR/<name>/`` and writes ``DIR/index.html``
and ``DIR/report.md`` (the report as one page), and the documentation site's pages
``DIR/index.md`` and ``DIR/paper-KEY.md`` (:func:`write_site`; ``fedcomp report --out
docs/report`` before each release). Per paper, and per experiment of that paper:

* the claim being tested (the config's ``claim``: one sentence naming the paper's figure
  or table);
* our figures — the main metric against communication rounds (server updates when
  asynchronous runs are drawn: one is a single client's update), floats communicated and
  wall time (first against simulated time, with the objective, when the runs have an
  event clock: ``compute_times``), the median over seeds with the min–max seed spread
  shaded, one color per algorithm throughout the report
  (:func:`fedcomp.plotting.color_of`);
* a table of final metrics, mean ± standard deviation over seeds;
* the verdict — reproduced / partly / not reproduced — computed by the experiment
  module's ``verdict`` rule from each final metric's median over seeds (diverged runs left
  out; :func:`fedcomp.experiments.final_metrics`), not from the table's means,
  printed next to it. The report says so above its summary table (:data:`READING`).

Resumable: an experiment whose ``summary.json`` exists for the same configuration is not
rerun (its table, figures and verdict are rebuilt from the files), and an interrupted one
keeps its finished runs (the runner's ``resume``). A failing experiment is recorded in
the report with its error and the others still run.

One module per job: ``_catalogue`` (the papers, their experiments and the readings the
report runs), ``_markers`` (an experiment's folder: its ``config.toml`` and the
``report.json`` marker by which a finished run is reused), ``_assembly`` (running or
reusing every experiment and judging it), ``_tables``, ``_figures``, ``_readings`` (what
readings and diagnoses say), ``_page`` (``report.md`` and ``index.html``), ``_site`` (the
site's pages) and ``_environment`` (the pages' header); ``_result`` is the record they pass along.
"""

from __future__ import annotations

from ._assembly import LINKED_FILES, exit_status, judge, run_report
from ._catalogue import (
    PAPER_NAMES,
    PAPERS,
    experiment_configs,
    jobs_for,
    paper_name,
    paper_of,
    reading_names,
    reading_run_config,
    stale_folders,
)
from ._environment import environment, git_commit
from ._figures import draw_figures, timing_figure
from ._markers import run_or_reuse, write_config
from ._page import READING, html_report, markdown_report, write_report
from ._readings import diagnosis_sentences, readings_lead
from ._result import ExperimentResult, verdict_class
from ._site import SITE_FILES, paper_page, site_pages, write_site
from ._tables import format_mean_std, mean_std_table, table_columns

__all__ = ["ExperimentResult", "LINKED_FILES", "PAPERS", "PAPER_NAMES", "READING", "SITE_FILES",
           "diagnosis_sentences", "draw_figures", "environment", "exit_status",
           "experiment_configs", "format_mean_std", "git_commit", "html_report", "jobs_for",
           "judge", "markdown_report", "mean_std_table", "paper_name", "paper_of", "paper_page",
           "reading_names", "reading_run_config", "readings_lead", "run_or_reuse",
           "run_report", "site_pages", "stale_folders", "table_columns", "timing_figure",
           "verdict_class", "write_config", "write_report", "write_site"]
