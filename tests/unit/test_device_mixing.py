"""No workload mixes devices: its data paths run with the data on a (fake) CUDA device.

This machine's torch has no CUDA, yet the paths that crash on a GPU when a CPU tensor, index,
buffer or generator meets the GPU data can be checked here: `FakeTensorMode` makes tensors
that say they are on cuda:0 (no memory, no values) and raises "Expected all tensors to be on
the same device" on a mix, as CUDA would. What fake tensors cannot do is filled in by
`DeviceChecks`:

- a generator on the wrong device (a CUDA draw from a CPU generator fails on a GPU, not under
  fake tensors, and a CUDA generator cannot be made on a CPU-only build): `torch.Generator`
  is replaced by one that remembers the device it was asked for, and every draw is checked
  against it;
- host-to-device copies in a training step (a blocking copy a step is slow, not wrong): counted;
- host reads of a tensor's value (`.item()`, `float(t)`, `.tolist()`: a GPU sync each, and no
  value to read under fake tensors): counted, and answered with a placeholder;
- Python indexing (`t[a:b]`, `t[idx]`), which a CPU-only build refuses on any cuda tensor, fake
  or not, before the fake mode sees it: rerun as the equivalent aten ops.
"""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensor, FakeTensorMode
from torch.overrides import TorchFunctionMode

from trainscale.data.tensors import DataRequest, TensorData
from trainscale.parallel.sharding import Sharding
from trainscale.train.batches import WorkerBatches
from trainscale.train.evaluate import evaluate
from trainscale.train.flops import flops_batch
from trainscale.workloads import builtin_workload_names, get_workload
from trainscale.workloads.dbn_pretrain import CdSettings, pretrain_stack

CUDA = torch.device("cuda", 0)
WORKLOADS = builtin_workload_names()
BATCH = 8
REAL_GENERATOR = torch.Generator


def _basic_index(tensor: torch.Tensor, index: Any) -> torch.Tensor:
    """`tensor[index]` as aten ops (what a CPU-only build cannot run on a cuda tensor)."""
    items = index if isinstance(index, tuple) else (index,)
    if any(item is Ellipsis for item in items):
        position = items.index(Ellipsis)
        used = sum(item is not None and item is not Ellipsis for item in items)
        items = items[:position] + (slice(None),) * (tensor.dim() - used) + items[position + 1 :]
    tensors = [isinstance(item, torch.Tensor) for item in items]
    if any(tensors) and any(isinstance(item, int) for item in items):
        raise NotImplementedError(f"mixed int and tensor indices: {index!r}")
    out, dim, advanced = tensor, 0, []
    for item in items:
        if item is None:
            out = out.unsqueeze(dim)
            dim += 1
        elif isinstance(item, bool):
            raise NotImplementedError(f"bool index: {index!r}")
        elif isinstance(item, int):
            out = out.select(dim, item)
        elif isinstance(item, slice):
            out = torch.ops.aten.slice.Tensor(out, dim, item.start, item.stop, item.step or 1)
            dim += 1
        elif isinstance(item, torch.Tensor):
            advanced.append((dim, item))
            dim += 1
        else:
            raise NotImplementedError(f"index {item!r}")
    if not advanced:
        return out
    indices: list[torch.Tensor | None] = [None] * out.dim()
    for position, item in advanced:
        indices[position] = item
    while indices and indices[-1] is None:
        indices.pop()
    return torch.ops.aten.index.Tensor(out, indices)


def _to_target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.device | None:
    """The device a `Tensor.to(...)` call moves to (None: it keeps the device)."""
    for value in (kwargs.get("device"), *args[1:]):
        if isinstance(value, torch.Tensor):
            return value.device
        if isinstance(value, (torch.device, str)):
            return torch.device(value)
    return None


class AskedDeviceGenerator(REAL_GENERATOR):
    """A CPU generator that remembers the device it was asked for (a CUDA generator cannot be
    made on a CPU-only build), for `DeviceChecks` to check each draw against."""

    def __new__(cls, device: Any = None) -> AskedDeviceGenerator:
        generator = super().__new__(cls)
        generator.asked = torch.device(device if device is not None else "cpu")
        return generator

    def __init__(self, device: Any = None) -> None:
        pass  # made CPU in __new__; the base would make a `device` one


