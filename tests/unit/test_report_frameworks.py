"""Reports of runs from several frameworks: a section per framework, each with its own
baseline, and the frameworks side by side (from a fixture store, no training)."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.reporting.build import load_report_data, write_report
from trainscale.reporting.frameworks import framework_rows, several_frameworks

from tests.helpers.report_store import FixtureConfig, build_store

SWEEP = "5eed0000"


def _configs() -> list[FixtureConfig]:
    def config(framework: str, workers: int, rates: list[float]) -> FixtureConfig:
        return FixtureConfig(
            label=f"{framework} x{workers}",
            workload="mnist-cnn",
            workers=workers,
            threads=1,
            affinity="compact",
            rates=rates,
            data="synthetic",
            extra_config={"framework": framework},
        )

    return [
        config("pytorch", 1, [100.0, 104.0, 96.0]),
        config("pytorch", 2, [180.0, 186.0, 174.0]),
        config("tensorflow", 1, [150.0, 156.0, 144.0]),
        config("tensorflow", 2, [210.0, 216.0, 204.0]),
        config("jax", 1, [80.0, 82.0, 78.0]),
    ]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return build_store(tmp_path / "runs.db", _configs())


def test_each_framework_is_a_section_with_its_own_baseline(store: Path) -> None:
    data = load_report_data(store, sweep_id=SWEEP)
    names = [section.workload for section in data.workloads]
    assert names == ["mnist-cnn in PyTorch", "mnist-cnn in TensorFlow", "mnist-cnn in JAX"]
    tf = data.workloads[1]
    assert tf.baseline is not None and tf.baseline.label == "tensorflow x1"
    two = next(c for c in tf.configurations if c.workers == 2)
    # Its speedup is over TensorFlow's own 1-worker run (210 / 150), not PyTorch's.
    assert two.speedup == pytest.approx(210.0 / 150.0)


def test_frameworks_side_by_side_ratios_to_pytorch(store: Path) -> None:
    data = load_report_data(store, sweep_id=SWEEP)
    assert several_frameworks(data)
    rows = {(r["setting"].split(",")[0], r["framework"]): r for r in framework_rows(data)}
    assert rows[("1 x 1", "tensorflow")]["vs PyTorch"] == "1.50x"
    assert rows[("2 x 1", "tensorflow")]["vs PyTorch"] == f"{210 / 180:.2f}x"
    assert rows[("1 x 1", "jax")]["vs PyTorch"] == "0.80x"
    assert rows[("1 x 1", "pytorch")]["vs PyTorch"] == "1.00x"
    assert rows[("2 x 1", "tensorflow")]["speedup"] == f"{210 / 150:.2f}x"
    # PyTorch first within a setting, the others after it.
    order = [r["framework"] for r in framework_rows(data) if r["setting"].startswith("1 x 1")]
    assert order[0] == "pytorch"


def test_one_framework_reports_as_before(tmp_path: Path) -> None:
    store = build_store(tmp_path / "one.db", _configs()[:2])
    data = load_report_data(store, sweep_id=SWEEP)
    assert [s.workload for s in data.workloads] == ["mnist-cnn"]
    assert not several_frameworks(data)


def test_the_written_report_shows_the_side_by_side_table(store: Path, tmp_path: Path) -> None:
    html = write_report(store, sweep_id=SWEEP, out_dir=tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text()
    assert "## Frameworks side by side" in markdown
    assert "| mnist-cnn | 1 x 1, fp32, global batch 64 | tensorflow | 150.0 | 1.50x |" in markdown
    assert "Frameworks side by side" in Path(html).read_text()


def test_a_setting_differing_by_more_than_the_framework_is_its_own_row(tmp_path: Path) -> None:
    def config(label: str, framework: str, affinity: str, rate: float) -> FixtureConfig:
        return FixtureConfig(
            label=label,
            workload="mnist-cnn",
            workers=1,
            threads=1,
            affinity=affinity,
            rates=[rate, rate],
            data="synthetic",
            extra_config={"framework": framework},
        )

    # PyTorch unpinned first: it must not become TensorFlow's reference (pinned).
    store = build_store(
        tmp_path / "mixed.db",
        [
            config("torch free", "pytorch", "none", 120.0),
            config("torch pinned", "pytorch", "compact", 100.0),
            config("tf pinned", "tensorflow", "compact", 150.0),
        ],
    )
    rows = framework_rows(load_report_data(store, sweep_id=SWEEP))
    by_setting: dict[str, dict[str, str]] = {}
    for row in rows:
        by_setting.setdefault(row["setting"], {})[row["framework"]] = row["vs PyTorch"]
    assert len(by_setting) == 2  # the two affinities read apart
    pinned = next(s for s in by_setting if "affinity=compact" in s)
    assert by_setting[pinned] == {"pytorch": "1.00x", "tensorflow": "1.50x"}
    free = next(s for s in by_setting if "affinity=none" in s)
    assert by_setting[free] == {"pytorch": "1.00x"}


def test_a_report_of_one_framework_other_than_pytorch_names_it(tmp_path: Path) -> None:
    store = build_store(tmp_path / "jax.db", _configs()[4:])  # JAX, one worker
    data = load_report_data(store, sweep_id=SWEEP)
    assert [s.workload for s in data.workloads] == ["mnist-cnn in JAX"]
    write_report(store, sweep_id=SWEEP, out_dir=tmp_path / "out")
    markdown = (tmp_path / "out" / "report.md").read_text()
    machine = next(line for line in markdown.splitlines() if line.startswith("- Machine:"))
    assert ", jax, host " in machine  # beside torch's release (the fixture stores no version)
    header = (tmp_path / "out" / "report.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["workload", "framework"]
    assert (tmp_path / "out" / "report.csv").read_text().splitlines()[1].split(",")[1] == "jax"
