"""``benchmarks/quick_ratios.py``: the recorded table it reads, its verdicts, one tiny run.

No timing assertions: the ratios themselves are the script's output and BENCHMARKS.md's.
"""

import importlib.util
import math
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _quick():
    spec = importlib.util.spec_from_file_location("quick_ratios",
                                                  ROOT / "benchmarks" / "quick_ratios.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


quick = _quick()


def test_benchmarks_md_records_every_case_once():
    """One source: the table in docs/BENCHMARKS.md names exactly the script's cases, each
    with a finite ratio and a margin above 1; the torch ratio of issue 43 has its limit."""
    recorded = quick.read_recorded((ROOT / "docs" / "BENCHMARKS.md").read_text())
    assert sorted(recorded) == sorted(c.id for c in quick.CASES)
    for row in recorded.values():
        assert math.isfinite(row.ratio) and row.ratio > 0 and row.margin > 1
    assert recorded["torch-numpy-100x1024"].limit == 2.0


def test_a_ratio_is_flagged_beyond_its_margin_or_limit():
    row, same = quick.Recorded(ratio=1.1, margin=1.5, limit=2.0), quick.Ratios
    assert quick.verdict(same(1.6, 1.6, 1.6), row) == "ok"
    # issue 43's regression, idle: 1.10x -> 1.93x; beside two busy processes 5.9x
    assert quick.verdict(same(1.93, 1.93, 1.93), row) == "WORSE"
    assert quick.verdict(same(1.6, 5.9, 5.9), row) == "OVER LIMIT"
    assert quick.verdict(same(1.6, 5.9, 1.9), row) == "ok"  # the limit is the median's
    assert quick.verdict(same(0.9, 0.5, 0.5), quick.Recorded(0.5, 1.5, math.inf)) == "WORSE"
    assert quick.verdict(same(3.0, 3.0, 3.0), None) == "not recorded"


def test_a_missing_table_is_one_error_naming_the_fix():
    with pytest.raises(ValueError, match="ratios:start"):
        quick.read_recorded("# Benchmarks\n\nno table here\n")


@pytest.mark.slow  # imports torch and builds 100 x 1024 data: 1-7 s with the load
def test_one_tiny_case_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("FEDCOMP_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("FEDCOMP_BLOCKS", "rule")  # no measurement: a quick test
    status = quick.main(["--only", "auto-all-100x1024", "--rounds", "1", "--repeats", "1"])
    out = capsys.readouterr().out
    row = [line for line in out.splitlines() if line.startswith("| `auto-all-100x1024`")]
    assert len(row) == 1 and "auto blocks: numpy" in row[0]
    assert status == (0 if "| ok |" in row[0] else 1)
    assert "load average before" in out and "load average after" in out
