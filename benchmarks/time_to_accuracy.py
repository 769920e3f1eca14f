"""mnist-cnn on real MNIST with its default recipe: training-clock seconds to 99.0%.

    TRAINSCALE_DATA_DIR=/path/to/datasets python benchmarks/time_to_accuracy.py --seeds 0 1

Runs the default recipe in the bench's fastest CPU setting (all cores as pinned workers,
1 thread each, the recipe's batch of 64 per worker, so a global batch of 128 on 2 cores, as
`trainscale run mnist-cnn --workers 2` does by default), evaluating often enough to time the
crossing.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--eval-every", type=int, default=47, help="steps between evaluations")
    parser.add_argument(
        "--extra",
        nargs=argparse.REMAINDER,
        default=[],
        help="further `trainscale run` options, e.g. --epochs 3",
    )
    parser.add_argument("--out", default="benchmarks/results/time_to_accuracy.json")
    args = parser.parse_args()
    workers = str(len(os.sched_getaffinity(0)))
    store = Path(tempfile.mkdtemp()) / "bench.db"
    results = []
    for seed in args.seeds:
        result = trainscale_run(
            [
                "mnist-cnn",
                "--workers",
                workers,
                "--threads-per-worker",
                "1",
                "--global-batch-size",
                "128",
                "--eval-every",
                str(args.eval_every),
                "--seed",
                str(seed),
                "--quiet",
                *args.extra,
            ],
            store,
        )
        results.append(result)
        print(
            f"seed {seed}: time to 99.0% {result['time_to_target_s']} s, final accuracy "
            f"{result['test_accuracy']:.4f}, training clock {result['train_time_s']:.1f} s, "
            f"{result['samples_per_s']:.0f} samples/s",
            flush=True,
        )
    reached = [r["time_to_target_s"] for r in results if r["time_to_target_s"] is not None]
    print(
        f"reached 99.0% in {len(reached)}/{len(results)} runs; time to target: "
        f"{spread(reached) if reached else 'not reached'}; final accuracy: "
        f"{spread([r['test_accuracy'] for r in results])}"
    )
    write_json(Path(args.out), {"command": " ".join(sys.argv), "runs": results})


if __name__ == "__main__":
    main()
