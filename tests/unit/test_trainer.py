"""The trainer's measurement rules, on a tiny net in one process."""

from __future__ import annotations

import statistics
import time

import pytest
import torch

from trainscale.errors import ConfigError
from trainscale.parallel.distenv import DistEnv
from trainscale.parallel.strategy import make_strategy
from trainscale.train.flops import count_flops_per_sample
from trainscale.train.step import TrainStep
from trainscale.train.trainer import train
from trainscale.workloads.base import PYTORCH

from tests.helpers.tiny import NormDropNet, tiny_config, tiny_data, tiny_workload


def _train(**changes):
    config = tiny_config(**changes)
    data = changes.pop("data_override", None) or tiny_data()
    return config, train(config, tiny_workload(), data, make_strategy(config, DistEnv()))


def test_warmup_steps_are_left_out_of_statistics_but_on_the_clock():
    config, outcome = _train(steps=8, warmup_steps_untimed=3)
    s = outcome.summary
    assert len(outcome.step_times_s) == 8
    assert s["num_timed_steps"] == 5 and s["warmup_steps_excluded"] == 3
    timed = outcome.step_times_s[3:]
    # Throughput is the batch over the median timed step; the mean-based figure is kept.
    assert s["samples_per_s"] == pytest.approx(16 / statistics.median(timed))
    assert s["samples_per_s_mean"] == pytest.approx(16 * len(timed) / sum(timed))
    assert s["step_time_s_mean"] == pytest.approx(sum(timed) / len(timed))
    assert s["train_time_s"] == pytest.approx(sum(outcome.step_times_s), rel=0.05, abs=0.01)


def test_eval_is_off_the_training_clock_and_curve_is_monotonic_in_time():
    config, outcome = _train(epochs=2, eval_every=2)
    s = outcome.summary
    assert s["eval_time_s"] > 0
    times = [t for t, _ in s["accuracy_curve"]]
    assert times == sorted(times)
    assert times[-1] == pytest.approx(s["train_time_s"])
    assert [e["epoch"] for e in outcome.epochs] == [1, 2]
    assert all(e["full"] for e in outcome.epochs)
    assert outcome.epochs[-1]["test_accuracy"] == s["test_accuracy"]


def test_time_to_target_is_first_eval_reaching_it():
    config, outcome = _train(epochs=2, eval_every=1, target_accuracy=0.01)
    curve = outcome.summary["accuracy_curve"]
    assert outcome.summary["time_to_target_s"] == curve[0][0]
    config, outcome = _train(epochs=1, target_accuracy=1.0)
    assert outcome.summary["time_to_target_s"] is None or outcome.summary["test_accuracy"] == 1.0


def test_synthetic_data_never_claims_accuracy():
    data = tiny_data()
    synthetic = type(data)(
        data.train_x, data.train_y, data.test_x, data.test_y, kind="synthetic", source="test"
    )
    config = tiny_config(steps=4)
    outcome = train(config, tiny_workload(), synthetic, make_strategy(config, DistEnv()))
    assert outcome.summary["test_accuracy"] is None
    assert outcome.summary["time_to_target_s"] is None
    assert outcome.summary["accuracy_curve"] == []


def test_batch_larger_than_shard_is_a_config_error():
    with pytest.raises(ConfigError, match="batch size"):
        _train(global_batch_size=128)


def test_fractional_epochs_end_with_a_partial_epoch():
    config, outcome = _train(epochs=1.5)
    assert [e["full"] for e in outcome.epochs] == [True, False]
    assert outcome.summary["num_steps"] == 9  # 6 steps an epoch x 1.5


def test_flops_per_sample_is_counted_and_macro_f1_reported():
    config, outcome = _train(steps=3)
    s = outcome.summary
    # TinyNet: conv 1->4 3x3 on 8x8 (36 outputs) + fc 144->3; forward x3 for fwd+bwd roughly.
    forward = 2 * (36 * 4 * 9) + 2 * (144 * 3)
    assert forward <= s["flops_per_sample"] <= 3 * forward
    assert 0.0 <= s["test_macro_f1"] <= 1.0


