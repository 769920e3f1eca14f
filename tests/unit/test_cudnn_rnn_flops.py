"""FLOP formulas for the cuDNN RNN ops, checked against the CPU count of the same module.

`aten._cudnn_rnn` cannot run on the CPU, so the formulas are called directly with the
shapes and arguments nn.LSTM / nn.GRU would pass it on CUDA.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence
from torch.utils.flop_counter import FlopCounterMode

from trainscale.metrics.flops import (
    cudnn_rnn_backward_flop,
    cudnn_rnn_flop,
    extra_flop_formulas,
)

MODES = {"lstm": 2, "gru": 3}  # cuDNN mode numbers


def _cpu_count(rnn: nn.RNNBase, x) -> tuple[int, int]:
    """(forward, forward + backward) FLOPs the project's CPU counting gives `rnn` on `x`."""
    counter = FlopCounterMode(display=False, custom_mapping=extra_flop_formulas())
    with counter:
        out, _ = rnn(x)
    forward = counter.get_total_flops()
    counter = FlopCounterMode(display=False, custom_mapping=extra_flop_formulas())
    with counter:
        out, _ = rnn(x)
        (out.data if not isinstance(out, torch.Tensor) else out).sum().backward()
    return forward, counter.get_total_flops()


def _cudnn_args(rnn: nn.RNNBase, input_shape, batch_sizes: list[int]) -> tuple:
    """The leading `_cudnn_rnn` arguments as shapes (what FlopCounterMode passes)."""
    weights = [tuple(w.shape) for w in rnn._flat_weights]
    stride = len(weights) // (rnn.num_layers * (2 if rnn.bidirectional else 1))
    return (
        tuple(input_shape),
        weights,
        stride,
        None,
        (1,),
        None,
        MODES[rnn.mode.lower()],
        rnn.hidden_size,
        rnn.proj_size,
        rnn.num_layers,
        rnn.batch_first,
        0.0,
        True,
        rnn.bidirectional,
        batch_sizes,
        None,
    )


@pytest.mark.parametrize("cell", ["lstm", "gru"])
@pytest.mark.parametrize("num_layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("packed", [False, True])
def test_cudnn_count_matches_the_cpu_count(
    cell: str, num_layers: int, bidirectional: bool, packed: bool
) -> None:
    torch.manual_seed(0)
    cls = nn.LSTM if cell == "lstm" else nn.GRU
    rnn = cls(5, 7, num_layers=num_layers, batch_first=True, bidirectional=bidirectional)
    # Requires grad as an embedding output does: the backward then computes every input
    # gradient, as `_cudnn_rnn_backward` does.
    x = torch.randn(3, 20, 5, requires_grad=True)
    if packed:
        lengths = torch.tensor([20, 14, 9])
        inp = pack_padded_sequence(x, lengths, batch_first=True)
        batch_sizes = inp.batch_sizes.tolist()
        input_shape = tuple(inp.data.shape)  # (sum(batch_sizes), input size)
        assert input_shape[0] == sum(batch_sizes)
    else:
        inp, batch_sizes, input_shape = x, [], tuple(x.shape)
    forward, total = _cpu_count(rnn, inp)
    args = _cudnn_args(rnn, input_shape, batch_sizes)
    assert cudnn_rnn_flop(*args, out_shape=None) == forward
    out = (input_shape[0], input_shape[1] if not packed else 0)
    backward_args = (*args[:6], out, out, None, None, *args[6:])
    # The backward is 2x the forward, the oneDNN backward's convention; where the CPU count
    # decomposes into matmuls it skips a few products (the zero initial state's gradients),
    # hence the tolerance of test_text_rnn's analytic check.
    backward = cudnn_rnn_backward_flop(*backward_args, out_shape=None)
    assert forward + backward == pytest.approx(total, rel=0.05)


def test_lstm_projection_is_counted() -> None:
    rnn = nn.LSTM(5, 8, proj_size=3, batch_first=True)
    args = _cudnn_args(rnn, (2, 4, 5), [])
    tokens = 8
    expected = 2 * tokens * 32 * (5 + 3) + 2 * tokens * 3 * 8
    assert cudnn_rnn_flop(*args, out_shape=None) == expected


def test_formulas_skip_ops_this_torch_lacks(monkeypatch: pytest.MonkeyPatch) -> None:
    # A build without cuDNN ops must still give the oneDNN formulas, not fail.
    real = torch.ops.aten

    class Partial:
        def __getattr__(self, name: str):
            if name.startswith("_cudnn"):
                raise AttributeError(name)
            return getattr(real, name)

    monkeypatch.setattr(torch.ops, "aten", Partial())
    names = {str(op) for op in extra_flop_formulas()}
    assert not any("cudnn" in n for n in names)
    assert any("mkldnn_rnn_layer" in n for n in names)
