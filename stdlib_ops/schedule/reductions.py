"""Lowering of reductions to loops, each hoisted to the outermost loop whose variables it uses.

`ReductionLowering.value(expr, depth)` returns `expr` with every `ReduceExpr`/`ArgReduceExpr` replaced by an
accumulator variable, and appends the statements computing each accumulator to the prelude of the loop level
(`Scope`) where all the variables the reduction reads are bound. So `softmax` computes a row's maximum and sum
once per row, not once per element, and a reduction nested in another one (a variance's mean) runs outside it.
Each lowered reduction loops over fresh variables, so a reduction that inlining copies into several places (a
computed tensor read by two sibling reductions) declares each loop variable once in the kernel.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass, field

from hidet_lang.ir.expr import BinaryOp, Cast, Constant, Expr, Var, convert
from hidet_lang.ir.functor import IRRewriter, collect, substitute
from hidet_lang.ir.stmt import AssignStmt, DeclareStmt, ForStmt, IfStmt, Stmt, seq
from hidet_lang.ir.types import DataType, int32, int64
from stdlib_ops.compute.nodes import ArgReduceExpr, ReduceExpr
from stdlib_ops.compute.primitives import extremum


@dataclass
class Scope:
    """One loop level: the statements run at its start (`prelude`) and the reductions already computed there."""

    prelude: list[Stmt] = field(default_factory=list)
    computed: dict[Expr, Var] = field(default_factory=dict)


def identity(kind: str, t: DataType) -> Expr:
    """The starting value of a `kind` accumulator of type `t`."""
    if kind in ("sum", "mean"):
        return Constant(0.0 if t.is_float else 0, t)
    if kind == "prod":
        return Constant(1.0 if t.is_float else 1, t)
    if t.is_float:
        return Constant(-math.inf if kind == "max" else math.inf, t)
    if t.is_bool:
        return Constant(kind != "max", t)
    bits = t.nbytes * 8
    low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if t.kind == "int" else (0, 2**bits - 1)
    return Constant(low if kind == "max" else high, t)


def combine(kind: str, acc: Expr, value: Expr) -> Expr:
    """`acc` combined with `value` by a `kind` reduction; `max` and `min` propagate NaN as numpy's `max` does
    (`extremum`: a NaN `acc` stays, a NaN `value` is taken), in a loop and in a tree of partial results alike."""
    if kind in ("sum", "mean"):
        return BinaryOp("+", acc, value)
    if kind == "prod":
        return BinaryOp("*", acc, value)
    return extremum(kind, acc, value)


def extent_product(extents: tuple) -> Expr:
    """The number of points of an index space."""
    total: Expr = Constant(1, int32)
    for e in extents:
        total = convert(e) if _is_one(total) else BinaryOp("*", total, convert(e))
    return total


def _is_one(e: Expr) -> bool:
    return isinstance(e, Constant) and e.value == 1


class _TopReductions(IRRewriter):
    """Replaces the outermost reductions of an expression through a callback (their bodies are not entered)."""

    def __init__(self, lower_one) -> None:
        super().__init__()
        self._lower_one = lower_one

    def visit_ReduceExpr(self, e: ReduceExpr) -> Expr:
        return self._lower_one(e)

    def visit_ArgReduceExpr(self, e: ArgReduceExpr) -> Expr:
        return self._lower_one(e)


def outermost_reductions(e: Expr) -> list[ReduceExpr | ArgReduceExpr]:
    """The reductions of `e` that no other reduction of `e` holds, without repeats, in order."""
    found: list[ReduceExpr | ArgReduceExpr] = []

    class _Find(IRRewriter):
        def visit_ReduceExpr(self, r: ReduceExpr) -> Expr:
            found.append(r)
            return r

        def visit_ArgReduceExpr(self, r: ArgReduceExpr) -> Expr:
            found.append(r)
            return r

    _Find().visit(e)
    return list(dict.fromkeys(found))


class ReductionLowering:
    """Turns reductions into accumulator loops placed in `scopes` (outermost first).

    `level_of` maps each loop variable bound so far to the index of the scope that binds it; a reduction reading
    none of them goes to scope 0."""

    def __init__(self, scopes: list[Scope], level_of: dict[Var, int], names: Iterator[int]) -> None:
        self.scopes = scopes
        self.level_of = level_of
        self._names = names

    def value(self, expr: Expr, depth: int) -> Expr:
        """`expr` (evaluated at scope `depth`) with its reductions replaced by accumulators."""
        return _TopReductions(lambda r: self._lower(r, depth)).visit(expr)

    def _fresh(self, prefix: str, t: DataType) -> Var:
        return Var(f"{prefix}{next(self._names)}", t)

    def _lower(self, r: ReduceExpr | ArgReduceExpr, depth: int) -> Var:
        bound = {a for n in collect(r, (ReduceExpr, ArgReduceExpr)) for a in _axes_of(n)}
        levels = [self.level_of[v] for v in collect(r, Var) if v in self.level_of and v not in bound]
        level = max(levels, default=0)
        scope = self.scopes[level]
        if r in scope.computed:
            return scope.computed[r]
        inner = Scope()
        saved = self.scopes
        self.scopes = self.scopes[: level + 1] + [inner]
        axes = tuple(self._fresh("k", a.type) for a in _axes_of(r))
        for a in axes:
            self.level_of[a] = level + 1
        try:
            body = self.value(substitute(r.body, dict(zip(_axes_of(r), axes))), level + 1)
        finally:
            self.scopes = saved
        if isinstance(r, ArgReduceExpr):
            acc = self._arg_reduce(r, axes[0], body, inner, scope)
        else:
            acc = self._reduce(r, axes, body, inner, scope)
        scope.computed[r] = acc
        return acc

    def _reduce(self, r: ReduceExpr, axes: tuple[Var, ...], body: Expr, inner: Scope, scope: Scope) -> Var:
        acc = self._fresh("acc", r.dtype)
        update = AssignStmt(acc, combine(r.kind, acc, body))
        scope.prelude.append(DeclareStmt(acc, identity(r.kind, r.dtype)))
        scope.prelude.append(_loops(axes, r.extents, seq([*inner.prelude, update])))
        if r.kind == "mean":
            count = extent_product(r.extents)
            scope.prelude.append(AssignStmt(acc, BinaryOp("/", acc, _cast(count, r.dtype))))
        return acc

    def _arg_reduce(self, r: ArgReduceExpr, axis: Var, body: Expr, inner: Scope, scope: Scope) -> Var:
        t = body.type
        best = self._fresh("best", t)
        index = self._fresh("index", int64)
        candidate = self._fresh("value", t)
        better = BinaryOp(">" if r.kind == "max" else "<", candidate, best)
        if t.is_float:  # numpy's rule: the first NaN wins (then `best` is NaN, which nothing replaces)
            better = BinaryOp("||", better, BinaryOp("&&", BinaryOp("!=", candidate, candidate),
                                                     BinaryOp("==", best, best)))
        update = seq([
            DeclareStmt(candidate, body),
            IfStmt(better,
                   seq([AssignStmt(best, candidate), AssignStmt(index, _cast(axis, int64))])),
        ])
        scope.prelude.append(DeclareStmt(best, identity(r.kind, t)))
        scope.prelude.append(DeclareStmt(index, Constant(0, int64)))
        scope.prelude.append(_loops((axis,), (r.extent,), seq([*inner.prelude, update])))
        return index


def _axes_of(r: ReduceExpr | ArgReduceExpr) -> tuple[Var, ...]:
    return (r.axis,) if isinstance(r, ArgReduceExpr) else r.axes


def _cast(e: Expr, t: DataType) -> Expr:
    return e if e.type == t else Cast(e, t)


def _loops(axes: tuple[Var, ...], extents: tuple, body: Stmt) -> Stmt:
    for a, n in reversed(list(zip(axes, extents))):
        body = ForStmt(a, Constant(0, int32), convert(n), Constant(1, int32), body)
    return body

