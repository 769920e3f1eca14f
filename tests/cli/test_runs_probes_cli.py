"""`trainscale runs probes`: the stored probes of this machine, newest first, with their
headline figures and what makes one no yardstick (quick, busy)."""

from __future__ import annotations

import json

import pytest

from trainscale.results.store import RunStore

from tests.helpers.cli import one_error_line, run_cli

QUIET = {"verdict": "quiet"}
BUSY = {"verdict": "busy", "reason": "other work used the cores"}


@pytest.fixture
def probed_store(tmp_path):
    """Four probes, oldest first: a full matmul, a quick dispatch on a busy machine, an
    all-reduce, and a matmul row from an older version without its precisions."""
    store = tmp_path / "runs.db"
    cpu = {"host": "node-1", "device_type": "cpu", "device": "AMD EPYC"}
    matmul = {
        "precisions": {
            "bf16": {"best_flops_per_s": 2.5e11},
            "fp32": {"best_flops_per_s": 1.25e12},
        },
        "quick": False,
        "contention": QUIET,
    }
    dispatch = {"seconds_per_op": 1.25e-5, "quick": True, "contention": BUSY}
    fit = {"alpha_s": 3.5e-5, "beta_s_per_byte": 1e-9, "bandwidth_bytes_per_s": 1e9}
    allreduce = {"fit": fit, "quick": False, "contention": QUIET}
    with RunStore(store) as opened:
        ids = [
            opened.add_probe("matmul", matmul, {}, **cpu),
            opened.add_probe("dispatch", dispatch, {}, **cpu),
            opened.add_probe("allreduce", allreduce, {}, workers=2, **cpu),
            opened.add_probe("matmul", {"quick": False}, {}, **cpu),
        ]
    return store, ids


def test_the_probes_are_listed_newest_first_with_their_figures_and_caveats(probed_store, capsys):
    store, ids = probed_store
    assert run_cli(["runs", "probes", "--store", str(store)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["probe", "created", "(UTC)", "kind", "device", "host"] + [
        "figures",
        "note",
    ]
    rows = lines[1:]
    assert [row.split()[0] for row in rows] == [probe_id[:8] for probe_id in reversed(ids)]
    old, allreduce, dispatch, matmul = rows
    assert "2 workers: alpha 35.0 us, 1/beta 1.00 GB/s" in allreduce
    assert "12.5 us per operator" in dispatch and dispatch.rstrip().endswith("quick, busy")
    # fp32 first, as precisions are named everywhere; the probe trusted: no note.
    assert matmul.rstrip().endswith("fp32 1.25 TFLOP/s, bf16 250.0 GFLOP/s")
    assert "cpu: AMD EPYC" in matmul and "node-1" in matmul
    assert old.split()[3] == "matmul"  # listed, its missing figures left blank


def test_kind_and_limit_choose_the_probes_and_json_gives_their_results(probed_store, capsys):
    store, ids = probed_store
    assert run_cli(["runs", "probes", "--kind", "matmul", "--store", str(store)]) == 0
    rows = capsys.readouterr().out.splitlines()[1:]
    assert [row.split()[0] for row in rows] == [ids[3][:8], ids[0][:8]]

    assert run_cli(["runs", "probes", "--limit", "2", "--json", "--store", str(store)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [probe["probe_id"] for probe in listed] == [ids[3], ids[2]]
    assert listed[1]["workers"] == 2 and listed[1]["result"]["fit"]["alpha_s"] == 3.5e-5
    assert listed[1]["caveats"] == []


def test_a_store_without_probes_says_how_to_make_them(tmp_path, capsys):
    store = tmp_path / "runs.db"
    RunStore(store).close()
    assert run_cli(["runs", "probes", "--store", str(store)]) == 0
    assert capsys.readouterr().out.strip() == (
        f"no probes in {store} (measure with `trainscale probe`)"
    )
    assert run_cli(["runs", "probes", "--kind", "allreduce", "--store", str(store)]) == 0
    assert capsys.readouterr().out.startswith("no allreduce probes in")
    assert run_cli(["runs", "probes", "--json", "--store", str(store)]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--store", "missing.db"], "no results store at missing.db"),
        (["--kind", "warp"], "invalid choice: 'warp'"),
        (["--limit", "0"], "--limit"),
    ],
)
def test_mistakes_are_one_line_and_exit_2(tmp_path, monkeypatch, capsys, argv, says):
    monkeypatch.chdir(tmp_path)
    assert run_cli(["runs", "probes", *argv]) == 2
    assert says in one_error_line(capsys)


def test_a_probe_id_given_for_a_run_says_it_is_a_probe(probed_store, capsys):
    store, ids = probed_store
    assert run_cli(["runs", "show", ids[2][:8], "--store", str(store)]) == 2
    assert one_error_line(capsys).endswith(
        f"'{ids[2][:8]}' in {store} is a probe (allreduce), not a run; "
        "`trainscale runs probes --json` shows its figures"
    )
