"""Does `trainscale recommend` find a setting within 5% of the best of an exhaustive sweep?

    TRAINSCALE_DATA_DIR=/path/to/datasets python benchmarks/recommend_vs_exhaustive.py

In one invocation, on one machine:

1. `trainscale recommend mnist-cnn --json` (a fresh process, exactly as a user runs it);
2. an exhaustive sweep of the same candidates (taken from the recommendation's own
   space listing), every candidate at the final rung's trial length, `--repeats` times,
   interleaved (every candidate once, then again), stored as a sweep;
3. the same accuracy check for every candidate (real data, the recommendation's length and
   tolerance against the serial fp32 baseline), so that "the best" of the exhaustive sweep
   is the fastest setting that keeps accuracy, as it is for the search.

It prints the recommended setting's exhaustive throughput as a fraction of the exhaustive
best (target >= 0.95), with a hierarchical-bootstrap interval over the sweep's step times,
and writes everything to a JSON file. Without real data the accuracy check is skipped on
both sides and the comparison is on throughput alone (and says so).

`--smoke` shrinks everything (2- and 4-step trials, a few-hundred-sample accuracy check,
the recipe batch only) to check that the script works; its figures mean nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, write_json  # noqa: E402

WORKLOAD = "mnist-cnn"
TARGET_FRACTION = 0.95


def run_recommend(args: argparse.Namespace, store: Path) -> tuple[dict[str, Any], float]:
    """`trainscale recommend ... --json` in a fresh process; (its JSON, wall seconds)."""
    cmd = [sys.executable, "-m", "trainscale", "recommend", WORKLOAD, "--json"]
    cmd += ["--store", str(store), "--budget-s", str(args.budget_s)]
    if args.quick:
        cmd.append("--quick")
    if args.smoke:
        cmd += ["--rung-steps", "2,4", "--warmup-steps", "1", "--accuracy-epochs", "0.01"]
        cmd += ["--batch-multipliers", "1"]
    if args.data_dir:
        cmd += ["--data-dir", args.data_dir]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    # Progress goes to stderr, which is left on the terminal; stdout is the JSON result.
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"trainscale recommend failed with exit status {proc.returncode}")
    return json.loads(proc.stdout.strip().splitlines()[-1]), wall


def candidate_points(recommendation: dict[str, Any]) -> list[dict[str, Any]]:
    """The recommendation's search space as sweep points, one per candidate."""
    keys = ("workers", "threads_per_worker", "affinity", "precision", "batch_size")
    return [
        {"label": c["label"], **{key: c[key] for key in keys}}
        for c in recommendation["space"]["candidates"]
    ]


class Printer:
    """One line per finished sweep run."""

    def start(self, sweep_id: str, todo: int, done: int) -> None:
        print(f"sweep {sweep_id[:8]}: {todo} runs", flush=True)

    def run_started(self, planned) -> None:
        pass

    def run_finished(self, planned, result, error) -> None:
        if error is not None:
            print(f"  {planned.label} (repeat {planned.repeat}): FAILED {error}", flush=True)
        elif result.get("test_accuracy") is not None:
            print(f"  {planned.label}: test accuracy {result['test_accuracy']:.4f}", flush=True)
        else:
            print(
                f"  {planned.label} (repeat {planned.repeat}): "
                f"{result['samples_per_s']:.1f} samples/s",
                flush=True,
            )

    def stop(self) -> None:
        pass


def run_sweep(spec_dict: dict[str, Any], store: Path) -> str:
    """Plan and run a sweep from a spec dict; returns its id."""
    from trainscale.sweeps.execute import execute_sweep
    from trainscale.sweeps.plan import make_plan
    from trainscale.sweeps.spec import parse_spec

    spec = parse_spec(spec_dict, default_name=spec_dict["name"], where="benchmark sweep")
    plan = make_plan(spec)
    outcome = execute_sweep(
        spec, plan, store, "benchmarks/recommend_vs_exhaustive.py", False, Printer()
    )
    return outcome.sweep_id


