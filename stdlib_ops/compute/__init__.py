"""Compute definitions: what an operator computes, as IR expressions over its inputs (see `primitives`)."""

from __future__ import annotations

from stdlib_ops.compute.nodes import ArgReduceExpr, ComputeTensor, ReduceExpr
from stdlib_ops.compute.primitives import (
    arg_reduce,
    as_dim,
    as_dtype,
    cast_to,
    compute,
    extremum,
    reduce,
    shape_entry,
    size_var,
    tensor_input,
)

__all__ = [
    "ArgReduceExpr", "ComputeTensor", "ReduceExpr", "arg_reduce", "as_dim", "as_dtype", "cast_to", "compute",
    "extremum", "reduce", "shape_entry", "size_var", "tensor_input",
]
