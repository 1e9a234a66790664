"""The `simplify` pass: constant folding and algebraic identities that keep every value the same.

Requires: any IR. Ensures: every node, visited bottom-up, is rewritten by the first rule of `RULES` that
applies to it (the table below lists each rule's pattern, replacement and condition). Operations on constants
are folded with C's semantics (integer wrap-around, truncating division, `%` with the dividend's sign) and the
DSL's shifts (a count outside the width gives numpy's 0, or -1 for `>>` of a negative value), as
`hidet_lang.ir.evaluate` computes them; `x + 0`, `x - 0`, `0 + x`, `x * 1`, `1 * x` and (on integers) `x / 1`
lose the identity; `x * 0`, `0 * x` and `x % 1` become 0 on integers when the expression has no calls and no
intrinsic with effects; `(x + c1) + c2` and `(x * c1) * c2` on integers become `x + (c1 + c2)` and
`x * (c1 * c2)`; casts of constants fold and casts to the operand's own type go; `if` statements and
conditional expressions with constant conditions keep one side. The identities need operands of one type.
Division by a constant zero and conversions of NaN, infinity or out-of-range floats to an integer are left for
the program to meet at run time.
Every node a rule creates carries the span of the node it replaces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.evaluate import convert_value, evaluate
from hidet_lang.ir.functor import IRRewriter, collect
from hidet_lang.ir.intrinsics import has_effects
from hidet_lang.ir.node import Node, at
from hidet_lang.ir.types import DataType

# ---------------------------------------------------------------------------------------------- patterns


class Match(dict[str, Any]):
    """The bindings of a matched pattern, read as attributes: `m.x`; `m.e` is the whole matched node."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class Pattern:
    """Base of patterns: `match` says whether `value` has the pattern's shape and records bindings in `m`."""

    def match(self, value: Any, m: Match) -> bool:
        raise NotImplementedError


@dataclass(frozen=True)
class Wild(Pattern):
    """Matches any instance of `cls` (by default anything, None included) and binds it to `name`."""

    name: str
    cls: type = object

    def match(self, value: Any, m: Match) -> bool:
        if not isinstance(value, self.cls):
            return False
        m[self.name] = value
        return True


@dataclass(frozen=True)
class Const(Pattern):
    """Matches a `Constant`, bound to `name` when given; with `value`, only a non-bool constant equal to it."""

    name: str | None = None
    value: int | None = None

    def match(self, value: Any, m: Match) -> bool:
        if not isinstance(value, E.Constant):
            return False
        if self.value is not None and (isinstance(value.value, bool) or value.value != self.value):
            return False
        if self.name is not None:
            m[self.name] = value
        return True


@dataclass(frozen=True)
class Shape(Pattern):
    """Matches a node of class `cls` whose fields match: a field's entry is a pattern or a value it must equal."""

    cls: type[Node]
    fields: tuple[tuple[str, Any], ...]

    def match(self, value: Any, m: Match) -> bool:
        if not isinstance(value, self.cls):
            return False
        for name, expected in self.fields:
            field = getattr(value, name)
            if isinstance(expected, Pattern):
                if not expected.match(field, m):
                    return False
            elif field != expected:
                return False
        return True


def binary(op: str | None, a: Pattern, b: Pattern) -> Shape:
    """The pattern `a op b` (any operator when `op` is None)."""
    operands = (("a", a), ("b", b))
    return Shape(E.BinaryOp, operands if op is None else (("op", op), *operands))


def unary(op: str, a: Pattern) -> Shape:
    """The pattern `op a`."""
    return Shape(E.UnaryOp, (("op", op), ("a", a)))


def cast(a: Pattern) -> Shape:
    """The pattern `cast(a)` to any type."""
    return Shape(E.Cast, (("expr", a),))


def select(cond: Pattern, then_expr: Pattern, else_expr: Pattern) -> Shape:
    """The pattern `then_expr if cond else else_expr`."""
    return Shape(E.IfThenElse, (("cond", cond), ("then_expr", then_expr), ("else_expr", else_expr)))


def if_stmt(cond: Pattern, then_body: Pattern, else_body: Pattern | None) -> Shape:
    """The pattern `if cond: then_body else: else_body` (`else_body` is None for an `if` without `else`)."""
    return Shape(S.IfStmt, (("cond", cond), ("then_body", then_body), ("else_body", else_body)))


@dataclass(frozen=True)
class Rule:
    """`pattern` is rewritten to `replacement(m)` when `condition(m)` holds; with `again`, the replacement is
    simplified once more (it holds new operations on constants)."""

    name: str
    pattern: Shape
    replacement: Callable[[Match], Node]
    condition: Callable[[Match], bool]
    again: bool = False


# ---------------------------------------------------------------------------------------------- conditions


def _has_effects(e: E.Expr) -> bool:
    return bool(collect(e, E.Call)) or any(has_effects(i.name) for i in collect(e, E.Intrinsic))


def _is_int(e: E.Expr) -> bool:
    t = e.type
    return isinstance(t, DataType) and t.is_integer


def _same_type(m: Match) -> bool:
    """The operands of the matched binary operation have one type."""
    return m.e.a.type == m.e.b.type


def _same_int_type(m: Match) -> bool:
    """The operands of the matched binary operation have one integer type."""
    return _same_type(m) and _is_int(m.e.a)


def _same_int_type_pure(m: Match) -> bool:
    """As `_same_int_type`, and the matched expression has no calls and no intrinsic with effects."""
    return _same_int_type(m) and not _has_effects(m.e)


