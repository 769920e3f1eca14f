"""The example custom workload, from the command line and from the Python API, in one run.

    python benchmarks/custom_workloads.py --rounds 5 --steps 2000

Three parts:

- api-vs-cli: examples/custom_workload/my_workload.py (a small MLP on numpy arrays) at
  1 worker and at N pinned 1-thread workers (N = the usable cores), global batch 128,
  `--steps S --no-eval`, once through `trainscale run` (a fresh process) and once through
  `trainscale.run(...)` (this process), in interleaved rounds (every side once a round, the
  order rotated, each ratio taken within a round). Workers started from the API are the
  CLI's, so the API/CLI throughput ratio should be 1 within the noise;
- recipe: the example's full recipe through the API, 1 worker (every core as threads) and
  N pinned workers at the same global batch: samples/s, test accuracy, time to target;
- export: every run the benchmark stored, exported to a local MLflow store (SQLite) and
  written as TensorBoard event files: seconds per run (when those extras are installed).

Writes benchmarks/results/custom_workloads.json with every measurement, the command line
and the machine.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402

import trainscale  # noqa: E402
from trainscale.hardware.facts import collect_environment  # noqa: E402
from trainscale.metrics.paired import paired_ratio  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "custom_workload" / "my_workload.py"
WORKLOAD = f"{EXAMPLE}:make_workload"
GLOBAL_BATCH = 128


def setting_args(workers: int) -> dict[str, object]:
    """The flat options of one setting: 1 worker x 1 thread, or N pinned 1-thread workers."""
    return {
        "workers": workers,
        "threads_per_worker": 1,
        "affinity": "compact",
        "global_batch_size": GLOBAL_BATCH,
    }


def cli_args(options: dict[str, object]) -> list[str]:
    return [f"--{key.replace('_', '-')}={value}" for key, value in options.items()]


def api_vs_cli(rounds: int, steps: int, workers: int, store: Path) -> dict:
    sides = [(how, n) for n in (1, workers) for how in ("cli", "api")]
    measured: list[dict[str, float]] = []
    for index in range(rounds):
        shift = index % len(sides)
        row: dict[str, float] = {}
        for how, n in sides[shift:] + sides[:shift]:
            options = {**setting_args(n), "steps": steps, "evaluate": False}
            if how == "cli":
                args = [WORKLOAD, *cli_args(setting_args(n)), f"--steps={steps}", "--no-eval"]
                row[f"cli-{n}"] = trainscale_run(args, store)["samples_per_s"]
            else:
                row[f"api-{n}"] = trainscale.run(WORKLOAD, store=store, **options).samples_per_s
        print(f"round {index + 1}/{rounds}: " + ", ".join(f"{k} {v:.0f}" for k, v in row.items()))
        measured.append(row)
    ratios = {}
    for n in (1, workers):
        paired = paired_ratio(measured, f"cli-{n}", f"api-{n}")
        low, high = paired.ci if paired.ci is not None else (paired.median, paired.median)
        ratios[f"{n} worker(s)"] = {
            "api_over_cli": paired.median,
            "ci95": [low, high],
            "ratios": list(paired.ratios),
        }
        print(f"API / CLI samples/s at {n} worker(s): {paired.median:.3f} [{low:.3f}, {high:.3f}]")
    return {"rounds": measured, "ratios": ratios}


def recipe(rounds: int, workers: int, store: Path) -> dict:
    rows = []
    for index in range(rounds):
        for label, options in (
            ("1 worker, default threads", {}),
            (f"{workers} pinned workers x 1 thread", setting_args(workers)),
        ):
            run = trainscale.run(WORKLOAD, store=store, **options)
            rows.append(
                {
                    "round": index,
                    "setting": label,
                    "samples_per_s": run.samples_per_s,
                    "test_accuracy": run.test_accuracy,
                    "time_to_target_s": run.time_to_target_s,
                    "global_batch_size": run.global_batch_size,
                    "busy": run.busy,
                }
            )
            print(
                f"recipe {label}: {run.samples_per_s:.0f} samples/s, accuracy "
                f"{run.test_accuracy:.4f}, to target {run.time_to_target_s} s"
            )
    return {"runs": rows}


def export(store: Path, out: Path) -> dict:
    from trainscale.errors import ConfigError
    from trainscale.reporting.tracking import load_runs

    runs = load_runs(store)
    timings: dict[str, object] = {"runs": len(runs)}
    try:
        from trainscale.reporting.mlflow_export import export_mlflow

        start = time.perf_counter()
        # MLflow puts a local store's artifacts in ./mlruns: keep them in the scratch folder.
        with contextlib.chdir(out):
            export_mlflow(runs, tracking_uri=f"sqlite:///{out / 'mlflow.db'}")
        timings["mlflow_s_per_run"] = (time.perf_counter() - start) / len(runs)
    except ConfigError as missing:
        timings["mlflow"] = str(missing)
    try:
        from trainscale.reporting.tensorboard_export import write_tensorboard

        start = time.perf_counter()
        write_tensorboard(runs, out / "tensorboard")
        timings["tensorboard_s_per_run"] = (time.perf_counter() - start) / len(runs)
    except ConfigError as missing:
        timings["tensorboard"] = str(missing)
    print(f"export: {timings}")
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--recipe-rounds", type=int, default=2)
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "custom_workloads.json"
    )
    args = parser.parse_args()
    env = collect_environment()
    workers = max(2, len(env.get("usable_cores") or [0, 1]))
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs.db"
        payload = {
            "command": " ".join(["python", *sys.argv]),
            "machine": {k: env.get(k) for k in ("cpu_model", "usable_cores", "torch_version")},
            "api_vs_cli": api_vs_cli(args.rounds, args.steps, workers, store),
            "recipe": recipe(args.recipe_rounds, workers, store),
        }
        payload["export"] = export(store, Path(tmp))
    for label in {row["setting"] for row in payload["recipe"]["runs"]}:
        rows = [r for r in payload["recipe"]["runs"] if r["setting"] == label]
        print(
            f"{label}: samples/s {spread([r['samples_per_s'] for r in rows])}, accuracy "
            f"{statistics.median(r['test_accuracy'] for r in rows):.4f}"
        )
    write_json(args.out, payload)
    print(f"written {args.out}")


if __name__ == "__main__":
    main()
