"""Does each workload's default recipe still reach its target in bf16? Real data, seeds.

    TRAINSCALE_DATA_DIR=/path/to/datasets python benchmarks/bf16_accuracy.py \
        [--workloads mnist-cnn mnist-dbn tweets-text imdb-bilstm imdb-bigru] [--seeds 0 1 2] \
        [--precisions bf16 fp32]

Each run is `trainscale run WORKLOAD --precision P --seed S` with every other default (its
recipe, workers and threads as the command chooses them), on the real data found under
$TRAINSCALE_DATA_DIR: MNIST for the CNN and the DBN, the airline tweets for tweets-text,
and, for the IMDB models, the movie-review snippets (the IMDB set itself is not at hand;
docs/text-workloads.md says how they stand in). Writes benchmarks/results/bf16_accuracy.json
with the command and the machine: per run the test accuracy, the target, whether and when
(training clock) it was reached.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_facts, trainscale_run, write_json  # noqa: E402


def data_flags(workload: str, data_dir: Path) -> list[str]:
    """The workload options that point a workload at its real data here."""
    if workload == "tweets-text":
        return ["-o", f"file={data_dir / 'tweets-airline/tweets.csv'}", "-o", "encoding=latin-1"]
    if workload.startswith("imdb-"):
        snippets = data_dir / "movie-snippets/movie_review_snippets.tsv"
        return [
            *("-o", f"file={snippets}", "-o", "header=false", "-o", "text_column=2"),
            *("-o", "label_column=1", "-o", "label_threshold=0"),
        ]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--workloads",
        nargs="+",
        default=["mnist-cnn", "mnist-dbn", "tweets-text", "imdb-bilstm", "imdb-bigru"],
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--precisions", nargs="+", default=["bf16"])
    parser.add_argument("--out", default="benchmarks/results/bf16_accuracy.json")
    args = parser.parse_args()
    data_dir = Path(os.environ["TRAINSCALE_DATA_DIR"])
    store = Path(tempfile.mkdtemp()) / "bench.db"
    rows = []
    for workload in args.workloads:
        for precision in args.precisions:
            for seed in args.seeds:
                result = trainscale_run(
                    [workload, "--precision", precision, "--seed", str(seed)]
                    + data_flags(workload, data_dir),
                    store,
                )
                row = {
                    "workload": workload,
                    "precision": precision,
                    "seed": seed,
                    "test_accuracy": result["test_accuracy"],
                    "target_accuracy": result["target_accuracy"],
                    "reached": result["time_to_target_s"] is not None,
                    "time_to_target_s": result["time_to_target_s"],
                    "train_time_s": result["train_time_s"],
                    "samples_per_s": result["samples_per_s"],
                    "world_size": result["world_size"],
                    "threads_per_worker": result["threads_per_worker"],
                }
                rows.append(row)
                print(
                    f"{workload} {precision} seed {seed}: accuracy {row['test_accuracy']:.4f} "
                    f"(target {row['target_accuracy']}), reached {row['reached']} "
                    f"at {row['time_to_target_s']} s",
                    flush=True,
                )
    payload = {
        "command": " ".join(["python", *sys.argv]),
        "machine": machine_facts(),
        "runs": rows,
    }
    write_json(Path(args.out), payload)


if __name__ == "__main__":
    main()
