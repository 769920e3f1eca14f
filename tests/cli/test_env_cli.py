"""`trainscale env`: the JSON form is machine-readable, the table form explains bf16."""

from __future__ import annotations

import json

import pytest

from trainscale.cli import main
from trainscale.hardware.machine import bf16_summary

KEYS = {
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


def test_env_json_prints_valid_json_with_the_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["env", "--json"]) == 0
    out = capsys.readouterr().out
    env = json.loads(out)
    assert KEYS.issubset(env)
    assert env["usable_cores"]


def test_env_table_names_the_facts_and_the_bf16_situation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["env"]) == 0
    out = capsys.readouterr().out
    assert "usable cores" in out
    assert "torch" in out
    assert "bf16 autocast: " in out


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"bf16_native": True, "cpu_flags_of_interest": ["avx512f", "amx_bf16"]},
            "bf16 autocast: native (AMX/AVX512-BF16)",
        ),
        (
            {"bf16_native": False, "cpu_flags_of_interest": ["avx2", "avx512f"]},
            "bf16 autocast: emulated — expect bf16 to be slower than fp32 on this CPU",
        ),
        (
            {"bf16_native": True, "cpu_flags_of_interest": []},
            "bf16 autocast: native (CPU bf16 instructions)",
        ),
    ],
)
def test_bf16_summary(env: dict, expected: str) -> None:
    assert bf16_summary(env) == expected
