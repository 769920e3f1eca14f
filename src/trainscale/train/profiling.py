"""PyTorch's profiler over a run's first steps (`--profile DIR`): where a step's time goes.

The profiler starts before the first step, so its own start-up (on a GPU, CUPTI's) stays out
of the steps it records, and records the first `--profile-steps` steps, the evaluations
among them included. What it writes, per worker, into DIR:

- `rank{R}.trace.json.gz`: the Chrome trace of those steps, gzipped (host operators and, on
  a GPU, the kernels they launched), for ui.perfetto.dev or chrome://tracing;
- `rank{R}.ops.txt`: its operators by self time on the device that did the work (the GPU's
  kernels on CUDA, the host's otherwise), PyTorch's own table;
- `rank{R}.steps.txt`: each recorded step's host span, in milliseconds, so one-off costs in
  the first steps stand out against the steady ones.

Recording slows every operator it sees: a profiled run's times are the profiler's, and its
settings hash keeps it apart from unprofiled runs (the `profile` option is a setting).
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity

from trainscale.config.options import MeasurementOptions

TOP_OPERATORS = 30
"""Rows of the operator table."""

EVALUATION_MARK = "trainscale: evaluation"
"""The name an evaluation's span carries in the trace."""


def profile_files(directory: str | Path, rank: int) -> dict[str, Path]:
    """The files rank `rank` writes into `directory`: trace, ops and steps."""
    folder = Path(directory)
    suffixes = {"trace": "json.gz", "ops": "txt", "steps": "txt"}
    return {kind: folder / f"rank{rank}.{kind}.{suffix}" for kind, suffix in suffixes.items()}


@contextmanager
def step_profiler(
    measurement: MeasurementOptions, device: torch.device, rank: int
) -> Iterator[Callable[[], None]]:
    """A block in which the loop calls the yielded function after every step: under
    `--profile` it records the first `profile_steps` steps and writes this worker's files
    when they end (or when the block does, after fewer steps); otherwise it does nothing."""
    if measurement.profile is None:
        yield lambda: None
        return
    files = profile_files(measurement.profile, rank)
    files["trace"].parent.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU]
    if device.type == "cuda":
        activities.append(ProfilerActivity.CUDA)
    sort_by = "self_device_time_total" if device.type == "cuda" else "self_cpu_time_total"

    def write(profiler: torch.profiler.profile) -> None:
        profiler.export_chrome_trace(str(files["trace"]))
        table = profiler.key_averages().table(sort_by=sort_by, row_limit=TOP_OPERATORS)
        files["ops"].write_text(table + "\n")
        # A run that ends inside the window leaves a last span after its last step: no step.
        files["steps"].write_text(step_lines(profiler.events(), taken[0]))

    taken = [0]

    def step() -> None:
        if taken[0] < measurement.profile_steps:  # past the window nothing is recorded
            taken[0] += 1
            profiler.step()

    # The first steps are the point (their one-off costs): no warm-up steps are skipped,
    # which the profiler warns against for steady-state figures.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*warmup.*")
        schedule = torch.profiler.schedule(
            wait=0, warmup=0, active=measurement.profile_steps, repeat=1
        )
        profiler = torch.profiler.profile(
            activities=activities, schedule=schedule, on_trace_ready=write
        )
    with profiler:
        yield step


def step_lines(events: list, steps_taken: int | None = None) -> str:
    """A line per profiled step among profiler events, in order: its host time in
    milliseconds (the step's operators and launches and the loop's work after it) and, where
    one ran inside it, the evaluation's share (host spans only: on a GPU the profiler also
    lists each annotation as the device saw it). The trace names the steps `ProfilerStep#N`,
    0-based (the run's step N + 1); its event list, `ProfilerStep*`. With `steps_taken`,
    only that many (the spans after them are no steps)."""
    steps: list[tuple[float, float]] = []
    evaluations: list[tuple[float, float]] = []
    for event in events:
        if event.device_type != DeviceType.CPU:  # a GPU's copy of an annotation
            continue
        span = (event.time_range.start, event.time_range.end)
        if event.name.startswith("ProfilerStep"):
            steps.append(span)
        elif event.name == EVALUATION_MARK:
            evaluations.append(span)
    lines = []
    for step, (begin, end) in enumerate(sorted(steps)[:steps_taken]):
        line = f"ProfilerStep#{step} (step {step + 1}): {(end - begin) / 1e3:.3f} ms"
        inside = sum(e - b for b, e in evaluations if begin <= b and e <= end)
        if inside:
            line += f", of which evaluation {inside / 1e3:.3f} ms"
        lines.append(line + "\n")
    return "".join(lines)
