"""trainscale's serial step time vs a bare PyTorch loop, interleaved, as a ratio.

    python benchmarks/harness_overhead.py --repeats 5 --steps 60

Both sides: mnist-cnn, batch 128, 1 thread pinned to core 0, synthetic in-memory data,
channels_last, Adam; median step time over the steps after 5 warm-up steps. Target <= 1.02x.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402


def bare(steps: int) -> float:
    script = Path(__file__).resolve().parent / "bare_loop.py"
    out = subprocess.run(
        [sys.executable, str(script), "--steps", str(steps)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out)["step_time_s_median"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--out", default="benchmarks/results/harness_overhead.json")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp()) / "bench.db"
    run_args = [
        "mnist-cnn",
        "--data",
        "synthetic",
        "--no-eval",
        "--steps",
        str(args.steps),
        "--threads-per-worker",
        "1",
        "--affinity",
        "0",
        "--batch-size",
        "128",
        "--schedule",
        "constant",
        "--quiet",
    ]
    ratios, pairs = [], []
    for repeat in range(args.repeats):
        # Alternate which side goes first so drift in machine load hits both equally.
        if repeat % 2 == 0:
            b = bare(args.steps)
            t = trainscale_run(run_args, store)["step_time_s_median"]
        else:
            t = trainscale_run(run_args, store)["step_time_s_median"]
            b = bare(args.steps)
        pairs.append({"bare_s": b, "trainscale_s": t})
        ratios.append(t / b)
        print(
            f"repeat {repeat + 1}: bare {b * 1000:.1f} ms, trainscale {t * 1000:.1f} ms, "
            f"ratio {t / b:.3f}",
            flush=True,
        )
    print(f"trainscale / bare step time: {spread(ratios)}")
    write_json(Path(args.out), {"command": " ".join(sys.argv), "pairs": pairs, "ratios": ratios})


if __name__ == "__main__":
    main()
