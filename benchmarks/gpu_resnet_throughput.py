"""ResNet-44 on one GPU: trainscale against a bare PyTorch loop doing the same work, as ratios.

    python benchmarks/gpu_resnet_throughput.py --rounds 3 --steps 300 --batch-size 128
    python benchmarks/gpu_resnet_throughput.py --compare graphs --rounds 3
    python benchmarks/gpu_resnet_throughput.py --compare compile --rounds 3

`--compare loops` (the default): both sides do the same work: the same model
(trainscale.models.resnet_cifar, depth 44) in channels_last, synthetic 3x32x32 images
resident on the GPU, a random batch gathered on the GPU each step, the workload's random
crop and flip (trainscale.data.augment) drawn on the GPU, SGD momentum 0.9 and weight decay
1e-4 with the fused kernel, in the same precision (fp32, or bf16 autocast). The bare loop is
timed like trainscale's clock: CUDA events at step boundaries, the median step after
warm-up. Each round runs every side once in rotated order; each ratio (trainscale / bare
throughput) is taken within a round and summarised as the median with a 95% bootstrap
interval. Target: >= 0.98 in each precision. Also: bf16 against fp32 on both sides, and MFU
against the probe's measured bf16 matmul rate when `--store` holds a probe of this GPU.

`--compare graphs`: the same two loops in bf16, both with CUDA graphs (trainscale's
`--compile --compile-mode reduce-overhead`; the bare loop compiles its model and its loss in
that mode and marks each step). Eager, this launch-bound step runs at the host's speed,
which varied by half between rounds on an H200's host, too much for a verdict on 2%; with
each step's forward and backward replayed as graphs the GPU, not the host, bounds it.

`--compare compile`: trainscale in bf16, eager against `--compile`, in rounds the same way
(compilation timed apart, and cached by Inductor after the first round).

The runs are long enough for the step to settle (300 steps after 50 warm-up by default, 5 s
a side): in runs of 100 steps after 10 on an H200, trainscale in bf16 ran 5,678 to 7,685
samples/s from one round to the next, and the bare loop, in one process, 6,393 to 8,703.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import trainscale_run, write_json  # noqa: E402
from gpu_mnist_time_to_accuracy import GRAPHS  # noqa: E402

PRECISIONS = ("fp32", "bf16")
SAMPLES = 50_000


def bare_loop(steps: int, warmup: int, batch: int, precision: str, graphs: bool = False) -> float:
    """Samples per second of the plain loop (median step over the timed steps); with
    `graphs`, its model and loss compiled to replay CUDA graphs (compiled and recorded in
    the warm-up steps, which are not timed)."""
    import torch

    from trainscale.data.augment import random_crop_flip
    from trainscale.models.resnet_cifar import resnet_cifar

    device = torch.device("cuda")
    torch.manual_seed(0)
    model = resnet_cifar(44).to(device).to(memory_format=torch.channels_last)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4, fused=True
    )
    images = torch.randn(SAMPLES, 3, 32, 32, device=device)
    images = images.contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, 10, (SAMPLES,), device=device)
    generator = torch.Generator(device=device).manual_seed(0)
    order = torch.randperm(SAMPLES, device=device)
    autocast = (
        torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16" else nullcontext()
    )
    forward, loss_of = model, torch.nn.functional.cross_entropy
    if graphs:
        torch._dynamo.reset()  # each round compiles afresh, as each trainscale run does
        forward = torch.compile(model, mode="reduce-overhead")
        loss_of = torch.compile(torch.nn.functional.cross_entropy, mode="reduce-overhead")
    marks = [torch.cuda.Event(enable_timing=True) for _ in range(steps + 1)]
    marks[0].record()
    for step in range(steps):
        start = (step * batch) % (SAMPLES - batch)
        index = order[start : start + batch]
        x = random_crop_flip(images[index], generator)
        if graphs:
            torch.compiler.cudagraph_mark_step_begin()
        with autocast:
            loss = loss_of(forward(x), labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        marks[step + 1].record()
    torch.cuda.synchronize()
    step_s = statistics.median(
        marks[i].elapsed_time(marks[i + 1]) / 1000 for i in range(warmup, steps)
    )
    return batch / step_s


def trainscale_side(steps: int, warmup: int, batch: int, precision: str, store: Path, *extra):
    args = [
        "cifar10-resnet44",
        "--device",
        "cuda",
        "--data",
        "synthetic",
        "--no-eval",
        "--quiet",
        "--batch-size",
        str(batch),
        "--precision",
        precision,
        "--steps",
        str(steps),
        "--warmup-steps",
        str(warmup),
        *extra,
    ]
    return trainscale_run(args, store)


COMPARISONS = {
    "loops": [(kind, p) for p in PRECISIONS for kind in ("bare", "trainscale")],
    "graphs": [("bare-graphs", "bf16"), ("graphs", "bf16")],
    "compile": [("trainscale", "bf16"), ("compiled", "bf16")],
}
"""The sides each comparison measures, every one once a round."""

RATIOS = {
    "loops": [
        *[(f"trainscale / bare, {p}", f"bare {p}", f"trainscale {p}") for p in PRECISIONS],
        ("trainscale bf16 / fp32", "trainscale fp32", "trainscale bf16"),
        ("bare bf16 / fp32", "bare fp32", "bare bf16"),
    ],
    "graphs": [("trainscale / bare, both CUDA graphs, bf16", "bare-graphs bf16", "graphs bf16")],
    "compile": [("compiled / eager, bf16", "trainscale bf16", "compiled bf16")],
}
"""(label, a, b) of each ratio b / a a comparison reports."""


def measure(kind: str, precision: str, args: argparse.Namespace, store: Path) -> dict:
    """One side's run: its samples/s, and trainscale's stored result where it is one."""
    if kind in ("bare", "bare-graphs"):
        graphs = kind == "bare-graphs"
        value = bare_loop(args.steps, args.warmup, args.batch_size, precision, graphs)
        return {"samples_per_s": value}
    extra = {"compiled": ["--compile"], "graphs": ["--compile", *GRAPHS.split()]}.get(kind, [])
    return trainscale_side(args.steps, args.warmup, args.batch_size, precision, store, *extra)


def main() -> None:
    from trainscale.benchmark.ladder import rotation
    from trainscale.metrics.paired import paired_ratio

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--compare", choices=sorted(COMPARISONS), default="loops")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--store", type=Path, default=None, help="a store with a GPU probe")
    parser.add_argument("--out", default="benchmarks/results/gpu_resnet_throughput.json")
    args = parser.parse_args()
    store = args.store or Path(tempfile.mkdtemp()) / "bench.db"
    rounds: list[dict[str, float]] = []
    runs: list[dict] = []
    for number, order in enumerate(rotation(COMPARISONS[args.compare], args.rounds)):
        measured: dict[str, float] = {}
        for kind, precision in order:
            result = measure(kind, precision, args, store)
            if not kind.startswith("bare"):
                runs.append({**result, "side": f"{kind} {precision}"})
            measured[f"{kind} {precision}"] = result["samples_per_s"]
            print(
                f"round {number + 1}: {kind} {precision} {result['samples_per_s']:.0f} samples/s",
                flush=True,
            )
            # As each side ends, so a check stopped at its time limit keeps what it measured.
            partial = {"command": " ".join(sys.argv), "rounds": rounds, "runs": runs}
            write_json(Path(args.out), {**partial, "round_in_progress": measured})
        rounds.append(measured)

    summary: dict = {}
    for label, a, b in RATIOS[args.compare]:
        ratio = paired_ratio(rounds, a, b)
        summary[label] = {"median": ratio.median, "ci95": ratio.ci, "rounds": len(ratio.ratios)}
        print(f"{label}: {ratio.median} {ratio.ci}")
    for side in {r["side"] for r in runs}:
        last = [r for r in runs if r["side"] == side][-1]
        summary[side] = {
            key: last.get(key)
            for key in ("mfu", "mfu_vs_probe", "flops_per_sample", "compile_time_s")
        }
    if args.compare == "compile":
        summary["compile_time_s_each_round"] = [
            r.get("compile_time_s") for r in runs if r["side"] == "compiled bf16"
        ]
    write_json(
        Path(args.out),
        {"command": " ".join(sys.argv), "summary": summary, "rounds": rounds, "runs": runs},
    )


if __name__ == "__main__":
    main()
