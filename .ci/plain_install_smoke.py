"""Every command once, as a new user has it: the README's plain install (Quick start,
command 1: `pip install -c constraints.txt .`, no extras) in a fresh virtual environment,
then each command with small, realistic arguments on a store in a temporary folder.

A command passes when it exits 0 where it should, or, where it needs an extra the plain
install lacks, exits non-zero with one `trainscale:` line naming the extra; never with a
traceback or a ModuleNotFoundError. The test venv installs every extra (and what they pull
in), so only this run sees what the plain install lacks.

Usage: python .ci/plain_install_smoke.py [--venv DIR]   (DIR: reuse an installed venv)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Check:
    name: str
    argv: list[str]
    needs_extra: str | None = None
    """The extra whose absence the command must report in one line (it exits non-zero)."""
    refused: str | None = None
    """Text of the one-line error the command must give here (no real data, by design)."""


def install(venv: Path) -> None:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "pip"), "install", "-q", "-c", "constraints.txt", "."]
    subprocess.run(pip, cwd=ROOT, check=True)


def verdict(check: Check, done: subprocess.CompletedProcess[str]) -> str | None:
    """Why the command failed the check; None when it passed."""
    text = done.stdout + done.stderr
    for bad in ("Traceback", "ModuleNotFoundError"):
        if bad in text:
            return f"{bad} in its output"
    expected = check.refused
    if check.needs_extra is not None:
        expected = f"pip install 'trainscale[{check.needs_extra}]'"
    if expected is None:
        return None if done.returncode == 0 else f"exit {done.returncode}"
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    if done.returncode == 0:
        return f"exit 0, not the error `{expected}`"
    if not lines or not lines[-1].startswith("trainscale:"):
        return "no one-line `trainscale:` error"
    if expected not in lines[-1]:
        return f"its error does not say `{expected}`"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", type=Path, help="an existing venv with the plain install")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="trainscale-smoke-") as temp:
        tmp = Path(temp)
        # Absolute: the commands run in a folder of their own, and a relative PATH entry
        # would fall through to whatever venv the caller has active.
        venv = args.venv.resolve() if args.venv is not None else None
        started = time.monotonic()
        if venv is None:
            venv = tmp / "venv"
            install(venv)
            print(f"plain install: {time.monotonic() - started:.0f} s", flush=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRAINSCALE_")}
        env.update(
            TRAINSCALE_STORE=str(tmp / "store.db"),
            XDG_CACHE_HOME=str(tmp / "cache"),
            MPLCONFIGDIR=str(tmp / "mpl"),
            PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
            # Any download goes to a closed port and fails: nothing here may need the network.
            HTTP_PROXY="http://127.0.0.1:9",
            HTTPS_PROXY="http://127.0.0.1:9",
            http_proxy="http://127.0.0.1:9",
            https_proxy="http://127.0.0.1:9",
        )
        env.pop("VIRTUAL_ENV", None)

        def call(argv: list[str]) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                argv, cwd=tmp, env=env, capture_output=True, text=True, timeout=600
            )

        failed = 0
        checked = 0

        def check(c: Check) -> subprocess.CompletedProcess[str]:
            nonlocal failed, checked
            began = time.monotonic()
            done = call(c.argv)
            why = verdict(c, done)
            checked += 1
            failed += why is not None
            seconds = time.monotonic() - began
            print(
                f"{'FAIL' if why else 'ok  '} {c.name:<42} exit {done.returncode:<3} "
                f"{seconds:6.1f} s{'  ' + why if why else ''}",
                flush=True,
            )
            if why:
                print(
                    "\n".join(
                        "    " + line for line in (done.stdout + done.stderr).splitlines()[-15:]
                    )
                )
            return done

        ts = "trainscale"
        synth = ["--data", "synthetic"]
        short = [*synth, "--steps", "6", "--no-eval"]
        for c in [
            Check("--version", [ts, "--version"]),
            Check("env", [ts, "env"]),
            Check("workloads", [ts, "workloads"]),
            Check("recipes", [ts, "recipes"]),
        ]:
            check(c)
        first = check(Check("run", [ts, "run", "mnist-cnn", *short, "--json", "--quiet"]))
        second = check(
            Check(
                "run --workers 2",
                [ts, "run", "mnist-cnn", *short, "--workers", "2", "--json", "--quiet"],
            )
        )
        ids = []
        for done in (first, second):
            try:
                ids.append(json.loads(done.stdout)["run_id"])
            except (ValueError, KeyError):
                ids.append("missing")
        api = (
            "import trainscale\n"
            "r = trainscale.run('mnist-cnn', data='synthetic', steps=4, evaluate=False)\n"
            "print(r.run_id)\n"
        )
        predicted = (
            "import trainscale\n"
            "p = trainscale.simulate('mnist-cnn', cluster='v100-nvlink-ib', workers=[1, 2])\n"
            "print(p.speedups)\n"
        )
        probed = (
            "import trainscale\n"
            "m = trainscale.probe(quick=True, only=['matmul'])\n"
            "print(m.matmul_flops_per_s)\n"
            "assert len(trainscale.probes(kind='matmul')) >= 1\n"
            "print(trainscale.env().host)\n"
        )
        frames = (
            "import sys, trainscale\n"
            "from trainscale.errors import TrainscaleError\n"
            "try:\n"
            "    trainscale.runs().to_dataframe()\n"
            "except TrainscaleError as error:\n"
            "    sys.exit(f'trainscale: error: {error}')\n"
        )
        out = tmp / "out"
        for c in [
            Check(
                "run --framework tensorflow",
                [ts, "run", "mnist-cnn", *short, "--framework", "tensorflow"],
                "tensorflow",
            ),
            Check(
                "run --framework jax", [ts, "run", "mnist-cnn", *short, "--framework", "jax"], "jax"
            ),
            Check("python -c trainscale.run(...)", [str(venv / "bin" / "python"), "-c", api]),
            Check(
                "python -c trainscale.simulate(...)",
                [str(venv / "bin" / "python"), "-c", predicted],
            ),
            Check(
                "python -c trainscale.probe(...), probes(), env()",
                [str(venv / "bin" / "python"), "-c", probed],
            ),
            Check(
                "run SCRIPT.py -- ARGS (own script)",
                [
                    *(ts, "run", str(ROOT / "examples" / "mnist_script.py"), *synth, "--quiet"),
                    *("--", "--max-steps", "4", "--train-samples", "256", "--test-samples", "64"),
                ],
            ),
            Check(
                "python -c runs().to_dataframe()",
                [str(venv / "bin" / "python"), "-c", frames],
                "pandas",
            ),
            Check(
                "bench --quick",
                [
                    ts,
                    "bench",
                    "--quick",
                    *synth,
                    "--steps",
                    "4",
                    "--rounds",
                    "1",
                    "--out",
                    str(tmp / "bench.md"),
                ],
            ),
            Check("runs list", [ts, "runs", "list"]),
            Check("runs show", [ts, "runs", "show", ids[0]]),
            Check("runs sweeps", [ts, "runs", "sweeps"]),
            Check(
                "runs import",
                [ts, "runs", "import", str(tmp / "store.db"), "--store", str(tmp / "copy.db")],
            ),
            Check(
                "runs delete",
                [ts, "runs", "delete", "--status", "completed", "--yes"]
                + ["--store", str(tmp / "copy.db")],
            ),
            Check(
                "runs export csv",
                [ts, "runs", "export", "--format", "csv", "--out", str(tmp / "runs.csv")],
            ),
            Check(
                "runs export json",
                [ts, "runs", "export", "--format", "json", "--out", str(tmp / "runs.json")],
            ),
            Check(
                "runs export mlflow",
                [
                    ts,
                    "runs",
                    "export",
                    "--format",
                    "mlflow",
                    "--tracking-uri",
                    f"sqlite:///{tmp / 'mlflow.db'}",
                ],
                "mlflow",
            ),
            Check(
                "runs export tensorboard",
                [ts, "runs", "export", "--format", "tensorboard", "--out", str(tmp / "tb")],
                "tensorboard",
            ),
            Check(
                "sweep --dry-run",
                [ts, "sweep", "--recipe", "cpu-parallel", "--quick", *synth, "--dry-run"],
            ),
            Check("report", [ts, "report", "--runs", *ids, "--out", str(out / "report")]),
            Check("compare", [ts, "compare", *ids]),
            Check(
                "recommend",
                [
                    ts,
                    "recommend",
                    "mnist-cnn",
                    "--quick",
                    *synth,
                    "--budget-s",
                    "30",
                    "--max-workers",
                    "1",
                    "--rung-steps",
                    "2",
                    "--warmup-steps",
                    "1",
                ],
            ),
            Check("probe --quick", [ts, "probe", "--quick"]),
            Check("runs probes", [ts, "runs", "probes"]),
            Check(
                "simulate",
                [
                    ts,
                    "simulate",
                    "mnist-cnn",
                    "--cluster",
                    "v100-nvlink-ib",
                    "--workers",
                    "1,2,4",
                    "--plot",
                    str(out / "sim"),
                ],
            ),
            Check("simulate --list-clusters", [ts, "simulate", "--list-clusters"]),
            Check("simulate --validate", [ts, "simulate", "--validate"]),
            Check("simulate --list-published", [ts, "simulate", "--list-published"]),
            Check("simulate --validate-published", [ts, "simulate", "--validate-published"]),
            Check(
                "simulate --fit-to",
                [ts, "simulate", "--fit-to", "tf-benchmarks-k80-p2-8xlarge-resnet50"],
            ),
            Check(
                "emulate",
                [
                    ts,
                    "emulate",
                    "mnist-cnn",
                    "--workers",
                    "1,2",
                    "--mode",
                    "sync",
                    *synth,
                    "--steps",
                    "4",
                    "--quiet",
                ],
                # It measures accuracy, so synthetic data is refused; the plain install has
                # no dataset and must not download one.
                refused="emulation needs real data",
            ),
            Check(
                "predict-time-to-accuracy",
                [ts, "predict-time-to-accuracy", "mnist-cnn", "--cluster", "v100-nvlink-ib"],
                refused="no completed emulation",
            ),
        ]:
            check(c)
        print(
            f"{checked} commands checked, {failed} failed "
            f"({time.monotonic() - started:.0f} s in all)"
        )
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
