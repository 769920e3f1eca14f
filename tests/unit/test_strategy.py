"""Strategies as a device composed with a communication: which pieces a run gets, and what
each piece does on setup, wrap and the collectives (the CUDA and NCCL paths are checked
through the torch calls they make, so they are tested on a machine without a GPU)."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

import pytest
import torch

from trainscale.parallel import communication, device
from trainscale.parallel.communication import DdpCommunication, NoCommunication
from trainscale.parallel.device import CpuDevice, CudaDevice, HostThreads
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.sharding import Sharding
from trainscale.parallel.strategy import make_strategy

from tests.helpers.tiny import TinyNet, tiny_config, tiny_data


def _config(workers: int = 1, device_kind: str = "cpu", **flat):
    """A resolved tiny config, then changed by flat name (core_sets, device: a config as a
    worker receives it, without this machine's cores or GPUs checked)."""
    return tiny_config(workers=workers, threads_per_worker=1).with_(device=device_kind, **flat)


def _env(rank: int = 0, world: int = 1) -> DistEnv:
    return DistEnv(rank=rank, local_rank=rank, world_size=world, local_world_size=world)


@dataclass
class _Calls:
    """What the patched torch entry points were called with."""

    pinned: list[tuple[int, ...]]
    threads: list[int]
    cuda_devices: list[torch.device]
    groups: list[tuple[tuple, dict]]
    ddp: list[dict]


@pytest.fixture
def calls(monkeypatch) -> _Calls:
    """Records pinning, thread counts, GPU selection, process groups and DDP wraps instead
    of making them (this process keeps its mask and threads; no group is formed)."""
    seen = _Calls([], [], [], [], [])
    monkeypatch.setattr(device, "pin_current_process", lambda cores: seen.pinned.append(cores))
    monkeypatch.setattr(device.torch, "set_num_threads", seen.threads.append)
    monkeypatch.setattr(device.torch.cuda, "set_device", seen.cuda_devices.append)
    monkeypatch.setattr(
        communication.dist,
        "init_process_group",
        lambda *args, **kwargs: seen.groups.append((args, kwargs)),
    )

    def fake_ddp(model, **options):
        seen.ddp.append(options)
        return model

    monkeypatch.setattr(communication.nn.parallel, "DistributedDataParallel", fake_ddp)
    return seen


# --- which pieces a run gets ------------------------------------------------------------------


def test_one_cpu_worker_is_serial_on_the_cpu():
    strategy = make_strategy(_config(1), _env())
    assert isinstance(strategy.worker_device, CpuDevice)
    assert isinstance(strategy.communication, NoCommunication)
    assert strategy.device == torch.device("cpu")
    assert strategy.describe() == "cpu, serial"


def test_several_cpu_workers_use_ddp_over_gloo():
    config = _config(2, bucket_cap_mb=5.0, timeout_s=42.0)
    strategy = make_strategy(config, _env(rank=1, world=2))
    comm = strategy.communication
    assert isinstance(comm, DdpCommunication)
    assert comm.world_size == 2 and comm.timeout_s == 42.0 and comm.bucket_cap_mb == 5.0
    assert strategy.describe() == "cpu, ddp(gloo, 2 workers)"


@pytest.mark.parametrize("world", [1, 2])
def test_a_cuda_run_takes_the_gpu_of_its_local_rank_without_touching_cuda(world):
    config = _config(world, "cuda")
    strategy = make_strategy(config, _env(rank=world - 1, world=world))
    assert isinstance(strategy.worker_device, CudaDevice)
    assert strategy.device == torch.device("cuda", world - 1)  # known before setup
    assert strategy.worker_device.collective_backend == "nccl"
    expected = NoCommunication if world == 1 else DdpCommunication
    assert isinstance(strategy.communication, expected)


def test_host_threads_follow_the_plan_of_the_local_rank():
    config = _config(2, core_sets=[[0], [1]])
    assert HostThreads.for_worker(config.parallel, 1) == HostThreads((1,), 1)
    assert HostThreads.for_worker(config.parallel, 3) == HostThreads((1,), 1)  # wraps round
    unpinned = _config(1, core_sets=None)
    assert HostThreads.for_worker(unpinned.parallel, 0) == HostThreads(None, 1)


# --- setup --------------------------------------------------------------------------------------


def test_cpu_setup_pins_and_threads_before_joining_gloo(calls):
    config = _config(2, core_sets=[[0], [1]], timeout_s=42.0)
    make_strategy(config, _env(rank=1, world=2)).setup()
    assert calls.pinned == [(1,)] and calls.threads == [1]
    assert calls.cuda_devices == []
    assert calls.groups == [(("gloo",), {"timeout": datetime.timedelta(seconds=42.0)})]


def test_serial_setup_pins_and_threads_and_forms_no_group(calls):
    config = _config(1, core_sets=[[0]])
    make_strategy(config, _env()).setup()
    assert calls.pinned == [(0,)] and calls.threads == [1] and calls.groups == []


def test_cuda_setup_still_pins_the_host_then_binds_nccl_to_its_gpu(calls):
    config = _config(2, "cuda", core_sets=[[0], [1]], timeout_s=42.0)
    make_strategy(config, _env(rank=1, world=2)).setup()
    gpu = torch.device("cuda", 1)
    assert calls.pinned == [(1,)] and calls.threads == [1]  # host threads feed the GPU
    assert calls.cuda_devices == [gpu]
    assert calls.groups == [
        (("nccl",), {"timeout": datetime.timedelta(seconds=42.0), "device_id": gpu})
    ]


def test_one_gpu_selects_its_device_and_forms_no_group(calls):
    config = _config(1, "cuda")
    make_strategy(config, _env()).setup()
    assert calls.cuda_devices == [torch.device("cuda", 0)] and calls.groups == []


# --- the model ----------------------------------------------------------------------------------


def test_ddp_wrap_options_on_cpu_and_on_a_gpu(calls):
    cpu = make_strategy(_config(2, bucket_cap_mb=5.0), _env(world=2))
    cpu.wrap(TinyNet())
    gpu_config = _config(2, "cuda")
    make_strategy(gpu_config, _env(rank=1, world=2)).wrap(TinyNet())
    assert calls.ddp == [
        {"gradient_as_bucket_view": True, "bucket_cap_mb": 5.0},  # a CPU module names no device
        {"gradient_as_bucket_view": True, "device_ids": [1]},
    ]


def test_serial_wraps_nothing_and_hooks_nothing():
    strategy = make_strategy(_config(1), _env())
    model = TinyNet()
    assert strategy.wrap(model) is model
    assert strategy.unwrap(model) is model
    installed = []
    assert strategy.hook_communication(model, lambda state, bucket: installed.append(1), 0) is False
    assert installed == []
    with strategy.no_sync(model):
        pass


def test_ddp_installs_the_callers_hook_with_its_state():
    strategy = make_strategy(_config(2), _env(world=2))

    class FakeDdp(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module
            self.hooks = []

        def register_comm_hook(self, state, hook):
            self.hooks.append((state, hook))

    def hook(state, bucket):
        return None

    inner = TinyNet()
    wrapped = FakeDdp(inner)
    assert strategy.hook_communication(wrapped, hook, "state") is True
    assert wrapped.hooks == [("state", hook)]
    assert strategy.unwrap(wrapped) is inner


def test_unwrap_removes_compile_and_ddp_wrappers():
    inner = TinyNet()

    class Compiled(torch.nn.Module):  # what torch.compile returns keeps the module here
        def __init__(self, module):
            super().__init__()
            self._orig_mod = module

    class Ddp(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

    serial = make_strategy(_config(1), _env())
    ddp = make_strategy(_config(2), _env(world=2))
    assert serial.unwrap(Compiled(inner)) is inner
    assert ddp.unwrap(Ddp(inner)) is inner
    assert ddp.unwrap(Compiled(Ddp(inner))) is inner
    assert ddp.unwrap(Ddp(Compiled(inner))) is inner


# --- data and collectives -----------------------------------------------------------------------


def test_cpu_data_stays_where_it_was_loaded():
    data = tiny_data()
    assert make_strategy(_config(1), _env()).place_data(data) is data


def test_serial_collectives_are_identities():
    strategy = make_strategy(_config(1), _env())
    tensor = torch.tensor([1.0, 2.0])
    assert strategy.sum_tensor(tensor) is tensor and tensor.tolist() == [1.0, 2.0]
    assert strategy.max_float(2.5) == 2.5
    assert strategy.gather_objects({"a": 1}) == [{"a": 1}]
    strategy.teardown()  # nothing to release, and no error


def test_strategy_shards_as_its_sharding():
    config = _config(2)
    for rank in (0, 1):
        strategy = make_strategy(config, _env(rank=rank, world=2))
        expected = Sharding(rank, 2)
        assert torch.equal(strategy.shard_indices(11, 2, 5), expected.shard_indices(11, 2, 5))
        assert strategy.eval_shard(11) == expected.eval_shard(11) == slice(rank, 11, 2)
