"""What an experiment's readings and diagnoses say, in sentences and summary cells: whether
its readings of the paper agree, and whether a diagnosis moves a verdict.
"""

from __future__ import annotations

from ..config import AS_WRITTEN
from ._result import ExperimentResult, verdict_class


def readings_of(group: list[ExperimentResult]) -> list[ExperimentResult]:
    """The readings of the paper in an experiment's results (diagnoses left out)."""
    return [r for r in group if not r.diagnosis]


def diagnoses_of(group: list[ExperimentResult]) -> list[ExperimentResult]:
    """The diagnoses among an experiment's results (:func:`fedcomp.config.diagnoses`)."""
    return [r for r in group if r.diagnosis]


def _level(verdict: str) -> str:
    return verdict_class(verdict).replace("-", " ")


def readings_lead(group: list[ExperimentResult]) -> tuple[str, str]:
    """``(lead, sentence)``: whether an experiment's readings of the paper agree, and each
    one's verdict, e.g. ``("The readings disagree.", "As written: not reproduced; as_run
    (follows ...): reproduced.")``; the lead is empty where only one reading ran."""
    papers = readings_of(group)
    verdicts = "; ".join(f"{reading_label(r)}"
                         f"{'' if r.reading == AS_WRITTEN else f' ({r.follows})'}: {r.verdict}"
                         for r in papers)
    if len(papers) < 2:
        return "", (f"One reading, {verdicts or 'none ran'} (the configuration declares no "
                    "other; its comments say whether official code exists).")
    levels = {verdict_class(r.verdict) for r in papers}
    lead = "The readings agree." if len(levels) == 1 else "The readings disagree."
    return lead, verdicts[:1].upper() + verdicts[1:] + "."


def diagnosis_sentences(group: list[ExperimentResult]) -> list[str]:
    """One sentence per diagnosis: what it changes, from which reading, and whether that
    alone moves the verdict (its level against its base's); a note where a reading's
    verdict is not "reproduced" and no diagnosis ran."""
    by_reading = {r.reading: r for r in group}
    sentences = []
    for d in diagnoses_of(group):
        base = by_reading.get(d.base)
        name = "as written" if d.base == AS_WRITTEN else d.base
        if d.error or base is None or base.error:
            effect = "cannot be compared (a run failed)"
        elif verdict_class(d.verdict) == verdict_class(base.verdict):
            effect = f"the verdict stays {_level(d.verdict)}"
        else:
            effect = f"moves the verdict from {_level(base.verdict)} to {_level(d.verdict)}"
        sentences.append(f"{d.diagnosis[:1].upper()}{d.diagnosis[1:]} ({d.reading}, from "
                         f"{name}): {effect} — {d.verdict}.")
    unresolved = [r for r in readings_of(group) if verdict_class(r.verdict) != "reproduced"]
    if unresolved and not sentences:
        sentences.append("No diagnosis ran: nothing here isolates what moves "
                         f"{'these verdicts' if len(unresolved) > 1 else 'this verdict'}.")
    return sentences


def reading_title(r: ExperimentResult) -> str:
    if r.reading == AS_WRITTEN:
        return "As written — the paper's equations"
    kind = "diagnosis" if r.diagnosis else "reading"
    return f"{r.reading} ({kind}) — {r.follows}"


def reading_label(r: ExperimentResult) -> str:
    return "as written" if r.reading == AS_WRITTEN else r.reading


def verdicts_cell(group: list[ExperimentResult]) -> str:
    """The other readings' verdicts, ``as_run: reproduced`` (``—`` when there is none)."""
    others = [r for r in readings_of(group) if r.reading != AS_WRITTEN]
    return "; ".join(f"{r.reading}: {r.verdict}" for r in others) or "—"


def diagnoses_cell(group: list[ExperimentResult]) -> str:
    by_reading = {r.reading: r for r in group}
    found = diagnoses_of(group)
    moving = sum(1 for d in found if d.base in by_reading and not d.error
                 and verdict_class(d.verdict) != verdict_class(by_reading[d.base].verdict))
    return f"{len(found)} ({moving} move the verdict)" if found else "—"


def seconds_cell(group: list[ExperimentResult]) -> str:
    seconds = sum(r.seconds for r in group)
    reused = all(r.reused for r in group)
    return f"{seconds:.0f}{' (reused)' if reused else ''}"
