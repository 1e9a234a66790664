"""The operator library: each function makes a task from its inputs' shapes and runs it (concrete inputs) or
records it (symbolic inputs). numpy's semantics throughout; see the modules for each family."""

from __future__ import annotations

import sys

from stdlib_ops.operators.attention import attention
from stdlib_ops.operators.base import Operator, apply
from stdlib_ops.operators.conv import conv2d, conv_transpose2d
from stdlib_ops.operators.elementwise import (
    abs,
    add,
    cast,
    ceil,
    clip,
    cos,
    div,
    equal,
    erf,
    exp,
    floor,
    floor_divide,
    gelu,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    maximum,
    minimum,
    mul,
    neg,
    not_equal,
    pow,
    relu,
    remainder,
    round,
    rsqrt,
    sigmoid,
    silu,
    sin,
    sqrt,
    sub,
    tanh,
    where,
)
from stdlib_ops.operators.linalg import linear, matmul
from stdlib_ops.operators.nn import batch_norm, group_norm, layer_norm, log_softmax, rms_norm, softmax
from stdlib_ops.operators.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d
from stdlib_ops.operators.reduction import argmax, argmin, max, mean, min, prod, std, sum, var
from stdlib_ops.operators.transform import (
    broadcast_to,
    concat,
    expand_dims,
    flatten,
    gather,
    getitem,
    pad,
    permute,
    reshape,
    split,
    squeeze,
    stack,
    strided_slice,
    take,
    transpose,
)
from stdlib_ops.tensor import use_operators

__all__ = [
    "Operator", "abs", "adaptive_avg_pool2d", "add", "apply", "argmax", "argmin", "attention", "avg_pool2d",
    "batch_norm", "broadcast_to", "cast", "ceil", "clip", "concat", "conv2d", "conv_transpose2d", "cos", "div", "equal",
    "erf", "exp", "expand_dims", "flatten", "floor", "floor_divide", "gather", "gelu", "getitem", "greater",
    "greater_equal", "group_norm", "layer_norm", "less", "less_equal", "linear", "log", "log_softmax", "matmul", "max",
    "max_pool2d", "maximum", "mean", "min", "minimum", "mul", "neg", "not_equal", "pad", "permute", "pow", "prod",
    "relu", "remainder", "reshape", "rms_norm", "round", "rsqrt", "sigmoid", "silu", "sin", "softmax", "split", "sqrt",
    "squeeze", "stack", "std", "strided_slice", "sub", "sum", "take", "tanh", "transpose", "var", "where"
]

use_operators(sys.modules[__name__])  # the tensor methods call the operators of this package
