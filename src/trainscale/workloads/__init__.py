"""trainscale.workloads."""