class DeviceChecks(TorchFunctionMode):
    """What fake tensors do not check (see the module docstring), for one test."""

    def __init__(self) -> None:
        super().__init__()
        self.host_to_device = 0
        self.host_reads = 0

    def _copy(self, target: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        """`target.copy_(source)` into a fake cuda tensor: shapes checked, host copy counted."""
        torch.broadcast_shapes(source.shape, target.shape)
        if source.device.type == "cpu":
            self.host_to_device += 1
        return target

    def read(self, value: Any) -> Any:
        """A host read of a fake tensor's value: counted, answered with `value`."""
        self.host_reads += 1
        return value

    def __torch_function__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: Any = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is torch.Tensor.__getitem__ and args[0].device.type == "cuda":
            return _basic_index(args[0], args[1])
        if func is torch.Tensor.__setitem__ and args[0].device.type == "cuda":
            target, value = _basic_index(args[0], args[1]), args[2]
            if isinstance(value, torch.Tensor):
                self._copy(target, value)
            else:
                target.fill_(value)
            return None
        if func is torch.Tensor.copy_ and args[0].device.type == "cuda":
            # A CPU-only build cannot run a copy into a cuda tensor, fake or not; there are
            # no values to copy, so check the shapes and count a copy from the host.
            return self._copy(args[0], args[1])
        generator = kwargs.get("generator")
        if isinstance(generator, REAL_GENERATOR):
            if "device" in kwargs and kwargs["device"] is not None:
                draws_on = torch.device(kwargs["device"])
            elif args and isinstance(args[0], torch.Tensor) and func.__name__.endswith("_"):
                draws_on = args[0].device
            else:
                draws_on = torch.device("cpu")
            made_for = getattr(generator, "asked", generator.device)
            if made_for.type != draws_on.type:
                # CUDA's own words for a draw from a generator on another device.
                raise RuntimeError(
                    f"Expected a '{draws_on.type}' device type for generator but found "
                    f"'{made_for.type}' (in {func.__name__})"
                )
        if func in (torch.Tensor.to, torch.Tensor.cuda) and args[0].device.type == "cpu":
            target = CUDA if func is torch.Tensor.cuda else _to_target(args, kwargs)
            if target is not None and target.type == "cuda":
                self.host_to_device += 1
        return func(*args, **kwargs)


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeTensorMode, DeviceChecks]]:
    """A fake-tensor mode (enter it to work on fake cuda tensors) and the extra checks, on."""
    checks = DeviceChecks()
    monkeypatch.setattr(torch, "Generator", AskedDeviceGenerator)
    monkeypatch.setattr(FakeTensor, "item", lambda self: checks.read(1))
    monkeypatch.setattr(FakeTensor, "__float__", lambda self: checks.read(1.0))
    monkeypatch.setattr(FakeTensor, "__int__", lambda self: checks.read(1))
    monkeypatch.setattr(FakeTensor, "tolist", lambda self: checks.read(list(range(len(self)))))
    with checks:
        yield FakeTensorMode(), checks


def on_fake_cuda(tensor: torch.Tensor) -> torch.Tensor:
    """A fake cuda tensor shaped like `tensor` (call inside the fake mode)."""
    return torch.empty_strided(tensor.shape, tensor.stride(), dtype=tensor.dtype, device=CUDA)


def fake_data(data: TensorData) -> TensorData:
    """`data` as `Strategy.place_data` leaves it on a GPU (call inside the fake mode)."""
    return TensorData(
        train_x=on_fake_cuda(data.train_x),
        train_y=on_fake_cuda(data.train_y),
        test_x=on_fake_cuda(data.test_x),
        test_y=on_fake_cuda(data.test_y),
        kind=data.kind,
        source=data.source,
        meta=data.meta,
    )


def fake_model(model: nn.Module) -> nn.Module:
    """`model.to("cuda")`, in fake tensors (call inside the fake mode; a real module's
    `.to("cuda")` needs a CUDA build)."""
    for module in model.modules():
        for name, param in list(module._parameters.items()):
            if param is not None:
                setattr(module, name, nn.Parameter(on_fake_cuda(param), param.requires_grad))
        for name, buffer in list(module._buffers.items()):
            if buffer is not None:
                setattr(module, name, on_fake_cuda(buffer))
    return model


def synthetic(name: str) -> tuple[Any, TensorData]:
    """The workload and a small synthetic set of it (real CPU tensors)."""
    workload = get_workload(name)
    return workload, workload.make_synthetic(DataRequest(seed=0, max_train=64, max_test=8))


def config(seed: int = 0) -> Any:
    """What `WorkerBatches` reads of a `RunConfig`."""
    return SimpleNamespace(optimisation=SimpleNamespace(seed=seed, batch_size=BATCH))


