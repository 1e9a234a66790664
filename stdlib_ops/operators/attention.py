"""`attention(q, k, v, causal=False)`: scaled dot-product attention over the last two axes, as one task named
"attention" with inputs (q, k, v) and the attribute `causal` (templates are registered under that name).

q: [..., Sq, D], k: [..., Sk, D], v: [..., Sk, Dv] (leading axes broadcast as numpy's); the result
[..., Sq, Dv] is softmax(q k^T / sqrt(D) + mask) v, the mask allowing key j for query i when j <= i if `causal`.
Half-precision inputs accumulate in f32.
"""

from __future__ import annotations

import math
from typing import Any

from hidet_lang.ir.expr import Constant, Expr, IfThenElse, Intrinsic, Var
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, broadcast_index, broadcast_shapes, shape_str
from stdlib_ops.operators.conv import float_dtypes
from stdlib_ops.tensor import Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False) -> Tensor:
    """softmax(q @ k^T / sqrt(D) (+ the causal mask)) @ v, one kernel per call (see the module docstring)."""
    name = "attention"
    q, k, v = as_tensors(name, q, k, v)
    shapes = " ".join(shape_str(t.shape) for t in (q, k, v))
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ValueError(f"{name}: q, k and v need at least 2 dimensions, got shapes {shapes}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{name}: q [..., Sq, D], k [..., Sk, D] and v [..., Sk, Dv] do not match, got shapes "
                         f"{shapes}")
    out_dtype, acc = float_dtypes(name, [q, k, v])
    batch = broadcast_shapes(name, q.shape[:-2], k.shape[:-2], v.shape[:-2])
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    at = as_dtype(acc)
    scale = 1.0 / math.sqrt(d) if isinstance(d, int) else None
    if scale is None:
        raise ValueError(f"{name}: the head dimension D must be known when the operator is made, got shapes {shapes}")

    def define(qv: Var, kv: Var, vv: Var) -> Any:
        def read(t: Var, b: tuple, row: Expr, col: Expr) -> Expr:
            return cast_to(t[broadcast_index(t, (*b, row, col))], acc)

        def score_at(*i: Expr) -> Expr:
            b, row, col = i[:-2], i[-2], i[-1]
            dot = reduce([d], lambda e: read(qv, b, row, e) * read(kv, b, col, e), "sum", acc)
            s = dot * Constant(scale, at)
            return IfThenElse(col <= row, s, Constant(-math.inf, at)) if causal else s

        score = compute("score", [*batch, sq, sk], score_at)
        row_max = compute("row_max", [*batch, sq], lambda *i: reduce([sk], lambda j: score[(*i, j)], "max", acc))

        weight = compute("weight", [*batch, sq, sk], lambda *i: Intrinsic("exp", (score[i] - row_max[i[:-1]],), at))
        row_sum = compute("row_sum", [*batch, sq], lambda *i: reduce([sk], lambda j: weight[(*i, j)], "sum", acc))

        def out_at(*i: Expr) -> Expr:
            b, row, col = i[:-2], i[-2], i[-1]
            total = reduce([sk], lambda j: weight[(*b, row, j)] * read(vv, b, j, col), "sum", acc)
            return cast_to(total / row_sum[(*b, row)], out_dtype)

        return compute("out", [*batch, sq, dv], out_at)

    return apply(name, {"causal": bool(causal)}, [q, k, v], define)[0]
