"""`optimize`: the graph-level passes, in order: constant folding, folding per-channel scales and shifts into
convolutions, cancelling views, spelled-out attention fused into one operator, cancelling views again (the keys'
transposes), the fusion partition."""

from __future__ import annotations

from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.graph.fold_conv import fold_into_conv
from stdlib_ops.graph.partition import partition
from stdlib_ops.graph.rewrite import cancel_views, fold_constants
from stdlib_ops.graph.rewrite_attention import fuse_attention


def optimize(graph: FlowGraph) -> FlowGraph:
    """A new graph computing what `graph` computes: operators that read only constants computed once, batch norms
    (per-channel scales and shifts) after convolutions folded into their weights, transposes and reshapes that
    cancel removed, matmul -> scale -> mask -> softmax -> matmul chains made one attention operator
    (`rewrite_attention`), and the operators partitioned into fused kernels (`graph.groups`)."""
    return partition(cancel_views(fuse_attention(cancel_views(fold_into_conv(fold_constants(graph))))))
