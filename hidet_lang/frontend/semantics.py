"""Type rules of the DSL: what operators, assignments, indexing and intrinsics accept, and their result types.

Vector values (`f32x8`, see `hidet_lang.frontend.vectors` for their operations) take `+ - *` and `min`/`max` with
a vector of the same type only: a vector and a scalar, or two widths, are a TypeError (broadcast the scalar first);
a vector is assigned only to a variable of its own type.

These functions raise plain `TypeError`/`ValueError`; the parser attaches the user's source position.
"""

from __future__ import annotations

from typing import Any

from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import convert_value
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    TensorType,
    Type,
    VectorType,
    VoidType,
    boolean,
    float32,
    int32,
    promote,
)


def describe(value: Any) -> str:
    """How a value is named in error messages."""
    if isinstance(value, E.Var):
        return f"'{value.name}' ({value.type})"
    if isinstance(value, E.Expr):
        return f"a value of type {value.type}"
    return f"the Python {type(value).__name__} {value!r}"


# What a pointer to a tensor is when a number was expected: mostly a tensor indexed in fewer dimensions than it has.
_PART_OF_TENSOR = ("a part of a tensor (a tensor indexed in fewer dimensions than it has, such as a[i] of a 2-D "
                   "tensor, is its row); index every dimension, e.g. a[i, j] or a[i][j]")


def scalar_type(e: E.Expr, what: str) -> DataType:
    """The scalar type of `e`, or a TypeError saying that `what` needs a scalar."""
    t = e.type
    if isinstance(t, DataType):
        return t
    if isinstance(t, TensorType):
        raise TypeError(f"{what} needs a scalar, but {describe(e)} is a tensor; index it, e.g. x[i]")
    if isinstance(t, PointerType) and isinstance(t.base, TensorType):
        raise TypeError(f"{what} needs a scalar, but {describe(e)} is {_PART_OF_TENSOR}")
    raise TypeError(f"{what} needs a scalar, but got {describe(e)}")


def binary(op: str, a: Any, b: Any) -> E.Expr:
    """`a op b` on IR values (Python scalars are converted), after checking the operand types."""
    expr = E.binary(op, a, b)
    assert isinstance(expr, E.BinaryOp)
    ta, tb = expr.a.type, expr.b.type
    if op in ("+", "-") and (isinstance(ta, PointerType) or isinstance(tb, PointerType)):
        other = tb if isinstance(ta, PointerType) else ta
        if isinstance(other, DataType) and other.is_integer:
            return expr
        pointer = expr.a if isinstance(ta, PointerType) else expr.b
        if isinstance(pointer.type.base, TensorType):
            raise TypeError(f"operator {op} needs a number, but {describe(pointer)} is {_PART_OF_TENSOR}")
        raise TypeError(f"pointer arithmetic needs an integer offset, got {describe(expr.b)}")
    if op in E.COMPARISON_OPS and isinstance(ta, PointerType) and isinstance(tb, PointerType):
        return expr  # addresses compare (a void pointer with any other)
    if isinstance(ta, VectorType) or isinstance(tb, VectorType):
        vector = same_vector_type(f"operator {op}", expr.a, expr.b)
        if op not in VECTOR_OPERATORS:
            raise TypeError(f"operator {op} is not defined on vectors ({vector}); they have "
                            f"{', '.join(VECTOR_OPERATORS)}, min, max and {vector}_fma")
        return expr
    sa = scalar_type(expr.a, f"operator {op}")
    sb = scalar_type(expr.b, f"operator {op}")
    if op in ("&", "|", "^", "<<", ">>") and (sa.is_float or sb.is_float):
        raise TypeError(f"operator {op} needs integers, got {sa} and {sb}")
    return expr


# The operators that compute lane by lane on two vectors of one type (each lane rounded once, as f32 scalars are:
# `a * b + c` is two roundings; `f32x8_fma` is one).
VECTOR_OPERATORS = ("+", "-", "*")


def same_vector_type(what: str, *operands: E.Expr) -> VectorType:
    """The vector type all `operands` share, or a TypeError naming `what`: a scalar among vectors (to broadcast
    first), or vectors of two widths."""
    types = [o.type for o in operands]
    vector = next(t for t in types if isinstance(t, VectorType))
    for o, t in zip(operands, types):
        if isinstance(t, VectorType) and t != vector:
            raise TypeError(f"{what} mixes vector types {vector} and {t}; use one width")
        if not isinstance(t, VectorType):
            raise TypeError(f"{what} takes a vector ({vector}) and {describe(o)}: a scalar is not broadcast "
                            f"implicitly; write {vector}_broadcast(x)")
    return vector


