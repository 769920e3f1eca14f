"""`trainscale probe` and `trainscale.probe()`: measure what this machine achieves (matmul
FLOP/s, the per-operator cost of a training step, host-device bandwidth, all-reduce bandwidth
and latency) and store it.

One module per measurement (`matmul`, `dispatch`, `transfer`, `allreduce`) and `run`, which
plans, checks the options, measures and stores. The stored all-reduce fit (alpha, beta) is
what a communication model of this machine starts from.
"""
