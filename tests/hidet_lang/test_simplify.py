"""`simplify` preserves values; the Python evaluator agrees with the C compiler (negative `/` and `%` included)."""

from __future__ import annotations

from unittest import mock

import numpy as np
from hypothesis import HealthCheck, Phase, assume, given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, i64, meta
from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import c_div, c_mod, evaluate, wrap
from hidet_lang.ir.functor import substitute
from hidet_lang.ir.types import DataType, PointerType, int8, int16, int32, int64, uint8, uint16, uint32, uint64
from hidet_lang.passes import pipeline
from hidet_lang.passes.simplify import simplify
from hidet_lang.testing import example_count

X = E.Var("x", int64)
Y = E.Var("y", int64)
OPS = ("+", "-", "*", "/", "%")


def safe_divisor(e: E.Expr) -> E.Expr:
    """`e`, or 7 where it is 0, so that generated programs never divide by zero."""
    return E.IfThenElse(E.BinaryOp("!=", e, E.Constant(0, int64)), e, E.Constant(7, int64))


@st.composite
def int_exprs(draw: st.DrawFn, depth: int = 3) -> E.Expr:
    """Random integer expressions over X and Y with small constants (negative ones too)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        return draw(st.sampled_from([X, Y]) | st.integers(-9, 9).map(lambda v: E.Constant(v, int64)))
    op = draw(st.sampled_from(OPS + ("neg", "if")))
    a = draw(int_exprs(depth - 1))
    if op == "neg":
        return E.UnaryOp("-", a)
    b = draw(int_exprs(depth - 1))
    if op == "if":
        return E.IfThenElse(E.BinaryOp("<", a, b), a, b)
    return E.BinaryOp(op, a, safe_divisor(b) if op in ("/", "%") else b)


values = st.integers(-60, 60)


@settings(max_examples=example_count(400), deadline=None)
@given(int_exprs(), values, values)
def test_simplify_preserves_values(e: E.Expr, x: int, y: int) -> None:
    env = {X: x, Y: y}
    assert evaluate(simplify(e), env) == evaluate(e, env), f"{e}  ->  {simplify(e)}"


@settings(max_examples=example_count(200), deadline=None)
@given(int_exprs(), values, values)
def test_simplify_with_constant_operands_folds_completely(e: E.Expr, x: int, y: int) -> None:
    bound = substitute(e, {X: E.Constant(x, int64), Y: E.Constant(y, int64)})
    folded = simplify(bound)
    assert isinstance(folded, E.Constant), str(folded)
    assert folded.value == evaluate(e, {X: x, Y: y})


@given(st.integers(-1000, 1000), st.integers(-50, 50))
def test_c_division_truncates_toward_zero(a: int, b: int) -> None:
    assume(b != 0)
    assert c_div(a, b) == int(np.fix(a / b)) or abs(a) > 2**52
    assert c_mod(a, b) == a - c_div(a, b) * b
    assert c_mod(a, b) == 0 or (c_mod(a, b) > 0) == (a > 0)


def test_folding_wraps_at_the_type_width() -> None:
    big = E.BinaryOp("+", E.Constant(2**31 - 1, int32), E.Constant(1, int32))
    assert simplify(big) == E.Constant(-(2**31), int32)


def test_shifts_past_the_width_fold_as_numpys() -> None:
    def shift(op: str, a: int, count: int, t: DataType = int64) -> E.Expr:
        return simplify(E.BinaryOp(op, E.Constant(a, t), E.Constant(count, int64)))

    for count in (-1, 64, 65, 2**40):  # folding 3 << 2**40 must not build a huge Python int
        assert shift("<<", 3, count) == E.Constant(0, int64)
        assert shift(">>", 3, count) == E.Constant(0, int64)
        assert shift(">>", -3, count) == E.Constant(-1, int64)  # the sign fills every bit
        assert shift(">>", 200, count, uint8) == E.Constant(0, uint8)
    assert shift("<<", 3, 62) == E.Constant(-(2**62), int64)
    assert shift("<<", 1, 7, int8) == E.Constant(-128, int8)
    assert shift("<<", 1, 8, int8) == E.Constant(0, int8)
    assert shift(">>", -128, 7, int8) == E.Constant(-1, int8)


def test_multiplying_an_atomic_by_zero_keeps_the_atomic() -> None:
    pointer = E.Var("p", PointerType(int32))
    atomic = E.Intrinsic("atomic_add", (pointer, E.Constant(1, int32)), int32)
    kept = E.BinaryOp("*", atomic, E.Constant(0, int32))
    assert simplify(kept) == kept
    assert simplify(E.BinaryOp("*", E.Intrinsic("threadIdx.x", (), int32), E.Constant(0, int32))) == \
        E.Constant(0, int32)


def test_simplify_returns_the_same_object_when_nothing_changes() -> None:
    e = E.BinaryOp("+", X, Y)
    assert simplify(e) is e


BATCH = 24
# The tests against compiled C do not shrink: every step of it compiles a module (minutes); a failure names the
# expression and the inputs.


# ------------------------------------------------------------------------------- every integer type, against C
INT_TYPES = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)


def type_range(t: DataType) -> tuple[int, int]:
    bits = 8 * t.nbytes
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t.kind == "int" else (0, (1 << bits) - 1)


def constants(t: DataType) -> st.SearchStrategy[E.Expr]:
    """Constants of `t`: its limits and their neighbours, small values (shift counts past the width among them, and
    -1, which wraps around in unsigned types), anything in its range."""
    lo, hi = type_range(t)
    edges = [lo, lo + 1, -1, 0, 1, 2, 7, hi - 1, hi, 1 << (4 * t.nbytes)]
    return st.one_of(st.sampled_from(edges), st.integers(-3, 8 * t.nbytes + 3), st.integers(lo, hi)).map(
        lambda v: E.Constant(wrap(v, t), t))


def typed_safe_divisor(e: E.Expr, t: DataType) -> E.Expr:
    """`e` (of type `t`), or 7 where it is 0: a division by zero is left for run time, not folded."""
    return E.IfThenElse(E.BinaryOp("!=", e, E.Constant(0, t)), e, E.Constant(7, t))


@st.composite
def typed_exprs(draw: st.DrawFn, t: DataType, depth: int = 3) -> E.Expr:
    """Random expressions of integer type `t` over X and Y (converted to `t`): arithmetic, `/` and `%` (by a
    divisor made non-zero), bitwise `& | ^ ~`, shifts by counts of any integer type (past the width and negative
    too), comparisons and logical operators on operands of other types, casts between integer types and
    conditional expressions."""
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        leaves = st.sampled_from([X, Y]).map(lambda v: v if t == int64 else E.Cast(v, t))
        return draw(leaves | constants(t))
    kind = draw(st.sampled_from(["+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>", "neg", "~", "cmp", "logic", "!",
                                 "cast", "if"]))
    sub = typed_exprs(t, depth - 1)
    other = st.sampled_from(INT_TYPES).flatmap(lambda u: typed_exprs(u, depth - 1))
    if kind in ("neg", "~"):
        return E.UnaryOp("-" if kind == "neg" else "~", draw(sub))
    if kind in ("<<", ">>"):
        counts = st.sampled_from(INT_TYPES).flatmap(
            lambda u: st.integers(-3, 8 * t.nbytes + 3).map(lambda v: E.Constant(wrap(v, u), u)))
        return E.BinaryOp(kind, draw(sub), draw(counts | other))
    if kind == "cmp":
        op = draw(st.sampled_from(sorted(E.COMPARISON_OPS)))
        return E.Cast(E.BinaryOp(op, draw(other), draw(other)), t)  # operands of two types: promoted
    if kind == "logic":
        return E.Cast(E.BinaryOp(draw(st.sampled_from(["&&", "||"])), draw(other), draw(other)), t)
    if kind == "!":
        return E.Cast(E.UnaryOp("!", draw(other)), t)
    if kind == "cast":
        return E.Cast(draw(other), t)
    a, b = draw(sub), draw(sub)
    if kind == "if":
        return E.IfThenElse(E.BinaryOp("<", draw(other), draw(other)), a, b)
    return E.BinaryOp(kind, a, typed_safe_divisor(b, t) if kind in ("/", "%") else b)


def any_typed_exprs() -> st.SearchStrategy[E.Expr]:
    return st.sampled_from(INT_TYPES).flatmap(typed_exprs)


def int64_inputs() -> st.SearchStrategy[int]:
    """Values of X and Y: the limits of every integer type and their neighbours, small values, any int64."""
    edges = sorted({v for t in INT_TYPES for lim in type_range(t) for v in (lim - 1, lim, lim + 1)
                    if -(2**63) <= v < 2**63})
    return st.one_of(st.sampled_from(edges), st.integers(-70, 70), st.integers(-(2**63), 2**63 - 1))


def compiled_without_simplify(exprs: list[E.Expr], inputs: list[tuple[int, int]]) -> np.ndarray:
    """The value of each expression (converted to int64) at each input pair, computed by the compiled C of the
    expressions as they are: the lowering's `simplify` step is left out, so that C, not `evaluate`, computes the
    operations on constants."""
    n, count = len(inputs), len(exprs)

    def expression(k: int, x: E.Expr, y: E.Expr) -> E.Expr:
        return E.Cast(substitute(exprs[k], {X: x, Y: y}), int64)

    with hidet.script_module() as module:

        @hidet.script
        def run(xs: i64[n], ys: i64[n], out: i64[count, n]):
            attrs.func_kind = "public"
            for i in range(n):
                for k in meta.range(count):
                    out[k, i] = expression(k, xs[i], ys[i])

    xs = np.array([p[0] for p in inputs], dtype=np.int64)
    ys = np.array([p[1] for p in inputs], dtype=np.int64)
    out = np.zeros((count, n), dtype=np.int64)
    steps = tuple(step for step in pipeline.STEPS if step[0] != "simplify")
    with mock.patch.object(pipeline, "STEPS", steps):
        module.build()(xs, ys, out)
    return out


@settings(max_examples=example_count(50), deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(any_typed_exprs(), min_size=BATCH, max_size=BATCH),
       st.lists(st.tuples(int64_inputs(), int64_inputs()), min_size=16, max_size=16))
def test_evaluator_and_simplify_agree_with_compiled_c_in_every_integer_type(
        exprs: list[E.Expr], inputs: list[tuple[int, int]]) -> None:
    """The compiled C is the oracle: for expressions of every integer type, `evaluate(e)`, `evaluate(simplify(e))`
    and the compiled C of `simplify(e)` all equal the compiled C of `e` (converted to int64)."""
    simplified = [simplify(e) for e in exprs]
    out = compiled_without_simplify(exprs + simplified, inputs)
    for k, (e, s) in enumerate(zip(exprs, simplified)):
        for i, (x, y) in enumerate(inputs):
            env = {X: x, Y: y}
            c = int(out[k, i])
            assert wrap(evaluate(e, env), int64) == c, f"evaluate({e}) at x={x}, y={y}: C gives {c}"
            assert wrap(evaluate(s, env), int64) == c, f"evaluate({s}), simplified from {e}, at x={x}, y={y}"
            assert int(out[BATCH + k, i]) == c, f"the C of {s}, simplified from {e}, at x={x}, y={y}"
