"""User strings in report.md and report.html are text, never markup: a label with a pipe,
a newline, backticks, a <script> tag or a javascript: link cannot break a table or inject."""

from __future__ import annotations

import html
import re
import sqlite3

import pytest
from markdown_it import MarkdownIt

from trainscale.reporting.build import WrittenReport, build_report
from trainscale.reporting.markdown import md_text
from trainscale.reporting.tables import (
    CONFIGURATION_COLUMNS,
    CORE_COLUMNS,
    DETAIL_COLUMNS,
    NOT_COMPLETED_COLUMNS,
)

from tests.helpers.report_store import FixtureConfig, build_store

EVIL_LABEL = "a | b\nc `code` <script>alert(1)</script> [x](javascript:alert(1)) *em* _u_ ~~s~~"
EVIL_NAME = "# name <img src=x onerror=alert(1)> [y](javascript:alert(2))"
EVIL_ERROR = "RuntimeError: bad | cell\n<b>bold</b> ![i](http://evil/x.png) &lt;"


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> WrittenReport:
    root = tmp_path_factory.mktemp("evil")
    configs = [
        FixtureConfig(EVIL_LABEL, "mnist-cnn", 1, 1, "compact", [100.0, 101.0]),
        FixtureConfig("| plain", "mnist-cnn", 2, 1, "compact", [190.0, None]),
    ]
    store = build_store(root / "runs.db", configs, name=EVIL_NAME)
    with sqlite3.connect(store) as conn:  # the failed repeat's reason, as a worker wrote it
        conn.execute("UPDATE runs SET error = ? WHERE status = 'failed'", (EVIL_ERROR,))
    conn.close()
    return build_report(store, sweep_id="5eed", out_dir=root / "out")


def _render(markdown: str) -> str:
    renderer = MarkdownIt("commonmark").enable(["table", "strikethrough"])
    # Let every link through, so that an injected javascript: link would show as one.
    renderer.validateLink = lambda url: True
    return renderer.render(markdown)


def _table_after(page: str, heading: str) -> list[list[str]]:
    """The body rows (lists of cell HTML) of the first table after `heading`."""
    table = page.split(heading, 1)[1].split("<table>", 1)[1].split("</table>", 1)[0]
    body = table.split("<tbody>", 1)[1]
    return [re.findall(r"<td[^>]*>(.*?)</td>", row, re.S) for row in body.split("</tr>")[:-1]]


def test_markdown_renders_user_strings_as_text(written: WrittenReport) -> None:
    markdown = written.markdown.read_text(encoding="utf-8")
    page = _render(markdown)
    # No markup of the user's made it through: no tags, links, code spans, emphasis.
    for tag in ("<script", "<img src=x", "<b>", "<a ", "<code>", "<em>", "<strong>em", "<s>"):
        assert tag not in page, tag
    assert page.count("<img") == len(written.plots)  # only the report's own plots
    # The tables keep their shape: every row has every column.
    # The configuration table is split in two (the main table and its details), which
    # together hold every configuration column.
    rows = _table_after(page, "mnist-cnn</h2>")
    assert [len(row) for row in rows] == [len(CORE_COLUMNS)] * 2
    details = _table_after(page, "Details</h3>")
    assert [len(row) for row in details] == [len(DETAIL_COLUMNS)] * 2
    assert set(CORE_COLUMNS) | set(DETAIL_COLUMNS) == set(CONFIGURATION_COLUMNS)
    assert details[0][0] == rows[0][0]
    failed = _table_after(page, "Runs that did not complete")
    assert [len(row) for row in failed] == [len(NOT_COMPLETED_COLUMNS)]
    # ... and show the user's text, on one line, as typed.
    flat = " ".join(EVIL_LABEL.split())
    assert rows[0][0] == html.escape(flat + " (baseline)", quote=False)
    assert failed[0][-1] == html.escape(" ".join(EVIL_ERROR.split()), quote=False)
    title = re.search(r"<h1>(.*?)</h1>", page, re.S)
    assert title is not None
    assert title.group(1) == html.escape("trainscale report: " + EVIL_NAME, quote=False)


def test_html_escapes_user_strings(written: WrittenReport) -> None:
    page = written.html.read_text(encoding="utf-8")
    assert "<script" not in page and "<b>bold" not in page and "<img src=x" not in page
    assert html.escape(EVIL_NAME) in page and html.escape("<script>alert(1)</script>") in page
    references = re.findall(r'(?:src|href)\s*=\s*"([^"]*)"', page)
    assert references and all(ref.startswith("data:") for ref in references)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a|b", "a\\|b"),
        ("line\nbreak", "line break"),
        ("<i>&amp;", "&lt;i&gt;&amp;amp;"),
        ("[x](javascript:y)", "\\[x\\](javascript:y)"),
        ("`c` *e* _u_ ~s~ \\", "\\`c\\` \\*e\\* \\_u\\_ \\~s\\~ \\\\"),
        ("0.9750 (2/3) 3.05x -", "0.9750 (2/3) 3.05x -"),  # figures read as they are
    ],
)
def test_md_text(text: str, expected: str) -> None:
    assert md_text(text) == expected
