from __future__ import annotations

import pytest

from trainscale.metrics import stats
from trainscale.train.lr import lr_factor


def test_warmup_then_onecycle_decay():
    factors = [lr_factor(s, 10, "onecycle", 0.2) for s in range(10)]
    assert factors[:2] == [0.5, 1.0]  # 2 warm-up steps
    assert factors[2] == 1.0 and factors[-1] == pytest.approx(1 / 8)
    assert all(a >= b for a, b in zip(factors[1:], factors[2:], strict=False))


def test_constant_and_cosine():
    assert lr_factor(7, 10, "constant", 0.0) == 1.0
    assert lr_factor(0, 10, "cosine", 0.0) == 1.0
    assert lr_factor(5, 10, "cosine", 0.0) == pytest.approx(0.5)


def test_percentile_matches_numpy_linear():
    values = [5.0, 1.0, 4.0, 2.0, 3.0]
    assert stats.median(values) == 3.0
    assert stats.percentile(values, 90) == pytest.approx(4.6)
    assert stats.iqr(values) == pytest.approx(2.0)


def test_slowest_rank_per_step():
    assert stats.elementwise_max([[1.0, 5.0, 2.0], [3.0, 1.0, 2.5]]) == [3.0, 5.0, 2.5]
    with pytest.raises(ValueError):
        stats.elementwise_max([[1.0], [1.0, 2.0]])


def test_speedup_efficiency_and_time_to_target():
    assert stats.speedup(100.0, 190.0) == pytest.approx(1.9)
    assert stats.efficiency(1.9, 2) == pytest.approx(0.95)
    assert stats.samples_per_s(256, 0.5) == 512
    curve = [(1.0, 0.9), (2.0, 0.991), (3.0, 0.995)]
    assert stats.first_reaching(curve, 0.99) == 2.0
    assert stats.first_reaching(curve, 0.999) is None


def test_onecycle_uses_torch_onecycle_peaking_at_the_lr():
    import torch

    from trainscale.train.lr import make_scheduler

    param = torch.nn.Parameter(torch.zeros(1))
    optimizer = torch.optim.Adam([param], lr=0.003)
    scheduler = make_scheduler(optimizer, 100, "onecycle", 0.3)
    assert isinstance(scheduler, torch.optim.lr_scheduler.OneCycleLR)
    lrs = []
    for _ in range(100):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert lrs[0] == pytest.approx(0.003 / 25)
    assert max(lrs) == pytest.approx(0.003) and lrs.index(max(lrs)) in (29, 30)
    assert lrs[-1] < 0.003 / 1000
    # Tiny runs still get a valid schedule.
    make_scheduler(torch.optim.Adam([param], lr=0.1), 2, "onecycle", 0.3)


def test_step_schedule_divides_by_10_at_half_and_three_quarters():
    # He et al. 2016: lr 0.1, divided by 10 at 32k and 48k of 64k iterations.
    total = 64_000
    assert lr_factor(0, total, "step", 0.0) == 1.0
    assert lr_factor(31_999, total, "step", 0.0) == 1.0
    assert lr_factor(32_000, total, "step", 0.0) == pytest.approx(0.1)
    assert lr_factor(47_999, total, "step", 0.0) == pytest.approx(0.1)
    assert lr_factor(48_000, total, "step", 0.0) == pytest.approx(0.01)
    assert lr_factor(total - 1, total, "step", 0.0) == pytest.approx(0.01)
    # A warm-up ramps first and does not move the drops.
    assert lr_factor(0, 100, "step", 0.1) == pytest.approx(0.1)
    assert lr_factor(10, 100, "step", 0.1) == 1.0
    assert lr_factor(50, 100, "step", 0.1) == pytest.approx(0.1)


def test_step_scheduler_matches_torch_multisteplr():
    import torch

    from trainscale.config.options import Schedule, literal_choices
    from trainscale.train.lr import make_scheduler

    assert "step" in literal_choices(Schedule)
    total = 40
    ours_param, torch_param = torch.nn.Parameter(torch.zeros(1)), torch.nn.Parameter(torch.zeros(1))
    ours = torch.optim.SGD([ours_param], lr=0.1, momentum=0.9)
    reference = torch.optim.SGD([torch_param], lr=0.1, momentum=0.9)
    scheduler = make_scheduler(ours, total, "step", 0.0)
    multistep = torch.optim.lr_scheduler.MultiStepLR(reference, milestones=[20, 30], gamma=0.1)
    for _ in range(total):
        assert ours.param_groups[0]["lr"] == pytest.approx(reference.param_groups[0]["lr"])
        ours.step()
        reference.step()
        scheduler.step()
        multistep.step()
