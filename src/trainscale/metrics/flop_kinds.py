"""The kinds of operator a FLOP count is split by (torch-free: the framework table reads
them without loading torch).

On CUDA, convolutions and recurrent layers are cuDNN's and matrix products cuBLAS's, which
torch lets compute fp32 on TF32 tensor cores under separate switches (`hardware/tf32.py`).
"""

from __future__ import annotations

CONVOLUTION = "convolution"
RECURRENT = "recurrent"
MATMUL = "matmul"
FLOP_KINDS = (CONVOLUTION, RECURRENT, MATMUL)
"""The kinds of operator a FLOP count is split by: on CUDA, the first two are cuDNN's, the
last cuBLAS's (attention kernels are counted as matrix products)."""


def flop_kind(op_name: str) -> str:
    """The kind of a counted operator, from its name (`aten.convolution_backward`,
    `aten._cudnn_rnn`, `aten.mkldnn_rnn_layer`, `aten.addmm`, ...)."""
    name = op_name.rsplit(".", 1)[-1]
    if "conv" in name:
        return CONVOLUTION
    if "rnn" in name:
        return RECURRENT
    return MATMUL
