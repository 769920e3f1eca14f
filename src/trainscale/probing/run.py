"""Plan a probe from the user's options, measure, and store every measurement.

Everything a user can get wrong (devices, worker and thread counts, sizes) is checked before
anything is measured, and fails as one `ConfigError` line.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainscale.errors import ConfigError
from trainscale.hardware.contention import BUSY, ContentionSampler, busiest_processes
from trainscale.hardware.facts import physical_cores_among, read_cpu_facts, usable_cores
from trainscale.hardware.peaks import cpu_peak, gpu_peak
from trainscale.hardware.resources import WORKER_PROCESS_BYTES, check_memory
from trainscale.parallel.affinity import oversubscription_message
from trainscale.probing.options import (
    BYTES_PER_ELEMENT,
    CPU_PRECISIONS,
    CUDA_PRECISIONS,
    KIB,
    KINDS,
    MAX_REPEATS,
    MAX_TIMEOUT_S,
    MIB,
    ProbeOptions,
    whole_elements,
)
from trainscale.results.store import RunStore, default_store_path


@dataclass(frozen=True)
class ProbePlan:
    """A resolved probe: every value concrete."""

    device_type: str
    kinds: tuple[str, ...]
    skipped: dict[str, str]
    """Measurements left out, with the reason."""
    threads: int | None
    workers: int
    precisions: tuple[str, ...]
    matmul_sizes: tuple[int, ...]
    transfer_sizes: tuple[int, ...]
    message_sizes: tuple[int, ...]
    repeats: int
    target_bytes: int
    min_batch_s: float
    budget_s: float
    """Most seconds spent timing one matmul size."""
    timeout_s: float
    quick: bool = False
    """Stored with each figure: a quick probe is a smoke test, never a run's yardstick."""


def format_bytes(size: float) -> str:
    """4096 -> '4 KiB', 67108864 -> '64 MiB'."""
    for unit, scale in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", KIB)):
        if size >= scale:
            return f"{size / scale:g} {unit}"
    return f"{size:g} B"


