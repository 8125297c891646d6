"""The configuration path, stage by stage: load (by name or file), --set, [quick], --sweep,
[[variants]] (dict algebra, ``fedcomp.config``), then ``resolve`` into a frozen, typed
Experiment checked once (``fedcomp.experiments``).

The command-line side (one ``error:`` line, exit 2) is in test_cli.py; the property-based
probe of every key is in test_config_fuzz.py once it exists.
"""

from __future__ import annotations

import dataclasses
import io
import tomllib
from pathlib import Path

import pytest

from fedcomp.cli import main
from fedcomp.config import (
    ConfigError,
    apply_override,
    expand_sweep,
    experiment_names,
    experiment_source,
    load,
    parse_seeds,
    parse_sweep,
    quick_config,
    to_toml,
    variant_settings,
)
from fedcomp.experiments import (
    Experiment,
    Setting,
    _setting,
    as_written,
    plan,
    resolve,
    run_experiment,
    validate,
)
from tests.product.test_sweeps import tiny_config
from tests.product.test_variants import small_config

PACKAGED = Path(__file__).resolve().parents[2] / "fedcomp" / "configs"


def _by_label(entries):
    return {a.get("label", a["name"]): a for a in entries}


# --- loading: one TOML file per experiment, inside the package, by name ---------------------
def test_every_packaged_file_is_an_experiment_by_name():
    names = experiment_names()
    assert names == sorted(p.stem for p in PACKAGED.glob("*.toml")) and len(names) >= 14
    for name in names:
        assert load(name) == tomllib.loads(experiment_source(name))
        assert load(name)["name"] == name  # the file name is the experiment's name


def test_a_path_and_a_name_load_the_same_config():
    assert load(PACKAGED / "seed000.toml") == load("seed000") == load(str(PACKAGED /
                                                                          "seed000.toml"))


