"""Element-wise operators with numpy's broadcasting and result dtypes: unary math, binary arithmetic,
comparisons, `where`, `clip`, `cast`.

NaN propagates as in numpy: `relu`, `clip`, `maximum` and `minimum` of a NaN are NaN. `relu` and `clip` get it
for free from the DSL's `max(a, b)` rule (`a > b ? a : b`: `b` when either is NaN) by putting the data second,
`max(0, x)`; `maximum`/`minimum` of two tensors, either of which may be NaN, use `extremum` (one more compare
and select). Which zero `maximum(-0.0, 0.0)` gives is the DSL's rule (the second operand): numpy's choice varies
with the dtype and its code path."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from hidet_lang.ir.expr import BinaryOp, Constant, Expr, IfThenElse, Intrinsic, UnaryOp, Var
from hidet_lang.ir.types import DataType, boolean, float32
from stdlib_ops.compute import as_dtype, cast_to, compute, extremum
from stdlib_ops.operators.base import (
    apply,
    as_tensors,
    broadcast_index,
    broadcast_shapes,
    result_dtype,
    same_shape_inverse,
)
from stdlib_ops.tensor import Tensor, asarray


def _map(name: str, inputs: list[Tensor], out_dtype: str, fn: Callable[..., Expr],
         attrs: dict[str, Any] | None = None) -> Tensor:
    """The element-wise operator `name`: out[idx] = fn(*inputs at idx, broadcast), as `out_dtype`."""
    shape = broadcast_shapes(name, *[t.shape for t in inputs])

    def define(*xs: Var) -> Any:
        return compute("out", shape, lambda *i: cast_to(fn(*[x[broadcast_index(x, i)] for x in xs]), out_dtype))

    return apply(name, attrs or {}, inputs, define, same_shape_inverse)[0]


def _float_dtype(dtype: str) -> str:
    """The dtype of a float function of `dtype` (numpy: integers give float64, or smaller floats for int8)."""
    return dtype if dtype in ("float16", "float32", "float64", "bfloat16") else result_dtype(dtype, "float16")


@functools.cache
def _compute_type(dtype: str) -> DataType:
    """Half-precision math runs in f32 (rounded once at the end)."""
    t = as_dtype(dtype)
    return float32 if t.nbytes == 2 and t.is_float else t


def _unary_float(name: str, fn: Callable[[Expr], Expr]) -> Callable[[Tensor], Tensor]:
    def op(x: Tensor) -> Tensor:
        (x,) = as_tensors(name, x)
        out = _float_dtype(x.dtype)
        ct = _compute_type(out)
        return _map(name, [x], out, lambda a: fn(cast_to(a, ct)))

    op.__name__ = name
    op.__doc__ = f"`{name}` of each element (numpy's result dtype)."
    return op


def _intrinsic(name: str) -> Callable[[Expr], Expr]:
    return lambda a: Intrinsic(name, (a,), a.type)


def _const(value: float, t: DataType) -> Constant:
    return Constant(value, t)


def _sigmoid(a: Expr) -> Expr:
    one = _const(1.0, a.type)
    return BinaryOp("/", one, BinaryOp("+", one, Intrinsic("exp", (UnaryOp("-", a),), a.type)))


def _gelu(a: Expr) -> Expr:
    t = a.type
    erf = Intrinsic("erf", (BinaryOp("*", a, _const(1 / math.sqrt(2.0), t)),), t)
    return BinaryOp("*", BinaryOp("*", _const(0.5, t), a), BinaryOp("+", _const(1.0, t), erf))


def _round_half_even(a: Expr) -> Expr:
    t = a.type
    r = Intrinsic("floor", (BinaryOp("+", a, _const(0.5, t)),), t)
    tie = BinaryOp("==", BinaryOp("-", r, a), _const(0.5, t))
    odd = BinaryOp("!=", Intrinsic("fmod", (r, _const(2.0, t)), t), _const(0.0, t))
    return IfThenElse(BinaryOp("&&", tie, odd), BinaryOp("-", r, _const(1.0, t)), r)


gelu = _unary_float("gelu", _gelu)
silu = _unary_float("silu", lambda a: BinaryOp("*", a, _sigmoid(a)))
sigmoid = _unary_float("sigmoid", _sigmoid)
tanh = _unary_float("tanh", _intrinsic("tanh"))
exp = _unary_float("exp", _intrinsic("exp"))
log = _unary_float("log", _intrinsic("log"))
sqrt = _unary_float("sqrt", _intrinsic("sqrt"))
rsqrt = _unary_float("rsqrt", _intrinsic("rsqrt"))
erf = _unary_float("erf", _intrinsic("erf"))
sin = _unary_float("sin", _intrinsic("sin"))
cos = _unary_float("cos", _intrinsic("cos"))


def _unary_same(name: str, fn: Callable[[Expr], Expr], float_fn: bool = False) -> Callable[[Tensor], Tensor]:
    def op(x: Tensor) -> Tensor:
        (x,) = as_tensors(name, x)
        if float_fn and not as_dtype(x.dtype).is_float:
            return _map(name, [x], x.dtype, lambda a: a)
        ct = _compute_type(x.dtype)
        return _map(name, [x], x.dtype, lambda a: fn(cast_to(a, ct)))

    op.__name__ = name
    op.__doc__ = f"`{name}` of each element, in the input's dtype."
    return op


# max(0, x), the data second: a NaN gives itself (numpy's np.maximum(x, 0)), at no cost
relu = _unary_same("relu", lambda a: Intrinsic("max", (Constant(0.0 if a.type.is_float else 0, a.type), a), a.type))
abs = _unary_same("abs", _intrinsic("abs"))  # noqa: A001 - numpy's name
neg = _unary_same("neg", lambda a: UnaryOp("-", a))
floor = _unary_same("floor", _intrinsic("floor"), float_fn=True)
ceil = _unary_same("ceil", _intrinsic("ceil"), float_fn=True)
round = _unary_same("round", _round_half_even, float_fn=True)  # noqa: A001 - numpy's name


def clip(x: Tensor, a_min: float | None = None, a_max: float | None = None) -> Tensor:
    """Each element limited to [a_min, a_max] (either bound may be None); NaN stays NaN, as in `np.clip`."""
    (x,) = as_tensors("clip", x)
    ct = _compute_type(x.dtype)

    def fn(a: Expr) -> Expr:
        a = cast_to(a, ct)
        # the bound first: `max`/`min` give their second operand, the data, when it is NaN
        if a_min is not None:
            a = Intrinsic("max", (Constant(a_min, ct), a), ct)
        if a_max is not None:
            a = Intrinsic("min", (Constant(a_max, ct), a), ct)
        return a

    return _map("clip", [x], x.dtype, fn, {"a_min": a_min, "a_max": a_max})


def _binary(name: str, c_op: str | None, true_divide: bool = False) -> Callable[[Any, Any], Tensor]:
    def op(a: Any, b: Any) -> Tensor:
        x, y = as_tensors(name, a, b)
        out = result_dtype(x.dtype, y.dtype)
        if true_divide and not as_dtype(out).is_float:
            out = "float64"  # numpy's true division of integers (of any width) gives float64
        ct = _compute_type(out)

        def fn(p: Expr, q: Expr) -> Expr:
            p, q = cast_to(p, ct), cast_to(q, ct)
            if c_op is None:
                return extremum(name.replace("imum", ""), p, q)
            return BinaryOp(c_op, p, q)

        return _map(name, [x, y], out, fn)

    op.__name__ = name
    op.__doc__ = f"`{name}` of the operands, broadcast as numpy does."
    return op


add = _binary("add", "+")
sub = _binary("sub", "-")
mul = _binary("mul", "*")
div = _binary("div", "/", true_divide=True)
maximum = _binary("maximum", None)
minimum = _binary("minimum", None)


def _floored(name: str, a: Any, b: Any) -> tuple[list[Tensor], str, DataType]:
    """The operands, result dtype and compute type of `floor_divide` or `remainder`; ZeroDivisionError for a
    concrete integer divisor with a zero (torch raises too; the data of a symbolic one is not known)."""
    x, y = as_tensors(name, a, b)
    out = result_dtype(x.dtype, y.dtype)
    if out == "bool":
        raise TypeError(f"{name}: not defined for bool tensors (convert them to an integer dtype first)")
    ct = _compute_type(out)
    if not ct.is_float and y.storage is not None and not np.all(y.numpy()):
        raise ZeroDivisionError(f"{name}: integer division by zero")
    return [x, y], out, ct


def _truncation_is_off(p: Expr, q: Expr, r: Expr) -> Expr:
    """Whether C's truncated quotient of signed `p / q` (remainder `r`) is one above the floored one: `r` is not
    zero and its sign is not the divisor's."""
    zero = _const(0, p.type)
    return BinaryOp("&&", BinaryOp("!=", r, zero), BinaryOp("!=", BinaryOp("<", r, zero), BinaryOp("<", q, zero)))


