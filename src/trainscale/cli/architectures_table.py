"""How `trainscale workloads` shows the architecture-only workloads (the ImageNet models of
published scaling studies: synthetic data only, for the simulator)."""

from __future__ import annotations

from typing import Any


def is_architecture(name: str) -> bool:
    """Whether `name` answers with an architecture-only workload (a registered workload of
    the same name would answer first)."""
    from trainscale.workloads import architecture_names, workload_names

    return name in architecture_names() and name not in workload_names()


def architecture_row(workload: Any) -> dict[str, Any]:
    from dataclasses import asdict

    from trainscale.workloads.architectures import describe_architecture

    facts = describe_architecture(workload)
    return {
        "name": workload.name,
        "kind": "architecture",
        "description": workload.description,
        "num_parameters": facts.num_parameters,
        "input_shape": list(facts.input_shape),
        "target_accuracy": workload.target_accuracy,
        "recipe": asdict(workload.recipe),
        "frameworks": workload.frameworks,
    }


def print_architectures(console: Any, specs: list[Any]) -> None:
    """The architecture-only workloads: synthetic data only, for the simulator."""
    from rich.table import Table

    from trainscale.cli.console import uncut

    table = Table(title="architectures for the simulator and synthetic runs")
    for column in ("name", "description", "parameters", "input", "default recipe"):
        table.add_column(column)
    for w in specs:
        row = architecture_row(w)
        r = w.recipe
        recipe = f"{r.optimizer} lr {r.lr:g} ({r.schedule}), batch {r.batch_size}"
        shape = "x".join(str(n) for n in row["input_shape"])
        table.add_row(w.name, w.description, f"{row['num_parameters']:,}", shape, recipe)
    console.print(uncut(table))
    console.print(
        "  These have no dataset: run them with --data synthetic, or predict them with "
        "`trainscale simulate` (docs/architectures.md). PyTorch only.",
        markup=False,
    )
