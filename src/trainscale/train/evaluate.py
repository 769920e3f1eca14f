"""Evaluation on the test set: accuracy, mean loss and macro-F1, split across ranks.

Off the training clock (the trainer times it apart). Counts accumulate on the device and are
read once at the end, so a GPU evaluation does not synchronise per batch.
"""

from __future__ import annotations

import torch

from trainscale.data.tensors import TensorData
from trainscale.parallel.strategy import Strategy
from trainscale.train.precision import autocast

CPU_EVAL_BATCH = 200  # larger eval batches were 2.4x slower on a 2-core CPU (activation memory)
GPU_EVAL_BATCH = 2000  # a GPU wants large batches; the reference test sets fit in memory


def macro_f1(confusion: torch.Tensor) -> float:
    """Unweighted mean of per-class F1 from a confusion matrix (rows = truth, cols = pred)."""
    confusion = confusion.double()
    true_pos = confusion.diag()
    precision_den = confusion.sum(dim=0)
    recall_den = confusion.sum(dim=1)
    f1_den = precision_den + recall_den
    f1 = torch.where(f1_den > 0, 2 * true_pos / f1_den.clamp(min=1e-12), torch.zeros_like(f1_den))
    present = recall_den > 0  # classes absent from the test set do not count
    return float(f1[present].mean()) if present.any() else 0.0


def evaluate(
    model: torch.nn.Module,
    data: TensorData,
    strategy: Strategy,
    precision: str,
    channels_last: bool,
) -> tuple[float, float, float]:
    """(accuracy, mean loss, macro-F1) on the test set; ranks split it and sum their counts.

    Every rank scores rank 0's model, the one the run stores: the ranks' batch-norm running
    statistics drift apart between DDP's broadcasts, and mixing them would score a model
    that never existed.
    """
    strategy.share_buffers(model)
    device = strategy.device
    batch = GPU_EVAL_BATCH if device.type == "cuda" else CPU_EVAL_BATCH
    part = strategy.eval_shard(data.num_test)
    xs, ys = data.test_x[part], data.test_y[part]
    totals = torch.zeros(3, dtype=torch.float64, device=device)  # correct, loss sum, count
    confusion = None
    model.eval()
    with torch.no_grad(), autocast(device, precision):
        for start in range(0, xs.shape[0], batch):
            x = xs[start : start + batch]
            if channels_last and x.dim() == 4:
                x = x.contiguous(memory_format=torch.channels_last)
            y = ys[start : start + batch]
            logits = model(x).float()
            predicted = logits.argmax(dim=1)
            num_classes = logits.shape[1]
            if confusion is None:
                confusion = torch.zeros(
                    num_classes * num_classes, dtype=torch.float64, device=device
                )
            # index_add_, not torch.bincount: CUDA's bincount reads its input's extremes
            # back to the host, a sync per batch. Counts in float64 add up exactly.
            cells = y * num_classes + predicted
            confusion.index_add_(0, cells, torch.ones_like(cells, dtype=torch.float64))
            totals[0] += (predicted == y).sum()
            totals[1] += torch.nn.functional.cross_entropy(logits, y, reduction="sum")
            totals[2] += y.numel()
    model.train()
    # Every rank has at least one test sample here (test sets are far larger than ranks).
    assert confusion is not None
    strategy.sum_tensor(totals)
    strategy.sum_tensor(confusion)
    correct, loss_sum, count = totals.tolist()
    side = int(confusion.numel() ** 0.5)
    return correct / count, loss_sum / count, macro_f1(confusion.view(side, side).cpu())
