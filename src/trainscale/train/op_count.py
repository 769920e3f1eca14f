"""Counting the operators a piece of training code dispatches, kernels only.

Each eager operator costs a step a fixed amount beyond its arithmetic (Python, autograd, the
dispatcher and, on a GPU, a kernel launch). The simulator multiplies the operators a
workload's forward and backward dispatch by a per-operator cost (`simulate.buckets`), and
`trainscale probe` measures that cost by the same count (`probe.dispatch`): one counter, so
the two agree on what an operator is. Views and allocations are left out: no kernel runs
for them.
"""

from __future__ import annotations

from typing import Any

from torch.utils._python_dispatch import TorchDispatchMode

METADATA_OPS = frozenset(
    {
        "aten.detach",
        "aten.t",
        "aten.view",
        "aten._unsafe_view",
        "aten._reshape_alias",
        "aten.slice",
        "aten.select",
        "aten.unsqueeze",
        "aten.squeeze",
        "aten.expand",
        "aten.permute",
        "aten.transpose",
        "aten.as_strided",
        "aten.alias",
        "aten.empty",
        "aten.empty_like",
        "aten.split",
        "aten.unbind",
        "aten.lift_fresh",
    }
)
"""Operators that only describe or allocate tensors: no kernel runs for them."""


class OpCounter(TorchDispatchMode):
    """Counts the kernel-running operators dispatched inside it (`with OpCounter() as c:`;
    then `c.count`). torch's dispatch-mode hook is the one place every aten operator passes,
    autograd's backward ones included, which a profiler would also see but at far more cost."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        if str(func.overloadpacket) not in METADATA_OPS:
            self.count += 1
        return func(*args, **(kwargs or {}))


def count_ops(fn: Any) -> int:
    """The kernel-running operators `fn()` dispatches."""
    with OpCounter() as counter:
        fn()
    return counter.count
