"""DDP's gradient buckets, and how much backward compute stands before each is ready.

DDP packs gradients into buckets and all-reduces a bucket as soon as all its gradients are
ready, while backward goes on with earlier layers. After the first step it rebuilds the
buckets in the order gradients became ready, which for these feed-forward models is the
reverse of parameter registration. Bucket caps as torch sets them: 25 MiB by default, with a
first bucket (the last layers, whose gradients are ready first) of 1 MiB so that
communication starts early; when the user gives `bucket_cap_mb`, every bucket uses it. A
bucket closes once its size reaches the cap, so it may exceed it by its last tensor
(`compute_bucket_assignment_by_size` in torch's reducer).

Backward time behind each gradient is spread over the parameters by the FLOPs their module
does (forward and backward, counted by torch's flop counter on a two-sample batch), with a
floor of two FLOPs per parameter element for modules the counter does not count
(embeddings, normalisation), whose backward still touches every element. Where counting
fails, parameter counts are the weights.

The same pass counts the operators a training step dispatches (views and other metadata-only
operators left out): on a device with no stored run, each costs a fixed overhead (eager
dispatch and kernel launch), the part of a step that does not shrink with the batch. It
also gives the training FLOPs per sample, as a run counts them, so that the simulator builds
and runs a model once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import torch
from torch.utils.flop_counter import FlopCounterMode

from trainscale.data.tensors import DataRequest
from trainscale.metrics.flops import extra_flop_formulas, split_by_kind
from trainscale.train.op_count import OpCounter
from trainscale.workloads import get_workload

MIB = 1024 * 1024
DEFAULT_BUCKET_CAP_BYTES = 25 * MIB
DEFAULT_FIRST_BUCKET_BYTES = 1 * MIB
"""torch.distributed's `_DEFAULT_FIRST_BUCKET_BYTES`."""
ELEMENTWISE_FLOPS_PER_PARAM = 2.0


@dataclass(frozen=True)
class ParamInfo:
    """One trainable parameter tensor, in registration order."""

    name: str
    numel: int
    num_bytes: int
    weight: float
    """Its share of backward compute (any positive scale; normalised by the layout)."""


@dataclass(frozen=True)
class Bucket:
    """One gradient bucket, in the order backward makes them ready."""

    index: int
    num_bytes: int
    num_tensors: int
    ready_share: float
    """Share of backward compute done when this bucket's last gradient is ready."""


