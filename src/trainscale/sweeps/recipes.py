"""Built-in sweeps that reproduce the classic studies of parallel training on this machine.

Each recipe is a small function of the machine (usable cores) and `quick`, returning a sweep
spec as a dict, the same shape as a sweep file, so `trainscale sweep --recipe NAME
--dry-run` shows exactly what it will run. Worker counts never exceed the usable cores: a
recipe measures this machine, and predicting beyond it is `trainscale simulate`'s job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from trainscale.config.suggest import did_you_mean
from trainscale.errors import ConfigError
from trainscale.frameworks import FRAMEWORKS
from trainscale.hardware.facts import usable_cores


@dataclass(frozen=True)
class Recipe:
    name: str
    summary: str
    """One line for `trainscale recipes`."""
    study: str
    """Which classic study it follows, and what it shows."""
    build: Callable[[Sequence[int], bool], dict[str, Any]]
    """(usable core ids, quick) -> sweep spec dict."""


def _powers_of_two_up_to(limit: int) -> list[int]:
    values, n = [], 1
    while n <= limit:
        values.append(n)
        n *= 2
    return values


def cpu_parallel(core_ids: Sequence[int], quick: bool) -> dict[str, Any]:
    """MNIST CNN serial vs parallel on CPU (with the naive pitfall), and the tweet network
    over affinity sets of 1, 2, 4, 8 cores: the classic table of processing time and % gain."""
    cores = len(core_ids)
    n = str(cores)
    cnn: list[dict[str, Any]] = [
        {"label": "cnn serial 1 core", "workers": 1, "threads_per_worker": 1},
        {"label": f"cnn 1 process x {n} threads", "workers": 1, "threads_per_worker": cores},
    ]
    if cores > 1:
        cnn += [
            {
                "label": f"cnn {n} pinned workers x 1 thread",
                "workers": cores,
                "threads_per_worker": 1,
                "affinity": "compact",
            },
            {
                "label": f"cnn naive DDP: {n} unpinned workers, torch-default threads",
                "workers": cores,
                "threads_per_worker": "torch-default",
                "affinity": "none",
                "allow_oversubscribe": True,
            },
        ]
    text = [
        {
            "label": f"text affinity set {size} core(s)",
            "workload": "tweets-text",
            "workers": 1,
            "threads_per_worker": size,
            "affinity": ",".join(str(core) for core in core_ids[:size]),
        }
        for size in _powers_of_two_up_to(min(cores, 8))
    ]
    points = [{**point, "workload": "mnist-cnn"} for point in cnn] + text
    return {
        "name": "cpu-parallel",
        "repeats": 2 if quick else 3,
        # The text points need a tweet file (-o file or tweets.csv in the data directory);
        # without one they are skipped and listed, and the MNIST comparison still runs.
        "skip_invalid": True,
        # One global batch for every setting of a workload: only the parallelism changes.
        "base": {"steps": 20 if quick else 60, "evaluate": False, "global_batch_size": 64},
        "points": points,
    }


def scaling(core_ids: Sequence[int], quick: bool) -> dict[str, Any]:
    """ResNet-44 on CIFAR-10 over 1, 2, 4, ... workers: throughput speedup and efficiency
    under weak scaling (fixed per-worker batch), as the multi-GPU studies measure it."""
    cores = len(core_ids)
    return {
        "name": "scaling",
        "repeats": 2 if quick else 3,
        "base": {
            "workload": "cifar10-resnet44",
            "data": "synthetic",  # throughput only: CIFAR-10 is rarely at hand, its shape is
            "steps": 8 if quick else 30,
            "warmup_steps_untimed": 2 if quick else 5,
            "batch_size": 32 if quick else 64,
            "threads_per_worker": 1,
            "affinity": "compact",
        },
        "grid": {"workers": _powers_of_two_up_to(cores)},
    }


def distributed_accuracy(core_ids: Sequence[int], quick: bool) -> dict[str, Any]:
    """How more workers (a larger global batch at a fixed per-worker batch) and the lr
    scaling rule change final accuracy and time to accuracy (Goyal et al. 2017)."""
    cores = len(core_ids)
    points: list[dict[str, Any]] = [{"label": "1 worker", "workers": 1, "lr_scaling": "none"}]
    for workers in _powers_of_two_up_to(cores)[1:]:
        for rule in ("none", "linear", "sqrt"):
            points.append(
                {"label": f"{workers} workers, lr {rule}", "workers": workers, "lr_scaling": rule}
            )
    return {
        "name": "distributed-accuracy",
        "repeats": 1 if quick else 2,
        "base": {
            "workload": "mnist-cnn",
            "data": "real",
            "batch_size": 64,
            "threads_per_worker": 1,
            "epochs": 0.5 if quick else 2.0,
        },
        "points": points,
    }


PLATFORM_WORKLOADS = ("mnist-cnn", "mnist-dbn", "imdb-bilstm", "imdb-bigru")
"""The platform study's workloads: a CNN and a DBN on MNIST, a BiLSTM and a BiGRU on IMDB."""


