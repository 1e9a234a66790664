"""The `simplify` pass: constant folding and algebraic identities that keep every value the same.

Requires: any IR. Ensures: operations on constants are folded with C's semantics (integer wrap-around,
truncating division, `%` with the dividend's sign); `x + 0`, `x * 1`, `x / 1`, `x - 0` lose the identity;
`x * 0` and `x % 1` become 0 on integers when `x` has no calls and no intrinsic with effects; `(x + c1) + c2`
becomes `x + (c1 + c2)`; casts of constants fold; `if` statements and conditional expressions with constant
conditions keep one side. Division by a constant zero and shifts out of range are left for the program to meet
at run time.
"""

from __future__ import annotations

from typing import Any

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.evaluate import convert_value, evaluate
from hidet_lang.ir.functor import IRRewriter, collect
from hidet_lang.ir.intrinsics import EFFECTFUL_INTRINSICS
from hidet_lang.ir.types import DataType


def _const(e: E.Expr, value: Any) -> bool:
    return isinstance(e, E.Constant) and e.value == value and not isinstance(e.value, bool)


def _has_effects(e: E.Expr) -> bool:
    return bool(collect(e, E.Call)) or any(i.name in EFFECTFUL_INTRINSICS for i in collect(e, E.Intrinsic))


def _is_int(e: E.Expr) -> bool:
    t = e.type
    return isinstance(t, DataType) and t.is_integer


class Simplifier(IRRewriter):
    """Rewrites expressions bottom-up into simpler equal ones."""

    def visit_BinaryOp(self, e: E.BinaryOp) -> E.Expr:
        e = self.rebuild(e)
        assert isinstance(e, E.BinaryOp)
        a, b, op = e.a, e.b, e.op
        result_type = e.type
        if isinstance(a, E.Constant) and isinstance(b, E.Constant) and isinstance(result_type, DataType):
            try:
                value = evaluate(e, {})
            except (ZeroDivisionError, OverflowError, ValueError):  # left for the program to meet at run time
                return e
            return E.Constant(convert_value(value, result_type), result_type, span=e.span)
        same_type = a.type == b.type
        if not same_type:
            return e
        if op == "+" and _const(b, 0) or op == "-" and _const(b, 0):
            return a
        if op == "+" and _const(a, 0):
            return b
        if op == "*" and _const(b, 1) or op == "/" and _const(b, 1) and _is_int(a):
            return a
        if op == "*" and _const(a, 1):
            return b
        if (op == "*" and (_const(a, 0) or _const(b, 0)) or op == "%" and _const(b, 1)) and _is_int(a) \
                and not _has_effects(e):
            return E.Constant(0, result_type, span=e.span)
        if op in ("+", "*") and isinstance(b, E.Constant) and isinstance(a, E.BinaryOp) and a.op == op and \
                isinstance(a.b, E.Constant) and a.type == b.type and _is_int(b):
            inner = self.visit(E.BinaryOp(op, a.b, b))
            return self.visit_BinaryOp(E.BinaryOp(op, a.a, inner, span=e.span))
        return e

    def visit_UnaryOp(self, e: E.UnaryOp) -> E.Expr:
        e = self.rebuild(e)
        assert isinstance(e, E.UnaryOp)
        if isinstance(e.a, E.Constant) and isinstance(e.type, DataType):
            if e.op == "!":
                return E.Constant(not e.a.value, e.type, span=e.span)
            if e.op == "-":
                return E.Constant(convert_value(-e.a.value, e.type), e.type, span=e.span)
        return e

    def visit_Cast(self, e: E.Cast) -> E.Expr:
        e = self.rebuild(e)
        assert isinstance(e, E.Cast)
        if isinstance(e.expr, E.Constant):
            return E.Constant(convert_value(e.expr.value, e.dtype), e.dtype, span=e.span)
        if e.expr.type == e.dtype:
            return e.expr
        return e

    def visit_IfThenElse(self, e: E.IfThenElse) -> E.Expr:
        e = self.rebuild(e)
        assert isinstance(e, E.IfThenElse)
        if isinstance(e.cond, E.Constant):
            return e.then_expr if e.cond.value else e.else_expr
        return e

    def visit_IfStmt(self, s: S.IfStmt) -> S.Stmt:
        s = self.rebuild(s)
        assert isinstance(s, S.IfStmt)
        if isinstance(s.cond, E.Constant):
            if s.cond.value:
                return s.then_body
            return s.else_body if s.else_body is not None else S.SeqStmt((), span=s.span)
        return s


def simplify(node: Any) -> Any:
    """`node` (an expression, statement, function or module) with its expressions simplified."""
    return Simplifier().visit(node)
