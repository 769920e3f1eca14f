"""`trainscale env`: the JSON form is machine-readable, the table form explains bf16."""

from __future__ import annotations

import json

import pytest

from trainscale.cli import main
from trainscale.hardware.machine import bf16_summary
from trainscale.results.store import RunStore

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


def test_env_names_the_other_frameworks_installed_or_not(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import trainscale.reporting.this_machine as this_machine

    releases = {"tensorflow": None, "jax": "0.10.2"}
    monkeypatch.setattr(this_machine, "version", releases.get)
    assert main(["env", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["frameworks"] == releases
    assert main(["env"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # rich may wrap the line
    assert "other frameworks │ tensorflow (not installed), jax 0.10.2" in out


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


def _this_machine(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    assert main(["env", "--json", "--store", "none.db"]) == 0
    env = json.loads(capsys.readouterr().out)
    return env["hostname"], env["cpu_model"] or "cpu"


def test_env_shows_the_newest_full_matmul_probe_of_this_host_beside_the_peaks(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    host, cpu = _this_machine(capsys)
    store = tmp_path / "runs.db"
    figures = {"fp32": {"best_flops_per_s": 2.04e11}, "bf16": {"best_flops_per_s": 4.27e11}}
    full = {"precisions": figures, "threads": 2, "quick": False}
    with RunStore(store) as opened:
        shown = opened.add_probe("matmul", full, {}, host=host, device_type="cpu", device=cpu)
        quick = {**full, "quick": True}  # newer, but a smoke test: never the yardstick
        opened.add_probe("matmul", quick, {}, host=host, device_type="cpu", device=cpu)
        elsewhere = {**full, "precisions": {"fp32": {"best_flops_per_s": 9e12}}}
        opened.add_probe("matmul", elsewhere, {}, host="other", device_type="cpu", device=cpu)

    assert main(["env", "--store", str(store)]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if "measured matmul" in line]
    assert "fp32 204.0 GFLOP/s, bf16 427.0 GFLOP/s on 2 thread(s)" in row
    assert f"probe {shown[:8]}" in row

    assert main(["env", "--json", "--store", str(store)]) == 0
    measured = json.loads(capsys.readouterr().out)["measured_matmul"]
    assert measured["probes"]["cpu"]["probe_id"] == shown and measured["note"] is None
    assert measured["probes"]["cpu"]["flops_per_s"] == {"fp32": 2.04e11, "bf16": 4.27e11}


def test_env_says_where_no_probe_is_stored_and_creates_no_store(
    tmp_path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "empty.db"
    RunStore(empty).close()
    assert main(["env", "--store", str(empty)]) == 0
    assert "none stored for this host: `trainscale probe` measures it" in capsys.readouterr().out

    missing = tmp_path / "missing.db"
    assert main(["env", "--store", str(missing)]) == 0
    assert f"no results store at {missing}" in capsys.readouterr().out
    assert not missing.exists()


def test_a_damaged_store_is_an_error_when_asked_for_and_a_note_when_it_is_the_default(
    tmp_path, monkeypatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    (tmp_path / "trainscale.db").write_text("not a database")
    assert main(["env"]) == 0  # the machine's facts do not depend on the store
    assert "cannot read trainscale.db: " in capsys.readouterr().out
    assert main(["env", "--store", "trainscale.db"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "is not a trainscale results store" in err


@pytest.mark.parametrize(
    ("precisions", "shown"),
    [
        ({"fp32": {"best_flops_per_s": "fast"}, "bf16": {"best_flops_per_s": 3 * 10**11}},
         {"bf16": 3e11}),
        (["fp32"], {}),
    ],
)  # fmt: skip
def test_a_hand_edited_probe_shows_what_it_still_says(
    tmp_path, capsys: pytest.CaptureFixture[str], precisions, shown
) -> None:
    host, cpu = _this_machine(capsys)
    store = tmp_path / "runs.db"
    with RunStore(store) as opened:
        result = {"precisions": precisions}
        opened.add_probe("matmul", result, {}, host=host, device_type="cpu", device=cpu)
    assert main(["env", "--json", "--store", str(store)]) == 0
    measured = json.loads(capsys.readouterr().out)["measured_matmul"]["probes"]["cpu"]
    assert measured["flops_per_s"] == shown
    assert main(["env", "--store", str(store)]) == 0
    assert "measured matmul, cpu" in capsys.readouterr().out
