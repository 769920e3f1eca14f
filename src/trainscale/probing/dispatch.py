"""Per-operator overhead: what one eager operator costs a training step beyond its arithmetic.

Every operator a step dispatches costs host time (Python, autograd, the dispatcher) and, on
a GPU, a kernel launch, however small its tensors. On a fast GPU at the batch sizes of the
reference workloads that fixed cost, not the arithmetic, sets the step (on an H200 their
steps took 3-22 ms while their FLOPs needed well under one). The probe trains a network
whose arithmetic is negligible, a stack of narrow linear layers at a tiny batch, times its
training steps, and divides by the operators its forward and backward dispatch, counted as
the simulator counts a workload's (`trainscale.train.op_count`). The figure is therefore
defined as the simulator uses it (`op_overhead` x a workload's forward + backward operators,
docs/simulator.md): the optimizer's and the autograd engine's own costs are spread over the
forward and backward operators, as they are in a real step. The whole step's operators
(optimizer included) are stored too, so that either definition can be checked against
measured steps.
"""

from __future__ import annotations

from typing import Any

import torch

from trainscale.probing.timing import best_seconds_per_call
from trainscale.train.op_count import count_ops

DEPTH = 16
WIDTH = 32
BATCH = 8
"""16 layers of 32 x 32 at batch 8: about 0.8 MFLOP a step, microseconds of arithmetic on any
device, against hundreds of operators."""
WARMUP_STEPS = 20


def tiny_network(device: torch.device) -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    """The probe's network and its optimizer (SGD with momentum, torch's default kernels)."""
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 4)).to(device)
    return model, torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)


def measure_dispatch(
    device: torch.device, repeats: int, min_batch_s: float = 0.05, budget_s: float = 30.0
) -> dict[str, Any]:
    """Best seconds per training step of the tiny network, and per operator.

    Steps are timed as the matmul probe times products (`probe.timing`): launches queue as
    they do in training.
    """
    model, optimizer = tiny_network(device)
    x = torch.randn(BATCH, WIDTH, device=device)
    y = torch.randint(0, 4, (BATCH,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def forward_backward() -> None:
        loss_fn(model(x), y).backward()

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        forward_backward()
        optimizer.step()

    for _ in range(WARMUP_STEPS):  # allocator, kernel selection, optimizer state
        step()
    optimizer.zero_grad(set_to_none=True)  # as in a step: no gradient to accumulate into
    forward_backward_ops = count_ops(forward_backward)
    step_ops = count_ops(step)
    best = best_seconds_per_call(step, device, repeats, min_batch_s, budget_s, 10_000)
    return {
        "seconds_per_step": best,
        "forward_backward_ops": forward_backward_ops,
        "step_ops": step_ops,
        "seconds_per_op": best / forward_backward_ops,
        "seconds_per_step_op": best / step_ops,
        "network": f"{DEPTH} x Linear({WIDTH}, {WIDTH}) + ReLU, batch {BATCH}, SGD momentum",
    }
