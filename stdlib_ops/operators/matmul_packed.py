"""`matmul_packed`: a matrix product whose right operand, a constant matrix, was packed once into the panels the
CPU matmul's micro-kernel reads.

`matmul_packed(x, panels, n=...)` computes what `matmul(x, w)` computes for a matrix `w` [k, n], with `panels` the
f32 array `[ceil(n / pw), k, pw]` made of `w` (`pw` the panels' width; `templates.kernels.matmul_cpu.
pack_matmul_weights`): column `j` of `w` is column `j % pw` of panel `j / pw`, zeros past the last column. The
graph makes it from a matmul by a constant matrix where the CPU template computes it (`stdlib_ops.graph.
pack_weights`), so the weights are packed when the graph is built instead of on every call; its compute definition
is the matmul's, reading the panels, so that any scheduler computes it.
"""

from __future__ import annotations

from typing import Any

from stdlib_ops.compute import cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, shape_str
from stdlib_ops.tensor import Tensor

PACKED_DTYPES = ("float32", "float16", "bfloat16")
"""The dtypes of the input: those whose products the f32 panels give exactly as the unpacked matmul does (their
weights converted to f32 without rounding)."""


def matmul_packed(x: Tensor, panels: Tensor, *, n: int) -> Tensor:
    """`x @ w` for `x` [..., m, k] and the matrix `w` [k, n] packed in `panels` (see the module's docstring): out
    [..., m, n] in `x`'s dtype (f32 or a half precision, accumulated in f32)."""
    name = "matmul_packed"
    x, panels = as_tensors(name, x, panels)
    if x.ndim < 2 or x.dtype not in PACKED_DTYPES:
        raise ValueError(f"{name}: expected an input [..., m, k] of {', '.join(PACKED_DTYPES)}, got {x.dtype} "
                         f"{shape_str(x.shape)}")
    k = x.shape[-1]
    pw = panels.shape[-1] if panels.ndim == 3 else 0
    if panels.dtype != "float32" or pw < 1 or not isinstance(n, int) or n < 1 or \
            tuple(panels.shape) != (-(-n // pw), k, pw):
        raise ValueError(f"{name}: panels of shape {shape_str(panels.shape)} ({panels.dtype}) do not hold a "
                         f"[{k}, {n}] matrix for an input {shape_str(x.shape)}, as float32 [ceil(n / pw), k, pw]")
    out = x.dtype
    acc = "float32"

    def define(xv: Any, pv: Any) -> Any:
        def at(*i: Any) -> Any:
            *lead, j = i

            def term(r: Any) -> Any:
                return cast_to(xv[(*lead, r)], acc) * cast_to(pv[j / pw, r, j % pw], acc)

            return cast_to(reduce([k], term, "sum", acc), out)

        return compute("out", [*x.shape[:-1], n], at)

    return apply(name, {"n": n}, [x, panels], define)[0]
