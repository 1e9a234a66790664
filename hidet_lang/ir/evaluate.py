"""Evaluate IR expressions in Python with C's semantics: the reference that `simplify` and tests rely on.

Integers wrap around at their type's width; `/` truncates toward zero and `%` takes the dividend's sign.
Shifts are numpy's (`shift`): a count that is negative or not below the width of the left operand's type gives 0
for `<<`, and for `>>` 0, or -1 for a negative signed value (the sign fills every bit).
On floats `%` is the floor modulo, as Python's: the sign of the divisor (`floor_mod`).
A float converted to an integer type rounds toward zero and saturates to the type's range, NaN giving 0
(`float_to_int`: the GPU's `cvt.rzi.sat`, which the generated code computes on every target).
Floating-point values are rounded to their type after every operation, as the compiled code computes them
(an operation on two float32 values computed in double precision and rounded once gives the float32 result).
Vector values (`f32x8`) are not evaluated here: asking raises a TypeError (no IR constant is a vector, so `simplify`
never folds one).
"""

from __future__ import annotations

import math
import numbers
import operator
import struct
from collections.abc import Callable
from typing import Any

from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType, VectorType, boolean, float32, promote


def wrap(value: int, dtype: DataType) -> int:
    """`value` reduced to the range of integer type `dtype` (two's complement)."""
    bits = dtype.nbytes * 8
    value &= (1 << bits) - 1
    if dtype.kind == "int" and value >= 1 << (bits - 1):
        value -= 1 << bits
    return value


def c_div(a: int, b: int) -> int:
    """C integer division: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def c_mod(a: int, b: int) -> int:
    """C remainder: `a - c_div(a, b) * b`, with the sign of `a`."""
    return a - c_div(a, b) * b


def shift(op: str, a: int, b: int, dtype: DataType) -> int:
    """`a << b` or `a >> b` (`op`) for `a` of integer type `dtype` (already in its range) and any count `b`, as
    numpy's `left_shift`/`right_shift` (npy_lshift, npy_rshift) compute them: within [0, width) the C shift,
    wrapped to `dtype`; beyond it (negative counts included) 0 for `<<`, and for `>>` -1 where `a` is negative
    (the sign fills every bit), else 0."""
    if 0 <= b < 8 * dtype.nbytes:
        return wrap(a << b if op == "<<" else a >> b, dtype)
    return -1 if op == ">>" and a < 0 else 0


_COMPARISONS = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq,
                "!=": operator.ne}


def ieee_div(a: float, b: float) -> float:
    """`a / b` as IEEE 754 divides: by zero, an infinity with the sign of the quotient, or NaN for 0 / 0."""
    try:
        return a / b
    except ZeroDivisionError:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)


def floor_mod(a: float, b: float) -> float:
    """The float `a % b` of the IR: `math.fmod(a, b)` moved into the sign of `b` (Python's and numpy's `%`),
    so that `a == floor(a / b) * b + a % b` up to rounding. NaN where `fmod` is undefined (`b == 0`, infinite
    `a`, a NaN operand), as C's `fmod` gives."""
    if b == 0 or math.isinf(a) or math.isnan(a) or math.isnan(b):
        return math.nan
    r = math.fmod(a, b)
    if r == 0:
        return math.copysign(0.0, b)
    return r + b if (r < 0) != (b < 0) else r


def floor_div(a: float, b: float, rounding: Callable[[float], float] = float) -> float:
    """The float `//` of the IR (the intrinsic `floordiv`): Python's and numpy's floored quotient, the one that
    goes with `floor_mod` (`1.0 // 0.1 == 9.0`, where `floor(1.0 / 0.1)` is 10); `a / b` for `b == 0`.
    `rounding` rounds each intermediate result to the type computed in (the C helper's steps, in float for f32)."""
    if b == 0:
        return ieee_div(a, b)
    mod = math.fmod(a, b) if math.isfinite(a) and not math.isnan(b) else math.nan
    div = rounding(rounding(a - mod) / b)
    if mod and (b < 0) != (mod < 0):
        div = rounding(div - 1.0)
    if div == 0:
        return math.copysign(0.0, a / b)
    q = math.floor(div) if math.isfinite(div) else div
    return q + 1.0 if rounding(div - q) > 0.5 else float(q)


_FLOAT_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": ieee_div, "%": floor_mod}
_INT_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": c_div, "%": c_mod, "&": operator.and_,
            "|": operator.or_, "^": operator.xor}


def fold(op: str, a: int | float | bool, b: int | float | bool, dtype: DataType) -> int | float | bool:
    """`a op b` computed as C would for operands converted to `dtype` (the result type for arithmetic)."""
    if op in E.LOGICAL_OPS:
        return bool(a) and bool(b) if op == "&&" else bool(a) or bool(b)
    if op in E.COMPARISON_OPS:
        return _COMPARISONS[op](a, b)
    if dtype.is_float:
        if op not in _FLOAT_OPS:
            raise ValueError(f"operator {op} on floats")
        return _FLOAT_OPS[op](float(a), float(b))
    a, b = int(a), int(b)
    if op in ("/", "%") and b == 0:
        raise ZeroDivisionError("integer division by zero")
    result = shift(op, a, b, dtype) if op in ("<<", ">>") else _INT_OPS[op](a, b)
    return wrap(result, dtype) if not dtype.is_bool else bool(result)


