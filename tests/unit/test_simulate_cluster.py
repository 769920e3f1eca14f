"""Cluster files: presets with sources, one-line errors naming the key, the machine at hand."""

from __future__ import annotations

import pytest

from trainscale.results.stored_machine import StoredMachine
from trainscale.simulator.cluster import (
    ClusterError,
    load_cluster_file,
    load_preset,
    local_cluster,
    parse_cluster,
    preset_names,
    resolve_cluster_argument,
)

GOOD = """
name = "two-node"
source = "made up for a test"
devices_per_node = 4

[device]
kind = "cuda"
name = "Test GPU"
peak_flops = { fp32 = "10 TFLOP/s", bf16 = "100 TFLOP/s" }
efficiency = 0.5

[intra_node]
alpha = "5 us"
bandwidth = "50 GB/s"

[inter_node]
alpha = "10 us"
bandwidth = "100 Gb/s"

[communication]
algorithm = "hierarchical"
overlap = 0.8
"""


def write(tmp_path, text, name="c.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_file_parses_with_units(tmp_path):
    spec = load_cluster_file(write(tmp_path, GOOD))
    assert spec.name == "two-node"
    assert spec.devices_per_node == 4 and spec.nodes is None
    assert spec.device.peak_for("fp32") == 10e12
    assert spec.device.peak_for("fp16") is None
    assert spec.intra_node.alpha_s == pytest.approx(5e-6)
    assert spec.inter_node.bandwidth_bytes_per_s == pytest.approx(12.5e9)
    assert spec.algorithm == "hierarchical" and spec.overlap == 0.8
    topology = spec.topology()
    assert topology.inter.beta_s_per_byte == pytest.approx(1 / 12.5e9)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (("devices_per_node = 4", ""), "devices_per_node is missing"),
        (("devices_per_node = 4", "devices_per_node = -2"), "devices_per_node: must be a whole"),
        (("devices_per_node = 4", "devices_per_node = 0"), "devices_per_node: must be a whole"),
        (('bandwidth = "50 GB/s"', 'bandwidth = "50 GB"'), "intra_node.bandwidth: cannot read"),
        (
            ('bandwidth = "50 GB/s"', 'bandwidth = "-50 GB/s"'),
            "intra_node.bandwidth: a bandwidth must not",
        ),
        (('bandwidth = "50 GB/s"', "bandwidth = 50"), "intra_node.bandwidth: a bandwidth must"),
        (('alpha = "5 us"', 'alpha = "5 parsecs"'), "intra_node.alpha: cannot read"),
        (('bandwidth = "50 GB/s"\n', ""), "intra_node.bandwidth is missing"),
        (('kind = "cuda"', 'kind = "tpu"'), "device.kind: must be one of"),
        (("efficiency = 0.5", "efficiency = 1.5"), "device.efficiency: must be in"),
        (("efficiency = 0.5", "efficiency = -0.1"), "device.efficiency: must be in"),
        (('fp32 = "10 TFLOP/s"', 'fp32 = "10 TB/s"'), "device.peak_flops.fp32: cannot read"),
        (("overlap = 0.8", "overlap = -1"), "communication.overlap: must be in"),
        (('algorithm = "hierarchical"', 'algorithm = "gossip"'), "communication.algorithm"),
        (('name = "two-node"', 'name = "x"\nspeed = 3'), "speed: unknown key"),
        (("devices_per_node = 4", "devices_per_node = true"), "devices_per_node: must be a whole"),
        (("devices_per_node = 4", 'devices_per_node = "4"'), "devices_per_node: must be a whole"),
        (
            ('fp32 = "10 TFLOP/s"', 'fp64 = "10 TFLOP/s"'),
            "device.peak_flops.fp64: unknown key; use one of fp32, tf32, bf16, fp16",
        ),
        (('name = "Test GPU"', 'name = "Test GPU"\nmatch = [""]'), "device.match[0]: must be a"),
        (("efficiency = 0.5", "efficiency = nan"), "device.efficiency: must be in (0, 1], got nan"),
        (("efficiency = 0.5", "speed = 0.5"), "device.speed: unknown key; allowed: cores,"),
        (("[device]", "[devices]"), "devices: unknown key; did you mean device? allowed:"),
        (("overlap = 0.8", "servers = 0"), "communication.servers: must be a whole number >= 1"),
        (
            ("efficiency = 0.5", "efficiency = 0.5\nstraggler_sigma = 50"),
            "device.straggler_sigma: must be a number in [0, 5), got 50",
        ),
    ],
)
def test_bad_files_fail_in_one_line_naming_the_key(tmp_path, change, message):
    old, new = change
    assert old in GOOD
    path = write(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(ClusterError) as error:
        load_cluster_file(path)
    text = str(error.value)
    assert message in text and text.startswith(f"cluster file {path}: ")
    assert "\n" not in text


def test_a_missing_section_is_named(tmp_path):
    path = write(
        tmp_path, GOOD.split("[device]")[0] + "[intra_node]" + GOOD.split("[intra_node]")[1]
    )
    with pytest.raises(ClusterError, match=r"^cluster file .*: \[device\] section is missing$"):
        load_cluster_file(path)


def test_one_peak_for_every_precision_and_one_match_name(tmp_path):
    text = GOOD.replace('{ fp32 = "10 TFLOP/s", bf16 = "100 TFLOP/s" }', '"10 TFLOP/s"')
    text = text.replace('name = "Test GPU"', 'name = "Test GPU"\nmatch = "TG-1"')
    spec = load_cluster_file(write(tmp_path, text))
    assert spec.device.peak_for("fp16") == 10e12 and spec.device.match == ("TG-1",)


def test_a_multi_node_cluster_needs_a_network(tmp_path):
    text = GOOD.split("[inter_node]")[0] + "[communication]\noverlap = 1.0\n"
    with pytest.raises(ClusterError, match=r"\[inter_node\] section is missing"):
        load_cluster_file(write(tmp_path, text))
    one_node = parse_cluster(
        {
            "devices_per_node": 2,
            "nodes": 1,
            "device": {"kind": "cpu"},
            "intra_node": {"alpha": "1 us", "bandwidth": "1 GB/s"},
        },
        "inline",
    )
    assert one_node.inter_node is None and one_node.max_devices == 2


def test_not_toml_and_missing_files(tmp_path):
    with pytest.raises(ClusterError, match="not valid TOML"):
        load_cluster_file(write(tmp_path, "devices_per_node = = 3"))
    with pytest.raises(ClusterError, match="no cluster file"):
        resolve_cluster_argument(str(tmp_path / "missing.toml"))
    with pytest.raises(ClusterError, match="unknown cluster preset 'nope'"):
        resolve_cluster_argument("nope")
    assert resolve_cluster_argument("local") is None


@pytest.mark.parametrize("name", [n for n in preset_names() if n != "local"])
def test_every_preset_loads_and_cites_its_figures(name):
    spec = load_preset(name)
    assert spec.source and spec.description
    assert spec.device.source and spec.intra_node.source
    assert spec.inter_node is not None and spec.inter_node.source
    assert spec.device.peak_for("fp32") and spec.device.efficiency
    assert spec.origin == f"preset:{name}"


def test_the_presets_asked_for_exist():
    names = preset_names()
    for name in ("v100-nvlink-ib", "k80-pcie-ib", "cpu-25gbe", "local"):
        assert name in names
    v100 = load_preset("v100-nvlink-ib")
    assert v100.device.peak_for("fp32") == pytest.approx(15.7e12)
    assert v100.inter_node.bandwidth_bytes_per_s == pytest.approx(12.5e9)
    assert load_preset("cpu-25gbe").inter_node.bandwidth_bytes_per_s == pytest.approx(3.125e9)


def test_the_machine_at_hand():
    env = {"hostname": "box", "cpu_model": "Test CPU", "usable_cores": [0, 1, 2, 3], "gpus": []}
    spec = local_cluster(StoredMachine.of(env), cores_per_worker=2)
    assert spec.devices_per_node == 2 and spec.nodes == 1 and spec.overlap == 0.0
    assert spec.device.matches(StoredMachine(hostname="box", cpu_model="other"))
    assert not spec.device.matches(StoredMachine(hostname="elsewhere", cpu_model="Test CPU"))
    assert "default" in spec.intra_node.source
    with pytest.raises(ClusterError, match="do not fit") as too_many:
        spec.check_workers(3)
    # Workers of 2 cores each: the error says how this machine holds more of them.
    assert str(too_many.value).endswith(
        "3 workers do not fit; a device here is a worker on 2 cores: --threads-per-worker 1 "
        "makes 4 of them (calibrated from serial runs on 1 core)"
    )
    gpus = {"hostname": "g", "gpus": [{"name": "NVIDIA H100 80GB HBM3"}] * 8}
    gpu = local_cluster(StoredMachine.of(gpus), device_kind="cuda")
    assert gpu.devices_per_node == 8 and gpu.overlap == 1.0
    with pytest.raises(ClusterError) as too_many_gpus:
        gpu.check_workers(9)
    assert str(too_many_gpus.value).endswith("9 workers do not fit")  # a GPU is a GPU
