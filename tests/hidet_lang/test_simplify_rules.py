"""Each rule of `simplify`'s table (`hidet_lang.passes.simplify.RULES`) on its own.

- every rule fires on an example, and gives the expected result there (a rule that an earlier one shadows, or
  whose condition never holds, fails here);
- every rule preserves values: hypothesis builds random instances of the rule's pattern (random operand types,
  values over each type's whole range, negative ones and wrap-around included) and compares the value of the
  original and the simplified node under `hidet_lang.ir.evaluate` (statements run through a small interpreter);
- folded constants agree with values computed independently of `evaluate`: numpy's fixed-width arithmetic,
  values worked out by hand, and the C compiler running the same operations on run-time values;
- known disagreements between the folding (that is, `evaluate`) and C are recorded as strict xfails.
"""

from __future__ import annotations

import itertools
import math
import operator
import re
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, i64, meta
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.evaluate import convert_value, evaluate, fold, round_float
from hidet_lang.ir.node import Node, at, child_field_names
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    bfloat16,
    boolean,
    float16,
    float32,
    float32x8,
    float64,
    int8,
    int16,
    int32,
    int64,
    uint8,
    uint16,
    uint32,
    uint64,
)
from hidet_lang.passes.simplify import RULES, Const, Match, Pattern, Rule, Shape, Wild, first_rule, simplify
from hidet_lang.testing import example_count

INT_TYPES = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)
FLOAT_TYPES = (float16, bfloat16, float32, float64)
SCALAR_TYPES = (boolean, *INT_TYPES, *FLOAT_TYPES)
BINARY_OPS = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", "<=", ">", ">=", "==", "!=", "&&", "||")
UNDEFINED = (ZeroDivisionError, ValueError, OverflowError)  # what `evaluate` raises where C is undefined


def int_range(t: DataType) -> tuple[int, int]:
    """The smallest and largest value of integer type `t`."""
    bits = 8 * t.nbytes
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t.kind == "int" else (0, (1 << bits) - 1)


def values_of(t: DataType) -> st.SearchStrategy[Any]:
    """Values of type `t`: the whole range of an integer type with its edges and small values favoured; for a
    float type, values whose sums and products round (to catch a re-association) besides any float."""
    if t.is_bool:
        return st.booleans()
    if t.is_float:
        rounding = st.sampled_from([0.1, -0.1, 1 / 3, 3.0, 1e8, -1e8, 1e-8, 2.0**30, -0.0, math.inf, math.nan])
        return rounding | st.floats(width=16 if t == float16 else 32 if t.nbytes <= 4 else 64)
    lo, hi = int_range(t)
    edges = [v for v in (lo, lo + 1, -2, -1, 0, 1, 2, 7, hi - 1, hi) if lo <= v <= hi]
    return st.sampled_from(edges) | st.integers(-9, 9).filter(lambda v: lo <= v <= hi) | st.integers(lo, hi)


