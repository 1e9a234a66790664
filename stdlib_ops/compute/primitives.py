"""The compute-definition language: `tensor_input`, `compute`, `reduce`, `arg_reduce`, and `extremum` (numpy's
NaN-propagating `maximum`/`minimum` as an IR expression).

Bodies are hidet_lang IR expressions (so `math`-like intrinsics, casts and `IfThenElse` all work); shapes hold
Python ints and symbolic dimensions, given as strings ('batch') or as the `Var` that `size_var` returns.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from functools import cache

from hidet_lang.ir.expr import BinaryOp, Cast, Constant, Expr, IfThenElse, Intrinsic, Var, convert
from hidet_lang.ir.types import DataType, TensorType, dtype_from_name, int32
from stdlib_ops.compute.nodes import ARG_REDUCE_KINDS, REDUCE_KINDS, ArgReduceExpr, ComputeTensor, ReduceExpr
from stdlib_ops.dims import dim_product, factors

Dim = int | Expr


@cache
def size_var(name: str) -> Var:
    """The `i32` variable standing for the symbolic dimension `name` (one per name, so shapes compare equal)."""
    return Var(name, int32)


def as_dim(d: int | str | Expr) -> Dim:
    """A shape entry as a compute definition holds it: an int, or an IR expression over size variables (a
    product of them and an int for a symbolic size such as 'batch*12')."""
    if isinstance(d, str):
        names, factor = factors(d)
        product: Expr = size_var(names[0])
        for name in names[1:]:
            product = BinaryOp("*", product, size_var(name))
        return product if factor == 1 else BinaryOp("*", product, Constant(factor, int32))
    if isinstance(d, Expr):
        return d
    return int(d)


def shape_entry(d: Dim) -> int | str:
    """A compute definition's shape entry as a tensor's shape holds it: an int, or a symbolic size's text (a
    size variable's name, or the canonical text of a product of them and ints, see `stdlib_ops.dims`); a
    ValueError for another expression."""
    if isinstance(d, Var):
        return d.name
    if isinstance(d, Constant):
        return int(d.value)
    if isinstance(d, BinaryOp) and d.op == "*":
        return dim_product([shape_entry(d.a), shape_entry(d.b)])
    if isinstance(d, Expr):
        raise ValueError(f"a tensor's size must be an int or a product of symbolic sizes and ints, got {d}")
    return int(d)


def as_dtype(dtype: str | DataType) -> DataType:
    """`dtype` as an IR scalar type ('float32', 'f16', a DataType)."""
    return dtype if isinstance(dtype, DataType) else dtype_from_name(str(dtype))


_counter = itertools.count()


def _axes(prefix: str, n: int) -> tuple[Var, ...]:
    tag = next(_counter)
    return tuple(Var(f"{prefix}{i}_{tag}", int32) for i in range(n))


def tensor_input(name: str, dtype: str | DataType, shape: Sequence[int | str | Expr]) -> Var:
    """An input of a task: a tensor variable (index it, `x[i, j]`, inside `compute` bodies).

    A scalar input (shape `[]`) is declared with shape `[1]` and read as `x[0]`: kernels store scalars so."""
    dims = tuple(as_dim(d) for d in shape)
    return Var(name, TensorType(as_dtype(dtype), dims if dims else (1,)))


def compute(name: str, shape: Sequence[int | str | Expr], fcompute: Callable[..., object]) -> ComputeTensor:
    """The tensor whose element at index `(i, j, ...)` is `fcompute(i, j, ...)` (an IR expression)."""
    dims = tuple(as_dim(d) for d in shape)
    axes = _axes("i", len(dims))
    return ComputeTensor(name, dims, axes, convert(fcompute(*axes)))


def reduce(shape: Sequence[int | str | Expr], fcompute: Callable[..., object], kind: str,
           dtype: str | DataType | None = None) -> ReduceExpr:
    """`kind` ('sum', 'mean', 'max', 'min', 'prod') of `fcompute(k0, k1, ...)` over the index space `shape`.

    The accumulator has type `dtype` (default: the body's type); the body is converted to it."""
    if kind not in REDUCE_KINDS:
        raise ValueError(f"unknown reduction {kind!r}; valid: {', '.join(REDUCE_KINDS)}")
    dims = tuple(as_dim(d) for d in shape)
    axes = _axes("k", len(dims))
    body = convert(fcompute(*axes))
    acc = as_dtype(dtype) if dtype is not None else body.type
    return ReduceExpr(axes, dims, cast_to(body, acc), kind, acc)


def extremum(kind: str, a: Expr, b: Expr) -> Expr:
    """numpy's `maximum(a, b)` ('max') or `minimum(a, b)` ('min') of two values of one type: NaN when either is.

    The DSL's `max(a, b)` is `a > b ? a : b`, which gives `b` when either operand is NaN: right for a NaN `b`,
    so only a NaN `a` needs a test, `a != a ? a : max(a, b)` (a compare and a select). `a` is evaluated up to
    three times (pass a variable or a load) and `b` only where `a` is a number (C's `?:`): a value that every
    thread must compute, a warp shuffle, goes through a variable first. Integers and bools have no NaN: the plain
    intrinsic. Which zero `max(-0.0, +0.0)` gives is the DSL's rule (the second operand); numpy's own choice
    varies with the dtype and the code path."""
    if kind not in ARG_REDUCE_KINDS:
        raise ValueError(f"unknown extremum {kind!r}; valid: {', '.join(ARG_REDUCE_KINDS)}")
    pick = Intrinsic(kind, (a, b), a.type)
    if not a.type.is_float:
        return pick
    return IfThenElse(BinaryOp("!=", a, a), a, pick)


def arg_reduce(extent: int | str | Expr, fcompute: Callable[[Var], object], kind: str) -> ArgReduceExpr:
    """The first index `k` in `[0, extent)` where `fcompute(k)` is largest ('max') or smallest ('min'), as i64;
    as numpy's `argmax`/`argmin`, the first NaN wins over every number."""
    if kind not in ARG_REDUCE_KINDS:
        raise ValueError(f"unknown arg reduction {kind!r}; valid: {', '.join(ARG_REDUCE_KINDS)}")
    (axis,) = _axes("k", 1)
    return ArgReduceExpr(axis, as_dim(extent), convert(fcompute(axis)), kind)


def cast_to(e: object, dtype: str | DataType) -> Expr:
    """`e` converted to `dtype` (the expression itself when it already has that type)."""
    e = convert(e)
    t = as_dtype(dtype)
    return e if e.type == t else Cast(e, t)
