"""Run options and resolved run configs (options.py), their command line (cli.py), the TOML
files users give (files.py) and the caps on counts (limits.py). Imports nothing above
trainscale.errors, so every layer may use it."""

from trainscale.config.options import RunConfig, RunOptions

__all__ = ["RunConfig", "RunOptions"]
