"""The headline speed ratios in one process, each beside the one docs/BENCHMARKS.md records.

    python benchmarks/quick_ratios.py [--busy 2] [--repeats 3] [--rounds 10] [--only ID,...]

Run it before every commit that touches ``fedcomp/runtime/`` (under a minute). Each ratio is
an engine's time per round over its baseline's, both timed in this process on the same
problem (``fedcomp bench``'s ZA1 round: :mod:`run`'s ``config``), over ``--repeats``
interleaved runs of ``--rounds`` rounds after a warm-up run of each; lower is faster. Three
ratios per case: of the fastest rounds' CPU time (every thread of the process), of the
fastest rounds' wall time, and of the median rounds' wall time. The recorded ratios (CPU
time: on a shared machine a round waits longer, it does not work more), their noise margins
and the limits (on the median wall time: what a user waits) are the machine-readable table
between the ``ratios`` markers of docs/BENCHMARKS.md, the one source: a case is flagged
``WORSE`` when its CPU ratio exceeds the recorded one times the margin, ``OVER LIMIT`` when
its median wall ratio exceeds the limit, and the script then exits with status 1.
``--busy N`` runs everything beside N processes spinning on the CPU (started here, always
stopped). Torch runs as fedcomp sets it up: ``fedcomp`` imported first (OpenMP's PASSIVE
wait policy), torch's default threads.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

import fedcomp  # noqa: F401  (first: sets OMP_WAIT_POLICY before torch is imported)

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import _algorithm, build, config, has, torch_threads  # noqa: E402
from torch_threads import busy  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "BENCHMARKS.md"
MARK_START, MARK_END = "<!-- ratios:start -->", "<!-- ratios:end -->"


class Case(NamedTuple):
    """One ratio: ``engine`` over ``baseline`` at ``clients`` x ``features``."""

    id: str
    engine: str
    baseline: str
    clients: int
    features: int


#: ``engine`` and ``baseline`` are among ``numpy`` (auto blocks), ``numpy-all`` (one block of
#: every client), ``torch`` (CPU float64, auto blocks) and ``jax`` (the compiled engine).
CASES = (
    Case("torch-numpy-100x1024", "torch", "numpy", 100, 1024),
    Case("torch-numpy-1000x100", "torch", "numpy", 1000, 100),
    Case("jax-numpy-100x1024", "jax", "numpy", 100, 1024),
    Case("jax-numpy-30x60", "jax", "numpy", 30, 60),
    Case("auto-all-100x1024", "numpy", "numpy-all", 100, 1024),
    Case("auto-all-1000x100", "numpy", "numpy-all", 1000, 100),
)

BACKEND = {"numpy": "numpy", "numpy-all": "numpy", "torch": "torch-float64", "jax": "jax"}
NEEDS = {"torch": "torch", "jax": "jax"}


class Recorded(NamedTuple):
    """A row of the recorded table: the ratio, the factor beyond which it is flagged as
    worse, and an absolute limit (``inf`` where none)."""

    ratio: float
    margin: float
    limit: float


def _number(cell: str) -> float:
    text = cell.strip().strip("*").rstrip("x×").strip()
    return float("inf") if text in ("", "-", "—") else float(text)


def read_recorded(text: str) -> dict[str, Recorded]:
    """The rows between the ``ratios`` markers: ``| id | what | recorded | margin | limit |
    ...`` (extra columns ignored).

    Examples
    --------
    >>> read_recorded("<!-- ratios:start -->\\n| id | what | recorded | margin | limit |\\n"
    ...               "|---|---|---|---|---|\\n| `a` | x | 1.2x | 1.5 | 2x |\\n<!-- ratios:end -->")
    {'a': Recorded(ratio=1.2, margin=1.5, limit=2.0)}
    """
    if MARK_START not in text or MARK_END not in text:
        raise ValueError(f"no {MARK_START} ... {MARK_END} table in {DOC}; add the recorded "
                         "ratios there (docs/BENCHMARKS.md, 'Quick ratio check')")
    table = text.split(MARK_START, 1)[1].split(MARK_END, 1)[0]
    out = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 5 or cells[0] in ("id", "") or set(cells[0]) <= set("-: "):
            continue
        out[cells[0].strip("`")] = Recorded(*(_number(c) for c in cells[2:5]))
    return out


class Ratios(NamedTuple):
    """One case measured: the ratio of the fastest rounds' CPU time (the process's, every
    thread's), of the fastest rounds' wall time, and of the median rounds' wall time."""

    cpu: float
    wall: float
    wall_median: float


def verdict(measured: Ratios, recorded: Recorded | None) -> str:
    """``ok``, ``WORSE`` (CPU-time ratio above the recorded one times its margin), ``OVER
    LIMIT`` (median wall-time ratio above the limit) or ``not recorded``.

    Examples
    --------
    >>> r = Recorded(1.2, 1.5, 2.0)
    >>> verdict(Ratios(1.7, 1.9, 1.9), r), verdict(Ratios(1.9, 1.9, 1.9), r)
    ('ok', 'WORSE')
    >>> verdict(Ratios(1.2, 1.5, 2.1), r)
    'OVER LIMIT'
    """
    if recorded is None:
        return "not recorded"
    if measured.wall_median > recorded.limit:
        return "OVER LIMIT"
    return "WORSE" if measured.cpu > recorded.ratio * recorded.margin else "ok"