def floor_divide(a: Any, b: Any) -> Tensor:
    """`a // b`, broadcast, as torch and Python: the quotient rounded toward minus infinity (`-7 // 2 == -4`;
    floats by Python's algorithm, `1.0 // 0.1 == 9.0`, and `x // 0.0` is `x / 0.0`). An integer divisor with a
    zero raises ZeroDivisionError. (The DSL's own integer `//` truncates, as C does.)"""
    operands, out, ct = _floored("floor_divide", a, b)

    def fn(p: Expr, q: Expr) -> Expr:
        p, q = cast_to(p, ct), cast_to(q, ct)
        if ct.is_float:
            return Intrinsic("floordiv", (p, q), ct)
        quotient = BinaryOp("/", p, q)
        if ct.kind == "uint":
            return quotient
        off = _truncation_is_off(p, q, BinaryOp("%", p, q))
        return IfThenElse(off, BinaryOp("-", quotient, _const(1, ct)), quotient)

    return _map("floor_divide", operands, out, fn)


def remainder(a: Any, b: Any) -> Tensor:
    """`a % b`, broadcast, as torch and Python: `a - (a // b) * b`, with the divisor's sign (`-7 % 2 == 1`,
    `-6.5 % 2.0 == 1.5`; a float `x % 0.0` is NaN). An integer divisor with a zero raises ZeroDivisionError. (The
    DSL's own integer `%` has the dividend's sign, as C.)"""
    operands, out, ct = _floored("remainder", a, b)

    def fn(p: Expr, q: Expr) -> Expr:
        p, q = cast_to(p, ct), cast_to(q, ct)
        r = BinaryOp("%", p, q)  # floats: the IR's `%` is floored already
        if ct.is_float or ct.kind == "uint":
            return r
        return IfThenElse(_truncation_is_off(p, q, r), BinaryOp("+", r, q), r)

    return _map("remainder", operands, out, fn)


