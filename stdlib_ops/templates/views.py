"""Binding a template's kernel to a task's kernel signature, through index views of the task's tensors.

A template is written over its own canonical shapes (a matmul over `[batch, m, k] x [batch, k, n]`, a softmax over
`[rows, cols]`); a task has tensors of any rank, broadcast batch dimensions and symbolic sizes. `bind_template`
turns the template's kernel into the task's: every size parameter of the template becomes an expression of the
task's sizes (a product of dimensions, a symbolic dimension, a constant), and every tensor parameter is replaced
by the task tensor it views, each element access `a[i, j, k]` becoming an access of the task tensor at the index
its `View` gives (row-major flattening, broadcasting, dropped axes). The kernel's parameters become the task's
kernel signature, so the result follows the kernel contract exactly as the rule-based scheduler's kernels do.
Because only element accesses are rewritten, a template that keeps the fusion contract keeps it once bound; a
template that uses a tensor parameter otherwise is refused with a ValueError naming it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import IRModule
from hidet_lang.ir.functor import IRRewriter
from hidet_lang.ir.tensor_map import TensorMapType
from hidet_lang.ir.types import TensorType, int32
from stdlib_ops.fusion.contract import the_kernel
from stdlib_ops.schedule.signature import KernelSignature

Indices = tuple[E.Expr, ...]
Dim = int | E.Expr


@dataclass(frozen=True)
class View:
    """A template tensor parameter seen as the task tensor `tensor`: `index(template indices) -> task indices`.
    `whole`: the template's tensor is the task tensor itself, of its rank and row-major order (what a tensor-map
    parameter needs: the launcher encodes the map of the task's tensor)."""

    tensor: E.Var
    index: Callable[[Indices], Indices]
    whole: bool = False


def bind_template(module: IRModule, name: str, sizes: Mapping[str, Dim], views: Sequence[View],
                  signature: KernelSignature) -> IRModule:
    """`module` with its kernel renamed `name`, its size parameters (by name) replaced by `sizes`, its tensor
    parameters (in order) by `views`, and its parameters by `signature`'s.

    A tensor-map parameter (read by TMA copies, not by element accesses) becomes a tensor map of the task's tensor
    itself, with the template's box and swizzle; its view must be `whole`.

    ValueError when a size parameter has no value, the views do not match the tensor parameters one to one, the
    kernel uses a tensor parameter other than by element accesses, or a tensor map's view is not whole."""
    kernel = the_kernel(module)
    scalars = [p for p in kernel.params if not isinstance(p.type, TensorType)]
    tensors = [p for p in kernel.params if isinstance(p.type, TensorType)]
    missing = [p.name for p in scalars if p.name not in sizes]
    if missing or len(tensors) != len(views):
        raise ValueError(f"kernel '{kernel.name}' ({', '.join(p.name for p in kernel.params)}) cannot be bound to "
                         f"sizes {sorted(sizes)} and {len(views)} views")
    maps = {p: _task_tensor_map(kernel.name, p, view) for p, view in zip(tensors, views)
            if isinstance(p.type, TensorMapType)}
    rewriter = _ViewRewriter(kernel.name, {p: E.convert(sizes[p.name]) for p in scalars},
                             {p: view for p, view in zip(tensors, views) if p not in maps}, maps)
    attrs = kernel.attrs
    if attrs.cuda is not None:
        attrs = dataclasses.replace(attrs, cuda=attrs.cuda.with_exprs(rewriter.visit))
    by_task_tensor = {view.tensor: maps[p] for p, view in zip(tensors, views) if p in maps}
    params = tuple(by_task_tensor.get(p, p) for p in signature.params)
    bound = dataclasses.replace(kernel, name=name, params=params, body=rewriter.visit(kernel.body), attrs=attrs)
    return IRModule(tuple(bound if f is kernel else f for f in module.functions))


