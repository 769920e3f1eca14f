"""Energy readers with a fake powercap tree and a fake NVML module: never 0 for unknown."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from trainscale.hardware.energy import (
    EnergyMeter,
    NvmlCounter,
    combine_nodes,
    counter_delta,
    energy_sources,
    find_rapl_packages,
)

WRAP = 1_000_000  # uJ: a small range so that a test can wrap it


def zone(root: Path, name: str, label: str, energy_uj: int, wrap: int = WRAP) -> Path:
    path = root / name
    path.mkdir(parents=True)
    (path / "name").write_text(label + "\n")
    (path / "energy_uj").write_text(f"{energy_uj}\n")
    (path / "max_energy_range_uj").write_text(f"{wrap}\n")
    return path


def set_energy(path: Path, energy_uj: int) -> None:
    # Atomically, as sysfs reads are: the sampler thread may read at any moment.
    temp = path / "energy_uj.tmp"
    temp.write_text(f"{energy_uj}\n")
    os.replace(temp, path / "energy_uj")


@pytest.fixture
def powercap(tmp_path: Path) -> tuple[Path, Path, Path]:
    root = tmp_path / "powercap"
    root.mkdir()
    (root / "intel-rapl").mkdir()  # the control type directory: not a zone
    pkg0 = zone(root, "intel-rapl:0", "package-0", 100_000)
    pkg1 = zone(root, "intel-rapl:1", "package-1", 900_000)
    zone(root, "intel-rapl:0:0", "core", 5)  # a sub-zone of package 0: not counted twice
    zone(root, "intel-rapl:2", "psys", 7)  # the whole platform: not a CPU package
    return root, pkg0, pkg1


def test_counter_delta_handles_one_wrap() -> None:
    assert counter_delta(100, 250, WRAP) == 150
    assert counter_delta(900_000, 100_000, WRAP) == 200_000


def test_only_package_zones_are_read(powercap) -> None:
    root, _, _ = powercap
    domains, why = find_rapl_packages(root)
    assert why is None
    assert [d.name for d in domains] == ["package-0", "package-1"]


def test_rapl_energy_with_a_wrap_around(powercap) -> None:
    root, pkg0, pkg1 = powercap
    meter = EnergyMeter(powercap_root=root, poll_s=None).start()
    set_energy(pkg0, 600_000)  # +0.5 J
    set_energy(pkg1, 300_000)  # wrapped: +0.4 J
    meter.sample()
    set_energy(pkg0, 700_000)  # +0.1 J
    set_energy(pkg1, 350_000)  # +0.05 J
    reading = meter.stop()
    assert reading["cpu_package_j"] == pytest.approx(0.5 + 0.4 + 0.1 + 0.05)
    assert reading["measured"] == ["rapl:package-0", "rapl:package-1"]
    assert reading["gpu_j"] is None and reading["unmeasured"]["gpu"] == "not a GPU run"


def test_background_sampler_catches_wraps(powercap) -> None:
    root, pkg0, _ = powercap
    meter = EnergyMeter(powercap_root=root, poll_s=0.01).start()
    set_energy(pkg0, 950_000)
    time.sleep(0.2)  # several polls see 950_000
    set_energy(pkg0, 50_000)  # wrapped
    reading = meter.stop()
    assert reading["cpu_package_j"] == pytest.approx((950_000 - 100_000 + 100_000) / 1e6)


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads files whatever their mode")
def test_unreadable_energy_file_means_not_measured(powercap) -> None:
    root, pkg0, _ = powercap
    (pkg0 / "energy_uj").chmod(0o000)
    reading = EnergyMeter(powercap_root=root, poll_s=None).start().stop()
    assert reading["cpu_package_j"] is None
    assert "not readable" in reading["unmeasured"]["cpu_package"]


def test_permission_error_means_not_measured(powercap, monkeypatch) -> None:
    # The same as above for a root user: make the read itself fail as it does for others.
    root, _, _ = powercap
    real = Path.read_text

    def read_text(self: Path, *args, **kwargs):
        if self.name == "energy_uj":
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", read_text)
    reading = EnergyMeter(powercap_root=root, poll_s=None).start().stop()
    assert reading["cpu_package_j"] is None
    assert "not readable" in reading["unmeasured"]["cpu_package"]


def test_no_powercap_means_not_measured(tmp_path: Path) -> None:
    reading = EnergyMeter(powercap_root=tmp_path / "absent", poll_s=None).start().stop()
    assert reading["cpu_package_j"] is None and reading["measured"] == []
    assert "does not exist" in reading["unmeasured"]["cpu_package"]


class FakeNvmlError(Exception):
    pass


class FakeNvml:
    """The few pynvml calls the reader makes, over per-GPU millijoule counters."""

    def __init__(self, energy_mj: dict[int, int], supported: bool = True, init_ok: bool = True):
        self.energy_mj = dict(energy_mj)
        self.uuids = {f"GPU-{index:04d}": index for index in energy_mj}
        self.supported = supported
        self.init_ok = init_ok
        self.initialised = 0

    def nvmlInit(self) -> None:  # noqa: N802 (pynvml's names)
        if not self.init_ok:
            raise FakeNvmlError("Driver Not Loaded")
        self.initialised += 1

    def nvmlShutdown(self) -> None:  # noqa: N802
        self.initialised -= 1

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:  # noqa: N802
        return index

    def nvmlDeviceGetHandleByUUID(self, uuid: str) -> int:  # noqa: N802
        return self.uuids[uuid]

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:  # noqa: N802
        if not self.supported:
            raise FakeNvmlError("Not Supported")
        return self.energy_mj[handle]


def test_nvml_energy_of_the_run_gpus(tmp_path: Path) -> None:
    nvml = FakeNvml({0: 1_000, 1: 5_000, 2: 0})
    meter = EnergyMeter(
        powercap_root=tmp_path / "absent", nvml=nvml, gpus=["GPU-0000", 1], poll_s=None
    ).start()
    nvml.energy_mj.update({0: 301_000, 1: 105_000, 2: 999_999})  # GPU 2 is not the run's
    reading = meter.stop()
    assert reading["gpu_j"] == pytest.approx(300 + 100)
    assert reading["measured"] == ["nvml:GPU-0000", "nvml:1"]
    assert reading["cpu_package_j"] is None  # no RAPL here: absent, not 0
    assert nvml.initialised == 0  # shut down again


def test_nvml_without_the_counter_or_the_driver_is_not_measured(tmp_path: Path) -> None:
    absent = tmp_path / "absent"
    old_gpu = EnergyMeter(
        powercap_root=absent, nvml=FakeNvml({0: 0}, supported=False), gpus=[0], poll_s=None
    )
    reading = old_gpu.start().stop()
    assert reading["gpu_j"] is None and "Not Supported" in reading["unmeasured"]["gpu"]
    no_driver = EnergyMeter(
        powercap_root=absent, nvml=FakeNvml({0: 0}, init_ok=False), gpus=[0], poll_s=None
    )
    assert no_driver.start().stop()["gpu_j"] is None
    no_package = EnergyMeter(powercap_root=absent, nvml=None, gpus=[0], poll_s=None)
    assert "nvidia-ml-py" in no_package.start().stop()["unmeasured"]["gpu"]


def test_nvml_counter_alone() -> None:
    nvml = FakeNvml({0: 10})
    counter = NvmlCounter(nvml, [0])
    assert counter.start()
    nvml.energy_mj[0] = 2_010
    assert counter.stop() == pytest.approx(2.0)


def test_nodes_are_summed_and_a_missing_node_makes_the_total_unknown() -> None:
    node = {
        "cpu_package_j": 10.0,
        "gpu_j": 20.0,
        "measured": ["rapl:package-0"],
        "unmeasured": {},
        "interval_s": 3.0,
    }
    total = combine_nodes([node, None, dict(node, interval_s=4.0), None])
    assert total["cpu_package_j"] == 20.0 and total["gpu_j"] == 40.0
    assert total["nodes"] == 2 and total["interval_s"] == 4.0
    assert total["measured"] == ["node0:rapl:package-0", "node1:rapl:package-0"]
    partial = combine_nodes([node, dict(node, gpu_j=None, unmeasured={"gpu": "no NVML"})])
    assert partial["gpu_j"] is None and partial["cpu_package_j"] == 20.0
    assert partial["unmeasured"]["gpu"] == "node1:no NVML"
    assert combine_nodes([None, None]) is None


def test_energy_sources_say_what_is_readable(powercap, tmp_path: Path) -> None:
    root, _, _ = powercap
    readable = energy_sources(root, FakeNvml({0: 1}), [0])
    assert readable["cpu_package"].startswith("readable") and readable["gpu"].startswith("readable")
    absent = energy_sources(tmp_path / "absent")
    assert absent["cpu_package"].startswith("not measurable") and absent["gpu"] == "no GPU"
