"""`from_fx`: a torch FX graph (as Dynamo hands it to a `torch.compile` backend, or from `torch.fx.symbolic_trace`)
converted to a stdlib_ops `FlowGraph`, with what it takes to call it the way the FX graph is called.

The placeholders the user passes become symbolic inputs named after the placeholders; their dimensions that
Dynamo made dynamic (SymInts in `node.meta['example_value']`) become string dimensions named after the symbols
('s0'). The module's parameters and buffers become constants (copies of their data): the placeholders Dynamo lifts
them into are told apart by where Dynamo got them (`node.meta['grapharg'].source`: a module's `_parameters` or
`_buffers`, or another tensor attribute of a module), or by being an `nn.Parameter`; `get_attr` nodes are
constants too. Sizes (`x.size(0)`, SymInt arithmetic) evaluate to Python values at conversion: ints, or the
symbols' names. Nodes whose inputs are all constants are evaluated by torch itself, once, here.

Every operation the graph uses is looked up in the table (`torch_ops`) before anything converts, and the ones it
lacks are reported together in one `UnsupportedOperationsError`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx
from torch.utils import _pytree as pytree

import stdlib_ops as ops
from stdlib_ops.dims import make_dim
from stdlib_ops.frontends import torch_ops
from stdlib_ops.frontends.unsupported import UnsupportedOperationsError, collect_unsupported
from stdlib_ops.graph.flow_graph import FlowGraph
from stdlib_ops.tensor import Tensor

SOURCE = "torch.compile(backend='hidet_lang')"
FALLBACK_HINT = ("To run such a graph eagerly instead, set torch._dynamo.config.suppress_errors = True: Dynamo then "
                 "logs this error as a warning and runs the frame with plain PyTorch.")


@dataclass(frozen=True)
class SizeExpression:
    """A size that is an expression of symbolic sizes other than a product (`s0 + 1`, `s0 // 2`): a value the
    graph cannot hold as one dimension."""

    text: str


@dataclass
class FxConversion:
    """An FX graph converted: `graph` (None when no output needs computing) takes the placeholders at
    `input_positions`; output leaf k (of the FX graph's output structure `out_spec`) is `outputs[k]`:
    ('graph', i) the compiled graph's output i, ('arg', p) the call's argument p returned as it is, ('size', name)
    the value a symbolic size takes in the call, or ('value', v) a value known now (a constant, None, ...).
    `size_sources` says which argument and axis each symbolic size is read from."""

    graph: FlowGraph | None
    input_positions: tuple[int, ...]
    outputs: list[tuple[str, Any]]
    out_spec: Any
    size_sources: dict[str, tuple[int, int]] = field(default_factory=dict)


def from_fx(gm: fx.GraphModule, example_inputs: Sequence[Any], device: str = "cpu") -> FxConversion:
    """`gm` (called with `example_inputs`, one per placeholder) as a stdlib_ops graph on `device` ('cpu' or
    'cuda'); UnsupportedOperationsError listing every operation the table lacks, with counts and node names."""
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    if len(placeholders) != len(example_inputs):
        raise ValueError(f"{SOURCE}: the FX graph has {len(placeholders)} placeholders but {len(example_inputs)} "
                         f"example inputs were given")
    check_supported(gm)
    return _Converter(gm, device).run(placeholders, example_inputs)


def check_supported(gm: fx.GraphModule) -> None:
    """Raise one UnsupportedOperationsError for all the nodes of `gm` whose target the table lacks."""
    uses = [(target_name(gm, n), n.name) for n in gm.graph.nodes if _converter(gm, n) is None and
            n.op in ("call_function", "call_method", "call_module") and _python_meta(n) is None]
    if uses:
        raise UnsupportedOperationsError(SOURCE, collect_unsupported(uses), hint=FALLBACK_HINT)


def target_name(gm: fx.GraphModule, node: fx.Node) -> str:
    """A readable name of what `node` calls: `torch.nn.functional.gelu`, `Tensor.view`, `torch.nn.Linear`."""
    if node.op == "call_method":
        return f"Tensor.{node.target}"
    if node.op == "call_module":
        t = type(gm.get_submodule(node.target))
        module = "torch.nn" if t.__module__.startswith("torch.nn.modules") else t.__module__
        return f"{module}.{t.__qualname__}"
    try:
        return fx.node._get_qualified_name(node.target)
    except (RuntimeError, AttributeError):
        return str(node.target)


def _converter(gm: fx.GraphModule, node: fx.Node) -> Callable[..., Any] | None:
    if node.op == "call_function":
        return _lookup(torch_ops.FUNCTIONS, node.target)
    if node.op == "call_method":
        return torch_ops.METHODS.get(node.target)
    if node.op == "call_module":
        return torch_ops.MODULES.get(type(gm.get_submodule(node.target)))
    return None


def _lookup(table: dict[Any, Any], target: Any) -> Any:
    try:
        return table.get(target)
    except TypeError:  # an unhashable target
        return None


def _python_meta(node: fx.Node) -> Any:
    """The value Dynamo recorded for a node that computes a size or another non-tensor (None for tensors and when
    nothing was recorded); sizes as ints, symbol names or `SizeExpression`s."""
    value = node.meta.get("example_value", node.meta.get("val"))
    if value is None or any(isinstance(v, torch.Tensor) for v in pytree.tree_leaves(value)):
        return None
    if not all(isinstance(v, (int, float, bool, torch.SymInt, torch.SymFloat, torch.SymBool))
               for v in pytree.tree_leaves(value)):
        return None
    return pytree.tree_map(size_value, value)


def size_value(value: Any) -> Any:
    """A Python or symbolic scalar as the converter holds it: an int/float/bool, a symbol's name, or a
    `SizeExpression`."""
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value
    expr = value.node.expr
    if expr.is_number:
        return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(value)](expr)
    if expr.is_Symbol and isinstance(value, torch.SymInt):
        return str(expr)
    if isinstance(value, torch.SymInt):  # a product of symbols and a positive int is a dimension ('s0*12')
        coefficient, terms = expr.as_coeff_mul()
        powers = [term.as_base_exp() for term in terms]
        if coefficient.is_Integer and int(coefficient) > 0 and all(b.is_Symbol and e.is_Integer and int(e) > 0
                                                                   for b, e in powers):
            return make_dim([str(b) for b, e in powers for _ in range(int(e))], int(coefficient))
    return SizeExpression(str(expr))


def is_constant_placeholder(node: fx.Node, example: Any) -> bool:
    """True for a placeholder that holds a module's parameter, buffer or other tensor attribute (Dynamo lifts
    them into placeholders); False for the user's inputs."""
    if isinstance(example, torch.nn.Parameter):
        return True
    grapharg = node.meta.get("grapharg")
    source = getattr(grapharg, "source", None)
    if source is None:
        return False
    from torch._dynamo import source as sources

    if sources.is_from_unspecialized_param_buffer_source(source):
        return True
    static = "_dynamo_static_input_type" in node.meta.get("tensor_dict", {})
    return static and sources.is_from_unspecialized_nn_module_source(source)


