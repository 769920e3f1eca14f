"""The TOML files the documentation shows load as they are written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from trainscale.config.files import parse_toml
from trainscale.hardware.price_file import parse_price_table
from trainscale.simulator import cluster_file
from trainscale.simulator.cluster import parse_cluster
from trainscale.sweeps.spec import parse_spec

DOCS = Path(__file__).resolve().parents[2] / "docs"
PARSERS = {
    "sweeps.md": lambda raw: parse_spec(raw, default_name="example").configurations(),
    "simulator.md": lambda raw: parse_cluster(raw, "example"),
    "hardware.md": lambda raw: parse_price_table(raw, "example"),
}


def _blocks(text: str) -> list[str]:
    return re.findall(r"```toml\n(.*?)```", text, re.S)


@pytest.mark.parametrize("page", sorted(PARSERS))
def test_every_toml_example_of_the_docs_loads(page: str) -> None:
    blocks = _blocks((DOCS / page).read_text(encoding="utf-8"))
    assert blocks, page
    for block in blocks:
        assert PARSERS[page](parse_toml(block, page))


def test_the_cluster_format_in_the_code_loads() -> None:
    (block,) = _blocks(cluster_file.__doc__ or "")
    assert parse_cluster(parse_toml(block, "cluster_file.py"), "example").devices_per_node == 4
