"""Machine facts: cpulist parsing, fake /proc and /sys trees, and the real machine."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from trainscale.errors import ConfigError
from trainscale.hardware import facts as system
from trainscale.hardware.cpulist import format_cpulist, parse_cpulist
from trainscale.hardware.facts import (
    CpuInfo,
    collect_environment,
    read_cpu_facts,
    read_cpuinfo,
    read_numa_nodes,
)

INTEL_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile
bogomips\t: 4000.00

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8480+
flags\t\t: fpu sse avx2 avx512f avx512bw avx512_bf16 amx_bf16 amx_tile
"""

# An AVX512 CPU without native bf16: oneDNN would "support" bf16 here, by emulation.
SKYLAKE_CPUINFO = """\
processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz
flags\t\t: fpu avx2 avx512f avx512bw avx512vl avx512dq
"""

AMD_CPUINFO = (
    "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
    "model name\t: AMD EPYC 7763\ncpu MHz\t\t: 2445.4\nflags\t\t: fpu avx avx2 fma\n\n"
    "processor\t: 1\nvendor_id\t: AuthenticAMD\nmodel name\t: another name, never read\n"
)

ARM_CPUINFO = """\
processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd sve bf16 i8mm
CPU implementer\t: 0x41
"""


def _write_proc(tmp_path: Path, cpuinfo: str) -> Path:
    proc = tmp_path / "proc"
    proc.mkdir()
    (proc / "cpuinfo").write_text(cpuinfo)
    return proc


def _write_nodes(tmp_path: Path, nodes: dict[str, str]) -> Path:
    sys_root = tmp_path / "sys"
    node_dir = sys_root / "devices" / "system" / "node"
    node_dir.mkdir(parents=True)
    # sysfs also holds files such as "online" and "possible" that are not nodes.
    (node_dir / "online").write_text("0-1\n")
    for name, cpulist in nodes.items():
        (node_dir / name).mkdir()
        (node_dir / name / "cpulist").write_text(cpulist)
    return sys_root


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", [0]),
        ("0-3", [0, 1, 2, 3]),
        ("0-3,8-11", [0, 1, 2, 3, 8, 9, 10, 11]),
        ("0-3,8-11\n", [0, 1, 2, 3, 8, 9, 10, 11]),
        ("1,3,5", [1, 3, 5]),
        (" 2 - 4 , 7 ", [2, 3, 4, 7]),
        ("5,0-1", [5, 0, 1]),  # order as written: explicit affinity sets keep it
        ("", []),
        ("\n", []),  # a memory-only NUMA node
    ],
)
def test_parse_cpulist(text: str, expected: list[int]) -> None:
    assert parse_cpulist(text) == expected


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("a", "'a' is not a core number"),
        ("0,,1", "'' is not a core number"),
        ("0-", "'0-' is not a core number"),
        ("-1", "'-1' is not a core number"),
        ("3-1", "reversed"),
        ("0-2,1", "core 1 is listed twice"),
        ("1.5", "'1.5'"),
        ("²", "'²'"),
        # Refused before it is spelled out: the range alone took minutes and gigabytes.
        ("0-99999999999", "core 99999999999 is past the 8,192 CPUs Linux numbers"),
        ("8192", "core 8192 is past"),
    ],
)
def test_parse_cpulist_rejects_malformed_text(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match="invalid core list") as caught:
        parse_cpulist(text)
    assert fragment in str(caught.value)


@pytest.mark.parametrize(
    ("cores", "expected"),
    [([0, 1, 2, 3, 8, 9, 10, 11], "0-3,8-11"), ([5, 0, 1, 1], "0-1,5"), ([], ""), ([7], "7")],
)
def test_format_cpulist_round_trips(cores: list[int], expected: str) -> None:
    assert format_cpulist(cores) == expected
    assert parse_cpulist(expected) == sorted(set(cores))


def test_read_cpuinfo_intel(tmp_path: Path) -> None:
    info = read_cpuinfo(_write_proc(tmp_path, INTEL_CPUINFO))
    assert info.model_name == "Intel(R) Xeon(R) Platinum 8480+"
    assert info.vendor == "GenuineIntel"
    assert {"avx2", "amx_bf16", "amx_tile"} <= info.flags


def test_read_cpuinfo_missing_file_is_unknown_not_empty(tmp_path: Path) -> None:
    info = read_cpuinfo(tmp_path)
    assert (info.model_name, info.vendor, info.flags) == (None, None, None)
    assert info == CpuInfo()  # every other field unknown too


def test_read_cpuinfo_arm_features(tmp_path: Path) -> None:
    info = read_cpuinfo(_write_proc(tmp_path, ARM_CPUINFO))
    assert info.model_name is None
    assert info.vendor == "0x41"
    assert "bf16" in info.flags


def test_one_cpuinfo_reading_serves_the_environment_and_the_peak(tmp_path: Path) -> None:
    proc = _write_proc(tmp_path, AMD_CPUINFO)
    info = read_cpuinfo(proc)
    assert (info.vendor, info.family, info.model, info.mhz) == ("AuthenticAMD", 25, 1, 2445.4)
    assert info.flags == frozenset({"fpu", "avx", "avx2", "fma"})
    env = collect_environment(proc_root=proc, sys_root=tmp_path / "no-sys", cwd=tmp_path)
    cpu = read_cpu_facts(proc, tmp_path / "no-sys")
    assert env["cpu_model"] == cpu.model_name == info.model_name == "AMD EPYC 7763"
    assert env["cpu_vendor"] == cpu.vendor == info.vendor
    assert env["cpu_flags_of_interest"] == ["avx2"]
    assert cpu.flags == info.flags and (cpu.family, cpu.model) == (25, 1)