class _Converter:
    """One conversion: the value of every FX node (stdlib_ops Tensors, torch tensors for constants, Python
    values), and the constants made from torch tensors (one per tensor)."""

    def __init__(self, gm: fx.GraphModule, device: str) -> None:
        self.gm = gm
        self.device = device
        self.env: dict[fx.Node, Any] = {}
        self.constants: dict[int, tuple[torch.Tensor, Tensor]] = {}
        self.inputs: list[Tensor] = []
        self.names: list[str] = []
        self.positions: list[int] = []
        self.size_sources: dict[str, tuple[int, int]] = {}

    def run(self, placeholders: list[fx.Node], example_inputs: Sequence[Any]) -> FxConversion:
        """Convert every node; the conversion of the graph's outputs."""
        for position, (node, example) in enumerate(zip(placeholders, example_inputs)):
            self.env[node] = self.placeholder(node, example, position)
        for node in self.gm.graph.nodes:
            if node.op in ("call_function", "call_method", "call_module", "get_attr"):
                self.env[node] = self.convert(node)
            elif node.op == "output":
                return self.outputs(node)
        raise ValueError(f"{SOURCE}: the FX graph has no output node")

    def placeholder(self, node: fx.Node, example: Any, position: int) -> Any:
        """A user's tensor as a symbolic input (recording where its symbolic sizes come from), a parameter as a
        torch constant, a size as its Python value."""
        meta = node.meta.get("example_value", node.meta.get("val"))
        if not isinstance(example, torch.Tensor):
            return size_value(meta if meta is not None else example)
        if is_constant_placeholder(node, example):
            return example.detach()
        shape = tuple(size_value(d) for d in (meta.shape if isinstance(meta, torch.Tensor) else example.shape))
        for axis, d in enumerate(shape):
            if isinstance(d, SizeExpression):
                raise ValueError(f"{SOURCE}: input {node.name} has the size {d.text} in dimension {axis}; "
                                 f"dimensions must be ints or single symbols")
            if isinstance(d, str):
                self.size_sources.setdefault(d, (position, axis))
        t = ops.symbol(shape, torch_ops.dtype_name(example.dtype), device=self.device)
        self.inputs.append(t)
        self.names.append(node.name)
        self.positions.append(position)
        return t

    def convert(self, node: fx.Node) -> Any:
        """The value of a get_attr or call node."""
        if node.op == "get_attr":
            value = self.attribute(node.target)
            return value.detach() if isinstance(value, torch.Tensor) else value
        known = _python_meta(node)
        if known is not None:
            return known
        args, kwargs = fx.node.map_arg((node.args, node.kwargs), lambda n: self.env[n])
        leaves = _leaves((args, kwargs))
        bad = next((v for v in leaves if isinstance(v, SizeExpression)), None)
        if bad is not None:
            raise ValueError(f"{SOURCE}: node {node.name} ({target_name(self.gm, node)}) takes the size {bad.text}, "
                             f"an expression of symbolic sizes; only single symbols are supported")
        if not any(isinstance(v, (Tensor, str)) and not _is_plain_string(v, self.size_sources) for v in leaves):
            return self.evaluate(node, args, kwargs)
        args, kwargs = pytree.tree_map_only(torch.Tensor, self.constant, (args, kwargs))
        try:
            value = self.call(node, args, kwargs)
        except (ValueError, TypeError, IndexError, NotImplementedError) as e:
            raise type(e)(f"{SOURCE}: cannot convert node {node.name} ({target_name(self.gm, node)}): {e}") from e
        return _match_meta(node, value)

    def call(self, node: fx.Node, args: Any, kwargs: Any) -> Any:
        """The table's converter applied to the node's arguments."""
        fn = _converter(self.gm, node)
        if node.op == "call_module":
            module = self.gm.get_submodule(node.target)
            return fn(module, lambda t: None if t is None else self.constant(t.detach()), *args, **kwargs)
        return fn(*args, **kwargs)

    def evaluate(self, node: fx.Node, args: Any, kwargs: Any) -> Any:
        """A node of constants computed by torch (in-place targets on a copy, so the model is left alone)."""
        target = node.target
        if node.op == "call_module":
            target = self.gm.get_submodule(node.target)
        inplace = (node.op == "call_method" and target.endswith("_") and not target.endswith("__")) or \
            target in torch_ops.INPLACE_FUNCTIONS or kwargs.get("inplace") is True
        if inplace and args and isinstance(args[0], torch.Tensor):
            args = (args[0].clone(), *args[1:])
        with torch.no_grad():
            if node.op == "call_method":
                return getattr(args[0], target)(*args[1:], **kwargs)
            return target(*args, **kwargs)

    def attribute(self, target: str) -> Any:
        """The object at a dotted attribute path of the graph module."""
        value: Any = self.gm
        for part in target.split("."):
            value = getattr(value, part)
        return value

    def constant(self, t: torch.Tensor) -> Tensor:
        """The stdlib_ops constant holding a copy of torch tensor `t` (one per tensor)."""
        entry = self.constants.get(id(t))
        if entry is None:
            entry = (t, ops.asarray(torch_to_numpy(t), device=self.device))
            self.constants[id(t)] = entry
        return entry[1]

    def outputs(self, node: fx.Node) -> FxConversion:
        """The graph from the inputs to the output node's tensors, and where each output leaf comes from."""
        values, spec = pytree.tree_flatten(fx.node.map_arg(node.args[0], lambda n: self.env[n]))
        graph_outputs: list[Tensor] = []
        input_of = {id(t): p for t, p in zip(self.inputs, self.positions)}
        refs = [self.output_ref(value, graph_outputs, input_of) for value in values]
        graph = ops.trace_from(graph_outputs, self.inputs, names=self.names) if graph_outputs else None
        return FxConversion(graph, tuple(self.positions), refs, spec, dict(self.size_sources))

    def output_ref(self, value: Any, graph_outputs: list[Tensor], input_of: dict[int, int]) -> tuple[str, Any]:
        """Where an output comes from (see `FxConversion`), added to `graph_outputs` when the graph computes it."""
        if isinstance(value, Tensor):
            if id(value) in input_of:
                return ("arg", input_of[id(value)])
            if not value.is_symbolic:
                return ("value", torch.from_numpy(np.array(value.numpy())))
            graph_outputs.append(value)
            return ("graph", len(graph_outputs) - 1)
        if isinstance(value, str) and value in self.size_sources:
            return ("size", value)
        if isinstance(value, SizeExpression):
            raise ValueError(f"{SOURCE}: the graph returns the size {value.text}, an expression of symbolic sizes")
        return ("value", value)


