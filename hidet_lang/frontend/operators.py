"""Python's operators in a kernel: arithmetic, comparisons, `and`/`or`/`not` and conditional expressions.

On host values the operators are Python's own, evaluated while parsing; as soon as one operand is an IR value
the result is IR, typed by the semantics module. Python `//` and `/` on integers both lower to C division, which
truncates toward zero, and `%` to C's remainder, whose sign follows the dividend (so `-7 // 2 == -3` and
`-7 % 2 == -1` in a kernel). On floats both follow Python: `%` is the floor modulo, whose sign is the divisor's
(`-6.5 % 2.0 == 1.5`), and `//` the floored quotient that goes with it (`-6.5 // 2.0 == -4.0`), so that
`a == (a // b) * b + a % b` up to rounding. Expressions made only of host values are evaluated by Python with
its own rules, except that a list and a tuple concatenate into a list, as in Hidet Script.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

from hidet_lang.errors import DSLSyntaxError, DSLTypeError
from hidet_lang.frontend import semantics
from hidet_lang.frontend.core import ParserCore
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType, PointerType, TensorType

_HOST_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow, ast.LShift: operator.lshift,
    ast.RShift: operator.rshift, ast.BitAnd: operator.and_, ast.BitOr: operator.or_, ast.BitXor: operator.xor,
    ast.MatMult: operator.matmul,
}
_IR_BINOPS = {
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "/", ast.Mod: "%",
    ast.LShift: "<<", ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
}
_HOST_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_, ast.Invert: operator.invert}
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
_HOST_COMPARE = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge, ast.Eq: operator.eq,
    ast.NotEq: operator.ne, ast.Is: operator.is_, ast.IsNot: operator.is_not,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}


class OperatorParser(ParserCore):
    """The parser's operator expressions (`expr_BinOp`, `expr_UnaryOp`, `expr_BoolOp`, `expr_Compare`,
    `expr_IfExp`) and `binop`, which `+=` and friends share."""

    def expr_BinOp(self, node: ast.BinOp) -> Any:
        """`a op b`."""
        return self.binop(node, node.op, self.visit_expr(node.left), self.visit_expr(node.right))

    def binop(self, node: ast.AST, op: ast.operator, a: Any, b: Any) -> Any:
        """`a op b` on host values (by Python) or IR values (as IR)."""
        if not isinstance(a, E.Expr) and not isinstance(b, E.Expr):
            fn = _HOST_BINOPS.get(type(op))
            if fn is None:
                raise self.unsupported(op)
            if isinstance(op, ast.Add) and _list_and_tuple(a, b):
                return [*a, *b]
            return self.host_call(node, fn, a, b)
        if isinstance(op, ast.Pow):
            return self.power(node, a, b)
        if isinstance(op, ast.FloorDiv) and _is_float_value(a, b):
            return self.host_call(node, semantics.math_call, "floordiv", a, b)
        sym = _IR_BINOPS.get(type(op))
        if sym is None:
            raise self.error(node, f"operator {type(op).__name__} is not supported on IR values", DSLSyntaxError)
        return self.host_call(node, semantics.binary, sym, a, b)

    def power(self, node: ast.AST, a: Any, b: Any) -> E.Expr:
        """`a ** b`: small constant integer exponents become multiplications, others call pow."""
        if isinstance(b, int) and not isinstance(b, bool) and 0 < b <= 4 and isinstance(a, E.Expr):
            result = a
            for _ in range(b - 1):
                result = self.host_call(node, semantics.binary, "*", result, a)
            return result
        return self.host_call(node, semantics.math_call, "pow", a, b)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Any:
        """`-x`, `+x`, `not x`, and `~x`, which on IR values takes an address (`~a[i]`)."""
        v = self.visit_expr(node.operand)
        if not isinstance(v, E.Expr):
            return self.host_call(node, _HOST_UNARY[type(node.op)], v)
        if isinstance(node.op, ast.UAdd):
            return v
        if isinstance(node.op, ast.USub):
            self.host_call(node, semantics.scalar_type, v, "unary -")
            return E.UnaryOp("-", v)
        if isinstance(node.op, ast.Not):
            return self.host_call(node, semantics.logical_not, v)
        if isinstance(v, (E.TensorElement, E.Var)) and not isinstance(v.type, (TensorType, PointerType)) or \
                isinstance(v, E.TensorElement):
            return E.Address(v)
        if isinstance(v, E.Var) and isinstance(v.type, TensorType):
            return semantics.first_element_address(v)
        raise self.error(node, "`~` takes the address of a variable or an element, e.g. `~a[i]`")

    def expr_BoolOp(self, node: ast.BoolOp) -> Any:
        """`a and b`, `a or b`: host operands decide while parsing (short-circuiting), IR ones become `&&`/`||`."""
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = self.visit_expr(node.values[0])
        for operand in node.values[1:]:
            if not isinstance(result, E.Expr):
                if (op == "and" and not result) or (op == "or" and result):
                    return result
                result = self.visit_expr(operand)
                continue
            rhs = self.visit_expr(operand)
            if not isinstance(rhs, E.Expr):
                if (op == "and" and rhs) or (op == "or" and not rhs):
                    continue
                return rhs if op == "and" else True
            result = self.host_call(node, semantics.logical, op,
                                    semantics.condition(result, op), semantics.condition(rhs, op))
        return result

    def expr_Compare(self, node: ast.Compare) -> Any:
        """`a < b`, and chains `a < b <= c` as the conjunction of their parts."""
        left = self.visit_expr(node.left)
        result: Any = True
        for op, comparator in zip(node.ops, node.comparators):
            right = self.visit_expr(comparator)
            if not isinstance(left, E.Expr) and not isinstance(right, E.Expr):
                part = self.host_call(node, _HOST_COMPARE[type(op)], left, right)
            else:
                sym = _COMPARE.get(type(op))
                if sym is None:
                    raise self.error(node, f"`{type(op).__name__}` comparisons are not supported on IR values",
                                     DSLSyntaxError)
                part = self.host_call(node, semantics.binary, sym, left, right)
            if result is True:
                result = part
            elif isinstance(result, E.Expr) or isinstance(part, E.Expr):
                if not isinstance(part, E.Expr):
                    result = result if part else False
                elif not isinstance(result, E.Expr):
                    result = part if result else False
                else:
                    result = E.BinaryOp("&&", result, part)
            else:
                result = result and part
            if result is False:
                return False
            left = right
        return result

    def expr_IfExp(self, node: ast.IfExp) -> Any:
        """`a if c else b`: one branch on a host condition, else a conditional IR expression of their common type."""
        cond = self.visit_expr(node.test)
        if not isinstance(cond, E.Expr):
            return self.visit_expr(node.body if cond else node.orelse)
        a, b = self.visit_expr(node.body), self.visit_expr(node.orelse)
        c = self.host_call(node, semantics.condition, cond, "a conditional expression")
        ea, eb = self.host_call(node.body, E.convert, a), self.host_call(node.orelse, E.convert, b)
        t = semantics.common_type(ea.type, eb.type)
        if t is None:
            raise self.error(node, f"the branches of a conditional expression have no common type: {ea.type} and "
                                   f"{eb.type}", DSLTypeError)
        if isinstance(t, DataType):
            ea, eb = semantics.convert_to(ea, t), semantics.convert_to(eb, t)
        return E.IfThenElse(c, ea, eb)


def _is_float_value(*values: Any) -> bool:
    """Whether any of `values` is a Python float or a float IR value."""
    for v in values:
        if isinstance(v, float):
            return True
        if isinstance(v, E.Expr) and isinstance(v.type, DataType) and v.type.is_float:
            return True
    return False


def _list_and_tuple(a: Any, b: Any) -> bool:
    """Whether one of `a`, `b` is a list and the other a tuple: Hidet Script concatenates them into a list
    (`indices[:axis] + (k,)`, where a loop binds `indices` to a list), where Python refuses."""
    return {type(a), type(b)} == {list, tuple}
