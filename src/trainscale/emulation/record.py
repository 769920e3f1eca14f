"""Storing an emulation as a run: created 'running', completed in one transaction.

Like `runner.create_run_row`, except for what makes it an emulation: the stored config
carries the emulation settings (so the config hash differs per N and mode), the world size
is 1 (it ran in one process), the global batch is B, the tag is `emulate:<id>`, and no step
times are stored (the emulating process's step times say nothing about N workers).
"""

from __future__ import annotations

from trainscale.config.options import RunConfig, settings_hash
from trainscale.emulation.engine import EmulationOutcome
from trainscale.emulation.spec import EmulationSpec, stored_config
from trainscale.hardware import facts
from trainscale.results.store import RunStore

TAG_PREFIX = "emulate:"


def emulation_tag(emulation_id: str) -> str:
    """The tag shared by every run of one `trainscale emulate` invocation."""
    return f"{TAG_PREFIX}{emulation_id}"


def create_emulation_row(
    store: RunStore, run_id: str, config: RunConfig, spec: EmulationSpec
) -> None:
    """Insert the emulation as a 'running' run with its config and this machine's facts."""
    env = facts.collect_environment()
    stored = stored_config(config, spec)
    threads = config.parallel.threads_per_worker
    if threads is None:
        threads = env["torch_num_threads_default"]
    store.create_run(
        run_id,
        config.workload,
        stored,
        env,
        data_kind=config.data.kind,
        world_size=1,
        threads_per_worker=threads,
        affinity=config.parallel.affinity,
        precision=config.optimisation.precision,
        global_batch_size=spec.samples_per_step,
        tag=config.tag,
        config_hash=settings_hash(stored),
    )


def complete_emulation(store: RunStore, run_id: str, outcome: EmulationOutcome) -> None:
    """Store the emulation's summary and per-epoch rows; the run becomes 'completed'."""
    store.complete_run(run_id, outcome.summary, outcome.epochs, [])
