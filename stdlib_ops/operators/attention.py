"""`attention(q, k, v, causal=False, *, attn_mask=None, scale=None, enable_gqa=False)`: scaled dot-product
attention over the last two axes (torch's `scaled_dot_product_attention` without dropout), as one task named
"attention" with inputs (q, k, v) or (q, k, v, mask) and the attributes `causal`, and `scale` and `enable_gqa`
where given (templates are registered under that name).

q: [..., Sq, D], k: [..., Sk, D], v: [..., Sk, Dv] (leading axes broadcast as numpy's); the result
[..., Sq, Dv] is softmax(q k^T * scale + mask) v with scale 1/sqrt(D) by default, the mask allowing key j for
query i when j <= i if `causal` (aligned at the top left, as torch's `is_causal`). `attn_mask` broadcasts to
[..., Sq, Sk]: a float mask is added to the scores, a boolean one allows the keys where it is True (it becomes an
additive mask of 0 and -inf before the task, an injective operator that fuses into it). With `enable_gqa`, q has
H heads (axis -3) and k and v H / G of them: query head h reads key/value head h // G. A row whose every score
is masked gives zeros, as torch does. Half-precision inputs accumulate in f32. Decoding on CUDA (a few queries
against a long cache, few (batch, head) pairs) becomes two tasks that split the keys over blocks
(`attention_split`).
"""

from __future__ import annotations

import math
from typing import Any

from hidet_lang.ir.expr import Constant, Expr, IfThenElse, Intrinsic, Var, binary
from hidet_lang.ir.types import int32
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.attention_split import split_attention
from stdlib_ops.operators.base import apply, as_tensors, broadcast_index, broadcast_shapes, shape_str
from stdlib_ops.operators.conv import float_dtypes
from stdlib_ops.operators.elementwise import cast, where
from stdlib_ops.tensor import Tensor


