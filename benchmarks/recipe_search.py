"""The search behind mnist-cnn's default recipe: samples to 99.0% on real MNIST, in bf16.

    TRAINSCALE_DATA_DIR=/path/to/datasets python benchmarks/recipe_search.py \
        [--candidates d1 d3 ...] [--seeds 0 1 2] [--precision bf16]

Each candidate is the built-in mnist-cnn with another recipe (this file is also the custom
workload file the runs load: `trainscale run benchmarks/recipe_search.py:d1`), trained by
`trainscale run` with every other default and evaluated 8 times an epoch, off the clock. A
candidate's figure is the samples trained when an evaluation first reads >= 99.0% test
accuracy (in epochs of 60,000), with its final accuracy: a recipe must reach the target
in every seed, with margin. Writes benchmarks/results/recipe_search.json with the command
and the machine. docs/workloads.md tells the search and its result.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from trainscale.workloads import get_workload
from trainscale.workloads.base import Recipe, Workload

TARGET = 0.99
EVALS_PER_EPOCH = 8
TRAIN_SAMPLES = 60_000

CANDIDATES: dict[str, dict] = {
    # Round 1: schedules short enough to end by 1-1.5 epochs.
    "a1": dict(optimizer="adam", lr=3e-3, batch_size=64, epochs=1.0, warmup_fraction=0.3,
               label_smoothing=0.1),
    "a2": dict(optimizer="adam", lr=3e-3, batch_size=128, epochs=1.5, warmup_fraction=0.2),
    "a3": dict(optimizer="adam", lr=2e-3, batch_size=64, epochs=1.25, warmup_fraction=0.2),
    "a4": dict(optimizer="adam", lr=5e-3, batch_size=128, epochs=1.25, warmup_fraction=0.25,
               label_smoothing=0.1),
    "s1": dict(optimizer="sgd", lr=0.05, batch_size=64, epochs=1.25, warmup_fraction=0.2),
    # Round 2: label smoothing kept, warm-up, lr and batch varied at 1.25-1.5 epochs.
    "b1": dict(optimizer="adam", lr=3e-3, batch_size=64, epochs=1.5, warmup_fraction=0.3,
               label_smoothing=0.1),
    "b2": dict(optimizer="adam", lr=3e-3, batch_size=64, epochs=1.5, warmup_fraction=0.1,
               label_smoothing=0.1),
    "b3": dict(optimizer="adam", lr=1.5e-3, batch_size=64, epochs=1.5, warmup_fraction=0.1,
               label_smoothing=0.1),
    "b4": dict(optimizer="adam", lr=2e-3, batch_size=32, epochs=1.25, warmup_fraction=0.2,
               label_smoothing=0.1),
    "b6": dict(optimizer="adam", lr=3e-3, batch_size=128, epochs=1.5, warmup_fraction=0.2,
               label_smoothing=0.1),
    "c1": dict(optimizer="adam", lr=5e-3, batch_size=64, epochs=1.5, warmup_fraction=0.1,
               label_smoothing=0.1),
    # Round 3: 2-3 epochs, for margin.
    "c2": dict(optimizer="adam", lr=3e-3, batch_size=64, epochs=2.0, warmup_fraction=0.1,
               label_smoothing=0.1),
    "previous": dict(optimizer="adam", lr=3e-3, batch_size=64, epochs=2.0, warmup_fraction=0.3,
                     label_smoothing=0.1),
    "d1": dict(optimizer="adam", lr=3e-3, batch_size=64, epochs=2.5, warmup_fraction=0.1,
               label_smoothing=0.1),
    "d3": dict(optimizer="adam", lr=3e-3, batch_size=128, epochs=3.0, warmup_fraction=0.1,
               label_smoothing=0.1),
    "d5": dict(optimizer="adamw", lr=3e-3, weight_decay=0.05, batch_size=64, epochs=2.0,
               warmup_fraction=0.1, label_smoothing=0.1),
}  # fmt: skip
"""Every recipe tried, one-cycle schedule throughout, by round (docs/workloads.md)."""


def _candidate(name: str) -> Callable[[], Workload]:
    def make() -> Workload:
        recipe = Recipe(schedule="onecycle", **CANDIDATES[name])
        return replace(get_workload("mnist-cnn"), name=f"mnist-cnn-{name}", recipe=recipe)

    return make


for _name in CANDIDATES:  # the workload references: recipe_search.py:<candidate>
    globals()[_name] = _candidate(_name)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _common import machine_facts, trainscale_run, write_json

    from trainscale.results.store import RunStore

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--precision", default="bf16")
    parser.add_argument("--out", default="benchmarks/results/recipe_search.json")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp()) / "search.db"
    rows = []
    for name in args.candidates:
        batch = CANDIDATES[name]["batch_size"]
        every = max(1, round(TRAIN_SAMPLES / batch / EVALS_PER_EPOCH))
        for seed in args.seeds:
            result = trainscale_run(
                [f"{Path(__file__).resolve()}:{name}", "--seed", str(seed)]
                + ["--precision", args.precision, "--eval-every", str(every)],
                store,
            )
            with RunStore(store) as runs:
                curve = runs.get_run(result["run_id"]).summary["accuracy_curve"]
            accuracies = [accuracy for _, accuracy in curve]
            first = next((i for i, a in enumerate(accuracies) if a >= TARGET), None)
            epochs = None if first is None else (first + 1) * every * batch / TRAIN_SAMPLES
            rows.append(
                {
                    "candidate": name,
                    "recipe": CANDIDATES[name],
                    "seed": seed,
                    "epochs_to_target": epochs,
                    "final_accuracy": result["test_accuracy"],
                    "time_to_target_s": result["time_to_target_s"],
                    "samples_per_s": result["samples_per_s"],
                    "curve": accuracies,
                }
            )
            print(
                f"{name} seed {seed}: 99.0% after {epochs} epochs "
                f"({result['time_to_target_s']} s), final {result['test_accuracy']:.4f}",
                flush=True,
            )
    write_json(
        Path(args.out),
        {
            "command": " ".join(["python", *sys.argv]),
            "machine": machine_facts(),
            "runs": rows,
        },
    )


if __name__ == "__main__":
    main()