def completed_by_label(store: Path, sweep_id: str) -> dict[str, list[Any]]:
    """The sweep's completed runs, grouped by configuration label."""
    from trainscale.results.store import RunStore

    with RunStore(store) as runs:
        sweep = runs.get_sweep(sweep_id)
        labels = {entry["config_hash"]: entry["label"] for entry in sweep.plan}
        grouped: dict[str, list[Any]] = {}
        for record in runs.sweep_runs(sweep_id):
            if record.status == "completed":
                grouped.setdefault(labels[record.config_hash], []).append(record)
    return grouped


def timed_steps_of(store: Path, records: list[Any]) -> list[list[float]]:
    from trainscale.metrics.compare import timed_steps
    from trainscale.results.store import RunStore

    with RunStore(store) as runs:
        return [
            timed_steps(runs.step_times(r.run_id), r.summary.get("warmup_steps_excluded", 0))
            for r in records
        ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=2, help="exhaustive repeats (>= 2)")
    parser.add_argument("--budget-s", type=float, default=600.0, help="recommend's budget")
    parser.add_argument("--quick", action="store_true", help="recommend --quick, and its lengths")
    parser.add_argument("--smoke", action="store_true", help="tiny everything: proves it runs")
    parser.add_argument("--data-dir", help="dataset directory (else $TRAINSCALE_DATA_DIR)")
    parser.add_argument("--store", type=Path, help="results store (default: a temporary one)")
    parser.add_argument("--out", default="benchmarks/results/recommend_vs_exhaustive.json")
    args = parser.parse_args()
    if args.repeats < 2:
        parser.error("--repeats must be at least 2: one run of a setting is not a result")
    from trainscale.advisor.trials import EVAL_AT_END
    from trainscale.metrics.compare import compare_step_times

    store = args.store or Path(tempfile.mkdtemp()) / "recommend-vs-exhaustive.db"
    t_start = time.monotonic()

    # 1. The search, as a user runs it.
    recommendation, recommend_wall_s = run_recommend(args, store)
    settings = recommendation["settings"]
    best_label = recommendation["best"]["label"]
    print(f"recommended: {best_label}\n  {recommendation['command']}", flush=True)

    # 2. Every candidate at the final rung's length, repeated, interleaved.
    points = candidate_points(recommendation)
    tag = f"exhaustive:{recommendation['recommend_id']}"
    t0 = time.monotonic()
    throughput_sweep = run_sweep(
        {
            "name": f"exhaustive-{recommendation['recommend_id']}",
            "repeats": args.repeats,
            "order": "interleaved",
            "base": {
                "workload": WORKLOAD,
                "data": "synthetic",
                "evaluate": False,
                "steps": settings["rung_steps"][-1] + settings["warmup_steps"],
                "warmup_steps_untimed": settings["warmup_steps"],
                "tag": tag,
            },
            "points": points,
        },
        store,
    )
    exhaustive_wall_s = time.monotonic() - t0
    throughput_runs = completed_by_label(store, throughput_sweep)
    rates = {
        label: [r.summary["samples_per_s"] for r in records]
        for label, records in throughput_runs.items()
    }
    median_rate = {label: statistics.median(values) for label, values in rates.items()}

    # 3. The same accuracy check for every candidate.
    accuracy: dict[str, float | None] = {}
    admissible = set(median_rate)
    baseline_label = recommendation["baseline"]["label"]
    accuracy_sweep = None
    if recommendation["accuracy_checked"]:
        base: dict[str, Any] = {
            "workload": WORKLOAD,
            "data": "real",
            "epochs": settings["accuracy_epochs"],
            "eval_every": EVAL_AT_END,
            "evaluate": True,
            "tag": tag,
        }
        if args.data_dir:
            base["data_dir"] = args.data_dir
        t0 = time.monotonic()
        accuracy_sweep = run_sweep(
            {
                "name": f"exhaustive-accuracy-{recommendation['recommend_id']}",
                "base": base,
                "points": points,
            },
            store,
        )
        exhaustive_wall_s += time.monotonic() - t0
        for label, records in completed_by_label(store, accuracy_sweep).items():
            accuracy[label] = records[0].summary.get("test_accuracy")
        reference = accuracy.get(baseline_label)
        tolerance = settings["accuracy_tolerance"]
        admissible = {
            label
            for label in median_rate
            if reference is not None
            and accuracy.get(label) is not None
            and accuracy[label] >= reference - tolerance
        } | {baseline_label}

    if best_label not in median_rate:
        raise SystemExit(f"the exhaustive sweep has no completed run of {best_label}")
    best_overall = max(median_rate, key=median_rate.get)
    best_admissible = max(
        (label for label in admissible if label in median_rate), key=median_rate.get
    )
    fraction = median_rate[best_label] / median_rate[best_admissible]
    fraction_overall = median_rate[best_label] / median_rate[best_overall]
    # The fraction again, with an interval: repeats resampled, then steps (hierarchical).
    interval = None
    if best_label != best_admissible:
        result = compare_step_times(
            timed_steps_of(store, throughput_runs[best_admissible]),
            timed_steps_of(store, throughput_runs[best_label]),
            samples_per_step_a=throughput_runs[best_admissible][0].global_batch_size,
            samples_per_step_b=throughput_runs[best_label][0].global_batch_size,
        )
        interval = list(result.throughput_ratio_ci)
    baseline_rate = median_rate.get(baseline_label)
    command = recommendation["command"]

    print("\ncandidate | exhaustive samples/s (median [min, max]) | speedup | test acc | kept")
    for label in sorted(median_rate, key=median_rate.get, reverse=True):
        acc = accuracy.get(label)
        speedup = f"{median_rate[label] / baseline_rate:.2f}x" if baseline_rate else "-"
        marks = " <- recommended" if label == best_label else ""
        print(
            f"{label} | {spread(rates[label])} | {speedup} | "
            f"{f'{acc:.4f}' if acc is not None else '-'} | "
            f"{'yes' if label in admissible else 'no'}{marks}"
        )
    verdict = "met" if fraction >= TARGET_FRACTION else "NOT met"
    print(
        f"\nrecommended {best_label}: {fraction:.3f} of the exhaustive best that keeps accuracy "
        f"({best_admissible})"
        + (f", 95% CI [{interval[0]:.3f}, {interval[1]:.3f}]" if interval else "")
        + f"; target >= {TARGET_FRACTION} {verdict}"
    )
    print(f"  {fraction_overall:.3f} of the exhaustive best by throughput alone ({best_overall})")
    if not recommendation["accuracy_checked"]:
        print("  (no real data: accuracy was not checked, on either side)")
    print(f"  command: {command}")
    print(
        f"  recommend took {recommend_wall_s:.0f} s, the exhaustive sweep "
        f"{exhaustive_wall_s:.0f} s; total {time.monotonic() - t_start:.0f} s"
    )
    write_json(
        Path(args.out),
        {
            "command": " ".join(sys.argv),
            "smoke": args.smoke,
            "cores": len(os.sched_getaffinity(0)),
            "recommendation": recommendation,
            "recommended": best_label,
            "recommended_command": recommendation["command"],
            "exhaustive_sweeps": {"throughput": throughput_sweep, "accuracy": accuracy_sweep},
            "exhaustive_samples_per_s": rates,
            "exhaustive_test_accuracy": accuracy,
            "admissible": sorted(admissible),
            "best_admissible": best_admissible,
            "best_overall": best_overall,
            "fraction_of_best": fraction,
            "fraction_of_best_ci95": interval,
            "fraction_of_best_by_throughput_alone": fraction_overall,
            "target_fraction": TARGET_FRACTION,
            "target_met": fraction >= TARGET_FRACTION,
            "recommend_wall_s": recommend_wall_s,
            "exhaustive_wall_s": exhaustive_wall_s,
            "store": str(store),
        },
    )
    print(f"  written to {args.out}")


if __name__ == "__main__":
    main()
