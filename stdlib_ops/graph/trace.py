"""`trace_from`: the graph of operators recorded between symbolic inputs and the outputs computed from them."""

from __future__ import annotations

from collections.abc import Sequence

from stdlib_ops.graph.flow_graph import FlowGraph, topological_order
from stdlib_ops.operators.base import shape_str
from stdlib_ops.tensor import Tensor


def trace_from(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
               names: Sequence[str] | None = None) -> FlowGraph:
    """The `FlowGraph` that computes `outputs` from `inputs` (symbolic tensors, in the order the compiled graph
    takes them, called `names` in its printout and errors; `x0`, `x1`, ... by default). Every symbolic tensor the
    outputs depend on must be an input or an operator's result."""
    outs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    ins = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    for k, t in enumerate([*outs, *ins]):
        if not isinstance(t, Tensor):
            what = "output" if k < len(outs) else "input"
            raise TypeError(f"trace_from: every {what} must be a Tensor, got {type(t).__name__}")
    for t in ins:
        if not t.is_symbolic or t.producer is not None:
            raise ValueError(f"trace_from: the input {_text(t)} is not a graph input; make inputs with ops.symbol")
    if len({id(t) for t in ins}) != len(ins):
        raise ValueError("trace_from: an input is listed twice")
    return FlowGraph(ins, outs, topological_order(outs, ins), input_names=names)


def _text(t: Tensor) -> str:
    return f"{t.dtype} {shape_str(t.shape)}"
