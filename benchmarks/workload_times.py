"""Per-workload training throughput, serial vs data-parallel on this machine's CPU cores.

    python benchmarks/workload_times.py --repeats 2 --steps 30

For every registered workload: one process using all usable cores as intra-op threads
(the "serial" baseline), and one pinned worker per core with one thread each (data
parallel, DDP over gloo), at the workload's default global batch, on synthetic data of the
real shapes (throughput only: accuracy comes from the real-data runs in docs/workloads.md).
The settings alternate within each repeat, so a change in machine load hits both. The
epoch time is the training-set size divided by the measured throughput (the timed steps
exclude warm-up and evaluation, as every trainscale figure does). For the deep belief
network, only the supervised phase is timed here (`-o pretrain_epochs=0`).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402

# Training-set sizes of the real datasets (the synthetic data has the same shapes).
TRAIN_SIZES = {
    "mnist-cnn": 60_000,
    "mnist-dbn": 60_000,
    "cifar10-resnet44": 50_000,
    "imdb-bilstm": 25_000,
    "imdb-bigru": 25_000,
    "tweets-text": 30_000,  # about 80% of the 38k-tweet example file
}
EXTRA = {"mnist-dbn": ["-o", "pretrain_epochs=0"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--workloads", default=",".join(TRAIN_SIZES))
    parser.add_argument("--out", default="benchmarks/results/workload_times.json")
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    store = Path(tempfile.mkdtemp()) / "workload_times.db"
    settings = {
        f"1 process x {cores} threads": ["--workers", "1", "--threads-per-worker", str(cores)],
        f"{cores} pinned workers x 1 thread": [
            *("--workers", str(cores), "--threads-per-worker", "1", "--affinity", "compact")
        ],
    }
    results: dict[str, dict[str, list[float]]] = {}
    for workload in args.workloads.split(","):
        common = [workload, "--data", "synthetic", "--no-eval", "--quiet"]
        common += ["--steps", str(args.steps), *EXTRA.get(workload, [])]
        per_setting: dict[str, list[float]] = {name: [] for name in settings}
        for repeat in range(args.repeats):
            names = list(settings) if repeat % 2 == 0 else list(reversed(settings))
            for name in names:
                result = trainscale_run([*common, *settings[name]], store)
                per_setting[name].append(result["samples_per_s"])
                print(f"{workload} | {name} | {result['samples_per_s']:.1f} samples/s", flush=True)
        results[workload] = per_setting

    serial_name, parallel_name = list(settings)
    print(f"\nworkload | epoch s, {serial_name} | epoch s, {parallel_name} | speedup")
    summary = {}
    for workload, per_setting in results.items():
        size = TRAIN_SIZES[workload]
        serial = statistics.median(per_setting[serial_name])
        parallel = statistics.median(per_setting[parallel_name])
        ratios = [
            p / s for p, s in zip(per_setting[parallel_name], per_setting[serial_name], strict=True)
        ]
        summary[workload] = {
            "epoch_s_serial": size / serial,
            "epoch_s_parallel": size / parallel,
            "speedup": ratios,
        }
        print(f"{workload} | {size / serial:.0f} | {size / parallel:.0f} | {spread(ratios)}")
    write_json(
        Path(args.out),
        {
            "command": " ".join(sys.argv),
            "cores": cores,
            "steps": args.steps,
            "samples_per_s": results,
            "summary": summary,
        },
    )


if __name__ == "__main__":
    main()
