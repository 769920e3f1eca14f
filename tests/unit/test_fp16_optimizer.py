"""An fp16 run's optimizer under the grad scaler: a step the scaler skips (overflowing
gradients, routine in fp16's first steps) must leave the optimizer as if it never ran.

Torch's fused SGD breaks that (it writes its momentum buffer on the skipped step), and a run
asks for fused optimizers on GPUs; the fused kernels exist on the CPU too, so this is
checked here, on any machine.
"""

from __future__ import annotations

import pytest
import torch

from trainscale.train.lr import make_optimisation

from tests.helpers.tiny import tiny_config


def scaled_step(model: torch.nn.Linear, optimizer, scaler, scale_input: float) -> None:
    optimizer.zero_grad(set_to_none=True)
    loss = model(torch.full((2, 3), scale_input)).sum()
    scaler.scale(loss).backward()
    scaler.step(optimizer)
    scaler.update()


@pytest.mark.parametrize("optimizer_name", ["sgd", "adam", "adamw"])
def test_an_overflow_step_leaves_the_fp16_optimizer_untouched(optimizer_name):
    # A CUDA run's config (resolution refuses fp16 on a CPU device): its optimisation only.
    config = tiny_config(optimizer=optimizer_name, lr=0.1).with_(precision="fp16")
    assert config.optimisation.momentum > 0  # SGD keeps a momentum buffer to corrupt
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 2)
    reference = torch.nn.Linear(3, 2)
    reference.load_state_dict(model.state_dict())
    weights = model.weight.detach().clone()
    optimizer, _ = make_optimisation(model, config, 10, fused=True)  # as on a GPU
    plain, _ = make_optimisation(reference, config, 10, fused=False)
    scaler, plain_scaler = torch.amp.GradScaler("cpu"), torch.amp.GradScaler("cpu")

    scaled_step(model, optimizer, scaler, float("inf"))  # overflow: the step is skipped
    assert torch.equal(model.weight.detach(), weights)
    # No state, or a fresh one (fused Adam creates its zeroed moments and step 0 anyway).
    states = [value for state in optimizer.state.values() for value in state.values()]
    assert not any(torch.any(value != 0) for value in states)

    # The next, finite step lands where an optimizer that never saw the overflow lands.
    scaled_step(model, optimizer, scaler, 1.0)
    scaled_step(reference, plain, plain_scaler, float("inf"))
    scaled_step(reference, plain, plain_scaler, 1.0)
    assert torch.allclose(model.weight, reference.weight, atol=1e-6)
