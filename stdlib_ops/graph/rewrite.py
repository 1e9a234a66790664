"""Graph rewrites before fusion: `replay` (rebuild a graph operator by operator through a rule), constant
folding, and the cancelling of transposes and reshapes.

A rewrite never changes the original graph: operators whose inputs are unchanged are shared, the others are
recorded anew on the rewritten inputs, and the result is traced again from its outputs (dead operators drop out).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from stdlib_ops.operators import reshape, transpose
from stdlib_ops.operators.base import Operator, record
from stdlib_ops.runtime import EAGER
from stdlib_ops.tensor import Tensor

if TYPE_CHECKING:
    from stdlib_ops.graph.flow_graph import FlowGraph

Rule = Callable[[Operator, list[Tensor]], "list[Tensor] | None"]
VIEWS = ("reshape", "view")


def replay(graph: FlowGraph, values: Mapping[int, Tensor] | None = None, rule: Rule | None = None,
           keep_inputs: Sequence[Tensor] | None = None, fold: bool = True) -> FlowGraph:
    """`graph` rebuilt in topological order: tensors in `values` (by `id`) are replaced, and `rule(op, inputs)`
    may give an operator's replacement outputs (None: keep the operator, on the new inputs, computed at once when
    they all hold data and `fold` is set). `keep_inputs` are the new graph's inputs (default: the same)."""
    mapping: dict[int, Tensor] = dict(values or {})
    for op in graph.nodes:
        inputs = [mapping.get(id(t), t) for t in op.inputs]
        outs = rule(op, inputs) if rule is not None else None
        if outs is None:
            unchanged = all(a is b for a, b in zip(inputs, op.inputs))
            foldable = fold and all(not t.is_symbolic for t in inputs)
            outs = op.outputs if unchanged and not foldable else rerecord(op, inputs, fold)
        mapping.update((id(old), new) for old, new in zip(op.outputs, outs))
    inputs = list(keep_inputs) if keep_inputs is not None else graph.inputs
    outputs = [mapping.get(id(t), t) for t in graph.outputs]
    return graph.retraced(inputs, outputs)


def rerecord(op: Operator, inputs: list[Tensor], fold: bool = True) -> list[Tensor]:
    """The outputs of `op`'s task applied to `inputs` (of the same shapes and dtypes): computed at once when they
    all hold data and `fold` is set (constant folding), else recorded as a new operator."""
    if fold and all(not t.is_symbolic for t in inputs):
        outputs = EAGER.run(("folded", op.task.key), inputs, lambda: op.task)
        if outputs is not None:
            return outputs
    return record(op.task, inputs)


def fold_constants(graph: FlowGraph) -> FlowGraph:
    """`graph` with every operator whose inputs are all constants computed once (eagerly) into a constant."""
    return replay(graph)


def cancel_views(graph: FlowGraph) -> FlowGraph:
    """`graph` with transposes and reshapes simplified: a transpose of a transpose becomes one transpose (or
    nothing, when the permutations cancel), a reshape of a reshape one reshape, a reshape to its input's shape
    and an identity transpose nothing."""
    return replay(graph, rule=_cancel)


def _cancel(op: Operator, inputs: list[Tensor]) -> list[Tensor] | None:
    if op.name == "transpose":
        (x,) = inputs
        perm = tuple(op.task.attrs["axes"])
        source = x.producer
        if source is not None and source.name == "transpose" and len(source.outputs) == 1:
            inner = tuple(source.task.attrs["axes"])
            x, perm = source.inputs[0], tuple(inner[p] for p in perm)
        if perm == tuple(range(len(perm))):
            return [x]
        return [transpose(x, perm)] if x is not inputs[0] else None
    if op.name in VIEWS:
        (x,) = inputs
        source = x.producer
        if source is not None and source.name in VIEWS:
            x = source.inputs[0]
        shape = op.outputs[0].shape
        if tuple(x.shape) == tuple(shape):
            return [x]
        if x is not inputs[0] and op.name == "reshape" and all(isinstance(d, int) for d in x.shape):
            return [reshape(x, shape)]
    return None
