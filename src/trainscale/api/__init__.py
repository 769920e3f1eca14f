"""trainscale from Python: the CLI's commands as functions returning typed results.

    import trainscale
    result = trainscale.run("mnist-cnn", workers=2, data="synthetic", steps=20)
    result.samples_per_s, result.to_dataframe()

See docs/python-api.md. Importing this module imports what the commands need, torch
included (seconds); `import trainscale` alone stays cheap and loads this on first use.
"""

from trainscale.api.calls import bench, compare, report, run, runs, sweep
from trainscale.api.machine import env, probe, probes
from trainscale.api.machine_results import MachineFacts, MachineProbe, StoredProbe, StoredProbes
from trainscale.api.questions import emulate, predict_time_to_accuracy, recommend, simulate
from trainscale.api.results import (
    BenchResults,
    Comparison,
    Emulation,
    Recommendation,
    ReportFiles,
    ScalingPrediction,
    StoredRun,
    StoredRuns,
    SweepResults,
    TimeToAccuracy,
)
from trainscale.api.store_calls import delete_runs, import_runs
from trainscale.probing.run import ProbeFailed
from trainscale.results.store_import import ImportedRows
from trainscale.runner.launch import RunFailed

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
    "bench",
    "compare",
    "delete_runs",
    "emulate",
    "env",
    "import_runs",
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