def test_macro_f1_by_hand():
    import torch

    from trainscale.train.evaluate import macro_f1

    # class 0: tp 2, fp 1, fn 0 -> f1 0.8; class 1: tp 1, fp 0, fn 1 -> f1 2/3
    confusion = torch.tensor([[2, 0], [1, 1]])
    assert macro_f1(confusion) == pytest.approx((0.8 + 2 / 3) / 2)


def test_augment_and_pretrain_hooks_run_on_the_clock():
    import dataclasses
    import time

    import torch

    calls = {"augment": 0}

    def augment(x, generator):
        calls["augment"] += 1
        return x + 0.0 * torch.rand(x.shape, generator=generator)

    def pretrain(model, data, strategy, config, progress):
        time.sleep(0.2)
        return {"layers": 1}

    workload = dataclasses.replace(tiny_workload(), augment=augment, pretrain=pretrain)
    config = tiny_config(steps=4)
    outcome = train(config, workload, tiny_data(), make_strategy(config, DistEnv()))
    s = outcome.summary
    assert calls["augment"] == 4
    assert s["pretrain"] == {"layers": 1}
    assert s["pretrain_time_s"] >= 0.2
    assert s["train_time_s"] == pytest.approx(s["pretrain_time_s"] + s["supervised_time_s"])
    assert s["accuracy_curve"][0][0] >= 0.2  # the curve's clock includes pre-training


def test_breakdown_is_sampled_after_warmup_and_adds_up():
    config, outcome = _train(steps=12, warmup_steps_untimed=2, breakdown_every=5)
    breakdown = outcome.summary["breakdown_s"]
    assert outcome.summary["breakdown_sampled_steps"] == 2  # steps 2 and 7 (0-based)
    phases = ("data", "forward", "backward", "optimizer")
    # Seconds only: the count has its own key, so no reader can draw it as a phase.
    assert set(breakdown) == {*phases, "exposed_comm"}
    assert all(breakdown[p] >= 0 for p in phases)
    # One process: no communication to expose, so it is absent, not zero.
    assert breakdown["exposed_comm"] is None
    # The phases tile the step: their sum is a step time (same clock, same boundaries).
    total = sum(breakdown[p] for p in phases)
    assert min(outcome.step_times_s) * 0.5 <= total <= max(outcome.step_times_s) * 1.5


def test_breakdown_off_records_nothing():
    _, outcome = _train(steps=6, breakdown_every=0)
    assert outcome.summary["breakdown_s"] is None
    assert outcome.summary["breakdown_sampled_steps"] == 0


def test_grad_accumulation_equals_one_big_batch():
    import torch

    _, whole = _train(steps=6, global_batch_size=16)
    _, split = _train(steps=6, global_batch_size=16, grad_accum=4)
    for name, value in whole.model.state_dict().items():
        torch.testing.assert_close(split.model.state_dict()[name], value, rtol=1e-4, atol=1e-5)


def test_train_loss_with_grad_accumulation_is_the_mean_over_every_micro_batch():
    # The same updates either way (test above), so the same losses: a step's loss is the
    # mean over its 16 samples, not the last micro-batch's.
    _, whole = _train(steps=6, global_batch_size=16)
    _, split = _train(steps=6, global_batch_size=16, grad_accum=4)
    assert split.epochs[0]["train_loss"] == pytest.approx(whole.epochs[0]["train_loss"], rel=1e-5)


def test_flop_count_leaves_buffers_gradients_and_random_state_as_they_were():
    torch.manual_seed(0)
    model = NormDropNet().train()
    before = {name: value.clone() for name, value in model.state_dict().items()}
    rng = torch.get_rng_state()
    data = tiny_data()
    flops = count_flops_per_sample(model, data.train_x[:2], data.train_y[:2], tiny_workload())
    assert flops is not None and flops > 0
    assert torch.equal(torch.get_rng_state(), rng)
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name
    assert all(p.grad is None for p in model.parameters())


