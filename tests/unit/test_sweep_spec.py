"""Sweep specs: validation that names the key, configurations, plans, recipes."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.sweeps import recipes
from trainscale.sweeps.plan import make_plan
from trainscale.sweeps.recipes import RECIPES, recipe_spec
from trainscale.sweeps.spec import load_spec_file, parse_spec
from trainscale.workloads import get_workload

BASE = {"workload": "mnist-cnn", "data": "synthetic", "steps": 3, "threads_per_worker": 1}


def spec_of(**raw):
    return parse_spec({"base": dict(BASE), **raw}, default_name="t")


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({"colour": "blue"}, "colour: unknown key"),
        ({"repeats": 0}, "repeats: must be a whole number >= 1"),
        ({"repeats": True}, "repeats: must be a whole number"),
        ({"order": "shuffled"}, "order: must be one of interleaved, random"),
        ({"grid": {"workers": []}}, "grid.workers: is empty"),
        ({"grid": {"workers": 2}}, "grid.workers: must be a list"),
        (
            {"grid": {"wrokers": [1, 2]}},
            "grid.wrokers: unknown run option (see `trainscale run --help`); did you mean workers?",
        ),
        ({"grid": {"workers": [1, "two"]}}, "grid.workers[1]: input should be a valid integer"),
        ({"grid": {"workers": [1, True]}}, "grid.workers[1]: input should be a valid integer"),
        ({"base": {"workload": "mnist-cnn", "evaluate": "yes"}}, "base.evaluate"),
        ({"base": {"workload": "mnist-cnn", "lr": "fast"}}, "base.lr"),
        ({"base": {"steps": 3}}, "base.workload: missing"),
        ({"points": [{"workers": 2}], "grid": {"workers": [1]}}, "is also a grid axis"),
        (
            {"base": {"workload": "mnist-cnn", "profile": "p"}},
            "base.profile: --profile records one",
        ),
        ({"grid": {"profile": ["p", "q"]}}, "grid.profile: --profile records one run"),
        ({"points": [{}, {"profile": "p"}]}, "points[1].profile: --profile records one run"),
        ({"points": {"workers": 2}}, "points: must be an array of tables"),
        ({"skip_invalid": "yes"}, "skip_invalid: must be true or false"),
        ({"name": "  "}, "name: must be a non-empty string, got '  '"),
        ({"seed": -1}, "seed: must be a whole number >= 0, got -1"),
        ({"base": 3}, "base: must be a table of run options, got 3"),
        ({"grid": [1]}, "grid: must be a table of option = [values], got [1]"),
        ({"points": [3]}, "points[0]: must be a table, got 3"),
        ({"points": [{"label": 3}]}, "points[0].label: must be a string, got 3"),
        ({"points": [{"wrokers": 2}]}, "points[0].wrokers: unknown run option"),
        (
            {"grid": {"threads-per-worker": [1, True]}},
            "grid.threads-per-worker[1]: input should be a valid integer, got True",
        ),
        (
            {"base": {"workload": "mnist-cnn", "precision": "fp64"}},
            "base.precision: input should be 'auto', 'fp32', 'bf16' or 'fp16', got 'fp64'",
        ),
    ],
)
def test_invalid_specs_name_the_key(raw, fragment):
    merged = {"base": dict(BASE), **raw}
    with pytest.raises(ConfigError) as error:
        parse_spec(merged, default_name="t", where="sweep file x.toml")
    message = str(error.value)
    assert fragment in message, message
    assert message.startswith("sweep file x.toml: ")
    assert "\n" not in message


def test_an_absurd_grid_is_refused_before_its_values_are_checked():
    grid = {key: list(range(1, 101)) for key in ("seed", "steps", "eval_every", "lr")}
    grid["workers"] = ["not a number"]  # never looked at: the size alone refuses the sweep
    with pytest.raises(ConfigError) as error:
        parse_spec({"base": dict(BASE), "grid": grid}, default_name="t", where="sweep file x")
    assert str(error.value) == (
        "sweep file x: grid: 100 seed x 100 steps x 100 eval_every x 100 lr x 1 workers x "
        "1 repeats = 100,000,000 runs, more than the 10,000 a sweep may plan; shorten an axis "
        "or split the sweep"
    )


def test_the_file_order_of_the_axes_names_the_configurations():
    spec = spec_of(grid={"workers": [1, 2], "batch_size": [8]})
    assert [label for label, _ in spec.configurations()] == [
        "workers=1, batch_size=8",
        "workers=2, batch_size=8",
    ]
    spec = spec_of(grid={"batch_size": [8], "workers": [1, 2]})
    assert [label for label, _ in spec.configurations()][0] == "batch_size=8, workers=1"


def test_cli_spellings_and_numbers_as_floats_are_accepted():
    spec = parse_spec(
        {
            "base": {**BASE, "threads-per-worker": 1, "timeout": 30, "lr": 1},
            "grid": {"batch-size": [8, 16]},
        },
        default_name="t",
    )
    assert spec.base["threads_per_worker"] == 1
    assert spec.base["timeout_s"] == 30.0 and spec.base["lr"] == 1.0
    assert spec.grid == {"batch_size": [8, 16]}


def test_configurations_cross_points_with_the_grid():
    spec = spec_of(
        grid={"batch_size": [8, 16]},
        points=[{"label": "serial", "workers": 1}, {"label": "ddp", "workers": 2}],
    )
    configs = spec.configurations()
    assert [label for label, _ in configs] == [
        "serial, batch_size=8",
        "serial, batch_size=16",
        "ddp, batch_size=8",
        "ddp, batch_size=16",
    ]
    assert configs[3][1] == {"workers": 2, "batch_size": 16}


def test_spec_hash_changes_with_the_spec_only():
    assert spec_of(repeats=2).spec_hash() == spec_of(repeats=2).spec_hash()
    assert spec_of(repeats=2).spec_hash() != spec_of(repeats=3).spec_hash()


def test_plan_interleaves_repeats_and_random_order_is_seeded():
    spec = spec_of(grid={"batch_size": [8, 16]}, repeats=2)
    plan = make_plan(spec)
    assert [(p.label, p.repeat) for p in plan.runs] == [
        ("batch_size=8", 0),
        ("batch_size=16", 0),
        ("batch_size=8", 1),
        ("batch_size=16", 1),
    ]
    assert [p.item for p in plan.runs] == [0, 1, 2, 3]
    # Equal settings, equal hash; the repeats of one configuration share it.
    assert plan.runs[0].config_hash == plan.runs[2].config_hash != plan.runs[1].config_hash

    shuffled = [
        (p.label, p.repeat)
        for p in make_plan(spec_of(grid={"batch_size": [8, 16]}, repeats=3, order="random")).runs
    ]
    again = [
        (p.label, p.repeat)
        for p in make_plan(spec_of(grid={"batch_size": [8, 16]}, repeats=3, order="random")).runs
    ]
    assert shuffled == again and sorted(shuffled) == sorted(set(shuffled))


def test_plan_refuses_an_invalid_configuration_before_any_run():
    spec = spec_of(grid={"workers": [1, 4096]})
    with pytest.raises(TrainscaleError, match="configuration 'workers=4096'"):
        make_plan(spec)


def test_skip_invalid_leaves_out_and_lists_refused_configurations():
    plan = make_plan(spec_of(grid={"workers": [1, 4096]}, skip_invalid=True))
    assert [p.label for p in plan.runs] == ["workers=1"]
    assert [label for label, _ in plan.skipped] == ["workers=4096"]
    with pytest.raises(TrainscaleError, match="no runnable configuration"):
        make_plan(spec_of(grid={"workers": [4096]}, skip_invalid=True))


def test_spec_file_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_spec_file(tmp_path / "missing.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("[base\nworkload = 1\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_spec_file(bad)
    good = tmp_path / "good.toml"
    good.write_text('[base]\nworkload = "mnist-cnn"\n[grid]\nworkers = [1, 2]\n')
    spec = load_spec_file(good)
    assert spec.name == "good" and spec.grid == {"workers": [1, 2]}


@pytest.mark.parametrize("name", sorted(RECIPES))
@pytest.mark.parametrize("cores", [[0], [0, 1], list(range(8))])
def test_recipes_are_valid_specs_within_the_machine(name, cores):
    raw = recipe_spec(name, quick=True, core_ids=cores)
    spec = parse_spec(raw, default_name=name)
    for _, overrides in spec.configurations():
        fields = {**spec.base, **overrides}
        workers = fields.get("workers", 1)
        assert workers <= len(cores)
        threads = fields.get("threads_per_worker")
        if isinstance(threads, int) and not fields.get("allow_oversubscribe"):
            assert workers * threads <= len(cores)


@pytest.mark.parametrize("gpus", [0, 1])
def test_the_platform_study_trains_each_workload_at_one_global_batch_on_each_platform(
    gpus, monkeypatch
):
    monkeypatch.setattr(recipes, "_gpu_count", lambda: gpus)
    spec = parse_spec(recipe_spec("platforms", quick=False, core_ids=[0, 1]), "platforms")
    configs = [
        {**spec.base, **overrides, "label": label} for label, overrides in spec.configurations()
    ]
    assert spec.repeats == 2  # each speedup over CPU serial gets its interval
    assert all("epochs" not in c and "steps" not in c for c in configs)  # default recipes
    devices = {w: [c["device"] for c in configs if c["workload"] == w] for w in ("mnist-cnn",)}
    assert devices["mnist-cnn"] == ["cpu"] * 3 + ["cuda"] * gpus
    for name in recipes.PLATFORM_WORKLOADS:
        batches = {c["global_batch_size"] for c in configs if c["workload"] == name}
        assert batches == {get_workload(name).recipe.batch_size}
    serial = [c for c in configs if c["label"].endswith("cpu serial, 1 core")]
    assert len(serial) == 4 and all(c["workers"] == c["threads_per_worker"] == 1 for c in serial)


@pytest.mark.parametrize("quick", [False, True])
def test_the_platform_study_trains_each_run_to_its_target_and_stops_there(quick):
    spec = parse_spec(recipe_spec("platforms", quick=quick, core_ids=[0, 1]), "platforms")
    options = [
        RunOptions.from_flat({**spec.base, **overrides}) for _, overrides in spec.configurations()
    ]
    assert len(options) == 12 and all(o.measurement.stop_at_target for o in options)
    assert all(o.data.kind == "real" and o.measurement.evaluate for o in options)
    assert spec.repeats == (1 if quick else 2)  # the study's two rounds, kept


def test_the_framework_study_holds_every_setting_but_the_framework_and_parallelism():
    spec = parse_spec(recipe_spec("frameworks", quick=True, core_ids=[0, 1]), "frameworks")
    options = [
        RunOptions.from_flat({**spec.base, **overrides}) for _, overrides in spec.configurations()
    ]
    assert {o.parallel.framework for o in options} == {"pytorch", "tensorflow", "jax"}
    # One precision: auto would be bf16 for two frameworks on a bf16 CPU, fp32 for JAX.
    assert {o.optimisation.precision for o in options} == {"fp32"}
    assert {o.optimisation.global_batch_size for o in options} == {64}


def test_unknown_recipe_lists_the_valid_ones():
    with pytest.raises(ConfigError, match="valid recipes: platforms"):
        recipe_spec("nope", quick=True, core_ids=[0])


def test_the_benchmark_sweep_files_are_valid_specs_of_valid_runs():
    # The sweep files docs/benchmarks.md gives as commands: a typo in one would only show
    # when someone starts hours of measurement.
    files = sorted((Path(__file__).parents[2] / "benchmarks").glob("*.toml"))
    assert files, "no sweep file under benchmarks/"
    for path in files:
        spec = load_spec_file(path)
        configurations = spec.configurations()
        assert configurations, path.name
        for label, overrides in configurations:
            options = RunOptions.from_flat({**spec.base, **overrides})
            assert options.workload, (path.name, label)
