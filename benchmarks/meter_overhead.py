"""The meter's cost: one training loop with and without `with meter.step()`, as the ratio of
samples/s with its 95% interval over paired rounds.

    python benchmarks/meter_overhead.py --rounds 20 --steps 300

What is compared. This file is also the script it measures (`--loop meter|bare`, which the
benchmark passes to `trainscale run`; not for use by hand): an MLP (784-1024-1024-10, batch
64, SGD with momentum) on in-memory synthetic tensors, a step of 5-10 ms on one core of a
recent x86 CPU (the result prints the step time measured). The meter costs the same couple
of microseconds whatever the step, so a short step is what shows it; a long one would hide
it.

- Both sides run the same way: `trainscale run THIS.py --data synthetic` with 1 worker x 1
  thread pinned compact, the same launcher, allocator settings and store, so the harness's
  own cost (harness_overhead.py's subject) falls on both alike.
- Both time themselves the same way: the script takes a `perf_counter` mark at every step
  boundary, after the step, so the span between two marks is the whole step (the batch's
  slicing, forward, backward, optimizer, and on the meter side the meter's entry and exit);
  the step time is the median span after the first `--warmup` steps, samples/s the batch
  over it. The meter's own bookkeeping plays no part in the figure being compared.
- The one difference: on the `meter` side every step runs inside `with
  meter.step(samples=...)`; on the `bare` side none does but the first, a warm-up step no
  side times (trainscale refuses a run that timed no step).

So meter / bare is the meter's cost alone. On the meter side the stored samples/s (the
meter's figure) is also set against the script's own figure for the same steps: they mark
the same boundaries a few microseconds apart and should agree to well within 1%.

Each round runs both sides, the order alternating from round to round; the ratio is taken
within a round, then summarised as the median over rounds with a 95% bootstrap interval
(metrics/paired.py; rounds where a run saw a busy machine are left out while quiet ones
remain). Target: meter / bare >= 0.98 (at most 2% overhead). The result gives the interval's
width after every round and the first round count at which the interval lay wholly on one
side of 0.98: the rounds it took to resolve the target (where none did, about how many would
at the scatter seen, the interval narrowing as one over their square root). Writes the
rounds, the figures and the machine to `--json` (benchmarks/results/meter_overhead.json).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_facts, rotated_rounds, write_json  # noqa: E402

import trainscale  # noqa: E402
from trainscale.metrics.paired import PairedRatio, paired_ratio  # noqa: E402

TARGET = 0.98
"""meter / bare samples/s at or above this: the meter costs at most 2%."""
SIDES = ("bare", "meter")
WIDTH = 1024
"""Hidden width of the measured MLP: with batch 64, a step of 5-10 ms on one core."""


def measured_loop(args: argparse.Namespace) -> None:
    """The measured script: train `--steps` steps, mark every step boundary, write the
    script's own step times and figures to `--timings`."""
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(784, WIDTH), nn.ReLU(), nn.Linear(WIDTH, WIDTH), nn.ReLU(), nn.Linear(WIDTH, 10)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x_all, y_all = torch.randn(4096, 784), torch.randint(0, 10, (4096,))
    batch = args.batch_size
    meter = trainscale.meter()

    def train_step(x: torch.Tensor, y: torch.Tensor) -> None:
        optimizer.zero_grad(set_to_none=True)
        nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    marks = [time.perf_counter()]
    for step in range(args.steps):
        start = step * batch % (len(x_all) - batch + 1)
        x, y = x_all[start : start + batch], y_all[start : start + batch]
        if args.loop == "meter" or step == 0:
            with meter.step(samples=len(x)):
                train_step(x, y)
        else:
            train_step(x, y)
        marks.append(time.perf_counter())
    spans = [b - a for a, b in zip(marks, marks[1:], strict=False)]
    median = statistics.median(spans[args.warmup :] or spans)
    figures = {"step_time_s_median": median, "samples_per_s": batch / median, "spans_s": spans}
    Path(args.timings).write_text(json.dumps(figures))


