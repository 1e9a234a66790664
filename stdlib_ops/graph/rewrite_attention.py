"""`fuse_attention`: the scaled dot-product attention that exported and traced models spell out in operators,
rewritten to one `attention` operator, so that it runs on the attention templates.

The pattern (what ONNX exports of BERT-style models and FX traces of hand-written attention give):

    scores = matmul(q, kt)                  q [..., Sq, D], kt [..., D, Sk] (k transposed, by any transpose)
    scores = scores * c  |  scores / c      optional: c a constant with one element
    scores = where(allowed, scores, fill)   optional: a boolean condition (or where(hidden, fill, scores)), fill
                                            a constant of one element at most -1e4 (-inf, finfo.min)
    scores = scores + mask                  optional: a float mask that broadcasts to the scores' shape
    weights = softmax(scores, axis=-1)      over the keys
    out = matmul(weights, v)                v [..., Sk, Dv]

becomes `attention(q, transpose(kt), v, causal, attn_mask=mask, scale=c or 1 / c or 1)` (causal and the mask from
the `where`, below). Two variants are what
`torch.onnx.export` (its Dynamo exporter) writes for `scaled_dot_product_attention`: q and kt each multiplied by a
constant (sqrt(scale) each: the factors multiply into the scale), and the weights guarded as
`where(weights != weights, 0, weights)` (zeros for a row whose every key is masked, where softmax gives NaN; the
attention operator gives those zeros itself; for NaN inputs it gives NaN where the guard would give 0).

The `where` is GPT-2's causal mask (a constant lower-triangular boolean buffer, sliced to
`[:, :, Sk - Sq : Sk, :Sk]`, and the fill torch.finfo(dtype).min) and any other exporter's boolean mask: where
the condition is a constant whose values are the lower triangle `j <= i` of the scores' last two axes (GPT-2's
slice when Sq = Sk), the operator is causal; otherwise the condition joins the mask (keys hidden by it get -inf).
A fill is taken as -inf, which is the same function wherever a row's largest visible score exceeds the fill by
more than 104 (exp of anything below -104 is 0 in f32): a row whose every visible key the additive mask pushes
down to the fill (HF's padding rows, whose outputs nothing reads) may differ.

It is rewritten only where that is the same function: each intermediate result is used by the next operator alone
(not by another operator nor as a graph output), the mask broadcasts to the scores without widening them, the head
dimension D is known, and the attention operator's output has the shape and dtype the last matmul had. Anything
else is left as it is. One difference remains, by design: a query row whose every score is -inf (a mask that
hides every key) gives zeros, as torch's `scaled_dot_product_attention` does, where the spelled-out softmax
divides 0 by 0 and gives NaN.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

import numpy as np

from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.graph.rewrite import replay
from stdlib_ops.operators import attention, cast, transpose, where
from stdlib_ops.operators.base import Operator
from stdlib_ops.tensor import Tensor

SCALES = ("mul", "div")
HIDDEN_FILL = -1.0e4  # a `where`'s fill at most this hides the key (taken as -inf; see the module docstring)


@dataclass(frozen=True)
class AttentionMatch:
    """The leaves of a matched pattern (tensors of the original graph) and its scale."""

    q: Tensor
    kt: Tensor
    v: Tensor
    mask: Tensor | None
    scale: float
    condition: Tensor | None = None  # a boolean condition of a `where` the scores went through (None: none)
    keep_when_true: bool = True  # whether the condition selects the scores (else the fill)
    causal: bool = False  # whether the condition is the causal lower triangle (then it is not read)


def fuse_attention(graph: FlowGraph) -> FlowGraph:
    """`graph` with every matmul -> scale -> mask -> softmax -> matmul chain that computes scaled dot-product
    attention replaced by one `attention` operator (see the module docstring); the same graph when none does."""
    uses = _uses(graph)
    matches = {id(op): m for op in graph.nodes if (m := match_attention(op, uses)) is not None}
    if not matches:
        return graph
    current: dict[int, Tensor] = {}  # each original tensor's counterpart in the rewritten graph

    def rule(op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
        current.update((id(old), new) for old, new in zip(op.inputs, inputs))
        m = matches.get(id(op))
        if m is None:
            return None
        q, kt, v = (current.get(id(t), t) for t in (m.q, m.kt, m.v))
        mask = None if m.mask is None else current.get(id(m.mask), m.mask)
        swap = (*range(kt.ndim - 2), kt.ndim - 1, kt.ndim - 2)
        try:
            if m.condition is not None and not m.causal:
                mask = _condition_as_mask(current.get(id(m.condition), m.condition), m.keep_when_true, mask)
            out = attention(q, transpose(kt, swap), v, m.causal, attn_mask=mask, scale=m.scale)
        except (ValueError, TypeError):
            return None
        original = op.outputs[0]
        if tuple(out.shape) != tuple(original.shape) or out.dtype != original.dtype:
            return None
        return [out]

    return replay(graph, rule=rule, fold=False)


def match_attention(op: Operator, uses: Counter) -> AttentionMatch | None:
    """The attention pattern ending at `op` (a matmul), or None where `op` does not end one; `uses` counts the
    readers of each tensor (by `id`, graph outputs included)."""
    if op.name != "matmul" or len(op.inputs) != 2:
        return None
    weights, v = op.inputs
    inner = _unguarded(weights, uses)
    softmax = inner.producer if inner is not weights else _single_producer(weights, uses, "softmax")
    if softmax is None or softmax.name != "softmax" or weights.ndim < 2 or v.ndim < 2:
        return None
    scores = softmax.inputs[0]
    if softmax.task.attrs.get("axis") not in (-1, scores.ndim - 1):
        return None
    mask = None
    add = _single_producer(scores, uses, "add")
    if add is not None:
        found = _split_mask(add, uses)
        if found is None:
            return None
        scores, mask = found
    condition, keep, causal = None, True, False
    guard = _single_producer(scores, uses, "where")
    if guard is not None:
        found_guard = _split_where(guard, uses)
        if found_guard is None:
            return None
        scores, condition, keep = found_guard
        causal = keep and _is_lower_triangle(condition, scores)
    scale = 1.0
    scaling = _single_producer(scores, uses, *SCALES)
    if scaling is not None:
        found_scale = _split_scale(scaling, uses)
        if found_scale is None:
            return None
        scores, scale = found_scale
    product = _single_producer(scores, uses, "matmul")
    if product is None or len(product.inputs) != 2:
        return None
    q, kt = product.inputs
    q, q_scale = _unscaled(q, uses)
    kt, k_scale = _unscaled(kt, uses)
    if q.ndim < 2 or kt.ndim < 2 or not isinstance(q.shape[-1], int) or kt.shape[-1] != v.shape[-2]:
        return None
    return AttentionMatch(q, kt, v, mask, scale * q_scale * k_scale, condition, keep, causal)


def _unguarded(weights: Tensor, uses: Counter) -> Tensor:
    """The softmax's output behind `where(weights != weights, 0, weights)`, read by that guard alone (how torch's
    exporter writes SDPA's zeros for a row whose every key is masked: softmax gives NaN there), else `weights`
    itself."""
    where = _single_producer(weights, uses, "where")
    if where is None or len(where.inputs) != 3:
        return weights
    condition, zero, inner = where.inputs
    test = _single_producer(condition, uses, "not_equal")
    if test is None or any(t is not inner for t in test.inputs) or _constant_scalar(zero) != 0.0:
        return weights
    producer = inner.producer
    if producer is None or producer.name != "softmax" or uses[id(inner)] != 3:  # the test reads it twice
        return weights
    return inner if tuple(inner.shape) == tuple(weights.shape) and inner.dtype == weights.dtype else weights


def _unscaled(operand: Tensor, uses: Counter) -> tuple[Tensor, float]:
    """(x, c) where `operand` is `x * c` (or `c * x`) of a constant c of one element, read by the scores' matmul
    alone (torch's exporter scales q and k^T by sqrt(scale) each); else (`operand`, 1)."""
    scaling = _single_producer(operand, uses, "mul")
    if scaling is None:
        return operand, 1.0
    for x, constant in (scaling.inputs, scaling.inputs[::-1]):
        value = _constant_scalar(constant)
        if value is not None and np.isfinite(value) and tuple(x.shape) == tuple(operand.shape) \
                and x.dtype == operand.dtype:
            return x, value
    return operand, 1.0


def _split_mask(add: Operator, uses: Counter) -> tuple[Tensor, Tensor] | None:
    """(scores, mask) of `scores + mask` (either order): the operand a single-use matmul or scaling made, and a
    floating-point mask that does not widen it."""
    out = add.outputs[0]
    for scores, mask in (add.inputs, add.inputs[::-1]):
        producer = _single_producer(scores, uses, "matmul", "where", *SCALES)
        if producer is None or tuple(scores.shape) != tuple(out.shape) or mask.ndim > out.ndim:
            continue
        if not str(mask.dtype).startswith(("float", "bfloat")):
            continue
        return scores, mask
    return None


def _split_where(guard: Operator, uses: Counter) -> tuple[Tensor, Tensor, bool] | None:
    """(scores, condition, keep_when_true) of `where(condition, scores, fill)` (keep_when_true) or `where(condition,
    fill, scores)`: a boolean condition that does not widen the scores, a constant fill of one element at most
    `HIDDEN_FILL`, the scores made by a single-use matmul or scaling."""
    if len(guard.inputs) != 3:
        return None
    condition, chosen, other = guard.inputs
    out = guard.outputs[0]
    if str(condition.dtype) != "bool" or condition.ndim > out.ndim:
        return None
    for scores, fill, keep in ((chosen, other, True), (other, chosen, False)):
        value = _constant_scalar(fill)
        if value is None or value > HIDDEN_FILL or tuple(scores.shape) != tuple(out.shape):
            continue
        if _single_producer(scores, uses, "matmul", *SCALES) is not None:
            return scores, condition, keep
    return None


def _is_lower_triangle(condition: Tensor, scores: Tensor) -> bool:
    """Whether `condition` is a constant that, broadcast to `scores`' shape, is True exactly where key j <= query
    i (the attention operator's causal mask) in every [Sq, Sk] plane."""
    sq, sk = scores.shape[-2:]
    if condition.is_symbolic or not isinstance(sq, int) or not isinstance(sk, int):
        return False
    values = np.asarray(condition.numpy(), dtype=bool)
    values = values.reshape((1,) * max(0, 2 - values.ndim) + values.shape)
    lower = np.arange(sk)[None, :] <= np.arange(sq)[:, None]
    return bool((np.broadcast_to(values, (*values.shape[:-2], sq, sk)) == lower).all())


def _condition_as_mask(condition: Tensor, keep_when_true: bool, mask: Tensor | None) -> Tensor:
    """The additive mask that hides the keys `condition` hides (-inf there), added to `mask` where there is one;
    the boolean condition itself where it keeps the scores and there is no other mask (the operator turns it into
    an additive one)."""
    if mask is None and keep_when_true:
        return condition
    base = mask if mask is not None else 0.0
    chosen = where(condition, base, -math.inf) if keep_when_true else where(condition, -math.inf, base)
    return chosen if mask is not None else cast(chosen, "float32")


def _split_scale(scaling: Operator, uses: Counter) -> tuple[Tensor, float] | None:
    """(scores, factor) of `scores * c`, `c * scores` or `scores / c`, c a constant of one element; the scores
    made by a single-use matmul."""
    pairs = [scaling.inputs] if scaling.name == "div" else [scaling.inputs, scaling.inputs[::-1]]
    for scores, constant in pairs:
        value = _constant_scalar(constant)
        if value is None or _single_producer(scores, uses, "matmul") is None:
            continue
        if tuple(scores.shape) != tuple(scaling.outputs[0].shape):
            continue
        if scaling.name == "div":
            return (scores, 1.0 / value) if value != 0.0 and np.isfinite(value) else None
        return (scores, value) if np.isfinite(value) else None
    return None


def _constant_scalar(t: Tensor) -> float | None:
    """The value of a constant tensor of one element, None for anything else."""
    if t.is_symbolic or any(not isinstance(d, int) or d != 1 for d in t.shape):
        return None
    return float(np.asarray(t.numpy(), dtype=np.float64).reshape(()))


def _single_producer(t: Tensor, uses: Counter, *names: str) -> Operator | None:
    """The operator that made `t`, when it is one of `names`, has one output, and `t` has no other reader."""
    op = t.producer
    if op is None or op.name not in names or len(op.outputs) != 1 or uses[id(t)] != 1:
        return None
    return op


def _uses(graph: FlowGraph) -> Counter:
    """How many times each tensor (by `id`) is read: by an operator's inputs or as a graph output."""
    counts: Counter = Counter(id(t) for op in graph.nodes for t in op.inputs)
    counts.update(id(t) for t in graph.outputs)
    return counts