@pytest.mark.parametrize("spec, message", [
    ("seed00", "neither a config file nor a built-in experiment (bao2022_emnist"),
    ("nope.toml", "config file 'nope.toml' does not exist; give a TOML file or a built-in"),
    ("dir/nope", "config file 'dir/nope' does not exist"),
])
def test_unknown_names_and_missing_files_name_the_choices(spec, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        load(spec)


def test_a_bad_file_is_named_in_its_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("rounds = = 3\n")
    with pytest.raises(ConfigError, match=r"bad.toml: invalid TOML"):
        load(bad)
    latin = tmp_path / "latin.toml"
    latin.write_bytes('name = "caf\xe9"\n'.encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin.toml: not UTF-8 text .*save the configuration"):
        load(latin)


@pytest.mark.parametrize("name", experiment_names())
def test_show_round_trips_every_experiment(name):
    """``fedcomp show NAME`` prints TOML that resolves to the same configuration."""
    config = load(name)
    if config.get("kind") == "timing":
        assert tomllib.loads(to_toml(config)) == config
        return
    shown = tomllib.loads(to_toml(as_written(validate(config))))
    assert validate(shown) == validate(config)
    quick = quick_config(config)
    assert validate(tomllib.loads(to_toml(as_written(validate(quick))))) == validate(quick)


@pytest.mark.parametrize("name", experiment_names())
def test_every_experiment_is_judged_over_several_seeds(name):
    """Issue 19: a verdict is a statistic — at least 3 seeds in every reading, each seed
    drawing its own data unless a pin is explained in the file (real data's fixed split)."""
    from fedcomp.config import experiment_source, reading_config, readings

    raw = load(name)
    if raw.get("kind") == "timing":
        return  # a measurement, not a training run: no seeds
    for reading in readings(raw):
        assert len(validate(reading_config(raw, reading))["seeds"]) >= 3, (name, reading)
    pinned = "seed" in raw["data"] and raw["data"]["seed"] != "run"
    if pinned:
        source = experiment_source(name)
        line = next(text for text in source.splitlines() if text.strip().startswith("seed ="))
        assert "#" in line or "# " in source.split(line)[0].splitlines()[-1], (
            f"{name} pins data.seed without saying why")


def test_show_command_prints_resolved_or_source(capsys):
    assert main(["show", "seed000", "--set", "rounds=7"]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["rounds"] == 7 and shown["client_state"] == "memory"  # defaults filled in
    assert main(["show", "liang2024_linear", "--source"]) == 0
    assert capsys.readouterr().out == experiment_source("liang2024_linear")
    assert main(["show", "nope"]) == 2
    assert "neither a config file nor a built-in experiment" in capsys.readouterr().err


def test_list_experiments_names_every_one(capsys):
    assert main(["list", "experiments"]) == 0
    out = capsys.readouterr().out
    assert all(f"  {name} " in out for name in experiment_names())


# --- resolve: checked once, frozen, typed ----------------------------------------------------
def test_resolve_gives_frozen_typed_settings_in_run_order():
    experiment = resolve(load("feddr_synthetic"), seeds=[0, 2],
                         sweep=[("algorithm.client_lr", ["0.1", "0.3"])])
    assert isinstance(experiment, Experiment) and experiment.seeds == (0, 2)
    variants = [v["label"] for v in load("feddr_synthetic")["variants"]]
    assert [(s.swept["algorithm.client_lr"], s.variant) for s in experiment.settings] == [
        (lr, v) for lr in (0.1, 0.3) for v in variants]
    setting = experiment.settings[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        setting.rounds = 3  # type: ignore[misc]
    assert all(isinstance(s, Setting) for s in experiment.settings)
    spec = setting.algorithms[0]
    assert spec.params["client_lr"] == 0.1 and spec.execution == "rounds"
    assert len(plan(experiment)) == sum(len(s.algorithms) * len(s.batch_modes)
                                        for s in experiment.settings) * 2


def test_the_engine_is_a_static_fact_of_the_registry():
    experiment = resolve(load("feddr_async"))
    assert {s.execution for s in experiment.settings[0].algorithms} == {"rounds", "async"}
    linear = resolve(load("liang2024_linear")).settings[0]
    assert {s.name: s.execution for s in linear.algorithms}["dfedda_gt"] == "decentralized"


def test_a_run_resolves_its_configuration_once(tmp_path, monkeypatch):
    experiment = resolve(tiny_config())

    def refuse(config):
        raise AssertionError("validated again after resolve")

    monkeypatch.setattr(_setting, "validate", refuse)
    summary = run_experiment(experiment, tmp_path, progress=False, stream=io.StringIO())
    assert len(summary) == 4 and all(r["status"] == "ok" for r in summary)
    with pytest.raises(ValueError, match="an Experiment has its seeds and sweep"):
        run_experiment(experiment, tmp_path / "b", seeds=[3])


def test_a_bad_value_fails_before_anything_is_written(tmp_path):
    cfg = apply_override(tiny_config(), "algorithms.fedmid.client_lr='fast'")
    with pytest.raises(ConfigError, match=r"algorithms.fedmid.client_lr must be a number"):
        run_experiment(cfg, tmp_path / "out", progress=False, stream=io.StringIO())
    assert not (tmp_path / "out").exists()


def test_the_data_follow_the_run_seed_unless_pinned(tmp_path):
    """data.seed = 0 pinned: the seeds share one data set. Unpinned (or "run"),
    every seed draws its own data, problem and reference."""
    import json

    tiny = tiny_config()
    pinned = {**tiny, "seeds": [0, 1], "data": {**tiny["data"], "seed": 0}}
    free = {**pinned, "data": {k: v for k, v in pinned["data"].items() if k != "seed"}}
    named = {**pinned, "data": {**pinned["data"], "seed": "run"}}
    for cfg, out in [(pinned, "pinned"), (free, "free"), (named, "named")]:
        run_experiment(cfg, tmp_path / out, progress=False, stream=io.StringIO())
    settings = {out: json.loads((tmp_path / out / "config.json").read_text())["settings"]
                for out in ("pinned", "free", "named")}
    assert list(settings["pinned"]) == ["base"]
    assert list(settings["free"]) == ["base (data seed 0)", "base (data seed 1)"]
    def prints(out):
        return [m["problem"]["fingerprint"] for m in settings[out].values()]

    assert prints("free")[0] != prints("free")[1] and prints("named") == prints("free")
    assert prints("free")[0] == prints("pinned")[0]  # data seed 0 either way
    with pytest.raises(ConfigError, match=r"data.seed must be an integer"):
        validate({**pinned, "data": {**pinned["data"], "seed": "first"}})


def test_timing_experiments_are_not_training_settings():
    with pytest.raises(ConfigError, match="timing experiment"):
        resolve(load("prox_cost"))


# --- dict algebra: --set, seeds, variants, sweeps (moved here from the CLI, variant and sweep
# tests) ----------------------------------------------------------------------------------


def test_overrides_and_seeds_parsing():
    cfg = {"algorithms": [{"name": "za1"}, {"name": "fedda"}]}
    cfg = apply_override(cfg, "algorithms.*.local_steps=3")
    assert [a["local_steps"] for a in cfg["algorithms"]] == [3, 3]
    assert apply_override({}, "a.b='x y'") == {"a": {"b": "x y"}}
    assert apply_override({}, "name=plainword") == {"name": "plainword"}
    assert parse_seeds("0:3") == [0, 1, 2] and parse_seeds("4") == [4]
    assert parse_seeds("1,5") == [1, 5]
    with pytest.raises(ValueError, match="seeds"):
        parse_seeds("a:b")


def test_set_addresses_an_algorithm_by_label_and_refuses_an_ambiguous_name():
    cfg = load("feddr_synthetic")  # FedAvg is {name = "fedprox", label = "fedavg", mu = 0}
    changed = _by_label(apply_override(cfg, "algorithms.fedprox.mu=0.5")["algorithms"])
    assert changed["fedprox"]["mu"] == 0.5
    assert changed["fedavg"]["mu"] == 0.0  # the baseline stays FedAvg
    assert _by_label(apply_override(cfg, "algorithms.fedavg.mu=0.25")["algorithms"]
                     )["fedprox"]["mu"] == 1.0
    twins = {"algorithms": [{"name": "fedprox", "label": "fedavg", "mu": 0.0},
                            {"name": "fedprox", "label": "fedprox_mu1", "mu": 1.0}]}
    with pytest.raises(ConfigError, match=r"different labels \['fedavg', 'fedprox_mu1'\]"):
        apply_override(twins, "algorithms.fedprox.mu=0.5")
    # a name behind one label still addresses it
    assert apply_override(twins, "algorithms.fedavg.client_lr=0.1")["algorithms"][0][
        "client_lr"] == 0.1


def test_set_addresses_labels_that_contain_dots():
    cfg = load("fedcanon_stepsizes")  # a0.01_b0.02, ...
    labels = [a["label"] for a in cfg["algorithms"]]
    assert all("." in label for label in labels) and len(labels) > 2
    changed = apply_override(cfg, f"algorithms.{labels[1]}.local_steps=9")["algorithms"]
    assert [a.get("local_steps") == 9 for a in changed] == [i == 1 for i in range(len(labels))]
    # the ambiguity error's suggestion works as written
    with pytest.raises(ConfigError, match=rf"e.g. algorithms.{labels[0]}.local_steps,") as err:
        apply_override(cfg, "algorithms.fedcanon.local_steps=9")
    suggested = str(err.value).split("e.g. ")[1].split(",")[0]
    assert apply_override(cfg, f"{suggested}=9")["algorithms"][0]["local_steps"] == 9
    with pytest.raises(ConfigError, match="use algorithms.LABEL.PARAM"):
        apply_override(cfg, "algorithms.client_lr=0.1")


def test_set_reaches_the_algorithm_lists_of_variants():
    cfg = load("feddr_synthetic")  # variant "epochs" has its own feddr_E5 ... feddr_E30
    cfg = apply_override(cfg, "algorithms.feddr_E5.local_epochs=7")
    settings = dict(variant_settings(validate(cfg)))
    assert _by_label(settings["epochs"]["algorithms"])["feddr_E5"]["local_epochs"] == 7
    assert _by_label(settings["epochs"]["algorithms"])["feddr_E10"]["local_epochs"] == 10
    everywhere = apply_override(load("feddr_synthetic"), "algorithms.*.client_lr=0.2")
    for _, setting in variant_settings(validate(everywhere)):
        assert {a["client_lr"] for a in setting["algorithms"]} == {0.2}


def test_softmax_without_classes_names_the_config_key():
    cfg = {"name": "t", "rounds": 2, "reference": False,
           "data": {"generator": "digits", "n_clients": 3, "flatten": True},
           "problem": {"loss": "softmax"}, "regularizer": {"name": "l1", "alpha": 0.001},
           "algorithms": [{"name": "fedavg", "client_lr": 0.1, "local_steps": 2}]}
    with pytest.raises(ConfigError, match=r"set data.n_classes = K"):
        validate(cfg)
    validate({**cfg, "data": {**cfg["data"], "n_classes": 10}})


def test_variants_merge_over_the_base():
    settings = variant_settings(validate(small_config()))
    assert [label for label, _ in settings] == ["homogeneous", "heterogeneous"]
    homo, hetero = settings[0][1], settings[1][1]
    assert (homo["data"]["alpha"], homo["data"]["n_clients"], homo["rounds"]) == (0.0, 4, 6)
    assert (hetero["data"]["beta"], hetero["clients_per_round"], hetero["rounds"]) == (1.0, 2, 3)
    assert variant_settings(validate(load("seed000")))[0][0] is None


@pytest.mark.parametrize("variants, message", [
    ([{"data": {"alpha": 1.0}}], "needs a string 'label'"),
    ([{"label": "a"}, {"label": "a"}], "labels must be unique"),
    ([{"label": "a", "seeds": [1]}], "unknown key(s) ['seeds']"),
    ([{"label": "a", "data": {"generator": "nope"}}], "variants (a): data.generator"),
    ([{"label": "a", "algorithms": [{"name": "za1", "step": 1}]}], "variants (a): algorithms"),
])
def test_bad_variants_fail_clearly(variants, message):
    cfg = small_config()
    cfg["variants"] = variants
    with pytest.raises(ConfigError) as info:
        validate(cfg)
    assert message in str(info.value)


def test_sweep_keys_address_entries_or_top_level():
    cfg = tiny_config()
    [(_, one)] = expand_sweep(cfg, [("algorithms.fedmid.local_steps", ["7"])])
    assert [a["local_steps"] for a in one["algorithms"]] == [7, 2]
    [(values, two)] = expand_sweep(cfg, [("data.n_clients", ["3"])])
    assert values == {"data.n_clients": 3} and two["data"]["n_clients"] == 3


@pytest.mark.parametrize("sweep, message", [
    ("algorithm.momentum=0.1", "no algorithm of the config accepts 'momentum'; accepted"),
    ("bogus=1,2", "unknown key 'bogus'"),
    ("rounds", "expects KEY=V1,V2"),
    ("algorithms.nope.client_lr=1", "no algorithm named 'nope'"),
])
def test_bad_sweeps_fail_clearly(sweep, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        expand_sweep(tiny_config(), [parse_sweep(sweep)])


def test_sweep_reaches_the_algorithm_lists_of_variants():
    """feddr_synthetic's variant "epochs" has its own algorithms: a swept client_lr must
    reach them, or its rows would be tagged with a step size they did not run at."""
    cfg = load("feddr_synthetic")
    points = expand_sweep(cfg, [parse_sweep("algorithm.client_lr=0.1,0.3")])
    for values, point in points:
        for label, setting in variant_settings(validate(point)):
            assert {a["client_lr"] for a in setting["algorithms"]} == {
                values["algorithm.client_lr"]}, label
    (_, point), = expand_sweep(cfg, [parse_sweep("algorithms.feddr_E30.local_epochs=40")])
    epochs = dict(variant_settings(validate(point)))["epochs"]["algorithms"]
    assert [a["local_epochs"] for a in epochs] == [5, 10, 20, 40]
    with pytest.raises(ConfigError, match="different labels"):
        expand_sweep({"algorithms": [{"name": "fedprox", "label": "a"},
                                     {"name": "fedprox", "label": "b"}]},
                     [parse_sweep("algorithms.fedprox.mu=0,1")])


# --- readings: the paper as written, and as its authors' code ran it -----------------------
def with_reading(**reading):
    return {**tiny_config(), "readings": {"as_run": {"follows": "the authors' code",
                                                     "set": ["rounds=3"], **reading}}}


def test_a_reading_is_a_named_set_of_assignments():
    from fedcomp.config import reading_config, readings

    cfg = with_reading()
    assert readings(cfg) == {"as_written": "the paper as written",
                             "as_run": "the authors' code"}
    as_run = reading_config(cfg, "as_run")
    assert as_run["rounds"] == 3 and as_run["reading"] == "as_run" and "readings" not in as_run
    assert reading_config(cfg, "as_written")["rounds"] == cfg["rounds"]
    assert validate(as_run)["reading"] == "as_run"
    assert validate(cfg)["reading"] == "as_written" and "readings" not in validate(cfg)
    with pytest.raises(ConfigError, match=r"reading 'as_ran': .* has \['as_written', 'as_run'\]"):
        reading_config(cfg, "as_ran")


@pytest.mark.parametrize("reading, message", [
    ({"set": ["rounds=0"]}, r"readings.as_run: config: rounds must be a positive integer"),
    ({"set": ["algorithms.nope.client_lr=1"]}, r"readings.as_run: .*no algorithm named 'nope'"),
    ({"follows": ""}, r"readings.as_run must be a table \{follows"),
    ({"sett": []}, r"readings.as_run must be a table"),
])
def test_a_bad_reading_fails_when_the_config_is_checked(reading, message):
    with pytest.raises(ConfigError, match=message):
        validate(with_reading(**reading))


def test_a_diagnosis_starts_from_its_base_and_says_what_it_isolates():
    from fedcomp.config import diagnoses, reading_base, reading_config

    cfg = {**tiny_config(), "eval_every": 1, "readings": {
        "as_run": {"follows": "code", "set": ["rounds=3", "eval_every=3"]},
        "fewer": {"follows": "as run, 2 rounds", "base": "as_run", "diagnosis": "two rounds",
                  "set": ["rounds=2"]},
        "alone": {"follows": "as written, 4 rounds", "diagnosis": "four", "set": ["rounds=4"]}}}
    assert diagnoses(cfg) == {"fewer": "two rounds", "alone": "four"}
    assert reading_base(cfg, "fewer") == "as_run" and reading_base(cfg, "alone") == "as_written"
    fewer = reading_config(cfg, "fewer")
    assert (fewer["rounds"], fewer["eval_every"], fewer["reading"]) == (2, 3, "fewer")
    alone = reading_config(cfg, "alone")
    assert (alone["rounds"], alone["eval_every"]) == (4, 1)
    assert validate(cfg)["reading"] == "as_written"


@pytest.mark.parametrize("readings_table, message", [
    ({"a": {"follows": "x", "base": "b"}}, r"readings.a.base = 'b' is no reading"),
    ({"a": {"follows": "x", "base": "b"}, "b": {"follows": "y", "base": "a"}},
     r"bases go round in a circle"),
    ({"a": {"follows": "x", "diagnosis": ""}}, r"readings.a.diagnosis must be a non-empty"),
    ({"a": {"follows": "x", "base": 3}}, r"readings.a.base must be a non-empty string"),
])
def test_a_bad_base_or_diagnosis_names_the_key(readings_table, message):
    with pytest.raises(ConfigError, match=message):
        validate({**tiny_config(), "readings": readings_table})


def test_as_written_is_not_a_reading_to_declare():
    cfg = {**tiny_config(), "readings": {"as_written": {"follows": "x", "set": []}}}
    with pytest.raises(ConfigError, match="readings.as_written is the configuration itself"):
        validate(cfg)


def test_run_and_show_take_a_reading(tmp_path, capsys):
    import json

    path = tmp_path / "r.toml"
    path.write_text(to_toml(with_reading()))
    assert main(["show", str(path), "--reading", "as_run"]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert shown["rounds"] == 3 and shown["reading"] == "as_run"
    assert main(["run", str(path), "--reading", "as_run", "--out", str(tmp_path / "o"),
                 "--quiet", "--seeds", "0"]) == 0
    meta = json.loads((tmp_path / "o" / "config.json").read_text())
    assert meta["config"]["reading"] == "as_run" and meta["config"]["rounds"] == 3
    assert main(["run", str(path), "--reading", "nope", "--out", str(tmp_path / "p")]) == 2
    assert "reading 'nope'" in capsys.readouterr().err and not (tmp_path / "p").exists()


# --- x0: the problem's own start, or a seeded random one (Bao et al.'s randn start) ---------
def test_a_random_start_is_drawn_per_run_seed_unless_pinned():
    import numpy as np

    from fedcomp.experiments import build_problem
    from fedcomp.experiments._build import start_model

    cfg = {**tiny_config(), "x0": {"distribution": "normal", "scale": 2.0}}
    setting = resolve(cfg).base
    problem = build_problem(setting)
    first, again, other = (start_model(setting, problem, s) for s in (0, 0, 1))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other) and first.shape == problem.param_shape
    assert 1.5 < float(np.std(first)) < 2.5  # N(0, scale²) entries
    pinned = resolve({**cfg, "x0": {"seed": 7}}).base
    np.testing.assert_array_equal(start_model(pinned, problem, 0),
                                  start_model(pinned, problem, 1))
    assert start_model(resolve(tiny_config()).base, problem, 0) is None  # the default


def test_a_run_starts_from_the_configured_random_model(tmp_path):
    import numpy as np

    from fedcomp.runtime import simulate

    cfg = {**tiny_config(), "seeds": [1], "x0": {"distribution": "normal"}}
    cfg["algorithms"] = cfg["algorithms"][:1]
    run_experiment(cfg, tmp_path, progress=False, stream=io.StringIO())
    experiment = resolve(cfg)
    setting, spec = experiment.base, experiment.base.algorithms[0]
    from fedcomp.experiments import build_problem
    from fedcomp.experiments._build import start_model

    problem = build_problem(setting, 1)
    direct = simulate(spec.build(), problem, setting.rounds, seed=1, metrics=[],
                      x0=start_model(setting, problem, 1))
    saved = np.load(next((tmp_path / "models").iterdir()))
    np.testing.assert_array_equal(saved, direct.x)
    zero = simulate(spec.build(), problem, setting.rounds, seed=1, metrics=[])
    assert not np.array_equal(saved, zero.x)


@pytest.mark.parametrize("x0, message", [
    ("zeros", r'x0 must be "default" or a table'),
    ({"distribution": "uniform"}, r"x0.distribution: only 'normal'"),
    ({"scale": -1.0}, r"x0.scale must be a positive finite number"),
    ({"seed": -2}, r'x0.seed must be "run"'),
    ({"mean": 1.0}, r"x0: unknown key\(s\) \['mean'\]"),
])
def test_a_bad_start_names_the_key(x0, message):
    with pytest.raises(ConfigError, match=message):
        validate({**tiny_config(), "x0": x0})


def test_a_generator_parameter_without_a_default_is_named_before_any_work():
    config = tiny_config()
    config["data"] = {"generator": "synthetic_fedprox", "n_clients": 3, "alpha": 1.0}
    with pytest.raises(ConfigError, match=r"synthetic_fedprox' needs beta \(no default\); add "
                                          r"them to the \[data\] table"):
        validate(config)
