"""Small results stores for the report tests: made-up but plausible runs.

Each run's summary has the keys a real run's summary has (`trainer_output`): the figures
below are set in the summary of one tiny real training run.

`cpu_parallel_configs()` mirrors the cpu-parallel recipe on a 4-core machine: a serial
baseline, one process with 4 threads, pinned workers, the naive oversubscribed setting (noisy)
and a failed run, plus a synthetic-data text workload over affinity sets.
`scaling_configs()` follows Amdahl's law with a serial fraction of 0.1 exactly.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainscale.results.store import RunStore

from tests.helpers.trainer_output import machine_figures, trainer_summary

MACHINE = {
    "cpu_model": "Test CPU 9000",
    "logical_cores": 4,
    "usable_cores": [0, 1, 2, 3],
    "torch_version": "2.13.0+cpu",
    "torch_num_threads_default": 4,
    "hostname": "fixture-host",
}

STEPS = 100
"""Steps of every fixture run (one of them a warm-up step)."""


@dataclass
class FixtureConfig:
    """A configuration and what each of its runs measured."""

    label: str
    workload: str
    workers: int
    threads: int | None
    """None: torch-default threads (resolved to the machine's default of 4)."""
    affinity: str
    rates: list[float | None]
    """Samples/s per repeat; None stores that repeat as a failed run."""
    data: str = "real"
    global_batch_size: int = 64
    accuracies: list[float] | None = None
    times_to_target: list[float | None] | None = None
    step_iqr_fraction: float = 0.02
    breakdown_s: dict[str, float] | None = None
    extra_config: dict[str, Any] = field(default_factory=dict)

    @property
    def threads_resolved(self) -> int:
        return self.threads or MACHINE["torch_num_threads_default"]

    def core_sets(self) -> list[list[int]] | None:
        if self.affinity == "none":
            return None
        if self.affinity == "compact":
            per = self.threads_resolved
            return [list(range(w * per, (w + 1) * per)) for w in range(self.workers)]
        return [[int(c) for c in self.affinity.split(",")]]

    def config(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "data": self.data,
            "workers": self.workers,
            "threads_per_worker": self.threads,
            "affinity": self.affinity,
            "core_sets": self.core_sets(),
            "oversubscribed": self.workers * self.threads_resolved > len(MACHINE["usable_cores"]),
            "batch_size": self.global_batch_size // self.workers,
            "global_batch_size": self.global_batch_size,
            "lr": 0.01,
            "base_lr": 0.01,
            "precision": "fp32",
            "seed": 0,
            "evaluate": self.data == "real",
            "target_accuracy": 0.97,
            **self.extra_config,
        }

    def key(self) -> str:
        text = repr(sorted(self.config().items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_id(config_index: int, repeat: int, attempt: int = 0) -> str:
    """A readable, fixed-length run id: c<config>r<repeat>a<attempt> plus padding."""
    return f"c{config_index}r{repeat}a{attempt}" + "0" * 26


def summary(config: FixtureConfig, repeat: int) -> dict[str, Any]:
    """A completed run's summary, consistent with its samples/s, in the trainer's keys."""
    rate = config.rates[repeat]
    assert rate is not None
    step_s = config.global_batch_size / rate
    real = config.data == "real"
    accuracy = config.accuracies[repeat] if config.accuracies else None
    reached = config.times_to_target[repeat] if config.times_to_target else None
    sets = config.core_sets() or [MACHINE["usable_cores"]] * config.workers
    workers = [
        {
            "rank": w,
            "cores": sets[w % len(sets)],
            "torch_threads": config.threads_resolved,
            "hostname": MACHINE["hostname"],
            "peak_rss_bytes": 300 * 2**20 + 2**20 * w,
        }
        for w in range(config.workers)
    ]
    train_time_s = STEPS * step_s
    figures: dict[str, Any] = {
        "samples_per_s": rate,
        "samples_per_s_per_worker": rate / config.workers,
        "step_time_s_median": step_s,
        "step_time_s_p90": step_s * (1 + config.step_iqr_fraction),
        "step_time_s_iqr": step_s * config.step_iqr_fraction,
        "num_steps": STEPS,
        "num_timed_steps": STEPS - 1,
        "warmup_steps_excluded": 1,
        "num_samples": STEPS * config.global_batch_size,
        "train_time_s": train_time_s,
        "supervised_time_s": train_time_s,
        "target_accuracy": 0.97,
        # Synthetic runs never carry accuracy in real life; these do, so the report must
        # still refuse to show it.
        "test_accuracy": accuracy if real else 0.5,
        "time_to_target_s": reached if real else 12.0,
        "accuracy_curve": (
            [[10 * step_s, 0.9], [50 * step_s, 0.96], [100 * step_s, accuracy]]
            if accuracy is not None
            else [[1.0, 0.3]]
        ),
        "peak_memory_bytes_per_worker": [w["peak_rss_bytes"] for w in workers],
        "workers": workers,
        "flops_per_sample": None,
        "breakdown_s": config.breakdown_s,
        "breakdown_sampled_steps": 4 if config.breakdown_s is not None else 0,
        "data_source": "fixture: made-up figures",
        **machine_figures(
            cpu_model=MACHINE["cpu_model"],
            workers=workers,
            samples_per_s=rate,
            flops_per_sample=None,
            interval_s=train_time_s,
        ),
    }
    return trainer_summary(figures)


def build_store(
    path: Path,
    configs: list[FixtureConfig],
    *,
    sweep_id: str | None = "5eed0000aaaabbbbccccddddeeeeffff",
    name: str = "fixture-sweep",
) -> Path:
    """A store holding `configs`' runs, as one sweep (or loose runs with sweep_id=None)."""
    with RunStore(path) as store:
        plan = [
            {
                "item": index,
                "label": config.label,
                "config_hash": config.key(),
                "repeat": repeat,
                "workload": config.workload,
            }
            for repeat in range(max(len(c.rates) for c in configs))
            for index, config in enumerate(configs)
            if repeat < len(config.rates)
        ]
        if sweep_id is not None:
            store.create_sweep(sweep_id, name, "tests", "spechash", {"name": name}, plan)
        for index, config in enumerate(configs):
            for repeat, rate in enumerate(config.rates):
                rid = run_id(index, repeat)
                store.create_run(
                    rid,
                    config.workload,
                    config.config(),
                    MACHINE,
                    data_kind=config.data,
                    world_size=config.workers,
                    threads_per_worker=config.threads_resolved,
                    affinity=config.affinity,
                    precision=config.config()["precision"],
                    global_batch_size=config.global_batch_size,
                    config_hash=config.key(),
                    sweep_id=sweep_id,
                    sweep_item=index if sweep_id else None,
                    repeat_index=repeat if sweep_id else None,
                )
                if rate is None:
                    store.fail_run(rid, "RuntimeError: worker 1 exited with code 1")
                else:
                    store.complete_run(rid, summary(config, repeat), [], [0.1] * 4)
    return path


def cpu_parallel_configs() -> list[FixtureConfig]:
    """The cpu-parallel study on 4 cores; see the module docstring."""
    return [
        FixtureConfig(
            "cnn serial 1 core",
            "mnist-cnn",
            1,
            1,
            "compact",
            [100.0, 102.0, 98.0],
            accuracies=[0.975, 0.98, 0.97],
            times_to_target=[30.0, 32.0, None],
        ),
        FixtureConfig(
            "cnn 1 process x 4 threads",
            "mnist-cnn",
            1,
            4,
            "compact",
            [250.0, 260.0, 255.0],
            accuracies=[0.975, 0.976, 0.977],
            times_to_target=[14.0, 13.0, 15.0],
        ),
        FixtureConfig(
            "cnn 4 pinned workers x 1 thread",
            "mnist-cnn",
            4,
            1,
            "compact",
            [300.0, 310.0, None],
            accuracies=[0.974, 0.975],
            times_to_target=[11.0, 12.0],
            breakdown_s={
                "data": 0.01,
                "forward": 0.05,
                "backward": 0.09,
                "optimizer": 0.02,
                "exposed_comm": 0.03,
            },
        ),
        FixtureConfig(
            "cnn naive DDP: 4 unpinned workers, torch-default threads",
            "mnist-cnn",
            4,
            None,
            "none",
            [60.0, 90.0, 120.0],
            accuracies=[0.97, 0.971, 0.972],
            times_to_target=[None, None, None],
            step_iqr_fraction=0.3,
        ),
        FixtureConfig(
            "text affinity set 1 core(s)",
            "tweets-text",
            1,
            1,
            "0",
            [400.0, 410.0],
            data="synthetic",
        ),
        FixtureConfig(
            "text affinity set 2 core(s)",
            "tweets-text",
            1,
            2,
            "0,1",
            [700.0, 720.0],
            data="synthetic",
        ),
    ]


def scaling_configs(serial_fraction: float = 0.1) -> list[FixtureConfig]:
    """1, 2 and 4 pinned workers whose speedups follow Amdahl's law exactly."""
    configs = []
    for workers in (1, 2, 4):
        speedup = 1 / (serial_fraction + (1 - serial_fraction) / workers)
        configs.append(
            FixtureConfig(
                f"workers={workers}",
                "cifar10-resnet44",
                workers,
                1,
                "compact",
                [100.0 * speedup] * 2,
                data="synthetic",
                global_batch_size=32 * workers,
            )
        )
    return configs
