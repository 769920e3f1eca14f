"""A cgroup CPU quota (docker --cpus, a Kubernetes CPU limit) counts: the usable cores are
the cores its time pays for, not every core of the mask."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.errors import ConfigError
from trainscale.hardware import facts
from trainscale.hardware.cpu_quota import cpu_quota
from trainscale.parallel import affinity


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_cgroup_v2_quota_is_the_tightest_over_the_process(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    proc.write_text("0::/kubepods/pod1/box\n")
    root = tmp_path / "fs"
    _write(root / "kubepods/pod1/box/cpu.max", "max 100000\n")
    _write(root / "kubepods/pod1/cpu.max", "250000 100000\n")  # the pod's limit binds
    _write(root / "kubepods/cpu.max", "800000 100000\n")
    assert cpu_quota(proc, root) == 2.5


def test_cgroup_v1_quota_and_no_quota(tmp_path: Path) -> None:
    proc = tmp_path / "cgroup"
    proc.write_text("4:memory:/x\n2:cpu,cpuacct:/docker/abc\n0::/\n")
    root = tmp_path / "fs"
    _write(root / "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "50000\n")
    _write(root / "cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
    assert cpu_quota(proc, root) == 0.5
    _write(root / "cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "-1\n")
    assert cpu_quota(proc, root) is None
    assert cpu_quota(tmp_path / "missing", root) is None  # unreadable: no quota


@pytest.mark.parametrize(("quota", "cores"), [(None, 4), (2.5, 2), (0.5, 1), (8.0, 4)])
def test_usable_cores_are_those_the_quota_pays_for(monkeypatch, quota, cores) -> None:
    monkeypatch.setattr(facts.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(facts, "cpu_quota", lambda: quota)
    assert facts.usable_cores() == [0, 1, 2, 3][:cores]


def test_a_core_outside_the_quota_is_refused_saying_why(monkeypatch) -> None:
    monkeypatch.setattr(affinity, "cpu_quota", lambda: 1.0)
    with pytest.raises(ConfigError) as refused:
        affinity.plan_cpu(1, 1, "3", available_cores=[0])
    assert str(refused.value) == (
        "core 3 in --affinity set 1 is not available to this run; available cores: 0 (a cgroup "
        "CPU quota of 1 cores' time: the usable cores are those it pays for)"
    )
