"""Price tables, cost arithmetic, and the report's cost columns and GPU-versus-CPU sentence."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainscale.errors import TrainscaleError
from trainscale.hardware.price_file import PRICES_ENV_VAR, load_price_table
from trainscale.hardware.prices import PriceError
from trainscale.metrics.cost import CostedSetting, cost_usd, gpu_versus_cpu
from trainscale.reporting.aggregate import aggregate
from trainscale.reporting.tables import configuration_rows
from trainscale.results.records import RunRecord


def test_the_packaged_example_table_loads() -> None:
    table = load_price_table()
    assert table.origin.startswith("default")
    assert table.as_of and table.source
    assert {"H100", "A100", "V100", "T4", "K80", "cpu-core"} <= set(table.prices)


def test_user_file_and_environment_variable(tmp_path: Path, monkeypatch) -> None:
    mine = tmp_path / "prices.toml"
    mine.write_text('as_of = "2025-01"\n[prices]\nH100 = 2.5\n"cpu-core" = 0.05\n')
    assert load_price_table(mine).prices == {"H100": 2.5, "cpu-core": 0.05}
    monkeypatch.setenv(PRICES_ENV_VAR, str(mine))
    table = load_price_table()
    assert table.origin == str(mine) and table.as_of == "2025-01"


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ('[prices]\nH100 = "cheap"\n', "prices.H100"),
        ("[prices]\nH100 = -1.0\n", "prices.H100"),
        ("[prices]\nH100 = true\n", "prices.H100"),
        ("currency = 'EUR'\n[prices]\nH100 = 1.0\n", "currency"),
        ('as_of = "2024"\n', "prices"),
        ("[prices\nH100 = 1\n", "not valid TOML"),
    ],
)
def test_bad_price_files_name_the_key(tmp_path: Path, text: str, names: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(PriceError) as error:
        load_price_table(path)
    message = str(error.value)
    assert names in message and "\n" not in message
    assert isinstance(error.value, TrainscaleError)  # the CLI prints one line, exit 2


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            '[prices]\nH100 = "cheap"\n',
            "prices.H100: must be a number of dollars per hour, finite and >= 0, got 'cheap'",
        ),
        ('[prices]\n"H100 PCIe" = inf\n', 'prices."H100 PCIe": must be a number of dollars'),
        ("as_of = 2024\n[prices]\n", "as_of: must be text, got 2024"),
        ('as_of = "2024"\n', "[prices] section is missing"),
        ("prices = 3\n", "prices: must be a table of dollars per device-hour ([prices]), got 3"),
    ],
)
def test_price_file_messages_name_the_file_the_key_and_the_reason(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(PriceError) as error:
        load_price_table(path)
    assert str(error.value).startswith(f"price file {path}: {message}")


def test_whole_numbers_are_prices_too(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('notes = "mine"\n[prices]\nA100 = 2\n')
    table = load_price_table(path)
    assert table.prices == {"A100": 2.0} and table.meta == {"notes": "mine"}


def test_missing_price_file(tmp_path: Path) -> None:
    with pytest.raises(PriceError, match="does not exist"):
        load_price_table(tmp_path / "nope.toml")


def test_cost_arithmetic() -> None:
    # 8 GPUs for 30 minutes at $12 per GPU-hour: 4 GPU-hours, $48.
    assert cost_usd(8, 1800, 12.0) == pytest.approx(48.0)
    assert cost_usd(8, 1800, None) is None
    assert cost_usd(None, 1800, 1.0) is None
    assert cost_usd(2, None, 1.0) is None


def test_the_gpu_run_costs_less_though_its_hour_costs_more() -> None:
    # 1 GPU at $3/h reaches the target in 60 s: $0.05.
    # 32 cores at $0.05/core-hour ($1.60/h) need 3600 s: $1.60.
    gpu = CostedSetting(
        "1 GPU", "cuda", 1, "V100", 3.0, cost_usd(1, 120, 3.0), cost_usd(1, 60, 3.0)
    )
    cpu = CostedSetting(
        "32 cores", "cpu", 32, "cpu-core", 0.05, cost_usd(32, 7200, 0.05), cost_usd(32, 3600, 0.05)
    )
    assert gpu.hourly_usd > cpu.hourly_usd
    sentence = gpu_versus_cpu([gpu, cpu])
    assert "costs less to reach the target accuracy" in sentence
    assert "even though its hourly price is higher" in sentence
    assert "$0.05" in sentence and "$1.6" in sentence
    assert gpu_versus_cpu([cpu]) is None


def test_without_a_target_the_comparison_is_per_million_samples() -> None:
    gpu = CostedSetting("gpu", "cuda", 1, "T4", 0.5, 1.0, None, num_samples=1_000_000)
    cpu = CostedSetting("cpu", "cpu", 4, "cpu-core", 0.05, 0.5, None, num_samples=1_000_000)
    sentence = gpu_versus_cpu([gpu, cpu])
    assert "costs more per million training samples" in sentence


def record(run_id: str, device: str, summary: dict, world_size: int = 1) -> RunRecord:
    config = {
        "workload": "mnist-cnn",
        "device": device,
        "workers": world_size,
        "threads_per_worker": 4 if device == "cpu" else 1,
        "precision": "fp32",
    }
    return RunRecord(
        run_id=run_id,
        created_at="2026-01-01T00:00:00+00:00",
        finished_at="2026-01-01T01:00:00+00:00",
        status="completed",
        error=None,
        workload="mnist-cnn",
        data_kind="real",
        world_size=world_size,
        threads_per_worker=config["threads_per_worker"],
        affinity="compact",
        precision="fp32",
        global_batch_size=128,
        tag=None,
        config=config,
        env={"cpu_model": "Test CPU", "usable_cores": [0, 1, 2, 3], "hostname": "h"},
        summary={
            "samples_per_s": 100.0,
            "step_time_s_median": 0.1,
            "step_time_s_iqr": 0.001,
            "test_accuracy": 0.99,
            "target_accuracy": 0.98,
            "accuracy_curve": [[1.0, 0.99]],
            "num_samples": 60_000,
            **summary,
        },
        schema_version=3,
        config_hash=f"hash-{device}",
    )


def test_report_costs_configurations_and_compares_gpu_with_cpu(tmp_path: Path) -> None:
    prices = tmp_path / "prices.toml"
    prices.write_text('[prices]\nA100 = 4.0\n"cpu-core" = 0.05\n')
    gpu = record(
        "gpu-run",
        "cuda",
        {
            "train_time_s": 90.0,
            "time_to_target_s": 36.0,
            "achieved_tflops": 15.6,
            "mfu": 0.1,
            "energy_j": {"cpu_package_j": None, "gpu_j": 9000.0},
            "hardware": {
                "device_type": "cuda",
                "devices": 1,
                "kind": "A100",
                "device": "NVIDIA A100-SXM4-80GB",
            },
        },
    )
    cpu = record(
        "cpu-run",
        "cpu",
        {
            "train_time_s": 3600.0,
            "time_to_target_s": 1800.0,
            "energy_j": {"cpu_package_j": None, "gpu_j": None},
            "hardware": {
                "device_type": "cpu",
                "devices": 4,
                "kind": "cpu-core",
                "device": "Test CPU",
            },
        },
    )
    data = aggregate([cpu, gpu], title="t", source="s", prices=load_price_table(prices))
    by_device = {c.device_type: c for c in data.configurations}
    assert by_device["cuda"].cost_usd == pytest.approx(4.0 * 90 / 3600)  # $0.10
    assert by_device["cuda"].cost_to_target_usd == pytest.approx(4.0 * 36 / 3600)  # $0.04
    assert by_device["cpu"].cost_usd == pytest.approx(4 * 0.05)  # 4 core-hours... of 1 h
    assert by_device["cpu"].cost_to_target_usd == pytest.approx(4 * 0.05 / 2)
    assert by_device["cuda"].gpu_j == 9000.0 and by_device["cpu"].gpu_j is None
    sentence = next(n for n in data.notes if "GPU run" in n)
    assert "costs less to reach the target accuracy" in sentence
    assert "even though its hourly price is higher" in sentence
    assert any(n.startswith("Costs use the price table") for n in data.notes)
    rows = {r["configuration"]: r for r in configuration_rows(data.workloads[0])}
    gpu_row = next(r for label, r in rows.items() if "cuda" in label or "gpu" in label.lower())
    assert gpu_row["TFLOP/s (MFU)"] == "15.6 (10.0%)"
    assert gpu_row["energy kJ (CPU pkg / GPU)"] == "- / 9"
    assert gpu_row["cost ($)"] == "0.1"


def test_report_without_a_price_for_the_device_says_so() -> None:
    from trainscale.hardware.price_file import parse_price_table

    gpu = record(
        "gpu-run",
        "cuda",
        {
            "train_time_s": 90.0,
            "hardware": {
                "device_type": "cuda",
                "devices": 1,
                "kind": "H200",
                "device": "NVIDIA H200",
            },
        },
    )
    table = parse_price_table({"prices": {"cpu-core": 0.05}}, "test")
    data = aggregate([gpu], title="t", source="s", prices=table)
    assert data.configurations[0].cost_usd is None
    assert any("no price for: H200" in n for n in data.notes)


def test_a_hand_edited_figure_of_the_wrong_type_is_not_costed() -> None:
    # A train time of text (or a device count of text) is not measured: the report shows
    # no cost for that run rather than failing on it.
    edited = record(
        "cpu-run",
        "cpu",
        {"train_time_s": "an hour", "hardware": {"device_type": "cpu", "devices": "4"}},
    )
    table = load_price_table()
    data = aggregate([edited], title="t", source="s", prices=table)
    configuration = data.configurations[0]
    assert configuration.cost_usd is None
    assert configuration.devices == 4  # the cores the report counts, as for an older run


def test_mfu_above_100_percent_is_said_to_come_from_the_peaks_clock() -> None:
    hardware = {"device_type": "cpu", "devices": 2, "kind": "cpu-core", "device": "Test CPU"}
    figures = {"train_time_s": 10.0, "achieved_tflops": 0.2, "hardware": hardware}
    beyond = record("beyond", "cpu", {**figures, "mfu": 1.2})
    data = aggregate([beyond], title="t", source="s")
    (note,) = [n for n in data.notes if "MFU above 100%" in n]
    assert note.startswith("1 configuration(s) show MFU above 100% (")
    assert "so that peak is below what the devices did" in note
    within = record("within", "cpu", {**figures, "mfu": 0.53})
    assert not [n for n in aggregate([within], title="t", source="s").notes if "MFU" in n]