def platform_settings(cores: int, gpus: int) -> list[dict[str, Any]]:
    """The platforms of the study on a machine with `cores` usable cores and `gpus` GPUs:
    CPU serial (one core, the baseline), the CPU's two parallel settings (one process with a
    thread per core; one pinned worker per core), and one GPU when there is one."""
    settings: list[dict[str, Any]] = [
        {"label": "cpu serial, 1 core", "device": "cpu", "workers": 1, "threads_per_worker": 1}
    ]
    if cores > 1:
        settings += [
            {
                "label": f"cpu 1 process x {cores} threads",
                "device": "cpu",
                "workers": 1,
                "threads_per_worker": cores,
            },
            {
                "label": f"cpu {cores} pinned workers x 1 thread",
                "device": "cpu",
                "workers": cores,
                "threads_per_worker": 1,
                "affinity": "compact",
            },
        ]
    if gpus > 0:
        settings.append({"label": "1 gpu", "device": "cuda", "workers": 1})
    return settings


def _gpu_count() -> int:
    """GPUs torch sees here (0 without a CUDA build); imported late, as torch is heavy."""
    import torch  # noqa: PLC0415

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def platforms(core_ids: Sequence[int], quick: bool) -> dict[str, Any]:
    """The platform study: CNN and DBN on MNIST, BiLSTM and BiGRU on IMDB, each trained to
    its target accuracy (its default recipe at its default global batch, stopped at the
    first evaluation that reaches the target, as the study trained "to each workload's
    target"), on CPU serial, the CPU's parallel settings (the faster is the best CPU
    setting) and one GPU when there is one. Workloads whose data is missing here are
    skipped and listed."""
    from trainscale.workloads import get_workload  # noqa: PLC0415  (torch, late)

    points = []
    for name in PLATFORM_WORKLOADS:
        # The same global batch on every platform: only the hardware changes.
        batch = get_workload(name).recipe.batch_size
        for setting in platform_settings(len(core_ids), _gpu_count()):
            label = f"{name} {setting['label']}"
            points.append({**setting, "label": label, "workload": name, "global_batch_size": batch})
    # Training past the target would only lengthen the study (the IMDB recipes train 4
    # epochs and reach 86% after one); a run that never reaches it trains its whole recipe.
    base: dict[str, Any] = {"data": "real", "stop_at_target": True}
    if quick:  # a short look, far from the targets
        base["epochs"] = 0.25
    return {
        "name": "platforms",
        # Two rounds give each speedup over CPU serial its interval.
        "repeats": 1 if quick else 2,
        "skip_invalid": True,
        "base": base,
        "points": points,
    }