def logical(op: str, a: E.Expr, b: E.Expr) -> E.Expr:
    """`a and b` / `a or b` on IR values."""
    for side in (a, b):
        scalar_type(side, "`and`/`or`")
    return E.BinaryOp("&&" if op == "and" else "||", a, b)


def logical_not(a: E.Expr) -> E.Expr:
    """`not a`."""
    scalar_type(a, "`not`")
    return E.UnaryOp("!", a)


def cast(value: Any, dtype: DataType) -> E.Expr:
    """`value`, a scalar, converted to `dtype` (see `convert_to`)."""
    e = E.convert(value)
    scalar_type(e, f"a conversion to {dtype}")
    return convert_to(e, dtype)


def convert_to(e: E.Expr, dtype: DataType) -> E.Expr:
    """The scalar `e` converted to `dtype` as C converts: no node when it already has that type, a constant
    folded to its converted value (`cast(300, u8)` is 44), a `Cast` otherwise."""
    if e.type == dtype:
        return e
    if isinstance(e, E.Constant):
        return E.Constant(convert_value(e.value, dtype), dtype, span=e.span)
    return E.Cast(e, dtype)


def common_type(a: Type, b: Type) -> Type | None:
    """The type values of types `a` and `b` meet in (the branches of a conditional, a function's returns): `a`
    when they are equal, the promotion of two scalar types (as `x + y`), a pointer to the element type of pointers
    and tensors of one element type, None when there is none."""
    if a == b:
        return a
    if isinstance(a, DataType) and isinstance(b, DataType):
        return promote(a, b)
    addresses = (PointerType, TensorType)
    if isinstance(a, addresses) and isinstance(b, addresses) and a.dtype == b.dtype:
        return PointerType(a.dtype)
    return None


def assignable(target: Type, value: Any, what: str) -> E.Expr:
    """`value` made fit for storing into a location of type `target`, or a TypeError naming `what`."""
    e = E.convert(value)
    vt = e.type
    if isinstance(target, DataType):
        if isinstance(vt, DataType):
            return convert_to(e, target)
        if isinstance(vt, VectorType):
            raise TypeError(f"cannot assign a vector ({vt}) to {what} of type {target}; reduce it to a scalar "
                            f"first, e.g. {vt}_reduce_sum(v)")
        kind = "a pointer" if isinstance(vt, PointerType) else "a tensor" if isinstance(vt, TensorType) else "nothing"
        raise TypeError(f"cannot assign {kind} ({vt}) to {what} of type {target}")
    if isinstance(target, VectorType):
        if vt != target:
            raise TypeError(f"cannot assign {describe(e)} to {what} of type {target}: a vector variable takes a "
                            f"{target} value only (broadcast a scalar with {target}_broadcast(x))")
        return e
    if isinstance(target, PointerType):
        if isinstance(vt, PointerType) and (vt == target or target.is_void):
            return e  # any pointer converts to void_p, as in C
        if isinstance(vt, (PointerType, TensorType)):
            if isinstance(vt, PointerType) and vt.is_void:
                raise TypeError(f"cannot assign {describe(e)} to {what}, a pointer to {target.dtype}: cast the void "
                                f"pointer first, e.g. cast(p, {target})")
            if vt.dtype != target.dtype:
                raise TypeError(f"cannot assign {describe(e)} to {what}, a pointer to {target.dtype} ({target})")
            return e
        if isinstance(vt, DataType) and vt.is_integer and isinstance(e, E.Constant) and e.value == 0:
            return e
        raise TypeError(f"cannot assign {describe(e)} to {what}, a pointer ({target})")
    if isinstance(target, TensorType):
        raise TypeError(f"cannot assign to the tensor {what} as a whole; store into its elements, e.g. x[i] = ...")
    raise TypeError(f"cannot assign {describe(e)} to {what}")


