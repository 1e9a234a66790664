"""The arithmetic of a task's compute definition, counted as floating-point operations per call.

Every float `+ - * /`, negation and math function (`exp`, `min`, `max`, ...) of a computed tensor's body counts
once per value of the axes it depends on (the tensor's axes and those of the reductions around it), and a
reduction's accumulation once per term: a matmul's sum over `k` counts `2 * k` an output element, as BLAS counts
it, and softmax's maximum of a row counts once a row, not once an element, as a scheduler that computes it once
does. Reads of inputs and of other computed tensors (counted on their own), index arithmetic, comparisons, selects
and conversions count nothing. The count is a sum of `Dim`s
(`stdlib_ops.dims`: an int, or a product of symbolic names and an int factor), so that one count serves every value
of a graph's symbolic sizes (`flops_value`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from hidet_lang.ir.expr import BinaryOp, Expr, Intrinsic, TensorElement, UnaryOp, Var
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import DataType
from stdlib_ops.compute.nodes import ArgReduceExpr, ComputeTensor, ReduceExpr
from stdlib_ops.compute.primitives import shape_entry
from stdlib_ops.dims import Dim, dim_product, dim_value, factors, make_dim
from stdlib_ops.graph.partition import FusionGroup
from stdlib_ops.task import Task

FlopCount = tuple[Dim, ...]
"""A count of operations: the sum of its terms."""

ARITHMETIC_OPS = ("+", "-", "*", "/")


def task_flops(task: Task) -> FlopCount | None:
    """The floating-point operations one run of `task` does (see the module docstring); None where a shape or an
    extent is no symbolic size (an expression other than a product of size variables)."""
    tensors = {id(t): t for out in task.outputs for t in [out, *collect(out.body, ComputeTensor)]}
    terms: list[Dim] = []
    try:
        for tensor in tensors.values():
            terms += _expr_flops(tensor.body, {axis: shape_entry(d) for axis, d in zip(tensor.axes, tensor.shape)})
    except ValueError:
        return None
    return add_flops(terms)


def add_flops(terms: Iterable[Dim]) -> FlopCount:
    """The sum of `terms`, like terms (the same symbolic names) merged and zeros dropped."""
    merged: dict[tuple[str, ...], int] = {}
    for term in terms:
        names, factor = factors(term)
        merged[names] = merged.get(names, 0) + factor
    return tuple(make_dim(names, factor) for names, factor in merged.items() if factor)


def flops_value(count: FlopCount, sizes: Mapping[str, int]) -> int:
    """The number of operations `count` stands for when the symbolic sizes have the values `sizes`."""
    return sum(dim_value(term, sizes) for term in count)


def _expr_flops(e: Expr, scope: dict[Var, Dim]) -> list[Dim]:
    """The operations of `e` over the axes in `scope` (axis -> extent): each operation once per value of the axes
    its operands depend on. Computed tensors `e` reads are counted on their own."""
    if isinstance(e, (ComputeTensor, TensorElement)):
        return []
    if isinstance(e, (ReduceExpr, ArgReduceExpr)):
        axes = e.axes if isinstance(e, ReduceExpr) else (e.axis,)
        extents = e.extents if isinstance(e, ReduceExpr) else (e.extent,)
        inner = {**scope, **{a: shape_entry(x) for a, x in zip(axes, extents)}}
        return [_per_value(e, scope, axes, inner), *_expr_flops(e.body, inner)]
    own = isinstance(e, BinaryOp) and e.op in ARITHMETIC_OPS or isinstance(e, UnaryOp) and e.op == "-" or \
        isinstance(e, Intrinsic)
    terms = [_per_value(e, scope, (), scope)] if own and _is_float(e) else []
    for child in _children(e):
        if isinstance(child, Expr):
            terms += _expr_flops(child, scope)
    return terms


def _per_value(e: Expr, scope: dict[Var, Dim], bound: tuple[Var, ...], extents: dict[Var, Dim]) -> Dim:
    """The number of distinct values of the axes of `scope` that `e` depends on, times the `bound` axes' extents
    (`extents` gives every axis's)."""
    used = {v for v in collect(e, Var) if v in scope}
    return dim_product([extents[a] for a in [*used, *bound]])


def _children(e: Expr) -> list[object]:
    """The direct sub-expressions of `e` (its fields that are expressions, or tuples of them)."""
    found: list[object] = []
    for name in e.__dataclass_fields__:
        if name == "span":
            continue
        value = getattr(e, name)
        found += list(value) if isinstance(value, tuple) else [value]
    return found


def _is_float(e: Expr) -> bool:
    t = e.type
    return isinstance(t, DataType) and t.is_float


def group_flops(group: FusionGroup) -> FlopCount | None:
    """The operations of a fusion group's kernel: its members' counts, summed (None where one is not known)."""
    counts = [task_flops(op.task) for op in group.members]
    return None if any(c is None for c in counts) else add_flops(term for c in counts for term in c)
