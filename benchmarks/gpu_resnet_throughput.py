"""ResNet-44 on one GPU: trainscale's fast path vs a plain eager fp32 PyTorch loop, as a ratio.

    python benchmarks/gpu_resnet_throughput.py --repeats 3 --steps 200 --batch-size 512

Both sides: the same model (trainscale.models.resnet_cifar, depth 44), synthetic 3x32x32
batches of `--batch-size` resident on the GPU, SGD momentum 0.9. The plain loop is what a
user writes first: fp32, NCHW, eager, non-fused optimizer, timed with CUDA events after
warm-up. trainscale runs with bf16 autocast, channels_last, a fused optimizer and
torch.compile (compile time is reported apart). Target: ratio >= 2.5; MFU is printed from
the run's summary.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402


def plain_loop(steps: int, batch: int, warmup: int = 20) -> float:
    """Samples per second of an eager fp32 training loop (median over timed steps)."""
    import torch

    from trainscale.models.resnet_cifar import resnet_cifar

    device = torch.device("cuda")
    torch.manual_seed(0)
    model = resnet_cifar(44).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)
    times = []
    for step in range(warmup + steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        end.record()
        if step >= warmup:
            times.append((start, end))
    torch.cuda.synchronize()
    step_s = statistics.median(s.elapsed_time(e) / 1000 for s, e in times)
    return batch / step_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--out", default="benchmarks/results/gpu_resnet_throughput.json")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp()) / "bench.db"
    run_args = [
        "cifar10-resnet44",
        "--device",
        "cuda",
        "--data",
        "synthetic",
        "--no-eval",
        "--quiet",
        "--batch-size",
        str(args.batch_size),
        "--precision",
        "bf16",
        "--compile",
        "--steps",
        str(args.steps),
        "--warmup-steps",
        "20",
    ]
    ratios, rows = [], []
    for repeat in range(args.repeats):
        plain = plain_loop(args.steps, args.batch_size)
        result = trainscale_run(run_args, store)
        fast = result["samples_per_s"]
        ratios.append(fast / plain)
        rows.append({"plain_samples_per_s": plain, "trainscale": result})
        print(
            f"repeat {repeat + 1}: plain eager fp32 {plain:.0f} samples/s, trainscale "
            f"{fast:.0f} samples/s, ratio {fast / plain:.2f}, MFU {result.get('mfu')}, "
            f"compile {result.get('compile_time_s')} s",
            flush=True,
        )
    print(f"trainscale / plain loop throughput: {spread(ratios)}")
    write_json(Path(args.out), {"command": " ".join(sys.argv), "runs": rows, "ratios": ratios})


if __name__ == "__main__":
    main()