def same_value(a: Any, b: Any) -> bool:
    """`a == b`, with NaN equal to NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


# ---------------------------------------------------------------------------------------------- instances


class Instance:
    """Builds a random node matching a pattern; `variables` are the variables it uses."""

    def __init__(self, draw: st.DrawFn, preferred: DataType) -> None:
        self.draw = draw
        self.preferred = preferred
        self.variables: list[E.Var] = []
        self.result = E.Var("r", int64)

    def dtype(self, preferred: DataType | None = None) -> DataType:
        """Mostly `preferred` (or the instance's preferred type), sometimes any scalar type."""
        if self.draw(st.integers(0, 3)) == 0:
            return self.draw(st.sampled_from(SCALAR_TYPES))
        return preferred or self.preferred

    def var(self, t: DataType) -> E.Var:
        v = E.Var(f"v{len(self.variables)}", t)
        self.variables.append(v)
        return v

    def operand(self, t: DataType) -> E.Expr:
        """A non-constant expression of type `t` that no rule rewrites."""
        kind = self.draw(st.sampled_from(["var", "var", "binary", "cast", "neg"]))
        if kind == "binary" and t.is_bool:
            u = self.draw(st.sampled_from(SCALAR_TYPES))
            return E.BinaryOp(self.draw(st.sampled_from(["<", "=="])), self.var(u), self.var(u))
        if kind == "binary":
            return E.BinaryOp(self.draw(st.sampled_from(["+", "-", "*", "/"])), self.var(t), self.var(t))
        if kind == "cast":
            u = self.draw(st.sampled_from([u for u in SCALAR_TYPES if u != t]))
            return E.Cast(self.var(u), t)
        if kind == "neg" and not t.is_bool:
            return E.UnaryOp("-", self.var(t))
        return self.var(t)

    def stmt(self) -> S.Stmt:
        """One or two assignments of random int64 values to the result variable."""
        stores = [S.AssignStmt(self.result, self.operand(int64)) for _ in range(self.draw(st.integers(1, 2)))]
        return S.seq(stores)

    def build(self, p: Pattern | Any, t: DataType, field: str = "") -> Any:
        """A value matching `p` for the field named `field`; `t` is the type wanted for an expression."""
        if not isinstance(p, Pattern):
            return p
        if isinstance(p, Wild):
            if field == "else_body" and p.cls is object and self.draw(st.booleans()):
                return None
            return self.stmt() if field in ("then_body", "else_body") else self.operand(t)
        if isinstance(p, Const):
            if p.value is not None:
                u = t if not t.is_bool else self.draw(st.sampled_from(INT_TYPES + FLOAT_TYPES))
                return E.Constant(float(p.value) if u.is_float else p.value, u)
            u = self.dtype(t)
            return E.Constant(self.draw(values_of(u)), u)
        assert isinstance(p, Shape)
        fixed = dict(p.fields)
        fields: dict[str, Any] = {}
        for name in child_field_names(p.cls):
            if name in fixed:
                sub = fixed[name]
                if name == "cond":
                    fields[name] = self.build(sub, self.dtype(boolean))
                elif name in ("then_body", "else_body"):
                    fields[name] = self.build(sub, t, name)
                else:
                    fields[name] = self.build(sub, self.dtype(t))
            elif name == "op":
                fields[name] = self.draw(st.sampled_from(BINARY_OPS))
            elif name == "dtype":
                fields[name] = self.dtype(t)
            else:
                raise AssertionError(f"no way to draw field {name} of {p.cls.__name__}")
        return p.cls(**fields)


@st.composite
def instances(draw: st.DrawFn, rule: Rule) -> tuple[Node, Instance]:
    """A random node matching `rule`'s pattern, and the instance (its variables) it came from."""
    inst = Instance(draw, draw(st.sampled_from(SCALAR_TYPES)))
    return inst.build(rule.pattern, inst.preferred), inst


def run(s: S.Stmt, env: dict[E.Var, Any]) -> dict[E.Var, Any]:
    """The variables after running statement `s` (assignments, sequences and ifs) from `env`."""
    env = dict(env)
    if isinstance(s, S.SeqStmt):
        for item in s.stmts:
            env = run(item, env)
    elif isinstance(s, S.AssignStmt):
        env[s.var] = convert_value(evaluate(s.value, env), s.var.type)
    elif isinstance(s, S.IfStmt):
        branch = s.then_body if evaluate(s.cond, env) else s.else_body
        if branch is not None:
            env = run(branch, env)
    else:
        raise TypeError(f"cannot run {type(s).__name__}")
    return env


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
@settings(max_examples=example_count(60), deadline=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_rule_preserves_values(rule: Rule, data: st.DataObject) -> None:
    node, inst = data.draw(instances(rule))
    found = first_rule(node)
    assume(found is not None and found[0] is rule)
    env: dict[E.Var, Any] = {v: data.draw(values_of(v.type)) for v in inst.variables}
    new = simplify(node)
    # Where the original's value is undefined in C (`evaluate` raises), any result will do.
    if isinstance(node, S.Stmt):
        env[inst.result] = 0
        try:
            expected = run(node, env)
        except UNDEFINED:
            return
        assert run(new, env) == expected, f"{node}  ->  {new}"
        return
    try:
        expected = evaluate(node, env)
    except UNDEFINED:
        return
    assert same_value(evaluate(new, env), expected), f"{node}  ->  {new} with {env}"


# ---------------------------------------------------------------------------------------------- examples

X = E.Var("x", int32)
F = E.Var("f", float32)
B = E.Var("b", boolean)
P = E.Var("p", PointerType(int32))


def i(v: int, t: DataType = int32) -> E.Constant:
    return E.Constant(v, t)


def body(k: int) -> S.Stmt:
    return S.AssignStmt(X, i(k))


EXAMPLES: dict[str, tuple[Node, Node]] = {
    "c1 op c2": (E.BinaryOp("/", i(-7), i(2)), i(-3)),
    "c1 op c2 kept": (E.BinaryOp("%", i(5), i(0)), E.BinaryOp("%", i(5), i(0))),
    "x + 0": (E.BinaryOp("+", X, i(0)), X),
    "x - 0": (E.BinaryOp("-", X, i(0)), X),
    "0 + x": (E.BinaryOp("+", i(0), X), X),
    "x * 1": (E.BinaryOp("*", F, E.Constant(1.0, float32)), F),
    "x / 1": (E.BinaryOp("/", X, i(1)), X),
    "1 * x": (E.BinaryOp("*", i(1), X), X),
    "x * 0": (E.BinaryOp("*", X, i(0)), i(0)),
    "0 * x": (E.BinaryOp("*", i(0), X), i(0)),
    "x % 1": (E.BinaryOp("%", X, i(1)), i(0)),
    "(x + c1) + c2": (E.BinaryOp("+", E.BinaryOp("+", X, i(3)), i(-3)), X),
    "(x * c1) * c2": (E.BinaryOp("*", E.BinaryOp("*", X, i(3)), i(5)), E.BinaryOp("*", X, i(15))),
    "!c": (E.UnaryOp("!", E.Constant(0, int32)), E.Constant(True, boolean)),
    "-c": (E.UnaryOp("-", i(-128, int8)), i(-128, int8)),
    "cast(c)": (E.Cast(E.Constant(-2.7, float64), int32), i(-2)),
    "cast(x)": (E.Cast(X, int32), X),
    "c ? x : y": (E.IfThenElse(E.Constant(True, boolean), X, i(4)), X),
    "!c ? x : y": (E.IfThenElse(E.Constant(0, int32), X, i(4)), i(4)),
    "if c: s; _": (S.IfStmt(E.Constant(True, boolean), body(1), body(2)), body(1)),
    "if !c: s; t": (S.IfStmt(E.Constant(False, boolean), body(1), body(2)), body(2)),
    "if !c: s": (S.IfStmt(E.Constant(False, boolean), body(1)), S.SeqStmt(())),
}


def test_every_rule_has_an_example() -> None:
    assert list(EXAMPLES) == [r.name for r in RULES]


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_rule_fires_on_its_example(name: str) -> None:
    before, after = EXAMPLES[name]
    found = first_rule(before)
    assert found is not None and found[0].name == name, "the rule is dead: another one, or none, applies first"
    assert simplify(before) == after


def test_conditions_keep_rules_from_firing() -> None:
    atomic = E.Intrinsic("atomic_add", (P, i(1)), int32)
    kept = [
        E.BinaryOp("/", F, E.Constant(1.0, float32)),  # x / 1 only on integers
        E.BinaryOp("*", F, E.Constant(0.0, float32)),  # x * 0 only on integers (NaN * 0 is NaN)
        E.BinaryOp("+", F, E.Constant(0.0, float32)),  # x + 0 only on integers (-0.0 + 0.0 is +0.0)
        E.BinaryOp("+", E.Constant(0.0, float32), F),
        E.BinaryOp("-", F, E.Constant(-0.0, float32)),  # -0.0 - -0.0 is +0.0
        E.BinaryOp("*", atomic, i(0)),  # x * 0 keeps effects
        E.BinaryOp("%", E.Call("f", (), int32), i(1)),  # so does x % 1
        E.BinaryOp("+", X, i(0, int64)),  # identities need one type: x + 0 here is an int64
        E.BinaryOp("+", E.BinaryOp("+", F, E.Constant(1.0, float32)), E.Constant(2.0, float32)),  # no float reassoc
        E.BinaryOp("/", i(1), i(0)),  # a division by zero is left for run time
    ]
    for e in kept:
        assert simplify(e) is e, str(e)


def test_new_nodes_carry_the_span_of_the_node_they_replace() -> None:
    span = Span("kernel.py", 7, 4)
    with at(span):
        s = S.IfStmt(E.Constant(False, boolean), body(1))
        e = E.BinaryOp("+", E.BinaryOp("+", X, i(3)), i(4))
    empty = simplify(s)
    assert isinstance(empty, S.SeqStmt) and empty.span == span
    folded = simplify(e)
    assert isinstance(folded, E.BinaryOp) and folded.span == span and folded.b.span == span


# ---------------------------------------------------------------------------------------------- independent values


def numpy_fold(op: str, a: int, b: int, t: DataType) -> int:
    """`a op b` on type `t` computed with numpy's fixed-width arithmetic (C truncating `/`, `%` with the
    dividend's sign), not with `evaluate`."""
    x, y = np.array([a], dtype=t.numpy_name), np.array([b], dtype=t.numpy_name)
    with np.errstate(all="ignore"):
        if op == "/":
            q = np.floor_divide(x, y)
            if np.fmod(x, y)[0] != 0 and (a < 0) != (b < 0):
                q = q + np.array([1], dtype=t.numpy_name)
            return int(q[0])
        results = {"+": np.add, "-": np.subtract, "*": np.multiply, "%": np.fmod, "&": np.bitwise_and,
                   "|": np.bitwise_or, "^": np.bitwise_xor, "<<": np.left_shift, ">>": np.right_shift}
        return int(results[op](x, y)[0])


@settings(max_examples=example_count(400), deadline=None)
@given(st.sampled_from(INT_TYPES).flatmap(lambda t: st.tuples(st.just(t), values_of(t), values_of(t))),
       st.sampled_from(["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"]))
def test_folded_integer_constants_match_numpy(operands: tuple[DataType, int, int], op: str) -> None:
    t, a, b = operands
    if op in ("<<", ">>") and a % 2:  # half the counts near the width (past it too), the others any value of t
        b = convert_value(b % (8 * t.nbytes + 6) - 3, t)
    e = E.BinaryOp(op, E.Constant(a, t), E.Constant(b, t))
    if op in ("/", "%") and b == 0:
        assert simplify(e) is e  # left for the program to meet at run time
        return
    assert simplify(e) == E.Constant(numpy_fold(op, a, b, t), t)


HAND_FOLDED: list[tuple[E.Expr, E.Constant]] = [
    (E.BinaryOp("+", i(2**31 - 1), i(1)), i(-(2**31))),
    (E.BinaryOp("-", i(0, uint32), i(1, uint32)), i(4294967295, uint32)),
    (E.BinaryOp("+", i(100, int8), i(100, int8)), i(-56, int8)),
    (E.BinaryOp("*", i(200, uint8), i(2, uint8)), i(144, uint8)),
    (E.BinaryOp("*", i(32767, int16), i(2, int16)), i(-2, int16)),
    (E.BinaryOp("/", i(-32768, int16), i(-1, int16)), i(-32768, int16)),
    (E.BinaryOp("/", i(-7), i(2)), i(-3)),
    (E.BinaryOp("/", i(-7), i(-2)), i(3)),
    (E.BinaryOp("%", i(-7), i(2)), i(-1)),
    (E.BinaryOp("%", i(7), i(-2)), i(1)),
    (E.BinaryOp("%", i(-(2**63), int64), i(-1, int64)), i(0, int64)),
    (E.BinaryOp("<", i(-1), i(1, uint32)), E.Constant(False, boolean)),  # -1 converts to 4294967295
    (E.BinaryOp("<<", i(3, uint64), i(63, uint64)), i(2**63, uint64)),
    (E.BinaryOp(">>", i(-128, int8), i(1, int8)), i(-64, int8)),
    (E.UnaryOp("-", i(-128, int8)), i(-128, int8)),
    (E.UnaryOp("-", i(5, uint32)), i(4294967291, uint32)),
    (E.UnaryOp("-", E.Constant(True, boolean)), i(-1)),  # C and Python compute -true as the int -1
    (E.Cast(i(300), uint8), i(44, uint8)),
    (E.Cast(i(-1), uint16), i(65535, uint16)),
    (E.Cast(E.Constant(-2.7, float64), int32), i(-2)),
    (E.BinaryOp("+", E.BinaryOp("+", i(2**31 - 1), i(1)), i(-1)), i(2**31 - 1)),
]


@pytest.mark.parametrize(("e", "value"), HAND_FOLDED, ids=[str(e) for e, _ in HAND_FOLDED])
def test_folded_constants_match_values_worked_out_by_hand(e: E.Expr, value: E.Constant) -> None:
    assert simplify(e) == value


SAME_TYPE_OPS = ("+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "<", "==", ">=")
RUN_VALUES = (0, 1, -1, 3, -7, 100, -128, 255, 40000, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63))


def test_folded_constants_match_the_c_compiler() -> None:
    """Same-type integer operations folded by `simplify` equal the compiled C code computing them at run time
    (divisors that C leaves undefined are replaced by 1 on both sides)."""
    combos = [(op, t) for op in SAME_TYPE_OPS for t in INT_TYPES]
    pairs = list(itertools.product(RUN_VALUES, RUN_VALUES))
    n, batch = len(pairs), len(combos)

    def divisor(op: str, b: E.Expr, t: DataType) -> E.Expr:
        if op not in ("/", "%"):
            return b
        undefined = E.BinaryOp("||", E.BinaryOp("==", b, i(0, t)), E.BinaryOp("==", b, i(convert_value(-1, t), t)))
        return E.IfThenElse(undefined, i(1, t), b)

    def expression(k: int, x: E.Expr, y: E.Expr) -> E.Expr:
        op, t = combos[k]
        return E.Cast(E.BinaryOp(op, E.Cast(x, t), divisor(op, E.Cast(y, t), t)), int64)

    with hidet.script_module() as module:

        @hidet.script
        def run_ops(xs: i64[n], ys: i64[n], out: i64[batch, n]):
            attrs.func_kind = "public"
            for p in range(n):
                for k in meta.range(batch):
                    out[k, p] = expression(k, xs[p], ys[p])

    out = np.zeros((batch, n), dtype=np.int64)
    xs = np.array([convert_value(a, int64) for a, _ in pairs], dtype=np.int64)
    ys = np.array([convert_value(b, int64) for _, b in pairs], dtype=np.int64)
    module.build()(xs, ys, out)
    compared = 0
    for k, (op, t) in enumerate(combos):
        for p, (a, b) in enumerate(pairs):
            folded = simplify(expression(k, E.Constant(int(xs[p]), int64), E.Constant(int(ys[p]), int64)))
            if not isinstance(folded, E.Constant):  # a shift out of range: left for run time
                continue
            assert folded.value == out[k, p], f"{op} on {t}: {a}, {b}"
            compared += 1
    assert compared > batch * n // 2


def test_float32_folding_rounds_like_c() -> None:
    one, tiny = E.Constant(1.0, float32), E.Constant(1e-8, float32)
    folded = simplify(E.BinaryOp("-", E.BinaryOp("+", one, tiny), one))
    c = (np.float32(1.0) + np.float32(1e-8)) - np.float32(1.0)
    assert folded == E.Constant(float(c), float32)


PYTHON_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.floordiv, "%": operator.mod,
              "<<": operator.lshift, ">>": operator.rshift, "&": operator.and_, "|": operator.or_, "^": operator.xor}


def test_bool_arithmetic_folds_like_c() -> None:
    """Arithmetic on two bools (and `-b`) computes in i32, as C and Python do (`True + True == 2`); `& | ^` give a
    bool. The folded constants equal Python's values and what the compiled C computes at run time."""
    cases = [(op, a, b) for op in PYTHON_OPS for a in (False, True) for b in (False, True)
             if b or op not in ("/", "%")]  # by False: a division by zero, left for run time
    n = len(cases) + 2

    def expression(k: int, x: E.Expr, y: E.Expr) -> E.Expr:
        a, b = E.Cast(x, boolean), E.Cast(y, boolean)
        return E.Cast(E.BinaryOp(cases[k][0], a, b) if k < len(cases) else E.UnaryOp("-", a), int64)

    with hidet.script_module() as module:

        @hidet.script
        def run_bools(xs: i64[n], ys: i64[n], out: i64[n]):
            attrs.func_kind = "public"
            for k in meta.range(n):
                out[k] = expression(k, xs[k], ys[k])

    xs = np.array([a for _, a, _ in cases] + [False, True], dtype=np.int64)
    ys = np.array([b for _, _, b in cases] + [False, False], dtype=np.int64)
    out = np.zeros(n, dtype=np.int64)
    module.build()(xs, ys, out)
    for k, (op, a, b) in enumerate([*cases, ("-", False, None), ("-", True, None)]):
        operation = expression(k, E.Constant(a, boolean), E.Constant(b or False, boolean)).expr
        folded = simplify(operation)
        expected = PYTHON_OPS[op](a, b) if b is not None else -a
        assert folded == E.Constant(expected, boolean if op in E.BOOL_CLOSED_OPS else int32), (op, a, b)
        assert folded.value == out[k], (op, a, b)


def test_mixed_narrow_comparison_folds_in_the_promoted_type() -> None:
    """promote(i8, u8) is u8, and the emitted C converts both operands to it too (test_fuzz_findings checks the run
    time): -1 becomes 255, so `i8(-1) < u8(0)` is false, not C's int comparison."""
    folded = simplify(E.BinaryOp("<", i(-1, int8), i(0, uint8)))
    assert folded == E.Constant(False, boolean)


@settings(max_examples=example_count(300), deadline=None)
@given(st.floats(allow_nan=False, width=64))
def test_evaluate_rounds_floats_to_their_type_like_numpy(v: float) -> None:
    for dtype, np_type in ((float32, np.float32), (float16, np.float16)):
        with np.errstate(over="ignore"):
            expected = float(np_type(v))
        assert round_float(v, dtype) == expected


@pytest.mark.parametrize("bits", [0x7FC00000, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001], ids=hex)
def test_evaluate_keeps_every_nan_a_nan_and_infinities_infinite_in_every_float_type(bits: int) -> None:
    # NaNs with any payload (one whose bf16 rounding would carry into the sign bit included), and +-inf
    nan = float(np.array([bits], np.uint32).view(np.float32)[0])
    for dtype in (float16, bfloat16, float32, float64):
        assert math.isnan(round_float(nan, dtype)), dtype
        assert round_float(math.inf, dtype) == math.inf and round_float(-math.inf, dtype) == -math.inf, dtype


BF16_TIES = [0x3F808000, 0x3F818000, 0x3F808001, 0x3F807FFF, 0xBF818000, 0x7F7FFFFF, 0x00018000, 0x00008000]
"""float32 bit patterns at and around bf16's rounding boundary: ties to an even and to an odd bf16, just above
and just below a tie, a negative tie, the largest float32 (rounds to infinity), subnormal ties."""


@settings(max_examples=example_count(300), deadline=None)
@given(st.floats(width=32, allow_nan=False) | st.sampled_from(BF16_TIES).map(
    lambda bits: float(np.array([bits], np.uint32).view(np.float32)[0])))
def test_evaluate_rounds_to_bfloat16_like_ml_dtypes(v: float) -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")
    expected = float(np.float32(v).astype(ml_dtypes.bfloat16))
    got = round_float(v, bfloat16)
    assert got == expected and math.copysign(1, got) == math.copysign(1, expected), (v, got, expected)


@pytest.mark.parametrize("op", ["&", "|", "^", "<<", ">>"])
def test_folding_a_bitwise_operator_on_floats_is_an_error_naming_it(op: str) -> None:
    with pytest.raises(ValueError, match=f"^operator {re.escape(op)} on floats$"):
        fold(op, 1.0, 2.0, float32)


@pytest.mark.parametrize("op", ["/", "%"])
@pytest.mark.parametrize("dtype", [int8, int32, uint64])
def test_folding_an_integer_division_by_zero_raises_saying_so(op: str, dtype: DataType) -> None:
    with pytest.raises(ZeroDivisionError, match="^integer division by zero$"):
        fold(op, 7, 0, dtype)


def test_folding_bool_operands_keeps_bool_values() -> None:
    assert fold("&", True, True, boolean) is True and fold("|", False, True, boolean) is True
    assert fold("^", True, True, boolean) is False


def test_evaluate_takes_pointer_values_as_they_are_and_refuses_vectors() -> None:
    p = E.Var("p", PointerType(int32))
    assert evaluate(p, {p: 0x1234}) == 0x1234
    v = E.Var("v", float32x8)
    with pytest.raises(TypeError, match="^cannot evaluate the f32x8 vector 'v' in Python$"):
        evaluate(v, {v: 0.0})
    exp = E.Intrinsic("exp", (E.Constant(1.0, float32),), float32)  # math runs in the program, not in Python
    with pytest.raises(TypeError, match="^cannot evaluate Intrinsic in Python$"):
        evaluate(exp, {})


def test_a_match_reads_its_bindings_as_attributes_and_names_a_missing_one() -> None:
    x = E.Var("x", int32)
    m = Match(e=x, c=E.Constant(1, int32))
    assert m.e is x and m.c.value == 1
    with pytest.raises(AttributeError, match="^c2$"):
        m.c2  # noqa: B018 - the attribute access is the test