def one_run(side: str, args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """One side once, through the Python API: the script's own figures and the stored run's."""
    timings = folder / f"{side}.json"
    script_args = [
        *("--loop", side, "--steps", str(args.steps), "--warmup", str(args.warmup)),
        *("--batch-size", str(args.batch_size), "--timings", str(timings)),
    ]
    stored = trainscale.run(
        script=__file__,
        script_args=script_args,
        data="synthetic",
        workers=1,
        threads_per_worker=1,
        affinity="compact",
        warmup_steps_untimed=args.warmup,
        tag="meter-overhead",
        store=folder / "runs.db",
    )
    own = json.loads(timings.read_text())
    row = {
        "samples_per_s": own["samples_per_s"],
        "step_time_s_median": own["step_time_s_median"],
        "busy": stored.busy,
        "run_id": stored.run_id,
    }
    if side == "meter":  # the meter's own figure for the same steps
        row["meter_samples_per_s"] = stored.samples_per_s
    return row


def resolution(rounds: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int | None]:
    """The interval after each round count, and the round count from which the verdict of
    all the rounds (met, or missed) held at every count after it; None where all the rounds
    do not resolve it. An early interval that lies on one side by chance and is undone by
    later rounds resolves nothing."""
    steps: list[dict[str, Any]] = []
    sides: list[str | None] = []
    for count in range(2, len(rounds) + 1):
        paired = summarise(rounds[:count])
        if paired.ci is None:
            continue
        low, high = paired.ci
        steps.append({"rounds": count, "median": paired.median, "ci95": [low, high]})
        side = "met" if low >= TARGET else "missed" if high < TARGET else None
        sides.append(side if paired.trusted else None)
    if not sides or sides[-1] is None:
        return steps, None
    first = len(sides) - 1
    while first > 0 and sides[first - 1] == sides[-1]:
        first -= 1
    return steps, steps[first]["rounds"]


def summarise(rounds: list[dict[str, Any]]) -> PairedRatio:
    """meter / bare samples/s over `rounds` (busy rounds left out while quiet ones remain)."""
    values = [{side: r[side]["samples_per_s"] for side in SIDES} for r in rounds]
    busy = [{side: r[side]["busy"] for side in SIDES} for r in rounds]
    return paired_ratio(values, "bare", "meter", measure="throughput", busy=busy, seed=0)


def report(args: argparse.Namespace, rounds: list[dict[str, Any]], stopped: str | None) -> None:
    """Print the figures and write the JSON result (also after a stop: nothing measured is lost)."""
    payload: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "machine": machine_facts(),
        "load_average_end": os.getloadavg(),
        "rounds": rounds,
        "stopped": stopped,
    }
    if len(rounds) >= 1:
        paired = summarise(rounds)
        steps, resolved = resolution(rounds)
        bare_ms = statistics.median(r["bare"]["step_time_s_median"] for r in rounds) * 1000
        agreement = [
            r["meter"]["meter_samples_per_s"] / r["meter"]["samples_per_s"] for r in rounds
        ]
        width = None if paired.ci is None else paired.ci[1] - paired.ci[0]
        payload.update(
            bare_step_ms_median=bare_ms,
            meter_over_bare=paired.to_dict(),
            interval_width=width,
            interval_by_rounds=steps,
            resolved_at_round=resolved,
            rounds_to_resolve_estimate=None if resolved else rounds_needed(paired),
            meter_figure_over_script_figure=agreement,
        )
        print(f"step time (bare, script's own timing): {bare_ms:.2f} ms, batch {args.batch_size}")
        print(
            f"samples/s meter / bare: {paired.text('.4f', '')} (95% interval, "
            f"{paired.rounds_note}); target >= {TARGET}: {verdict(paired)}"
        )
        if width is not None:
            said = f"after {resolved} rounds" if resolved else f"not within {len(rounds)} rounds"
            needed = None if resolved else rounds_needed(paired)
            if needed:
                said += f" (at this scatter, about {needed} rounds would)"
            print(f"interval width {width:.4f}; target resolved {said}")
        print(
            f"meter's stored samples/s / the script's own (meter side): "
            f"{statistics.median(agreement):.4f} [{min(agreement):.4f}, {max(agreement):.4f}]"
        )
    write_json(Path(args.json), payload)
    print(f"wrote {args.json}")


def rounds_needed(paired: PairedRatio) -> int | None:
    """Rounds that would resolve the target at the scatter seen: the interval narrows as one
    over the square root of the rounds, and must shrink to the median's distance from it."""
    if paired.ci is None or paired.median is None or paired.median == TARGET:
        return None
    half = (paired.ci[1] - paired.ci[0]) / 2
    return math.ceil(paired.num_rounds * (half / abs(paired.median - TARGET)) ** 2)


def verdict(paired: PairedRatio) -> str:
    """Whether the interval shows the target met or missed, or cannot tell yet."""
    if not paired.trusted:
        return "not trusted: busy machine"
    if paired.ci is None:
        return "no interval"
    low, high = paired.ci
    return "met" if low >= TARGET else "missed" if high < TARGET else "not resolved yet"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="paired rounds (default 20)")
    parser.add_argument("--steps", type=int, default=300, help="steps a run (default 300)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed first steps (10)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--json", default="benchmarks/results/meter_overhead.json", metavar="OUT")
    parser.add_argument("--loop", choices=SIDES, help="(the measured script's side)")
    parser.add_argument("--timings", help="(where the measured script writes its figures)")
    args = parser.parse_args()
    if args.loop:  # this process is a worker of `trainscale run THIS.py`
        measured_loop(args)
        return 0
    if args.rounds < 1 or args.steps <= args.warmup:
        parser.error("need --rounds >= 1 and --steps > --warmup")
    folder = Path(tempfile.mkdtemp(prefix="meter_overhead_"))

    def describe(row: dict[str, Any]) -> str:
        bare, meter = row["bare"], row["meter"]
        busy = " (busy)" if bare["busy"] or meter["busy"] else ""
        return (
            f"bare {bare['step_time_s_median'] * 1000:.2f} ms, meter "
            f"{meter['step_time_s_median'] * 1000:.2f} ms, meter / bare "
            f"{meter['samples_per_s'] / bare['samples_per_s']:.4f}{busy}"
        )

    stopped = rotated_rounds(
        "meter_overhead",
        list(SIDES),
        args.rounds,
        lambda s: one_run(s, args, folder),
        describe,
        lambda rounds, why: report(args, rounds, why),
    )
    return 1 if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
