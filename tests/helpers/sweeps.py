"""A stand-in for the sweep's run function, for the sweep tests."""

from __future__ import annotations

from trainscale.results.store import RunStore
from trainscale.runner.launch import RunFailed
from trainscale.runner.record import create_run_row


class FakeRunner:
    """Stands in for execute_run: records the run in the store like the real one does."""

    def __init__(self, fail_items=(), stop_after=None):
        self.fail_items = set(fail_items)
        self.stop_after = stop_after
        self.calls: list[int] = []

    def __call__(self, options, store_path, quiet, slot, config):
        if self.stop_after is not None and len(self.calls) == self.stop_after:
            # The process dies mid-run: the row was created, never finished.
            with RunStore(store_path) as store:
                create_run_row(store, f"killed-{slot.item}", config, slot)
            raise KeyboardInterrupt
        self.calls.append(slot.item)
        run_id = f"run-{slot.sweep_id[:6]}-{slot.item}-{len(self.calls)}"
        with RunStore(store_path) as store:
            create_run_row(store, run_id, config, slot)
            if slot.item in self.fail_items:
                store.fail_run(run_id, "worker rank 1 failed: injected")
                raise RunFailed(run_id, "worker rank 1 failed: injected")
            store.complete_run(run_id, {"samples_per_s": 100.0 + slot.item}, [], [0.1, 0.1])
        return {"run_id": run_id, "samples_per_s": 100.0 + slot.item}