def operand_type_of(e: E.BinaryOp) -> DataType:
    """The type both operands of `e` are converted to before the operation (C's usual conversions): the promoted
    type for a comparison, the result's type for arithmetic (bools compute in i32, `E.BOOL_CLOSED_OPS` aside)."""
    if e.op in E.LOGICAL_OPS:
        return boolean
    if e.op in E.COMPARISON_OPS:
        return promote(e.a.type, e.b.type)
    return e.type


def evaluate(e: E.Expr, env: dict[E.Var, Any]) -> Any:
    """The value of `e` with variables taken from `env`."""
    if isinstance(e, E.Constant):
        return convert_value(e.value, e.dtype)
    if isinstance(e, E.Var):
        if isinstance(e.type, VectorType):
            raise TypeError(f"cannot evaluate the {e.type} vector '{e.name}' in Python")
        return convert_value(env[e], e.type) if isinstance(e.type, DataType) else env[e]
    if isinstance(e, E.BinaryOp):
        operand_type = operand_type_of(e)
        if isinstance(operand_type, VectorType):
            raise TypeError(f"cannot evaluate {operand_type} vector arithmetic in Python")
        a, b = evaluate(e.a, env), evaluate(e.b, env)
        if isinstance(operand_type, DataType) and operand_type.is_integer:
            a, b = wrap(int(a), operand_type), wrap(int(b), operand_type) if e.op not in ("<<", ">>") else int(b)
        result = fold(e.op, a, b, operand_type)
        return round_float(result, operand_type) if isinstance(result, float) else result
    if isinstance(e, E.UnaryOp):
        v = evaluate(e.a, env)
        if e.op == "!":
            return not v
        t = e.type
        if e.op == "-":
            return wrap(-v, t) if isinstance(t, DataType) and t.is_integer else -v  # negation is exact
        return wrap(~int(v), t)
    if isinstance(e, E.Cast):
        return convert_value(evaluate(e.expr, env), e.dtype)
    if isinstance(e, E.IfThenElse):
        return evaluate(e.then_expr if evaluate(e.cond, env) else e.else_expr, env)
    raise TypeError(f"cannot evaluate {type(e).__name__} in Python")


def convert_value(v: Any, dtype: DataType) -> Any:
    """A Python value converted to `dtype` as every target converts it: an integer wraps to an integer type, a float
    converts to an integer type as `float_to_int` says (rounded toward zero, saturating, NaN to 0), to a float type
    it rounds (`round_float`), and anything to bool is whether it is nonzero (NaN is)."""
    if dtype.is_bool:
        return bool(v)
    if dtype.is_float:
        return round_float(float(v), dtype)
    if isinstance(v, numbers.Integral):  # Python's and numpy's integers (bools too)
        return wrap(int(v), dtype)
    return float_to_int(float(v), dtype)


def int_range(dtype: DataType) -> tuple[int, int]:
    """The least and the greatest value of integer type `dtype`."""
    bits = 8 * dtype.nbytes
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if dtype.kind == "int" else (0, (1 << bits) - 1)


def float_fits(v: float, dtype: DataType) -> bool:
    """Whether integer type `dtype` holds the float `v` rounded toward zero (never for NaN or an infinity): where it
    does not, C leaves the conversion undefined, and checking mode reports it."""
    if not math.isfinite(v):
        return False
    lo, hi = int_range(dtype)
    return lo <= int(v) <= hi


def float_to_int(v: float, dtype: DataType) -> int:
    """The float `v` converted to integer type `dtype` as the GPU's `cvt.rzi.sat` does and every target does
    (`hidet_lang/float_to_int.h`): rounded toward zero, below the type's range its least value, above it its
    greatest, NaN 0."""
    if math.isnan(v):
        return 0
    lo, hi = int_range(dtype)
    if math.isinf(v):
        return hi if v > 0 else lo
    return min(max(int(v), lo), hi)


_PACK_FORMATS = {"float32": "f", "float16": "e"}


def round_float(v: float, dtype: DataType) -> float:
    """`v` rounded to the nearest value of float type `dtype` (ties to even; beyond its range, infinity)."""
    if dtype.name == "float64" or math.isnan(v) or math.isinf(v):
        return v
    if dtype.name == "bfloat16":
        bits = struct.unpack("<I", struct.pack("<f", round_float(v, float32)))[0]
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # round the low half away, ties to even
        return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
    fmt = _PACK_FORMATS[dtype.name]
    try:
        return struct.unpack(fmt, struct.pack(fmt, v))[0]
    except OverflowError:
        return math.copysign(math.inf, v)
