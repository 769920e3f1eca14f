"""`trainscale.env()` and `trainscale.probes()`: the machine's facts and the stored probes
from Python, the same objects `trainscale env --json` and `trainscale runs probes --json`
print, typed."""

from __future__ import annotations

import json

import pytest

import trainscale
from trainscale.api.machine_results import FACT_COLUMNS, STORED_PROBE_COLUMNS
from trainscale.cli import main
from trainscale.errors import ConfigError, StoreError
from trainscale.results.store import RunStore

QUIET = {"verdict": "quiet"}


def _json_of(capsys, argv: list[str]):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_env_types_the_facts_env_json_prints(tmp_path, capsys):
    missing = tmp_path / "missing.db"
    facts = trainscale.env(store=missing)
    printed = _json_of(capsys, ["env", "--json", "--store", str(missing)])

    assert set(facts.to_dict()) == set(printed)
    assert facts.host == printed["hostname"] and facts.cpu_model == printed["cpu_model"]
    assert facts.usable_cores == tuple(printed["usable_cores"])
    assert facts.gpus == tuple(gpu["name"] for gpu in printed["gpus"])
    assert facts.bf16_native is printed["bf16_native"]
    for precision, peak in printed["peaks"]["cpu"].items():
        if peak is not None:
            assert facts.peak_flops_per_s["cpu"][precision] == pytest.approx(peak["tflops"] * 1e12)
    assert facts.measured_flops_per_s == {}
    assert facts.probe_note == f"no results store at {missing}" and not missing.exists()

    frame = facts.to_dataframe()
    assert list(frame.columns) == list(FACT_COLUMNS)
    rows = dict(frame.values.tolist())
    assert rows["host"] == facts.host
    assert rows["measured matmul (trainscale probe)"] == facts.probe_note


def test_env_gives_the_newest_full_matmul_probe_of_each_device(tmp_path):
    facts = trainscale.env(store=tmp_path / "none.db")
    store = tmp_path / "runs.db"
    here = {"host": facts.host, "device_type": "cpu", "device": facts.cpu_model or "cpu"}
    figures = {"fp32": {"best_flops_per_s": 2.04e11}, "bf16": {"best_flops_per_s": 4.27e11}}
    with RunStore(store) as opened:
        opened.add_probe("matmul", {"precisions": figures, "quick": False}, {}, **here)
        quick = {"precisions": {"fp32": {"best_flops_per_s": 1.0}}, "quick": True}
        opened.add_probe("matmul", quick, {}, **here)  # newer, but never a yardstick

    measured = trainscale.env(store=store)
    assert measured.measured_flops_per_s == {"cpu": {"fp32": 2.04e11, "bf16": 4.27e11}}
    assert measured.probe_note is None


def test_env_refuses_an_unreadable_store_it_was_given_and_unknown_keywords(tmp_path):
    damaged = tmp_path / "damaged.db"
    damaged.write_text("not a database")
    with pytest.raises(StoreError, match="is not a trainscale results store"):
        trainscale.env(store=damaged)
    with pytest.raises(ConfigError, match="json"):
        trainscale.env(json=True)


@pytest.fixture
def probed_store(tmp_path):
    """Three probes, oldest first: a full matmul, a quick dispatch, a 2-worker all-reduce."""
    store = tmp_path / "runs.db"
    cpu = {"host": "node-1", "device_type": "cpu", "device": "AMD EPYC"}
    matmul = {"precisions": {"fp32": {"best_flops_per_s": 1.25e12}}, "contention": QUIET}
    dispatch = {"seconds_per_op": 1.25e-5, "quick": True, "contention": QUIET}
    fit = {"alpha_s": 3.5e-5, "beta_s_per_byte": 1e-9, "bandwidth_bytes_per_s": 1e9}
    with RunStore(store) as opened:
        ids = [
            opened.add_probe("matmul", matmul, {}, **cpu),
            opened.add_probe("dispatch", dispatch, {}, **cpu),
            opened.add_probe("allreduce", {"fit": fit, "contention": QUIET}, {}, workers=2, **cpu),
        ]
    return store, ids


def test_probes_are_the_stored_ones_newest_first_as_runs_probes_lists_them(probed_store, capsys):
    store, ids = probed_store
    found = trainscale.probes(store=store)

    assert [probe.probe_id for probe in found] == ids[::-1]
    assert found.to_dict() == _json_of(capsys, ["runs", "probes", "--json", "--store", str(store)])
    allreduce, dispatch, matmul = found
    assert (allreduce.kind, allreduce.workers) == ("allreduce", 2)
    assert allreduce.figures == "2 workers: alpha 35.0 us, 1/beta 1.00 GB/s"
    assert dispatch.caveats == ("quick",) and matmul.caveats == ()
    assert matmul.result["precisions"]["fp32"]["best_flops_per_s"] == 1.25e12

    frame = found.to_dataframe()
    assert list(frame.columns) == list(STORED_PROBE_COLUMNS)
    assert frame["caveats"].tolist() == ["", "quick", ""]


def test_kind_and_limit_choose_the_probes(probed_store):
    store, ids = probed_store
    assert [p.probe_id for p in trainscale.probes(kind="matmul", store=store)] == [ids[0]]
    assert [p.probe_id for p in trainscale.probes(limit=2, store=store)] == ids[:0:-1]


@pytest.mark.parametrize(
    ("keywords", "says"),
    [
        ({"kind": "flops"}, "kind must be one of matmul, dispatch, transfer, allreduce"),
        ({"limit": 0}, "limit must be a whole number >= 1"),
        ({"limit": "3"}, "limit"),
        ({"device": "cpu"}, "device"),
    ],
)
def test_probes_mistakes_are_config_errors(probed_store, keywords, says):
    store, _ = probed_store
    with pytest.raises(ConfigError, match=says):
        trainscale.probes(store=store, **keywords)


def test_probes_need_a_store(tmp_path):
    with pytest.raises(StoreError, match="no results store at"):
        trainscale.probes(store=tmp_path / "missing.db")
