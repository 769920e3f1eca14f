"""The simulator on one device, held out: each workload's serial step predicted without its
own runs, then set beside the step it measured.

    python benchmarks/simulator_one_device.py --store S [--device cuda] [--out F.json]

For every workload with a measured serial run on the device in store S (newest first; the
GPU check's `workloads` step makes one per workload), two predictions at that run's batch
and precision, neither of which sees the workload's own runs:

- uncalibrated: the device's peak and per-operator overhead from the host's newest trusted
  `trainscale probe` (`simulator/probed_device.py`), FLOPs and operators counted on the model;
- held out: a cost per operator and per FLOP fitted to the other workloads' runs on the
  device (`simulator/cross_workload.py`).

Prints one line per workload and the median |error| of each, and writes them as JSON. The
operators are counted on the device where this machine has it (cuDNN's LSTM is one operator,
the CPU's a few per time step).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from trainscale.errors import TrainscaleError
from trainscale.metrics.throughput import stored_step_time
from trainscale.results.records import RunRecord
from trainscale.results.store import RunStore
from trainscale.simulator.calibrate import calibrate_from_peak
from trainscale.simulator.cross_workload import calibrate_from_other_workloads
from trainscale.simulator.predict import predict_one
from trainscale.simulator.run_facts import cores_per_worker, is_measured, per_worker_batch
from trainscale.simulator.setup import cached_layout, counting_device, resolve_cluster
from trainscale.workloads import builtin_workload_names


def newest_serial_runs(store: RunStore, device: str) -> dict[str, RunRecord]:
    """Per built-in workload, its newest completed, measured serial run on `device`."""
    chosen: dict[str, RunRecord] = {}
    for record in store.list_runs(status="completed"):
        name = record.workload
        if name in chosen or name not in builtin_workload_names() or not is_measured(record):
            continue
        if (record.world_size or 1) == 1 and record.config.get("device") == device:
            chosen[name] = record
    return chosen


def held_out(store: RunStore, device: str) -> list[dict[str, Any]]:
    """One row per workload: measured step, the two predictions and their errors."""
    runs = newest_serial_runs(store, device)
    others = list(runs.values())
    rows = []
    for name, record in sorted(runs.items()):
        threads = cores_per_worker(record)[0] if device == "cpu" else None
        cluster = resolve_cluster(
            "local", store, device=device, threads_per_worker=threads, env=record.env
        )
        counted_on = counting_device(cluster)
        layout = cached_layout(name, None, counted_on)
        batch, precision = per_worker_batch(record), record.precision or "fp32"
        flops = float(record.summary.get("flops_per_sample") or 0)
        measured = stored_step_time(record.summary)
        row: dict[str, Any] = {
            "workload": name,
            "run_id": record.run_id,
            "precision": precision,
            "batch": batch,
            "ops_per_step": layout.ops_per_step,
            "ops_counted_on": counted_on,
            "flops_per_sample": flops,
            "measured_step_s": measured,
            "contention": (record.summary.get("contention") or {}).get("verdict"),
        }
        predictions = {}
        try:
            predictions["uncalibrated"] = calibrate_from_peak(
                name,
                cluster.device,
                precision,
                flops,
                layout.num_params,
                reference_batch_size=batch,
                ops_per_step=layout.ops_per_step,
            )
        except TrainscaleError as error:
            row["uncalibrated_error"] = str(error)
        fitted = calibrate_from_other_workloads(
            name,
            [r for r in others if r.workload != name],
            cluster.device,
            precision,
            ops_per_step=layout.ops_per_step,
            flops_per_sample=flops,
            reference_batch_size=batch,
            ops_of=lambda other, on=counted_on: cached_layout(other, None, on).ops_per_step,
        )
        if fitted is not None:
            predictions["held_out"] = fitted
            row["held_out_note"] = fitted.notes[0]
        for kind, calibration in predictions.items():
            step = predict_one(calibration, layout, cluster, 1, batch, check_fit=False).step_time_s
            row[f"{kind}_step_s"] = step
            row[f"{kind}_relative_error"] = step / measured - 1
        rows.append(row)
    return rows


def machine_of(store: RunStore, device: str) -> dict[str, Any]:
    """The machine the measured runs ran on, as their stored environment names it."""
    runs = newest_serial_runs(store, device)
    env = next(iter(runs.values())).env if runs else {}
    keys = ("hostname", "cpu_model", "usable_cores", "bf16_native", "torch_version", "gpus")
    return {key: env.get(key) for key in keys}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if not args.store.exists():
        print(f"error: no store at {args.store}", file=sys.stderr)
        return 2
    with RunStore(args.store) as store:
        rows = held_out(store, args.device)
        machine = machine_of(store, args.device)
    summary: dict[str, Any] = {
        "command": " ".join(sys.argv),
        "device": args.device,
        "machine": machine,
        "by_workload": rows,
    }
    for kind in ("uncalibrated", "held_out"):
        errors = [abs(r[f"{kind}_relative_error"]) for r in rows if f"{kind}_step_s" in r]
        summary[f"{kind}_median_abs_error"] = statistics.median(errors) if errors else None
        summary[f"{kind}_count"] = len(errors)
    for row in rows:
        shown = ", ".join(
            f"{kind} {row[f'{kind}_step_s'] * 1e3:.2f} ms ({row[f'{kind}_relative_error']:+.0%})"
            for kind in ("uncalibrated", "held_out")
            if f"{kind}_step_s" in row
        )
        print(
            f"{row['workload']}: measured {row['measured_step_s'] * 1e3:.2f} ms, "
            f"{row['ops_per_step']} operators; {shown or 'no prediction'}"
        )
    for kind in ("uncalibrated", "held_out"):
        median = summary[f"{kind}_median_abs_error"]
        if median is not None:
            print(f"median |error|, {kind}: {median:.1%} over {summary[f'{kind}_count']}")
    if args.out:
        args.out.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
