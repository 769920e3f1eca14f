"""PyTorch, TensorFlow and JAX side by side on this machine, in one invocation.

    python benchmarks/frameworks.py --rounds 5 --steps 40
    python benchmarks/frameworks.py --parts throughput,overhead --rounds 3   # no MNIST needed

Three parts, each in interleaved rounds (every side once a round, the order rotated from round
to round, each ratio taken within a round: the machine's drift falls on every side alike):

- throughput: mnist-cnn on synthetic data, global batch 64, through `trainscale run` in each
  framework at 1 core (1 worker x 1 thread, pinned) and at N pinned 1-thread workers (N = the
  usable cores); each framework's samples/s as a ratio to PyTorch's at the same setting, and
  each framework's own speedup from 1 core to N workers;
- time to accuracy: the default `trainscale run mnist-cnn --framework F` (1 worker with every
  core as threads, the recipe's batch of 64; `--accuracy-workers N` for N pinned workers) on
  real MNIST (TRAINSCALE_DATA_DIR): training-clock seconds to 99.0% test accuracy and the
  final accuracy, one run per framework and round;
- overhead: `trainscale run` vs a bare loop in the same framework (benchmarks/bare_loop*.py:
  same model, batch 128, Adam, constant lr, 1 thread on core 0); target <= 1.05.

Writes benchmarks/results/frameworks.json with every measurement, the command line and the
machine.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import bare_step_time, trainscale_run, write_json  # noqa: E402

from trainscale.hardware.facts import collect_environment  # noqa: E402
from trainscale.metrics.paired import paired_ratio  # noqa: E402

FRAMEWORKS = ("pytorch", "tensorflow", "jax")
BARE_LOOPS = {"pytorch": "bare_loop.py", "tensorflow": "bare_loop_tf.py", "jax": "bare_loop_jax.py"}
RESAMPLES = 10_000
"""Bootstrap resamples of each interval over rounds."""


def rotated(names: list[str], index: int) -> list[str]:
    shift = index % len(names)
    return names[shift:] + names[:shift]


def run_rounds(
    sides: dict[str, Callable[[], float]], rounds: int, key: str
) -> list[dict[str, float]]:
    """Every side once a round, in rotated order; returns each round's {side: value}."""
    measured = []
    names = list(sides)
    for index in range(rounds):
        values = {name: sides[name]() for name in rotated(names, index)}
        measured.append(values)
        shown = ", ".join(f"{name} {values[name]:.4g}" for name in names)
        print(f"  round {index + 1}/{rounds} ({key}): {shown}", flush=True)
    return measured


def paired(measured: list[dict[str, float]], a: str, b: str, measure: str) -> dict:
    """b over a (`measure` says which way is faster), median and 95% interval over rounds."""
    result = paired_ratio(
        measured,
        a,
        b,
        measure=measure,
        num_resamples=RESAMPLES,
        seed=0,
    )
    low, high = result.ci if result.ci is not None else (result.median, result.median)
    return {"median": result.median, "ci95": [low, high], "n": result.num_rounds}


def throughput(args: argparse.Namespace, store: Path, cores: int) -> dict:
    settings = {"1 core": ["--workers", "1", "--threads-per-worker", "1", "--affinity", "0"]}
    if cores > 1:
        settings[f"{cores} pinned workers"] = [
            "--workers", str(cores), "--threads-per-worker", "1", "--affinity", "compact",
        ]  # fmt: skip
    sides: dict[str, Callable[[], float]] = {}
    for framework in args.frameworks:
        for setting, words in settings.items():
            run_args = [
                "mnist-cnn", "--framework", framework, "--data", "synthetic", "--no-eval",
                "--global-batch-size", "64", "--precision", "fp32",
                "--steps", str(args.steps), "--quiet", *words,
            ]  # fmt: skip
            sides[f"{framework} | {setting}"] = lambda a=run_args: trainscale_run(a, store)[
                "samples_per_s"
            ]
    print("throughput (samples/s):", flush=True)
    measured = run_rounds(sides, args.rounds, "samples/s")
    ratios = {}
    for setting in settings:
        for framework in args.frameworks:
            if framework != "pytorch" and "pytorch" in args.frameworks:
                ratios[f"{framework} / pytorch, {setting}"] = paired(
                    measured, f"pytorch | {setting}", f"{framework} | {setting}", "throughput"
                )
    if cores > 1:
        many = f"{cores} pinned workers"
        for framework in args.frameworks:
            ratios[f"{framework} speedup, {many} / 1 core"] = paired(
                measured, f"{framework} | 1 core", f"{framework} | {many}", "throughput"
            )
    return {"rounds": measured, "ratios": ratios}


