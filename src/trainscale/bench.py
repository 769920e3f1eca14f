"""The ladder of settings `trainscale bench` measures, and the table it reports.

Every rung trains the same workload at the same global batch size, so the optimisation is
the same and speedups compare like with like. Throughput rungs train a fixed number of
steps; then the fastest sound setting trains the full recipe to report accuracy and time to
target (accuracy is a property of the optimisation, which the rungs share).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from trainscale.config.options import THREADS_TORCH_DEFAULT, RunOptions
from trainscale.metrics import stats


@dataclass(frozen=True)
class Rung:
    """One setting of the ladder."""

    name: str
    options: RunOptions
    cores: int
    """Cores the setting is given (for efficiency = speedup / cores)."""
    note: str = ""
    pitfall: bool = False


@dataclass(frozen=True)
class Skipped:
    """A rung that cannot run on this machine, and why."""

    name: str
    reason: str


def plan_ladder(
    base: RunOptions, num_cores: int, bf16_native: bool, num_gpus: int
) -> list[Rung | Skipped]:
    """The settings to compare on a machine with `num_cores` usable cores."""

    def opts(**changes: Any) -> RunOptions:
        return base.with_(**changes)

    ladder: list[Rung | Skipped] = [
        Rung(
            "serial 1 core (baseline)",
            opts(workers=1, threads_per_worker=1, affinity="compact"),
            cores=1,
        ),
    ]
    if num_cores > 1:
        ladder.append(
            Rung(
                f"1 process, {num_cores} threads",
                opts(workers=1, threads_per_worker=num_cores, affinity="compact"),
                cores=num_cores,
            )
        )
        ladder.append(
            Rung(
                f"{num_cores} pinned workers x 1 thread",
                opts(workers=num_cores, threads_per_worker=1, affinity="compact"),
                cores=num_cores,
            )
        )
    best_cpu = ladder[-1]
    if bf16_native:
        ladder.append(
            Rung(
                f"{best_cpu.name}, bf16",
                best_cpu.options.with_(precision="bf16"),
                cores=best_cpu.cores,
            )
        )
    else:
        ladder.append(
            Skipped(
                "bf16 autocast",
                "this CPU has no native bf16 (AMX or "
                "AVX512-BF16): bf16 is emulated and slower than fp32 here",
            )
        )
    if num_cores > 1:
        ladder.append(
            Rung(
                f"naive DDP: {num_cores} unpinned workers, torch-default threads",
                opts(
                    workers=num_cores,
                    threads_per_worker=THREADS_TORCH_DEFAULT,
                    affinity="none",
                    allow_oversubscribe=True,
                ),
                cores=num_cores,
                note="the oversubscription pitfall",
                pitfall=True,
            )
        )
    if num_gpus:
        ladder.append(Skipped("1 GPU", "GPU training is not supported by this version"))
    else:
        ladder.append(Skipped("1 GPU", "no GPU on this machine"))
    return ladder


@dataclass
class RungResult:
    rung: Rung | Skipped
    result: dict[str, Any] | None = None
    error: str | None = None


def table_rows(results: list[RungResult]) -> list[dict[str, str]]:
    """Rows of the bench table; speedup and efficiency against the first (baseline) rung."""
    baseline = next((r.result for r in results if r.result is not None), None)
    base_sps = baseline["samples_per_s"] if baseline else None
    rows = []
    for item in results:
        row = {
            "setting": item.rung.name,
            "workers x threads": "-",
            "samples/s": "-",
            "step ms (median, IQR)": "-",
            "speedup": "-",
            "efficiency": "-",
            "test acc": "-",
            "time to target": "-",
            "note": "",
        }
        if isinstance(item.rung, Skipped):
            row["note"] = f"skipped: {item.rung.reason}"
        elif item.error is not None:
            row["note"] = f"failed: {item.error}"
        else:
            res = item.result
            threads = res["threads_per_worker"] or "default"
            row["workers x threads"] = f"{res['world_size']} x {threads}"
            row["samples/s"] = f"{res['samples_per_s']:.0f}"
            med = res["step_time_s_median"]
            iqr = res.get("step_time_s_iqr") or 0.0
            row["step ms (median, IQR)"] = f"{med * 1000:.1f} ({iqr / med:.0%})"
            if base_sps:
                s = stats.speedup(base_sps, res["samples_per_s"])
                row["speedup"] = f"{s:.2f}x"
                row["efficiency"] = (
                    f"{stats.efficiency(s, item.rung.cores):.0%} of {item.rung.cores} core(s)"
                )
            if res.get("test_accuracy") is not None:
                row["test acc"] = f"{res['test_accuracy']:.4f}"
                ttt = res.get("time_to_target_s")
                row["time to target"] = f"{ttt:.1f} s" if ttt is not None else "not reached"
            notes = [item.rung.note] if item.rung.note else []
            if iqr / med > 0.10:
                notes.append("noisy: step-time IQR > 10% of median")
            row["note"] = "; ".join(notes)
        rows.append(row)
    return rows


def markdown_table(rows: list[dict[str, str]]) -> str:
    """Rows as a GitHub-flavoured Markdown table."""
    if not rows:
        return ""
    headers = list(rows[0])
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for row in rows:
        lines.append("| " + " | ".join(str(row[h]).replace("|", "/") for h in headers) + " |")
    return "\n".join(lines)
