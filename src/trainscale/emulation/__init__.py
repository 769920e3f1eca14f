"""Accuracy emulation: the optimisation of N data-parallel workers, trained in one process.

Three ways N workers can train (docs/emulation.md):

- `sync`: synchronous data parallelism (DDP): one update per global batch of N per-worker
  batches, lr scaled to the global batch, the data order of N ranks;
- `async`: a parameter server applying each worker's gradient when it arrives, computed on
  the parameters the worker last read (stale by the updates applied since);
- `local-sgd`: N replicas taking H local steps each, then averaging their parameters.

Only the optimisation is reproduced: no communication and no timing of N workers (the
simulator predicts time; an emulation says how many steps and samples reach the target).

Each mode is a step function of the trainer's loop (`train/loop.py`): epochs, evaluation,
the accuracy curve and the per-epoch rows are the trainer's, and what differs is declared by
the mode's `StepRules`.

Modules: `spec` (what to emulate, resolved to a RunConfig), `streams` (each worker's
batches, from the trainer's `WorkerBatches`), `gradient` (the modes' loop rules, one
worker's forward/backward, parameter averaging), `sync`, `async_ps`, `local_sgd` (one
module per mode), `engine` (the global-step plan, the mode, the loop run), `summary` (the
stored summary) and `record` (storing an emulation as a run).
"""
