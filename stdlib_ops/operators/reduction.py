"""Reductions over any axes with numpy's semantics: `sum mean max min prod argmax argmin var std`."""

from __future__ import annotations

import math
from typing import Any

from hidet_lang.ir.expr import BinaryOp, Constant, Expr, Intrinsic
from hidet_lang.ir.types import int32
from stdlib_ops.compute import arg_reduce, as_dim, as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, normalize_axes, normalize_axis
from stdlib_ops.operators.transform import unravel
from stdlib_ops.tensor import Tensor


def _out_shape(shape: tuple, axes: tuple[int, ...], keepdims: bool) -> tuple:
    return tuple(1 if k in axes else d for k, d in enumerate(shape) if keepdims or k not in axes)


def _index(rank: int, axes: tuple[int, ...], out_idx: tuple, red_idx: tuple, keepdims: bool) -> tuple:
    """The input index for output index `out_idx` and reduction index `red_idx`."""
    it_out = iter(out_idx)
    it_red = iter(red_idx)
    index = []
    for k in range(rank):
        if k in axes:
            index.append(next(it_red))
            if keepdims:
                next(it_out)
        else:
            index.append(next(it_out))
    return tuple(index) or (Constant(0, int32),)


def _acc_dtype(kind: str, dtype: str) -> tuple[str, str]:
    """(accumulator dtype, result dtype) of a `kind` reduction of `dtype`, numpy's result dtype."""
    t = as_dtype(dtype)
    if kind in ("sum", "prod"):
        if t.is_bool or (t.is_integer and t.nbytes < 8):
            out = "int64" if not (t.kind == "uint") else "uint64"
            return out, out
        return ("float32" if t.is_float and t.nbytes == 2 else dtype), dtype
    if kind == "mean":
        out = dtype if t.is_float else "float64"
        return ("float32" if t.is_float and t.nbytes == 2 else out), out
    return dtype, dtype


def _reduce(name: str, kind: str, x: Tensor, axis: Any, keepdims: bool) -> Tensor:
    (x,) = as_tensors(name, x)
    axes = normalize_axes(name, axis, x.ndim)
    out_shape = _out_shape(x.shape, axes, keepdims)
    acc, out = _acc_dtype(kind, x.dtype)
    red_shape = [x.shape[k] for k in axes]

    def define(xv: Any) -> Any:
        return compute("out", out_shape, lambda *i: cast_to(reduce(
            red_shape, lambda *r: cast_to(xv[_index(x.ndim, axes, i, r, keepdims)], acc), kind, acc), out))

    return apply(name, {"axes": axes, "keepdims": keepdims}, [x], define)[0]


def sum(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - numpy's name
    """The sum over `axis` (None: all)."""
    return _reduce("sum", "sum", x, axis, keepdims)


def mean(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The mean over `axis`."""
    return _reduce("mean", "mean", x, axis, keepdims)


def max(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - numpy's name
    """The largest element over `axis`."""
    return _reduce("max", "max", x, axis, keepdims)


def min(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001 - numpy's name
    """The smallest element over `axis`."""
    return _reduce("min", "min", x, axis, keepdims)


def prod(x: Tensor, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The product over `axis`."""
    return _reduce("prod", "prod", x, axis, keepdims)


def _arg(name: str, kind: str, x: Tensor, axis: int | None, keepdims: bool) -> Tensor:
    (x,) = as_tensors(name, x)
    if axis is None:
        return _flat_arg(name, kind, x, keepdims)
    ax = normalize_axis(name, axis, x.ndim)
    out_shape = _out_shape(x.shape, (ax,), keepdims)

    def define(xv: Any) -> Any:
        return compute("out", out_shape, lambda *i: arg_reduce(
            x.shape[ax], lambda k: xv[_index(x.ndim, (ax,), i, (k,), keepdims)], kind))

    return apply(name, {"axis": ax, "keepdims": keepdims}, [x], define)[0]


def _flat_arg(name: str, kind: str, x: Tensor, keepdims: bool) -> Tensor:
    """The first row-major index of the largest ('max') or smallest ('min') element of `x`, over all its
    elements (symbolic dimensions included)."""
    size: Any = math.prod(x.shape) if all(isinstance(d, int) for d in x.shape) else None
    if size is None:
        size = Constant(1, int32)
        for d in x.shape:
            size = size * as_dim(d)
    out_shape = (1,) * x.ndim if keepdims else ()

    def define(xv: Any) -> Any:
        return compute("out", out_shape, lambda *i: arg_reduce(size, lambda k: xv[unravel(k, x.shape)], kind))

    return apply(name, {"axis": None, "keepdims": keepdims}, [x], define)[0]


def argmax(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """The first index of the largest element along `axis` (None: of the flattened tensor), as int64."""
    return _arg("argmax", "max", x, axis, keepdims)


def argmin(x: Tensor, axis: int | None = None, keepdims: bool = False) -> Tensor:
    """The first index of the smallest element along `axis`, as int64."""
    return _arg("argmin", "min", x, axis, keepdims)


def var(x: Tensor, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Tensor:
    """The variance over `axis` (divided by N - ddof), computed in one kernel (two passes over the data)."""
    return _variance("var", x, axis, keepdims, ddof, root=False)


def std(x: Tensor, axis: Any = None, keepdims: bool = False, ddof: int = 0) -> Tensor:
    """The standard deviation over `axis`."""
    return _variance("std", x, axis, keepdims, ddof, root=True)


def _variance(name: str, x: Tensor, axis: Any, keepdims: bool, ddof: int, root: bool) -> Tensor:
    (x,) = as_tensors(name, x)
    axes = normalize_axes(name, axis, x.ndim)
    out_shape = _out_shape(x.shape, axes, keepdims)
    t = as_dtype(x.dtype)
    out = x.dtype if t.is_float else "float64"
    acc = "float32" if t.nbytes == 2 and t.is_float else out
    red_shape = [x.shape[k] for k in axes]

    def define(xv: Any) -> Any:
        def value(*i: Expr) -> Expr:
            def at(r: tuple) -> Expr:
                return cast_to(xv[_index(x.ndim, axes, i, r, keepdims)], acc)

            m = reduce(red_shape, lambda *r: at(r), "mean", acc)
            sq = reduce(red_shape, lambda *r: BinaryOp("*", at(r) - m, at(r) - m), "sum", acc)
            count = Constant(1, int32)
            for d in red_shape:
                count = count * as_dim(d)
            v = BinaryOp("/", sq, cast_to(count - ddof, acc))
            return cast_to(Intrinsic("sqrt", (v,), as_dtype(acc)) if root else v, out)

        return compute("out", out_shape, value)

    return apply(name, {"axes": axes, "keepdims": keepdims, "ddof": ddof}, [x], define)[0]