def _fold(e: E.Expr) -> E.Constant | None:
    """`e` (an operation on constants) folded, or None where it is left for run time (a division by zero, an
    operation the type does not have: `evaluate` raises). A float cast to an integer type folds to what every
    target computes (`evaluate.float_to_int`: saturated, NaN 0)."""
    dtype = e.type
    assert isinstance(dtype, DataType)
    try:
        value = evaluate(e, {})
    except (ZeroDivisionError, OverflowError, ValueError):
        return None
    return E.Constant(convert_value(value, dtype), dtype)


def _foldable(m: Match) -> bool:
    return _fold(m.e) is not None


def _cast_to_own_type(m: Match) -> bool:
    return m.x.type == m.e.dtype


def _always(m: Match) -> bool:
    return True


def _true(m: Match) -> bool:
    """The matched constant condition holds (its value rounded to its type: `f16(1e-8)` is zero)."""
    return bool(evaluate(m.c, {}))


def _false(m: Match) -> bool:
    """The matched constant condition does not hold."""
    return not _true(m)


# ---------------------------------------------------------------------------------------------- replacements


def _folded(m: Match) -> E.Constant:
    folded = _fold(m.e)
    assert folded is not None
    return folded


def _zero(m: Match) -> E.Constant:
    return E.Constant(0, m.e.type)


def _reassociated(m: Match) -> E.BinaryOp:
    """`(x op c1) op c2` as `x op (c1 op c2)`."""
    op = m.e.op
    return E.BinaryOp(op, m.x, E.BinaryOp(op, m.c1, m.c2))


def _empty(m: Match) -> S.SeqStmt:
    return S.SeqStmt(())


# ---------------------------------------------------------------------------------------------- the table

x, y, s, t, else_or_none = Wild("x"), Wild("y"), Wild("s"), Wild("t", S.Stmt), Wild("t")
c, c1, c2 = Const("c"), Const("c1"), Const("c2")
ZERO, ONE = Const(value=0), Const(value=1)

# The first rule (in this order) whose pattern matches a node and whose condition holds rewrites it; a node no
# rule matches stays. "c1 op c2 kept" leaves an operation on constants that `_fold` leaves for run time (division
# by zero) as it is, and keeps the identities below from touching it.
RULES: tuple[Rule, ...] = (
    # name                pattern                                        replacement        condition       again
    Rule("c1 op c2",      binary(None, c1, c2),                          _folded,           _foldable),
    Rule("c1 op c2 kept", binary(None, c1, c2),                          lambda m: m.e,     _always),
    Rule("x + 0",         binary("+", x, ZERO),                          lambda m: m.x,     _same_int_type),
    Rule("x - 0",         binary("-", x, ZERO),                          lambda m: m.x,     _same_int_type),
    Rule("0 + x",         binary("+", ZERO, x),                          lambda m: m.x,     _same_int_type),
    Rule("x * 1",         binary("*", x, ONE),                           lambda m: m.x,     _same_type),
    Rule("x / 1",         binary("/", x, ONE),                           lambda m: m.x,     _same_int_type),
    Rule("1 * x",         binary("*", ONE, x),                           lambda m: m.x,     _same_type),
    Rule("x * 0",         binary("*", x, ZERO),                          _zero,             _same_int_type_pure),
    Rule("0 * x",         binary("*", ZERO, x),                          _zero,             _same_int_type_pure),
    Rule("x % 1",         binary("%", x, ONE),                           _zero,             _same_int_type_pure),
    Rule("(x + c1) + c2", binary("+", binary("+", x, c1), c2),           _reassociated,     _same_int_type, True),
    Rule("(x * c1) * c2", binary("*", binary("*", x, c1), c2),           _reassociated,     _same_int_type, True),
    Rule("!c",            unary("!", c),                                 _folded,           _foldable),
    Rule("-c",            unary("-", c),                                 _folded,           _foldable),
    Rule("cast(c)",       cast(c),                                       _folded,           _foldable),
    Rule("cast(x)",       cast(x),                                       lambda m: m.x,     _cast_to_own_type),
    Rule("c ? x : y",     select(c, x, y),                               lambda m: m.x,     _true),
    Rule("!c ? x : y",    select(c, x, y),                               lambda m: m.y,     _false),
    Rule("if c: s; _",    if_stmt(c, s, else_or_none),                   lambda m: m.s,     _true),
    Rule("if !c: s; t",   if_stmt(c, s, t),                              lambda m: m.t,     _false),
    Rule("if !c: s",      if_stmt(c, s, None),                           _empty,            _false),
)

_RULES_BY_CLASS: dict[type, tuple[Rule, ...]] = {
    cls: tuple(r for r in RULES if r.pattern.cls is cls) for cls in {r.pattern.cls for r in RULES}
}


def first_rule(node: Node) -> tuple[Rule, Match] | None:
    """The first rule of `RULES` that applies at the root of `node`, with its bindings; None when none does."""
    for rule in _RULES_BY_CLASS.get(type(node), ()):
        m = Match(e=node)
        if rule.pattern.match(node, m) and rule.condition(m):
            return rule, m
    return None


class Simplifier(IRRewriter):
    """Rewrites every node bottom-up with the rules of `RULES` (see the module docstring)."""

    def visit(self, node: Any) -> Any:
        """`node` with its children simplified, then rewritten by the first rule that applies at its root."""
        if not isinstance(node, Node):
            return super().visit(node)
        node = self.rebuild(node)
        found = first_rule(node)
        if found is None:
            return node
        rule, m = found
        with at(node.span):
            new = rule.replacement(m)
        return self.visit(new) if rule.again else new


def simplify(node: Any) -> Any:
    """`node` (an expression, statement, function or module) with its expressions simplified.

    Requires: any IR. Ensures: the same values (see the module docstring); the input object itself when no rule
    applies anywhere in it."""
    return Simplifier().visit(node)