@pytest.mark.parametrize("name", WORKLOADS)
def test_batches_are_ordered_gathered_and_augmented_on_the_data_device(fake_cuda, name):
    """Each epoch's order (length bucketing for the text workloads) is on the data's device,
    and a step's batch is gathered and augmented there: no host copy, no host read."""
    mode, checks = fake_cuda
    workload, data = synthetic(name)
    with mode:
        on_gpu = fake_data(data)
        batches = WorkerBatches(config(), workload, on_gpu, on_gpu.train_x, Sharding(0, 1))
        order = batches.epoch_order(0)
        assert order.device == CUDA
        copies, reads = checks.host_to_device, checks.host_reads
        for index in range(2):
            x, y = batches.batch(order, index)
            assert x.device == CUDA and y.device == CUDA
            assert x.shape[0] == BATCH and x.shape[1:] == data.train_x.shape[1:]
        assert checks.host_to_device == copies, "a step copied from the host"
        assert checks.host_reads == reads, "a step read a value back to the host"


# Only the batch is checked, not the count on it (the model's forward and backward): on a
# CPU-only build a convolution on a cuda tensor aborts the interpreter (it picks a CUDA
# kernel), the RNNs pack their sequences with lengths read on the host (pack_padded_sequence,
# no values under fake tensors), and the counter forks the CUDA random state, which needs CUDA.


@pytest.mark.parametrize("name", WORKLOADS)
def test_flops_batch_is_built_on_the_model_device(fake_cuda, name):
    """The batch FLOPs are counted on is where the model is (a CPU batch made the count fail,
    silently, on a GPU: no FLOPs, no MFU)."""
    mode, _ = fake_cuda
    workload, data = synthetic(name)
    torch.manual_seed(0)
    model = workload.build_model(data.meta)
    with mode:
        on_gpu = fake_data(data)
        model = fake_model(model)
        x, y = flops_batch(workload, on_gpu, on_gpu.train_x)
        assert x.device == CUDA and y.device == CUDA
        assert x.shape[0] == y.shape[0] == 2
        # The model, on the same device, takes the batch: its first layer's device agrees.
        assert next(model.parameters()).device == x.device


@pytest.mark.parametrize(
    ("k", "persistent", "sample"), [(1, False, True), (2, True, True), (1, False, False)]
)
def test_dbn_pretraining_runs_on_the_device_and_reads_once_an_epoch(
    fake_cuda, k, persistent, sample
):
    """mnist-dbn's CD pre-training: batch index, buffers, generator, the propagated inputs and
    the all-reduced tensors on the RBMs' device; one host read (the error) per epoch and layer."""
    mode, checks = fake_cuda
    workload, data = synthetic("mnist-dbn")
    torch.manual_seed(0)
    model = workload.build_model(data.meta)
    reduced: list[torch.device] = []

    def sum_tensor(tensor: torch.Tensor) -> torch.Tensor:
        reduced.append(tensor.device)  # NCCL reduces GPU tensors only
        return tensor

    sharding = Sharding(0, 1)
    strategy = SimpleNamespace(
        env=SimpleNamespace(world_size=1, rank=0),
        shard_indices=sharding.shard_indices,
        eval_shard=sharding.eval_shard,
        sum_tensor=sum_tensor,
        max_float=lambda value: value,
    )
    epochs = 2
    settings = CdSettings(epochs=epochs, lr=0.1, k=k, persistent=persistent, sample=sample)
    with mode:
        on_gpu = fake_data(data)
        model = fake_model(model)
        reads = checks.host_reads
        figures = pretrain_stack(model, on_gpu.train_x, strategy, settings, BATCH)
        layers = len(figures["layers"])
        assert layers == len(list(model.rbms)) >= 2
        assert all(p.device == CUDA for p in model.parameters())
    assert reduced and all(device == CUDA for device in reduced)
    steps = data.num_train // BATCH
    assert all(layer["num_steps"] == epochs * steps for layer in figures["layers"])
    assert checks.host_reads - reads <= epochs * layers, "the error is read more than once an epoch"


def test_evaluation_counts_on_the_device_and_reads_only_at_the_end(fake_cuda):
    """The test-set evaluation accumulates its counts and confusion matrix on the device: no
    host read per batch (a GPU sync each; torch.bincount on CUDA reads its input's maximum),
    only the totals at the end."""
    mode, checks = fake_cuda
    workload, data = synthetic("mnist-dbn")  # linear layers only: they run on fake cuda
    torch.manual_seed(0)
    model = workload.build_model(data.meta)
    sharding = Sharding(0, 1)
    strategy = SimpleNamespace(
        device=CUDA,
        eval_shard=sharding.eval_shard,
        sum_tensor=lambda tensor: tensor,
        share_buffers=lambda model: None,
    )
    with mode:
        on_gpu = fake_data(data)
        model = fake_model(model)
        reads = checks.host_reads
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr("trainscale.train.evaluate.GPU_EVAL_BATCH", 2)  # several batches
            patch.setattr("trainscale.train.evaluate.macro_f1", lambda confusion: 0.5)
            evaluate(model, on_gpu, strategy, "fp32", channels_last=False)
        assert checks.host_reads - reads == 1, "evaluation read values back per batch"
