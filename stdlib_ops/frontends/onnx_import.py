"""`from_onnx`: an ONNX model (opset 13 up to the newest the installed `onnx` knows) as a `FlowGraph`.

The graph's inputs (those that are not initializers) become symbolic tensors named as in the model, with string
dimensions for the model's named (`dim_param`, made into identifiers) or unnamed ones; initializers and Constant
nodes are constants. The nodes are converted in order by the table of `onnx_ops`, shape computations evaluated
while importing. A model with operators the table lacks fails at once with one error that lists them all, with
counts and the nodes that use them. Where the model declares (or shape inference finds) an output's type, the
converted value is checked against it, so a conversion that would compute something else stops at the node that
caused it.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from stdlib_ops.frontends.onnx_ops import CONVERTERS, ConversionError, Node, Scope, Value, describe, known_array
from stdlib_ops.frontends.unsupported import UnsupportedOperationsError, collect_unsupported
from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.graph.trace import trace_from
from stdlib_ops.tensor import Tensor, symbol

MIN_OPSET = 13
DEFAULT_DOMAINS = ("", "ai.onnx")


def from_onnx(model: onnx.ModelProto | str | os.PathLike, *,
              input_shapes: Mapping[str, Sequence[int | str]] | None = None) -> FlowGraph:
    """The `FlowGraph` computing the ONNX `model` (a `ModelProto`, or the path of a .onnx file, whose external
    data is loaded with it). `input_shapes` overrides the shapes of inputs by name (ints, or strings for symbolic
    dimensions), e.g. to fix a dimension the model leaves free. Raises `UnsupportedOperationsError` listing every
    operator without a conversion, `ValueError` for an opset outside 13..newest, and `ConversionError` (a
    `ValueError`) naming the node that cannot be converted."""
    proto, source = _load(model)
    opset = _check_opset(proto, source)
    _check_supported(proto, source, opset)
    if _lacks_value_info(proto.graph):
        proto = onnx.shape_inference.infer_shapes(proto)
    return _Importer(proto.graph).run(dict(input_shapes or {}))


def _load(model: Any) -> tuple[onnx.ModelProto, str]:
    """The model and how messages name it."""
    if isinstance(model, onnx.ModelProto):
        return model, f"ONNX model {model.graph.name or '<unnamed>'!r}"
    if isinstance(model, (str, os.PathLike)):
        return onnx.load(os.fspath(model), load_external_data=True), f"ONNX model {os.fspath(model)!r}"
    raise TypeError(f"from_onnx: expected an onnx.ModelProto or a path, got {type(model).__name__}")


def _check_opset(proto: onnx.ModelProto, source: str) -> int:
    """The model's opset of the default domain, checked to be one the importer handles."""
    versions = [o.version for o in proto.opset_import if o.domain in DEFAULT_DOMAINS]
    if not versions:
        raise ValueError(f"{source} imports no opset of the default ONNX domain")
    opset, newest = versions[0], onnx.defs.onnx_opset_version()
    if opset < MIN_OPSET:
        raise ValueError(f"{source} uses opset {opset}; from_onnx needs opset {MIN_OPSET} or later (up to {newest}). "
                         f"Convert it first: onnx.version_converter.convert_version(model, {MIN_OPSET})")
    if opset > newest:
        raise ValueError(f"{source} uses opset {opset}, newer than the installed onnx package knows ({newest}); "
                         f"upgrade onnx")
    return opset


def _check_supported(proto: onnx.ModelProto, source: str, opset: int) -> None:
    """Raise one error listing every node whose operator has no conversion."""
    uses = []
    for k, node in enumerate(proto.graph.node):
        name = node.op_type if node.domain in DEFAULT_DOMAINS else f"{node.domain}::{node.op_type}"
        if node.domain not in DEFAULT_DOMAINS or node.op_type not in CONVERTERS:
            uses.append((name, node.name or f"node {k} (output {node.output[0]!r})"))
    if uses:
        raise UnsupportedOperationsError(source, collect_unsupported(uses),
                                         f"(opset {opset}; stdlib_ops.frontends.onnx_ops.CONVERTERS lists the "
                                         f"supported operators)")


def _lacks_value_info(graph: onnx.GraphProto) -> bool:
    """Whether the graph declares no type for any of its nodes' results (shape inference then supplies them)."""
    outputs = {o.name for o in graph.output}
    return not graph.value_info and any(name not in outputs for node in graph.node for name in node.output)


def _dim_name(text: str) -> str:
    """A model's name for a dimension as a symbolic dimension's name (an identifier: other characters become `_`)."""
    name = re.sub(r"\W", "_", text)
    return name if name.isidentifier() else f"d_{name}"


def _numpy_dtype(elem_type: int) -> str:
    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


def _declared_types(graph: onnx.GraphProto) -> dict[str, onnx.TypeProto]:
    """The declared tensor type of every value that has one."""
    return {v.name: v.type for v in [*graph.value_info, *graph.output] if v.type.HasField("tensor_type")}