def attention(q: Tensor, k: Tensor, v: Tensor, causal: bool = False, *, attn_mask: Tensor | None = None,
              scale: float | None = None, enable_gqa: bool = False) -> Tensor:
    """softmax(q @ k^T * scale (+ the causal mask) (+ attn_mask)) @ v, one kernel per call (see the module
    docstring)."""
    name = "attention"
    q, k, v = as_tensors(name, q, k, v)
    shapes = " ".join(shape_str(t.shape) for t in (q, k, v))
    if min(q.ndim, k.ndim, v.ndim) < 2:
        raise ValueError(f"{name}: q, k and v need at least 2 dimensions, got shapes {shapes}")
    if q.shape[-1] != k.shape[-1] or k.shape[-2] != v.shape[-2]:
        raise ValueError(f"{name}: q [..., Sq, D], k [..., Sk, D] and v [..., Sk, Dv] do not match, got shapes "
                         f"{shapes}")
    out_dtype, acc = float_dtypes(name, [q, k, v])
    group = _kv_group(name, q, k, v, shapes) if enable_gqa else 1
    heads = (q.shape[-3],) if group > 1 else ()
    batch = (*broadcast_shapes(name, q.shape[:-3 if heads else -2], k.shape[:-3 if heads else -2],
                               v.shape[:-3 if heads else -2]), *heads)
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    at = as_dtype(acc)
    if not isinstance(d, int):
        raise ValueError(f"{name}: the head dimension D must be known when the operator is made, got shapes {shapes}")
    factor = 1.0 / math.sqrt(d) if scale is None else float(scale)
    inputs = [q, k, v]
    if attn_mask is not None:
        inputs.append(_additive_mask(name, q, attn_mask, (*batch, sq, sk)))
    attributes: dict[str, Any] = {"causal": bool(causal)}
    if scale is not None:
        attributes["scale"] = factor
    if group > 1:
        attributes["enable_gqa"] = True
    split = split_attention(inputs, batch, attributes, group)  # decoding on CUDA: the keys split over blocks
    if split is not None:
        return split

    def define(qv: Var, kv: Var, vv: Var, *mask: Var) -> Any:
        def read(t: Var, b: tuple, row: Expr, col: Expr, kv_head: bool = False) -> Expr:
            if kv_head and group > 1:
                b = (*b[:-1], binary("/", b[-1], Constant(group, int32)))
            return cast_to(t[broadcast_index(t, (*b, row, col))], acc)

        def score_at(*i: Expr) -> Expr:
            b, row, col = i[:-2], i[-2], i[-1]
            dot = reduce([d], lambda e: read(qv, b, row, e) * read(kv, b, col, e, True), "sum", acc)
            s = dot * Constant(factor, at)
            if mask:
                s = s + read(mask[0], b, row, col)
            return IfThenElse(col <= row, s, Constant(-math.inf, at)) if causal else s

        score = compute("score", [*batch, sq, sk], score_at)

        def shift_at(*i: Expr) -> Expr:
            top = reduce([sk], lambda j: score[(*i, j)], "max", acc)
            # a row whose every score is -inf shifts by 0: its weights are all 0
            return IfThenElse(binary("==", top, Constant(-math.inf, at)), Constant(0.0, at), top)

        row_shift = compute("row_shift", [*batch, sq], shift_at)
        weight = compute("weight", [*batch, sq, sk],
                         lambda *i: Intrinsic("exp", (score[i] - row_shift[i[:-1]],), at))
        row_sum = compute("row_sum", [*batch, sq], lambda *i: reduce([sk], lambda j: weight[(*i, j)], "sum", acc))

        def out_at(*i: Expr) -> Expr:
            b, row, col = i[:-2], i[-2], i[-1]
            total = reduce([sk], lambda j: weight[(*b, row, j)] * read(vv, b, j, col, True), "sum", acc)
            denominator = row_sum[(*b, row)]
            value = IfThenElse(binary(">", denominator, Constant(0.0, at)), total / denominator, Constant(0.0, at))
            return cast_to(value, out_dtype)

        return compute("out", [*batch, sq, dv], out_at)

    return apply(name, attributes, inputs, define)[0]


def _kv_group(name: str, q: Tensor, k: Tensor, v: Tensor, shapes: str) -> int:
    """How many query heads share a key/value head (H / H_kv, axis -3), checked to be a whole number."""
    if min(q.ndim, k.ndim, v.ndim) < 3 or k.shape[-3] != v.shape[-3]:
        raise ValueError(f"{name}: enable_gqa needs q [..., H, Sq, D], k and v [..., H_kv, Sk, *], got shapes {shapes}")
    h, h_kv = q.shape[-3], k.shape[-3]
    if not isinstance(h, int) or not isinstance(h_kv, int) or h_kv < 1 or h % h_kv != 0:
        raise ValueError(f"{name}: enable_gqa needs the query heads ({h}) to be a multiple of the key/value heads "
                         f"({h_kv}), both known when the operator is made")
    return h // h_kv


def _additive_mask(name: str, q: Tensor, mask: Any, scores: tuple) -> Tensor:
    """`mask` as an additive float mask broadcastable to the scores' shape (a boolean one: f32 0 where True,
    -inf where False)."""
    mask = as_tensors(name, q, mask)[1]
    try:
        fits = mask.ndim <= len(scores) and broadcast_shapes(name, mask.shape, scores) == tuple(scores)
    except ValueError:
        fits = False
    if not fits:
        raise ValueError(f"{name}: attn_mask of shape {shape_str(mask.shape)} does not broadcast to the scores' "
                         f"shape {shape_str(scores)}")
    dtype = as_dtype(mask.dtype)
    if dtype.name == "bool":
        return cast(where(mask, 0.0, -math.inf), "float32")
    if not dtype.is_float:
        raise TypeError(f"{name}: attn_mask must be boolean or floating-point, got {mask.dtype!r}")
    return mask
