"""The API's keywords are checked against their declared types, before anything starts: a
value of the wrong type is one ConfigError line naming the function, the keyword, what it
must be and what was given, and nothing is stored. Run options are checked by their
declarations (config/options.py, through config/tables.py's models, as sweep files are);
the other keywords by the annotations of the functions that take them."""

from __future__ import annotations

import functools
import os
from contextlib import ExitStack
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import trainscale
from trainscale.api import calls, machine, questions, store_calls
from trainscale.api.keywords import check_arguments, run_options
from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError
from trainscale.results.store import RunStore

EXAMPLES = int(os.environ.get("TRAINSCALE_FUZZ_EXAMPLES", "200"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)

POSITIONAL = {
    "run": ("mnist-cnn",),
    "compare": ("a", "b"),
    "sweep": ("cpu-parallel",),
    "recommend": ("mnist-cnn",),
    "simulate": ("mnist-cnn",),
    "emulate": ("mnist-cnn",),
    "predict_time_to_accuracy": ("mnist-cnn",),
    "import_runs": ("other.db",),
}
"""What each function is given by position, unless the case gives it."""

# (function, positional arguments or None for POSITIONAL, keywords, the keyword refused: its
# key path where a value inside it is)
WRONG = [
    # as reported: a raw exception, or a value accepted and stored wrong
    ("run", None, {"seed": "x"}, "seed"),
    ("run", None, {"seed": None}, "seed"),
    ("run", None, {"warmup_steps_untimed": "x"}, "warmup_steps_untimed"),
    ("run", None, {"breakdown_every": "x"}, "breakdown_every"),
    ("run", None, {"tag": ["a"]}, "tag"),
    ("run", None, {"workload_options": "a=b"}, "workload_options"),
    ("run", None, {"store": 123}, "store"),
    ("run", None, {"weight_decay": "x"}, "weight_decay"),
    ("run", None, {"warmup_fraction": "0.1"}, "warmup_fraction"),
    ("run", None, {"target_accuracy": "0.9"}, "target_accuracy"),
    ("run", None, {"affinity": 5}, "affinity"),
    ("run", None, {"data_dir": 123}, "data_dir"),
    ("run", None, {"evaluate": "no"}, "evaluate"),
    ("run", None, {"precision": None}, "precision"),
    ("bench", (), {"rounds": "x"}, "rounds"),
    ("sweep", (123,), {}, "spec_or_recipe"),
    ("sweep", (None,), {}, "spec_or_recipe"),
    ("compare", None, {"resamples": "x"}, "resamples"),
    ("compare", None, {"seed": "x"}, "seed"),
    ("report", (), {"out": None}, "out"),
    ("report", (), {"out": "r", "runs": 5}, "runs"),
    ("report", (), {"out": "r", "tag": 5}, "tag"),
    ("recommend", None, {"budget_s": "60"}, "budget_s"),
    ("recommend", None, {"rung_steps": "3,9"}, "rung_steps"),
    ("recommend", None, {"data_dir": 5}, "data_dir"),
    ("simulate", None, {"workers": "1,2"}, "workers"),
    ("simulate", None, {"calibrate_from": "abc"}, "calibrate_from"),
    ("simulate", None, {"cluster": 5}, "cluster"),
    ("simulate", None, {"plot": 3}, "plot"),
    ("predict_time_to_accuracy", None, {"samples": 2.5}, "samples"),
    ("predict_time_to_accuracy", None, {"cluster": ["a"]}, "cluster"),
    ("emulate", None, {"workers": "1,2", "mode": "sync"}, "workers"),
    ("emulate", None, {"workers": [1], "mode": "fast"}, "mode"),
    ("emulate", None, {"workers": [1], "mode": "sync", "epochs": "1"}, "epochs"),
    ("emulate", None, {"workers": [1], "mode": "sync", "local_steps": "8"}, "local_steps"),
    ("probe", (), {"only": "matmul"}, "only"),
    ("probe", (), {"device": "gpu"}, "device"),
    ("probe", (), {"message_sizes": "64K"}, "message_sizes"),
    # int
    ("run", None, {"workers": "2"}, "workers"),
    ("run", None, {"workers": True}, "workers"),
    ("run", None, {"steps": 2.0}, "steps"),
    ("bench", (), {"steps": "3"}, "steps"),
    ("runs", (), {"limit": "3"}, "limit"),
    ("probes", (), {"limit": "3"}, "limit"),
    ("delete_runs", (), {"limit": "3"}, "limit"),
    ("simulate", None, {"samples": "100"}, "samples"),
    # float
    ("run", None, {"lr": "0.1"}, "lr"),
    ("run", None, {"timeout_s": True}, "timeout_s"),
    ("compare", None, {"confidence": "0.9"}, "confidence"),
    # bool
    ("run", None, {"compile": 1}, "compile"),
    ("run", None, {"download": "false"}, "download"),
    ("run", None, {"progress": "yes"}, "progress"),
    ("bench", (), {"quick": "yes"}, "quick"),
    ("probe", (), {"quick": 1}, "quick"),
    ("probe", (), {"threads": "2"}, "threads"),
    ("sweep", None, {"dry_run": 1}, "dry_run"),
    ("delete_runs", (), {"tag": "t", "dry_run": "yes"}, "dry_run"),
    ("recommend", None, {"quick": 1}, "quick"),
    # str, and a choice of strings
    ("run", None, {"rdzv_id": 5}, "rdzv_id"),
    ("run", None, {"data": "auto"}, "data"),
    ("run", None, {"device": None}, "device"),
    ("bench", (), {"framework": 3}, "framework"),
    ("runs", (), {"status": 5}, "status"),
    ("probes", (), {"kind": 5}, "kind"),
    ("runs", (), {"tag": ["a"]}, "tag"),
    ("delete_runs", (), {"status": 5}, "status"),
    ("report", (), {"out": "r", "baseline": 1}, "baseline"),
    # path
    ("run", None, {"data_dir": b"/data"}, "data_dir"),
    ("bench", (), {"out": 3}, "out"),
    ("bench", (), {"data_dir": 5}, "data_dir"),
    ("sweep", None, {"report": 1}, "report"),
    ("report", (), {"out": "r", "prices": 1.5}, "prices"),
    ("compare", None, {"store": ["s.db"]}, "store"),
    ("env", (), {"store": ["s.db"]}, "store"),
    ("import_runs", (), {"source": 5}, "source"),
    ("import_runs", None, {"store": 5}, "store"),
    # list (an iterable of ids)
    ("report", (), {"out": "r", "runs": 3.5}, "runs"),
    ("delete_runs", (), {"runs": 3.5}, "runs"),
    # mapping
    ("run", None, {"workload_options": 5}, "workload_options"),
    ("run", None, {"workload_options": ["a", "b"]}, "workload_options"),
    ("run", None, {"workload_options": {"a": ["b"]}}, "workload_options.a"),
    ("sweep", None, {"workload_options": "a=b"}, "workload_options"),
    # optional: None only where the declaration takes it
    ("run", None, {"evaluate": None}, "evaluate"),
    ("run", None, {"affinity": None}, "affinity"),
    ("run", None, {"workload_options": None}, "workload_options"),
    ("bench", (), {"quick": None}, "quick"),
    ("compare", None, {"resamples": None}, "resamples"),
]


STARTS = (
    (calls, "start_run"),
    (calls, "run_bench"),
    (calls, "load_sweep"),
    (calls, "compare_runs"),
    (calls, "list_runs"),
    (calls, "build_report"),
    (questions, "search_recommendation"),
    (questions, "simulate_scaling"),
    (questions, "run_emulation"),
    (questions, "time_to_accuracy"),
    (machine, "run_probe"),
    (machine, "list_probes"),
    (machine, "describe_machine"),
    (store_calls, "check_source"),  # import_runs reads its source first
    (store_calls, "RunStore"),
    (store_calls, "open_for_reading"),
)
"""The functions through which the API's calls start work once their keywords are checked."""


def _name(case: tuple) -> str:
    function, args, keywords, _ = case
    shown = [repr(a) for a in args or ()] + [f"{k}={v!r}" for k, v in keywords.items()]
    return f"{function}({', '.join(shown)})"


@pytest.fixture
def nothing_starts(monkeypatch):
    """Every way a call could start work, recorded instead."""
    started: list[str] = []
    for module, name in STARTS:
        monkeypatch.setattr(module, name, _recorder(getattr(module, name), started))
    return started


def _recorder(function, started):
    @functools.wraps(function)  # the same signature and annotations: the keywords' types
    def stand_in(*args, **kwargs):
        started.append(function.__name__)
        raise _Reached(function.__name__)

    return stand_in


class _Reached(Exception):
    """The call got past its checks to the function that does the work."""


@pytest.mark.parametrize("case", WRONG, ids=[_name(c) for c in WRONG])
def test_a_value_of_the_wrong_type_is_one_config_error_line_and_nothing_stored(
    case, tmp_path, nothing_starts
):
    function, args, keywords, keyword = case
    args = POSITIONAL.get(function, ()) if args is None else args
    store = tmp_path / "s.db"
    given = {"store": store, **keywords}
    with pytest.raises(ConfigError) as caught:
        getattr(trainscale, function)(*args, **given)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(f"trainscale.{function}() ")
    assert f" {keyword}: " in message  # then what it must be, and what it was
    assert " should be " in message or " must be " in message
    value = {**given, "spec_or_recipe": args[0] if args else None}
    for key in keyword.split("."):
        value = value[key]
    assert message.endswith(f"got {value!r}")
    assert not nothing_starts
    assert not store.exists()  # no store made, so no row in it
    assert not list(tmp_path.glob("*.db"))  # nor in the default store (the working directory)


@pytest.mark.parametrize(
    ("function", "keywords", "keyword"),
    [
        ("report", {"runs": ["abc"], "out": ""}, "out"),
        ("runs", {"store": " "}, "store"),
        ("simulate", {"plot": ""}, "plot"),
        ("bench", {"out": ""}, "out"),
    ],
)
def test_an_empty_path_is_refused_as_the_command_line_refuses_it(
    function, keywords, keyword, tmp_path, nothing_starts
):
    args = POSITIONAL.get(function, ())
    with pytest.raises(ConfigError) as caught:
        getattr(trainscale, function)(*args, **{"store": tmp_path / "s.db", **keywords})
    assert str(caught.value) == (
        f"trainscale.{function}() option {keyword}: is empty; give a file or directory name"
    )


def test_a_value_accepted_and_stored_wrong_before_is_refused_through_a_real_run(tmp_path):
    # evaluate='no' used to evaluate (a truthy string); precision=None used to be stored.
    store = tmp_path / "s.db"
    for wrong in ({"evaluate": "no"}, {"precision": None}):
        with pytest.raises(ConfigError, match=f"option {next(iter(wrong))}: "):
            trainscale.run("mnist-cnn", data="synthetic", steps=1, store=store, **wrong)
    assert not store.exists() or not RunStore(store).list_runs()


def test_positional_arguments_are_named_as_arguments(nothing_starts):
    with pytest.raises(ConfigError, match=r"^trainscale\.sweep\(\) argument spec_or_recipe: "):
        trainscale.sweep(123)


# -- valid values still pass --------------------------------------------------------------------


def test_valid_run_options_pass_as_the_cli_would_give_them(tmp_path):
    def options(**given):
        return run_options("run", "mnist-cnn", given, (calls.run, ("workload",)))

    assert options(seed=3).optimisation.seed == 3
    assert options(lr=1).optimisation.lr == 1.0  # an int is a number
    assert options(threads_per_worker="torch-default").parallel.threads_per_worker == (
        "torch-default"
    )
    assert options(evaluate=False, tag=None).measurement.evaluate is False
    # A path as a str or an os.PathLike, kept as text (as the CLI gives it).
    assert options(data_dir=tmp_path).data.data_dir == str(tmp_path)
    assert options(data_dir=str(tmp_path)).data.data_dir == str(tmp_path)
    assert options(data_dir=None).data.data_dir is None
    # KEY=VALUE options as a dict, or (KEY, VALUE) pairs as repeated -o give them; numbers
    # and booleans written as the command line would.
    expected = {"file": "t.csv", "n": "2", "lower": "true"}
    for pairs in (
        {"file": "t.csv", "n": 2, "lower": True},
        (("file", "t.csv"), ("n", 2), ("lower", True)),
        [["file", "t.csv"], ["n", "2"], ["lower", "true"]],
    ):
        assert dict(options(workload_options=pairs).data.workload_options) == expected
    assert options(store=tmp_path / "s.db", progress=True) == RunOptions.of("mnist-cnn")


def test_valid_keywords_of_the_other_functions_pass_on_unchanged(tmp_path):
    from trainscale.benchmark.options import BenchOptions
    from trainscale.benchmark.run import run_bench
    from trainscale.sweeps.run import load_sweep, run_sweep

    given = {"data_dir": tmp_path, "steps": 3, "out": tmp_path / "b.md", "store": str(tmp_path)}
    sources = ((calls.bench, ()), (run_bench, ("listener", "options")), (BenchOptions, ()))
    checked = check_arguments("bench", given, *sources)
    assert checked == {**given, "data_dir": str(tmp_path)}  # a run option's path: its text
    checked = check_arguments(
        "sweep",
        {"workload_options": [("file", "t.csv")], "report": tmp_path, "resume": True},
        (load_sweep, ()),
        (run_sweep, ()),
    )
    assert checked == {"workload_options": {"file": "t.csv"}, "report": tmp_path, "resume": True}


def test_a_list_is_taken_for_a_tuple_and_passed_on_as_one():
    from trainscale.simulator.options import ScalingOptions, StepModelOptions

    sources = ((ScalingOptions, ()), (StepModelOptions, ()))
    checked = check_arguments("simulate", {"workers": [1, 2], "calibrate_from": ["a"]}, *sources)
    assert checked == {"workers": (1, 2), "calibrate_from": ("a",)}
    with pytest.raises(
        ConfigError, match=r"option workers: must be a list or tuple of int or None"
    ):
        check_arguments("simulate", {"workers": {1, 2}}, *sources)


def test_a_scripts_path_and_arguments_of_the_wrong_type_are_one_line(tmp_path):
    import trainscale

    store = tmp_path / "s.db"
    with pytest.raises(ConfigError, match=r"^trainscale.run\(\) option script: must be a str"):
        trainscale.run(script=5, store=store)
    with pytest.raises(ConfigError, match=r"option script_args: must be a list or tuple of str"):
        trainscale.run(script="train.py", script_args=["--steps", 6], store=store)
    assert not store.exists()


def test_a_valid_run_reaches_the_launch_with_its_values(tmp_path, monkeypatch):
    seen = []

    def stand_in(options, store=None, quiet=False, sweep=None, config=None):
        seen.append(options)
        raise _Reached("execute_run")

    monkeypatch.setattr("trainscale.runner.launch.execute_run", stand_in)
    with pytest.raises(_Reached):
        trainscale.run(
            "mnist-cnn",
            data="synthetic",
            seed=3,
            steps=2,
            threads_per_worker=1,
            affinity="none",
            allow_oversubscribe=True,
            store=tmp_path / "s.db",
        )
    (options,) = seen
    assert options.optimisation.seed == 3 and options.optimisation.steps == 2


def test_an_annotation_only_a_type_checker_can_read_leaves_that_keyword_unchecked():
    def library_function(*, listener: NotImportedHere | None = None, steps: int = 1):  # noqa: F821
        """A library function whose listener's type is imported for type checking only."""

    sources = ((library_function, ()),)
    assert check_arguments("f", {"listener": object(), "steps": 2}, *sources)["steps"] == 2
    with pytest.raises(ConfigError, match=r"^trainscale\.f\(\) option steps: .* got '2'$"):
        check_arguments("f", {"steps": "2"}, *sources)


# -- property: whatever the values, a ConfigError or a call that goes on -------------------------

ANY_VALUE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.binary(max_size=4),
    st.complex_numbers(),
    st.builds(Path, st.text(max_size=8)),
    st.lists(st.one_of(st.integers(), st.text(max_size=4), st.none()), max_size=3),
    st.lists(st.tuples(st.text(max_size=4), st.one_of(st.integers(), st.text())), max_size=3),
    st.lists(st.lists(st.integers(), max_size=2), max_size=2).map(tuple),
    st.dictionaries(
        st.one_of(st.text(max_size=4), st.integers()),
        st.one_of(st.integers(), st.text(max_size=4), st.none(), st.lists(st.integers())),
        max_size=3,
    ),
    st.sets(st.integers(), max_size=3),
    st.just(object()),
)

