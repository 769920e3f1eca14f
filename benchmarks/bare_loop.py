"""A bare PyTorch training loop of the MNIST CNN: the yardstick for trainscale's overhead.

Same model, memory format, optimizer, batch, thread count and core as the trainscale run it
is compared with; no launcher, no store, no progress, no measurement bookkeeping.
Prints the median step time of the timed steps as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import torch

from trainscale.models.mnist_cnn import MnistCnn
from trainscale.workloads import get_workload


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args()

    os.sched_setaffinity(0, {args.core})
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    x_all = torch.randn(60_000, 1, 28, 28).contiguous(memory_format=torch.channels_last)
    y_all = torch.randint(0, 10, (60_000,))
    model = MnistCnn().to(memory_format=torch.channels_last)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    order = torch.randperm(60_000)
    # The workload's loss as its recipe computes it (label smoothing): the same operators
    # trainscale's step runs, which count on a step of a few samples.
    smoothing = get_workload("mnist-cnn").recipe.label_smoothing
    times = []
    for step in range(args.steps):
        t0 = time.perf_counter()
        index = order[step * args.batch_size : (step + 1) * args.batch_size]
        # Advanced indexing, as trainscale gathers a batch.
        x, y = x_all[index], y_all[index]
        loss = torch.nn.functional.cross_entropy(model(x), y, label_smoothing=smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        times.append(time.perf_counter() - t0)
    timed = times[args.warmup :]
    print(json.dumps({"step_time_s_median": statistics.median(timed)}))


if __name__ == "__main__":
    main()
