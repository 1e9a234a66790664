"""Operators that no template takes on a target, computed there as a composition of operators that have templates.

The rule-based scheduler makes a kernel of any task, but for a task built of several dependent reductions that
kernel can be far slower than the templates' kernels of its parts: `attention` on the CPU (no CPU template)
recomputes its scores inside each of its reductions, ~100x slower than matmul, softmax and matmul. Such an
operator has a decomposition here; `build` replaces it by its decomposition on a target where no template takes it
(and keeps it where one does: attention on CUDA), then partitions the graph again. A decomposition computes the same
formula in the same precision (it is offered only where it can: f32 and f64 attention; half-precision attention
accumulates in f32, which its parts would not).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from hidet_lang.target import Target
from stdlib_ops.graph.partition import partition
from stdlib_ops.graph.rewrite import cancel_views, replay
from stdlib_ops.operators import matmul, softmax, transpose, where
from stdlib_ops.operators.base import Operator
from stdlib_ops.templates.registry import template_choice
from stdlib_ops.tensor import Tensor, asarray

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph

Decomposition = Callable[[Operator, list[Tensor]], "list[Tensor] | None"]


def decompose_attention(op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
    """softmax(q @ k^T * scale (+ the additive mask) (+ the causal mask)) @ v as matmul, softmax and matmul (None
    where the dtype is a half one, key/value heads are grouped, or a causal mask's size is symbolic)."""
    q, k, v, *mask = inputs
    if any(t.dtype not in ("float32", "float64") for t in inputs) or op.task.attrs.get("enable_gqa"):
        return None
    axes = (*range(k.ndim - 2), k.ndim - 1, k.ndim - 2)
    scale = op.task.attrs.get("scale", 1.0 / float(np.sqrt(q.shape[-1])))
    scores = matmul(q, transpose(k, axes)) * scale
    if mask:
        scores = scores + mask[0]
    if op.task.attrs.get("causal"):
        rows, cols = q.shape[-2], k.shape[-2]
        if not (isinstance(rows, int) and isinstance(cols, int)):
            return None
        allowed = np.arange(cols)[None, :] <= np.arange(rows)[:, None]
        scores = where(asarray(allowed, device=q.device), scores, -np.inf)
    return [matmul(softmax(scores, axis=-1), v)]


DECOMPOSITIONS: dict[str, Decomposition] = {"attention": decompose_attention}


def decompose_for(graph: FlowGraph, target: Target) -> FlowGraph:
    """`graph` with each operator that has a decomposition and no template on `target` replaced by its
    decomposition, partitioned again if it was partitioned (the same graph when nothing is replaced)."""
    replaced = {id(op) for op in graph.nodes
                if op.name in DECOMPOSITIONS and not template_choice(op.task, target).by_template}
    if not replaced:
        return graph

    def rule(op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
        return DECOMPOSITIONS[op.name](op, inputs) if id(op) in replaced else None

    rewritten = replay(graph, rule=rule, fold=False)
    return partition(cancel_views(rewritten)) if graph.groups is not None else rewritten
