"""The benchmarks of script runs (meter overhead, script vs workload, input-bound): their
options, the one-line refusal of impossible settings, and the parts that decide what they
compare, without a real run."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from trainscale.train import meter as meter_module

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
NAMES = ("meter_overhead", "script_vs_workload", "input_bound")


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"benchmark_{name}", BENCHMARKS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def benchmarks() -> Iterator[dict[str, ModuleType]]:
    path = list(sys.path)
    yield {name: _load(name) for name in NAMES}
    sys.path[:] = path  # each puts benchmarks/ first on the path for its _common


def _main(module: ModuleType, args: list[str], monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", [f"{module.__name__}.py", *args])
    try:
        return module.main()
    except SystemExit as stop:
        return int(stop.code or 0)


@pytest.mark.parametrize("name", NAMES)
def test_each_takes_rounds_steps_and_a_json_file(
    name: str,
    benchmarks: dict[str, ModuleType],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert _main(benchmarks[name], ["--help"], monkeypatch) == 0
    shown = capsys.readouterr().out
    for option in ("--rounds", "--steps", "--json OUT"):
        assert option in shown


@pytest.mark.parametrize("name", NAMES)
def test_steps_within_the_warm_up_are_refused_with_exit_2(
    name: str,
    benchmarks: dict[str, ModuleType],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--steps", "3", "--warmup", "5", "--json", "unused.json"]
    assert _main(benchmarks[name], args, monkeypatch) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--steps > --warmup" in err.splitlines()[-1]


def _loop_args(loop: str, timings: Path) -> argparse.Namespace:
    return argparse.Namespace(loop=loop, steps=4, warmup=1, batch_size=8, timings=str(timings))


@pytest.mark.parametrize(("loop", "metered"), [("meter", 4), ("bare", 1)])
def test_only_the_meter_side_steps_inside_the_meter(
    loop: str, metered: int, benchmarks: dict[str, ModuleType], tmp_path: Path
) -> None:
    # The bare side enters the meter on its first, untimed step only (trainscale refuses a
    # run that timed no step); both sides time every step themselves.
    active = meter_module.activate()
    try:
        benchmarks["meter_overhead"].measured_loop(_loop_args(loop, tmp_path / "t.json"))
    finally:
        meter_module.deactivate()
    assert len(active.measurements.step_times_s) == metered
    own = json.loads((tmp_path / "t.json").read_text())
    assert len(own["spans_s"]) == 4
    assert own["samples_per_s"] == pytest.approx(8 / own["step_time_s_median"])


def _rounds(ratios: list[float], busy: bool = False) -> list[dict[str, dict[str, object]]]:
    return [
        {
            "bare": {"samples_per_s": 100.0, "busy": busy},
            "meter": {"samples_per_s": 100.0 * ratio, "busy": busy},
        }
        for ratio in ratios
    ]


def test_the_target_is_resolved_once_the_interval_clears_it(
    benchmarks: dict[str, ModuleType],
) -> None:
    resolution = benchmarks["meter_overhead"].resolution
    steps, resolved = resolution(_rounds([0.999, 1.001, 0.9995, 1.0005]))
    assert resolved == 2 and [s["rounds"] for s in steps] == [2, 3, 4]
    unresolved = _rounds([0.95, 1.01, 0.97, 1.0])
    assert resolution(unresolved)[1] is None  # the interval holds 0.98
    paired = benchmarks["meter_overhead"].summarise(unresolved)
    assert benchmarks["meter_overhead"].rounds_needed(paired) > 4  # more than were run
    assert resolution(_rounds([0.999, 1.001, 1.0], busy=True))[1] is None  # not trusted
    # Two early rounds below the target by chance, undone by the later ones: not resolved.
    undone = _rounds([0.95, 0.951, 1.0, 1.01, 0.99, 0.97, 1.0])
    assert [s["ci95"][1] < 0.98 for s in resolution(undone)[0]][0]
    assert resolution(undone)[1] is None


def test_the_loader_sides_share_cores_but_the_one_core_side(
    benchmarks: dict[str, ModuleType], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("os.sched_getaffinity", lambda pid: {4, 5, 6})
    args = argparse.Namespace(num_workers=1, one_core=True)
    assert benchmarks["input_bound"].sides(args) == {
        "num_workers=0": (0, "4,5"),
        "num_workers=1": (1, "4,5"),
        "num_workers=1, one core": (1, "compact"),
    }
