import pytest

from trainscale.train.faults import FaultInjector, parse_fault


def test_parse_and_target_only_the_named_rank_and_step():
    assert parse_fault("crash:rank=1:step=3") == ("crash", 1, 3)
    with pytest.raises(ValueError):
        parse_fault("explode:rank=1")
    injector = FaultInjector(rank=1, environ={"TRAINSCALE_FAULT_INJECT": "crash:rank=1:step=3"})
    injector.after_step(2)
    with pytest.raises(RuntimeError, match="injected crash"):
        injector.after_step(3)
    FaultInjector(rank=0, environ={"TRAINSCALE_FAULT_INJECT": "crash:rank=1:step=3"}).after_step(3)