class _Importer:
    """The conversion of one graph: the values by name, the constants made of known arrays."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.values: dict[str, Value] = {}
        self.scope = Scope()
        self.types = _declared_types(graph)

    def run(self, input_shapes: dict[str, Sequence[int | str]]) -> FlowGraph:
        """The converted graph."""
        for init in self.graph.initializer:
            self.values[init.name] = numpy_helper.to_array(init)
        graph_inputs = [v for v in self.graph.input if v.name not in self.values]
        inputs = [self.make_input(v, input_shapes.pop(v.name, None)) for v in graph_inputs]
        if input_shapes:
            raise ValueError(f"from_onnx: input_shapes names {sorted(input_shapes)}, which are not inputs of the "
                             f"model (its inputs: {[v.name for v in graph_inputs]})")
        self.values.update((v.name, t) for v, t in zip(graph_inputs, inputs))
        used = {name for node in self.graph.node for name in node.input} | {o.name for o in self.graph.output}
        for node in self.graph.node:
            self.convert(node, used)
        outputs = [self.output(o.name) for o in self.graph.output]
        return trace_from(outputs, inputs, names=[v.name for v in graph_inputs])

    def make_input(self, info: onnx.ValueInfoProto, shape: Sequence[int | str] | None) -> Tensor:
        """A symbolic tensor for graph input `info` (of `shape` when given)."""
        kind = info.type.WhichOneof("value")
        if kind != "tensor_type":
            raise ValueError(f"from_onnx: input {info.name!r} is a {kind}, only tensors are supported")
        tensor_type = info.type.tensor_type
        if shape is None:
            if not tensor_type.HasField("shape"):
                raise ValueError(f"from_onnx: input {info.name!r} has no shape; give one with input_shapes")
            shape = [d.dim_value if d.HasField("dim_value") else
                     _dim_name(d.dim_param if d.HasField("dim_param") else f"{info.name}_{k}")
                     for k, d in enumerate(tensor_type.shape.dim)]
        return symbol(shape, _numpy_dtype(tensor_type.elem_type))

    def convert(self, proto: onnx.NodeProto, used: set[str]) -> None:
        """Convert one node and record its outputs."""
        inputs = [self.lookup(name, proto) if name else None for name in proto.input]
        node = Node(proto, inputs, self.scope)
        try:
            results = CONVERTERS[proto.op_type](node)
        except ConversionError:
            raise
        except (ValueError, TypeError, IndexError, NotImplementedError) as e:
            raise node.fail(str(e)) from e
        for k, name in enumerate(proto.output):
            if k >= len(results):
                if name in used:
                    raise node.fail(f"output {k} ({name!r}) is not supported; only the first {len(results)} are")
                continue
            if name:
                value = results[k] if isinstance(results[k], Tensor) else known_array(results[k])
                self.check_type(node, name, value)
                self.values[name] = value

    def lookup(self, name: str, proto: onnx.NodeProto) -> Value:
        """The value called `name`, an input of node `proto`."""
        if name not in self.values:
            raise ConversionError(f"ONNX node {describe(proto)} ({proto.op_type}): its input {name!r} is not computed "
                                  f"by an earlier node, an initializer or a graph input (the nodes must be in "
                                  f"topological order)")
        return self.values[name]

    def check_type(self, node: Node, name: str, value: Value) -> None:
        """Raise when the converted `value` disagrees with the dtype or static dimensions declared for `name`."""
        declared = self.types.get(name)
        if declared is None or not declared.tensor_type.elem_type:
            return
        tensor_type = declared.tensor_type
        dtype = value.dtype if isinstance(value, Tensor) else ("int64" if value.dtype == object else value.dtype.name)
        want_dtype = _numpy_dtype(tensor_type.elem_type)
        shape = tuple(value.shape)
        problem = f"dtype {dtype}, the model declares {want_dtype}" if dtype != want_dtype else None
        if problem is None and tensor_type.HasField("shape"):
            want = [d.dim_value if d.HasField("dim_value") else None for d in tensor_type.shape.dim]
            if len(want) != len(shape) or any(w is not None and w != d for w, d in zip(want, shape)):
                problem = f"shape {list(shape)}, the model declares {[w if w is not None else '?' for w in want]}"
        if problem is not None:
            raise node.fail(f"the converted output {name!r} has {problem}")

    def output(self, name: str) -> Tensor:
        """Graph output `name` as a tensor."""
        value = self.values.get(name)
        if value is None:
            raise ValueError(f"from_onnx: the graph output {name!r} is not computed by any node")
        if isinstance(value, Tensor):
            return value
        if value.dtype == object:
            raise ValueError(f"from_onnx: the graph output {name!r} holds the symbolic dimensions {value.tolist()}, "
                             f"which a graph cannot return as data")
        return self.scope.constant(value)
