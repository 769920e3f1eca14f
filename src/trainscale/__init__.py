"""trainscale: how much faster training gets with parallel hardware, and at what accuracy cost.

The Python API (docs/python-api.md) is loaded on first use, so `import trainscale` and
`trainscale --help` stay cheap (PEP 562):

    import trainscale
    result = trainscale.run("mnist-cnn", workers=2, data="synthetic", steps=20)

A user's own training script takes `meter = trainscale.meter()` and wraps each step in
`with meter.step(samples=len(x)):` (docs/own-scripts.md).
"""

import importlib
from typing import Any

# First, before any library is imported: the cores this process may use, which torch's
# OpenMP runtime narrows on import where a binding variable is set (hardware/start_affinity.py).
from trainscale.hardware import start_affinity as _start_affinity  # noqa: F401

__version__ = "0.1.0"

__all__ = [
    "BenchResults",
    "Comparison",
    "Emulation",
    "ImportedRows",
    "MachineFacts",
    "MachineProbe",
    "ProbeFailed",
    "Recommendation",
    "ReportFiles",
    "RunFailed",
    "ScalingPrediction",
    "StoredProbe",
    "StoredProbes",
    "StoredRun",
    "StoredRuns",
    "SweepResults",
    "TimeToAccuracy",
    "__version__",
    "bench",
    "compare",
    "delete_runs",
    "emulate",
    "env",
    "import_runs",
    "meter",
    "predict_time_to_accuracy",
    "probe",
    "probes",
    "recommend",
    "report",
    "run",
    "runs",
    "simulate",
    "sweep",
]


def __getattr__(name: str) -> Any:
    if name == "meter":  # what a user's script imports: the meter alone, not the API
        value = importlib.import_module(f"{__name__}.train.meter").meter
        globals()[name] = value
        return value
    if name in __all__:
        # By name, not `from trainscale.api import`: the API sits above every layer, and
        # modules of low layers import this package (for __version__).
        value = getattr(importlib.import_module(f"{__name__}.api"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
