"""One GPU check of trainscale, in steps under one time budget, with a JSON record of each.

    python benchmarks/gpu_check.py --out DIR [--budget 520] [--only tests,mnist] [--dry-run]

Run by benchmarks/gpu_check.sh (which first installs what the GPU image lacks). The steps,
most important first, each under its own time cap and skipped once the budget is spent:

- machine, env, probe: the GPU, driver, torch and CUDA; the measured matmul and copy rates
  (a full probe, which the runs' `mfu_vs_probe` is rated against);
- mnist: benchmarks/gpu_mnist_time_to_accuracy.py on real MNIST, the fast setting eager and
  with CUDA graphs (needs --mnist DIR); then the first 20 steps of the fast setting with
  CUDA graphs under `--profile` (trace, operator table and step times among the steps' files);
- resnet: benchmarks/gpu_resnet_throughput.py: trainscale vs a bare loop, both with CUDA
  graphs (bf16), then both eager in fp32 and bf16, then compile vs eager, each in rounds;
- tests: tests/gpu (every workload in three precisions, compile, JAX on CUDA, NVML energy,
  bench's GPU rungs, recommend's GPU settings), run in parallel processes since they assert
  behaviour, not speed (after the timed steps, which need a quiet machine);
- bench: `trainscale bench --quick` of mnist-cnn, CPU rungs and GPU rungs in the same
  rounds (the GPU verdict line); on 16 cores a round takes about 3 minutes;
- platforms: the platform study's GPU rows (benchmarks/platforms_gpu.toml: mnist-cnn,
  mnist-dbn, imdb-bilstm, imdb-bigru on real data to their targets; needs --mnist and
  --imdb in one folder);
- workloads: each workload's default recipe on the GPU and on the CPU (one process, every
  core), a short synthetic run each: samples per second side by side; then the simulator's
  prediction of each GPU step without that workload's runs (benchmarks/simulator_one_device.py:
  from the probe, and held out from the other workloads' runs).

Every step writes one line to DIR/results.jsonl and its output files into DIR/steps.tar;
the store (DIR/trainscale.db) holds every run. Nothing here asserts: tests/gpu does; this
records. On one H200 with 16 host cores: machine 30 s; mnist 3 to 4 minutes (three seeds,
each the fast setting eager and with CUDA graphs, and the examples recipe); workloads about
5 minutes (a GPU and a CPU run of each workload, 17 to 36 s each, then the simulator); resnet
about 10 (its three comparisons; the first two fit a call); tests about 4; bench 7. Within 8
minutes a call: `--only machine,mnist`, `--only machine,workloads`, `--only machine,resnet`,
`--only tests`, `--only machine,bench`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from trainscale.workloads import builtin_workload_names

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gpu_mnist_time_to_accuracy import FAST, GRAPHS  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORKLOADS = builtin_workload_names()


@dataclass(frozen=True)
class Step:
    """One command of the check: its group (for --only), name, time cap and argv."""

    group: str
    name: str
    cap_s: int
    argv: list[str]


def plan(out: Path, mnist: Path | None, steps_dir: Path, imdb: Path | None = None) -> list[Step]:
    """The steps in the order they run (the platform study's GPU rows only with both MNIST
    and IMDB at hand, found in one data folder)."""
    py = sys.executable
    ts = [py, "-m", "trainscale"]
    store = ["--store", str(out / "trainscale.db")]
    steps = [
        Step(
            "machine",
            "nvidia_smi",
            20,
            [
                "nvidia-smi",
                "--query-gpu=name,memory.total,driver_version,clocks.max.sm,power.limit",
                "--format=csv",
            ],
        ),
        Step("machine", "env", 60, [*ts, "env", "--json"]),
        # The full matmul and copy probe (seconds on a GPU; a quick one is not a figure): the
        # runs after it in the store are rated against it (`mfu_vs_probe`).
        Step("machine", "probe", 90, [*ts, "probe", "--device", "cuda", "--json", *store]),
    ]
    if mnist is not None:
        steps.append(
            Step(
                "mnist",
                "mnist_time_to_99",
                240,
                [
                    py,
                    "benchmarks/gpu_mnist_time_to_accuracy.py",
                    # The default recipe's three seeds are measured (docs/benchmarks.md);
                    # the fast setting eager and with CUDA graphs, side by side.
                    "--sides",
                    "fast,graphs",
                    "--out",
                    str(out / "gpu_mnist_time_to_accuracy.json"),
                ],
            )
        )
        # Where the fastest setting's steps go (CUDA graphs: 2.3-2.7 ms a step, with the
        # forward and backward replayed; eager, the first step took 164 ms of first kernel
        # launches, since warmed up off the clock): the profiler's files land among the
        # steps' files.
        steps.append(
            Step(
                "mnist",
                "mnist_profile",
                90,
                [
                    *ts,
                    "run",
                    "mnist-cnn",
                    "--device",
                    "cuda",
                    *shlex.split(FAST),
                    *shlex.split(GRAPHS),
                    "--profile",
                    str(steps_dir),
                    "--profile-steps",
                    "20",
                    "--tag",
                    "gpu-check-profile",
                    "--quiet",
                    "--json",
                    *store,
                ],
            )
        )
    for name, compare, cap in (
        ("resnet_graphs", "graphs", 200),
        ("resnet_throughput", "loops", 240),
        ("resnet_compile", "compile", 200),
    ):
        steps.append(
            Step(
                "resnet",
                name,
                cap,
                [
                    py,
                    "benchmarks/gpu_resnet_throughput.py",
                    "--compare",
                    compare,
                    "--rounds",
                    "3",
                    *store,
                    "--out",
                    str(out / f"gpu_{name}.json"),
                ],
            )
        )
    steps.append(
        Step(
            "tests",
            "tests_gpu",
            240,
            [
                py,
                "-m",
                "pytest",
                "tests/gpu",
                "-n",
                "8",
                "-v",
                "-rA",
                "-p",
                "no:cacheprovider",
                "-p",
                "no:benchmark",
                "--timeout",
                "200",
                "--junitxml",
                str(steps_dir / "tests_gpu.xml"),
            ],
        )
    )
    for workload in ("mnist-cnn",):
        steps.append(
            Step(
                "bench",
                f"bench_{workload}",
                420,
                [
                    *ts,
                    "bench",
                    "--workload",
                    workload,
                    "--quick",
                    "--data",
                    "synthetic",
                    *store,
                    "--out",
                    str(steps_dir / f"bench_{workload}.md"),
                ],
            )
        )
    for workload in WORKLOADS:
        for device, steps_n in (("cuda", "60"), ("cpu", "15")):
            steps.append(
                Step(
                    "workloads",
                    f"{device}_{workload}",
                    60,
                    [
                        *ts,
                        "run",
                        workload,
                        "--device",
                        device,
                        "--data",
                        "synthetic",
                        "--no-eval",
                        "--steps",
                        steps_n,
                        "--warmup-steps",
                        "5",
                        "--tag",
                        "gpu-check",
                        "--quiet",
                        "--json",
                        *store,
                    ],
                )
            )
    # After every workload's GPU run: each one's step predicted without its own runs, from
    # the probe (uncalibrated) and from the other workloads' runs (held out).
    steps.append(
        Step(
            "workloads",
            "simulator_one_device",
            120,
            [
                py,
                "benchmarks/simulator_one_device.py",
                *store,
                "--device",
                "cuda",
                "--out",
                str(steps_dir / "simulator_one_device.json"),
            ],
        )
    )
    if mnist is not None and imdb is not None:
        # Both in one folder, where the product's data search finds them by name.
        data = ["env", f"TRAINSCALE_DATA_DIR={mnist.parent}"]
        steps.append(
            Step(
                "platforms",
                "platforms_gpu",
                300,
                [
                    *data,
                    *ts,
                    "sweep",
                    "benchmarks/platforms_gpu.toml",
                    *store,
                    "--report",
                    str(steps_dir / "platforms_gpu_report"),
                ],
            )
        )
    return steps


def last_json(text: str) -> object:
    """The command's JSON answer: the whole output, else its last line that is an object."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def run_step(step: Step, steps_dir: Path, cap_s: float, grace_s: float = 15.0) -> dict:
    """Run one step under `cap_s`; its record (rc, seconds, tails, JSON answer).

    A step past its cap is interrupted (SIGINT, its whole process group) and given `grace_s`
    to finish before what is left of it is killed: pytest then prints its summary (the
    failures so far, by name) and a trainscale run stores itself as interrupted, instead of
    both vanishing mid-line.
    """
    started = time.perf_counter()
    stdout, stderr = steps_dir / f"{step.name}.out", steps_dir / f"{step.name}.err"
    with stdout.open("w") as out_file, stderr.open("w") as err_file:
        try:
            # Its own process group, so the interrupt reaches what the step started too (a
            # benchmark's trainscale runs, their workers), as Ctrl-C in a terminal would.
            process = subprocess.Popen(
                step.argv, cwd=ROOT, stdout=out_file, stderr=err_file, start_new_session=True
            )
        except OSError as error:  # e.g. nvidia-smi missing
            err_file.write(f"{error}\n")
            process = None
        rc: int | None = 127
        if process is not None:
            try:
                rc = process.wait(timeout=cap_s)
            except subprocess.TimeoutExpired:
                rc = None
                os.killpg(process.pid, signal.SIGINT)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=grace_s)
                with contextlib.suppress(ProcessLookupError):  # what is left of the group
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    text, errors = stdout.read_text(), stderr.read_text()
    record: dict = {
        "name": step.name,
        "rc": rc,
        "timed_out": rc is None,
        "seconds": round(time.perf_counter() - started, 1),
        "out_tail": text.splitlines()[-15:],
    }
    if rc != 0:
        record["err_tail"] = errors.splitlines()[-15:]
    answer = last_json(text)
    if isinstance(answer, dict):
        record["json"] = answer
    return record


