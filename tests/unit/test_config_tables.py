"""trainscale.config.tables: tables of run options, generated from the options' declaration."""

from __future__ import annotations

import pytest

from trainscale.config.files import validate
from trainscale.config.options import RunOptions
from trainscale.config.tables import RunOptionsTable, option_spellings, run_options_table
from trainscale.errors import ConfigError
from trainscale.sweeps.spec import SweepFile


def test_every_run_option_is_a_key_of_the_table() -> None:
    table = run_options_table("T")
    assert set(table.model_fields) == set(RunOptions.flat_fields())
    for key, leaf in RunOptions.flat_fields().items():
        assert option_spellings()[key] == key
        assert option_spellings()[key.replace("_", "-")] == key
        assert table.model_fields[key].annotation == leaf.annotation


@pytest.mark.parametrize(
    ("spelling", "key"),
    [
        ("threads-per-worker", "threads_per_worker"),
        ("timeout", "timeout_s"),
        ("warmup-steps", "warmup_steps_untimed"),
        ("warmup_steps", "warmup_steps_untimed"),
        ("rdzv-timeout", "rdzv_timeout_s"),
        ("workload-option", "workload_options"),
        ("options", "workload_options"),
    ],
)
def test_command_line_spellings_name_the_same_option(spelling: str, key: str) -> None:
    assert option_spellings()[spelling] == key


@pytest.mark.parametrize("flag", ["no-eval", "no_eval", "no-download"])
def test_flags_that_turn_an_option_off_are_not_its_spellings(flag: str) -> None:
    # `no-eval = true` would mean evaluate = false: read as `evaluate` it would invert.
    assert flag not in option_spellings()
    with pytest.raises(ConfigError, match=rf"base.{flag}: unknown run option"):
        validate({"base": {"workload": "mnist-cnn", flag: True}}, SweepFile, "s")


def test_given_keeps_the_file_order_and_the_last_spelling_wins() -> None:
    table = run_options_table("T").model_validate(
        {"workers": 2, "threads_per_worker": 1, "lr": 1, "threads-per-worker": 4}
    )
    assert isinstance(table, RunOptionsTable)
    assert table.given() == {"workers": 2, "lr": 1.0, "threads_per_worker": 4}
    assert list(table.given()) == ["workers", "lr", "threads_per_worker"]


def test_axes_are_non_empty_lists_checked_item_by_item() -> None:
    grid = run_options_table("G", axes=True)
    assert grid.model_validate({"workers": [1, 2]}).given() == {"workers": [1, 2]}
    with pytest.raises(ConfigError, match=r"^s: grid.workers\[0\]: input should be a valid int"):
        validate({"base": {"workload": "m"}, "grid": {"workers": ["1"]}}, SweepFile, "s")


def test_workload_options_travel_as_text() -> None:
    table = run_options_table("T").model_validate({"options": {"n": 3, "flag": True}})
    assert table.given() == {"workload_options": {"n": "3", "flag": "true"}}
