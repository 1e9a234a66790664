"""Per-channel scales and shifts after a convolution folded into its weights and bias (batch norm at inference).

After constant folding, an inference batch norm behind `conv2d` is `((conv - mean) * scale) + shift` with constant
per-channel `mean`, `scale`, `shift`. Each step folds into the convolution, one operator at a time:

    conv2d(x, w, b) * s   ->  conv2d(x, w * s[o], b * s)
    conv2d(x, w, b) + t   ->  conv2d(x, w, b + t)        (also t + conv, and conv - t with -t)

so the kernel reads folded weights instead of applying the batch norm to every output element. A step folds only
when the convolution's result has no other reader and is not a graph output, the constant varies along the channel
axis only (or is a scalar), and the dtypes agree (no promotion). The folded weights are computed once, with numpy,
in the weights' dtype; the results differ from the unfolded graph by rounding only (`w * s` is rounded once
instead of each output being scaled after its sum).
"""

from __future__ import annotations

import numpy as np

from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.graph.rewrite import replay
from stdlib_ops.operators import conv2d
from stdlib_ops.operators.base import Operator
from stdlib_ops.tensor import Tensor, asarray

FOLDABLE = ("mul", "add", "sub")
FLOATS = ("float16", "float32", "float64")  # weights numpy computes in their own dtype


def fold_into_conv(graph: FlowGraph) -> FlowGraph:
    """`graph` with per-channel multiplications, additions and subtractions of constants after `conv2d` folded
    into the convolutions' weights and biases (see the module docstring)."""
    readers = graph.users()
    outputs = {id(t) for t in graph.outputs}
    private = {id(t) for op in graph.nodes for t in op.outputs if len(readers.get(id(t), ())) == 1
               and id(t) not in outputs}

    def rule(op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
        if op.name not in FOLDABLE or len(inputs) != 2:
            return None
        for side in (0, 1):
            conv, constant = inputs[side], inputs[1 - side]
            if op.name == "sub" and side == 1:
                return None  # t - conv would negate the weights too; left as it is
            producer = conv.producer
            if producer is None or producer.name != "conv2d" or id(op.inputs[side]) not in private or \
                    any(t.is_symbolic or t.dtype not in FLOATS for t in producer.inputs[1:]):
                continue
            channels = _per_channel(constant, conv)
            if channels is not None:
                return [_folded(producer, op.name, channels)]
        return None

    return replay(graph, rule=rule, fold=False)


def _per_channel(constant: Tensor, conv: Tensor) -> np.ndarray | None:
    """The values of `constant` per output channel of `conv` (one per channel), if it is a constant of `conv`'s
    dtype that varies along axis 1 of [N, O, OH, OW] only, else None."""
    if constant.is_symbolic or constant.dtype != conv.dtype or constant.ndim > 4:
        return None
    shape = (1,) * (4 - constant.ndim) + tuple(constant.shape)
    channels = conv.shape[1]
    if shape[0] != 1 or shape[2:] != (1, 1) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(constant.numpy().reshape(shape[1]), (channels,))


def _folded(conv_op: Operator, step: str, values: np.ndarray) -> Tensor:
    """`conv_op`'s convolution with the per-channel `step` ('mul', 'add' or 'sub' by `values`) in its weights and
    bias."""
    x, weight = conv_op.inputs[0], conv_op.inputs[1].numpy()
    out_channels = weight.shape[0]
    bias = conv_op.inputs[2].numpy() if len(conv_op.inputs) > 2 else np.zeros(out_channels, weight.dtype)
    if step == "mul":
        weight, bias = weight * values.reshape(-1, 1, 1, 1), bias * values
    else:
        bias = bias + values if step == "add" else bias - values
    attrs = conv_op.task.attrs
    return conv2d(x, asarray(weight, device=x.device), asarray(bias, device=x.device), stride=attrs["stride"],
                  padding=attrs["padding"], dilation=attrs["dilation"], groups=attrs["groups"])
