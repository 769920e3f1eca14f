"""An input-bound script under `trainscale run`: its data wait with `num_workers=0`, and the
speedup the advice it is given (more DataLoader workers) brings, with its 95% interval over
paired rounds.

    python benchmarks/input_bound.py --rounds 10 --steps 100

The script is examples/augmenting_script.py: a small CNN whose `DataLoader` augments every
sample on the CPU in `__getitem__` (crop, flip, rotation, jitter, noise), a batch of it costing
most of a training step. Every run: 1 worker with 1 intra-op thread, batch 64, synthetic
data, one epoch of `--steps` steps, the first `--warmup` untimed, through the Python API.
Three sides:

- `num_workers=0`: the augmentation runs in the training process between steps, where the
  meter counts it as data wait (well over the 10% at which trainscale calls a script
  input-bound);
- `num_workers=K` (`--num-workers`, 1 by default): K loader processes augment the next
  batches while the model trains. Both of these sides are pinned to the same set of 1 + K
  cores (`--affinity 0,1` on a 2-core machine) with one training thread: a loader process
  inherits its worker's core set (the affinity mask passes to child processes) and takes
  the cores the training thread leaves. With as many threads as cores (2 on 2 cores, the
  default plan) the loader would compete with the training threads; on 2 cores, K = 1
  keeps one busy thread per core;
- `num_workers=K, one core` (unless `--no-one-core`): the same, with trainscale's plan for
  1 x 1 thread (pinned compact: one core). The loader inherits that single core and shares
  it with the training thread: the advice alone does not help unless the loader has a core.

Before the rounds one `trainscale run` on the command line (`num_workers=0`) checks that
the result it prints has the input-bound line. Each round runs every side once, the order
rotated from round to round; speedups (samples/s against `num_workers=0`) are taken within
a round, the median over rounds with a 95% bootstrap interval (metrics/paired.py; busy
rounds left out while quiet ones remain). Writes the check, every run's figures, the
speedups and the machine to `--json` (benchmarks/results/input_bound.json).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_facts, rotated_rounds, write_json  # noqa: E402

import trainscale  # noqa: E402
from trainscale.errors import TrainscaleError  # noqa: E402
from trainscale.metrics.paired import paired_ratio  # noqa: E402

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "augmenting_script.py"
BATCH = 64
KEPT = ("samples_per_s", "step_time_s_median", "data_wait_share", "data_wait_s_median")


def sides(args: argparse.Namespace) -> dict[str, tuple[int, str]]:
    """Each side's (num_workers, affinity); the shared core set is the first 1 + K usable."""
    k = args.num_workers
    cores = sorted(os.sched_getaffinity(0))[: 1 + k]
    shared = ",".join(str(core) for core in cores)
    chosen = {"num_workers=0": (0, shared), f"num_workers={k}": (k, shared)}
    if args.one_core:
        chosen[f"num_workers={k}, one core"] = (k, "compact")
    return chosen


def script_args(args: argparse.Namespace, num_workers: int) -> list[str]:
    return [
        *("--max-steps", str(args.steps), "--num-workers", str(num_workers)),
        *("--batch-size", str(BATCH), "--train-samples", str(BATCH * args.steps)),
        *("--test-samples", "256"),
    ]


def one_run(
    num_workers: int, affinity: str, args: argparse.Namespace, store: Path
) -> dict[str, Any]:
    """One side once through the Python API; the stored run's figures."""
    stored = trainscale.run(
        script=SCRIPT,
        script_args=script_args(args, num_workers),
        data="synthetic",
        workers=1,
        threads_per_worker=1,
        affinity=affinity,
        warmup_steps_untimed=args.warmup,
        tag=f"input-bound-{num_workers}",
        store=store,
    )
    row = {key: stored.record.get(key) for key in KEPT}
    row.update(busy=stored.busy, run_id=stored.run_id)
    return row


