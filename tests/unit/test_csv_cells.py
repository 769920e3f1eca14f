"""CSV files for spreadsheets: user text that a spreadsheet would run as a formula is written
as text (OWASP's leading quote), numbers stay numbers. Both CSV writers share the rule."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest

from trainscale.reporting.build import build_report
from trainscale.results.csv_cells import csv_cell
from trainscale.results.store import RunStore

from tests.helpers.cli import run_cli
from tests.helpers.report_store import FixtureConfig, build_store

FORMULAS = [
    '=HYPERLINK("http://x","y")',
    "+1+cmd|' /C calc'!A0",
    "-2+3",
    "@SUM(A1:A9)",
    "\t=1+1",
    "\r=1+1",
]


@pytest.mark.parametrize("text", FORMULAS)
def test_formula_text_gets_a_leading_quote(text: str) -> None:
    assert csv_cell(text) == "'" + text


@pytest.mark.parametrize(
    ("value", "expected"),
    [(-1.5, -1.5), (-3, -3), (0, 0), (True, True), (None, ""), ("a=b", "a=b"), ("", "")],
)
def test_numbers_and_plain_text_are_unchanged(value: object, expected: object) -> None:
    assert csv_cell(value) == expected


def test_runs_export_neutralises_a_formula_tag(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "runs.db"
    with RunStore(path) as store:
        for rid, tag in (("r1", FORMULAS[0]), ("r2", "plain")):
            store.create_run(
                rid,
                "mnist-cnn",
                {},
                {},
                data_kind="synthetic",
                world_size=1,
                threads_per_worker=1,
                affinity="compact",
                precision="fp32",
                global_batch_size=64,
                tag=tag,
            )
            # A negative figure (a loss can be one) must stay a number in the export.
            store.complete_run(rid, {"samples_per_s": 10.0, "test_loss": -0.25}, [], [0.1])
        store.fail_run("r3", "@import failed: no module named x")
    assert run_cli(["runs", "export", "--format", "csv", "--store", str(path)]) == 0
    rows = {row["run_id"]: row for row in csv.DictReader(io.StringIO(capsys.readouterr().out))}
    assert rows["r1"]["tag"] == "'" + FORMULAS[0]
    assert rows["r2"]["tag"] == "plain"
    assert rows["r1"]["test_loss"] == "-0.25"
    assert rows["r3"]["error"] == "'@import failed: no module named x"


def test_report_csv_neutralises_a_formula_label(tmp_path: Path) -> None:
    label = '=HYPERLINK("http://x","y")'
    configs = [
        FixtureConfig(label, "mnist-cnn", 1, 1, "compact", [100.0]),
        FixtureConfig("-o file=x.csv", "mnist-cnn", 2, 1, "compact", [180.0]),
    ]
    store = build_store(tmp_path / "runs.db", configs)
    written = build_report(store, sweep_id="5eed", out_dir=tmp_path / "out")
    rows = list(csv.DictReader(io.StringIO(written.csv.read_text(encoding="utf-8"))))
    assert [row["configuration"] for row in rows] == ["'" + label, "'-o file=x.csv"]
    assert float(rows[1]["speedup"]) == pytest.approx(1.8)  # numbers are left alone