_RUN_KEYS = [key for key in RunOptions.flat_fields() if key != "workload"]
KEYWORDS = {
    "run": [*_RUN_KEYS, "store", "progress"],
    "bench": ["framework", "data", "data_dir", "download", "steps", "rounds", "quick", "out"],
    "sweep": ["quick", "data", "data_dir", "workload_options", "resume", "report", "dry_run"],
    "compare": ["config", "confidence", "resamples", "seed", "store"],
    "runs": ["status", "tag", "limit", "store"],
    "import_runs": ["store"],
    "delete_runs": ["runs", "status", "tag", "limit", "dry_run", "store"],
    "probes": ["kind", "limit", "store"],
    "env": ["store"],
    "report": ["sweep", "runs", "tag", "baseline", "prices", "store"],
    "recommend": [
        *("budget_s", "quick", "rung_steps", "warmup_steps", "batch_multipliers"),
        *("max_workers", "include_busy", "accuracy_epochs", "accuracy_tolerance"),
        *("check_accuracy", "data", "data_dir", "download", "framework", "store"),
    ],
    "emulate": [
        *("workers", "mode", "per_worker_batch_size", "local_steps", "staleness_spread"),
        *("staleness_aware_lr", "lr_scaling", "lr", "epochs", "steps", "seed", "data"),
        *("data_dir", "workload_options", "store"),
    ],
    "predict_time_to_accuracy": [
        *("cluster", "nodes", "calibrate_from", "precision", "device", "threads_per_worker"),
        *("algorithm", "straggler_sigma", "samples", "seed", "plot", "store"),
    ],
    "probe": [
        *("device", "only", "threads", "workers", "allow_oversubscribe", "precisions"),
        *("matmul_sizes", "message_sizes", "repeats", "quick", "timeout_s", "store"),
    ],
    "simulate": [
        *("cluster", "nodes", "calibrate_from", "precision", "device", "threads_per_worker"),
        *("algorithm", "straggler_sigma", "workers", "batch_size", "global_batch_size"),
        *("bucket_cap_mb", "samples", "seed", "plot", "store"),
    ],
}
"""The keywords with a declared type (the workloads and compared sides take anything)."""


@st.composite
def calls_with_any_values(draw):
    function = draw(st.sampled_from(sorted(KEYWORDS)))
    keys = draw(st.lists(st.sampled_from(KEYWORDS[function]), min_size=1, max_size=3))
    keywords = {key: draw(ANY_VALUE) for key in keys}
    if function == "report":
        keywords["out"] = draw(st.one_of(st.just("r"), ANY_VALUE))
    return function, keywords


def test_any_keyword_value_is_a_config_error_or_goes_on_never_another_exception(tmp_path):
    started: list[str] = []
    with ExitStack() as stack:
        for module, name in STARTS:
            stand_in = _recorder(getattr(module, name), started)
            stack.enter_context(mock.patch.object(module, name, stand_in))

        @FUZZ
        @given(calls_with_any_values())
        def check(call):
            function, keywords = call
            keywords.setdefault("store", tmp_path / "s.db")
            try:
                getattr(trainscale, function)(*POSITIONAL.get(function, ()), **keywords)
            except ConfigError as error:
                assert "\n" not in str(error)
            except _Reached:
                pass

        check()
    assert not (tmp_path / "s.db").exists()
