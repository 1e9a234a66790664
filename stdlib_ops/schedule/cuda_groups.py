"""The rule-based CUDA schedule of an output whose reductions are shared: a block per group of output elements.

A reduction whose value several output elements use (a row's mean and variance in a layer norm, a column's
maximum and sum in a softmax over a leading axis) is computed once, by the threads of one block together, never
again per element. The output axes such reductions read are the *group axes*; the others are the *inner axes*.
Each block takes one point of the group axes at a time (a grid-stride loop over the groups): its threads stride
over each shared reduction's index space, combine their partial results through warp shuffles and one partial a
warp in shared memory (every thread ends with the value), then stride over the group's inner elements, computing
and storing each. Reductions nested in a shared one that are shared themselves (a variance's mean) are computed
first, the same way; reductions that depend on an inner axis (or on an enclosing reduction's axis) stay loops in
the thread, as everywhere else. An argmax or argmin over a shared index space is found by the block's first thread
and handed to the others through shared memory.

Not covered: an output whose reductions read different output axes that together are all of them (a row's sum
added to a column's sum) has no group the block could share, and keeps the per-element schedule; computing such
reductions once needs a stage that stores them, which a one-kernel schedule does not have.
"""

from __future__ import annotations

from collections.abc import Iterator

from hidet_lang.cuda import FULL_MASK, blockIdx, gridDim, shfl_xor_sync, syncthreads, threadIdx
from hidet_lang.ir.expr import BinaryOp, Cast, Constant, Expr, IfThenElse, TensorElement, Var, convert
from hidet_lang.ir.functor import IRRewriter, collect, substitute
from hidet_lang.ir.stmt import (
    AssignStmt,
    BufferStoreStmt,
    DeclareStmt,
    DeclScope,
    EvaluateStmt,
    ForStmt,
    IfStmt,
    Stmt,
    seq,
)
from hidet_lang.ir.types import TensorType, int32, int64
from stdlib_ops.compute.nodes import ArgReduceExpr, ComputeTensor, ReduceExpr
from stdlib_ops.schedule.reductions import (
    ReductionLowering,
    Scope,
    combine,
    extent_product,
    identity,
    outermost_reductions,
)

WARP = 32
BUTTERFLY = (16, 8, 4, 2, 1)


def shared_reduction_axes(axes: tuple[Var, ...], value: Expr) -> tuple[Var, ...] | None:
    """The group axes of an output (its element at `axes` is `value`): the output axes its outermost reductions
    read, in order, when a block per group is the schedule it needs; None when it has no reduction, or when each
    reduction serves one element and none holds a nested reduction that would be recomputed per point of it."""
    tops = outermost_reductions(value)
    if not tops:
        return None
    read = {v for r in tops for v in collect(r, Var)}
    group = tuple(a for a in axes if a in read)
    nested = any(collect(r.body, (ReduceExpr, ArgReduceExpr)) for r in tops)
    return group if len(group) < len(axes) or nested else None


def block_per_group(out: ComputeTensor, param: Var, axes: tuple[Var, ...], value: Expr, group: tuple[Var, ...],
                    block: int, names: Iterator[int]) -> tuple[Stmt, Expr]:
    """The body and grid of a kernel of `block` threads computing `out` (stored to `param`; its element at `axes`
    is `value`) a block per point of the `group` axes."""
    shape = dict(zip(axes, out.shape))
    inner = tuple(a for a in axes if a not in group)
    groups = extent_product(tuple(shape[a] for a in group))
    g = Var(f"group{next(names)}", int32)
    stmts: list[Stmt] = [*unflatten(g, group, tuple(shape[a] for a in group))]
    shared = _SharedReductions(frozenset(group), frozenset(inner), block, stmts, names)
    per_element = shared.visit(value)
    e = Var(f"e{next(names)}", int32)
    scopes = [Scope(), Scope()]
    lowering = ReductionLowering(scopes, dict.fromkeys(group, 0) | dict.fromkeys(inner, 1), names)
    lowered = lowering.value(per_element, 1)
    store = BufferStoreStmt(param, axes or (Constant(0, int32),), lowered)
    element_loop = ForStmt(e, threadIdx.x, extent_product(tuple(shape[a] for a in inner)), Constant(block, int32),
                           seq([*unflatten(e, inner, tuple(shape[a] for a in inner)), *scopes[0].prelude,
                                *scopes[1].prelude, store]))
    body = ForStmt(g, blockIdx.x, groups, gridDim.x, seq([*stmts, element_loop]))
    return body, _at_least_one(groups)


