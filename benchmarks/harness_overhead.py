"""trainscale's serial step time vs a bare PyTorch loop (and, optionally, vs another trainscale
checkout), in interleaved rounds, as ratios with a 95% interval.

    python benchmarks/harness_overhead.py --rounds 15 --steps 60
    python benchmarks/harness_overhead.py --rounds 15 --steps 60 --baseline-src ../old/src
    python benchmarks/harness_overhead.py --rounds 10 --steps 300 --batch-size 1

Every side: mnist-cnn, batch 128 (`--batch-size`), 1 thread pinned to core 0, synthetic
in-memory data, channels_last, fp32, Adam, constant lr, the recipe's loss (label smoothing); median
step time over the steps after 5 warm-up steps. A batch of one sample makes the step's cost
the dispatch of its operators, as on a launch-bound GPU step, so the harness's own per-step
work shows rather than hides behind the convolutions.
Each round runs every side once, in an order rotated from round to round (A B C, B C A,
C A B, ...), so drift in the machine's speed falls on every side alike; each ratio is taken
within a round, then summarised as the median over rounds with a 95% bootstrap interval.
`--baseline-src` names the `src` folder of another checkout (say, the code before a
restructure): it runs as a third side, and `trainscale / baseline` says whether the change
made the harness slower. Target: trainscale / bare <= 1.02.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import bare_step_time, trainscale_run, write_json  # noqa: E402

from trainscale.metrics.paired import paired_ratio  # noqa: E402

RUN_ARGS = [
    "mnist-cnn",
    "--data",
    "synthetic",
    "--no-eval",
    "--threads-per-worker",
    "1",
    "--affinity",
    "0",
    "--schedule",
    "constant",
    # The bare loop trains in fp32; `auto` would choose bf16 on a CPU that computes it.
    "--precision",
    "fp32",
    "--quiet",
]
RESAMPLES = 10_000
"""Bootstrap resamples of the interval over rounds."""


def trainscale_side(
    steps: int, batch: int, store: Path, src: str | None = None
) -> Callable[[], float]:
    env = None
    if src is not None:  # another checkout: its package first on the path
        env = {**os.environ, "PYTHONPATH": str(Path(src).resolve())}
    args = [*RUN_ARGS, "--steps", str(steps), "--batch-size", str(batch)]
    return lambda: trainscale_run(args, store, env=env)["step_time_s_median"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--baseline-src", metavar="DIR", help="another checkout's src folder")
    parser.add_argument("--out", default="benchmarks/results/harness_overhead.json")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp())
    sides: dict[str, Callable[[], float]] = {
        "bare": lambda: bare_step_time("bare_loop.py", args.steps, args.batch_size),
        "trainscale": trainscale_side(args.steps, args.batch_size, folder / "trainscale.db"),
    }
    if args.baseline_src:
        sides["baseline"] = trainscale_side(
            args.steps, args.batch_size, folder / "baseline.db", args.baseline_src
        )
    names = list(sides)
    rounds = []
    for index in range(args.rounds):
        order = names[index % len(names) :] + names[: index % len(names)]
        times = {name: sides[name]() for name in order}
        rounds.append({"order": order, "step_time_s": times})
        shown = ", ".join(f"{name} {times[name] * 1000:.1f} ms" for name in names)
        print(f"round {index + 1} ({' '.join(order)}): {shown}", flush=True)
    # Ratios within a round, median and 95% interval across rounds (metrics/paired.py).
    measured = [r["step_time_s"] for r in rounds]
    pairs = {"trainscale / bare": ("bare", "trainscale")}
    if args.baseline_src:
        pairs["trainscale / baseline"] = ("baseline", "trainscale")
    ratios, summary = {}, {}
    for label, (a, b) in pairs.items():
        paired = paired_ratio(measured, a, b, measure="step_time", num_resamples=RESAMPLES, seed=0)
        ratios[label] = list(paired.ratios)
        low, high = paired.ci if paired.ci is not None else (paired.median, paired.median)
        summary[label] = {"median": paired.median, "ci95": [low, high], "n": paired.num_rounds}
        print(
            f"{label}: {paired.median:.3f} [{low:.3f}, {high:.3f}] "
            f"(95% interval, n={paired.num_rounds})"
        )
    write_json(
        Path(args.out),
        {"command": " ".join(sys.argv), "rounds": rounds, "ratios": ratios, "summary": summary},
    )


if __name__ == "__main__":
    main()
