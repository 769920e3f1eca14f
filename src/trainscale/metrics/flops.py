"""FLOP formulas for ops that torch.utils.flop_counter does not count.

On the CPU, torch runs an LSTM whose batch has one length throughout (a padded batch, or a
packed one whose texts are all as long) through a fused oneDNN kernel,
`aten.mkldnn_rnn_layer`, which the counter does not know: it counts such a layer as zero.
These formulas count it the way the counter counts the same LSTM when it decomposes it
into matrix products (on mixed-length packed batches): matmuls only, 2 FLOPs per
multiply-add, elementwise gate arithmetic left out.

On CUDA, nn.LSTM / nn.GRU run all layers and directions in one cuDNN call,
`aten._cudnn_rnn` (and `aten._cudnn_rnn_backward`), which the counter does not know either;
they are counted here with the same per-layer formula, so a model counts alike on both.

A count is also split by the kind of operator that does the work (`flop_kind`): on a GPU,
convolutions and recurrent layers go to cuDNN and matrix products to cuBLAS, which torch lets
use TF32 tensor cores for fp32 under separate switches, so the peak a run is held against
depends on the mix (`hardware/figures.py`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from trainscale.metrics.flop_kinds import flop_kind


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


def cudnn_rnn_flops(
    input_shape: Sequence[int],
    weight_shapes: Sequence[Sequence[int]],
    weight_stride0: int,
    proj_size: int,
    num_layers: int,
    bidirectional: bool,
) -> int:
    """Forward FLOPs of a whole cuDNN RNN: `rnn_layer_flops` for every layer and direction.

    `weight_shapes` is the module's flat weight list, `weight_stride0` tensors per layer and
    direction, each group starting with w_ih, w_hh (then biases, then w_hr with a
    projection). The token count is the product of the input's leading dimensions: (T, N)
    or (N, T) unpacked, or the packed row count (= sum(batch_sizes)).
    """
    tokens = math.prod(input_shape[:-1])
    flops = 0
    for group in range(num_layers * (2 if bidirectional else 1)):
        first = group * weight_stride0
        w_ih, w_hh = weight_shapes[first], weight_shapes[first + 1]
        flops += rnn_layer_flops((tokens, w_ih[1]), w_ih, w_hh)
        if proj_size > 0:  # LSTM projection h = w_hr @ h_full, last of the group, per token
            w_hr = weight_shapes[first + weight_stride0 - 1]
            flops += 2 * tokens * w_hr[0] * w_hr[1]
    return flops


def cudnn_rnn_flop(
    input,
    weight,
    weight_stride0,
    weight_buf,
    hx,
    cx,
    mode,
    hidden_size,
    proj_size,
    num_layers,
    batch_first,
    dropout,
    train,
    bidirectional,
    *args: Any,
    out_shape=None,
    **kwargs: Any,
) -> int:
    """`aten._cudnn_rnn(input, weight, weight_stride0, weight_buf, hx, cx, mode, hidden_size,
    proj_size, num_layers, batch_first, dropout, train, bidirectional, batch_sizes, ...)`."""
    return cudnn_rnn_flops(input, weight, weight_stride0, proj_size, num_layers, bidirectional)


def cudnn_rnn_backward_flop(
    input,
    weight,
    weight_stride0,
    weight_buf,
    hx,
    cx,
    output,
    grad_output,
    grad_hy,
    grad_cy,
    mode,
    hidden_size,
    proj_size,
    num_layers,
    batch_first,
    dropout,
    train,
    bidirectional,
    *args: Any,
    out_shape=None,
    **kwargs: Any,
) -> int:
    """`aten._cudnn_rnn_backward`: two matmuls per forward one, as for the oneDNN backward."""
    return 2 * cudnn_rnn_flops(input, weight, weight_stride0, proj_size, num_layers, bidirectional)


def extra_flop_formulas() -> dict[Any, Callable[..., int]]:
    """`custom_mapping` for `FlopCounterMode`: the fused RNN ops (oneDNN on the CPU, cuDNN
    on CUDA) this torch has; an op a build lacks is left out rather than failing."""
    aten = torch.ops.aten
    formulas = {}
    for name, formula in (
        ("mkldnn_rnn_layer", mkldnn_rnn_layer_flop),
        ("mkldnn_rnn_layer_backward", mkldnn_rnn_layer_backward_flop),
        ("_cudnn_rnn", cudnn_rnn_flop),
        ("_cudnn_rnn_backward", cudnn_rnn_backward_flop),
    ):
        if hasattr(aten, name):
            formulas[getattr(aten, name)] = formula
    return formulas


@dataclass(frozen=True)
class FlopCount:
    """Training FLOPs (forward and backward) of one sample, in all and by operator kind."""

    per_sample: int
    by_kind: Mapping[str, int]
    """FLOPs per sample of each kind in `FLOP_KINDS` that did any."""


def split_by_kind(counts: Mapping[Any, int], samples: int) -> FlopCount:
    """A `FlopCounterMode`'s global counts by operator (`get_flop_counts()["Global"]`) over a
    batch of `samples`, as FLOPs per sample in all and by kind."""
    by_kind: dict[str, int] = {}
    for op, flops in counts.items():
        kind = flop_kind(str(op))
        by_kind[kind] = by_kind.get(kind, 0) + int(flops)
    total = sum(by_kind.values())
    return FlopCount(
        total // samples, {kind: flops // samples for kind, flops in by_kind.items() if flops}
    )