def _random_flip(x: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    flip = torch.rand(len(x), 1, 1, 1, generator=generator, device=x.device) < 0.5
    return torch.where(flip, x.flip(3), x)


def _train_norm_drop(augment=None, label_smoothing=0.0, **changes):
    """Steps of NormDropNet (batch norm and dropout; two unless `changes` say): the outcome
    and the final weights and statistics, for comparing training with and without a pass
    before the first step."""
    import dataclasses

    workload = dataclasses.replace(
        tiny_workload(), models={PYTORCH: lambda meta: NormDropNet()}, augment=augment
    )
    config = tiny_config(**{"steps": 2, **changes}).with_(label_smoothing=label_smoothing)
    outcome = train(config, workload, tiny_data(), make_strategy(config, DistEnv()))
    return outcome, {k: v.clone() for k, v in outcome.model.state_dict().items()}


def test_training_starts_from_the_same_state_with_or_without_the_flop_count(monkeypatch):
    import trainscale.train.setup as setup

    counted, counted_state = _train_norm_drop()
    assert counted.summary["flops_per_sample"] > 0
    monkeypatch.setattr(setup, "count_flops", lambda *args: None)
    skipped, skipped_state = _train_norm_drop()
    assert skipped.summary["flops_per_sample"] is None
    # Same dropout draws and batch-norm statistics: the same first steps, bit for bit.
    assert counted.epochs[0]["train_loss"] == skipped.epochs[0]["train_loss"]
    for name, value in skipped_state.items():
        assert torch.equal(counted_state[name], value), name


@pytest.mark.parametrize(
    "recipe",
    [
        {},  # SGD, a constant lr
        # Adam's state, a one-cycle schedule's position, label smoothing, an augmentation's
        # generator: all moved by a training step, all to be put back.
        dict(optimizer="adam", schedule="onecycle", steps=4, label_smoothing=0.1),
    ],
)
def test_a_cpu_run_takes_no_device_warm_up_and_training_is_the_same_with_one(monkeypatch, recipe):
    # A CUDA run takes one step of its own training before its first, off the clock, and
    # puts everything back (train/warmup.py). Forced here on the CPU: it must not change
    # what training does.
    import trainscale.train.trainer as trainer

    augment = _random_flip if recipe else None
    plain, plain_state = _train_norm_drop(augment, **recipe)
    assert plain.summary["device_warmup_s"] is None
    monkeypatch.setattr(trainer, "warms_up", lambda device: True)
    warm_up = TrainStep.warm_up

    def slow_warm_up(self, batches):  # 0.25 s, so being on the clock could not hide
        time.sleep(0.25)
        return warm_up(self, batches) + 0.25

    monkeypatch.setattr(TrainStep, "warm_up", slow_warm_up)
    warmed, warmed_state = _train_norm_drop(augment, **recipe)
    assert warmed.summary["device_warmup_s"] > 0.25
    # The clock is the steps (and each epoch's shuffle, a millisecond here): not the warm-up.
    steps_s = sum(warmed.step_times_s)
    assert warmed.summary["train_time_s"] == pytest.approx(steps_s, rel=0.05, abs=0.01)
    # Same dropout draws, augmentation, statistics, optimizer state and lr: the same steps,
    # bit for bit.
    assert warmed.epochs[0]["train_loss"] == plain.epochs[0]["train_loss"]
    for name, value in plain_state.items():
        assert torch.equal(warmed_state[name], value), name


def test_the_loop_is_freed_when_training_returns_not_left_to_the_collector():
    # A loop kept alive by a reference cycle holds the (DDP-wrapped) model past the
    # strategy's teardown, until a collection at exit, where gloo's threads then abort a
    # worker now and then ("terminate called without an active exception").
    import gc

    from trainscale.train import loop

    gc.collect()
    gc.disable()
    try:
        _train()
        alive = [o for o in gc.get_objects() if isinstance(o, loop._Loop)]
    finally:
        gc.enable()
    assert alive == []
