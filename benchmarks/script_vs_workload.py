"""The MNIST CNN as a user's script against the same network as the built-in workload:
samples/s script / workload with its 95% interval over paired rounds, and the script's data
wait that accounts for the difference.

    python benchmarks/script_vs_workload.py --rounds 10 --steps 60

Two sides, the same workers, threads per worker and affinity (1 x 2 pinned compact by
default: the whole of a 2-core machine), batch 64 a worker, fp32, synthetic data, the first
`--warmup` steps untimed, both through the Python API (`trainscale.run`):

- workload: `trainscale run mnist-cnn --data synthetic --steps N --no-eval --batch-size 64
  --precision fp32`: batches sliced from in-memory tensors (`index_select`), channels_last,
  Adam with its one-cycle schedule (the recipe's);
- script: `trainscale run examples/mnist_script.py --data synthetic -- --max-steps N
  --batch-size 64 --train-samples 64*N*workers`: the same network after pytorch/examples,
  in NCHW, Adadelta, its batches from a `DataLoader` over a `TensorDataset`
  (`num_workers=0`: each batch collated from 64 single samples in the training process,
  between steps). One epoch covers the N steps, so the script's one evaluation comes after
  the last step, off the clock.

Both sides are timed by trainscale's rule (median step, slowest rank, warm-up untimed):
the workload by its loop, the script by the meter. The script's step includes its data wait
(the DataLoader's time between two steps), which the stored `data_wait_share` and
`data_wait_s_median` give. `script less its wait / workload` sets the global batch over
(the script's median step - its median wait) against the workload: near 1 where the data
wait is the whole difference; what remains beside it is the model's layout and optimizer.

Each round runs both sides, the order alternating from round to round; ratios are taken
within a round, the median over rounds with a 95% bootstrap interval (metrics/paired.py;
busy rounds left out while quiet ones remain). Writes every run's figures, the ratios and
the machine to `--json` (benchmarks/results/script_vs_workload.json).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_facts, rotated_rounds, write_json  # noqa: E402

import trainscale  # noqa: E402
from trainscale.metrics.paired import PairedRatio, paired_ratio  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mnist_script.py"
SIDES = ("workload", "script")
BATCH = 64
KEPT = ("samples_per_s", "step_time_s_median", "data_wait_share", "data_wait_s_median")


def one_run(side: str, args: argparse.Namespace, store: Path) -> dict[str, Any]:
    """One side once; the stored run's figures."""
    settings: dict[str, Any] = {
        "data": "synthetic",
        "workers": args.workers,
        "threads_per_worker": args.threads_per_worker,
        "affinity": args.affinity,
        "warmup_steps_untimed": args.warmup,
        "tag": f"script-vs-workload-{side}",
        "store": store,
    }
    if side == "workload":
        stored = trainscale.run(
            "mnist-cnn",
            steps=args.steps,
            evaluate=False,
            batch_size=BATCH,
            precision="fp32",
            **settings,
        )
    else:
        samples = BATCH * args.steps * args.workers  # one epoch is the N steps of every worker
        script_args = ["--max-steps", str(args.steps), "--batch-size", str(BATCH)]
        script_args += ["--train-samples", str(samples), "--test-samples", "256"]
        stored = trainscale.run(script=EXAMPLE, script_args=script_args, **settings)
    row = {key: stored.record.get(key) for key in KEPT}
    row.update(busy=stored.busy, run_id=stored.run_id, global_batch_size=stored.global_batch_size)
    return row


def less_wait(row: dict[str, Any]) -> float:
    """The script's samples/s were its median step without its median data wait."""
    step = row["step_time_s_median"] - row["data_wait_s_median"]
    return row["global_batch_size"] / step


def summarise(rounds: list[dict[str, Any]]) -> dict[str, PairedRatio]:
    """script / workload, and script less its wait / workload, over the rounds."""
    busy = [{side: r[side]["busy"] for side in SIDES} for r in rounds]
    plain = [{side: r[side]["samples_per_s"] for side in SIDES} for r in rounds]
    waitless = [
        {"workload": r["workload"]["samples_per_s"], "script": less_wait(r["script"])}
        for r in rounds
    ]
    return {
        "script / workload": paired_ratio(plain, "workload", "script", busy=busy),
        "script less its wait / workload": paired_ratio(waitless, "workload", "script", busy=busy),
    }


def report(args: argparse.Namespace, rounds: list[dict[str, Any]], stopped: str | None) -> None:
    """Print the figures and write the JSON result (also after a stop)."""
    payload: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "machine": machine_facts(),
        "load_average_end": os.getloadavg(),
        "rounds": rounds,
        "stopped": stopped,
    }
    if rounds:
        ratios = summarise(rounds)
        shares = [r["script"]["data_wait_share"] for r in rounds]
        waits = [r["script"]["data_wait_s_median"] * 1000 for r in rounds]
        steps = {
            side: statistics.median(r[side]["step_time_s_median"] for r in rounds) * 1000
            for side in SIDES
        }
        payload.update(
            ratios={label: paired.to_dict() for label, paired in ratios.items()},
            step_ms_median=steps,
            script_data_wait_share_median=statistics.median(shares),
            script_data_wait_ms_median=statistics.median(waits),
        )
        print(f"median step: workload {steps['workload']:.1f} ms, script {steps['script']:.1f} ms")
        print(
            f"script data wait: {statistics.median(shares):.1%} of the step "
            f"[{min(shares):.1%}, {max(shares):.1%}], median {statistics.median(waits):.2f} ms"
        )
        for label, paired in ratios.items():
            print(
                f"samples/s {label}: {paired.text('.3f', '')} (95% interval, "
                f"{paired.rounds_note}): {paired.verdict}"
            )
    write_json(Path(args.json), payload)
    print(f"wrote {args.json}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="paired rounds (default 10)")
    parser.add_argument("--steps", type=int, default=60, help="steps a run (default 60)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed first steps (5)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--threads-per-worker", type=int, default=2)
    parser.add_argument("--affinity", default="compact")
    parser.add_argument(
        "--json", default="benchmarks/results/script_vs_workload.json", metavar="OUT"
    )
    args = parser.parse_args()
    if args.rounds < 1 or args.steps <= args.warmup:
        parser.error("need --rounds >= 1 and --steps > --warmup")
    store = Path(tempfile.mkdtemp(prefix="script_vs_workload_")) / "runs.db"

    def describe(row: dict[str, Any]) -> str:
        script, workload = row["script"], row["workload"]
        busy = " (busy)" if script["busy"] or workload["busy"] else ""
        return (
            f"workload {workload['samples_per_s']:.0f}/s, script {script['samples_per_s']:.0f}/s "
            f"(data wait {script['data_wait_share']:.1%}), script / workload "
            f"{script['samples_per_s'] / workload['samples_per_s']:.3f}{busy}"
        )

    stopped = rotated_rounds(
        "script_vs_workload",
        list(SIDES),
        args.rounds,
        lambda s: one_run(s, args, store),
        describe,
        lambda rounds, why: report(args, rounds, why),
    )
    return 1 if stopped else 0


if __name__ == "__main__":
    sys.exit(main())