def _visible_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def plan_probe(opts: ProbeOptions, gpus: int | None = None, cores: int | None = None) -> ProbePlan:
    """Resolve and check `opts`; `gpus` and `cores` replace the machine's counts (tests)."""
    gpus = _visible_gpus() if gpus is None else gpus
    cores = len(usable_cores()) if cores is None else cores
    if opts.device not in ("cpu", "cuda", "auto"):
        raise ConfigError(f"--device must be cpu, cuda or auto, not {opts.device!r}")
    device = opts.device if opts.device != "auto" else ("cuda" if gpus else "cpu")
    if device == "cuda" and not gpus:
        raise ConfigError("--device cuda, but no CUDA GPU is visible to torch; use --device cpu")

    if opts.workers is not None and opts.workers < 1:
        raise ConfigError(f"--workers must be at least 1, got {opts.workers}")
    if device == "cuda":
        workers = opts.workers if opts.workers is not None else gpus
        if workers > gpus:
            raise ConfigError(
                f"--workers {workers} GPU workers but only {gpus} GPU(s) visible; "
                f"use --workers {gpus} or fewer (one process per GPU)"
            )
    else:
        workers = opts.workers if opts.workers is not None else 2
    if opts.threads is not None and opts.threads < 1:
        raise ConfigError(f"--threads must be at least 1, got {opts.threads}")
    if opts.threads is not None and opts.threads > cores:
        raise ConfigError(
            f"--threads {opts.threads} exceeds the {cores} usable core(s): a matmul probe with "
            "more threads than cores times the scheduler, not the machine"
        )
    threads = (opts.threads or cores) if device == "cpu" else None
    if opts.repeats is not None and opts.repeats < 1:
        raise ConfigError(f"--repeats must be at least 1, got {opts.repeats}")
    if not 0 < opts.timeout_s <= MAX_TIMEOUT_S:  # NaN fails too
        raise ConfigError(
            f"--timeout must be a positive number of seconds up to {MAX_TIMEOUT_S:g} (a day), "
            f"got {opts.timeout_s:g}"
        )

    valid_precisions = CUDA_PRECISIONS if device == "cuda" else CPU_PRECISIONS
    precisions = opts.precisions or _default_precisions(device)
    for precision in precisions:
        if precision not in valid_precisions:
            raise ConfigError(
                f"--precisions: {precision!r} cannot be probed on {device}; "
                f"choose from {', '.join(valid_precisions)}"
            )

    skipped: dict[str, str] = {}
    kinds = tuple(opts.only) if opts.only else KINDS
    for kind in kinds:
        if kind not in KINDS:
            raise ConfigError(
                f"--only: unknown measurement {kind!r}; choose from {', '.join(KINDS)}"
            )
    if "transfer" in kinds and device != "cuda":
        if opts.only:
            raise ConfigError("--only transfer measures host-device copies and needs --device cuda")
        skipped["transfer"] = "no GPU: host-device bandwidth needs --device cuda"
    if "allreduce" in kinds and workers < 2:
        if opts.only and "allreduce" in opts.only:
            raise ConfigError(f"--only allreduce needs at least 2 workers, got --workers {workers}")
        skipped["allreduce"] = f"{workers} worker: an all-reduce needs at least 2"
    if "allreduce" in kinds and "allreduce" not in skipped and device == "cpu":
        defaulted = opts.workers is None and not opts.allow_oversubscribe
        if defaulted and workers > cores and not (opts.only and "allreduce" in opts.only):
            skipped["allreduce"] = (
                f"{cores} usable core: an all-reduce of {workers} workers would oversubscribe "
                f"it (pass --workers {workers} --allow-oversubscribe to measure it anyway)"
            )
        else:
            _check_cpu_workers(workers, cores, opts.allow_oversubscribe)
    kinds = tuple(k for k in kinds if k not in skipped)

    quick = opts.quick
    if device == "cuda":
        matmul_sizes = (1024, 2048) if quick else (2048, 4096, 8192)
        repeats = 3 if quick else 10
    else:
        matmul_sizes = (128, 256) if quick else (512, 1024, 2048)
        repeats = 3 if quick else 5
    # 4 KiB .. 4 MiB (quick) or .. 64 MiB, by x4: up to sizes where bandwidth, not latency,
    # sets the time, or the fit has no slope to find.
    message_sizes = tuple(4 * KIB * 4**i for i in range(6 if quick else 8))
    given = (("--matmul-sizes", opts.matmul_sizes), ("--message-sizes", opts.message_sizes))
    for name, sizes in given:
        if sizes is not None and (not sizes or any(s < 1 for s in sizes)):
            raise ConfigError(f"{name} must be positive sizes, got {list(sizes)}")
    # A message is whole float32 elements: 1 and 3 bytes are both one element, one size.
    messages = sorted({whole_elements(size) for size in opts.message_sizes or message_sizes})
    if len(messages) < 2 and "allreduce" in kinds:
        asked = sorted(set(opts.message_sizes or ()))
        why = f"got {','.join(map(str, asked))} bytes"
        if len(asked) > 1:
            why += f", one size once rounded down to whole float32 elements ({BYTES_PER_ELEMENT} B)"
        raise ConfigError(f"--message-sizes needs at least two sizes for the alpha-beta fit; {why}")
    if opts.repeats is not None and opts.repeats > MAX_REPEATS:
        raise ConfigError(
            f"--repeats must be at most {MAX_REPEATS} (the best of that many batches no "
            f"longer moves; all-reduce batches have no time budget), got {opts.repeats}"
        )
    plan = ProbePlan(
        device_type=device,
        kinds=kinds,
        skipped=skipped,
        threads=threads,
        workers=workers,
        precisions=tuple(precisions),
        matmul_sizes=tuple(opts.matmul_sizes or matmul_sizes),
        transfer_sizes=(MIB, 16 * MIB) if quick else (MIB, 16 * MIB, 256 * MIB),
        message_sizes=tuple(messages),
        repeats=opts.repeats or repeats,
        target_bytes=(16 if quick else 256) * MIB,
        min_batch_s=0.02 if quick else 0.1,
        budget_s=5.0 if quick else 30.0,
        timeout_s=opts.timeout_s,
        quick=quick,
    )
    if device == "cpu":
        check_probe_memory(plan)
    else:
        check_gpu_probe_memory(plan, _free_gpu_bytes())
    return plan


def _free_gpu_bytes() -> int | None:
    """The free memory of GPU 0, where the matmul runs (None where torch cannot say)."""
    import torch

    if not torch.cuda.is_available():
        return None
    return int(torch.cuda.mem_get_info(0)[0])


def check_gpu_probe_memory(plan: ProbePlan, free_bytes: int | None) -> None:
    """ConfigError when the largest matmul, or all-reduce message, cannot fit in a GPU's
    `free_bytes`: the matmul on GPU 0 (`_check_matmul_fits`); an all-reduce worker's message
    and NCCL's copy of it on its own GPU. None: not checked."""
    if free_bytes is None:
        return
    where = "on GPU 0"  # its free memory
    _check_matmul_fits(plan, free_bytes, where)
    if "allreduce" in plan.kinds:
        size = max(plan.message_sizes)
        check_memory(
            2 * size,
            f"an all-reduce message of {format_bytes(size)} on each GPU",
            "give smaller --message-sizes",
            free_bytes,
            where,
        )


