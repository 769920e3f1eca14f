"""The example notebook runs top to bottom in a real Jupyter kernel (nbclient), with its
workload in the file next to it, and stores what the Python API says it stored."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from trainscale.results.store import RunStore

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

EXAMPLE_DIR = Path(__file__).resolve().parents[2] / "examples" / "custom_workload"
NOTEBOOK = "measure_my_model.ipynb"


def _outputs(notebook, kind: str) -> list[dict]:
    return [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.outputs
        if output.output_type == kind
    ]


def test_the_example_notebook_runs_bench_predicts_and_reports_with_plots_inline(
    tmp_path, monkeypatch
):
    # A copy of the notebook and its workload file, side by side in a fresh folder: the
    # notebook names the workload by the file next to it, as a user's would.
    for name in (NOTEBOOK, "my_workload.py"):
        shutil.copy(EXAMPLE_DIR / name, tmp_path / name)
    monkeypatch.delenv("TRAINSCALE_STORE", raising=False)
    notebook = nbformat.read(tmp_path / NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, with the cell, if any cell fails

    assert not _outputs(notebook, "error")
    printed = "".join(output["text"] for output in _outputs(notebook, "stream"))
    assert "1 worker(s):" in printed and "2 worker(s):" in printed
    assert "speedup of 2 workers:" in printed
    # The plots are shown inline: PNG images in the notebook's outputs.
    images = [o for o in _outputs(notebook, "display_data") if "image/png" in o["data"]]
    assert len(images) >= 2
    # The DataFrames were shown (the runs, the bench's settings).
    tables = [o["data"]["text/html"] for o in _outputs(notebook, "execute_result")]
    assert any("samples_per_s_median" in table for table in tables)
    # The prediction beyond this machine: one row per worker count, 1 to 16.
    assert "calibrated from: " in printed
    assert any("exposed_comm_share" in table and ">16<" in table for table in tables)

    with RunStore(tmp_path / "notebook-runs.db", create=False) as store:
        runs = store.list_runs(workload="spiral-mlp")
    sources = {run.config["workload_source"] for run in runs}
    assert sources == {f"{tmp_path / 'my_workload.py'}:make_workload"}
    assert {run.world_size for run in runs if run.tag is None} == {1, 2}
    # The bench's rungs trained the custom workload too.
    assert len([run for run in runs if (run.tag or "").startswith("bench:")]) >= 4
    assert all(run.status == "completed" for run in runs)
    assert (tmp_path / "notebook-report" / "report.html").is_file()
