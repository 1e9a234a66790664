"""`FlowGraph`: the operators between a graph's symbolic inputs and its outputs, in topological order.

A graph holds its `inputs` (symbolic tensors), its `outputs`, its `nodes` (the `Operator`s, each after the
producers of its inputs) and, once `optimize` has partitioned it, its fusion `groups`. The tensors the operators
read that hold data are the graph's `constants`. `str(graph)` prints one line per operator (grouped by fused
kernel when there are groups); `to_dot()` gives the same as Graphviz DOT text.

The graph's passes (`rewrite`, `partition`, ...) read a graph and make their result through its methods
(`retraced`, `with_groups`), so they need this class only for their annotations; this module builds on them for the
graph's conveniences (`bind`, `build`, `build(tune=True)`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from stdlib_ops.graph.build import build_graph
from stdlib_ops.graph.rewrite import replay
from stdlib_ops.operators.base import Operator, shape_str
from stdlib_ops.tensor import Tensor, asarray
from stdlib_ops.tuning import tune as tune_graph

if TYPE_CHECKING:
    from hidet_lang.target import Target
    from stdlib_ops.graph.compiled import CompiledGraph
    from stdlib_ops.graph.partition import FusionGroup


class FlowGraph:
    """Operators from `inputs` to `outputs` in topological order, optionally partitioned into fusion `groups`."""

    def __init__(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor], nodes: Sequence[Operator],
                 groups: Sequence[FusionGroup] | None = None, input_names: Sequence[str] | None = None) -> None:
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.nodes = list(nodes)
        self.groups = list(groups) if groups is not None else None
        self.input_names = list(input_names) if input_names is not None else [f"x{k}" for k in range(len(inputs))]
        if len(self.input_names) != len(self.inputs) or len(set(self.input_names)) != len(self.inputs):
            raise ValueError(f"FlowGraph: {len(self.inputs)} inputs need as many different names, got "
                             f"{self.input_names}")

    def retraced(self, inputs: Sequence[Tensor], outputs: Sequence[Tensor]) -> FlowGraph:
        """The graph from `inputs` (inputs of this graph, keeping their names) to `outputs`, its operators traced
        again from the outputs (the rewrites' result: operators no output depends on drop out)."""
        return FlowGraph(inputs, outputs, topological_order(outputs, inputs),
                         input_names=[self.input_name(t) for t in inputs])

    def with_groups(self, groups: Sequence[FusionGroup] | None) -> FlowGraph:
        """The same graph partitioned into the fusion `groups` (None: not partitioned)."""
        return FlowGraph(self.inputs, self.outputs, self.nodes, groups, self.input_names)

    def input_name(self, t: Tensor) -> str:
        """The name of input `t` (as given to `trace_from`, the model's for an imported graph; `x<k>` otherwise)."""
        return next(name for i, name in zip(self.inputs, self.input_names) if i is t)

    @property
    def constants(self) -> list[Tensor]:
        """The tensors with data that the operators read or the graph returns, in order of first use."""
        seen: dict[int, Tensor] = {}
        for t in [*(t for op in self.nodes for t in op.inputs), *self.outputs]:
            if not t.is_symbolic:
                seen.setdefault(id(t), t)
        return list(seen.values())

    def users(self) -> dict[int, list[Operator]]:
        """For each tensor (by `id`), the operators that read it (once per operator)."""
        found: dict[int, list[Operator]] = {}
        for op in self.nodes:
            for t in {id(t): t for t in op.inputs}.values():
                found.setdefault(id(t), []).append(op)
        return found

    def bind(self, values: Mapping[Tensor, Any]) -> FlowGraph:
        """The graph with some inputs replaced by constants (`values`: input tensor -> array-like of its shape);
        `optimize` then folds every operator that reads only constants."""
        constants: dict[int, Tensor] = {}
        for t, value in values.items():
            if not any(t is i for i in self.inputs):
                raise ValueError(f"bind: {_describe(t)} is not an input of the graph")
            constant = asarray(value, dtype=t.dtype, device=t.device)
            if constant.shape != t.shape:
                raise ValueError(f"bind: the value for input {self.name_of(t)} has shape {shape_str(constant.shape)}, "
                                 f"the input {shape_str(t.shape)}")
            constants[id(t)] = constant
        return replay(self, constants, keep_inputs=[t for t in self.inputs if id(t) not in constants], fold=False)

    def build(self, target: Target | str = "cpu", *, tune: bool = False) -> CompiledGraph:
        """The graph compiled for `target` ('cpu', 'cuda' or 'cuda:<arch>', or a `Target`); see
        `stdlib_ops.graph.build`. With `tune`, its tunable tasks without a record for this machine are tuned first
        (`stdlib_ops.tune` with its defaults; call it directly for an executor or the sizes of symbolic dimensions)."""
        if tune:
            tune_graph(self, target)
        return build_graph(self, target)

    def names(self) -> dict[int, str]:
        """The printed name of every tensor of the graph, by `id`: %<name> inputs (%x<i> unless named), const<i>
        constants, %<i> results."""
        names = {id(t): f"%{name}" for t, name in zip(self.inputs, self.input_names)}
        for i, t in enumerate(self.constants):
            names.setdefault(id(t), f"const{i}")
        count = 0
        for op in self.nodes:
            for t in op.outputs:
                names[id(t)] = f"%{count}"
                count += 1
        return names

    def name_of(self, t: Tensor) -> str:
        """The printed name of tensor `t`."""
        return self.names().get(id(t), "?")

    def node_text(self, op: Operator, names: Mapping[int, str]) -> str:
        """One operator as a line: `%3 = matmul(%x0, const0)  [float32 (64, 256)]`."""
        outs = ", ".join(names[id(t)] for t in op.outputs)
        args = [names.get(id(t), "?") for t in op.inputs]
        args += [f"{k}={_attr_text(v)}" for k, v in sorted(op.task.attrs.items())]
        types = ", ".join(f"{t.dtype} {shape_str(t.shape)}" for t in op.outputs)
        return f"{outs} = {op.name}({', '.join(args)})  [{types}]"

    def __str__(self) -> str:
        names = self.names()
        lines = ["FlowGraph(" + ", ".join(f"{names[id(t)]}: {t.dtype} {shape_str(t.shape)}" for t in self.inputs)
                 + ")"]
        lines += [f"  {names[id(t)]}: constant {t.dtype} {shape_str(t.shape)}" for t in self.constants]
        if self.groups is None:
            lines += [f"  {self.node_text(op, names)}" for op in self.nodes]
        else:
            for k, group in enumerate(self.groups):
                lines.append(f"  kernel {k}: {group.title}")
                lines += [f"    {self.node_text(op, names)}" for op in group.members]
                lines += [f"    note: {note}" for note in group.notes]
        lines.append("  return " + ", ".join(names.get(id(t), "?") for t in self.outputs))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<FlowGraph: {len(self.inputs)} inputs, {len(self.nodes)} operators, {len(self.outputs)} outputs>"

    def to_dot(self) -> str:
        """The graph as Graphviz DOT text: inputs, constants and operators as nodes, fused groups as clusters."""
        names = self.names()
        node_id = {id(op): f"op{k}" for k, op in enumerate(self.nodes)}
        lines = ["digraph FlowGraph {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
        for t in self.inputs:
            lines.append(f'  "{names[id(t)]}" [shape=ellipse, label="{names[id(t)]}\\n{t.dtype} '
                         f'{shape_str(t.shape)}"];')
        for t in self.constants:
            lines.append(f'  "{names[id(t)]}" [shape=note, label="{names[id(t)]}\\n{t.dtype} '
                         f'{shape_str(t.shape)}"];')
        clusters = self.groups if self.groups is not None else [None]
        for k, group in enumerate(clusters):
            members = group.members if group is not None else self.nodes
            indent = "    " if group is not None else "  "
            if group is not None:
                lines += [f"  subgraph cluster_{k} {{", f'    label="kernel {k}: {_dot_escape(group.title)}";',
                          "    style=rounded;"]
            for op in members:
                label = _dot_escape(self.node_text(op, names))
                lines.append(f'{indent}{node_id[id(op)]} [label="{label}"];')
            if group is not None:
                lines.append("  }")
        producers = {id(t): node_id[id(op)] for op in self.nodes for t in op.outputs}
        for op in self.nodes:
            for t in _distinct(op.inputs):
                source = producers.get(id(t), f'"{names.get(id(t), "?")}"')
                lines.append(f"  {source} -> {node_id[id(op)]};")
        for t in self.outputs:
            lines.append(f'  "return {names.get(id(t), "?")}" [shape=plaintext];')
            lines.append(f'  {producers.get(id(t), chr(34) + names.get(id(t), "?") + chr(34))} -> '
                         f'"return {names.get(id(t), "?")}";')
        lines.append("}")
        return "\n".join(lines)


def topological_order(outputs: Sequence[Tensor], inputs: Sequence[Tensor]) -> list[Operator]:
    """The operators that `outputs` depend on, each after the producers of its inputs (depth-first from the
    outputs); ValueError for a symbolic tensor that is neither an input nor an operator's result."""
    known_inputs = {id(t) for t in inputs}
    order: list[Operator] = []
    visited: set[int] = set()
    for root in outputs:
        stack: list[tuple[Tensor, bool]] = [(root, False)]
        while stack:
            t, expanded = stack.pop()
            op = t.producer
            if op is None:
                if t.is_symbolic and id(t) not in known_inputs:
                    raise ValueError(f"trace_from: the outputs depend on the symbolic tensor {_text(t)}, which is not "
                                     f"among the inputs")
                continue
            if expanded:
                if id(op) not in visited:
                    visited.add(id(op))
                    order.append(op)
                continue
            if id(op) in visited:
                continue
            stack.append((t, True))
            stack.extend((i, False) for i in reversed(op.inputs))
    return order


def _distinct(tensors: Iterable[Tensor]) -> list[Tensor]:
    return list({id(t): t for t in tensors}.values())


def _attr_text(value: Any) -> str:
    return str(value) if not isinstance(value, str) else repr(value)


def _dot_escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _describe(t: Any) -> str:
    return f"tensor {shape_str(t.shape)}" if isinstance(t, Tensor) else repr(t)


def _text(t: Tensor) -> str:
    return f"{t.dtype} {shape_str(t.shape)}"