def argument(param: Type, value: Any, what: str) -> E.Expr:
    """`value` made fit for passing to a parameter of type `param` in a call of another script function.

    Scalars and pointers follow the assignment rules; a tensor parameter takes a tensor or a pointer with the
    same element type (by address, as C passes arrays), and a tensor of another constant shape is refused.
    """
    if not isinstance(param, TensorType):
        return assignable(param, value, what)
    e = E.convert(value)
    vt = e.type
    if not isinstance(vt, (TensorType, PointerType)):
        raise TypeError(f"{what} expects a tensor ({param}), got {describe(e)}")
    if vt.dtype != param.dtype:
        raise TypeError(f"{what} expects a tensor of {param.dtype} ({param}), got {describe(e)}")
    given_layout = vt.layout if isinstance(vt, TensorType) else getattr(vt.base, "layout", None)
    if given_layout != param.layout:
        raise TypeError(f"{what} expects a tensor laid out as {param}, got {describe(e)}: the callee would index "
                        "its memory with another layout")
    shape = vt.shape if isinstance(vt, TensorType) else vt.base.shape if isinstance(vt.base, TensorType) else None
    if shape is not None and _constant_shape(shape) and _constant_shape(param.shape) and \
            tuple(shape) != tuple(param.shape):
        raise TypeError(f"{what} expects a tensor of shape {param}, got {describe(e)}")
    return e


def _constant_shape(shape: tuple[Any, ...]) -> bool:
    return all(isinstance(d, int) for d in shape)


def check_inferred_store(var: E.Var, value: Any, first_line: int) -> None:
    """A TypeError when storing `value` into `var`, a variable typed by its first value (at `first_line`), could
    lose information: a float into an integer, a wider number into a narrower type, a signed integer into an
    unsigned one, an integer into a float too narrow for it. `acc = 0` then `acc += a[i]` with a float `a` would
    otherwise sum in i32. Integer literals do not widen what they meet here (`c += 1` keeps a u8 `c`, whose sum C
    computes in int and wraps back), and a literal stored alone is refused only when it does not convert exactly.
    Variables declared with a type (`acc: i32 = 0`) take any scalar, converted as C converts."""
    target = var.type
    if not isinstance(target, DataType):
        return
    e = E.convert(value)
    if isinstance(e, E.Constant) and isinstance(e.type, DataType):
        if e.type.is_float and target.is_float or convert_value(e.value, target) == e.value:
            return  # a literal that converts exactly (a float one rounds, as `x * 0.1` rounds 0.1 to x's type)
        source: DataType | None = e.type
    else:
        source = _stored_type(e)
    if source is None or holds_every_value(target, source):
        return
    declared = f"`{var.name} = {source.short_name}(0)`"
    if source == float32:
        declared = f"`{var.name} = 0.0` or {declared}"
    raise TypeError(
        f"'{var.name}' is {target}, the type of its first value (line {first_line}), so this {source} value would "
        f"be converted to {target} and could lose information. Give '{var.name}' the type it needs where it is "
        f"first assigned (e.g. {declared}), or convert here explicitly ({target.short_name}(...)), "
        f"or declare `{var.name}: {target.short_name} = ...` to keep {target}")


def holds_every_value(target: DataType, source: DataType) -> bool:
    """Whether `target` represents every value of `source` exactly (bool fits everywhere; an integer fits a float
    whose significand has its bits)."""
    if source == target or source.is_bool:
        return True
    if target.is_bool:
        return False
    if target.is_float:
        if source.is_float:
            return source.nbytes < target.nbytes
        return 8 * source.nbytes - (source.kind == "int") <= _SIGNIFICAND_BITS[target.name]
    if source.is_float:
        return False
    if source.kind == target.kind:
        return source.nbytes <= target.nbytes
    return source.kind == "uint" and source.nbytes < target.nbytes


_SIGNIFICAND_BITS = {"float16": 11, "bfloat16": 8, "float32": 24, "float64": 53}


def _stored_type(e: E.Expr) -> DataType | None:
    """The type of `e` for `check_inferred_store`: its own, except that integer constants (None) take the type of
    the integer operand they meet in arithmetic."""
    if isinstance(e, E.Constant) and isinstance(e.type, DataType) and e.type.is_integer:
        return None
    t = e.type
    if not isinstance(t, DataType):
        return None
    if isinstance(e, E.UnaryOp) and e.op == "-":
        return _stored_type(e.a)
    if isinstance(e, E.BinaryOp) and e.op not in E.COMPARISON_OPS and e.op not in E.LOGICAL_OPS:
        a, b = _stored_type(e.a), _stored_type(e.b)
        if a is None or b is None:
            return a if b is None else b
    return t


