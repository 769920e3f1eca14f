"""FLOP formulas for ops that torch.utils.flop_counter does not count.

On the CPU, torch runs an LSTM whose batch has one length throughout (a padded batch, or a
packed one whose texts are all as long) through a fused oneDNN kernel,
`aten.mkldnn_rnn_layer`, which the counter does not know: it counts such a layer as zero.
These formulas count it the way the counter counts the same LSTM when it decomposes it
into matrix products (on mixed-length packed batches): matmuls only, 2 FLOPs per
multiply-add, elementwise gate arithmetic left out.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch


def rnn_layer_flops(
    input_shape: Sequence[int], w_ih_shape: Sequence[int], w_hh_shape: Sequence[int]
) -> int:
    """Forward FLOPs of one recurrent layer direction: at every token, the input and the
    hidden state are each multiplied by the weights of all gates."""
    tokens = math.prod(input_shape[:-1])  # time x batch, whichever order
    gate_units = w_ih_shape[0]  # gates x hidden size
    return 2 * tokens * gate_units * (w_ih_shape[1] + w_hh_shape[1])


def mkldnn_rnn_layer_flop(input, w_ih, w_hh, *args: Any, out_shape=None, **kwargs: Any) -> int:
    """`aten.mkldnn_rnn_layer(input, w_ih, w_hh, b_ih, b_hh, hx, cx, reverse, ...)`."""
    return rnn_layer_flops(input, w_ih, w_hh)


def mkldnn_rnn_layer_backward_flop(
    input, w_ih, w_hh, *args: Any, out_shape=None, **kwargs: Any
) -> int:
    """The backward: gradients for the input and hidden state and for both weight matrices,
    two matmuls per forward one."""
    return 2 * rnn_layer_flops(input, w_ih, w_hh)


def extra_flop_formulas() -> dict[Any, Callable[..., int]]:
    """`custom_mapping` for `FlopCounterMode`: the fused CPU RNN ops this torch has."""
    aten = torch.ops.aten
    formulas = {}
    for name, formula in (
        ("mkldnn_rnn_layer", mkldnn_rnn_layer_flop),
        ("mkldnn_rnn_layer_backward", mkldnn_rnn_layer_backward_flop),
    ):
        if hasattr(aten, name):
            formulas[getattr(aten, name)] = formula
    return formulas
