"""``fedcomp report``: every built-in experiment run and judged, written as one HTML and
Markdown report (:mod:`fedcomp.report` does the work)."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from .. import __version__
from ._common import default_jobs, log


def cmd_report(args: argparse.Namespace) -> int:
    from ..config import parse_seeds
    from ..report import exit_status, run_report

    only = [name.strip() for name in args.only.split(",") if name.strip()] if args.only else None
    seeds = parse_seeds(args.seeds) if args.seeds else None
    scale = "reduced sizes (--quick)" if args.quick else "full sizes"
    log.info(f"fedcomp {__version__}: report of every experiment config at {scale} -> "
             f"{args.out}/ (finished experiments there are reused)")
    only_readings = ([name.strip() for name in args.readings.split(",") if name.strip()]
                     if args.readings else None)
    if args.jobs is not None and args.jobs < 1:
        log.error("--jobs must be at least 1 (got %s)", args.jobs)
        return 2
    jobs = args.jobs or default_jobs(2)
    command = shlex.join(["fedcomp", "report", *(["--quick"] if args.quick else []),
                          "--out", args.out, *(["--only", args.only] if args.only else []),
                          *(["--seeds", args.seeds] if args.seeds else []),
                          *(["--readings", args.readings] if args.readings else []),
                          *(["--jobs", str(args.jobs)] if args.jobs else [])])
    results = run_report(args.out, quick=args.quick, only=only, seeds=seeds, command=command,
                         only_readings=only_readings, jobs=jobs)
    log.info("report written to %s: index.md and paper-*.md (the site's pages), index.html "
             "and report.md (one page)", args.out)
    failed = [r.name for r in results if r.error]
    if failed:
        log.error(f"{len(failed)} experiment(s) failed: {', '.join(failed)} (see "
                  f"{args.out}/NAME/error.txt)")
    return exit_status(results)


def add_parser(sub: Any) -> None:
    """``fedcomp report``: ``--out``, ``--quick``, ``--only``, ``--seeds``, ``--readings``,
    ``--jobs``."""
    report = sub.add_parser(
        "report", help="run every paper experiment and write an HTML/Markdown report",
        description="Run every built-in experiment (reduced sizes with --quick) and write "
                    "the site's pages DIR/index.md and DIR/paper-*.md, and the one-page "
                    "DIR/index.html and DIR/report.md: per paper the claim, figures, final "
                    "metrics (mean ± std over seeds) and a verdict computed by a stated rule. "
                    "Experiments already finished in DIR with the same config are not rerun.")
    report.add_argument("--out", required=True, metavar="DIR", help="the report directory")
    report.add_argument("--quick", action="store_true", help="each config's [quick] sizes "
                        "(the whole report in under 10 minutes on 2 cores)")
    report.add_argument("--only", metavar="NAME,...", help="only these experiments")
    report.add_argument("--seeds", metavar="START:STOP", help="override every config's seeds")
    report.add_argument("--readings", metavar="NAME,...", help="only these readings of each "
                        "paper (e.g. as_written,as_run: no diagnoses; default: every reading)")
    report.add_argument("--jobs", type=int, metavar="N", help="worker processes per experiment "
                        "(default: min(2, cores); 1 where a verdict compares wall times)")
    report.set_defaults(func=cmd_report)
