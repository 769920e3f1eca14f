"""bf16 autocast and torch.compile against fp32 eager, for every reference workload.

    python benchmarks/precision_compile.py [--workloads mnist-cnn ...] [--steps 40] [--rounds 2]

Each workload trains its recipe's batch on synthetic data of the real shapes (the speed of
a step does not depend on the pixel values), one process with every usable core as
threads, in up to four settings: fp32, bf16 (only where this CPU computes bf16 natively),
and each of them with `--compile`. Every setting runs once a round, the order rotated from
round to round; the figure is the median samples/s over the rounds. Compilation is timed
apart (trainscale keeps it off the training clock), and the script asks the question that
decides a default: does compiling pay for itself within the workload's default run, i.e.
is compile time + the recipe's samples / compiled samples/s shorter than the recipe's
samples / eager samples/s? Writes benchmarks/results/precision_compile.json with the
command and the machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import machine_facts, trainscale_run, write_json  # noqa: E402

from trainscale.workloads import get_workload, workload_names  # noqa: E402


def settings(bf16_native: bool) -> list[tuple[str, list[str]]]:
    """(label, run flags) of each setting measured on this machine."""
    precisions = ["fp32", "bf16"] if bf16_native else ["fp32"]
    out = []
    for precision in precisions:
        out.append((precision, ["--precision", precision]))
        out.append((f"{precision}+compile", ["--precision", precision, "--compile"]))
    return out


def compiler_text() -> str | None:
    """The C++ compiler TorchInductor builds CPU kernels with, and its version line."""
    from trainscale.train.compile import inductor_cpu_compiler

    name, path = inductor_cpu_compiler()
    if path is None:
        return None
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    return f"{name} ({path}): {version.splitlines()[0] if version else 'version unknown'}"


def recipe_samples(workload: str) -> int:
    """Training samples of the workload's default run (its recipe's epochs of real data)."""
    spec = get_workload(workload)
    assert spec.synthetic_size is not None
    return round(spec.recipe.epochs * spec.synthetic_size.num_train)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", nargs="+", default=workload_names())
    parser.add_argument("--steps", type=int, default=40, help="steps a run (5 untimed)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--out", default="benchmarks/results/precision_compile.json")
    args = parser.parse_args()
    env = machine_facts()
    compiler = compiler_text()
    store = Path(tempfile.mkdtemp()) / "bench.db"
    measured = settings(bool(env["bf16_native"]))
    rows = []
    for workload in args.workloads:
        runs: dict[str, list[dict]] = {label: [] for label, _ in measured}
        failures: dict[str, str] = {}
        for round_index in range(args.rounds):
            shift = round_index % len(measured)
            for label, flags in measured[shift:] + measured[:shift]:
                try:
                    result = trainscale_run(
                        [workload, "--data", "synthetic", "--steps", str(args.steps), "--no-eval"]
                        + flags,
                        store,
                    )
                except RuntimeError as error:  # a setting that cannot run here is a finding
                    failures.setdefault(label, str(error).splitlines()[-1])
                    print(f"{workload} {label}: failed: {failures[label]}", flush=True)
                    continue
                runs[label].append(result)
                print(
                    f"{workload} {label}: {result['samples_per_s']:.1f} samples/s, compile "
                    f"{result.get('compile_time_s') or 0:.1f} s",
                    flush=True,
                )
        samples = recipe_samples(workload)
        row: dict = {
            "workload": workload,
            "recipe_samples": samples,
            "settings": {},
            "failed": failures,
        }
        for label, _ in measured:
            if not runs[label]:
                continue
            sps = statistics.median(r["samples_per_s"] for r in runs[label])
            compile_s = [r.get("compile_time_s") for r in runs[label] if r.get("compile_time_s")]
            row["settings"][label] = {
                "samples_per_s": sps,
                "samples_per_s_all": [r["samples_per_s"] for r in runs[label]],
                "compile_time_s": statistics.median(compile_s) if compile_s else None,
                "recipe_time_s": samples / sps + (statistics.median(compile_s) if compile_s else 0),
            }
        for precision in ("fp32", "bf16"):
            eager = row["settings"].get(precision)
            compiled = row["settings"].get(f"{precision}+compile")
            if eager and compiled:
                row[f"compile_pays_{precision}"] = (
                    compiled["recipe_time_s"] < eager["recipe_time_s"]
                )
        if "bf16" in row["settings"]:
            row["bf16_speedup"] = (
                row["settings"]["bf16"]["samples_per_s"] / row["settings"]["fp32"]["samples_per_s"]
            )
        rows.append(row)
    payload = {
        "command": " ".join(["python", *sys.argv]),
        "machine": machine_facts(),
        "cxx_compiler": compiler,
        "steps": args.steps,
        "rounds": args.rounds,
        "workloads": rows,
    }
    write_json(Path(args.out), payload)
    for row in rows:
        cells = ", ".join(
            f"{label} {s['samples_per_s']:.0f}/s"
            + (f" (+{s['compile_time_s']:.0f} s compile)" if s["compile_time_s"] else "")
            for label, s in row["settings"].items()
        )
        pays = {k: v for k, v in row.items() if k.startswith("compile_pays")}
        print(f"{row['workload']}: {cells}; {pays}")


if __name__ == "__main__":
    main()