def new_variable_type(value: Any) -> Type:
    """The type of a variable first assigned `value` (Python int -> i32, float -> f32, bool -> bool)."""
    e = E.convert(value)
    t = e.type
    if isinstance(t, VoidType):
        raise TypeError("cannot assign the result of a function that returns nothing")
    return t


def first_element_address(tensor: E.Expr) -> E.Expr:
    """The address of the first element of a tensor-typed `tensor` (`~t[0, ..., 0]`), as C passes arrays."""
    assert isinstance(tensor.type, TensorType)
    return E.Address(E.TensorElement(tensor, tuple(E.Constant(0, int32) for _ in tensor.type.shape)))


def element(base: E.Expr, indices: tuple[Any, ...]) -> E.Expr:
    """`base[indices]`, checking the number of indices and that each is an integer."""
    t = base.type
    converted = tuple(E.convert(i) for i in indices)
    for i in converted:
        it = i.type
        if not (isinstance(it, DataType) and (it.is_integer or it.is_bool)):
            raise TypeError(f"an index must be an integer, got {describe(i)}")
    if isinstance(t, TensorType) or (isinstance(t, PointerType) and isinstance(t.base, TensorType)):
        shape = t.shape if isinstance(t, TensorType) else t.base.shape
        if len(converted) != len(shape):
            name = base.name if isinstance(base, E.Var) else str(base)
            raise TypeError(
                f"'{name}' has {len(shape)} dimension{'s' * (len(shape) != 1)} ({t}) but is indexed with "
                f"{len(converted)} index{'es' * (len(converted) != 1)}"
            )
    elif isinstance(t, PointerType):
        if len(converted) != 1:
            raise TypeError(f"a pointer ({t}) takes one index, got {len(converted)}")
    else:
        raise TypeError(f"{describe(base)} cannot be indexed")
    return E.TensorElement(base, converted)


# The float functions of two arguments; `floordiv` is the float `//` (Python's floored quotient, see operators.py).
BINARY_MATH = frozenset({"pow", "atan2", "fmod", "floordiv"})


def math_call(name: str, *args: Any) -> E.Expr:
    """A math function on IR values: float functions promote integers to f32; min/max/abs keep the type; min/max
    of two vectors of one type are the lane-wise `<vector>_min` / `<vector>_max` intrinsics."""
    exprs = tuple(E.convert(a) for a in args)
    if name in ("min", "max") and any(isinstance(e.type, VectorType) for e in exprs):
        if len(exprs) != 2:
            raise TypeError(f"{name}() of vectors takes two vectors, got {len(exprs)} values")
        vector = same_vector_type(f"{name}()", *exprs)
        return E.Intrinsic(f"{vector}_{name}", exprs, vector)
    types = [scalar_type(e, f"{name}()") for e in exprs]
    if name in ("min", "max"):
        if len(exprs) < 2:
            raise TypeError(f"{name}() needs at least two values")
        result = exprs[0]
        for e in exprs[1:]:
            t = promote(scalar_type(result, name), scalar_type(e, name))
            result = E.Intrinsic(name, (convert_to(result, t), convert_to(e, t)), t)
        return result
    arity = 2 if name in BINARY_MATH else 1
    if len(exprs) != arity:
        raise TypeError(f"{name}() takes {arity} argument(s), got {len(exprs)}")
    if name == "abs":
        return E.Intrinsic("abs", exprs, types[0])
    t = max((ty for ty in types if ty.is_float), key=lambda ty: ty.nbytes, default=float32)
    return E.Intrinsic(name, tuple(convert_to(e, t) for e in exprs), t)


def condition(value: Any, what: str) -> E.Expr:
    """An IR condition for `if`/`while`/`assert`: scalars are compared with zero as in C."""
    e = E.convert(value)
    t = scalar_type(e, what)
    return e if t == boolean else E.BinaryOp("!=", e, E.Constant(0, t) if not t.is_float else E.Constant(0.0, t))


def index_type(values: list[E.Expr]) -> DataType:
    """The type of a loop variable ranging over `values` (the widest integer type; at least i32)."""
    t = int32
    for v in values:
        vt = scalar_type(v, "range()")
        if not (vt.is_integer or vt.is_bool):
            raise TypeError(f"range() needs integers, got {describe(v)}")
        t = promote(t, vt) if vt.is_integer else t
    return t