def pow(a: Any, b: Any) -> Tensor:  # noqa: A001 - numpy's name
    """`a ** b`, broadcast (integer powers of integers stay integers)."""
    x, y = as_tensors("pow", a, b)
    out = result_dtype(x.dtype, y.dtype)
    ct = _compute_type(out)
    if not ct.is_float:
        return _map("pow", [x, y], out, lambda p, q: cast_to(
            Intrinsic("round", (Intrinsic("pow", (cast_to(p, "float64"), cast_to(q, "float64")), as_dtype("float64")),),
                      as_dtype("float64")), ct))
    return _map("pow", [x, y], out, lambda p, q: Intrinsic("pow", (cast_to(p, ct), cast_to(q, ct)), ct))


def _comparison(name: str, c_op: str) -> Callable[[Any, Any], Tensor]:
    def op(a: Any, b: Any) -> Tensor:
        x, y = as_tensors(name, a, b)
        ct = _compute_type(result_dtype(x.dtype, y.dtype))
        return _map(name, [x, y], "bool", lambda p, q: BinaryOp(c_op, cast_to(p, ct), cast_to(q, ct)))

    op.__name__ = name
    op.__doc__ = f"Element-wise `a {c_op} b` as a bool tensor."
    return op


less = _comparison("less", "<")
less_equal = _comparison("less_equal", "<=")
greater = _comparison("greater", ">")
greater_equal = _comparison("greater_equal", ">=")
equal = _comparison("equal", "==")
not_equal = _comparison("not_equal", "!=")


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """`a` where `cond` is true, else `b`, broadcast together (a Python scalar among them takes the dtype numpy
    gives it next to the other value, not next to the condition)."""
    (c,) = as_tensors("where", cond)
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        x, y = as_tensors("where", a, b)
    else:
        x, y = (asarray(np.asarray(v), device=c.device) for v in (a, b))
    out = result_dtype(x.dtype, y.dtype)
    return _map("where", [c, x, y], out,
                lambda p, q, r: IfThenElse(cast_to(p, boolean), cast_to(q, out), cast_to(r, out)))


def cast(x: Tensor, dtype: Any) -> Tensor:
    """The tensor converted to `dtype` (C conversion: floats to integers truncate)."""
    name = np.dtype(dtype).name if dtype != "bfloat16" else "bfloat16"
    return _map("cast", [x], name, lambda a: a, {"dtype": name})
