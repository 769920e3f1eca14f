"""The `env` subcommand: show the machine facts that every stored run records."""

from __future__ import annotations

import argparse
import json
from typing import Any

_GIB = 1024**3


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    """Register `trainscale env [--json]`."""
    parser = subparsers.add_parser(
        "env",
        help="show this machine's CPU, cores, NUMA, bf16 support, GPUs and library versions",
        description=(
            "Show the facts about this machine that every stored run records: CPU model and "
            "flags, usable cores and NUMA layout, memory, native bf16 support, GPUs, library "
            "versions and the git revision of the current directory."
        ),
    )
    parser.add_argument(
        "--json", action="store_true", help="print the facts as one JSON object instead"
    )
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print the environment as a table (default) or JSON; returns the exit status."""
    # Imported here so that `trainscale --help` does not pay for importing torch.
    from trainscale.hardware.facts import collect_environment
    from trainscale.hardware.figures import machine_energy_sources, machine_peaks

    env = collect_environment()
    peaks = machine_peaks(env)
    energy = machine_energy_sources(env)
    if args.json:
        print(json.dumps({**env, "peaks": peaks, "energy_sources": energy}, indent=2))
        return 0

    from rich.console import Console

    console = Console()
    console.print(_table(env))
    console.print(_hardware_table(peaks, energy))
    console.print(bf16_summary(env))
    return 0


def _tflops(value: float) -> str:
    return f"{value:.3g} TFLOP/s" if value >= 1 else f"{value * 1e3:.3g} GFLOP/s"


def _hardware_table(peaks: dict[str, Any], energy: dict[str, str]) -> Any:
    """Peaks (what MFU is measured against) and the energy counters this machine exposes."""
    from rich.table import Table

    table = Table(title="peaks and energy", show_header=False, title_justify="left")
    table.add_column("fact", style="bold")
    table.add_column("value", overflow="fold")
    for precision, peak in peaks["cpu"].items():
        text = (
            f"{_tflops(peak['tflops'])} ({peak['source']})"
            if peak
            else "unknown (no figure for this CPU: runs get no MFU)"
        )
        table.add_row(f"theoretical CPU peak, {precision}", text)
    for gpu in peaks["gpus"]:
        if gpu["tflops"]:
            figures = ", ".join(f"{p} {_tflops(v)}" for p, v in gpu["tflops"].items())
            text = f"{gpu['table_device']}: {figures} (dense; {gpu['source']})"
        else:
            text = "not in the peak table: runs on it get no MFU"
        table.add_row(f"GPU {gpu['index']} peak", text)
    table.add_row("energy: CPU package (RAPL)", energy["cpu_package"])
    table.add_row("energy: GPU (NVML)", energy["gpu"])
    return table


def bf16_summary(env: dict[str, Any]) -> str:
    """The one line that tells whether bf16 autocast can pay off on this CPU."""
    if not env.get("bf16_native"):
        return "bf16 autocast: emulated — expect bf16 to be slower than fp32 on this CPU"
    flags = set(env.get("cpu_flags_of_interest") or ())
    if flags & {"amx_bf16", "avx512_bf16"}:
        return "bf16 autocast: native (AMX/AVX512-BF16)"
    return "bf16 autocast: native (CPU bf16 instructions)"


def _table(env: dict[str, Any]) -> Any:
    from rich.table import Table

    from trainscale.hardware.cpulist import format_cpulist

    table = Table(title="trainscale environment", show_header=False, title_justify="left")
    table.add_column("fact", style="bold")
    table.add_column("value", overflow="fold")

    cpu = env["cpu_model"] or "unknown"
    if env["cpu_vendor"]:
        cpu += f" ({env['cpu_vendor']})"
    usable = env["usable_cores"]
    numa = (
        "; ".join(f"node{n['node']}: {format_cpulist(n['cpus']) or '-'}" for n in env["numa_nodes"])
        or "not reported"
    )
    memory = (
        f"{env['memory_total_bytes'] / _GIB:.1f} GiB total, "
        f"{env['memory_available_bytes'] / _GIB:.1f} GiB available"
    )
    gpus = (
        "\n".join(
            f"{gpu['index']}: {gpu['name']} ({gpu['memory_bytes'] / _GIB:.1f} GiB, "
            f"compute capability {gpu['capability']})"
            for gpu in env["gpus"]
        )
        or "none (CUDA not available)"
    )
    if env["git_revision"] is None:
        git = "not in a git repository (or git unavailable)"
    else:
        git = env["git_revision"][:12] + (" (uncommitted changes)" if env["git_dirty"] else "")

    rows = [
        ("host", env["hostname"]),
        ("os", env["os"]),
        ("python", env["python"]),
        ("torch", env["torch_version"]),
        ("numpy", env["numpy_version"]),
        ("trainscale", env["trainscale_version"]),
        ("cpu", cpu),
        ("logical / physical cores", f"{env['logical_cores']} / {env['physical_cores']}"),
        ("usable cores", f"{format_cpulist(usable)} ({len(usable)})"),
        ("numa nodes", numa),
        ("memory", memory),
        ("torch cpu capability", str(env["cpu_capability"])),
        ("cpu flags of interest", ", ".join(env["cpu_flags_of_interest"]) or "none"),
        ("bf16 native", "yes" if env["bf16_native"] else "no"),
        ("torch threads (default)", str(env["torch_num_threads_default"])),
        ("gpus", gpus),
        ("cuda", env["cuda_version"] or "-"),
        ("git revision", git),
    ]
    for fact, value in rows:
        table.add_row(fact, str(value))
    return table