def check_probe_memory(plan: ProbePlan, available: int | None = None) -> None:
    """ConfigError when the largest matmul or all-reduce message cannot fit in host memory
    (`_check_matmul_fits`). Each all-reduce worker holds its message and gloo a copy of it.
    """
    _check_matmul_fits(plan, available)
    if "allreduce" in plan.kinds:
        size = max(plan.message_sizes)
        check_memory(
            plan.workers * (2 * size + WORKER_PROCESS_BYTES),
            f"an all-reduce of {format_bytes(size)} over {plan.workers} workers",
            "give smaller --message-sizes or fewer --workers",
            available,
        )


def _check_matmul_fits(
    plan: ProbePlan, available: int | None, where: str = "on this machine"
) -> None:
    """A matmul of size n holds A, B and C (and A and B once more in fp32 while they are
    cast): 4 n^2 x 4 bytes at most, which must fit in the memory `available` (`where`)."""
    if "matmul" in plan.kinds:
        n = max(plan.matmul_sizes)
        check_memory(
            4 * n * n * 4,
            f"a matmul of size {n} (A, B and C of {n}x{n})",
            "give smaller --matmul-sizes",
            available,
            where,
        )


def _check_cpu_workers(workers: int, cores: int, allow_oversubscribe: bool) -> None:
    """The guard `trainscale run` applies: one thread per all-reduce worker, so more workers
    than cores oversubscribe the machine (refused unless allowed), and never more processes
    than the machine can start."""
    from trainscale.hardware.resources import check_worker_count, open_file_limit

    if workers > cores and not allow_oversubscribe and cores < 2:
        # The usual advice, fewer workers, leaves fewer than an all-reduce needs.
        raise ConfigError(
            f"an all-reduce needs at least 2 workers and this machine has {cores} usable "
            f"core: pass --workers {max(workers, 2)} --allow-oversubscribe to measure it "
            "anyway (the all-reduce then times the scheduler as well as gloo)"
        )
    if workers > cores and not allow_oversubscribe:
        raise ConfigError(
            oversubscription_message(
                workers, 1, cores, consequence="the all-reduce times the scheduler, not gloo"
            )
        )
    check_worker_count(workers, cores, open_file_limit())


def _default_precisions(device: str) -> tuple[str, ...]:
    if device == "cpu":
        return CPU_PRECISIONS
    import torch

    # bf16 and TF32 need Ampere or later (compute capability 8.0): before it, a "tf32" probe
    # would time fp32 again under another name. fp16 tensor cores are probed wherever.
    ampere = torch.cuda.is_available() and torch.cuda.get_device_capability() >= (8, 0)
    return tuple(
        p
        for p in CUDA_PRECISIONS
        if (p != "bf16" or torch.cuda.is_bf16_supported(False)) and (p != "tf32" or ampere)
    )


def probe_device_name(device_type: str, gpu_index: int = 0) -> str:
    """The name a probe is stored under: the CPU model, or the GPU's name."""
    if device_type == "cuda":
        import torch

        return torch.cuda.get_device_name(gpu_index)

    # The same name a run's MFU looks its probe up by (trainscale.hardware.figures).
    return read_cpu_facts().model_name or "cpu"


def theoretical_peaks(
    device_type: str, device_name: str, precisions: Sequence[str], cores: int | None
) -> dict[str, dict[str, Any] | None]:
    """The table's peak for each probed precision (one GPU, or the cores the probe used)."""
    peaks: dict[str, dict[str, Any] | None] = {}
    facts = read_cpu_facts() if device_type == "cpu" else None
    for precision in precisions:
        if facts is not None:
            # The probe's threads run on the usable CPUs: their physical cores at most.
            physical = physical_cores_among(usable_cores())
            peak = cpu_peak(facts, precision, min(cores or 1, physical))
        else:
            peak = gpu_peak(device_name, precision, 1)
        peaks[precision] = None if peak is None else peak.to_dict()
    return peaks


