"""Published scaling tables: every shipped table loads and follows the fit rule; every
malformed file is one line naming the file, the key and the reason."""

from __future__ import annotations

import pytest

from trainscale.simulator.cluster import load_preset, preset_names
from trainscale.simulator.published import (
    MODELS,
    PublishedTableError,
    load_all,
    load_table,
    published_table_names,
)

GOOD = """
name = "t"
system = "dgx1-p100"
model = "resnet50"
precision = "fp32"
framework = "a framework"
data = "synthetic"
source = "a source"
fit = [1]

[[points]]
devices = 1
nodes = 1
batch_per_device = 64
images_per_s = 219.0

[[points]]
devices = 16
nodes = 2
batch_per_device = 64
efficiency = 0.9
note = "a note"
"""


def write(tmp_path, text, name="t.toml"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_good_file_loads(tmp_path):
    table = load_table(write(tmp_path, GOOD))
    assert table.name == "t" and table.system == "dgx1-p100" and table.model == "resnet50"
    assert table.fit == (1,)
    assert [p.devices for p in table.points] == [1, 16]
    assert table.point(1).images_per_s == 219.0 and table.point(1).efficiency is None
    assert table.point(16).efficiency == 0.9 and table.point(16).note == "a note"
    assert [p.devices for p in table.predicted] == [16]
    assert table.path == str(tmp_path / "t.toml")


def test_every_shipped_table_loads_with_a_source():
    names = published_table_names()
    assert len(names) >= 20
    tables = load_all()
    assert [t.name for t in tables] == names
    for table in tables:
        assert table.path == f"published:{table.name}"
        assert table.model in MODELS
        assert table.system in preset_names()
        assert len(table.source) > 40 and table.framework
        assert all(p.batch_per_device >= 1 for p in table.points)


@pytest.mark.parametrize("name", published_table_names())
def test_every_shipped_table_follows_the_fit_rule(name):
    """fit = the 1-device point, plus one full node when the table goes beyond one node;
    efficiency-only tables calibrate nothing themselves: the source's throughput table does."""
    table = load_table(name)
    per_node = load_preset(table.system).devices_per_node
    counts = {p.devices for p in table.points if p.images_per_s is not None}
    expected = set()
    if 1 in counts:
        expected.add(1)
        if max(p.nodes for p in table.points) > 1 and per_node in counts:
            expected.add(per_node)
    assert set(table.fit) == expected
    assert table.predicted, "a table must leave something to predict"
    if not table.fit:
        source = load_table(table.fit_from)
        assert source.fit and source.system == table.system and source.model == table.model


def test_the_tables_asked_for_exist():
    names = set(published_table_names())
    for model in ("resnet50", "inception-v3", "resnet152"):
        assert f"tf-benchmarks-k80-p2-8xlarge-distributed-{model}" in names
        assert f"tf-benchmarks-dgx1-p100-{model}" in names
    dist = load_table("tf-benchmarks-k80-p2-8xlarge-distributed-resnet50")
    layout = [(p.devices, p.nodes) for p in dist.points]
    assert layout == [(1, 1), (8, 1), (16, 2), (32, 4), (64, 8)]
    assert dist.point(64).images_per_s == 2744.0
    amp = load_table("dle-pytorch-dgx-a100-80gb-resnet50-amp")
    assert amp.precision == "fp16" and amp.point(8).images_per_s == 16621.0
    assert amp.data == "real"


def test_an_unknown_shipped_name_lists_the_tables():
    with pytest.raises(PublishedTableError, match="unknown published table 'nope'; tables: "):
        load_table("nope")


def _replace(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


MALFORMED = [
    (
        "unknown key",
        _replace('data = "synthetic"', 'data = "synthetic"\ncolour = "red"'),
        r"t\.toml: colour: unknown key; allowed: ",
    ),
    ("missing key", _replace('source = "a source"\n', ""), r"t\.toml: source is missing"),
    (
        "wrong type",
        _replace("batch_per_device = 64\nimages", 'batch_per_device = "64"\nimages'),
        r"t\.toml: points\[0\]\.batch_per_device: must be a whole number >= 1, got '64'",
    ),
    (
        "devices < 1",
        _replace("devices = 1\n", "devices = 0\n"),
        r"t\.toml: points\[0\]\.devices: must be a whole number >= 1, got 0",
    ),
    (
        "nodes not dividing",
        _replace("nodes = 2", "nodes = 3"),
        r"t\.toml: points\[1\]: nodes \(3\) must divide devices \(16\)",
    ),
    (
        "duplicate devices",
        _replace("devices = 16\nnodes = 2", "devices = 1\nnodes = 1"),
        r"t\.toml: points: devices = 1 appears twice",
    ),
    (
        "fit with no point",
        _replace("fit = [1]", "fit = [1, 8]"),
        r"t\.toml: fit: no point has devices = 8",
    ),
    (
        "both measures",
        _replace("efficiency = 0.9", "efficiency = 0.9\nimages_per_s = 3000.0"),
        r"t\.toml: points\[1\]: give exactly one of images_per_s and efficiency .*both",
    ),
    (
        "neither measure",
        _replace("images_per_s = 219.0\n", ""),
        r"t\.toml: points\[0\]: give exactly one of images_per_s and efficiency .*neither",
    ),
    (
        "system not a preset",
        _replace('system = "dgx1-p100"', 'system = "dgx-9"'),
        r"t\.toml: system: unknown cluster preset 'dgx-9'; presets: ",
    ),
    (
        "model not one of the five",
        _replace('model = "resnet50"', 'model = "alexnet"'),
        r"t\.toml: model: must be one of resnet50, resnet101, resnet152, inception-v3, vgg16, "
        r"got 'alexnet'",
    ),
    (
        "precision",
        _replace('precision = "fp32"', 'precision = "bf16"'),
        r"t\.toml: precision: must be one of fp32, tf32, fp16, got 'bf16'",
    ),
    (
        "efficiency above 1",
        _replace("efficiency = 0.9", "efficiency = 1.5"),
        r"t\.toml: points\[1\]\.efficiency: must be in \(0, 1\], got 1\.5",
    ),
    (
        "too many devices per node",
        _replace("nodes = 2", "nodes = 1"),
        r"t\.toml: points\[1\]: 16 devices on 1 node\(s\) do not fit preset 'dgx1-p100' "
        r"\(8 devices per node\)",
    ),
    (
        "name not the stem",
        _replace('name = "t"', 'name = "other"'),
        r"t\.toml: name: must be the file's stem 't', got 'other'",
    ),
    ("no points", GOOD.split("[[points]]")[0], r"t\.toml: points is missing"),
    (
        "fit_from with fit points",
        _replace("fit = [1]", 'fit = [1]\nfit_from = "tf-benchmarks-dgx1-p100-resnet50"'),
        r"t\.toml: fit: must be \[\] when fit_from names the table that calibrates",
    ),
    (
        "fit_from of another model",
        _replace("fit = [1]", 'fit = []\nfit_from = "tf-benchmarks-dgx1-p100-vgg16"'),
        r"t\.toml: fit_from: table tf-benchmarks-dgx1-p100-vgg16 has model 'vgg16', not "
        r"'resnet50'",
    ),
    (
        "fit_from of a table without fit points",
        _replace('system = "dgx1-p100"', 'system = "pascal-x4-25gbe-roce"')
        .replace('model = "resnet50"', 'model = "vgg16"')
        .replace("fit = [1]", 'fit = []\nfit_from = "horovod-readme-pascal-25gbe-vgg16-efficiency"')
        .replace("nodes = 2", "nodes = 4"),
        r"t\.toml: fit_from: table horovod-readme-pascal-25gbe-vgg16-efficiency has no fit points",
    ),
    ("not TOML", "name = ", r"t\.toml is not valid TOML"),
]


@pytest.mark.parametrize(("case", "text", "message"), MALFORMED, ids=[m[0] for m in MALFORMED])
def test_a_malformed_table_is_one_line_naming_the_key(tmp_path, case, text, message):
    with pytest.raises(PublishedTableError, match=r"^published table .*" + message) as caught:
        load_table(write(tmp_path, text))
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(PublishedTableError, match=r"published table .*t\.toml does not exist"):
        load_table(tmp_path / "t.toml")


def test_a_table_whose_fit_from_names_itself_is_one_line(tmp_path):
    path = tmp_path / "t.toml"
    write(tmp_path, GOOD.replace("fit = [1]", f'fit = []\nfit_from = "{path}"'))

    with pytest.raises(PublishedTableError, match=r"t\.toml: fit_from: names this table itself"):
        load_table(path)


def test_tables_whose_fit_from_name_each_other_are_one_line(tmp_path):
    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    write(
        tmp_path,
        GOOD.replace('"t"', '"a"').replace("fit = [1]", f'fit = []\nfit_from = "{b}"'),
        "a.toml",
    )
    write(
        tmp_path,
        GOOD.replace('"t"', '"b"').replace("fit = [1]", f'fit = []\nfit_from = "{a}"'),
        "b.toml",
    )

    with pytest.raises(PublishedTableError, match=r"name each other: a -> b -> a$") as caught:
        load_table(a)
    assert "\n" not in str(caught.value)