@dataclass(frozen=True)
class GradientLayout:
    """A model's gradients as DDP communicates them."""

    buckets: tuple[Bucket, ...]
    total_bytes: int
    num_params: int
    num_tensors: int
    weights_from: str
    """'flops' or 'parameters': what spread backward compute over the buckets."""
    ops_per_step: int | None = None
    """Operators (kernels) one forward + backward dispatches; None if not counted."""
    flops_per_sample: float | None = None
    """Training FLOPs (forward + backward) per sample, counted in the same pass as the
    operators, as a run counts them (`train/flops.count_flops_per_sample`); None if not."""
    flops_by_kind: Mapping[str, int] | None = None
    """The same by kind of operator (`metrics.flops.split_by_kind`): on a GPU, which of
    them compute fp32 in TF32 depends on the kind."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "total_bytes": self.total_bytes,
            "num_params": self.num_params,
            "num_tensors": self.num_tensors,
            "weights_from": self.weights_from,
            "ops_per_step": self.ops_per_step,
            "buckets": [
                {
                    "index": b.index,
                    "bytes": b.num_bytes,
                    "tensors": b.num_tensors,
                    "ready_share": b.ready_share,
                }
                for b in self.buckets
            ],
        }


def bucket_caps(bucket_cap_mb: float | None) -> tuple[int, int]:
    """(first bucket cap, cap of the others) in bytes, as DDP sets them."""
    if bucket_cap_mb is None:
        return DEFAULT_FIRST_BUCKET_BYTES, DEFAULT_BUCKET_CAP_BYTES
    if not bucket_cap_mb > 0:
        raise ValueError(f"bucket cap must be positive, not {bucket_cap_mb!r} MiB")
    cap = int(bucket_cap_mb * MIB)
    return cap, cap


def assign_buckets(sizes_bytes: Sequence[int], first_cap: int, cap: int) -> list[list[int]]:
    """Group tensors (given in the order their gradients are ready) into buckets.

    A bucket takes tensors until its size reaches its cap (the first bucket's cap is
    `first_cap`, the others' `cap`); returns the tensor indices of every bucket, in order.
    """
    buckets: list[list[int]] = []
    current: list[int] = []
    size = 0
    limit = first_cap
    for index, num_bytes in enumerate(sizes_bytes):
        current.append(index)
        size += num_bytes
        if size >= limit:
            buckets.append(current)
            current, size, limit = [], 0, cap
    if current:
        buckets.append(current)
    return buckets


def layout_from_params(
    params: Sequence[ParamInfo],
    bucket_cap_mb: float | None = None,
    weights_from: str = "flops",
    ops_per_step: int | None = None,
) -> GradientLayout:
    """Buckets for parameters given in registration order (backward runs in reverse)."""
    if not params:
        raise ValueError("the model has no trainable parameters")
    backward_order = list(reversed(params))
    first_cap, cap = bucket_caps(bucket_cap_mb)
    groups = assign_buckets([p.num_bytes for p in backward_order], first_cap, cap)
    total_weight = sum(p.weight for p in backward_order)
    if not total_weight > 0:
        raise ValueError("backward compute weights must add up to a positive number")
    buckets = []
    done = 0.0
    for index, group in enumerate(groups):
        members = [backward_order[i] for i in group]
        done += sum(p.weight for p in members)
        buckets.append(
            Bucket(
                index=index,
                num_bytes=sum(p.num_bytes for p in members),
                num_tensors=len(members),
                ready_share=min(1.0, done / total_weight),
            )
        )
    return GradientLayout(
        buckets=tuple(buckets),
        total_bytes=sum(p.num_bytes for p in params),
        num_params=sum(p.numel for p in params),
        num_tensors=len(params),
        weights_from=weights_from,
        ops_per_step=ops_per_step,
    )


class ModelProfile(NamedTuple):
    """One forward + backward of a model, counted."""

    flops_by_module: dict[str, float] | None
    """FLOPs each module does itself, by module path."""
    ops_per_step: int | None
    """Operators dispatched."""
    flops_per_sample: float | None
    """All the pass's FLOPs (the loss's included) per sample of the batch."""
    flops_by_kind: Mapping[str, int] | None = None
    """The same by kind of operator."""


NOT_COUNTED = ModelProfile(None, None, None)


def profile_model(model: Any, batch: tuple[Any, Any], loss: Any) -> ModelProfile:
    """Forward + backward on `batch`, counted; `NOT_COUNTED` if torch's counter cannot trace
    the model.

    The counter reports each module with its children's FLOPs included, under
    '<ModelClass>.<path>'; children are subtracted here.
    """
    x, y = batch
    try:
        counter = FlopCounterMode(display=False, custom_mapping=extra_flop_formulas())
        ops = OpCounter()
        with counter, ops:
            loss(model(x), y).backward()
        counts = counter.get_flop_counts()
        # Whole FLOPs per sample, as a run's count has them (train/flops.py).
        per_sample = float(counter.get_total_flops() // x.shape[0])
        by_kind = split_by_kind(counts["Global"], x.shape[0]).by_kind
    except Exception:  # a model the counter cannot trace falls back to parameter counts
        return NOT_COUNTED
    finally:
        model.zero_grad(set_to_none=True)
    root = type(model).__name__
    inclusive: dict[str, float] = {}
    for key, per_op in counts.items():
        if key == root:
            path = ""
        elif key.startswith(root + "."):
            path = key[len(root) + 1 :]
        else:
            continue
        inclusive[path] = float(sum(per_op.values()))
    own: dict[str, float] = {}
    for path, module in model.named_modules():
        if path not in inclusive:
            continue
        children = sum(
            inclusive.get(f"{path}.{name}" if path else name, 0.0)
            for name, _ in module.named_children()
        )
        own[path] = max(0.0, inclusive[path] - children)
    return ModelProfile(own, ops.count, per_sample, by_kind)


def param_infos(model: Any, flops_by_module: Mapping[str, float] | None = None) -> list[ParamInfo]:
    """Trainable parameters in registration order, weighted by their module's own FLOPs."""
    infos: list[ParamInfo] = []
    owners: dict[str, list[tuple[str, Any]]] = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            owners.setdefault(name.rpartition(".")[0], []).append((name, param))
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        numel = int(param.numel())
        weight = float(numel)
        if flops_by_module is not None:
            module = name.rpartition(".")[0]
            siblings = owners[module]
            sibling_elements = sum(int(p.numel()) for _, p in siblings)
            module_share = flops_by_module.get(module, 0.0) * numel / max(1, sibling_elements)
            weight = max(module_share, ELEMENTWISE_FLOPS_PER_PARAM * numel)
        infos.append(
            ParamInfo(
                name=name,
                numel=numel,
                num_bytes=numel * param.element_size(),
                weight=weight,
            )
        )
    return infos


def recorded_params(parameters: Sequence[Mapping[str, Any]]) -> list[ParamInfo]:
    """ParamInfo of parameter sizes a script run recorded (`trainscale.meter(model=...)`: each
    trainable tensor's `numel` and `bytes`, in registration order). The script's model is not
    here to run, so each tensor's share of backward compute is its element count."""
    infos = []
    for index, entry in enumerate(parameters):
        numel, num_bytes = entry.get("numel"), entry.get("bytes")
        if not isinstance(numel, int) or not isinstance(num_bytes, int) or numel < 1:
            raise ValueError(f"recorded parameter {index} has no size: {dict(entry)!r}")
        infos.append(ParamInfo(f"parameter {index}", numel, num_bytes, float(numel)))
    return infos


def recorded_layout(
    parameters: Sequence[Mapping[str, Any]], bucket_cap_mb: float | None = None
) -> GradientLayout:
    """The gradient layout of a model known by its recorded parameter sizes."""
    return layout_from_params(recorded_params(parameters), bucket_cap_mb, "parameters")


def workload_layout(
    workload_name: str, bucket_cap_mb: float | None = None, device: str = "cpu"
) -> GradientLayout:
    """The gradient layout of a registered workload's model (built from synthetic meta), its
    operators counted on `device`: a device's libraries run some layers as one operator
    (cuDNN's LSTM) that another decomposes into many (the CPU's, a few per time step)."""
    workload = get_workload(workload_name)
    data = workload.make_synthetic(DataRequest(max_train=2, max_test=2))
    torch.manual_seed(0)
    model = workload.build_model(data.meta).to(device)
    model.train()
    batch = (data.train_x[:2].to(device), data.train_y[:2].to(device))
    profile = profile_model(model, batch, workload.loss)
    flops = profile.flops_by_module
    params = param_infos(model, flops)
    layout = layout_from_params(
        params, bucket_cap_mb, "flops" if flops else "parameters", profile.ops_per_step
    )
    return replace(
        layout, flops_per_sample=profile.flops_per_sample, flops_by_kind=profile.flops_by_kind
    )
