"""The rule-based CPU schedule: for each output, a loop nest over its elements.

The outer loop runs in parallel (OpenMP; the two outer loops collapse when nothing sits between them) unless
the work is known to be small (`PARALLEL_MIN_WORK`), the innermost loop runs over the contiguous axis so the C
compiler vectorizes it, computed tensors are inlined and reductions are loops hoisted to the outermost level that
binds what they read. The loops over the axes that reductions read run outside the others (`_loop_order`), so a
reduction that several elements share is computed once for them all, never per element. The loops over the
output's axes count in i64: the C code is compiled with `-fwrapv`, under
which the compiler cannot assume an i32 index expression never wraps, and would move elements one by one instead
of whole vectors.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from hidet_lang.ir.expr import Cast, Constant, Expr, Var, convert
from hidet_lang.ir.func import FuncAttrs, FuncKind, Function, IRModule
from hidet_lang.ir.functor import collect, substitute
from hidet_lang.ir.stmt import BufferStoreStmt, ForStmt, LoopKind, Stmt, seq
from hidet_lang.ir.types import int32, int64, void
from stdlib_ops.compute.nodes import ArgReduceExpr, ComputeTensor, ReduceExpr
from stdlib_ops.schedule.inline import inline_computes
from stdlib_ops.schedule.reductions import ReductionLowering, Scope, outermost_reductions
from stdlib_ops.schedule.signature import kernel_signature

PARALLEL_MIN_WORK = 1 << 15
"""The fewest element computations (output elements times reduction extents) worth an OpenMP parallel region:
starting one costs microseconds, more than a small operator's whole work (an eager `x + y` of 16 floats)."""


def schedule_cpu(name: str, inputs: tuple[Var, ...], outputs: tuple[ComputeTensor, ...]) -> IRModule:
    """A module with one public function `name` computing `outputs` from `inputs` (kernel contract order)."""
    signature = kernel_signature(inputs, outputs)
    names = itertools.count(1)
    body = seq([_loop_nest(out, param, names) for out, param in zip(outputs, signature.outputs)])
    func = Function(name, signature.params, void, body, FuncAttrs(kind=FuncKind.PUBLIC))
    return IRModule((func,))


def _loop_nest(out: ComputeTensor, param: Var, names: Iterator[int]) -> Stmt:
    rank = len(out.shape)
    axes = tuple(Var(f"i{k}", int64) for k in range(rank))
    value_expr = _at(inline_computes(out), out.axes, axes)
    order = _loop_order(axes, value_expr)
    scopes = [Scope() for _ in range(rank + 1)]
    lowering = ReductionLowering(scopes, {axes[k]: depth + 1 for depth, k in enumerate(order)}, names)
    value = lowering.value(value_expr, rank)
    stmt: Stmt = seq([*scopes[rank].prelude, BufferStoreStmt(param, axes or (Constant(0, int32),), value)])
    worth_parallel = _work(out, value_expr) >= PARALLEL_MIN_WORK
    for depth in reversed(range(rank)):
        k = order[depth]
        parallel = worth_parallel and (depth == 0 or (depth == 1 and not scopes[1].prelude))
        kind = LoopKind.PARALLEL if parallel else LoopKind.PLAIN
        stmt = ForStmt(axes[k], Constant(0, int64), Cast(convert(out.shape[k]), int64), Constant(1, int64), stmt, kind)
        stmt = seq([*scopes[depth].prelude, stmt])
    return stmt


def _loop_order(axes: tuple[Var, ...], value: Expr) -> list[int]:
    """The order of the loops over the output's axes (indices into `axes`, outermost first): the axes that the
    outermost reductions of `value` read come first, so each reduction is computed once for all the elements
    sharing it (a softmax over a leading axis loops over columns, then down each column), then the others; in
    the output's order within each part (for a reduction over trailing axes, the output's own order)."""
    read = {v for r in outermost_reductions(value) for v in collect(r, Var)}
    first = [k for k, a in enumerate(axes) if a in read]
    return first + [k for k, a in enumerate(axes) if a not in read]


def _work(out: ComputeTensor, value: Expr) -> float:
    """The element computations of `out` (output elements times the extents of the reductions in `value`);
    infinite when a size is known only at run time."""
    extents = [*out.shape]
    for r in collect(value, (ReduceExpr, ArgReduceExpr)):
        extents += [r.extent] if isinstance(r, ArgReduceExpr) else list(r.extents)
    work = 1.0
    for e in extents:
        if not isinstance(e, int):
            return float("inf")
        work *= e
    return work


def _at(body: Expr, old: tuple[Var, ...], new: tuple[Var, ...]) -> Expr:
    return substitute(body, dict(zip(old, new)))