def time_to_accuracy(args: argparse.Namespace, store: Path) -> dict:
    sides: dict[str, Callable[[], float]] = {}
    finals: dict[str, list[float]] = {}
    workers = str(args.accuracy_workers)
    for framework in args.frameworks:
        run_args = ["mnist-cnn", "--framework", framework, "--workers", workers, "--quiet"]

        def one(a: list[str] = run_args, name: str = framework) -> float:
            result = trainscale_run(a, store)
            finals.setdefault(name, []).append(result["test_accuracy"])
            reached = result.get("time_to_target_s")
            return float("nan") if reached is None else float(reached)

        sides[framework] = one
    print("time to 99.0% on real MNIST (training-clock s; nan = not reached):", flush=True)
    measured = run_rounds(sides, args.accuracy_rounds, "s to 99%")
    print(f"  final test accuracy: {finals}")
    return {"workers": args.accuracy_workers, "rounds": measured, "final_accuracy": finals}


def overhead(args: argparse.Namespace, store: Path) -> dict:
    sides: dict[str, Callable[[], float]] = {}
    for framework in args.frameworks:
        run_args = [
            "mnist-cnn", "--framework", framework, "--data", "synthetic", "--no-eval",
            "--threads-per-worker", "1", "--affinity", "0", "--batch-size", "128",
            "--schedule", "constant", "--steps", str(args.steps), "--quiet",
            # The bare loops train in fp32; `auto` may choose bf16 on a CPU that computes it.
            "--precision", "fp32",
        ]  # fmt: skip
        sides[f"{framework} bare"] = lambda f=framework: bare_step_time(BARE_LOOPS[f], args.steps)
        sides[f"{framework} trainscale"] = lambda a=run_args: trainscale_run(a, store)[
            "step_time_s_median"
        ]
    print("overhead (median step time, s):", flush=True)
    measured = run_rounds(sides, args.rounds, "step s")
    ratios = {
        f"{framework}: trainscale / bare": paired(
            measured, f"{framework} bare", f"{framework} trainscale", "step_time"
        )
        for framework in args.frameworks
    }
    return {"rounds": measured, "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the throughput parts")
    parser.add_argument("--accuracy-rounds", type=int, default=1, help="runs per framework")
    parser.add_argument(
        "--accuracy-workers", type=int, default=1, help="workers of the accuracy runs"
    )
    parser.add_argument("--steps", type=int, default=40, help="steps of a throughput run")
    parser.add_argument(
        "--parts", default="throughput,accuracy,overhead", help="comma-separated parts to run"
    )
    parser.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    parser.add_argument("--out", default="benchmarks/results/frameworks.json")
    args = parser.parse_args()
    args.frameworks = [f for f in args.frameworks.split(",") if f]
    parts = set(args.parts.split(","))
    env = collect_environment()
    cores = len(env["usable_cores"])
    print(f"machine: {env['cpu_model']}, {cores} usable cores, torch {env['torch_version']}")
    store = Path(tempfile.mkdtemp()) / "frameworks.db"
    results: dict = {"command": " ".join(sys.argv), "machine": env}
    if "throughput" in parts:
        results["throughput"] = throughput(args, store, cores)
    if "accuracy" in parts:
        results["time_to_accuracy"] = time_to_accuracy(args, store)
    if "overhead" in parts:
        results["overhead"] = overhead(args, store)
    for part in ("throughput", "overhead"):
        for label, value in results.get(part, {}).get("ratios", {}).items():
            low, high = value["ci95"]
            print(f"{label}: {value['median']:.3f} [{low:.3f}, {high:.3f}] (n={value['n']})")
    write_json(Path(args.out), results)


if __name__ == "__main__":
    main()
