"""`trainscale simulate --fit-to TABLE`, `--validate-published` and `--list-published`."""

from __future__ import annotations

import json

import pytest

from trainscale.simulator.published import published_table_names

from tests.helpers.cli import one_error_line, run_cli


def test_fit_to_a_table_fits_its_split_and_predicts_the_rest(tmp_path, capsys):
    name = "tf-benchmarks-k80-p2-8xlarge-distributed-resnet50"
    code = run_cli(["simulate", "--fit-to", name, "--json", "--plot", str(tmp_path)])
    assert code == 0
    (table,) = json.loads(capsys.readouterr().out)["tables"]
    roles = {p["devices"]: p["role"] for p in table["points"]}
    assert roles == {1: "fit", 8: "fit", 16: "held out", 32: "held out", 64: "held out"}
    fit_errors = [abs(p["error"]) for p in table["points"] if p["role"] == "fit"]
    assert max(fit_errors) < 0.01
    assert table["fitted"]["straggler_sigma"] > table["prior"]["straggler_sigma"]
    assert (tmp_path / f"published-{name}.png").stat().st_size > 0


def test_fit_devices_choose_another_split(capsys):
    name = "tf-benchmarks-dgx1-p100-resnet50"
    assert run_cli(["simulate", "--fit-to", name, "--fit-devices", "1,8", "--json"]) == 0
    (table,) = json.loads(capsys.readouterr().out)["tables"]
    assert [p["devices"] for p in table["points"] if p["role"] == "held out"] == [2, 4]


def test_validate_published_meets_the_target_on_held_out_points(tmp_path, capsys):
    code = run_cli(["simulate", "--validate-published", "--json", "--plot", str(tmp_path)])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert len(result["tables"]) == len(published_table_names())
    assert result["held_out_points"] >= 50
    # The target of docs/simulator.md: median |error| <= 10% on points no fit used.
    assert result["median_abs_error_held_out"] <= 0.10
    assert (tmp_path / "published-errors.png").stat().st_size > 0


def test_list_published_names_every_table(capsys):
    assert run_cli(["simulate", "--list-published", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in rows] == published_table_names()
    assert all(row["source"] for row in rows)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--fit-to", "no-such-table"], "unknown published table 'no-such-table'; tables: "),
        (["--fit-devices", "1,8"], "--fit-devices goes with --fit-to TABLE"),
        (["resnet50", "--fit-to", "tf-benchmarks-dgx1-p100-resnet50"], "take no WORKLOAD"),
        (
            ["--validate-published", "--fit-to", "tf-benchmarks-dgx1-p100-resnet50"],
            "--validate-published fits every table on its own split",
        ),
        (
            ["--fit-to", "tf-benchmarks-dgx1-p100-resnet50", "--fit-devices", "16"],
            "table tf-benchmarks-dgx1-p100-resnet50 has no point at 16 devices; its points: "
            "1, 2, 4, 8",
        ),
    ],
)
def test_mistakes_are_one_line(capsys, args, message):
    assert run_cli(["simulate", *args]) == 2
    assert message in one_error_line(capsys)


@pytest.mark.parametrize("option", ["--validate-published", "--fit-to"])
def test_an_unwritable_plot_directory_is_refused_before_any_fit(capsys, monkeypatch, option):
    from trainscale.simulator import published_run

    def no_fit(*args, **kwargs):
        raise AssertionError("fitted before the plot directory was checked")

    monkeypatch.setattr(published_run, "fit_table", no_fit)
    table = ["tf-benchmarks-dgx1-p100-resnet50"] if option == "--fit-to" else []
    assert run_cli(["simulate", option, *table, "--plot", "/proc/nope"]) == 2
    assert "cannot create /proc/nope for the plots" in one_error_line(capsys)


def test_the_help_examples_name_shipped_tables():
    import re

    from trainscale.cli.simulate_cmd import EPILOG

    named = re.findall(r"--fit-to (\S+)", EPILOG)
    assert named
    assert set(named) <= set(published_table_names())
