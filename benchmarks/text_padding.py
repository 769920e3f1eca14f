"""Padding fraction of text batches: what length bucketing saves, as a deterministic count.

Loads a text workload's real data exactly as a run does (same -o options), replays the
trainer's per-epoch shard orders for 1 and 2 workers, and counts the padded positions of
every batch under three policies:

- `max_len`: every batch padded to max_len (no trimming, random batches);
- `trim`: random batches, each trimmed to its longest text (what the models always do);
- `bucket`: trimmed, with the workload's length bucketing (the default);
- `bucket-unaligned` (2 workers): bucketing with a different generator on each rank.

With several workers the step is as slow as the longest batch on any rank, so the
"lock-step" figure counts every rank's batch as padded to the longest batch of that step.

    python benchmarks/text_padding.py tweets-text -o file=PATH -o encoding=latin-1
"""

from __future__ import annotations

import argparse
import json

import torch

from trainscale.data.bucketing import bucket_order
from trainscale.data.tensors import DataRequest
from trainscale.parallel.sharding import Sharding
from trainscale.workloads import get_workload


def padding(lengths: torch.Tensor, orders: list[torch.Tensor], batch: int, max_len: int | None):
    """(per-rank padding fraction, lock-step padding fraction) over full batches."""
    steps = min(len(o) // batch for o in orders)
    per_rank = [lengths[o[: steps * batch]].view(steps, batch) for o in orders]
    longest = torch.stack([b.max(dim=1).values for b in per_rank])  # (ranks, steps)
    if max_len is not None:
        longest = torch.full_like(longest, max_len)
    real = sum(int(b.sum()) for b in per_rank)
    own = float(longest.sum()) * batch
    lock = float(longest.max(dim=0).values.sum()) * batch * len(orders)
    return 1 - real / own, 1 - real / lock


def bucketed(
    shards: list[torch.Tensor], lengths: torch.Tensor, batch: int, seed: int, rank_offset: int
) -> list[torch.Tensor]:
    """Each rank's bucketed order; `rank_offset` != 0 seeds the ranks differently."""
    return [
        bucket_order(s, lengths[s], batch, torch.Generator().manual_seed(seed + r * rank_offset))
        for r, s in enumerate(shards)
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("workload")
    parser.add_argument("-o", dest="options", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--batch-size", type=int, default=None, help="per worker")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    workload = get_workload(args.workload)
    options = dict(kv.split("=", 1) for kv in args.options)
    request = DataRequest(options=options)
    workload.locate_real(request)
    data = workload.load_real(request)
    lengths = (data.train_x != 0).sum(dim=1).clamp(min=1)
    batch = args.batch_size or workload.recipe.batch_size
    max_len = data.train_x.shape[1]
    rows = []
    for world in (1, 2):
        sums: dict[str, list[float]] = {}
        for epoch in range(args.epochs):
            shards = [
                Sharding(rank=r, world_size=world).shard_indices(data.num_train, epoch, args.seed)
                for r in range(world)
            ]
            seed = args.seed * 1_000_003 + epoch  # as the trainer seeds batch_order

            policies = {
                "max_len": (shards, max_len),
                "trim": (shards, None),
                "bucket": (bucketed(shards, lengths, batch, seed, 0), None),
            }
            if world > 1:
                unaligned = bucketed(shards, lengths, batch, seed, 7919)
                policies["bucket-unaligned"] = (unaligned, None)
            for name, (orders, fixed) in policies.items():
                own, lock = padding(lengths, orders, batch, fixed)
                sums.setdefault(name, [0.0, 0.0])
                sums[name][0] += own / args.epochs
                sums[name][1] += lock / args.epochs
        for name, (own, lock) in sums.items():
            rows.append(
                {"workers": world, "policy": name, "padding": round(own, 4),
                 "lockstep_padding": round(lock, 4)}
            )  # fmt: skip
    print(
        json.dumps(
            {
                "workload": args.workload,
                "options": options,
                "batch_per_worker": batch,
                "num_train": data.num_train,
                "mean_length": round(float(lengths.float().mean()), 2),
                "max_len": max_len,
                "rows": rows,
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