def frameworks(core_ids: Sequence[int], quick: bool) -> dict[str, Any]:
    """The framework study's shape on this machine: ResNet-44 on CIFAR-10 in each framework,
    1 worker and N pinned workers at the same global batch (throughput, speedup, efficiency
    per framework), and the MNIST CNN's time to accuracy per framework where MNIST is at hand.
    A framework that is not installed is skipped and listed, like missing data."""
    cores = len(core_ids)
    # One core is one "device": 1 worker on 1 core against N pinned 1-core workers is the
    # study's 1 GPU against N GPUs.
    settings: list[dict[str, Any]] = [{"workers": 1, "threads_per_worker": 1}]
    if cores > 1:
        settings.append({"workers": cores, "threads_per_worker": 1, "affinity": "compact"})
    points: list[dict[str, Any]] = []
    for framework in FRAMEWORKS:  # each one trainscale has, in its order
        for setting in settings:
            how = f"{setting['workers']} worker(s) x {setting['threads_per_worker']} thread(s)"
            points.append(
                {
                    "label": f"resnet44 {framework} {how}",
                    "framework": framework,
                    "workload": "cifar10-resnet44",
                    # CIFAR-10 is rarely at hand; its shape is all throughput needs.
                    "data": "synthetic",
                    "steps": 8 if quick else 30,
                    "warmup_steps_untimed": 2 if quick else 5,
                    "evaluate": False,
                    **setting,
                }
            )
        points.append(
            {
                "label": f"cnn {framework} to accuracy, {settings[-1]['workers']} worker(s)",
                "framework": framework,
                "workload": "mnist-cnn",
                "data": "real",
                "epochs": 0.5 if quick else 2.0,
                **settings[-1],
            }
        )
    return {
        "name": "frameworks",
        "repeats": 1 if quick else 3,
        "skip_invalid": True,
        # One global batch and precision for every framework and setting: only the
        # framework and the parallelism change (`--precision auto` would be bf16 for PyTorch
        # and TensorFlow on a bf16 CPU, fp32 for JAX: docs/frameworks.md).
        "base": {"global_batch_size": 64, "precision": "fp32"},
        "points": points,
    }


RECIPES = {
    recipe.name: recipe
    for recipe in (
        Recipe(
            "platforms",
            "CNN, DBN, BiLSTM, BiGRU to their targets: CPU serial, CPU parallel, 1 GPU",
            "Time per epoch, time to target, accuracy and speedup of each platform.",
            platforms,
        ),
        Recipe(
            "scaling",
            "ResNet-44 on CIFAR-10 over 1, 2, 4, ... workers: speedup and efficiency",
            "Weak-scaling throughput of data parallelism, with an Amdahl fit in the report.",
            scaling,
        ),
        Recipe(
            "distributed-accuracy",
            "workers (global batch) x lr scaling rule: final accuracy and time to accuracy",
            "What distribution costs in accuracy, and what the lr rule wins back.",
            distributed_accuracy,
        ),
        Recipe(
            "cpu-parallel",
            "MNIST CNN serial vs parallel on CPU; the text network over CPU-affinity sets",
            "Oversubscription against pinned workers; the affinity-set table with % gain.",
            cpu_parallel,
        ),
        Recipe(
            "frameworks",
            "PyTorch vs TensorFlow vs JAX: ResNet-44 on 1 and N workers; MNIST time to accuracy",
            "Which framework trains faster, and which scales better, on this machine.",
            frameworks,
        ),
    )
}


def recipe_spec(name: str, quick: bool, core_ids: Sequence[int] | None = None) -> dict[str, Any]:
    """The sweep spec of recipe `name` for this machine (or for the cores `core_ids`)."""
    if name not in RECIPES:
        raise ConfigError(
            f"unknown recipe {name!r}{did_you_mean(name, RECIPES)}; "
            f"valid recipes: {', '.join(RECIPES)}"
        )
    if core_ids is None:
        core_ids = usable_cores()
    return RECIPES[name].build(list(core_ids), quick)