def _leaves(tree: Any) -> list[Any]:
    """The leaves of nested args, slices opened up (their bounds may be symbolic sizes)."""
    out = []
    for leaf in pytree.tree_leaves(tree):
        out.extend((leaf.start, leaf.stop, leaf.step) if isinstance(leaf, slice) else (leaf,))
    return out


def _is_plain_string(value: Any, symbols: dict[str, Any]) -> bool:
    return isinstance(value, str) and value not in symbols


def torch_to_numpy(t: torch.Tensor) -> np.ndarray:
    """The data of a torch tensor as a numpy array (a view when torch allows; bfloat16 as ml_dtypes')."""
    t = t.detach().cpu().resolve_conj().resolve_neg()
    if t.dtype == torch.bfloat16:
        import ml_dtypes

        return t.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
    return t.numpy()


def _match_meta(node: fx.Node, value: Any) -> Any:
    """`value` cast to the dtype torch gives the node (type promotion differs from numpy's in places), after
    checking its shape against the one torch recorded (a converter's mistake is reported here, not as wrong
    numbers)."""
    return _match(node, value, node.meta.get("example_value", node.meta.get("val")))


def _match(node: fx.Node, value: Any, meta: Any) -> Any:
    if isinstance(meta, torch.Tensor) and isinstance(value, Tensor):
        _check_shape(node, value, meta)
        dtype = torch_ops.dtype_name(meta.dtype)
        return value if value.dtype == dtype else ops.cast(value, dtype)
    if isinstance(meta, (tuple, list)) and isinstance(value, (tuple, list)) and len(meta) == len(value):
        return type(value)([_match(node, v, m) for v, m in zip(value, meta)])
    return value


def _check_shape(node: fx.Node, value: Tensor, meta: torch.Tensor) -> None:
    want = tuple(size_value(d) for d in meta.shape)
    same = len(want) == len(value.shape) and all(
        not (isinstance(w, int) and isinstance(g, int)) or w == g for w, g in zip(want, value.shape))
    if not same:
        raise RuntimeError(f"{SOURCE}: the conversion of node {node.name} gave shape {value.shape}, torch's is "
                           f"{want}; this is a bug in stdlib_ops.frontends.torch_ops")
