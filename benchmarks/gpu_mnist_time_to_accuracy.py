"""mnist-cnn on real MNIST on one GPU: training-clock seconds to 99.0% test accuracy.

    TRAINSCALE_DATA_DIR=/path/to/datasets python benchmarks/gpu_mnist_time_to_accuracy.py

Side by side in one invocation: trainscale's GPU settings (data resident on the GPU, bf16
autocast, channels_last, fused Adam, one-cycle schedule, large batch; `--extra` adds or
overrides `trainscale run` options) and the plain pytorch/examples MNIST recipe (Adadelta
lr 1.0, batch 64, StepLR gamma 0.7, a DataLoader-free loop over the same in-memory
tensors, evaluated once per epoch). Target: <= 1 s of training clock to 99.0%.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import spread, trainscale_run, write_json  # noqa: E402

FAST = [
    "mnist-cnn",
    "--device",
    "cuda",
    "--precision",
    "bf16",
    "--global-batch-size",
    "512",
    "--lr",
    "0.004",
    "--epochs",
    "2",
    "--eval-every",
    "20",
    "--quiet",
]


def pytorch_examples_seconds_to_99(max_epochs: int = 14) -> float | None:
    """The pytorch/examples recipe; training seconds until a per-epoch test reaches 99%."""
    import torch

    from trainscale.config.options import RunOptions
    from trainscale.data.tensors import DataRequest
    from trainscale.runner.resolve import prepare
    from trainscale.workloads import get_workload

    config = prepare(RunOptions.of(workload="mnist-cnn", threads_per_worker=1))
    data = get_workload("mnist-cnn").load_real(DataRequest(data_dir=Path(config.data_dir)))
    device = torch.device("cuda")
    x, y = data.train_x.to(device), data.train_y.to(device)
    tx, ty = data.test_x.to(device), data.test_y.to(device)
    from trainscale.models.mnist_cnn import MnistCnn

    torch.manual_seed(1)
    model = MnistCnn().to(device)
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    clock = 0.0
    for _ in range(max_epochs):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        model.train()
        order = torch.randperm(x.shape[0], device=device)
        for start in range(0, x.shape[0], 64):
            index = order[start : start + 64]
            loss = torch.nn.functional.cross_entropy(model(x[index]), y[index])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        scheduler.step()
        torch.cuda.synchronize()
        clock += time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            accuracy = (model(tx).argmax(1) == ty).float().mean().item()
        if accuracy >= 0.99:
            return clock
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--extra", nargs=argparse.REMAINDER, default=[])
    parser.add_argument("--out", default="benchmarks/results/gpu_mnist_time_to_accuracy.json")
    args = parser.parse_args()
    store = Path(tempfile.mkdtemp()) / "bench.db"
    reached, results = [], []
    for seed in args.seeds:
        result = trainscale_run([*FAST, "--seed", str(seed), *args.extra], store)
        results.append(result)
        if result["time_to_target_s"] is not None:
            reached.append(result["time_to_target_s"])
        print(
            f"seed {seed}: trainscale time to 99.0% {result['time_to_target_s']} s, final "
            f"{result['test_accuracy']:.4f}",
            flush=True,
        )
    baseline = pytorch_examples_seconds_to_99()
    print(
        f"trainscale: reached in {len(reached)}/{len(results)} runs, time to target "
        f"{spread(reached) if reached else 'not reached'}"
    )
    print(f"pytorch/examples recipe: {baseline} s to 99.0%")
    write_json(
        Path(args.out),
        {"command": " ".join(sys.argv), "runs": results, "pytorch_examples_s": baseline},
    )


if __name__ == "__main__":
    main()