class _Clocks:
    """A logger that notes the wall clock and the process's CPU time at each row."""

    def __init__(self) -> None:
        self.times: list[tuple[float, float]] = []

    def log(self, row: dict[str, Any]) -> None:
        self.times.append((time.perf_counter(), time.process_time()))


def timer(engine: str, problem: Any, rounds: int) -> Callable[[], np.ndarray]:
    """One sample of ``engine``: ``(wall, cpu)`` seconds of each round of a run of ``rounds``
    rounds (a row every round, timed between rows); for the jax engine, which runs the
    rounds between two rows as one call, per round of each of three blocks of ``rounds``
    after the block that compiles."""
    block = "all" if engine == "numpy-all" else "auto"
    every, blocks = (rounds, 4) if engine == "jax" else (1, 1)

    def sample() -> np.ndarray:
        clocks = _Clocks()
        fedcomp.simulate(_algorithm(), problem, rounds * blocks, metrics=[], eval_every=every,
                         options=fedcomp.RunOptions(logger=clocks, progress=False,
                                                    client_block=block))
        seconds = np.diff(np.asarray(clocks.times), axis=0) / every
        return seconds[1:] if engine == "jax" else seconds

    return sample


def measure(case: Case, rounds: int, repeats: int,
            problems: dict[tuple[str, int, int], Any]) -> tuple[Ratios, str]:
    """``(ratios, note)`` of one case over interleaved runs.

    The flagged ratio is CPU time's: a busy machine makes a round wait, not work more, so
    the fastest round's CPU time stays put where its wall time does not (torch / NumPy at
    100 x 1024, load 6.6: CPU 1.77x, 1.77x, 1.76x in three trials, wall 2.1x, 2.4x, 1.9x).
    """
    from fedcomp.runtime import auto_block_size

    seconds: dict[str, list[np.ndarray]] = {}
    timers = {}
    for engine in (case.engine, case.baseline):
        key = (BACKEND[engine], case.clients, case.features)
        if key not in problems:
            problems[key] = build(config(case.clients, case.features, rounds, backend=key[0]))
        timers[engine] = timer(engine, problems[key], rounds)
        timers[engine]()  # warm-up: imports, the block's sizing, dispatch caches
        seconds[engine] = []
    for _ in range(repeats):
        for engine, sample in timers.items():
            seconds[engine].append(sample())
    wall, cpu = {}, {}
    for engine, parts in seconds.items():
        wall[engine], cpu[engine] = np.concatenate(parts).T
    a, b = case.engine, case.baseline
    ratios = Ratios(cpu[a].min() / cpu[b].min(), wall[a].min() / wall[b].min(),
                    float(np.median(wall[a]) / np.median(wall[b])))
    blocks = [f"{e} {auto_block_size(problems[(BACKEND[e], case.clients, case.features)])}"
              for e in timers if e in ("numpy", "torch")]
    note = (f"fastest rounds' CPU {cpu[a].min() * 1e3:.3g} / {cpu[b].min() * 1e3:.3g} ms, "
            f"wall {wall[a].min() * 1e3:.3g} / {wall[b].min() * 1e3:.3g} ms"
            + (f"; auto blocks: {', '.join(blocks)}" if blocks else ""))
    return ratios, note


def available(case: Case) -> bool:
    return all(has(NEEDS[e]) for e in (case.engine, case.baseline) if e in NEEDS)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds per timed run")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved runs per engine")
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside it")
    parser.add_argument("--only", default="", help="comma-separated case ids")
    args = parser.parse_args(argv)
    recorded = read_recorded(DOC.read_text())
    chosen = [c for c in CASES if not args.only or c.id in args.only.split(",")]
    threads = torch_threads() if has("torch") else 0
    print(f"# {os.cpu_count()} CPUs, torch threads {threads}, "
          f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY')}, busy processes {args.busy}")
    print(f"# load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print("| id | CPU ratio | recorded | margin | wall ratio | median wall ratio | limit | "
          "verdict | note |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---|")
    flagged, problems = [], {}
    with busy(args.busy):
        for case in chosen:
            if not available(case):
                print(f"| `{case.id}` | | | | | | | skipped | needs {case.engine} |")
                continue
            ratios, note = measure(case, args.rounds, args.repeats, problems)
            rec = recorded.get(case.id)
            said = verdict(ratios, rec)
            if said not in ("ok", "not recorded"):
                flagged.append(case.id)
            print(f"| `{case.id}` | {ratios.cpu:.3g}x | "
                  + (f"{rec.ratio:.3g}x | {rec.margin:g}" if rec else " | ")
                  + f" | {ratios.wall:.3g}x | {ratios.wall_median:.3g}x | "
                  + (f"{rec.limit:g}" if rec else "")
                  + f" | {said} | {note} |", flush=True)
    load = os.getloadavg()
    print(f"# load average after: {' '.join(f'{v:.2f}' for v in load)}")
    if flagged:
        print(f"# flagged: {', '.join(flagged)}"
              + (" (the load exceeds the cores: rerun on a quieter machine before believing "
                 "a flag)" if load[0] > (os.cpu_count() or 1) else ""))
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
