"""One fusion group as one kernel: the anchor's scheduled kernel with its prologues and epilogues injected.

The prologues and epilogues are the absorbed operators' compute definitions, inlined: the value of an anchor
input at an index is its producer's body at that index, reading the group's inputs (or, recursively, other
absorbed producers); a store of the anchor's value at an index becomes, through each epilogue operator's inverse
map, a store of that operator's body into the group's output. `stdlib_ops.fusion.fuse` does the injection and
checks the fusion contract. A group has a `group_key`: groups of equal keys compute the same thing from inputs of
the same shapes, so they share one kernel.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.functor import IRRewriter, substitute
from hidet_lang.ir.types import TensorType, int32
from hidet_lang.target import Target
from stdlib_ops.compute import as_dim, as_dtype
from stdlib_ops.fusion import Epilogue, Prologue, Store, contract_violations, fuse
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.graph.partition import FusionGroup
from stdlib_ops.operators.base import Operator
from stdlib_ops.schedule.inline import inline_computes
from stdlib_ops.schedule.signature import storage_shape
from stdlib_ops.tensor import Tensor

ArgRole = tuple[str, "int | str"]  # ('size', name) | ('in', group input) | ('out', group output)


@dataclass(frozen=True)
class FusedKernel:
    """A group's kernel module and, for each of its kernel's parameters, what to pass: a symbolic size by name,
    or a group input or output by its position in `group_inputs` / `group_outputs`."""

    module: IRModule
    args: tuple[ArgRole, ...]
    title: str


def group_outputs(group: FusionGroup) -> list[Tensor]:
    """The tensors a group's kernel stores: each anchor output, or the last result of its epilogue chain."""
    return [epilogue_chain(group, out)[-1].outputs[0] if epilogue_chain(group, out) else out
            for out in group.anchor.outputs]


def epilogue_chain(group: FusionGroup, out: Tensor) -> list[Operator]:
    """The epilogue operators applied to anchor output `out`, in order."""
    chain: list[Operator] = []
    current = out
    while True:
        reader = next((op for op in group.epilogues if any(t is current for t in op.inputs)), None)
        if reader is None:
            return chain
        chain.append(reader)
        current = reader.outputs[0]


def prologue_ops(group: FusionGroup, t: Tensor) -> list[Operator]:
    """The prologue operators that computing tensor `t` inside the group involves."""
    found: dict[int, Operator] = {}
    stack = [t]
    while stack:
        op = stack.pop().producer
        if op is not None and any(op is p for p in group.prologues) and id(op) not in found:
            found[id(op)] = op
            stack.extend(op.inputs)
    return list(found.values())


def group_key(group: FusionGroup, target: Target) -> str:
    """Equal keys: the same operators (by task key) wired the same way, on inputs of the same shapes."""
    inputs = {id(t): k for k, t in enumerate(group.inputs())}
    members = group.members
    position = {id(op): k for k, op in enumerate(members)}

    def ref(t: Tensor) -> str:
        if id(t) in inputs:
            return f"in{inputs[id(t)]}"
        return f"%{position[id(t.producer)]}.{t.output_index}"

    lines = [f"{'*' if op is group.anchor else ''}{op.task.key}({','.join(ref(t) for t in op.inputs)})"
             for op in members]
    outs = ",".join(ref(t) for t in group_outputs(group))
    return f"{target}|{';'.join(lines)}->{outs}"


def contract_problems(group: FusionGroup, anchor_module: IRModule) -> list[tuple[list[Operator], str]]:
    """For each anchor input or output whose fusion the anchor's kernel does not allow: the operators to leave out
    of the group and why."""
    kernel = the_kernel(anchor_module)
    n_in = len(group.anchor.inputs)
    tensors = [p for p in kernel.params if isinstance(p.type, TensorType)]
    candidates: dict[E.Var, list[Operator]] = {}
    for param, t in zip(tensors[:n_in], group.anchor.inputs):
        ops = prologue_ops(group, t)
        if ops:
            candidates[param] = ops
    for param, out in zip(tensors[n_in:], group.anchor.outputs):
        ops = epilogue_chain(group, out)
        if ops:
            candidates[param] = ops
    inputs = [p for p in candidates if p in tensors[:n_in]]
    outputs = [p for p in candidates if p not in inputs]
    problems: dict[E.Var, str] = {}
    for v in contract_violations(kernel, inputs, outputs):
        if v.tensor not in problems:
            text = str(v.statement).splitlines()[0].strip()
            names = " + ".join(op.name for op in candidates[v.tensor])
            problems[v.tensor] = (f"{names} not fused into {group.anchor.name}: kernel '{kernel.name}' breaks the "
                                  f"fusion contract ('{v.tensor.name}' is {v.reason} in `{text}`)")
    return [(candidates[p], why) for p, why in problems.items()]


