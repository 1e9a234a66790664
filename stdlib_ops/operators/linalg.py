"""`matmul` (numpy's semantics, batch broadcasting included) and `linear` as compute definitions; half-precision
inputs accumulate in f32."""

from __future__ import annotations

from typing import Any

from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, broadcast_shapes, result_dtype, shape_str
from stdlib_ops.operators.transform import transpose
from stdlib_ops.tensor import Tensor


def matmul(a: Any, b: Any) -> Tensor:
    """`a @ b` as numpy: 1-D operands are promoted and the added axis removed; batch dimensions broadcast. The task
    records which operands were 1-D (attribute `vector_operands`, a pair of bools, when one was), which the matmul
    templates read as their canonical shape (`templates.kernels.matmul_views`)."""
    x, y = as_tensors("matmul", a, b)
    if x.ndim == 0 or y.ndim == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions (scalars are not allowed)")
    xs = x.shape if x.ndim > 1 else (1, *x.shape)
    ys = y.shape if y.ndim > 1 else (*y.shape, 1)
    k = xs[-1]
    if k != ys[-2]:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0 (size {ys[-2]} is "
                         f"different from {k}), with shapes {shape_str(x.shape)} and {shape_str(y.shape)}")
    batch = broadcast_shapes("matmul", xs[:-2], ys[:-2]) if (len(xs) > 2 or len(ys) > 2) else ()
    out = result_dtype(x.dtype, y.dtype)
    acc = "float32" if as_dtype(out).is_float and as_dtype(out).nbytes == 2 else out
    full_shape = (*batch, xs[-2], ys[-1])
    shape = tuple(d for n, d in enumerate(full_shape)
                  if not (x.ndim == 1 and n == len(full_shape) - 2) and not (y.ndim == 1 and n == len(full_shape) - 1))

    def define(xv: Any, yv: Any) -> Any:
        def at(*i: Any) -> Any:
            full = list(i)
            if x.ndim == 1:
                full.insert(len(full) - (0 if y.ndim == 1 else 1), None)
            if y.ndim == 1:
                full.append(None)
            rows, cols, bidx = full[-2], full[-1], full[:-2]

            def read(v: Any, shape: tuple, core: tuple) -> Any:
                lead = len(shape) - 2
                bi = [0 if shape[n] == 1 else bidx[len(bidx) - lead + n] for n in range(lead)]
                idx = [*bi, *core]
                return v[tuple(c for c in idx if c is not None)]

            return cast_to(reduce([k], lambda r: cast_to(read(xv, xs, (rows, r)), acc) *
                                  cast_to(read(yv, ys, (r, cols)), acc), "sum", acc), out)

        return compute("out", shape, at)

    vectors = (x.ndim == 1, y.ndim == 1)
    return apply("matmul", {"vector_operands": vectors} if any(vectors) else {}, [x, y], define)[0]


def linear(x: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """`x @ weight.T + bias`, as torch.nn.functional.linear (weight: [out_features, in_features])."""
    y = matmul(x, transpose(weight))
    return y if bias is None else y + bias
