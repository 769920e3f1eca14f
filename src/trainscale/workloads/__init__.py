"""Reference workloads: `get_workload(name)` and `workload_names()`."""

from trainscale.workloads.registry import get_workload, register, workload_names

__all__ = ["get_workload", "register", "workload_names"]