def fused_kernel(group: FusionGroup, anchor_module: IRModule) -> FusedKernel:
    """The group's kernel: `anchor_module` with the group's prologues and epilogues injected."""
    kernel = the_kernel(anchor_module)
    anchor = group.anchor
    n_in = len(anchor.inputs)
    tensors = [p for p in kernel.params if isinstance(p.type, TensorType)]
    inputs, outputs = group.inputs(), group_outputs(group)
    input_number = {id(t): k for k, t in enumerate(inputs)}
    in_vars = [_param(f"fused_in{k}", t) for k, t in enumerate(inputs)]
    out_vars = [_param(f"fused_out{k}", t) for k, t in enumerate(outputs)]
    values = _Values(group, {id(t): v for t, v in zip(inputs, in_vars)})

    roles: dict[E.Var | str, ArgRole] = {}
    prologues: dict[str, Prologue] = {}
    for param, t in zip(tensors[:n_in], anchor.inputs):
        if prologue_ops(group, t):
            prologues[param.name] = Prologue(tuple(in_vars[input_number[id(x)]] for x in values.leaves([t])),
                                             _bound(values.read, t))
        else:
            roles[param] = ("in", input_number[id(t)])
    epilogues: dict[str, Epilogue] = {}
    for k, (param, out) in enumerate(zip(tensors[n_in:], anchor.outputs)):
        chain = epilogue_chain(group, out)
        if chain:
            operands = [x for op in chain for x in op.inputs if x is not out and all(x is not o.outputs[0]
                                                                                     for o in chain)]
            epilogues[param.name] = Epilogue((out_vars[k],), _stores(values, chain, out, out_vars[k]),
                                             tuple(in_vars[input_number[id(x)]] for x in values.leaves(operands)))
        else:
            roles[param] = ("out", k)
    name = _kernel_name(group)
    module = fuse(anchor_module, prologues, epilogues, name=name) if (prologues or epilogues) else anchor_module
    fused = the_kernel(module)
    roles.update({f"fused_in{k}": ("in", k) for k in range(len(inputs))})
    roles.update({f"fused_out{k}": ("out", k) for k in range(len(outputs))})
    args: list[ArgRole] = []
    for p in fused.params:
        if not isinstance(p.type, TensorType):
            args.append(("size", p.name))
        else:
            args.append(roles[p] if p in roles else roles[p.name])
    return FusedKernel(module, tuple(args), group.title)


class _Values:
    """The IR value of a tensor of the group at an index: inlined when an absorbed operator computes it, else a
    read of the group input's parameter."""

    def __init__(self, group: FusionGroup, params: dict[int, E.Var]) -> None:
        self.group = group
        self.params = params
        self.inside = {id(op) for op in group.prologues}

    def computed_inside(self, t: Tensor) -> bool:
        return t.producer is not None and id(t.producer) in self.inside

    def read(self, t: Tensor, indices: tuple[E.Expr, ...]) -> E.Expr:
        """The value of `t` at `indices` (a rank-0 tensor is read at index (0,))."""
        if not self.computed_inside(t):
            return E.TensorElement(self.params[id(t)], indices)
        op = t.producer
        out = op.task.outputs[t.output_index]
        body = substitute(inline_computes(out), dict(zip(out.axes, indices)))
        return self.replace_reads(op, body, {})

    def replace_reads(self, op: Operator, body: E.Expr, fixed: dict[E.Var, E.Expr]) -> E.Expr:
        """`body` (over `op`'s task inputs) with each read of an input replaced by that input's value; reads of
        the task inputs in `fixed` become the given value whatever the index."""
        readers: dict[E.Var, Callable[[tuple[E.Expr, ...]], E.Expr]] = {}
        for var, t in zip(op.task.inputs, op.inputs):
            readers[var] = (lambda _idx, v=fixed[var]: v) if var in fixed else _bound(self.read, t)
        return _ReadReplacer(readers).visit(body)

    def leaves(self, tensors: Sequence[Tensor]) -> list[Tensor]:
        """The group inputs that computing `tensors` reads, in order of first appearance."""
        found: dict[int, Tensor] = {}
        stack = list(reversed(tensors))
        while stack:
            t = stack.pop()
            if self.computed_inside(t):
                stack.extend(reversed(t.producer.inputs))
            else:
                found.setdefault(id(t), t)
        return list(found.values())


def _stores(values: _Values, chain: list[Operator], out: Tensor,
            target: E.Var) -> Callable[[tuple[E.Expr, ...], E.Expr], list[Store]]:
    def stores(indices: tuple[E.Expr, ...], value: E.Expr) -> list[Store]:
        current, index = out, indices
        for op in chain:
            positions = [j for j, t in enumerate(op.inputs) if t is current]
            inverse = op.task.inverse_maps[positions[0]]
            index = tuple(substitute(E.convert(e), dict(zip(inverse.axes, index))) for e in inverse.indices)
            result = op.task.outputs[0]
            body = substitute(inline_computes(result), dict(zip(result.axes, index)))
            value = values.replace_reads(op, body, {op.task.inputs[j]: value for j in positions})
            current = op.outputs[0]
        return [Store(target, index or (E.Constant(0, int32),), value)]

    return stores


class _ReadReplacer(IRRewriter):
    """Replaces element reads of some tensors by the value a function gives for the (rewritten) indices."""

    def __init__(self, readers: dict[E.Var, Callable[[tuple[E.Expr, ...]], E.Expr]]) -> None:
        super().__init__()
        self.readers = readers

    def visit_TensorElement(self, e: E.TensorElement) -> E.Expr:
        indices = self.visit(e.indices)
        if isinstance(e.base, E.Var) and e.base in self.readers:
            return self.readers[e.base](indices)
        return e if indices is e.indices else E.TensorElement(e.base, indices)


def _bound(read: Callable[[Tensor, tuple[E.Expr, ...]], E.Expr], t: Tensor) -> Callable[[tuple], E.Expr]:
    return lambda indices: read(t, tuple(indices))


def _param(name: str, t: Tensor) -> E.Var:
    shape = storage_shape(tuple(as_dim(d) for d in t.shape))
    return E.Var(name, TensorType(as_dtype(t.dtype), shape))


def _kernel_name(group: FusionGroup) -> str:
    names = [op.task.kernel_name for op in group.members]
    return re.sub(r"\W", "_", "fused_" + "_".join(names))[:64]
