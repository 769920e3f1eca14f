"""Peak table lookup, CPU peak arithmetic, MFU, and a run's hardware figures (no GPU needed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from trainscale.config.options import RunConfig
from trainscale.hardware.facts import NOMINAL_CLOCK, CpuFacts, read_cpu_facts
from trainscale.hardware.figures import (
    RunDevices,
    cores_per_node,
    hardware_figures,
    latest_full_probe,
    probe_flops_per_s,
    run_peak,
)
from trainscale.hardware.peaks import (
    PRECISIONS,
    achieved_flops_per_s,
    cpu_flops_per_cycle,
    cpu_peak,
    gpu_peak,
    gpu_peaks,
    match_gpu,
    mfu,
    parse_gpu_peaks,
)
from trainscale.hardware.tf32 import ALL_TF32, NO_TF32
from trainscale.results.store import RunStore

from tests.helpers.tiny import tiny_config

ROOT = Path(__file__).resolve().parents[2]

TORCH_NAMES = {
    "NVIDIA H100 80GB HBM3": "H100 SXM5",
    "NVIDIA H100 PCIe": "H100 PCIe",
    "NVIDIA H100 NVL": "H100 NVL",
    "NVIDIA H200": "H200 SXM",
    "NVIDIA H200 NVL": "H200 NVL",
    "NVIDIA A100-SXM4-80GB": "A100",
    "NVIDIA A100-SXM4-40GB": "A100",
    "NVIDIA A100 80GB PCIe": "A100",
    "NVIDIA A100-PCIE-40GB": "A100",
    "Tesla V100-SXM2-16GB": "V100 SXM2",
    "Tesla V100-SXM2-32GB": "V100 SXM2",
    "Tesla V100-PCIE-32GB": "V100 PCIe",
    "Tesla V100S-PCIE-32GB": "V100S PCIe",
    "Tesla T4": "T4",
    "Tesla K80": "K80 (one GK210)",
}
"""Device names as torch.cuda.get_device_name() prints them, and their table entries."""


@pytest.mark.parametrize(("name", "expected"), sorted(TORCH_NAMES.items()))
def test_gpu_names_as_torch_prints_them_find_their_entry(name: str, expected: str) -> None:
    entry = match_gpu(name)
    assert entry is not None and entry.name == expected


def test_every_entry_of_the_shipped_peak_table_loads_with_a_source() -> None:
    table = gpu_peaks()
    assert len(table) == 11
    assert len({entry.name for entry in table}) == len(table)
    for entry in table:
        assert entry.name.strip() and entry.kind.strip(), entry
        assert "datasheet" in entry.source, entry  # every figure says where it comes from
        assert entry.tflops and set(entry.tflops) <= set(PRECISIONS), entry
        assert all(value > 0 for value in entry.tflops.values()), entry
        assert "fp32" in entry.tflops, entry  # every GPU has an fp32 figure
    # Every entry can be reached from a name torch prints, and the matcher names no other.
    assert {match_gpu(name).name for name in TORCH_NAMES} == {entry.name for entry in table}


def test_the_peak_table_is_package_data() -> None:
    # A wheel built without it would have no GPU peaks at all.
    try:
        import tomllib
    except ImportError:  # Python 3.10
        import tomli as tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    shipped = pyproject["tool"]["setuptools"]["package-data"]["trainscale"]
    assert "hardware/gpu_peaks.toml" in shipped
    assert (ROOT / "src/trainscale/hardware/gpu_peaks.toml").is_file()


GOOD_ENTRY = {"name": "X1", "kind": "X", "source": "X1 datasheet", "tflops": {"fp32": 1.0}}


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ({}, "expected [[gpu]] entries"),
        ({"gpu": [GOOD_ENTRY], "cpu": []}, "expected [[gpu]] entries"),
        ({"gpu": [{k: v for k, v in GOOD_ENTRY.items() if k != "source"}]}, "keys must be"),
        ({"gpu": [{**GOOD_ENTRY, "source": " "}]}, "source must be non-empty text"),
        ({"gpu": [{**GOOD_ENTRY, "tflops": {}}]}, "tflops must be a table"),
        ({"gpu": [{**GOOD_ENTRY, "tflops": {"fp64": 1.0}}]}, "unknown precision 'fp64'"),
        ({"gpu": [{**GOOD_ENTRY, "tflops": {"fp32": 0}}]}, "tflops.fp32 must be a positive"),
        ({"gpu": [{**GOOD_ENTRY, "tflops": {"fp32": "67"}}]}, "tflops.fp32 must be a positive"),
        ({"gpu": [GOOD_ENTRY, GOOD_ENTRY]}, "gpu entry 2: name 'X1' is listed twice"),
    ],
)
def test_a_bad_peak_table_is_refused_naming_the_entry(raw, fragment: str) -> None:
    with pytest.raises(ValueError, match="test.toml") as caught:
        parse_gpu_peaks(raw, "test.toml")
    assert fragment in str(caught.value)
    assert parse_gpu_peaks({"gpu": [GOOD_ENTRY]}, "test.toml")[0].tflops == {"fp32": 1.0}


@pytest.mark.parametrize(
    "name",
    [
        None,
        "",
        "NVIDIA GeForce RTX 4090",
        "NVIDIA RTX A1000",  # not an A100
        "NVIDIA H100",  # form factor unknown: SXM and PCIe peaks differ
        "NVIDIA A100-SXM4-40GB MIG 1g.5gb",  # a slice of a GPU
        "Tesla V100-SXM3-32GB",
    ],
)
def test_unknown_or_ambiguous_gpus_have_no_entry(name: str | None) -> None:
    assert match_gpu(name) is None


def test_gpu_peaks_are_dense_datasheet_figures() -> None:
    h100 = gpu_peak("NVIDIA H100 80GB HBM3", "bf16", devices=8)
    assert h100 is not None
    assert h100.per_device_flops_per_s == pytest.approx(989.5e12)  # 1,979 with sparsity / 2
    assert h100.flops_per_s == pytest.approx(8 * 989.5e12)
    assert h100.kind == "H100" and h100.source.startswith("table:")
    assert gpu_peak("NVIDIA A100-SXM4-80GB", "tf32").flops_per_s == pytest.approx(156e12)
    assert gpu_peak("Tesla K80", "fp32").flops_per_s == pytest.approx(8.73e12 / 2)
    # No bf16 hardware on Volta, Turing or Kepler: no peak, so no MFU (never zero).
    for name in ("Tesla V100-SXM2-16GB", "Tesla T4", "Tesla K80"):
        assert gpu_peak(name, "bf16") is None
    assert gpu_peak("Tesla K80", "fp16") is None
    assert gpu_peak("NVIDIA GeForce RTX 4090", "fp32") is None


def facts(flags: str, vendor: str = "GenuineIntel", family: int = 6, model: int = 143, ghz=2.0):
    return CpuFacts(
        model_name="Test CPU",
        vendor=vendor,
        family=family,
        model=model,
        flags=frozenset(flags.split()),
        max_frequency_hz=None if ghz is None else ghz * 1e9,
        frequency_source="test",
        physical_cores=4,
        logical_cores=8,
    )


@pytest.mark.parametrize(
    ("flags", "vendor", "family", "model", "precision", "per_cycle"),
    [
        ("avx avx2 fma avx512f amx_bf16 avx512_bf16", "GenuineIntel", 6, 143, "fp32", 64),
        ("avx avx2 fma avx512f amx_bf16 avx512_bf16", "GenuineIntel", 6, 143, "bf16", 1024),
        ("avx avx2 fma avx512f avx512_bf16", "GenuineIntel", 6, 85, "bf16", 128),
        ("avx avx2 fma avx512f", "GenuineIntel", 6, 85, "bf16", 64),  # emulated: fp32 rate
        ("avx avx2 fma", "GenuineIntel", 6, 63, "fp32", 32),  # Haswell
        ("avx avx2 fma", "AuthenticAMD", 0x19, 1, "fp32", 32),  # Zen 3
        ("avx avx2 fma", "AuthenticAMD", 0x17, 1, "fp32", 16),  # Zen 1: 128-bit FMA units
        ("avx avx2 fma avx512f avx512_bf16", "AuthenticAMD", 0x19, 0x11, "fp32", 32),  # Zen 4
        ("avx avx2 fma avx512f", "AuthenticAMD", 0x1A, 0x02, "fp32", 64),  # Zen 5
        ("avx", "GenuineIntel", 6, 42, "fp32", 16),  # Sandy Bridge
    ],
)
def test_cpu_flops_per_cycle_from_the_flags(flags, vendor, family, model, precision, per_cycle):
    got, how = cpu_flops_per_cycle(facts(flags, vendor, family, model), precision)
    assert got == per_cycle and how


def test_cpu_peak_is_cores_times_clock_times_flops_per_cycle() -> None:
    peak = cpu_peak(facts("avx avx2 fma avx512f"), "fp32", cores=4)
    assert peak is not None
    assert peak.flops_per_s == pytest.approx(4 * 2.0e9 * 64)  # 512 GFLOP/s
    assert peak.per_device_flops_per_s == pytest.approx(2.0e9 * 64)
    assert peak.kind == "cpu-core" and peak.source.startswith("theoretical")


def test_a_peak_at_the_clock_cpuinfo_reports_says_boosting_cores_beat_it() -> None:
    # In a VM without cpufreq the only clock is cpuinfo's "cpu MHz", often the nominal one:
    # a 2-core Zen 4 VM at 2.60 GHz nominal measured fp32 matmuls at 120% of such a peak.
    nominal = dataclasses.replace(facts("avx avx2 fma avx512f"), frequency_source=NOMINAL_CLOCK)
    peak = cpu_peak(nominal, "fp32", cores=2)
    assert peak is not None and "no maximum clock visible: boosting cores beat it" in peak.source
    maximum = dataclasses.replace(nominal, frequency_source="cpufreq max")
    assert "boosting" not in cpu_peak(maximum, "fp32", cores=2).source


def test_no_cpu_peak_without_a_figure() -> None:
    assert cpu_peak(facts("neon asimd"), "fp32", 4) is None  # aarch64: no guess
    assert cpu_peak(facts("avx2 fma", ghz=None), "fp32", 4) is None  # unknown clock
    assert cpu_peak(facts("avx2 fma"), "fp16", 4) is None


def test_cpu_facts_from_a_fake_proc_and_sys_tree(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "cpuinfo").write_text(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
        "model name\t: AMD EPYC 7763\ncpu MHz\t\t: 2445.4\nflags\t\t: fpu avx avx2 fma\n\n"
        "processor\t: 1\nvendor_id\t: AuthenticAMD\n"
    )
    got = read_cpu_facts(tmp_path / "proc", tmp_path / "sys")
    assert (got.vendor, got.family, got.model, got.model_name) == (
        "AuthenticAMD",
        25,
        1,
        "AMD EPYC 7763",
    )
    assert got.max_frequency_hz == pytest.approx(2445.4e6) and got.frequency_source == "cpuinfo MHz"
    cpufreq = tmp_path / "sys" / "devices/system/cpu/cpu0/cpufreq"
    cpufreq.mkdir(parents=True)
    (cpufreq / "cpuinfo_max_freq").write_text("3500000\n")  # kHz
    got = read_cpu_facts(tmp_path / "proc", tmp_path / "sys")
    assert got.max_frequency_hz == pytest.approx(3.5e9) and got.frequency_source == "cpufreq max"


def test_mfu_arithmetic_by_hand() -> None:
    # 1 GFLOP per sample (forward + backward) at 10,000 samples/s is 10 TFLOP/s;
    # on one A100 in bf16 (312 TFLOP/s) that is 3.2% MFU.
    achieved = achieved_flops_per_s(1e9, 10_000)
    assert achieved == pytest.approx(1e13)
    assert mfu(achieved, 312e12) == pytest.approx(1e13 / 312e12)
    assert mfu(achieved, None) is None  # unknown device: absent, not zero
    assert achieved_flops_per_s(None, 100.0) is None
    assert achieved_flops_per_s(1e9, 0.0) is None


def test_run_peak_uses_tf32_only_where_the_gpu_has_it() -> None:
    a100 = run_peak("cuda", "fp32", gpu_name="NVIDIA A100-SXM4-80GB", gpus=2, tf32=ALL_TF32)
    assert a100.precision == "tf32" and a100.flops_per_s == pytest.approx(2 * 156e12)
    v100 = run_peak("cuda", "fp32", gpu_name="Tesla V100-SXM2-16GB", gpus=1, tf32=ALL_TF32)
    assert v100.precision == "fp32" and v100.flops_per_s == pytest.approx(15.7e12)


def test_cores_per_node_counts_what_workers_could_use() -> None:
    pinned = [{"cores": [0, 1], "torch_threads": 2}, {"cores": [2, 3], "torch_threads": 2}]
    assert cores_per_node(pinned) == [4]
    # The torch-default pitfall: 2 workers x 4 threads on the same 4 cores use 4 cores.
    naive = [{"cores": [0, 1, 2, 3], "torch_threads": 4}] * 2
    assert cores_per_node(naive) == [4]
    # One thread on a 4-core affinity set uses one core.
    assert cores_per_node([{"cores": [0, 1, 2, 3], "torch_threads": 1}]) == [1]
    two_nodes = [
        {"hostname": "a", "cores": [0, 1], "torch_threads": 2},
        {"hostname": "b", "cores": [0, 1], "torch_threads": 2},
    ]
    assert cores_per_node(two_nodes) == [2, 2]


def test_cpu_run_peak_counts_at_most_the_physical_cores() -> None:
    cpu = facts("avx avx2 fma")  # 4 physical cores
    assert run_peak("cpu", "fp32", cpu_facts=cpu, node_cores=[8]).devices == 4
    assert run_peak("cpu", "fp32", cpu_facts=cpu, node_cores=[2, 2]).devices == 4


def test_probe_figure_scales_per_core_and_per_gpu() -> None:
    cpu_probe = {"threads": 4, "precisions": {"fp32": {"best_flops_per_s": 400e9}}}
    assert probe_flops_per_s(cpu_probe, "fp32", "cpu", 2) == pytest.approx(200e9)
    assert probe_flops_per_s(cpu_probe, "bf16", "cpu", 2) is None
    gpu_probe = {"precisions": {"bf16": {"best_flops_per_s": 700e12}}}
    assert probe_flops_per_s(gpu_probe, "bf16", "cuda", 8) == pytest.approx(5.6e15)


def test_hardware_figures_of_a_cpu_run_with_a_stored_probe(tmp_path: Path, monkeypatch) -> None:
    import trainscale.hardware.figures as hardware

    cpu = facts("avx avx2 fma", ghz=2.0)  # 32 FLOPs/cycle: 64 GFLOP/s per core
    monkeypatch.setattr(hardware, "read_cpu_facts", lambda: cpu)
    monkeypatch.setattr(hardware.socket, "gethostname", lambda: "probe-host")
    config = RunDevices("cpu", 2, "fp32")
    summary = {"flops_per_sample": 1e6, "samples_per_s": 32_000.0}  # 32 GFLOP/s achieved
    workers = [{"cores": [0], "torch_threads": 1}, {"cores": [1], "torch_threads": 1}]
    with RunStore(tmp_path / "s.db") as store:
        common = {"host": "probe-host", "device_type": "cpu", "device": "Test CPU"}
        store.add_probe(
            "matmul",
            {"threads": 2, "precisions": {"fp32": {"best_flops_per_s": 80e9}}},
            {},
            **common,
        )
        # A newer --quick probe is a smoke test: it is not the yardstick.
        store.add_probe(
            "matmul",
            {"quick": True, "threads": 2, "precisions": {"fp32": {"best_flops_per_s": 1e9}}},
            {},
            **common,
        )
        assert latest_full_probe(store, "probe-host", "Test CPU", "cpu").result["threads"] == 2
        got = hardware_figures(config, summary, workers, store).summary()
    assert got["hardware"] == {
        "device_type": "cpu",
        "device": "Test CPU",
        "devices": 2,
        "kind": "cpu-core",
    }
    assert got["achieved_tflops"] == pytest.approx(0.032)
    assert got["mfu_peak"]["tflops"] == pytest.approx(0.128)  # 2 cores x 2 GHz x 32
    assert got["mfu"] == pytest.approx(0.25)
    assert got["mfu_vs_probe"] == pytest.approx(32e9 / 80e9)  # probe: 40 GFLOP/s per core
    assert got["mfu_probe_peak"]["precision"] == "fp32"


def test_mfu_vs_probe_takes_the_newest_quiet_probe_that_measured_the_runs_precision(
    tmp_path: Path, monkeypatch
) -> None:
    import trainscale.hardware.figures as hardware

    monkeypatch.setattr(hardware, "read_cpu_facts", lambda: facts("avx avx2 fma", ghz=2.0))
    monkeypatch.setattr(hardware.socket, "gethostname", lambda: "probe-host")
    summary = {"flops_per_sample": 1e6, "samples_per_s": 32_000.0}  # 32 GFLOP/s achieved
    workers = [{"cores": [0], "torch_threads": 1}, {"cores": [1], "torch_threads": 1}]
    common = {"host": "probe-host", "device_type": "cpu", "device": "Test CPU"}
    busy = {"contention": {"verdict": "busy", "reason": "other processes used 1.2 cores"}}
    with RunStore(tmp_path / "s.db") as store:
        fp32 = {"threads": 2, "precisions": {"fp32": {"best_flops_per_s": 80e9}}}
        yardstick = store.add_probe("matmul", fp32, {}, **common)
        # Newer: a probe of bf16 alone, and an fp32 one of a busy machine (slow: 20 GFLOP/s).
        bf16 = {"threads": 2, "precisions": {"bf16": {"best_flops_per_s": 300e9}}}
        store.add_probe("matmul", bf16, {}, **common)
        slow = {"threads": 2, "precisions": {"fp32": {"best_flops_per_s": 20e9}}, **busy}
        store.add_probe("matmul", slow, {}, **common)
        got = hardware_figures(RunDevices("cpu", 2, "fp32"), summary, workers, store).summary()
    assert got["mfu_probe_peak"]["probe_id"] == yardstick
    assert got["mfu_vs_probe"] == pytest.approx(32e9 / 80e9)


def test_hardware_figures_without_flops_or_peak_are_absent(monkeypatch) -> None:
    import trainscale.hardware.figures as hardware

    monkeypatch.setattr(hardware, "read_cpu_facts", lambda: facts("neon"))
    config = RunDevices("cpu", 1, "fp32")
    got = hardware_figures(
        config, {"flops_per_sample": None, "samples_per_s": 10.0}, [{}]
    ).summary()
    assert got["mfu"] is None and got["mfu_peak"] is None and got["achieved_tflops"] is None


def test_cores_per_node_tells_nodes_apart_by_address() -> None:
    # Containers on two machines often share a host name; their addresses differ.
    same_name = [
        {"hostname": "localhost", "addr": "10.0.0.1", "cores": [0, 1], "torch_threads": 2},
        {"hostname": "localhost", "addr": "10.0.0.2", "cores": [0, 1], "torch_threads": 2},
    ]
    assert cores_per_node(same_name) == [2, 2]
    # Two workers of one node report the same address: one node, cores counted once.
    one_node = [{**same_name[0], "cores": [0, 1, 2, 3]}] * 2
    assert cores_per_node(one_node) == [4]


def _cuda_config(nnodes: int, workers: int) -> RunConfig:
    flat = tiny_config().flat()
    flat.update(
        device="cuda",
        nnodes=nnodes,
        workers=workers,
        batch_size=16,
        global_batch_size=16 * nnodes * workers,
        rdzv_endpoint="node0:29400" if nnodes > 1 else None,
        rdzv_id="job" if nnodes > 1 else None,
    )
    return RunConfig.from_flat(flat)


def _devices(config: RunConfig) -> RunDevices:
    # Full fp32 throughout: these tests count GPUs, not precisions (tests/unit/test_tf32.py).
    return RunDevices(
        config.parallel.device,
        config.world_size,
        config.optimisation.precision,
        lambda: NO_TF32,
    )


def test_a_cuda_run_over_several_nodes_counts_the_gpus_of_every_node(monkeypatch) -> None:
    import trainscale.hardware.figures as hardware

    monkeypatch.setattr(hardware, "cuda_device", lambda: "NVIDIA A100-SXM4-80GB")
    config = _cuda_config(nnodes=2, workers=4)
    assert config.world_size == 8
    # Throughput is global: 8 GPUs together do 10,000 samples/s of 1 GFLOP each.
    summary = {"flops_per_sample": 1e9, "samples_per_s": 10_000.0}
    got = hardware_figures(_devices(config), summary, [{}] * 8).summary()
    assert got["hardware"]["devices"] == 8
    assert got["mfu_peak"]["devices"] == 8
    assert got["mfu_peak"]["tflops"] == pytest.approx(8 * 19.5)
    assert got["mfu"] == pytest.approx(10.0 / (8 * 19.5))
    one_node = hardware_figures(
        _devices(_cuda_config(nnodes=1, workers=4)), summary, [{}] * 4
    ).summary()
    assert one_node["hardware"]["devices"] == 4
    assert one_node["mfu"] == pytest.approx(10.0 / (4 * 19.5))


def test_a_cuda_run_over_several_nodes_scales_the_probe_to_every_gpu(
    tmp_path: Path, monkeypatch
) -> None:
    import trainscale.hardware.figures as hardware

    monkeypatch.setattr(hardware, "cuda_device", lambda: "NVIDIA A100-SXM4-80GB")
    monkeypatch.setattr(hardware.socket, "gethostname", lambda: "gpu-host")
    summary = {"flops_per_sample": 1e9, "samples_per_s": 10_000.0}
    with RunStore(tmp_path / "s.db") as store:
        store.add_probe(
            "matmul",
            {"precisions": {"fp32": {"best_flops_per_s": 10e12}}},
            {},
            host="gpu-host",
            device_type="cuda",
            device="NVIDIA A100-SXM4-80GB",
        )
        got = hardware_figures(
            _devices(_cuda_config(nnodes=2, workers=4)), summary, [{}] * 8, store
        ).summary()
    assert got["mfu_probe_peak"]["tflops"] == pytest.approx(80.0)  # 10 TFLOP/s x 8 GPUs
    assert got["mfu_vs_probe"] == pytest.approx(10.0 / 80.0)


def test_a_cpu_run_over_several_nodes_counts_the_cores_of_every_node(monkeypatch) -> None:
    import trainscale.hardware.figures as hardware

    cpu = facts("avx avx2 fma", ghz=2.0)  # 4 physical cores, 64 GFLOP/s per core
    monkeypatch.setattr(hardware, "read_cpu_facts", lambda: cpu)
    config = RunDevices("cpu", 2, "fp32")
    workers = [
        {"hostname": host, "addr": addr, "cores": [core], "torch_threads": 1}
        for host, addr in (("a", "10.0.0.1"), ("b", "10.0.0.2"))
        for core in (0, 1)
    ]
    summary = {"flops_per_sample": 1e6, "samples_per_s": 64_000.0}  # 64 GFLOP/s achieved
    got = hardware_figures(config, summary, workers).summary()
    assert got["hardware"]["devices"] == 4  # 2 cores on each of 2 nodes
    assert got["mfu_peak"]["tflops"] == pytest.approx(4 * 0.064)
    assert got["mfu"] == pytest.approx(0.25)


def _topology(root: Path, siblings: dict[int, str]) -> Path:
    for cpu, cpus in siblings.items():
        topology = root / f"devices/system/cpu/cpu{cpu}/topology"
        topology.mkdir(parents=True)
        (topology / "core_cpus_list").write_text(cpus + "\n")
    return root


def test_hyperthreads_of_one_core_count_once(tmp_path: Path, monkeypatch) -> None:
    import functools

    import trainscale.hardware.figures as hardware
    from trainscale.hardware.facts import physical_cores_among

    # Two cores with two hyperthreads each: CPUs 0 and 2 share core 0, 1 and 3 core 1.
    sysfs = _topology(tmp_path, {0: "0,2", 1: "1,3", 2: "0,2", 3: "1,3"})
    assert physical_cores_among([0, 2], sysfs) == 1
    assert physical_cores_among([0, 1, 2, 3], sysfs) == 2
    assert physical_cores_among([0, 7], sysfs) == 2  # no topology for 7: each CPU a core
    # A container given two siblings of one core: its run computes on one core's units.
    monkeypatch.setattr(
        hardware, "physical_cores_among", functools.partial(physical_cores_among, sysfs=sysfs)
    )
    siblings = [{"cores": [0], "torch_threads": 1}, {"cores": [2], "torch_threads": 1}]
    assert cores_per_node(siblings) == [1]
    assert cores_per_node([{"cores": [0, 1], "torch_threads": 2}]) == [2]