class _SharedReductions(IRRewriter):
    """Replaces each reduction that reads no inner axis (and no enclosing reduction's axis) by a variable that the
    block computes together, appending the statements computing it to `stmts`."""

    def __init__(self, group: frozenset[Var], inner: frozenset[Var], block: int, stmts: list[Stmt],
                 names: Iterator[int]) -> None:
        super().__init__()
        self.group, self.inner, self.block, self.stmts, self.names = group, inner, block, stmts, names
        self.enclosing: frozenset[Var] = frozenset()
        self.done: dict[Expr, Var] = {}

    def _fresh(self, prefix: str, t: object) -> Var:
        return Var(f"{prefix}{next(self.names)}", t)

    def _is_shared(self, r: ReduceExpr | ArgReduceExpr) -> bool:
        reads = set(collect(r, Var))
        return not reads & (self.inner | self.enclosing)

    def _visit_body(self, r: ReduceExpr | ArgReduceExpr) -> Expr:
        saved = self.enclosing
        self.enclosing = saved | set(_axes(r))
        try:
            return self.visit(r.body)
        finally:
            self.enclosing = saved

    def visit_ReduceExpr(self, r: ReduceExpr) -> Expr:
        if r in self.done:
            return self.done[r]
        body = self._visit_body(r)
        if not self._is_shared(r):
            return r if body is r.body else ReduceExpr(r.axes, r.extents, body, r.kind, r.dtype)
        acc = self._block_reduce(r, body)
        self.done[r] = acc
        return acc

    def visit_ArgReduceExpr(self, r: ArgReduceExpr) -> Expr:
        if r in self.done:
            return self.done[r]
        body = self._visit_body(r)
        if not self._is_shared(r):
            return r if body is r.body else ArgReduceExpr(r.axis, r.extent, body, r.kind)
        index = self._first_thread_arg_reduce(ArgReduceExpr(r.axis, r.extent, body, r.kind))
        self.done[r] = index
        return index

    def _block_reduce(self, r: ReduceExpr, body: Expr) -> Var:
        """Statements computing `r` (with `body`) by the whole block; the variable every thread ends with."""
        kind = "sum" if r.kind == "mean" else r.kind
        acc = self._fresh("acc", r.dtype)
        k = self._fresh("k", int32)
        axes = tuple(self._fresh("r", a.type) for a in r.axes)
        scopes = [Scope(), Scope()]
        level_of = dict.fromkeys(self.group, 0) | dict.fromkeys(axes, 1)
        term = ReductionLowering(scopes, level_of, self.names).value(substitute(body, dict(zip(r.axes, axes))), 1)
        stride_loop = ForStmt(k, threadIdx.x, extent_product(r.extents), Constant(self.block, int32),
                              seq([*unflatten(k, axes, r.extents), *scopes[1].prelude,
                                   AssignStmt(acc, combine(kind, acc, term))]))
        warps = self.block // WARP
        partials = self._fresh("partials", TensorType(r.dtype, (warps,)))
        w = self._fresh("w", int32)
        lane_zero = BinaryOp("==", BinaryOp("%", threadIdx.x, Constant(WARP, int32)), Constant(0, int32))
        warp = BinaryOp("/", threadIdx.x, Constant(WARP, int32))
        stmts: list[Stmt] = [DeclareStmt(acc, identity(kind, r.dtype)), *scopes[0].prelude, stride_loop]
        for delta in BUTTERFLY:
            # through a variable: `combine` of max/min reads its second operand only where the first is a number
            other = self._fresh("other", r.dtype)
            stmts += [DeclareStmt(other, shfl_xor_sync(FULL_MASK, acc, delta)),
                      AssignStmt(acc, combine(kind, acc, other))]
        stmts += [
            DeclareStmt(partials, scope=DeclScope.SHARED),
            IfStmt(lane_zero, BufferStoreStmt(partials, (warp,), acc)),
            EvaluateStmt(syncthreads()),
            AssignStmt(acc, TensorElement(partials, (Constant(0, int32),))),
            ForStmt(w, Constant(1, int32), Constant(warps, int32), Constant(1, int32),
                    AssignStmt(acc, combine(kind, acc, TensorElement(partials, (w,))))),
            EvaluateStmt(syncthreads()),  # the partials are free again for the next reduction
        ]
        if r.kind == "mean":
            count = extent_product(r.extents)
            stmts.append(AssignStmt(acc, BinaryOp("/", acc, convert(count) if count.type == r.dtype
                                                  else Cast(count, r.dtype))))
        self.stmts.extend(stmts)
        return acc

    def _first_thread_arg_reduce(self, r: ArgReduceExpr) -> Var:
        """Statements in which the block's first thread finds `r` and hands it to the others; its variable."""
        scopes = [Scope()]
        found = ReductionLowering(scopes, dict.fromkeys(self.group, 0), self.names).value(r, 0)
        slot = self._fresh("found", TensorType(int64, (1,)))
        index = self._fresh("index", int64)
        zero = (Constant(0, int32),)
        self.stmts.extend([
            DeclareStmt(slot, scope=DeclScope.SHARED),
            IfStmt(BinaryOp("==", threadIdx.x, Constant(0, int32)),
                   seq([*scopes[0].prelude, BufferStoreStmt(slot, zero, found)])),
            EvaluateStmt(syncthreads()),
            DeclareStmt(index, TensorElement(slot, zero)),
            EvaluateStmt(syncthreads()),
        ])
        return index


def _axes(r: ReduceExpr | ArgReduceExpr) -> tuple[Var, ...]:
    return (r.axis,) if isinstance(r, ArgReduceExpr) else r.axes


def _at_least_one(n: Expr) -> Expr:
    """`n` blocks, but one where `n` is 0 (an empty output launches a block that loops over nothing)."""
    if isinstance(n, Constant):
        return Constant(max(1, n.value), int32)
    return IfThenElse(BinaryOp(">", n, Constant(0, int32)), n, Constant(1, int32))


def unflatten(flat: Expr, axes: tuple[Var, ...], shape: tuple) -> list[Stmt]:
    """Declarations of `axes` as the row-major coordinates of `flat` in `shape`."""
    decls: list[Stmt] = []
    stride: Expr = Constant(1, int32)
    for axis, extent in reversed(list(zip(axes, shape))):
        coord = flat if _is_one(stride) else BinaryOp("/", flat, stride)
        decls.append(DeclareStmt(axis, BinaryOp("%", coord, convert(extent))))
        stride = convert(extent) if _is_one(stride) else BinaryOp("*", stride, convert(extent))
    return decls[::-1]


def _is_one(e: Expr) -> bool:
    return isinstance(e, Constant) and e.value == 1