class _ViewRewriter(IRRewriter):
    """Replaces size parameters by their values and element accesses of tensor parameters by their views'."""

    def __init__(self, kernel: str, sizes: dict[E.Var, E.Expr], views: dict[E.Var, View],
                 maps: dict[E.Var, E.Var]) -> None:
        super().__init__()
        self.kernel, self.sizes, self.views, self.maps = kernel, sizes, views, maps

    def visit_Var(self, v: E.Var) -> E.Expr:
        if v in self.maps:
            return self.maps[v]
        if v in self.views:
            raise ValueError(f"template kernel '{self.kernel}' uses its tensor '{v.name}' other than by element "
                             f"accesses, so it cannot be bound to a view of a task's tensor")
        return self.sizes.get(v, v)

    def visit_TensorElement(self, e: E.TensorElement) -> E.Expr:
        view = self.views.get(e.base) if isinstance(e.base, E.Var) else None
        if view is None:
            return self.rebuild(e)
        return dataclasses.replace(e, base=view.tensor, indices=tuple(view.index(self.visit(e.indices))))

    def visit_BufferStoreStmt(self, s: S.BufferStoreStmt) -> S.Stmt:
        view = self.views.get(s.buf) if isinstance(s.buf, E.Var) else None
        if view is None:
            return self.rebuild(s)
        return dataclasses.replace(s, buf=view.tensor, indices=tuple(view.index(self.visit(s.indices))),
                                   value=self.visit(s.value))


def _task_tensor_map(kernel: str, param: E.Var, view: View) -> E.Var:
    """The parameter that replaces the template's tensor-map parameter `param`: the task's tensor of `view` as a
    tensor map with `param`'s box and swizzle."""
    template_map, task = param.type, view.tensor.type
    assert isinstance(template_map, TensorMapType)
    if not view.whole or not isinstance(task, TensorType) or len(task.shape) != len(template_map.shape):
        raise ValueError(f"template kernel '{kernel}' reads its tensor '{param.name}' through a tensor map, which "
                         f"needs the task's tensor '{view.tensor.name}' itself (a whole view of its rank)")
    return E.Var(view.tensor.name, TensorMapType(task.dtype, task.shape, None, template_map.box,
                                                 template_map.swizzle))


def product(dims: Sequence[Dim]) -> Dim:
    """The product of `dims` (an int when every one is an int)."""
    total: Dim = 1
    for d in dims:
        if isinstance(d, int) and isinstance(total, int):
            total *= d
        elif not _is_one(d):
            total = d if _is_one(total) else E.binary("*", total, d)
    return total


def unravel(flat: E.Expr, dims: Sequence[Dim]) -> list[E.Expr]:
    """The row-major coordinates in `dims` of the flat index `flat` (in range); size-1 dimensions read 0."""
    outermost = next((n for n, d in enumerate(dims) if not _is_one(d)), None)
    coords: list[E.Expr] = [E.Constant(0, int32)] * len(dims)
    stride: Dim = 1
    for n in reversed(range(len(dims))):
        d = dims[n]
        if _is_one(d):
            continue
        scaled = flat if _is_one(stride) else E.binary("/", flat, stride)
        coords[n] = scaled if n == outermost else E.binary("%", scaled, d)
        stride = product([stride, d])
    return coords


def same_dim(a: Dim, b: Dim) -> bool:
    """Whether two dimensions are the same int or the same symbolic size."""
    return a is b or (isinstance(a, int) and isinstance(b, int) and a == b)


def _is_one(d: Dim) -> bool:
    return isinstance(d, int) and d == 1


def broadcast_batch(coords: Sequence[E.Expr], dims: Sequence[Dim]) -> list[E.Expr]:
    """The index into batch dimensions `dims` (right-aligned with `coords`, numpy's broadcasting) of the
    broadcast batch coordinates `coords`: a size-1 dimension reads 0."""
    offset = len(coords) - len(dims)
    return [E.Constant(0, int32) if _is_one(d) else coords[offset + n] for n, d in enumerate(dims)]
