"""Resource limits checked in the parent: worker processes, memory, dataset sizes, caps."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trainscale.config.limits import MAX_RESAMPLES, check_count
from trainscale.config.options import RunOptions
from trainscale.data.tensors import DataRequest, DataSize
from trainscale.data.text import encode_ids
from trainscale.emulation.spec import EmulationSpec, check_emulation_memory
from trainscale.errors import ConfigError
from trainscale.hardware.resources import (
    FDS_PER_WORKER,
    FDS_RESERVED,
    GIB,
    MAX_WORKERS_PER_CORE,
    MIB,
    WORKER_PROCESS_BYTES,
    check_memory,
    check_worker_count,
    format_bytes,
)
from trainscale.metrics.compare import compare_step_times
from trainscale.probing.options import ProbeOptions
from trainscale.probing.run import plan_probe
from trainscale.results.outputs import check_out_dir, check_out_file
from trainscale.runner.footprint import DATA_COPIES, Footprint, check_run_memory, estimate_footprint
from trainscale.runner.resolve import locate_data, prepare, resolve
from trainscale.sweeps.spec import MAX_RUNS, parse_spec
from trainscale.train.plan import check_batch_fits
from trainscale.workloads import get_workload, workload_names
from trainscale.workloads.mnist_dbn import MAX_PARAMETERS, num_parameters, parse_options
from trainscale.workloads.text_common import MAX_LEN
from trainscale.workloads.tweets_text import tweets_options

from tests.helpers.mnist_files import write_random_mnist

# --- worker processes ---------------------------------------------------------------------


def test_worker_count_is_capped_per_core_even_when_oversubscription_is_allowed() -> None:
    check_worker_count(MAX_WORKERS_PER_CORE * 2, num_cores=2, fd_limit=None)
    with pytest.raises(ConfigError, match=r"at most 16 on 2 usable cores \(8 per core"):
        check_worker_count(MAX_WORKERS_PER_CORE * 2 + 1, num_cores=2, fd_limit=None)


def test_worker_count_is_bounded_by_the_open_file_limit() -> None:
    limit = FDS_RESERVED + 10 * FDS_PER_WORKER
    check_worker_count(10, num_cores=64, fd_limit=limit)
    with pytest.raises(ConfigError, match=r"--workers 11 needs about .* open files.*ulimit -n"):
        check_worker_count(11, num_cores=64, fd_limit=limit)


def test_run_with_too_many_workers_is_refused_when_resolved(monkeypatch) -> None:
    monkeypatch.setattr("trainscale.hardware.resources.open_file_limit", lambda: None)
    opts = RunOptions.of(
        workload="mnist-cnn",
        data="synthetic",
        workers=10_000,
        threads_per_worker=1,
        affinity="none",
        allow_oversubscribe=True,
    )
    with pytest.raises(ConfigError, match="more worker processes than this machine can run"):
        resolve(opts, available_cores=[0, 1])


# --- memory -------------------------------------------------------------------------------


def test_format_bytes() -> None:
    assert format_bytes(150 * MIB) == "150 MiB"
    assert format_bytes(1.5 * GIB) == "1.5 GiB"
    assert format_bytes(512) == "512 B"


def test_check_memory_names_what_needs_it_and_what_is_there() -> None:
    check_memory(GIB, "a thing", "do less", available=2 * GIB)
    with pytest.raises(
        ConfigError, match="a thing needs about 3.0 GiB .* 2.0 GiB available.*do less"
    ):
        check_memory(3 * GIB, "a thing", "do less", available=2 * GIB)


def test_footprint_of_mnist_cnn_counts_data_parameters_and_process() -> None:
    size = DataSize(num_train=60_000, num_test=10_000)
    footprint = estimate_footprint(get_workload("mnist-cnn"), {}, size)
    # Normalised float32 images (1x28x28) and int64 labels, train and test.
    assert footprint.data_bytes == 70_000 * (28 * 28 * 4 + 8)
    assert footprint.num_parameters == 1_199_882  # conv32-conv64-fc128-fc10
    expected = DATA_COPIES * footprint.data_bytes + 16 * 1_199_882 + WORKER_PROCESS_BYTES
    assert footprint.worker_bytes == expected


def test_footprint_counts_a_model_too_large_to_build() -> None:
    # The meta device allocates nothing: a billion-word embedding is counted, not built.
    workload = get_workload("tweets-text")
    size = DataSize(100, 10)
    footprint = estimate_footprint(workload, {"vocab_size": "1000000000"}, size)
    assert footprint.num_parameters > 1_000_000_000 * 128


def test_run_memory_is_workers_times_one_workers_share() -> None:
    footprint = Footprint(data_bytes=100 * MIB, num_parameters=1_000_000)
    one = footprint.worker_bytes
    config = resolve(
        RunOptions.of(workload="mnist-cnn", workers=2, threads_per_worker=1, affinity="none"),
        available_cores=[0, 1],
    )
    check_run_memory(config, footprint, available=2 * one)
    with pytest.raises(ConfigError, match=r"^2 workers x \(data 2 x 100 MiB .*fewer --workers"):
        check_run_memory(config, footprint, available=2 * one - 1)


def test_prepare_refuses_a_run_that_cannot_fit_in_memory(monkeypatch) -> None:
    monkeypatch.setattr("trainscale.hardware.resources.available_memory_bytes", lambda: 300 * MIB)
    with pytest.raises(ConfigError, match="one worker .* more than the 300 MiB available"):
        prepare(RunOptions.of(workload="mnist-cnn", data="synthetic", threads_per_worker=1))


@pytest.mark.parametrize(
    ("mode", "each"),
    [("sync", 0), ("async", 4 * 10**6), ("local-sgd", 16 * 10**6)],
)
def test_emulation_memory_grows_with_n_for_async_and_local_sgd(mode, each) -> None:
    footprint = Footprint(data_bytes=MIB, num_parameters=10**6)
    base = footprint.worker_bytes
    spec = EmulationSpec(mode=mode, workers=100)
    check_emulation_memory(spec, footprint, available=base + 100 * each)
    if each:
        with pytest.raises(ConfigError, match="emulate at most 99 workers here"):
            check_emulation_memory(spec, footprint, available=base + 100 * each - 1)


# --- dataset sizes and batches ------------------------------------------------------------


def test_batch_larger_than_a_workers_share_is_refused_with_the_sizes() -> None:
    check_batch_fits(30_000, 60_000, 2)
    with pytest.raises(ConfigError, match=r"30000 of 60000 samples over 2 workers.*--batch-size"):
        check_batch_fits(30_001, 60_000, 2)


@pytest.mark.parametrize("name", workload_names())
def test_every_workload_declares_its_synthetic_size(name) -> None:
    workload = get_workload(name)
    assert workload.synthetic_size is not None
    data = workload.make_synthetic(DataRequest())
    assert (data.num_train, data.num_test) == (
        workload.synthetic_size.num_train,
        workload.synthetic_size.num_test,
    )


def test_locating_real_files_reports_their_size(tmp_path: Path) -> None:
    folder = write_random_mnist(tmp_path / "mnist", 96, 20)
    config = resolve(RunOptions.of(workload="mnist-cnn", data_dir=str(folder), download=False))
    located, size = locate_data(config)
    assert size == DataSize(96, 20)
    assert Path(located.data.data_dir) == folder


def test_prepare_refuses_a_batch_larger_than_the_real_training_set(tmp_path: Path) -> None:
    folder = write_random_mnist(tmp_path / "mnist", 96, 20)
    opts = RunOptions.of(workload="mnist-cnn", data_dir=str(folder), download=False, batch_size=97)
    with pytest.raises(ConfigError, match="96 of 96 samples"):
        prepare(opts)


# --- workload options ---------------------------------------------------------------------


def test_dbn_parameters_are_counted_and_capped() -> None:
    workload = get_workload("mnist-dbn")
    for layers in ("500,500,2000", "7", "30,20"):
        footprint = estimate_footprint(workload, {"layers": layers}, DataSize(10, 10))
        sizes = parse_options({"layers": layers}).layers
        assert num_parameters(sizes) == footprint.num_parameters
    with pytest.raises(ConfigError, match=f"more than the limit of {MAX_PARAMETERS:,}"):
        parse_options({"layers": "100000,100000"})


def test_text_max_len_is_capped_and_says_the_memory_of_a_text() -> None:
    assert tweets_options({"max_len": str(MAX_LEN)}).max_len == MAX_LEN
    with pytest.raises(ConfigError, match=r"at most 10,000 tokens per text.*763 MiB a text"):
        tweets_options({"max_len": "100000000"})


def test_encoding_texts_that_cannot_fit_is_refused_before_allocating(monkeypatch) -> None:
    monkeypatch.setattr("trainscale.hardware.resources.available_memory_bytes", lambda: 1000)
    ids, _ = encode_ids([[5, 6]] * 10, 12)  # 960 bytes
    assert ids.shape == (10, 12) and ids.dtype == np.int64
    with pytest.raises(ConfigError, match="encoding 11 texts padded to -o max_len=12"):
        encode_ids([[5, 6]] * 11, 12)


# --- caps on counts -----------------------------------------------------------------------


def test_sweep_size_is_computed_from_the_axes_before_anything_is_built() -> None:
    grid = {key: list(range(10)) for key in ("seed", "eval_every", "steps", "breakdown_every")}
    grid.update({"lr": [0.1 * i for i in range(1, 11)], "epochs": [float(i) for i in range(1, 11)]})
    grid["warmup_fraction"] = [i / 100 for i in range(10)]
    grid["timeout"] = [float(i) for i in range(1, 11)]
    with pytest.raises(ConfigError, match=r"= 100,000,000 runs, more than the 10,000"):
        parse_spec({"base": {"workload": "mnist-cnn"}, "grid": grid}, default_name="big")
    at_cap = {"seed": list(range(MAX_RUNS // 2))}
    parse_spec({"base": {"workload": "mnist-cnn"}, "grid": at_cap, "repeats": 2}, "ok")


def test_resamples_and_samples_are_capped() -> None:
    check_count("--n", 5, 1, 5, "why")
    with pytest.raises(ConfigError, match=r"--n must be at most 5 \(why\), got 6"):
        check_count("--n", 6, 1, 5, "why")
    with pytest.raises(ConfigError, match="--n must be at least 1, got 0"):
        check_count("--n", 0, 1, 5, "why")
    with pytest.raises(ValueError, match="num_resamples"):
        compare_step_times([[1.0, 2.0]], [[1.0, 2.0]], num_resamples=MAX_RESAMPLES + 1)


# --- probe --------------------------------------------------------------------------------


def test_probe_applies_the_oversubscription_guard_of_run(monkeypatch) -> None:
    monkeypatch.setattr("trainscale.hardware.resources.open_file_limit", lambda: None)
    with pytest.raises(ConfigError, match="64 workers x 1 thread .* or pass --allow-oversubscribe"):
        plan_probe(ProbeOptions(device="cpu", workers=64), gpus=0, cores=2)
    allowed = ProbeOptions(device="cpu", workers=16, allow_oversubscribe=True, quick=True)
    assert plan_probe(allowed, gpus=0, cores=2).workers == 16
    with pytest.raises(ConfigError, match="more worker processes than this machine can run"):
        plan_probe(
            ProbeOptions(device="cpu", workers=17, allow_oversubscribe=True), gpus=0, cores=2
        )
    # The default two workers on one core: the all-reduce is left out, not the probe refused.
    one_core = plan_probe(ProbeOptions(device="cpu", quick=True), gpus=0, cores=1)
    assert "allreduce" in one_core.skipped and "matmul" in one_core.kinds


def test_probe_sizes_that_cannot_fit_in_memory_are_refused(monkeypatch) -> None:
    monkeypatch.setattr("trainscale.hardware.resources.available_memory_bytes", lambda: GIB)
    plan_probe(ProbeOptions(device="cpu", matmul_sizes=(8192,), only=("matmul",)), 0, 2)
    with pytest.raises(ConfigError, match="a matmul of size 16384"):
        plan_probe(ProbeOptions(device="cpu", matmul_sizes=(16384,), only=("matmul",)), 0, 2)
    with pytest.raises(ConfigError, match="an all-reduce of 512 MiB over 2 workers"):
        plan_probe(ProbeOptions(device="cpu", message_sizes=(4096, 512 * MIB)), 0, 2)
    with pytest.raises(ConfigError, match="--repeats must be at most 1000"):
        plan_probe(ProbeOptions(device="cpu", repeats=1001), 0, 2)


# --- output paths -------------------------------------------------------------------------


def test_output_directories_are_checked_without_being_created(tmp_path: Path) -> None:
    check_out_dir(tmp_path)
    check_out_dir(tmp_path / "new" / "deeper")
    assert not (tmp_path / "new").exists()
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="it is a file"):
        check_out_dir(afile)
    with pytest.raises(ConfigError, match="is a file"):
        check_out_dir(afile / "sub")


def test_output_files_need_an_existing_directory_and_a_file_name(tmp_path: Path) -> None:
    check_out_file(tmp_path / "t.md")
    with pytest.raises(ConfigError, match="is missing"):
        check_out_file(tmp_path / "missing" / "t.md")
    with pytest.raises(ConfigError, match="it is a directory"):
        check_out_file(tmp_path)
