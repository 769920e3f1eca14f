import pytest

from trainscale.train.faults import FaultInjector, parse_fault, parse_stall


def test_parse_and_target_only_the_named_rank_and_step():
    assert parse_fault("crash:rank=1:step=3") == ("crash", 1, 3)
    with pytest.raises(ValueError):
        parse_fault("explode:rank=1")
    injector = FaultInjector(rank=1, environ={"TRAINSCALE_FAULT_INJECT": "crash:rank=1:step=3"})
    injector.after_step(2)
    with pytest.raises(RuntimeError, match="injected crash"):
        injector.after_step(3)
    FaultInjector(rank=0, environ={"TRAINSCALE_FAULT_INJECT": "crash:rank=1:step=3"}).after_step(3)


def test_a_stall_sleeps_on_its_rank_at_its_step_and_every_k_after(monkeypatch):
    slept: list[float] = []
    monkeypatch.setattr("trainscale.train.faults.time.sleep", slept.append)
    text = "stall:rank=1:step=3:seconds=0.25:every=2"
    injector = FaultInjector(rank=1, environ={"TRAINSCALE_FAULT_INJECT": text})
    for step in range(1, 9):
        injector.after_step(step)
    assert slept == [0.25] * 3  # steps 3, 5 and 7
    FaultInjector(rank=0, environ={"TRAINSCALE_FAULT_INJECT": text}).after_step(3)
    assert len(slept) == 3
    once = FaultInjector(
        rank=0, environ={"TRAINSCALE_FAULT_INJECT": "stall:rank=0:step=2:seconds=1"}
    )
    for step in range(1, 6):
        once.after_step(step)
    assert slept == [0.25] * 3 + [1.0]


def test_a_malformed_stall_is_refused():
    for text in ("stall:rank=0:step=2", "stall:rank=0:step=0:seconds=1", "stall:x=1"):
        with pytest.raises(ValueError, match="stall"):
            parse_stall(text)
