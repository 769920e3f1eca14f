"""The recommend search space, successive halving with fake trials, and run_command."""

from __future__ import annotations

import itertools
import shlex

import pytest

from trainscale.advisor.run import RecommendListener, fit_candidates, recommend, summary_lines
from trainscale.advisor.search import SearchSettings, round_up_s, run_search
from trainscale.advisor.space import (
    BF16_SKIP_REASON,
    Candidate,
    build_space,
    thread_counts,
    worker_counts,
)
from trainscale.config.cli import run_command
from trainscale.config.options import RunOptions
from trainscale.errors import ConfigError, TrainscaleError
from trainscale.runner.launch import RunFailed

from tests.helpers.cli import parse_run_command

# -- the space ---------------------------------------------------------------------------


def test_worker_and_thread_counts():
    assert worker_counts(1) == [1]
    assert worker_counts(2) == [1, 2]
    assert worker_counts(6) == [1, 2, 3, 4, 6]
    assert worker_counts(8) == [1, 2, 4, 8]
    assert thread_counts(6, 4) == [1]
    assert thread_counts(6, 1) == [1, 2, 4, 6]
    assert thread_counts(8, 2) == [1, 2, 4]


@pytest.mark.parametrize("num_cores", [1, 2, 3, 4, 6, 8, 12, 16])
@pytest.mark.parametrize("numa", [False, True])
def test_space_never_oversubscribes(num_cores, numa):
    cores = list(range(100, 100 + num_cores))
    nodes = [cores[: num_cores // 2], cores[num_cores // 2 :]] if numa and num_cores > 1 else None
    space = build_space(64, cores, bf16_native=True, numa_nodes=nodes)
    assert space.candidates
    for candidate in space.candidates:
        assert candidate.workers * candidate.threads_per_worker <= num_cores
        used = [core for cores_ in candidate.core_sets for core in cores_]
        assert len(used) == len(set(used)), candidate  # no core shared between workers
        assert set(used) <= set(cores)
        assert all(len(s) == candidate.threads_per_worker for s in candidate.core_sets)
    labels = [c.label for c in space.candidates]
    assert len(labels) == len(set(labels))


def test_one_numa_node_dedups_affinities_with_identical_cores():
    space = build_space(64, [0, 1], bf16_native=False)
    placements = {(c.workers, c.threads_per_worker, c.affinity) for c in space.candidates}
    # On 2 cores every spread plan pins exactly like compact: only compact is kept.
    assert placements == {(1, 1, "compact"), (1, 2, "compact"), (2, 1, "compact")}
    assert ("1w x 1t spread", "1w x 1t compact") in space.duplicates
    assert len(space.candidates) == 3 * 2  # x two batch sizes
    assert {c.batch_size for c in space.candidates} == {64, 128}


def test_spread_kept_where_it_pins_differently():
    cores = list(range(8))
    space = build_space(32, cores, bf16_native=False, batch_multipliers=(1,))
    two = {
        c.affinity: c.core_sets
        for c in space.candidates
        if (c.workers, c.threads_per_worker) == (2, 2)
    }
    # Without a NUMA map spread strides over the cores (OpenMP's spread).
    assert two == {"compact": ((0, 1), (2, 3)), "spread": ((0, 2), (1, 3))}
    numa = build_space(32, cores, False, numa_nodes=[[0, 1, 2, 3], [4, 5, 6, 7]])
    pinned = {
        c.affinity: c.core_sets
        for c in numa.candidates
        if (c.workers, c.threads_per_worker) == (2, 4)
    }
    assert set(pinned) == {"compact"}  # spread over 2 nodes x 4 cores is the compact plan


def test_bf16_only_with_native_support():
    without = build_space(64, [0, 1], bf16_native=False)
    assert {c.precision for c in without.candidates} == {"fp32"}
    assert BF16_SKIP_REASON in without.skipped
    assert "emulated" in BF16_SKIP_REASON
    native = build_space(64, [0, 1], bf16_native=True)
    assert {c.precision for c in native.candidates} == {"fp32", "bf16"}
    assert not any("bf16" in s for s in native.skipped)


def test_baseline_is_the_serial_fp32_recipe_setting():
    space = build_space(64, [4, 5], bf16_native=True)
    assert space.baseline == Candidate(1, 1, "compact", "fp32", 64, ((4,),))
    assert space.baseline in space.candidates


def test_max_workers_and_bad_multipliers():
    space = build_space(64, range(4), False, max_workers=2)
    assert max(c.workers for c in space.candidates) == 2
    assert any("above --max-workers 2" in s for s in space.skipped)
    with pytest.raises(ConfigError):
        build_space(64, range(4), False, batch_multipliers=(0,))


def test_candidate_options_replace_the_batch_and_placement():
    candidate = Candidate(2, 1, "spread", "bf16", 128)
    base = RunOptions.of(workload="mnist-cnn", global_batch_size=256, allow_oversubscribe=True)
    options = candidate.options(base)
    assert (
        options.parallel.workers,
        options.parallel.threads_per_worker,
        options.parallel.affinity,
    ) == (2, 1, "spread")
    assert (
        options.optimisation.batch_size,
        options.optimisation.global_batch_size,
        options.optimisation.precision,
    ) == (128, None, "bf16")
    assert options.parallel.allow_oversubscribe is False
    assert candidate.global_batch_size == 256 and candidate.cores == 2


def test_gpu_settings_are_searched_where_there_are_gpus():
    space = build_space(64, range(16), True, num_gpus=2, cuda_bf16=True)
    gpu = [c for c in space.candidates if c.gpus]
    assert [c.label for c in gpu] == [
        f"{n} {precision} b{batch}"
        for n in ("1 GPU", "2 GPUs")
        for precision in ("fp32", "bf16")
        for batch in (64, 128)
    ]
    options = gpu[-1].options(RunOptions.of(workload="mnist-cnn"))
    # A worker per GPU, the host's cores shared among them, the batch per worker.
    assert options.flat()["device"] == "cuda"
    assert (options.parallel.workers, options.parallel.threads_per_worker) == (2, 8)
    assert (options.optimisation.batch_size, options.optimisation.precision) == (128, "bf16")
    command = run_command(options, explicit=("affinity",))
    assert "--device cuda" in command and parse_run_command(command) == options
    # The CPU settings are searched as before; the baseline stays the serial CPU one.
    assert space.baseline == build_space(64, range(16), True).baseline
    assert len(space.candidates) - len(gpu) == len(build_space(64, range(16), True).candidates)


def test_gpu_settings_keep_to_max_workers_and_may_outnumber_the_cores():
    capped = build_space(64, [0, 1], True, max_workers=1, num_gpus=4, cuda_bf16=True)
    assert {c.workers for c in capped.candidates if c.gpus} == {1}
    assert "4 GPUs skipped: --max-workers 1 caps the workers" in capped.skipped
    # 4 GPUs on 2 cores: a thread each, the host oversubscribed as the bench's rung is.
    space = build_space(64, [0, 1], True, num_gpus=4, cuda_bf16=True)
    base = RunOptions.of(workload="mnist-cnn")
    four = next(c for c in space.candidates if c.gpus == 4)
    options = four.options(base)
    assert (options.parallel.workers, options.parallel.threads_per_worker) == (4, 1)
    assert options.parallel.allow_oversubscribe
    command = run_command(options, explicit=("affinity",))
    assert "--allow-oversubscribe" in command and parse_run_command(command) == options
    one = next(c for c in space.candidates if c.gpus == 1)
    assert not one.options(base).parallel.allow_oversubscribe


def test_without_gpus_or_native_gpu_bf16_there_is_nothing_or_fp32_on_them():
    assert not any(c.gpus for c in build_space(64, range(4), True).candidates)
    old = build_space(64, range(4), True, num_gpus=1, cuda_bf16=False)
    assert [c.label for c in old.candidates if c.gpus] == ["1 GPU fp32 b64", "1 GPU fp32 b128"]
    assert any("no native bf16" in note for note in old.skipped)


def test_a_gpu_setting_this_machine_cannot_run_is_left_out_saying_why():
    # The facts say a GPU, CUDA cannot use it (here: a CPU-only build): the GPU settings are
    # skipped with the reason, the CPU search goes on.
    space = build_space(64, [0, 1], False, num_gpus=1)
    base = RunOptions.of(workload="mnist-cnn", data="synthetic")
    fitted = fit_candidates(space, base, None, 0.1, [0, 1])
    assert not any(c.gpus for c in fitted.candidates)
    assert len(fitted.candidates) == len([c for c in space.candidates if not c.gpus])
    assert any(note.startswith("1 GPU fp32 b64 skipped: ") for note in fitted.skipped)


class _Planned(Exception):
    """Raised by `_StopWhenPlanned`: the search is planned, no trial is to run."""


class _StopWhenPlanned(RecommendListener):
    def planned(self, plan):
        self.plan = plan
        raise _Planned


def _with_a_gpu(monkeypatch) -> None:
    from trainscale.hardware import facts

    real = facts.collect_environment
    gpu = {"index": 0, "name": "NVIDIA H200", "capability": "9.0", "memory_bytes": 1 << 37}
    monkeypatch.setattr(facts, "collect_environment", lambda: {**real(), "gpus": [gpu]})


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_a_gpu_the_search_cannot_use_is_left_out_saying_why(monkeypatch, tmp_path, framework):
    # The facts list a GPU; this machine's CUDA cannot use it (a CPU build), and TensorFlow
    # trains on the CPU only: the plan says so, and the CPU settings are searched.
    pytest.importorskip(framework if framework != "pytorch" else "torch")
    _with_a_gpu(monkeypatch)
    listener = _StopWhenPlanned()
    with pytest.raises(_Planned):
        recommend(
            "mnist-cnn",
            framework=framework,
            data="synthetic",
            store=tmp_path / "s.db",
            listener=listener,
        )
    space = listener.plan.space
    assert space.candidates and not any(c.gpus for c in space.candidates)
    if framework == "tensorflow":
        note = "GPU settings skipped: TensorFlow trains on the CPU only (docs/frameworks.md)"
        assert note in space.skipped
    else:
        assert any("1 GPU bf16 b64 skipped: --device cuda" in n for n in space.skipped)


def test_the_plan_line_names_the_gpus_and_the_left_out_settings(monkeypatch, tmp_path):
    import io

    from rich.console import Console

    from trainscale.cli.recommend_progress import RecommendProgress

    class PrintThenStop(RecommendProgress):
        def planned(self, plan):
            super().planned(plan)
            raise _Planned

    _with_a_gpu(monkeypatch)
    out = io.StringIO()
    listener = PrintThenStop(Console(file=out, width=400))
    with pytest.raises(_Planned):
        recommend("mnist-cnn", data="synthetic", store=tmp_path / "s.db", listener=listener)
    first, *rest = out.getvalue().splitlines()
    assert "usable cores, 1 GPU (NVIDIA H200); " in first
    assert any(line.strip().startswith("1 GPU fp32 b64 skipped: ") for line in rest)


# -- the search, with fake trials --------------------------------------------------------


class FakeTrials:
    """Deterministic trials: throughput and accuracy per label, time on a fake clock."""

    OVERHEAD_S = 4.0

    def __init__(self, space, rates, accuracy=None, fail=()):
        self.rates = rates
        self.accuracy = accuracy or {}
        self.fail = set(fail)
        self.now = 0.0
        self.calls: list[tuple[str, str, int | None]] = []
        self.labels = {
            (c.workers, c.threads_per_worker, c.affinity, c.precision, c.batch_size, c.gpus > 0): (
                c.label
            )
            for c in space.candidates
        }

    def clock(self) -> float:
        return self.now

    def label(self, options: RunOptions) -> str:
        key = (
            options.parallel.workers,
            options.parallel.threads_per_worker,
            options.parallel.affinity,
            options.optimisation.precision,
            options.optimisation.batch_size,
            options.flat()["device"] == "cuda",
        )
        return self.labels[key]

    def __call__(self, options: RunOptions) -> dict:
        label = self.label(options)
        kind = "accuracy" if options.measurement.evaluate else "throughput"
        self.calls.append((label, kind, options.optimisation.steps))
        rate = self.rates[label]
        if kind == "accuracy":
            samples = int(options.optimisation.epochs * 60_000)
        else:
            samples = (
                options.optimisation.steps
                * options.optimisation.batch_size
                * options.parallel.workers
            )
        train_s = samples / rate
        self.now += self.OVERHEAD_S + train_s
        if label in self.fail:
            raise RunFailed(f"id-{len(self.calls)}", "worker 0 exited with code 1")
        return {
            "run_id": f"id-{len(self.calls)}",
            "samples_per_s": rate,
            "train_time_s": train_s,
            "num_samples": samples,
            "test_accuracy": self.accuracy.get(label, 0.98) if kind == "accuracy" else None,
        }


SPACE = build_space(64, [0, 1], bf16_native=False)
RATES = {
    "1w x 1t compact fp32 b64": 1000.0,  # the baseline
    "1w x 1t compact fp32 b128": 1100.0,
    "1w x 2t compact fp32 b64": 1500.0,
    "1w x 2t compact fp32 b128": 1700.0,
    "2w x 1t compact fp32 b64": 1800.0,
    "2w x 1t compact fp32 b128": 2000.0,
}
THROUGHPUT_BASE = RunOptions.of(workload="mnist-cnn", data="synthetic", tag="recommend:test")
ACCURACY_BASE = RunOptions.of(workload="mnist-cnn", data="real", tag="recommend:test")


def search(fake, settings=None, accuracy=True):
    return run_search(
        SPACE,
        THROUGHPUT_BASE,
        ACCURACY_BASE if accuracy else None,
        settings or SearchSettings(budget_s=10_000),
        fake,
        clock=fake.clock,
    )


def test_best_survives_successive_halving():
    fake = FakeTrials(SPACE, RATES)
    result = search(fake)
    assert result.best.label == "2w x 1t compact fp32 b128"
    assert result.rungs_completed == 3 and not result.stopped_by_budget
    throughput = [(label, steps) for label, kind, steps in fake.calls if kind == "throughput"]
    by_rung = [[label for label, s in throughput if s == steps] for steps in (15, 35, 95)]
    assert len(by_rung[0]) == 6  # every candidate, the baseline first
    assert by_rung[0][0] == SPACE.baseline.label
    # Rung 1: the top third (2 of 6) plus the baseline as reference; rung 2: 1 plus baseline.
    assert by_rung[1] == [
        SPACE.baseline.label,
        "2w x 1t compact fp32 b128",
        "2w x 1t compact fp32 b64",
    ]
    assert by_rung[2] == [SPACE.baseline.label, "2w x 1t compact fp32 b128"]
    assert result.best_rung == 2
    assert result.speedup == pytest.approx(2.0)
    assert result.baseline_samples_per_s == 1000.0
    # The baseline's accuracy run comes first, then the winner's.
    accuracy = [label for label, kind, _ in fake.calls if kind == "accuracy"]
    assert accuracy == [SPACE.baseline.label, "2w x 1t compact fp32 b128"]
    assert result.accuracy_checked and result.best_accuracy == 0.98
    ranked = [r.candidate.label for r in result.ranking]
    assert ranked[:2] == ["2w x 1t compact fp32 b128", "2w x 1t compact fp32 b64"]
    assert any("global batch (256)" in note for note in result.notes)


def test_a_gpu_setting_faster_than_every_cpu_one_is_recommended_with_its_command():
    space = build_space(64, [0, 1], False, num_gpus=1)
    rates = {**RATES, "1 GPU fp32 b64": 9000.0, "1 GPU fp32 b128": 12000.0}
    fake = FakeTrials(space, rates)
    result = run_search(
        space, THROUGHPUT_BASE, ACCURACY_BASE, SearchSettings(budget_s=10_000), fake, fake.clock
    )
    assert result.best.label == "1 GPU fp32 b128"
    assert result.speedup == pytest.approx(12.0)  # against the serial CPU baseline
    accuracy = [label for label, kind, _ in fake.calls if kind == "accuracy"]
    assert accuracy == [space.baseline.label, "1 GPU fp32 b128"]
    command = run_command(result.best.options(RunOptions.of(workload="mnist-cnn")))
    assert "--device cuda" in command and "--batch-size 128" in command


def test_regressing_accuracy_is_rejected_and_the_next_one_chosen():
    accuracy = {SPACE.baseline.label: 0.980, "2w x 1t compact fp32 b128": 0.970}
    fake = FakeTrials(SPACE, RATES, accuracy)
    result = search(fake)
    assert result.best.label == "2w x 1t compact fp32 b64"
    (rejection,) = result.rejected
    assert rejection.candidate.label == "2w x 1t compact fp32 b128"
    assert "1.00 points below" in rejection.reason and rejection.test_accuracy == 0.970
    assert result.best_rung == 1  # measured in rung 1, where it was eliminated
    assert result.speedup == pytest.approx(1.8)


def test_drop_within_tolerance_is_kept():
    accuracy = {SPACE.baseline.label: 0.980, "2w x 1t compact fp32 b128": 0.976}
    result = search(FakeTrials(SPACE, RATES, accuracy))
    assert result.best.label == "2w x 1t compact fp32 b128" and not result.rejected


def test_every_finalist_rejected_falls_back_to_the_baseline():
    accuracy = {label: 0.90 for label in RATES} | {SPACE.baseline.label: 0.98}
    fake = FakeTrials(SPACE, RATES, accuracy)
    result = search(fake)
    assert result.best == SPACE.baseline
    assert result.speedup == pytest.approx(1.0)
    assert len(result.rejected) == len(RATES) - 1


def test_without_real_data_accuracy_is_not_checked():
    fake = FakeTrials(SPACE, RATES)
    result = search(fake, accuracy=False)
    assert result.best.label == "2w x 1t compact fp32 b128"
    assert not result.accuracy_checked and result.best_accuracy is None
    assert all(kind == "throughput" for _, kind, _ in fake.calls)


def test_budget_is_respected_and_the_stop_is_reported():
    fake = FakeTrials(SPACE, RATES)
    # Enough for the baseline accuracy run, rung 0 and part of rung 1.
    settings = SearchSettings(budget_s=75)
    result = search(fake, settings)
    assert result.stopped_by_budget
    assert result.elapsed_s <= settings.budget_s
    assert any(note.startswith("budget: stopped") for note in result.notes)
    assert result.rungs_completed < 3
    assert result.best.label == "2w x 1t compact fp32 b128"  # still the best measured


def test_tiny_budget_still_ranks_what_it_measured():
    fake = FakeTrials(SPACE, RATES)
    result = search(fake, SearchSettings(budget_s=1), accuracy=False)
    # The first trial always runs; nothing after it fits.
    assert [kind for _, kind, _ in fake.calls] == ["throughput"]
    assert result.best == SPACE.baseline and result.stopped_by_budget


class SlowerLater(FakeTrials):
    """Candidates whose rate drops after the first rung (`later`: label -> rate)."""

    def __init__(self, space, rates, later) -> None:
        super().__init__(space, rates)
        self.first, self.later = dict(rates), later

    def __call__(self, options: RunOptions) -> dict:
        settings = SearchSettings()
        first_rung = options.optimisation.steps == settings.rung_steps[0] + settings.warmup_steps
        self.rates = self.first if first_rung else {**self.first, **self.later}
        return super().__call__(options)


def test_a_candidate_measured_slower_than_the_baseline_is_never_recommended():
    rates = {label: 500.0 for label in RATES}
    rates |= {SPACE.baseline.label: 1000.0, "1w x 2t compact fp32 b64": 1100.0}
    rates["2w x 1t compact fp32 b64"] = 1050.0
    # Both fast in the first rung (the baseline drops out of the survivors), slower after.
    later = {"1w x 2t compact fp32 b64": 900.0, "2w x 1t compact fp32 b64": 800.0}
    result = search(SlowerLater(SPACE, rates, later))
    # The baseline runs every rung: ranked by its latest, above the slower finalist.
    assert result.best.label == SPACE.baseline.label
    assert result.ranking[0].candidate == SPACE.baseline
    assert result.ranking[1].samples_per_s == 900.0


def test_every_trial_failing_is_a_failed_search_not_a_mistake():
    from trainscale.advisor.search import AllTrialsFailed

    with pytest.raises(AllTrialsFailed, match="every trial failed, nothing to recommend"):
        search(FakeTrials(SPACE, RATES, fail=set(RATES)), accuracy=False)


def test_failed_trials_drop_out():
    fake = FakeTrials(SPACE, RATES, fail={"2w x 1t compact fp32 b128"})
    result = search(fake)
    assert result.best.label == "2w x 1t compact fp32 b64"
    failed = [t for t in result.trials if t.error]
    assert len(failed) == 1 and "exited" in failed[0].error


def test_failed_baseline_accuracy_run_stops_the_search():
    fake = FakeTrials(SPACE, RATES, fail={SPACE.baseline.label})
    with pytest.raises(TrainscaleError, match="baseline's accuracy run failed"):
        search(fake)


def test_settings_are_checked():
    with pytest.raises(TrainscaleError):
        SearchSettings(rung_steps=())
    with pytest.raises(TrainscaleError):
        SearchSettings(budget_s=0)
    with pytest.raises(TrainscaleError):
        SearchSettings(keep_fraction=1.0)


def test_search_is_deterministic():
    first = search(FakeTrials(SPACE, RATES)).to_dict()
    again = search(FakeTrials(SPACE, RATES)).to_dict()
    assert first == again


class BusyTrials(FakeTrials):
    """FakeTrials whose throughput trials of the `busy` labels are stored as busy."""

    def __init__(self, space, rates, busy):
        super().__init__(space, rates)
        self.busy = set(busy)

    def __call__(self, options: RunOptions) -> dict:
        result = super().__call__(options)
        if self.label(options) in self.busy and not options.measurement.evaluate:
            result["contention"] = {"verdict": "busy", "reason": "a neighbour"}
        return result


# A setting that looks fastest only in trials a neighbour disturbed (a busy measurement may
# be off either way: the point is that it is not the setting's own).
BUSY_LABEL = "1w x 1t compact fp32 b128"
BUSY_RATES = RATES | {BUSY_LABEL: 9000.0}


def _payload(result) -> dict:
    return {
        **result.to_dict(),
        "recommend_id": "r1",
        "workload": "mnist-cnn",
        "tag": "recommend:r1",
        "command": "trainscale run mnist-cnn",
        "settings": {"rung_steps": [10, 30, 90], "accuracy_epochs": 0.25, "accuracy_tolerance": 0},
    }


def test_busy_trials_are_left_out_of_the_ranking_and_the_first_line_says_so():
    result = search(BusyTrials(SPACE, BUSY_RATES, {BUSY_LABEL}), accuracy=False)
    assert result.best.label == "2w x 1t compact fp32 b128"
    assert BUSY_LABEL not in [r.candidate.label for r in result.ranking]
    busy = result.busy_trials
    assert [t.candidate.label for t in busy] == [BUSY_LABEL]
    payload = _payload(result)
    assert payload["busy_left_out"] == 1
    first = summary_lines(payload)[0]
    assert first.startswith("left out 1 of ") and "busy machine" in first
    assert "--include-busy" in first
    # Measured, though busy: the budget did not leave it out, and no line says it did.
    assert result.candidates_measured == result.candidates_total
    assert not any(note.startswith("budget:") for note in result.notes)
    assert not any("candidates measured" in line for line in summary_lines(payload))


def test_include_busy_ranks_busy_trials_like_the_others():
    settings = SearchSettings(budget_s=10_000, include_busy=True)
    result = search(BusyTrials(SPACE, BUSY_RATES, {BUSY_LABEL}), settings, accuracy=False)
    assert result.best.label == BUSY_LABEL
    payload = _payload(result)
    assert payload["busy_left_out"] == 0
    # It won every rung, so each of its three trials counted.
    assert summary_lines(payload)[0].startswith("kept 3 of ")


def test_a_busy_baseline_trial_gives_no_speedup_but_the_search_goes_on():
    result = search(BusyTrials(SPACE, RATES, {SPACE.baseline.label}), accuracy=False)
    assert result.best.label == "2w x 1t compact fp32 b128"
    assert result.baseline_samples_per_s is None and result.speedup is None


def test_every_trial_busy_ranks_them_anyway_marked_not_trusted(monkeypatch):
    from trainscale.hardware.contention import OtherProcess

    neighbour = OtherProcess(pid=4242, name="stress", cpu_percent=97.0)
    monkeypatch.setattr("trainscale.advisor.search.busiest_processes", lambda: [neighbour])
    everyone = BusyTrials(SPACE, RATES, set(RATES))
    result = search(everyone, accuracy=False)
    # The ranking of the busy measurements: the same best as on a quiet machine here.
    assert result.best.label == "2w x 1t compact fp32 b128"
    assert not result.trusted and result.speedup is not None
    payload = _payload(result)
    assert payload["trusted"] is False and payload["busy_left_out"] == 0
    first = summary_lines(payload)[0]
    assert first.startswith("not trusted: busy machine: every measured throughput trial")
    assert "stress (pid 4242) 97% CPU" in first and "run again when the machine is quiet" in first


def test_a_trusted_search_says_so_and_names_no_neighbour(monkeypatch):
    def never():
        raise AssertionError("neighbours are looked for only where nothing quiet was left")

    monkeypatch.setattr("trainscale.advisor.search.busiest_processes", never)
    result = search(BusyTrials(SPACE, BUSY_RATES, {BUSY_LABEL}), accuracy=False)
    assert result.trusted and _payload(result)["trusted"] is True


def test_without_busy_trials_the_summary_starts_as_before():
    result = search(FakeTrials(SPACE, RATES), accuracy=False)
    assert summary_lines(_payload(result))[0] == "recommend r1: mnist-cnn"


# -- run_command ---------------------------------------------------------------------------

ROUND_TRIP = [
    RunOptions.of(workload="mnist-cnn"),
    RunOptions.of(workload="mnist-cnn", workers=2, threads_per_worker=1, batch_size=64),
    RunOptions.of(workload="mnist-cnn", threads_per_worker="torch-default", affinity="none"),
    RunOptions.of(workload="mnist-cnn", affinity="0,1;2,3", workers=2, allow_oversubscribe=True),
    RunOptions.of(
        workload="imdb-bilstm",
        data="synthetic",
        data_dir="/data/my sets",
        download=False,
        global_batch_size=256,
        optimizer="adamw",
        lr=1e-05,
        lr_scaling="sqrt",
        warmup_fraction=0.1,
        schedule="cosine",
        weight_decay=0.05,
        precision="bf16",
        epochs=0.5,
        eval_every=100,
        target_accuracy=0.87,
        seed=3,
        warmup_steps_untimed=0,
        timeout_s=30.5,
        tag="-starts with a dash; and $pecial 'quotes'",
        workload_options={"max_len": "200", "vocab": "a b"},
    ),
    RunOptions.of(workload="mnist-cnn", steps=90, warmup_steps_untimed=2, stop_at_target=True),
    RunOptions.of(workload="mnist-cnn", profile="runs/prof 1", profile_steps=7),
    RunOptions.of(workload="mnist-cnn", evaluate=False, target_accuracy=0.5, steps=5),
    RunOptions.of(workload="mnist-cnn", framework="tensorflow", workers=2, single_process=True),
    RunOptions.of(
        workload="cifar10-resnet44",
        device="auto",
        compile=True,
        compile_mode="reduce-overhead",
        bucket_cap_mb=50.0,
        grad_accum=2,
        breakdown_every=10,
        nnodes=2,
        rdzv_endpoint="node0.cluster:29400",
        rdzv_id="job-7",
        rdzv_timeout_s=60.0,
    ),
]


@pytest.mark.parametrize("options", ROUND_TRIP)
def test_run_command_round_trips_through_the_real_parser(options):
    command = run_command(options)
    assert command.startswith("trainscale run ")
    assert parse_run_command(command) == options


def test_run_command_writes_only_non_defaults_unless_asked():
    assert run_command(RunOptions.of(workload="mnist-cnn")) == "trainscale run mnist-cnn"
    options = Candidate(2, 1, "compact", "fp32", 64).options(RunOptions.of(workload="mnist-cnn"))
    # fp32 is not the default (auto is): it is written even where not asked for.
    assert run_command(options) == (
        "trainscale run mnist-cnn --workers 2 --threads-per-worker 1 --batch-size 64 "
        "--precision fp32"
    )
    explicit = ("workers", "threads_per_worker", "affinity", "precision", "batch_size")
    command = run_command(options, explicit=explicit)
    assert command == (
        "trainscale run mnist-cnn --workers 2 --threads-per-worker 1 --affinity compact "
        "--batch-size 64 --precision fp32"
    )
    assert parse_run_command(command) == options


def test_run_command_quotes_for_the_shell():
    command = run_command(RunOptions.of(workload="mnist-cnn", affinity="0;1", workers=2))
    assert "'0;1'" in command
    assert shlex.split(command)[-1] == "0;1"


@pytest.mark.parametrize("candidate", build_space(64, range(4), True).candidates[:12])
def test_every_candidate_round_trips(candidate):
    options = candidate.options(RunOptions.of(workload="mnist-cnn"))
    assert parse_run_command(run_command(options, explicit=("affinity",))) == options


def test_round_trip_covers_every_option():
    # Every RunOptions field is set to a non-default value in some ROUND_TRIP case.
    defaults = RunOptions.of(workload="x")
    covered = {
        name
        for options, name in itertools.product(ROUND_TRIP, RunOptions.flat_fields())
        if options.flat()[name] != defaults.flat()[name]
    }
    assert covered == set(RunOptions.flat_fields())


def test_replace_keeps_round_trip_for_searched_options():
    options = ROUND_TRIP[1].with_(precision="bf16", affinity="spread")
    assert parse_run_command(run_command(options)) == options


def test_a_rung_cut_short_does_not_change_the_ranking():
    # The baseline runs first in every rung; were it ranked on a rung cut short right after
    # it, it would jump ahead of faster settings measured only on the shorter rung.
    fake = FakeTrials(SPACE, RATES)
    full = search(fake, accuracy=False)
    first_rung_1 = next(i for i, t in enumerate(full.trials) if t.rung == 1)
    # Just enough time for the rung-1 baseline trial, not the one after it.
    budget = fake.now - sum(t.wall_s for t in full.trials[first_rung_1 + 1 :]) + 0.5
    fake = FakeTrials(SPACE, RATES)
    result = search(fake, SearchSettings(budget_s=budget), accuracy=False)
    assert result.stopped_by_budget and result.rungs_completed == 1
    assert [t.rung for t in result.trials].count(1) == 1  # the baseline only
    assert result.best.label == "2w x 1t compact fp32 b128"
    assert result.best_rung == 0
    assert result.speedup == pytest.approx(2.0)


def test_a_budget_too_small_says_so_before_and_after_and_calls_nothing_best():
    fake = FakeTrials(SPACE, RATES)
    # The baseline's accuracy run (19 s here) kept in reserve leaves room for one trial.
    result = search(fake, SearchSettings(budget_s=45))
    total = len(SPACE.candidates)
    assert result.candidates_measured == 1 and result.candidates_total == total
    assert result.only_baseline and result.budget_needed_s is not None
    needed = round_up_s(result.budget_needed_s)
    # Before the budget is spent: right after the first throughput trial measured it.
    first = next(n for n in result.notes if n.startswith("budget: measuring all"))
    assert result.notes.index(first) == 0
    assert f"takes about {needed} s here" in first and f"--budget-s {needed}" in first
    assert (
        f"budget: measured 1 of {total} candidates; a budget of about {needed} s would "
        "measure all" in result.notes
    )
    lines = summary_lines(_payload(result))
    assert not any(line.startswith("best:") for line in lines)
    assert not any("1.00x" in line for line in lines)
    assert any(
        line.startswith("no recommendation: only the serial baseline") and f"1 of {total}" in line
        for line in lines
    )
    # The estimate is enough: that budget measures every candidate.
    full = search(FakeTrials(SPACE, RATES), SearchSettings(budget_s=needed))
    assert full.candidates_measured == total and not full.stopped_by_budget
    assert not any(n.startswith("budget:") for n in full.notes)


def test_a_budget_that_fits_says_nothing_of_budgets():
    result = search(FakeTrials(SPACE, RATES))
    assert not result.only_baseline
    assert not any(n.startswith("budget:") for n in result.notes)
    lines = summary_lines(_payload(result))
    assert any(line.startswith("best: 2w x 1t compact fp32 b128") for line in lines)
