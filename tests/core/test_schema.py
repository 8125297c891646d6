"""The configuration's schema: every top-level key is one field of fedcomp.config.Schema.

A field declares the key's default, whether a ``[[variants]]`` entry may set it and its
check; the key lists, the written order and the defaults are views of the fields. The
tests below add a key the way a contributor would, one field plus its check, and follow it
through loading, checking, variants, sweeps, ``fedcomp show`` and ``config.json``.
"""

from __future__ import annotations

import copy
import io
import json
import tomllib
from dataclasses import dataclass
from typing import Any

import pytest

from fedcomp.config import (
    ConfigError,
    Schema,
    _schema,
    apply_override,
    defaults,
    expand_sweep,
    key,
    key_order,
    load,
    to_toml,
    variant_settings,
)
from fedcomp.experiments import as_written, resolve, run_experiment, validate
from fedcomp.metrics import DEFAULT_METRICS
from tests.product.test_variants import small_config


def _warmup(value: Any, setting: dict[str, Any]) -> Any:
    """The toy key's check: a non-negative integer, at most the setting's rounds."""
    if not (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        raise ConfigError(f"warmup must be a non-negative integer, the rounds before the "
                          f"first evaluation (got {value!r})")
    if value > setting["rounds"]:
        raise ConfigError(f"warmup = {value} is more than rounds = {setting['rounds']}; "
                          "lower warmup")
    return value


@dataclass(frozen=True, kw_only=True)
class WithWarmup(Schema):
    """The schema with one more key: what adding ``warmup`` to Schema would declare."""

    warmup: int = key(0, check=_warmup, variant=True)
    note: str = key("")  # a key of the whole experiment: no variant may set it


@pytest.fixture
def warmup(monkeypatch):
    """The package running with the extended schema (as after the one-field edit)."""
    monkeypatch.setattr(_schema, "SCHEMA", WithWarmup)


def config(**keys: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(load("seed000"))
    cfg.update(keys)
    return cfg


def test_without_the_field_the_key_is_unknown():
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['warmup'\]"):
        validate(config(warmup=3))


def test_an_added_key_is_accepted_defaulted_and_written_in_order(warmup):
    assert validate(config(warmup=3))["warmup"] == 3
    checked = validate(config())
    assert checked["warmup"] == 0 and checked["note"] == ""  # the field's default
    assert list(checked)[-2:] == ["warmup", "note"]  # where the field is declared
    assert key_order()[-2:] == ("warmup", "note")
    text = to_toml(as_written(validate(config(warmup=3, note="x"))))  # fedcomp show
    assert tomllib.loads(text)["warmup"] == 3 and tomllib.loads(text)["note"] == "x"


@pytest.mark.parametrize(("value", "message"), [
    (-1, r"warmup must be a non-negative integer, the rounds before the first evaluation "
         r"\(got -1\)"),
    ("3", r"warmup must be a non-negative integer.* \(got '3'\)"),
    (10_000, r"warmup = 10000 is more than rounds = 500; lower warmup"),
])
def test_an_added_key_is_refused_by_its_own_check(warmup, value, message):
    with pytest.raises(ConfigError, match=message):
        validate(config(warmup=value))


def test_a_variant_sets_an_added_key_when_declared_so(warmup):
    cfg = config(variants=[{"label": "short", "rounds": 5, "warmup": 2},
                           {"label": "plain", "rounds": 5}], warmup=4)
    settings = dict(variant_settings(validate(cfg)))
    assert settings["short"]["warmup"] == 2 and settings["plain"]["warmup"] == 4
    # checked in the variant's own setting: 6 warm-up rounds fit the base's 500, not its 5
    cfg["variants"] = [{"label": "short", "rounds": 5, "warmup": 6}]
    with pytest.raises(ConfigError, match=r"variants \(short\): warmup = 6 is more than "
                                          r"rounds = 5"):
        validate(cfg)
    cfg["variants"] = [{"label": "short", "note": "x"}]
    with pytest.raises(ConfigError, match=r"variants \(short\): unknown key\(s\) \['note'\]"):
        validate(cfg)


def test_set_and_sweep_reach_an_added_key(warmup):
    assert validate(apply_override(config(), "warmup=4"))["warmup"] == 4
    points = expand_sweep(config(), [("warmup", ["1", "2"])])
    assert [validate(point)["warmup"] for _, point in points] == [1, 2]


def test_config_json_records_an_added_key(warmup, tmp_path):
    cfg = small_config()
    cfg.pop("variants")
    cfg.update(rounds=2, eval_every=1, warmup=1, reference=False,
               algorithms=cfg["algorithms"][:1])
    run_experiment(resolve(cfg), tmp_path, progress=False, stream=io.StringIO(), jobs=1)
    recorded = json.loads((tmp_path / "config.json").read_text())["config"]
    assert recorded["warmup"] == 1 and list(recorded)[-2:] == ["warmup", "note"]


def test_a_required_key_is_a_field_without_default(monkeypatch):
    @dataclass(frozen=True, kw_only=True)
    class WithOwner(Schema):
        owner: str = key()

    monkeypatch.setattr(_schema, "SCHEMA", WithOwner)
    with pytest.raises(ConfigError, match="config: missing required key 'owner'"):
        validate(config())
    assert validate(config(owner="me"))["owner"] == "me"


def test_the_default_metrics_are_the_metrics_modules():
    """``DEFAULT_METRICS`` is declared once: a configuration without ``metrics`` records
    what ``fedcomp.simulate`` evaluates by default."""
    cfg = config()
    cfg.pop("metrics")
    assert validate(cfg)["metrics"] == list(DEFAULT_METRICS) == defaults()["metrics"]


def test_a_key_a_variant_sets_is_checked_in_the_variant():
    """client_state's own check runs in every setting (a variant's bad value was accepted)."""
    cfg = small_config()
    cfg["variants"][0]["client_state"] = "ssd"
    with pytest.raises(ConfigError, match=r"variants \(homogeneous\): client_state: unknown "
                                          r"value 'ssd'; valid: \['memory', 'disk'\]"):
        validate(cfg)


@pytest.mark.parametrize("backend", ["auto", "jax"])
@pytest.mark.parametrize("problem", ["logistic", 0, None, [1]])
def test_a_problem_that_is_not_a_table_is_named(problem, backend):
    """Not a raw AttributeError from the checks that ask whether the model is a network."""
    cfg = config(problem=problem, backend=backend)
    cfg.pop("reference")  # the default reference depends on the model
    with pytest.raises(ConfigError, match=r"problem must be a table such as"):
        validate(cfg)


@pytest.mark.parametrize("table", ["data", "problem"])
def test_a_variant_table_that_is_not_a_table_is_named(table):
    """Not a raw TypeError from the merge of the variant over the base."""
    cfg = small_config()
    cfg["variants"][0][table] = 1
    with pytest.raises(ConfigError, match=rf"variants \(homogeneous\): {table} must be a "
                                          r"table such as .* \(got 1\)"):
        validate(cfg)


def test_a_setting_field_named_as_a_key_carries_it_to_the_runs(warmup, monkeypatch):
    """What the later stages read of a new key: one field of Setting by the key's name,
    filled in every variant with no edit of its construction."""
    from fedcomp.experiments import Setting, _setting

    @dataclass(frozen=True)
    class WarmSetting(Setting):
        warmup: int = 0

    monkeypatch.setattr(_setting, "Setting", WarmSetting)
    cfg = config(warmup=3, variants=[{"label": "short", "rounds": 5, "warmup": 1},
                                     {"label": "plain"}])
    assert {s.variant: s.warmup for s in resolve(cfg).settings} == {"short": 1, "plain": 3}