def test_cpu_facts_without_a_flags_line_have_no_flags(tmp_path: Path) -> None:
    proc = _write_proc(tmp_path, "processor\t: 0\nmodel name\t: Mystery CPU\n")
    assert read_cpuinfo(proc).flags is None  # unknown, for the environment
    assert read_cpu_facts(proc, tmp_path).flags == frozenset()  # no units, for the peak


def test_read_numa_nodes_sorted_by_number(tmp_path: Path) -> None:
    sys_root = _write_nodes(
        tmp_path, {"node10": "16-19\n", "node0": "0-3,8-11\n", "node1": "4-7,12-15\n"}
    )
    assert read_numa_nodes(sys_root) == [
        {"node": 0, "cpus": [0, 1, 2, 3, 8, 9, 10, 11]},
        {"node": 1, "cpus": [4, 5, 6, 7, 12, 13, 14, 15]},
        {"node": 10, "cpus": [16, 17, 18, 19]},
    ]


def test_read_numa_nodes_memory_only_node_has_no_cpus(tmp_path: Path) -> None:
    sys_root = _write_nodes(tmp_path, {"node0": "0-1\n", "node1": "\n"})
    assert read_numa_nodes(sys_root) == [{"node": 0, "cpus": [0, 1]}, {"node": 1, "cpus": []}]


def test_read_numa_nodes_unreadable_gives_empty_list(tmp_path: Path) -> None:
    assert read_numa_nodes(tmp_path / "missing") == []
    garbled = _write_nodes(tmp_path, {"node0": "0-1\n", "node1": "zero\n"})
    assert read_numa_nodes(garbled) == []


def test_collect_environment_uses_injected_roots(tmp_path: Path) -> None:
    proc = _write_proc(tmp_path, INTEL_CPUINFO)
    sys_root = _write_nodes(tmp_path, {"node0": "0-3", "node1": "4-7"})
    env = collect_environment(proc_root=proc, sys_root=sys_root, cwd=tmp_path)
    assert env["cpu_model"] == "Intel(R) Xeon(R) Platinum 8480+"
    assert env["cpu_vendor"] == "GenuineIntel"
    assert env["cpu_flags_of_interest"] == [
        "avx2",
        "avx512f",
        "avx512_bf16",
        "amx_bf16",
        "amx_tile",
    ]
    assert env["bf16_native"] is True
    assert env["numa_nodes"] == [
        {"node": 0, "cpus": [0, 1, 2, 3]},
        {"node": 1, "cpus": [4, 5, 6, 7]},
    ]
    # tmp_path is outside any repository.
    assert env["git_revision"] is None
    assert env["git_dirty"] is None


def test_bf16_not_native_on_avx512_without_bf16(tmp_path: Path) -> None:
    env = collect_environment(proc_root=_write_proc(tmp_path, SKYLAKE_CPUINFO), cwd=tmp_path)
    assert env["cpu_flags_of_interest"] == ["avx2", "avx512f"]
    assert env["bf16_native"] is False


def test_bf16_native_on_arm_bf16(tmp_path: Path) -> None:
    env = collect_environment(proc_root=_write_proc(tmp_path, ARM_CPUINFO), cwd=tmp_path)
    assert env["cpu_flags_of_interest"] == []
    assert env["bf16_native"] is True


def test_module_defaults_are_injectable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "PROC_ROOT", _write_proc(tmp_path, SKYLAKE_CPUINFO))
    monkeypatch.setattr(system, "SYS_ROOT", _write_nodes(tmp_path, {"node0": "0-5"}))
    assert read_cpuinfo().model_name == "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"
    assert read_numa_nodes() == [{"node": 0, "cpus": [0, 1, 2, 3, 4, 5]}]


def test_git_state_in_a_repository(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    # A throwaway repository in tmp_path; GIT_* variables are dropped so that a run inside a
    # git hook (where GIT_DIR points at the project) can never touch the project repository.
    env = {key: value for key, value in os.environ.items() if not key.startswith("GIT_")}
    env.update(
        GIT_CONFIG_NOSYSTEM="1",
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@example.com",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@example.com",
    )

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=tmp_path, env=env, check=True, capture_output=True)

    git("init", "-q")
    (tmp_path / "a.txt").write_text("one\n")
    git("add", "a.txt")
    git("commit", "-q", "-m", "first")
    revision, dirty = system.git_state(tmp_path)
    assert revision is not None and len(revision) == 40
    assert dirty is False
    (tmp_path / "a.txt").write_text("two\n")
    assert system.git_state(tmp_path) == (revision, True)


EXPECTED_KEYS = {
    "hostname",
    "os",
    "python",
    "torch_version",
    "numpy_version",
    "trainscale_version",
    "cpu_model",
    "cpu_vendor",
    "logical_cores",
    "physical_cores",
    "usable_cores",
    "numa_nodes",
    "memory_total_bytes",
    "memory_available_bytes",
    "cpu_capability",
    "cpu_flags_of_interest",
    "bf16_native",
    "gpus",
    "cuda_version",
    "git_revision",
    "git_dirty",
    "torch_num_threads_default",
}


def test_collect_environment_on_this_machine() -> None:
    env = collect_environment()
    assert EXPECTED_KEYS.issubset(env)
    # Must survive a JSON round trip unchanged: it is stored with every run.
    assert json.loads(json.dumps(env)) == env
    assert env["usable_cores"], "no usable cores reported"
    assert env["usable_cores"] == sorted(env["usable_cores"])
    assert env["logical_cores"] >= len(env["usable_cores"])
    assert env["memory_total_bytes"] >= env["memory_available_bytes"] > 0
    assert isinstance(env["bf16_native"], bool)
    assert env["torch_num_threads_default"] >= 1
    for gpu in env["gpus"]:
        assert set(gpu) == {"index", "name", "memory_bytes", "capability"}
