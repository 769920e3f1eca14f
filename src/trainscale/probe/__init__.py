"""`trainscale probe`: measure this machine's achievable matmul FLOP/s, host-device bandwidth
and all-reduce bandwidth and latency, and store them.

One module per measurement (`matmul`, `transfer`, `allreduce`) and `run`, which plans,
checks the options, measures and stores. The stored all-reduce fit (alpha, beta) is what a
communication model of this machine starts from.
"""
