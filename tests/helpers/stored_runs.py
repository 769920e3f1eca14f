"""A run row for tests that need a store with runs in it: one fp32 synthetic mnist-cnn run
of one worker and thread, global batch 64, unless told otherwise."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainscale.results.store import RunStore


def add_run(
    store: RunStore,
    run_id: str,
    *,
    config: Mapping[str, Any] | None = None,
    env: Mapping[str, Any] | None = None,
    **columns: Any,
) -> None:
    """Create the row of a running run; `columns` override `create_run`'s keywords."""
    keywords: dict[str, Any] = {
        "data_kind": "synthetic",
        "world_size": 1,
        "threads_per_worker": 1,
        "affinity": "compact",
        "precision": "fp32",
        "global_batch_size": 64,
    }
    keywords.update(columns)
    workload = keywords.pop("workload", "mnist-cnn")
    store.create_run(
        run_id,
        workload,
        {"workload": workload} if config is None else dict(config),
        {} if env is None else dict(env),
        **keywords,
    )
