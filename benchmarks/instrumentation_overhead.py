"""Cost of trainscale's step-time breakdown: sampled phase timing on vs off, as a ratio.

    python benchmarks/instrumentation_overhead.py --repeats 5 --steps 80
    python benchmarks/instrumentation_overhead.py --device cuda --workload cifar10-resnet44 \
        --batch-size 512 --precision bf16

Both sides train the same workload on synthetic data with the same settings; one records the
breakdown every `--every` steps (the default, 25), the other never (`--breakdown-every 0`).
The order alternates between repeats so drift in machine load hits both. Target: the median
step-time ratio (on / off) <= 1.02.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=80)
    parser.add_argument("--every", type=int, default=25)
    parser.add_argument("--workload", default="mnist-cnn")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--precision", default="fp32")
    parser.add_argument("--out", default="benchmarks/results/instrumentation_overhead.json")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp()) / "bench.db"
    common = [
        args.workload,
        "--data",
        "synthetic",
        "--no-eval",
        "--quiet",
        "--device",
        args.device,
        "--workers",
        str(args.workers),
        "--batch-size",
        str(args.batch_size),
        "--precision",
        args.precision,
        "--steps",
        str(args.steps),
    ]
    if args.device == "cpu":
        common += ["--threads-per-worker", "1"]
    ratios, pairs = [], []
    for repeat in range(args.repeats):
        sides = ["on", "off"] if repeat % 2 == 0 else ["off", "on"]
        got = {}
        for side in sides:
            every = str(args.every) if side == "on" else "0"
            got[side] = trainscale_run([*common, "--breakdown-every", every], store)
        on, off = got["on"]["step_time_s_median"], got["off"]["step_time_s_median"]
        ratios.append(on / off)
        pairs.append({"on_s": on, "off_s": off, "breakdown_s": got["on"]["breakdown_s"]})
        print(
            f"repeat {repeat + 1}: breakdown on {on * 1000:.2f} ms, off {off * 1000:.2f} ms, "
            f"ratio {on / off:.3f}",
            flush=True,
        )
    print(f"step time with breakdown / without: {spread(ratios)}")
    write_json(Path(args.out), {"command": " ".join(sys.argv), "pairs": pairs, "ratios": ratios})


if __name__ == "__main__":
    main()
