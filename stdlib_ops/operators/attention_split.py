"""Split-k decoding: attention of a few queries against a long key/value cache, with the keys split over several
blocks of the GPU, as two tasks.

A decoding step asks for one (or a few) query rows a (batch, head) pair against a cache of thousands of keys. One
block per pair leaves most of a GPU's SMs idle when the pairs are few, so on CUDA such an attention is computed as

- `attention_partials` (inputs q, k, v and the optional additive mask; attributes `causal`, `scale`,
  `enable_gqa` as `attention`'s, and `key_splits` = S): split s of the keys, `s * L ... (s + 1) * L - 1` with
  `L = ceil(Sk / S)`, gives a partial output `part_o: f32[S, ..., Sq, Dv]` (softmax over the split's keys alone,
  zeros where it sees none) and its log-sum-exp `part_lse: f32[S, ..., Sq]` (-inf where it sees none);
- `attention_merge`: `out = sum_s w_s part_o[s] / sum_s w_s` with `w_s = exp(part_lse[s] - max_s part_lse)`, zeros
  for a row no split saw a key of (as `attention` gives for a fully masked row), rounded to the output dtype.

The partial results are the first task's outputs: the runtime allocates them as it does any intermediate tensor
(a template's kernel has no workspace of its own, and a task's module one kernel), and the CUDA template of
`attention_partials` is the tensor-core attention kernel with its keys split over blocks
(`attention_cuda_mma(key_splits=S)`); the merge is a small reduction over S.

`decode_key_splits` chooses S from what is known when the operator is made: the blocks a split takes (the (batch,
head) pairs, or the key/value heads' where a block takes a group of query heads) and the cache length, so that the
blocks fill the GPU about twice over with at least `MIN_SPLIT_KEYS` keys a split.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from hidet_lang.ir.expr import Constant, Expr, IfThenElse, Intrinsic, Var, binary, convert
from hidet_lang.ir.types import int32
from stdlib_ops.compute import as_dim, as_dtype, cast_to, compute, reduce
from stdlib_ops.dims import Dim
from stdlib_ops.operators.base import apply, broadcast_index
from stdlib_ops.templates.kernels.attention_cuda_mma import HEAD_DIMS, MASK_DTYPES, MMA_DTYPES
from stdlib_ops.templates.kernels.attention_decode_cuda import packs_query_heads
from stdlib_ops.tensor import Tensor

TARGET_BLOCKS = 264  # blocks that fill a GPU of 132 SMs (an H100 / H200) twice
MIN_SPLIT_KEYS = 256  # fewer keys a split than this cost more in merging than the extra blocks win
MAX_SPLITS = 32
MAX_DECODE_QUERIES = 16  # the queries of one tensor-core tile: the decoding schedule's block


def decode_key_splits(pairs: int, seq_k: Dim) -> int:
    """How many blocks share the keys of one block's queries, for `pairs` such blocks a split (a (batch, head) pair
    each, or a (batch, key/value head) pair; the known part of their number) and `seq_k` keys (an int, or symbolic):
    enough to fill `TARGET_BLOCKS`, at most `MAX_SPLITS`, with at least `MIN_SPLIT_KEYS` keys each where `seq_k` is
    known; 1 means no split."""
    splits = min(MAX_SPLITS, TARGET_BLOCKS // max(pairs, 1))
    if isinstance(seq_k, int):
        splits = min(splits, seq_k // MIN_SPLIT_KEYS)
    return max(1, splits)


def split_attention(inputs: Sequence[Tensor], batch: tuple[Dim, ...], attributes: dict[str, Any],
                    group: int) -> Tensor | None:
    """`attention` of `inputs` (q, k, v and an optional additive mask; `batch` the broadcast batch dimensions,
    heads last; `attributes` the attention task's) as split-k decoding, or None where it is not one: the inputs
    on CUDA, in f16 or bf16, at most `MAX_DECODE_QUERIES` queries known when the operator is made, a head dimension
    the tensor-core template takes, and more than one split worth making (`decode_key_splits`)."""
    q, k, v, *mask = inputs
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    dtypes = {q.dtype, k.dtype, v.dtype}
    if q.device != "cuda" or len(dtypes) != 1 or dtypes.pop() not in MMA_DTYPES or d != dv or d not in HEAD_DIMS:
        return None
    if not isinstance(sq, int) or sq > MAX_DECODE_QUERIES or (mask and mask[0].dtype not in MASK_DTYPES):
        return None
    pairs = math.prod(n for n in batch if isinstance(n, int))  # the blocks a split, those known
    if packs_query_heads(group, sq, attributes["causal"]):
        pairs //= group  # a block takes the query heads that share a key/value head
    splits = decode_key_splits(pairs, sk)
    if splits < 2:
        return None
    part_o, part_lse = attention_partials(inputs, batch, attributes, group, splits)
    return merge_partials(part_o, part_lse, q.dtype)


def attention_partials(inputs: Sequence[Tensor], batch: tuple[Dim, ...], attributes: dict[str, Any], group: int,
                       splits: int) -> list[Tensor]:
    """The `attention_partials` task of `inputs` over `splits` splits of the keys: `[part_o, part_lse]` (see the
    module docstring)."""
    q, k, v, *_ = inputs
    sq, d = q.shape[-2:]
    sk, dv = v.shape[-2:]
    at = as_dtype("float32")
    factor = attributes.get("scale", 1.0 / math.sqrt(d))
    causal = attributes["causal"]
    split_len = binary("/", binary("+", convert(as_dim(sk)), Constant(splits - 1, int32)), Constant(splits, int32))

    def define(qv: Var, kv: Var, vv: Var, *mask: Var) -> Any:
        def read(t: Var, b: tuple, row: Expr, col: Expr, kv_head: bool = False) -> Expr:
            if kv_head and group > 1:
                b = (*b[:-1], binary("/", b[-1], Constant(group, int32)))
            return cast_to(t[broadcast_index(t, (*b, row, col))], at)

        def score_at(s: Expr, *i: Expr) -> Expr:
            b, row, col = i[:-2], i[-2], i[-1]
            dot = reduce([d], lambda e: read(qv, b, row, e) * read(kv, b, col, e, True), "sum", at)
            value = dot * Constant(float(factor), at)
            if mask:
                value = value + read(mask[0], b, row, col)
            seen = binary("==", binary("/", col, split_len), s)
            if causal:
                seen = binary("&&", seen, binary("<=", col, row))
            return IfThenElse(seen, value, Constant(-math.inf, at))

        score = compute("split_score", [splits, *batch, sq, sk], score_at)

        def shift_at(*i: Expr) -> Expr:
            top = reduce([sk], lambda j: score[(*i, j)], "max", at)
            return IfThenElse(binary("==", top, Constant(-math.inf, at)), Constant(0.0, at), top)

        shift = compute("split_shift", [splits, *batch, sq], shift_at)
        weight = compute("split_weight", [splits, *batch, sq, sk],
                         lambda *i: Intrinsic("exp", (score[i] - shift[i[:-1]],), at))
        total = compute("split_sum", [splits, *batch, sq],
                        lambda *i: reduce([sk], lambda j: weight[(*i, j)], "sum", at))

        def out_at(*i: Expr) -> Expr:
            s, b, row, col = i[0], i[1:-2], i[-2], i[-1]
            summed = reduce([sk], lambda j: weight[(s, *b, row, j)] * read(vv, b, j, col, True), "sum", at)
            denominator = total[(s, *b, row)]
            return IfThenElse(binary(">", denominator, Constant(0.0, at)), summed / denominator, Constant(0.0, at))

        def lse_at(*i: Expr) -> Expr:
            positive = binary(">", total[i], Constant(0.0, at))
            return IfThenElse(positive, shift[i] + Intrinsic("log", (total[i],), at), Constant(-math.inf, at))

        return [compute("part_o", [splits, *batch, sq, dv], out_at), compute("part_lse", [splits, *batch, sq], lse_at)]

    return apply("attention_partials", {**attributes, "key_splits": splits}, list(inputs), define)


def merge_partials(part_o: Tensor, part_lse: Tensor, dtype: str) -> Tensor:
    """The `attention_merge` task: the splits' partial outputs `part_o [S, ..., Sq, Dv]` weighted by their
    log-sum-exps `part_lse [S, ..., Sq]` into the attention's output `[..., Sq, Dv]` in `dtype`."""
    splits = part_o.shape[0]
    at = as_dtype("float32")

    def define(ov: Var, lv: Var) -> Any:
        def shift_at(*i: Expr) -> Expr:
            top = reduce([splits], lambda s: lv[(s, *i)], "max", at)
            return IfThenElse(binary("==", top, Constant(-math.inf, at)), Constant(0.0, at), top)

        shift = compute("merge_shift", list(part_lse.shape[1:]), shift_at)
        weight = compute("merge_weight", list(part_lse.shape),
                         lambda *i: Intrinsic("exp", (lv[i] - shift[i[1:]],), at))
        total = compute("merge_sum", list(part_lse.shape[1:]),
                        lambda *i: reduce([splits], lambda s: weight[(s, *i)], "sum", at))

        def out_at(*i: Expr) -> Expr:
            summed = reduce([splits], lambda s: weight[(s, *i[:-1])] * ov[(s, *i)], "sum", at)
            denominator = total[i[:-1]]
            value = IfThenElse(binary(">", denominator, Constant(0.0, at)), summed / denominator, Constant(0.0, at))
            return cast_to(value, dtype)

        return compute("out", list(part_o.shape[1:]), out_at)

    return apply("attention_merge", {}, [part_o, part_lse], define)[0]