def archive_step_files(tar_path: Path, steps_dir: Path, archived: set[str]) -> None:
    """Append the files a step left in `steps_dir` to one tar beside the results.

    One file, not a folder of them: a machine lent for the check may return only a few
    files from its results folder, and each step leaves two or three.
    """
    with tarfile.open(tar_path, "a") as tar:
        for path in sorted(steps_dir.iterdir()):
            if path.is_file() and path.name not in archived:
                tar.add(path, arcname=f"steps/{path.name}")
                archived.add(path.name)


def run_all(steps: list[Step], out: Path, steps_dir: Path, budget_s: float) -> None:
    """Run `steps` in order within `budget_s`; each one's record goes to out/results.jsonl
    and its files to out/steps.tar as it ends, so a check stopped at a limit keeps both."""
    deadline = time.perf_counter() + budget_s
    archived: set[str] = set()
    with (out / "results.jsonl").open("a") as results:
        for step in steps:
            left = deadline - time.perf_counter()
            if left < 15:
                record: dict = {"name": step.name, "skipped": "budget spent"}
            else:
                print(f"{time.strftime('%H:%M:%S')} {step.name} ...", flush=True)
                record = run_step(step, steps_dir, min(step.cap_s, left))
                archive_step_files(out / "steps.tar", steps_dir, archived)
            results.write(json.dumps(record, default=str) + "\n")
            results.flush()
            shown = {k: v for k, v in record.items() if k not in ("json", "out_tail")}
            print(f"  {json.dumps(shown, default=str)[:600]}", flush=True)
            if record.get("out_tail"):
                print("  | " + "\n  | ".join(record["out_tail"][-4:]), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget", type=float, default=520.0, help="seconds for all steps")
    parser.add_argument("--only", default="", help="comma-separated groups to run")
    parser.add_argument("--mnist", type=Path, default=None, help="a folder with MNIST files")
    parser.add_argument(
        "--imdb", type=Path, default=None, help="a folder with aclImdb/, beside --mnist's"
    )
    parser.add_argument(
        "--steps-dir", type=Path, default=None, help="where steps write (default: a temp dir)"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps only")
    args = parser.parse_args()
    steps_dir = args.steps_dir or Path(tempfile.mkdtemp(prefix="gpu-check-steps-"))
    steps_dir.mkdir(parents=True, exist_ok=True)
    groups = {g for g in args.only.split(",") if g}
    steps = [
        s
        for s in plan(args.out, args.mnist, steps_dir, args.imdb)
        if not groups or s.group in groups
    ]
    if args.dry_run:
        for step in steps:
            print(f"[{step.group}] {step.name} (cap {step.cap_s}s): {shlex.join(step.argv)}")
        return 0
    if args.mnist is not None:  # the benchmarks find the data where the product looks
        os.environ["TRAINSCALE_DATA_DIR"] = str(args.mnist)
    run_all(steps, args.out, steps_dir, args.budget)
    return 0


if __name__ == "__main__":
    sys.exit(main())
