"""Notes of a report in each format: a command in backticks is <code> on the HTML page and
plain words in the CSV, never literal backticks; the HTML page's row marks are explained."""

from __future__ import annotations

import csv
import json
import sqlite3

from trainscale.reporting.build import build_report
from trainscale.reporting.html import text_html
from trainscale.reporting.tables import plain_text

from tests.helpers.report_store import FixtureConfig, build_store, run_id


def test_code_spans_become_code_or_plain_words():
    note = "kept out of `trainscale recommend` <and> `x`"
    assert text_html(note) == (
        "kept out of <code>trainscale recommend</code> &lt;and&gt; <code>x</code>"
    )
    assert plain_text(note) == "kept out of trainscale recommend <and> x"
    assert text_html("no code here") == "no code here"


def test_report_notes_have_no_literal_backticks_and_row_marks_are_explained(tmp_path):
    configs = [
        FixtureConfig("serial", "mnist-cnn", 1, 1, "compact", [100.0, 101.0]),
        # A step-time IQR of 30% of the median: a noisy configuration, marked in red.
        FixtureConfig("two", "mnist-cnn", 2, 1, "compact", [190.0, 192.0], step_iqr_fraction=0.3),
    ]
    store = build_store(tmp_path / "s.db", configs)
    with sqlite3.connect(store) as conn:  # one run on a busy machine: a note naming a command
        rid = run_id(1, 0)
        (text,) = conn.execute("SELECT summary_json FROM runs WHERE run_id = ?", (rid,)).fetchone()
        summary = json.loads(text)
        summary["contention"] = {"verdict": "busy"}
        conn.execute(
            "UPDATE runs SET summary_json = ? WHERE run_id = ?", (json.dumps(summary), rid)
        )
    conn.close()
    written = build_report(store, sweep_id="5eed", out_dir=tmp_path / "out")
    page = written.html.read_text(encoding="utf-8")
    notes = [line for line in page.splitlines() if 'class="note"' in line]
    assert any("<code>trainscale recommend</code>" in line for line in notes)
    assert not any("`" in line for line in notes)
    assert "Row marks: a red bar at a row&#x27;s left marks a noisy configuration" in page
    assert "<strong>row marks</strong>" in page
    with open(written.csv, encoding="utf-8", newline="") as f:
        assert not any("`" in row["notes"] for row in csv.DictReader(f))
