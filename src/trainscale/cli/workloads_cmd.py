"""`trainscale workloads`: the registered workloads and their default recipes."""

from __future__ import annotations

import argparse
from typing import Any

from trainscale.cli.architectures_table import (
    architecture_row,
    is_architecture,
    print_architectures,
)
from trainscale.cli.common import add_json_argument
from trainscale.cli.lines import print_json
from trainscale.errors import ConfigError


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "workloads",
        help="list the registered workloads, or describe custom ones",
        description="List the reference workloads (and those installed packages register), "
        "their targets and default recipes; or describe the workloads given, which may be "
        "your own (FILE.py:ATTR or MODULE:ATTR, see docs/custom-workloads.md): loading one "
        "here checks it as a run would.",
        epilog="examples:\n  trainscale workloads\n"
        "  trainscale workloads examples/custom_workload/my_workload.py:make_workload",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "workloads",
        nargs="*",
        metavar="WORKLOAD",
        help="workloads to describe (default: every registered one)",
    )
    add_json_argument(parser, help="print as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from trainscale.runner.script_launch import is_script
    from trainscale.workloads import (
        architecture_names,
        get_workload,
        workload_names,
        workload_source,
    )

    for name in args.workloads or ():
        if is_script(name):  # loading it as a workload file would run its training
            raise ConfigError(
                f"{name} is a training script (it calls trainscale.meter()), not a workload "
                f"file: run it with `trainscale run {name} [options] -- [its arguments]`"
            )
    names = args.workloads or workload_names() + architecture_names()
    specs = [get_workload(name) for name in names]
    architectures = [w for w in specs if is_architecture(w.name)]
    specs = [w for w in specs if not is_architecture(w.name)]
    if args.json:
        rows = [
            {
                "name": w.name,
                "kind": "workload",
                "description": w.description,
                "target_accuracy": w.target_accuracy,
                "recipe": asdict(w.recipe),
                "options": dict(w.options),
                "source": workload_source(w.name),
                "frameworks": w.frameworks,
            }
            for w in specs
        ]
        rows += [architecture_row(w) for w in architectures]
        print_json(rows, indent=2)
        return 0
    from trainscale.cli.console import table_console

    console = table_console()
    if specs:
        _print_workloads(console, specs)
    if architectures:
        print_architectures(console, architectures)
    return 0


def _print_workloads(console: Any, specs: list[Any]) -> None:
    """The reference (or custom) workloads' table, options and frameworks."""
    from rich.table import Table

    from trainscale.cli.console import uncut
    from trainscale.workloads import is_builtin, workload_source

    table = Table(title="trainscale workloads")
    for column in ("name", "description", "target", "default recipe"):
        table.add_column(column)
    for w in specs:
        r = w.recipe
        recipe = (
            f"{r.optimizer} lr {r.lr:g} ({r.schedule}), batch {r.batch_size}, {r.epochs:g} epoch(s)"
        )
        table.add_row(w.name, w.description, f"{w.target_accuracy:.1%} test acc", recipe)
    console.print(uncut(table))
    for w in specs:
        for key, text in w.options.items():
            console.print(f"  {w.name}  -o {key}=...  {text}")
    for w in specs:
        if not is_builtin(w.name):
            source = workload_source(w.name) or "an installed package"
            frameworks = ", ".join(w.frameworks)
            console.print(f"  {w.name}: from {source}; trains in {frameworks}", markup=False)
    console.print(
        f"The built-in workloads train in each framework (--framework): {_frameworks_text()}",
        markup=False,  # the extras are in brackets, which rich would read as styles
    )


def _frameworks_text() -> str:
    """'pytorch, tensorflow (installed), jax (not installed: pip install 'trainscale[jax]')'."""
    from trainscale.frameworks import FRAMEWORKS, missing_modules

    parts = []
    for name, framework in FRAMEWORKS.items():
        if framework.extra is None:
            parts.append(name)
        elif missing_modules(name):
            parts.append(f"{name} (not installed: pip install 'trainscale[{framework.extra}]')")
        else:
            parts.append(f"{name} (installed)")
    return ", ".join(parts)
