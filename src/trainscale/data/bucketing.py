"""Length bucketing: batches of texts of similar length, still in random order.

A batch of texts is trimmed to its longest text, so every shorter text in it is padded up
to that length. Drawing batches at random mixes short and long texts; sorting each pool of
`pool_batches` consecutive batches by length first makes each batch's texts alike, and
shuffling the resulting batches keeps the order of batches random. The pool is drawn from a
fresh random permutation each epoch, so batch composition changes from epoch to epoch.
"""

from __future__ import annotations

import torch

POOL_BATCHES = 50
"""Batches per length-sorted pool: large enough that a batch's lengths are close (with
50 x 64 texts per pool on IMDB, neighbours in the sort differ by about a token), small
enough that each epoch's pools, and so its batches, differ."""


def bucket_order(
    order: torch.Tensor,
    lengths: torch.Tensor,
    batch_size: int,
    generator: torch.Generator,
    pool_batches: int = POOL_BATCHES,
) -> torch.Tensor:
    """A permutation of `order` whose consecutive `batch_size` groups hold similar lengths.

    Args:
        order: sample indices, already shuffled (a worker's shard for one epoch).
        lengths: `lengths[i]` is the length of sample `order[i]`.
        batch_size: samples per batch; a last partial batch stays at the end (the trainer
            drops it, as before reordering).
        generator: draws the order of the batches; seeded alike on every rank, so rank r's
            k-th batch comes from the same pool position as every other rank's.
        pool_batches: batches per pool sorted by length.
    """
    full = len(order) // batch_size * batch_size
    pool = batch_size * pool_batches
    batches: list[torch.Tensor] = []
    for start in range(0, full, pool):
        stop = min(start + pool, full)
        # Stable: equal lengths keep the random order they arrived in.
        ranked = torch.argsort(lengths[start:stop], stable=True) + start
        batches.extend(order[ranked].split(batch_size))
    shuffled = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
    return torch.cat([*shuffled, order[full:]]) if shuffled else order.clone()
