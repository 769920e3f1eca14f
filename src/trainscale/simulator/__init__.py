"""The performance simulator: predict how a workload scales on hardware you do not have.

One concern per module:

- `units`: quantities with units in cluster files ("100 Gb/s", "5 us", "15.7 TFLOP/s").
- `collectives`: alpha-beta costs of ring, tree, halving-doubling, hierarchical and
  parameter-server gradient exchanges. Pure.
- `cluster`: cluster specs (TOML), their validation, the shipped presets and the
  machine at hand.
- `buckets`: DDP's gradient buckets and the share of backward compute behind each.
- `stragglers`: the per-worker compute-time distribution (lognormal) and its Monte Carlo.
- `model`: one data-parallel step as DDP runs it (bucketed, overlapped, reverse order).
- `run_facts`: what a stored run tells the simulator (its device, one worker's cores and
  batch, its step's breakdown and spread).
- `calibrate`: compute, optimizer and data time, and the network, from stored runs.
- `script_calibration`: a user's script as the workload: its stored runs, and the buckets
  from the parameter sizes its meter recorded.
- `predict`: calibration + cluster + worker counts -> predictions.
- `validate`: predict stored runs that calibration did not use, and the errors.
- `time_to_accuracy`: steps to target from emulation x predicted step time.
- `plots`, `tables`: the output.

Like the reports, the simulator reads only stored results (and the model's parameter
shapes), so every figure it prints is a pure function of the store and the cluster file.
"""
