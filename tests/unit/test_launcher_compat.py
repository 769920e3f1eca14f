"""The launcher's config is built from what the installed torch's LaunchConfig accepts."""

from __future__ import annotations

from dataclasses import dataclass

from torch.distributed.launcher.api import LaunchConfig

from trainscale.parallel.launcher import shutdown_settings


@dataclass
class OlderLaunchConfig:
    """A LaunchConfig from before the shutdown grace period was configurable."""

    nproc_per_node: int = 1


def test_the_grace_period_is_passed_where_the_field_exists():
    @dataclass
    class NewerLaunchConfig(OlderLaunchConfig):
        shutdown_timeout: int | None = None

    assert shutdown_settings(NewerLaunchConfig, 5) == {"shutdown_timeout": 5}


def test_an_older_torch_gets_no_unknown_keyword():
    settings = shutdown_settings(OlderLaunchConfig, 5)
    assert settings == {}
    OlderLaunchConfig(nproc_per_node=2, **settings)  # would raise TypeError otherwise


def test_the_installed_torch_accepts_what_is_passed():
    LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=1, **shutdown_settings(LaunchConfig, 5))
