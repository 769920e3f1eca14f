"""`trainscale.probe`: this machine's figures, measured and stored as `trainscale probe`
measures and stores them, typed, with one DataFrame row per headline figure."""

from __future__ import annotations

import json

import pytest

import trainscale
from trainscale.api.machine_results import PROBE_COLUMNS
from trainscale.cli import main
from trainscale.errors import ConfigError
from trainscale.results.store import RunStore

SMALL = {"device": "cpu", "threads": 1, "precisions": ["fp32"], "matmul_sizes": [64, 128]}


def test_a_cpu_probe_is_measured_stored_and_typed(tmp_path, capsys):
    store = tmp_path / "s.db"
    only = ["matmul", "dispatch"]
    probed = trainscale.probe(only=only, quick=True, store=store, progress=True, **SMALL)

    assert (probed.device_type, probed.quick, probed.skipped) == ("cpu", True, {})
    assert set(probed.matmul_flops_per_s) == {"fp32"} and probed.matmul_flops_per_s["fp32"] > 0
    assert probed.seconds_per_op is not None and probed.seconds_per_op > 0
    assert probed.transfer_bytes_per_s == {} and probed.allreduce_alpha_s is None
    assert "probing matmul: fp32 at n = 64, 128" in capsys.readouterr().err
    with RunStore(store) as opened:
        stored = {probe.kind: probe for probe in opened.list_probes()}
    assert {kind: probe.probe_id for kind, probe in stored.items()} == probed.probe_ids
    best = stored["matmul"].result["precisions"]["fp32"]["best_flops_per_s"]
    assert best == probed.matmul_flops_per_s["fp32"]
    assert stored["dispatch"].result["seconds_per_op"] == probed.seconds_per_op

    frame = probed.to_dataframe()
    assert list(frame.columns) == list(PROBE_COLUMNS)
    assert frame[["kind", "figure", "unit"]].values.tolist() == [
        ["matmul", "fp32", "FLOP/s"],
        ["dispatch", "per operator", "s"],
    ]

    # to_dict() is the command's --json: the same object, measured again.
    args = ["probe", "--only", "matmul,dispatch", "--quick", "--device", "cpu", "--threads", "1"]
    args += ["--precisions", "fp32", "--matmul-sizes", "64,128", "--store", str(store), "--json"]
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    # `busiest` (the processes that used the cores) is there when that measurement was busy.
    assert set(printed) - {"busiest"} == set(probed.to_dict()) - {"busiest"}
    assert set(printed["matmul"]) == set(probed.to_dict()["matmul"])


def test_an_all_reduce_probe_from_python_fits_alpha_and_beta(tmp_path):
    store = tmp_path / "s.db"
    probed = trainscale.probe(
        device="cpu",
        only=["allreduce"],
        workers=2,
        message_sizes=[4096, 65536],
        repeats=2,
        quick=True,
        store=store,
    )
    assert set(probed.probe_ids) == {"allreduce"}
    with RunStore(store) as opened:
        stored = opened.latest_probe("allreduce")
    assert stored is not None and stored.workers == 2
    fit = stored.result["fit"]
    assert (probed.allreduce_alpha_s, probed.allreduce_beta_s_per_byte) == (
        fit["alpha_s"],
        fit["beta_s_per_byte"],
    )
    assert probed.allreduce_alpha_s >= 0 and probed.allreduce_beta_s_per_byte >= 0
    assert probed.to_dataframe()["figure"].tolist() == ["alpha", "beta"]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"only": ["gpu"]}, "--only: unknown measurement 'gpu'"),
        ({"repeats": 5000}, "--repeats must be at most 1000"),
        ({"threads": 0}, "--threads must be at least 1"),
        ({"matmul_sizes": [10**6]}, "a matmul of size 1000000"),
        ({"wokers": 2}, "did you mean 'workers'"),
        ({"only": "matmul"}, "trainscale.probe() option only:"),
    ],
)
def test_probe_mistakes_are_one_config_error_line_and_nothing_is_measured(
    tmp_path, options, message
):
    store = tmp_path / "s.db"
    with pytest.raises(ConfigError) as info:
        trainscale.probe(device="cpu", store=store, **options)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not store.exists()
