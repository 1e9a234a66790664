"""Graphs of operators: `trace_from` records one from symbolic tensors, `optimize` folds constants, cancels views
and partitions it into fused kernels, `FlowGraph.build` compiles it into a `CompiledGraph`, `load` reads a saved
one back."""

from __future__ import annotations

from stdlib_ops.graph.compiled import CompiledGraph, load
from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.graph.optimize import optimize
from stdlib_ops.graph.partition import FusionGroup
from stdlib_ops.graph.trace import trace_from

__all__ = ["CompiledGraph", "FlowGraph", "FusionGroup", "load", "optimize", "trace_from"]
