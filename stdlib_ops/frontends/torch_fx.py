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

In-place writes (`h.mul_(2)`, `torch.relu_(h)`, `h += x`, `F.relu(h, inplace=True)`, `nn.ReLU(inplace=True)`,
`out=`) become values, as torch would see them: Dynamo leaves them in the graph as they are written. Which nodes
share memory is read from the fake tensors torch recorded for them (their storages; a graph without them, from
`symbolic_trace`, is run on fake tensors first). A write gives the first tensor of that memory (its base) its new
value (a write through a view scatters into it), and a node of that memory read after the write is converted again
from its arguments, so every later use sees the write. A write into a graph input comes back to the caller: its new
contents are one more output of the compiled graph, which the caller copies into the input tensor, as torch
eager changes it. Writes into the model's parameters and buffers (the compiled graph holds copies of them), through
a view with symbolic sizes, or into memory that two inputs share are refused with the node named.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch import fx
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.multiprocessing.reductions import StorageWeakRef
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
    `size_sources` says which argument and axis each symbolic size is read from. `input_writes` lists the arguments
    the graph writes in place: (p, source), the call's argument p gets the contents `source` (as an output leaf)
    after the call."""

    graph: FlowGraph | None
    input_positions: tuple[int, ...]
    outputs: list[tuple[str, Any]]
    out_spec: Any
    size_sources: dict[str, tuple[int, int]] = field(default_factory=dict)
    input_writes: list[tuple[int, tuple[str, Any]]] = field(default_factory=list)


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
    missing = unsupported_operations(gm)
    if missing:
        raise UnsupportedOperationsError(SOURCE, missing, hint=FALLBACK_HINT)


def unsupported_operations(gm: fx.GraphModule) -> dict[str, list[str]]:
    """The operations of `gm` the table lacks, each with the names of the nodes that call it, in order of first use
    (empty when every node converts); sizes Dynamo computed already need no conversion."""
    uses = [(target_name(gm, n), n.name) for n in gm.graph.nodes if _converter(gm, n) is None and
            n.op in ("call_function", "call_method", "call_module") and _python_meta(n) is None]
    return collect_unsupported(uses)


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


def written_arguments(gm: fx.GraphModule, node: fx.Node) -> Any:
    """What `node` writes in place, as FX arguments: its `out=` tensors (a node, or a tuple of nodes), or the first
    argument of an in-place method, function or operator (`h.mul_(2)`, `torch.relu_(h)`, `h += x`) and of a call or
    module with `inplace=True`; None when it writes nothing."""
    if node.op == "call_module":
        inplace = getattr(gm.get_submodule(node.target), "inplace", False) is True
        return node.args[0] if inplace and node.args else None
    if node.op not in ("call_function", "call_method"):
        return None
    if node.kwargs.get("out") is not None:
        return node.kwargs["out"]
    arguments = _bound_arguments(gm, node)  # empty for a target the table lacks
    if not arguments:
        return None
    if node.op == "call_method":
        named = torch_ops.is_inplace_method(node.target)
    else:
        named = node.target in torch_ops.INPLACE_FUNCTIONS
    return next(iter(arguments.values())) if named or arguments.get("inplace") is True else None


def _bound_arguments(gm: fx.GraphModule, node: fx.Node) -> dict[str, Any]:
    """The node's arguments by the names of its converter's parameters (torch's names); empty when they do not
    bind (the conversion then reports the call)."""
    fn = _converter(gm, node)
    if fn is None:
        return {}
    try:
        return dict(inspect.signature(fn).bind(*node.args, **node.kwargs).arguments)
    except (TypeError, ValueError):
        return {}


def _recorded(node: fx.Node) -> Any:
    """The value torch recorded for `node` (Dynamo's fake tensor or Python value), or None."""
    return node.meta.get("example_value", node.meta.get("val"))


def fake_values(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> dict[fx.Node, Any]:
    """What every node gives on fake tensors (sizes, strides and storages without data): the values Dynamo recorded,
    or, for a graph without them (from `symbolic_trace`), a run of the graph on fake copies of the inputs."""
    nodes = [n for n in gm.graph.nodes if n.op != "output"]
    if any(_recorded(n) is not None for n in nodes):
        return {n: _recorded(n) for n in nodes}
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    run = _FakeRun(gm, mode)
    with mode, torch.no_grad():  # inference: a parameter is written as a buffer would be
        run.run(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in example_inputs])
    return {n: run.env.get(n) for n in nodes}


class _FakeRun(fx.Interpreter):
    """A run of a graph on fake tensors that keeps every node's value, the module's attributes made fake too (so
    the run writes none of the model's tensors)."""

    def __init__(self, gm: fx.GraphModule, mode: Any) -> None:
        super().__init__(gm, garbage_collect_values=False)
        self.mode = mode

    def get_attr(self, target: Any, args: Any, kwargs: Any) -> Any:
        value = super().get_attr(target, args, kwargs)
        return self.mode.from_tensor(value) if isinstance(value, torch.Tensor) else value


def _python_meta(node: fx.Node) -> Any:
    """The value Dynamo recorded for a node that computes a size or another non-tensor (None for tensors and when
    nothing was recorded); sizes as ints, symbol names or `SizeExpression`s."""
    value = _recorded(node)
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


@dataclass
class _Storage:
    """Memory that tensors of the graph share: `base`, its first tensor node (every other node in it is a view of
    the base), `written`, the conversion's clock at the last write into it (0: never written), and `shared_by`, a
    second input of the graph in the same memory."""

    base: fx.Node
    written: int = 0
    shared_by: fx.Node | None = None


class _Converter:
    """One conversion: the value of every FX node (stdlib_ops Tensors, torch tensors for constants, Python
    values), and the constants made from torch tensors (one per tensor). For a graph that writes in place, also
    every node's fake value, the storages of its tensors, and the clock (the count of writes so far) at which its
    value was converted."""

    def __init__(self, gm: fx.GraphModule, device: str) -> None:
        self.gm = gm
        self.device = device
        self.env: dict[fx.Node, Any] = {}
        self.constants: dict[int, tuple[torch.Tensor, Tensor]] = {}
        self.inputs: list[Tensor] = []
        self.names: list[str] = []
        self.positions: list[int] = []
        self.input_nodes: dict[fx.Node, int] = {}
        self.size_sources: dict[str, tuple[int, int]] = {}
        self.fakes: dict[fx.Node, Any] = {}
        self.order: dict[fx.Node, int] = {}
        self.storage_keys: dict[fx.Node, tuple[Any, ...]] = {}
        self.storages: dict[Any, _Storage] = {}
        self.computed: dict[fx.Node, int] = {}
        self.clock = 0

    def run(self, placeholders: list[fx.Node], example_inputs: Sequence[Any]) -> FxConversion:
        """Convert every node; the conversion of the graph's outputs."""
        if any(written_arguments(self.gm, n) is not None for n in self.gm.graph.nodes):
            self.track_storages(fake_values(self.gm, example_inputs))
        for position, (node, example) in enumerate(zip(placeholders, example_inputs)):
            self.env[node] = self.placeholder(node, example, position)
            self.computed[node] = self.clock
        for node in self.gm.graph.nodes:
            if node.op in ("call_function", "call_method", "call_module", "get_attr"):
                self.env[node] = self.convert(node)
                self.computed[node] = self.clock
            elif node.op == "output":
                return self.outputs(node)
        raise ValueError(f"{SOURCE}: the FX graph has no output node")

    def track_storages(self, fakes: dict[fx.Node, Any]) -> None:
        """Record the nodes' fake values, the storages their tensors live in, and each storage's base."""
        self.fakes = fakes
        self.order = {n: k for k, n in enumerate(fakes)}
        for node, value in fakes.items():
            tensors = [t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]
            self.storage_keys[node] = tuple(dict.fromkeys(StorageWeakRef(t.untyped_storage()) for t in tensors))
            if isinstance(value, torch.Tensor):
                storage = self.storages.setdefault(self.storage_keys[node][0], _Storage(node))
                if node.op == "placeholder" and storage.base is not node:
                    storage.shared_by = node

    def placeholder(self, node: fx.Node, example: Any, position: int) -> Any:
        """A user's tensor as a symbolic input (recording where its symbolic sizes come from), a parameter as a
        torch constant, a size as its Python value."""
        meta = _recorded(node)
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
        self.input_nodes[node] = position
        return t

    def current(self, node: fx.Node) -> Any:
        """The value `node` holds now: converted again when its memory was written after it was converted."""
        if not self.stale(node):
            return self.env[node]
        value = self.reread(node)
        self.env[node], self.computed[node] = value, self.clock
        return value

    def stale(self, node: fx.Node) -> bool:
        """True when a write into the memory of `node` came after its value was converted."""
        storages = [self.storages[k] for k in self.storage_keys.get(node, ()) if k in self.storages]
        return any(s.written > self.computed[node] for s in storages)

    def reread(self, node: fx.Node) -> Any:
        """The value of a stale node: an in-place node's is its targets' values; a view's is converted again from
        its arguments."""
        written = written_arguments(self.gm, node)
        if written is not None:
            return fx.node.map_arg(written, self.current)
        bases = [self.storages[k].base for k in self.storage_keys[node] if k in self.storages]
        origin = next((b for b in bases if self.order[b] > self.order[node]), None)
        if origin is not None:
            raise ValueError(f"{SOURCE}: node {node.name} ({target_name(self.gm, node)}) is used after an in-place "
                             f"write into {origin.name}, one of its results; only views of a written tensor are "
                             f"read again")
        return self.convert(node)

    def convert(self, node: fx.Node) -> Any:
        """The value of a get_attr or call node (an in-place node's writes made)."""
        if node.op == "get_attr":
            value = self.attribute(node.target)
            return value.detach() if isinstance(value, torch.Tensor) else value
        known = _python_meta(node)
        if known is not None:
            return known
        written = written_arguments(self.gm, node)
        if written is not None:
            self.check_writable(node, written)
        value = self.compute(node)
        return value if written is None else self.write(node, written, value)

    def compute(self, node: fx.Node) -> Any:
        """The result of a call node as its out-of-place form gives it (`out=` left out)."""
        kwargs = {k: v for k, v in node.kwargs.items() if k != "out"}
        args, kwargs = fx.node.map_arg((node.args, kwargs), self.current)
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
        return _match(node, value, self.fakes.get(node, _recorded(node)))

    def call(self, node: fx.Node, args: Any, kwargs: Any) -> Any:
        """The table's converter applied to the node's arguments."""
        fn = _converter(self.gm, node)
        if node.op == "call_module":
            module = self.gm.get_submodule(node.target)
            return fn(module, lambda t: None if t is None else self.constant(t.detach()), *args, **kwargs)
        return fn(*args, **kwargs)

    def evaluate(self, node: fx.Node, args: Any, kwargs: Any) -> Any:
        """A node of constants computed by torch (an in-place one on copies, so the constants stay as they are)."""
        target = node.target
        if node.op == "call_module":
            target = self.gm.get_submodule(node.target)
        if written_arguments(self.gm, node) is not None:
            args, kwargs = pytree.tree_map_only(torch.Tensor, torch.clone, (args, kwargs))
        with torch.no_grad():
            if node.op == "call_method":
                return getattr(args[0], target)(*args[1:], **kwargs)
            return target(*args, **kwargs)

    def check_writable(self, node: fx.Node, written: Any) -> None:
        """A ValueError naming `node` when it writes where a write cannot be followed: into the model's parameters
        or buffers (the compiled graph holds copies made when compiling), or into memory two inputs share."""
        for target in pytree.tree_leaves(written):
            what = f"{SOURCE}: node {node.name} ({target_name(self.gm, node)}) writes in place into {target}"
            if not isinstance(target, fx.Node) or not isinstance(self.fakes.get(target), torch.Tensor):
                raise ValueError(f"{what}, which is not a tensor of the graph")
            storage = self.storages[self.storage_keys[target][0]]
            base = storage.base
            if base.op == "get_attr" or (base.op == "placeholder" and base not in self.input_nodes):
                view = "" if base is target else f"a view of {base.name}, "
                raise ValueError(f"{what}, {view}a parameter or buffer of the model; the compiled graph holds a copy "
                                 f"of it made when compiling, so writes into it are not supported")
            if storage.shared_by is not None:
                raise ValueError(f"{what}, memory that the inputs {base.name} and {storage.shared_by.name} share; "
                                 f"writes into it are not supported")

    def write(self, node: fx.Node, written: Any, value: Any) -> Any:
        """`value`, the result of `node`, written into its targets `written` (a node, or a tuple of nodes for
        `out=`); the node's result, the targets' new values."""
        if isinstance(written, fx.Node):
            return self.write_tensor(node, written, value)
        if not isinstance(value, (tuple, list)) or len(value) != len(written):
            raise ValueError(f"{SOURCE}: node {node.name} ({target_name(self.gm, node)}) has {len(written)} out= "
                             f"tensors for a result of another structure")
        return tuple(self.write_tensor(node, t, v) for t, v in zip(written, value))

    def write_tensor(self, node: fx.Node, target: fx.Node, value: Any) -> Any:
        """`value` written into the tensor of `target`: the base of its memory gets its new value, and the clock
        moves on so that the nodes in that memory read it."""
        storage = self.storages[self.storage_keys[target][0]]
        base = storage.base
        same_layout = _layout(self.fakes[target]) == _layout(self.fakes[base])
        new_base = value if same_layout else self.scattered(node, target, base, value)
        self.clock += 1
        storage.written = self.clock
        self.env[base], self.computed[base] = new_base, self.clock
        return value

    def scattered(self, node: fx.Node, target: fx.Node, base: fx.Node, value: Any) -> Tensor:
        """The value of `base` with `value` written over the elements that its view `target` shares with it."""
        what = (f"{SOURCE}: node {node.name} ({target_name(self.gm, node)}) writes in place into {target.name}, a "
                f"view of {base.name}")
        base_positions, view_positions = _positions(self.fakes[base]), _positions(self.fakes[target])
        if base_positions is None or view_positions is None:
            raise ValueError(f"{what} with symbolic sizes; with symbolic sizes only whole tensors are written in place")
        sources = _view_sources(base_positions, view_positions)
        if sources is None:
            raise ValueError(f"{what} whose elements are not one to one with elements of {base.name}; not supported")
        old, new = (self.constant(v) if isinstance(v, torch.Tensor) else v for v in (self.env[base], value))
        hit = sources >= 0
        index = ops.asarray(np.where(hit, sources, 0), device=self.device)
        return ops.where(ops.asarray(hit, device=self.device), ops.take(ops.reshape(new, [-1]), index, axis=0), old)

    def attribute(self, path: str) -> Any:
        """The object at the dotted attribute `path` of the graph module."""
        value: Any = self.gm
        for part in path.split("."):
            value = getattr(value, part)
        return value

    def constant(self, t: torch.Tensor) -> Tensor:
        """The stdlib_ops constant holding a copy of torch tensor `t` (one per tensor)."""
        entry = self.constants.get(id(t))
        if entry is None:
            entry = (t, ops.asarray(torch_to_numpy(t), device=self.device))
            self.constants[id(t)] = entry
        return entry[1]

    def is_written(self, node: fx.Node) -> bool:
        """True when the graph writes into the memory of `node`."""
        keys = self.storage_keys.get(node, ())
        return bool(keys) and self.storages[keys[0]].written > 0

    def outputs(self, node: fx.Node) -> FxConversion:
        """The graph from the inputs to the output node's tensors and the written inputs' new contents, and where
        each output leaf and each new content comes from."""
        values, spec = pytree.tree_flatten(fx.node.map_arg(node.args[0], self.current))
        graph_outputs: list[Tensor] = []
        written = {p: self.env[n] for n, p in self.input_nodes.items() if self.is_written(n)}
        unchanged = {id(t): p for t, p in zip(self.inputs, self.positions) if p not in written}
        writes = [(p, self.output_ref(value, graph_outputs, unchanged)) for p, value in written.items()]
        input_of = {**unchanged, **{id(value): p for p, value in written.items()}}  # written: given back, updated
        refs = [self.output_ref(value, graph_outputs, input_of) for value in values]
        graph = ops.trace_from(graph_outputs, self.inputs, names=self.names) if graph_outputs else None
        return FxConversion(graph, tuple(self.positions), refs, spec, dict(self.size_sources), writes)

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


def _match(node: fx.Node, value: Any, meta: Any) -> Any:
    """`value` cast to the dtype torch gives the node (`meta`, its recorded or fake value; type promotion differs
    from numpy's in places), after checking its shape against torch's (a converter's mistake is reported here, not
    as wrong numbers)."""
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


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    """What places the elements of `t` in its memory: its dtype, sizes, strides and offset (symbolic ones by name)."""
    return (t.dtype, tuple(map(size_value, t.shape)), tuple(map(size_value, t.stride())),
            size_value(t.storage_offset()))


def _positions(t: torch.Tensor) -> np.ndarray | None:
    """The position in memory (in elements) of each element of `t`; None when its layout is symbolic."""
    _, shape, strides, offset = _layout(t)
    if not all(isinstance(v, int) for v in (*shape, *strides, offset)):
        return None
    positions = np.full(shape, offset, np.int64)
    for axis, (n, stride) in enumerate(zip(shape, strides)):
        along = [-1 if a == axis else 1 for a in range(len(shape))]
        positions += (np.arange(n, dtype=np.int64) * stride).reshape(along)
    return positions


def _view_sources(base: np.ndarray, view: np.ndarray) -> np.ndarray | None:
    """For each element of a tensor at memory positions `base`, the flat index of the element of a view at memory
    positions `view` in the same place, -1 where the view has none; None when elements of either share a place or the
    view reaches outside the tensor."""
    flat_base, flat_view = base.ravel(), view.ravel()
    sources = np.full(flat_base.size, -1, np.int64)
    if flat_view.size == 0:
        return sources.reshape(base.shape)
    if np.unique(flat_base).size != flat_base.size or np.unique(flat_view).size != flat_view.size:
        return None
    index_of = np.full(max(flat_base.max(initial=0), flat_view.max()) + 1, -1, np.int64)
    index_of[flat_base] = np.arange(flat_base.size)
    hits = index_of[flat_view]
    if (hits < 0).any():
        return None
    sources[hits] = np.arange(flat_view.size)
    return sources.reshape(base.shape)
