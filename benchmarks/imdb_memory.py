"""Resident memory of the IMDB recurrent models under the CPU's bf16 autocast, as the shapes vary.

On the CPU in bf16 the recurrent layer's matrix products run in oneDNN, which builds and
caches a kernel per shape. torch's packed LSTM/GRU projects a batch's tokens in one product
of (token total) rows, a new total almost every batch; `models/text_rnn.py` rounds mixed-length
batches' totals up to a multiple of `TOKEN_GRANULE` with filler texts. Two measurements, each
configuration in a fresh process on one thread, printing the resident set (VmRSS) as it goes:

- `shapes`: the recurrent layer's input projection (forward and backward, bf16) at every
  token total of a 2-epoch run's bucketed batches, as they come, raw or rounded;
- `model` (with `--steps N`): the workload's model trained for N batches of the real length
  distribution (random token ids), without fillers and with them. New totals keep coming for
  a few hundred steps, so the two differ clearly from about 150 steps on (BiGRU: 2.2 GB
  against 1.5 GB at step 200), about 1-3 s a step on one core: off by default.

    taskset -c 1 python benchmarks/imdb_memory.py --data-dir DIR [--cell gru] [--steps 250]

Without `--data-dir` the lengths are the synthetic data's (log-normal, median 200 tokens).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from trainscale.data.bucketing import bucket_order
from trainscale.data.tensors import DataRequest
from trainscale.models import text_rnn
from trainscale.workloads import get_workload

BATCH = 64
EPOCHS = 2
GATES = {"lstm": 4, "gru": 3}


def rss_mb() -> tuple[int, int]:
    """(resident, peak resident) MiB of this process, from /proc/self/status."""
    fields = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    return int(fields["VmRSS"].split()[0]) // 1024, int(fields["VmHWM"].split()[0]) // 1024


def batches(lengths: torch.Tensor, epochs: int) -> list[torch.Tensor]:
    """The training batches' sample indices over `epochs`, bucketed as a run does."""
    g = torch.Generator().manual_seed(0)
    out: list[torch.Tensor] = []
    for epoch in range(epochs):
        order = torch.randperm(len(lengths), generator=g)
        order = bucket_order(order, lengths[order], BATCH, torch.Generator().manual_seed(epoch))
        out.extend(order[: len(order) // BATCH * BATCH].split(BATCH))
    return out


def token_total(lengths: torch.Tensor, fillers: bool) -> int:
    """The row count of the packed input the recurrent layer gets for these texts."""
    extra = text_rnn.filler_lengths(lengths, int(lengths.max()), text_rnn.TOKEN_GRANULE)
    return int(lengths.sum()) + (int(extra.sum()) if fillers else 0)


def child_shapes(lengths: torch.Tensor, cell: str, fillers: bool) -> None:
    """bf16 input projection, forward and backward, at each batch's token total."""
    weight = torch.randn(GATES[cell] * 128, 128, requires_grad=True)
    totals = [token_total(lengths[b], fillers) for b in batches(lengths, EPOCHS)]
    for i, total in enumerate(totals, 1):
        x = torch.randn(total, 128, requires_grad=True)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = torch.nn.functional.linear(x, weight)
        y.float().sum().backward()
        if i % 130 == 0 or i == len(totals):
            rss, peak = rss_mb()
            print(f"  {i:5d} batches, {len(set(totals[:i])):4d} totals: {rss} MiB (peak {peak})")


def child_model(lengths: torch.Tensor, cell: str, fillers: bool, steps: int) -> None:
    """The workload's model trained on `steps` bucketed batches of these lengths."""
    if not fillers:
        text_rnn.TOKEN_GRANULE = 1  # every total is a multiple of 1: no fillers
    torch.manual_seed(0)
    width = int(lengths.max())
    texts = torch.randint(2, 20_000, (len(lengths), width))
    texts = texts.masked_fill(torch.arange(width)[None, :] >= lengths[:, None], 0)
    labels = torch.randint(0, 2, (len(lengths),))
    model = text_rnn.TextRNN(20_000, 2, cell=cell)
    optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
    start = time.perf_counter()
    for step, batch in enumerate(batches(lengths, EPOCHS)[:steps], 1):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(texts[batch])
        loss = torch.nn.functional.cross_entropy(logits.float(), labels[batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if step % 10 == 0 or step == steps:
            rss, peak = rss_mb()
            took = time.perf_counter() - start
            print(f"  step {step:4d}: {rss} MiB (peak {peak}), {took:.0f} s")


def train_lengths(data_dir: str | None) -> tuple[torch.Tensor, str]:
    """The training texts' lengths (last 400 tokens) and where they come from."""
    workload = get_workload("imdb-bigru")
    if data_dir is None:
        data = workload.make_synthetic(DataRequest(seed=0))
    else:
        data = workload.load_real(DataRequest(data_dir=Path(data_dir), download=False))
    return (data.train_x != 0).sum(dim=1).clamp(min=1), data.source


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--cell", choices=sorted(GATES), default="gru")
    parser.add_argument(
        "--steps", type=int, default=0, help="model steps per configuration (0: no model part)"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)  # PART FILLERS LENGTHS
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.child:
        part, fillers, path = args.child
        lengths = torch.load(path)
        if part == "shapes":
            child_shapes(lengths, args.cell, fillers == "1")
        else:
            child_model(lengths, args.cell, fillers == "1", args.steps)
        return
    lengths, source = train_lengths(args.data_dir)
    print(f"{len(lengths)} training texts from {source}, mean {lengths.float().mean():.0f} tokens")
    print(f"{torch.__version__}, cell {args.cell}, bf16 autocast, 1 thread, batch {BATCH}")
    with tempfile.TemporaryDirectory() as tmp:
        path = str(Path(tmp) / "lengths.pt")
        torch.save(lengths, path)
        for part in ("shapes", "model") if args.steps else ("shapes",):
            for fillers in ("0", "1"):
                what = (
                    f"token totals rounded to {text_rnn.TOKEN_GRANULE}" if fillers == "1" else "raw"
                )
                print(f"{part}, {what}:", flush=True)
                command = [
                    sys.executable,
                    __file__,
                    "--cell",
                    args.cell,
                    "--steps",
                    str(args.steps),
                ]
                subprocess.run([*command, "--child", part, fillers, path], check=True)


if __name__ == "__main__":
    main()
