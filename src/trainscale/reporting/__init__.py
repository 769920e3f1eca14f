"""Stored runs to tables, plots, Markdown, CSV and a self-contained HTML page.

`aggregate` groups runs into configurations and computes the figures (pure), `plots` draws
them, `markdown`, `html` and `csv_table` render them, and `build.write_report` ties it
together for the CLI.
"""

from trainscale.errors import TrainscaleError


class ReportError(TrainscaleError):
    """A report that cannot be made as asked: no runs, an unknown id or baseline, a bad DIR."""