def check_line(args: argparse.Namespace, store: Path, affinity: str) -> dict[str, Any]:
    """`trainscale run` on the command line with num_workers=0: its data-wait line."""
    cmd = [sys.executable, "-m", "trainscale", "run", str(SCRIPT), "--data", "synthetic"]
    cmd += ["--threads-per-worker", "1", "--affinity", affinity, "--store", str(store)]
    cmd += ["--warmup-steps", str(args.warmup), "--", *script_args(args, 0)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    said = [line.strip() for line in proc.stdout.splitlines() if "data wait:" in line]
    line = said[0] if said else None
    printed = proc.returncode == 0 and line is not None and "input-bound" in line
    if not printed:
        last = (proc.stderr.strip().splitlines() or [""])[-1]
        print(
            f"input_bound: trainscale run printed no input-bound line for num_workers=0 "
            f"(exit {proc.returncode}): {line or last}",
            file=sys.stderr,
        )
    return {"command": " ".join(cmd), "exit": proc.returncode, "line": line, "printed": printed}


def report(
    args: argparse.Namespace,
    names: list[str],
    check: dict[str, Any] | None,
    rounds: list[dict[str, Any]],
    stopped: str | None,
) -> None:
    """Print the figures and write the JSON result (also after a stop)."""
    payload: dict[str, Any] = {
        "command": " ".join(["python", *sys.argv]),
        "machine": machine_facts(),
        "load_average_end": os.getloadavg(),
        "check": check,
        "rounds": rounds,
        "stopped": stopped,
    }
    if rounds:
        shares: dict[str, Any] = {}
        for name in names:
            values = [r[name]["data_wait_share"] for r in rounds]
            steps = [r[name]["step_time_s_median"] * 1000 for r in rounds]
            shares[name] = {
                "data_wait_share_median": statistics.median(values),
                "data_wait_share_range": [min(values), max(values)],
                "step_ms_median": statistics.median(steps),
            }
            print(
                f"{name}: data wait {statistics.median(values):.1%} of the step "
                f"[{min(values):.1%}, {max(values):.1%}], median step "
                f"{statistics.median(steps):.1f} ms"
            )
        busy = [{name: r[name]["busy"] for name in names} for r in rounds]
        measured = [{name: r[name]["samples_per_s"] for name in names} for r in rounds]
        speedups = {}
        for name in names[1:]:
            paired = paired_ratio(measured, names[0], name, busy=busy)
            speedups[f"{name} / {names[0]}"] = paired.to_dict()
            print(
                f"speedup {name} over {names[0]} (samples/s): {paired.text()} "
                f"(95% interval, {paired.rounds_note}): {paired.verdict}"
            )
        payload.update(sides=shares, speedups=speedups)
    write_json(Path(args.json), payload)
    print(f"wrote {args.json}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="paired rounds (default 10)")
    parser.add_argument("--steps", type=int, default=100, help="steps a run (default 100)")
    parser.add_argument("--warmup", type=int, default=10, help="untimed first steps (10)")
    parser.add_argument("--num-workers", type=int, default=1, help="loader processes (1)")
    parser.add_argument(
        "--no-one-core",
        dest="one_core",
        action="store_false",
        help="leave out the side with the loader on the training thread's one core",
    )
    parser.add_argument("--json", default="benchmarks/results/input_bound.json", metavar="OUT")
    args = parser.parse_args()
    if args.rounds < 1 or args.steps <= args.warmup or args.num_workers < 1:
        parser.error("need --rounds >= 1, --steps > --warmup and --num-workers >= 1")
    if len(os.sched_getaffinity(0)) < 1 + args.num_workers:
        parser.error(f"--num-workers {args.num_workers} needs {1 + args.num_workers} cores")
    chosen = sides(args)
    names = list(chosen)
    store = Path(tempfile.mkdtemp(prefix="input_bound_")) / "runs.db"

    def describe(row: dict[str, Any]) -> str:
        shown = ", ".join(
            f"{name} {row[name]['samples_per_s']:.0f}/s (wait {row[name]['data_wait_share']:.0%})"
            for name in names
        )
        return shown + (" (busy)" if any(row[name]["busy"] for name in names) else "")

    try:
        check = check_line(args, store, chosen[names[0]][1])
    except (TrainscaleError, trainscale.RunFailed, KeyboardInterrupt) as error:
        why = str(error) or type(error).__name__
        print(f"input_bound: stopped before the rounds: {why}", file=sys.stderr)
        report(args, names, None, [], why)
        return 1
    except Exception as error:  # a fault of the tools: say so in the result, then show it
        report(args, names, None, [], f"{type(error).__name__}: {error}")
        raise
    stopped = rotated_rounds(
        "input_bound",
        names,
        args.rounds,
        lambda n: one_run(*chosen[n], args, store),
        describe,
        lambda rounds, why: report(args, names, check, rounds, why),
    )
    return 1 if stopped or not check["printed"] else 0


if __name__ == "__main__":
    sys.exit(main())
