"""Issue 43's low findings of the command line, the configuration and the experiment runner:
each probe as a test that fails on 71822a8. Every odd input ends in one ``error:`` line naming
the value, the file or the address (never a raw traceback, a hang or a message that is not
true), and a failure before the first run leaves no output directory behind.
"""

from __future__ import annotations

import pytest

from fedcomp.config import MAX_DEPTH, ConfigError, apply_override, load, parse_seeds
from tests.test_robust import one_error_line, run_cli, tiny


# --- --seeds 0:10^20 ended in OverflowError (len() of a range past 2**63) --------------------
@pytest.mark.parametrize("text", ["0:100000000000000000000", "5:99999999999999999999999999"])
def test_a_seed_range_past_a_machine_integer_names_the_value_and_the_limit(text):
    with pytest.raises(ConfigError, match=rf"--seeds {text} plans \d+ runs, more than the "
                                          r"100000 .*MAX_PLANNED_RUNS"):
        parse_seeds(text)


def test_a_huge_seed_range_is_one_error_line_in_the_command(tmp_path, capsys):
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--seeds", "0:100000000000000000000",
                          "--dry-run")
    assert status == 2 and "--seeds 0:100000000000000000000 plans" in one_error_line(err)


# --- dotted TOML keys 2000 deep ended in a RecursionError -----------------------------------
def test_dotted_keys_nested_too_deeply_name_the_file_and_the_limit(tmp_path):
    path = tiny(tmp_path, "a" + ".a" * 2000 + " = 1\n",
                name="deep.toml")
    with pytest.raises(ConfigError, match=rf"deep.toml: tables or arrays nested more than "
                                          rf"{MAX_DEPTH} levels deep"):
        load(path)


def test_a_deep_configuration_is_one_error_line_in_the_command(tmp_path, capsys):
    from tests.test_robust import TINY

    path = tiny(tmp_path, "a" + ".a" * 2000 + " = 1\n" + TINY, name="deep.toml")
    status, err = run_cli(capsys, "run", path, "--dry-run")
    assert status == 2 and "deep.toml: tables or arrays nested more than" in one_error_line(err)


def test_the_nesting_limit_leaves_room_for_every_built_in_configuration():
    from fedcomp.config import experiment_names
    from fedcomp.config._load import nesting_depth

    deepest = max(nesting_depth(load(name)) for name in experiment_names())
    assert 2 <= deepest <= MAX_DEPTH // 2
    assert nesting_depth({"a": [[{"b": 1}]]}) == 4


# --- --set on odd input ----------------------------------------------------------------------
@pytest.mark.parametrize("assignment, message", [
    ("=", "--set: empty key in '='"),
    ("=1", "--set: empty key in '=1'"),
    (".=1", "--set: empty key"),
    ("rounds", "--set expects key=value"),
    ("a." * 3000 + "b=1", "3001 dotted parts, more than the 32 levels"),
    ("x=" + "[" * 3000 + "]" * 3000, "--set 'x': value '" + "[" * 40 + "...' is nested too "
                                      "deeply"),
    ("data.x=" + "[" * 40 + "]" * 40, "--set 'data.x': tables or arrays nested more than 32"),
    ("algorithms.fedmid.x=" + "[" * 40 + "]" * 40, "--set 'algorithms.fedmid.x': tables or "
                                                   "arrays nested"),
])
def test_odd_assignments_are_one_error_naming_them(assignment, message):
    config = {"rounds": 3, "data": {"seed": 0}, "algorithms": [{"name": "fedmid"}]}
    with pytest.raises(ConfigError) as info:
        apply_override(config, assignment)
    assert message in str(info.value) and len(str(info.value)) < 400


@pytest.mark.parametrize("assignment", ["rounds=99999999999999999999999999",
                                        "algorithms.fedmid.client_lr=1e400", "rounds=nan"])
def test_huge_numbers_reach_validation_and_are_named_there(tmp_path, capsys, assignment):
    """A number past float or int64 is set as written and judged by the configuration's
    validation (rounds of 10^26 is a valid, endless run; inf and nan are refused)."""
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--set", assignment, "--dry-run")
    assert "Traceback" not in err
    if status:
        assert status == 2 and one_error_line(err)


def test_deep_set_is_one_error_line_in_the_command(tmp_path, capsys):
    status, err = run_cli(capsys, "run", tiny(tmp_path), "--set", "a." * 3000 + "b=1",
                          "--dry-run")
    assert status == 2 and "dotted parts" in one_error_line(err)


# --- load_results on a damaged file gave UnicodeDecodeError or ParserError -------------------
@pytest.mark.parametrize("content", [
    b"\xff\xfe\x00\x81 not text\n\x89PNG",          # UnicodeDecodeError
    b"algorithm,seed\nfedmid,0\nfedmid,0,1,2,3,4\n",  # ParserError: a ragged row
    b'algorithm,seed\n"fedmid,0\n',                 # ParserError: EOF inside a quote
    b"",                                            # EmptyDataError
])
def test_load_results_of_a_damaged_file_names_it(tmp_path, content):
    pytest.importorskip("pandas")
    import fedcomp

    (tmp_path / "results.csv").write_bytes(content)
    with pytest.raises(ValueError, match=r"results.csv: not a results.csv fedcomp can read"):
        fedcomp.load_results(tmp_path)