def execute_probe(plan: ProbePlan, store_path: Path | None, progress: Any = None) -> dict[str, Any]:
    """Measure what `plan` says and store each measurement; returns the `--json` object."""
    import torch

    from trainscale.hardware.facts import collect_environment

    say = progress or (lambda message: None)
    file = Path(store_path) if store_path else default_store_path()
    # Open the store before measuring: minutes of measurement must not end in "cannot
    # write the store".
    RunStore(file).close()
    env = collect_environment()
    host = env["hostname"]
    device_type = plan.device_type
    device = torch.device("cuda", 0) if device_type == "cuda" else torch.device("cpu")
    name = probe_device_name(device_type)
    out: dict[str, Any] = {
        "host": host,
        "device_type": device_type,
        "device": name,
        "skipped": dict(plan.skipped),
        "quick": plan.quick,
    }
    measured: list[tuple[str, dict[str, Any], int | None]] = []
    # What else used the machine while the probe measured: a busy probe's figures are the
    # neighbours' as much as the machine's (the busy rule, metrics/run_flags.py).
    sampler = ContentionSampler().start()
    try:
        if "matmul" in plan.kinds:
            sizes = ", ".join(map(str, plan.matmul_sizes))
            say(f"matmul: {', '.join(plan.precisions)} at n = {sizes}")
            from trainscale.probing.matmul import measure_matmul

            with _intra_op_threads(plan.threads):
                result = measure_matmul(
                    device,
                    plan.precisions,
                    plan.matmul_sizes,
                    plan.repeats,
                    plan.min_batch_s,
                    plan.budget_s,
                )
            result["threads"] = plan.threads
            peaks = theoretical_peaks(device_type, name, plan.precisions, plan.threads)
            result["theoretical_peak"] = peaks
            for precision, figures in result["precisions"].items():
                peak = peaks.get(precision)
                figures["fraction_of_theoretical_peak"] = (
                    figures["best_flops_per_s"] / (peak["tflops"] * 1e12) if peak else None
                )
            measured.append(("matmul", result, None))
            out["matmul"] = result

        if "dispatch" in plan.kinds:
            say("per-operator overhead: training steps of a network of negligible arithmetic")
            from trainscale.probing.dispatch import measure_dispatch

            with _intra_op_threads(plan.threads):
                result = measure_dispatch(device, plan.repeats, plan.min_batch_s, plan.budget_s)
            result["threads"] = plan.threads
            measured.append(("dispatch", result, None))
            out["dispatch"] = result

        if "transfer" in plan.kinds:
            say(f"host-device copies: {', '.join(format_bytes(s) for s in plan.transfer_sizes)}")
            from trainscale.probing.transfer import measure_transfer

            result = measure_transfer(device, plan.transfer_sizes, plan.repeats)
            measured.append(("transfer", result, None))
            out["transfer"] = result

        if "allreduce" in plan.kinds:
            backend = "nccl" if device_type == "cuda" else "gloo"
            say(
                f"all-reduce: {plan.workers} {backend} workers, "
                f"{format_bytes(plan.message_sizes[0])} .. {format_bytes(plan.message_sizes[-1])}"
            )
            from trainscale.parallel.launcher import WorkersFailed
            from trainscale.probing.allreduce import measure_allreduce

            try:
                result = measure_allreduce(
                    plan.workers,
                    backend,
                    plan.message_sizes,
                    plan.repeats,
                    plan.target_bytes,
                    plan.timeout_s,
                )
            except WorkersFailed as failure:
                raise ProbeFailed(f"all-reduce probe failed: {failure.reason}") from None
            measured.append(("allreduce", result, plan.workers))
            out["allreduce"] = result
    finally:
        contention = sampler.stop()
    out["contention"] = contention.to_dict()
    if contention.verdict == BUSY:
        out["busiest"] = [p.text() for p in busiest_processes()]

    ids: dict[str, str] = {}
    with RunStore(file) as store:
        for kind, result, workers in measured:
            result["quick"] = plan.quick
            result["contention"] = out["contention"]
            ids[kind] = store.add_probe(
                kind,
                result,
                env,
                host=host,
                device_type=device_type,
                device=name,
                workers=workers,
            )
    out["probe_ids"] = ids
    out["store"] = str(file)
    return out


@contextmanager
def _intra_op_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op threads set to `threads` (None: left as they are), then restored."""
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def run_probe(
    options: ProbeOptions, store_path: str | Path | None = None, progress: Any = None
) -> dict[str, Any]:
    """Plan the probe `options` ask for (every mistake a ConfigError before anything is
    measured), measure and store it; returns the `--json` object. `progress` is called with
    a line about each measurement as it starts; ProbeFailed when one fails."""
    return execute_probe(plan_probe(options), Path(store_path) if store_path else None, progress)


class ProbeFailed(Exception):
    """A measurement started and failed (a worker died or timed out)."""
