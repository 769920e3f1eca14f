"""trainscale.report: stored runs to tables, plots, Markdown, CSV and a self-contained HTML page.

`aggregate` groups runs into configurations and computes the figures (pure), `plots` draws
them, `markdown`, `html` and `csv_table` render them, and `build.write_report` ties it
together for the CLI.

Called, the package is the Python API's `trainscale.report` (see trainscale/entry.py).
"""

from trainscale.entry import callable_package
from trainscale.errors import TrainscaleError


class ReportError(TrainscaleError):
    """A report that cannot be made as asked: no runs, an unknown id or baseline, a bad DIR."""


callable_package(__name__)
