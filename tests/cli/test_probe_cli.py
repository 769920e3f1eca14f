"""`trainscale probe` on the CPU with tiny sizes, its one-line errors, and the probes table."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import torch

from trainscale.cli import main
from trainscale.errors import ConfigError
from trainscale.hardware.facts import usable_cores
from trainscale.probing.options import ProbeOptions, parse_bytes
from trainscale.probing.run import plan_probe
from trainscale.results.schema import SCHEMA_VERSION
from trainscale.results.store import RunStore


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    try:
        status = main(argv)
    except SystemExit as exit_:  # argparse's own errors (a malformed value)
        status = exit_.code
    assert status == 2
    err = capsys.readouterr().err.strip()
    assert err and "\n" not in err and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--workers", "0"], "--workers must be at least 1"),
        (["--device", "cpu", "--threads", "0"], "--threads must be at least 1"),
        (["--device", "cpu", "--threads", "100000"], "exceeds the"),
        (["--device", "cpu", "--only", "transfer"], "needs --device cuda"),
        (["--device", "cpu", "--only", "warp"], "unknown measurement"),
        (["--device", "cpu", "--precisions", "fp16"], "cannot be probed on cpu"),
        (["--device", "cpu", "--only", "allreduce", "--workers", "1"], "at least 2 workers"),
        (["--device", "cpu", "--message-sizes", "4Q"], "invalid size"),
        (
            ["--device", "cpu", "--message-sizes", "4K"],
            "at least two sizes for the alpha-beta fit; got 4096 bytes",
        ),
        # 1 and 3 bytes are both one float32 element: one message, not two.
        (["--device", "cpu", "--message-sizes", "1,3"], "one size once rounded down"),
        (["--device", "cpu", "--timeout", "1e300"], "up to 86400 (a day), got 1e+300"),
        (["--device", "cpu", "--repeats", "0"], "--repeats must be at least 1"),
        (["--device", "cpu", "--repeats", "100000"], "--repeats must be at most 1000"),
        (["--device", "cpu", "--matmul-sizes", str(10**7)], "a matmul of size 10000000"),
        (
            ["--device", "cpu", "--workers", str(len(usable_cores()) + 1)],
            "oversubscribes this machine",
        ),
        (
            ["--device", "cpu", "--workers", "100000", "--allow-oversubscribe"],
            "more worker processes than this machine can run",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, tmp_path: Path, argv, says) -> None:
    err = one_line_error(capsys, ["probe", *argv, "--store", str(tmp_path / "s.db")])
    assert says in err
    assert not (tmp_path / "s.db").exists()  # nothing measured, nothing stored


def test_an_unusable_store_fails_before_anything_is_measured(capsys, tmp_path, monkeypatch):
    measured = []
    monkeypatch.setattr(
        "trainscale.probing.matmul.measure_matmul", lambda *a, **k: measured.append(a)
    )
    argv = ["probe", "--device", "cpu", "--only", "matmul", "--matmul-sizes", "32", "--quick"]
    store = tmp_path / "no" / "such" / "s.db"
    err = one_line_error(capsys, [*argv, "--store", str(store)])
    assert "s.db" in err
    assert not measured


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_cuda_without_a_gpu_is_one_line(capsys, tmp_path: Path) -> None:
    err = one_line_error(capsys, ["probe", "--device", "cuda", "--store", str(tmp_path / "s")])
    assert "no CUDA GPU" in err


def test_more_gpu_workers_than_gpus_is_refused() -> None:
    with pytest.raises(ConfigError, match="only 2 GPU"):
        plan_probe(ProbeOptions(device="cuda", workers=3), gpus=2, cores=4)
    plan = plan_probe(ProbeOptions(device="cuda"), gpus=2, cores=4)
    assert plan.workers == 2 and plan.kinds == ("matmul", "dispatch", "transfer", "allreduce")
    one = plan_probe(ProbeOptions(device="cuda"), gpus=1, cores=4)
    assert "allreduce" in one.skipped and "allreduce" not in one.kinds


def test_an_allreduce_on_one_core_is_refused_with_advice_that_works() -> None:
    only = ("allreduce",)
    with pytest.raises(ConfigError, match="pass --workers 2 --allow-oversubscribe") as refused:
        plan_probe(ProbeOptions(device="cpu", only=only), gpus=0, cores=1)
    assert "--workers 1" not in str(refused.value)  # too few for an all-reduce
    advised = ProbeOptions(device="cpu", only=only, workers=2, allow_oversubscribe=True)
    assert plan_probe(advised, gpus=0, cores=1).workers == 2


def test_cpu_plan_defaults() -> None:
    plan = plan_probe(ProbeOptions(device="auto", quick=True), gpus=0, cores=2)
    assert plan.device_type == "cpu" and plan.threads == 2 and plan.workers == 2
    assert plan.precisions == ("fp32", "bf16")
    assert plan.kinds == ("matmul", "dispatch", "allreduce") and "transfer" in plan.skipped
    assert plan.message_sizes[0] == 4096 and plan.message_sizes[-1] == 4 * 1024 * 1024
    full = plan_probe(ProbeOptions(device="cpu"), gpus=0, cores=2)
    assert full.message_sizes[-1] == 64 * 1024 * 1024  # 4 KiB .. 64 MiB


def test_parse_bytes() -> None:
    assert parse_bytes("4K") == 4096 and parse_bytes("4KiB") == 4096
    assert parse_bytes("64M") == 64 * 2**20 and parse_bytes("512") == 512
    with pytest.raises(ConfigError):
        parse_bytes("four")


def test_cpu_matmul_probe_is_stored(capsys, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    argv = ["probe", "--device", "cpu", "--only", "matmul", "--threads", "1"]
    argv += ["--matmul-sizes", "32,64", "--precisions", "fp32", "--repeats", "2", "--quick"]
    assert main([*argv, "--json", "--store", str(store)]) == 0
    result = json.loads(capsys.readouterr().out)
    figures = result["matmul"]["precisions"]["fp32"]
    assert figures["best_flops_per_s"] > 0 and figures["best_size"] in (32, 64)
    assert [row["n"] for row in figures["by_size"]] == [32, 64]
    assert result["matmul"]["threads"] == 1
    with RunStore(store) as opened:
        probe = opened.latest_probe("matmul", host=result["host"], device=result["device"])
        assert probe is not None and probe.probe_id == result["probe_ids"]["matmul"]
        assert probe.result["precisions"]["fp32"]["best_flops_per_s"] == pytest.approx(
            figures["best_flops_per_s"]
        )
        assert probe.result["quick"] is True and probe.env["hostname"] == result["host"]
        assert probe.device_type == "cpu" and probe.workers is None


def test_two_process_gloo_allreduce_fit_is_stored(capsys, tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    argv = ["probe", "--device", "cpu", "--only", "allreduce", "--workers", "2", "--quick"]
    argv += ["--message-sizes", "4K,1M,4M", "--repeats", "2", "--timeout", "60"]
    assert main([*argv, "--store", str(store)]) == 0
    out = capsys.readouterr().out
    assert "alpha-beta fit" in out and "stored in" in out and "`trainscale runs probes`" in out
    with RunStore(store) as opened:
        probe = opened.latest_probe("allreduce")
        assert probe is not None and probe.workers == 2
        result = probe.result
    assert result["backend"] == "gloo"
    assert [p["size_bytes"] for p in result["points"]] == [4096, 2**20, 4 * 2**20]
    for point in result["points"]:
        assert point["time_s"] > 0
        # Two ranks: bus bandwidth = algorithm bandwidth x 2 (n - 1) / n = algbw.
        assert point["busbw_bytes_per_s"] == pytest.approx(point["algbw_bytes_per_s"])
    assert result["alpha_s"] >= 0 and result["beta_s_per_byte"] > 0
    assert result["fit"]["num_points"] == 3


def test_schema_2_store_migrates_to_3_keeping_its_runs(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with RunStore(path) as store:
        store.create_run(
            "run-a",
            "mnist-cnn",
            {"workload": "mnist-cnn"},
            {"hostname": "h"},
            data_kind="synthetic",
            world_size=1,
            threads_per_worker=1,
            affinity="none",
            precision="fp32",
            global_batch_size=8,
        )
        store.complete_run("run-a", {"samples_per_s": 12.5}, [{"train_loss": 1.0}], [0.1, 0.2])
    # Make it a version-2 file: what v2 wrote is v3 without the probes table, and v3 is the
    # v4 without the run owners (v5 changed no table, only stored summaries).
    conn = sqlite3.connect(path)
    conn.execute("DROP TABLE probes")
    conn.execute("DROP INDEX runs_running")
    for column in ("owner_host", "owner_pid", "owner_started"):
        conn.execute(f"ALTER TABLE runs DROP COLUMN {column}")
    conn.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    conn.commit()
    conn.close()

    with RunStore(path) as store:
        run = store.get_run("run-a")
        assert run.status == "completed" and run.summary == {"samples_per_s": 12.5}
        assert store.step_times("run-a") == [0.1, 0.2]
        assert store.list_probes() == []
        store.add_probe("matmul", {"x": 1}, {}, host="h", device_type="cpu", device="c")
        assert store.latest_probe("matmul", host="h").result == {"x": 1}
    conn = sqlite3.connect(path)
    version = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    conn.close()
    assert int(version) == SCHEMA_VERSION == 7


def test_a_size_too_slow_for_the_budget_is_skipped_and_says_so() -> None:
    from trainscale.probing.matmul import measure_matmul

    result = measure_matmul(torch.device("cpu"), ["fp32"], [512, 32], 1, 0.001, budget_s=0.01)
    rows = result["precisions"]["fp32"]["by_size"]
    assert [row["n"] for row in rows] == [32, 512]  # small to large
    assert "flops_per_s" in rows[0] and "would take" in rows[1]["skipped"]
    assert result["precisions"]["fp32"]["best_size"] == 32


class FakeSampler:
    """Stands in for the contention sampler: the verdict it was given, without sampling."""

    verdict = "busy"

    def __init__(self, *args, **kwargs) -> None:
        self.started = self.stopped = False

    def start(self):
        self.started = True
        return self

    def stop(self):
        from trainscale.hardware.contention import Contention

        reason = f"other processes used {0.9 if self.verdict == 'busy' else 0.0:.2f} cores"
        return Contention(verdict=self.verdict, reason=reason, other_cores_busy_run_cores=0.9)


@pytest.mark.parametrize("verdict", ["busy", "quiet"])
def test_a_probe_measures_contention_stores_it_and_warns_when_busy(
    capsys, tmp_path: Path, monkeypatch, verdict
) -> None:
    from trainscale.hardware.contention import OtherProcess

    monkeypatch.setattr(FakeSampler, "verdict", verdict)
    monkeypatch.setattr("trainscale.probing.run.ContentionSampler", FakeSampler)
    neighbour = [OtherProcess(pid=4242, name="stress", cpu_percent=97.0)]
    monkeypatch.setattr("trainscale.probing.run.busiest_processes", lambda: neighbour)
    store = tmp_path / "s.db"
    argv = ["probe", "--device", "cpu", "--only", "matmul", "--threads", "1", "--store", str(store)]
    argv += ["--matmul-sizes", "32", "--precisions", "fp32", "--repeats", "2", "--quick"]
    assert main(argv) == 0  # the figures are measured and stored either way
    out = " ".join(capsys.readouterr().out.split())
    with RunStore(store) as opened:
        probe = opened.latest_probe("matmul")
        assert probe is not None and probe.result["contention"]["verdict"] == verdict
    if verdict == "busy":
        assert "not trusted: busy machine: other processes used 0.90 cores" in out
        assert "stress (pid 4242) 97% CPU: stop that work, or probe again" in out
    else:
        assert "busy" not in out


def test_a_matmul_above_the_theoretical_peak_says_the_clock_it_assumes_was_beaten():
    from trainscale.probing.summary import summary_lines

    def result(best_flops_per_s: float) -> dict:
        figures = {"best_flops_per_s": best_flops_per_s, "best_size": 512, "by_size": []}
        figures["fraction_of_theoretical_peak"] = best_flops_per_s / 1e11
        peak = {"tflops": 0.1, "source": "theoretical: 1 core(s) x 2.60 GHz (cpuinfo MHz)"}
        matmul = {"repeats": 5, "precisions": {"fp32": figures}}
        matmul["theoretical_peak"] = {"fp32": peak}
        return {"host": "h", "device_type": "cpu", "device": "X", "matmul": matmul} | {
            "probe_ids": {},
            "store": "s.db",
        }

    (above,) = [line for line in summary_lines(result(1.2e11)) if "fp32" in line]
    assert above.endswith(
        "= 120.0% of the theoretical 100.0 GFLOP/s: the cores ran faster "
        "than the clock it assumes (trainscale env)"
    )
    (below,) = [line for line in summary_lines(result(0.8e11)) if "fp32" in line]
    assert below.endswith("= 80.0% of the theoretical 100.0 GFLOP/s")


def test_a_gpu_probe_larger_than_the_gpus_free_memory_is_refused_before_measuring() -> None:
    from trainscale.probing.run import check_gpu_probe_memory

    gib = 1024**3
    plan = plan_probe(ProbeOptions(device="cuda", matmul_sizes=(300_000,)), gpus=2, cores=4)
    with pytest.raises(ConfigError, match=r"a matmul of size 300000 .* available on GPU 0; give"):
        check_gpu_probe_memory(plan, 80 * gib)
    sized = ProbeOptions(device="cuda", only=("allreduce",), message_sizes=(4096, 64 * gib))
    with pytest.raises(ConfigError, match="an all-reduce message of 64 GiB on each GPU"):
        check_gpu_probe_memory(plan_probe(sized, gpus=2, cores=4), 80 * gib)
    check_gpu_probe_memory(plan_probe(ProbeOptions(device="cuda"), gpus=2, cores=4), 80 * gib)
