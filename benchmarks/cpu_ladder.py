"""CPU settings of mnist-cnn side by side, interleaved over repeats, as speedups.

    python benchmarks/cpu_ladder.py --repeats 3 --steps 60 --bf16-steps 20

Every setting trains the same global batch (128) on synthetic in-memory data (throughput
only). Each repeat runs every setting once, in a rotated order; speedups are taken within
a repeat against that repeat's serial 1-core fp32 run, then summarised over repeats.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402

COMMON = ["mnist-cnn", "--data", "synthetic", "--no-eval", "--global-batch-size", "128", "--quiet"]


def settings(num_cores: int) -> dict[str, list[str]]:
    n = str(num_cores)
    return {
        "serial 1 core fp32": ["--workers", "1", "--threads-per-worker", "1"],
        f"1 process x {n} threads fp32": ["--workers", "1", "--threads-per-worker", n],
        f"{n} pinned workers x 1 thread fp32": [
            "--workers",
            n,
            "--threads-per-worker",
            "1",
            "--affinity",
            "compact",
        ],
        "serial 1 core bf16": [
            "--workers",
            "1",
            "--threads-per-worker",
            "1",
            "--precision",
            "bf16",
        ],
        f"{n} pinned workers x 1 thread bf16": [
            "--workers",
            n,
            "--threads-per-worker",
            "1",
            "--affinity",
            "compact",
            "--precision",
            "bf16",
        ],
        f"naive: {n} unpinned workers, torch-default threads": [
            "--workers",
            n,
            "--threads-per-worker",
            "torch-default",
            "--affinity",
            "none",
            "--allow-oversubscribe",
        ],
    }


def main() -> None:
    import os

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument(
        "--bf16-steps",
        type=int,
        default=20,
        help="bf16 is emulated (slow) on CPUs without native bf16",
    )
    parser.add_argument("--out", default="benchmarks/results/cpu_ladder.json")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    grid = settings(cores)
    store = Path(tempfile.mkdtemp()) / "bench.db"
    names = list(grid)
    samples: dict[str, list[float]] = {name: [] for name in names}
    speedups: dict[str, list[float]] = {name: [] for name in names}
    for repeat in range(args.repeats):
        order = names[repeat % len(names) :] + names[: repeat % len(names)]
        rep: dict[str, float] = {}
        for name in order:
            steps = args.bf16_steps if "bf16" in name else args.steps
            result = trainscale_run([*COMMON, "--steps", str(steps), *grid[name]], store)
            rep[name] = result["samples_per_s"]
            samples[name].append(rep[name])
            print(f"repeat {repeat + 1}: {name}: {rep[name]:.1f} samples/s", flush=True)
        for name in names:
            speedups[name].append(rep[name] / rep["serial 1 core fp32"])
    print("\nsetting | samples/s | speedup vs serial 1 core fp32")
    for name in names:
        print(f"{name} | {spread(samples[name])} | {spread(speedups[name])}")
    pinned, naive = names[2], names[5]
    vs_naive = [p / q for p, q in zip(samples[pinned], samples[naive], strict=True)]
    print(f"\n{pinned} vs naive: {spread(vs_naive)}")
    write_json(
        Path(args.out),
        {
            "command": " ".join(sys.argv),
            "cores": cores,
            "samples_per_s": samples,
            "speedup_vs_serial": speedups,
            "pinned_vs_naive": vs_naive,
        },
    )


if __name__ == "__main__":
    main()
