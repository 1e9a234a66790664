"""Network operators as single tasks (one kernel each): softmax, log_softmax, layer_norm, rms_norm,
group_norm, batch_norm (inference); keyword names follow torch.nn.functional."""

from __future__ import annotations

from typing import Any

from hidet_lang.ir.expr import Constant, Expr, Intrinsic
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, normalize_axis, shape_str
from stdlib_ops.tensor import Tensor


def _acc(dtype: str) -> str:
    t = as_dtype(dtype)
    if not t.is_float:
        raise TypeError(f"unsupported dtype {dtype!r} for a normalization (floats only)")
    return "float32" if t.nbytes == 2 else dtype


def _softmax(name: str, x: Tensor, axis: int, log: bool) -> Tensor:
    (x,) = as_tensors(name, x)
    ax = normalize_axis(name, axis, x.ndim)
    acc = _acc(x.dtype)
    at = as_dtype(acc)

    def define(xv: Any) -> Any:
        def value(*i: Expr) -> Expr:
            def read(k: Expr) -> Expr:
                idx = list(i)
                idx[ax] = k
                return cast_to(xv[tuple(idx)], acc)

            m = reduce([x.shape[ax]], lambda k: read(k), "max", acc)
            s = reduce([x.shape[ax]], lambda k: Intrinsic("exp", (read(k) - m,), at), "sum", acc)
            shifted = read(i[ax]) - m
            v = shifted - Intrinsic("log", (s,), at) if log else Intrinsic("exp", (shifted,), at) / s
            return cast_to(v, x.dtype)

        return compute("out", x.shape, value)

    return apply(name, {"axis": ax}, [x], define)[0]


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis`."""
    return _softmax("softmax", x, axis, log=False)


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """The logarithm of softmax along `axis`, computed stably."""
    return _softmax("log_softmax", x, axis, log=True)


def _normalize(name: str, x: Tensor, params: list[Tensor | None], norm_axes: tuple[int, ...], eps: float,
               center: bool, affine_index: Any) -> Tensor:
    """(x - mean) / sqrt(var + eps) over `norm_axes` (without centering: x / sqrt(mean(x^2) + eps)), then times
    params[0] and plus params[1] where given, read at `affine_index(i)`."""
    acc = _acc(x.dtype)
    at = as_dtype(acc)
    given = [p for p in params if p is not None]
    inputs = as_tensors(name, x, *given)

    def define(xv: Any, *pv: Any) -> Any:
        weight = pv[0] if params[0] is not None else None
        bias = pv[-1] if len(params) > 1 and params[1] is not None else None

        def value(*i: Expr) -> Expr:
            def read(r: tuple) -> Expr:
                idx = list(i)
                for a, k in zip(norm_axes, r):
                    idx[a] = k
                return cast_to(xv[tuple(idx)], acc)

            extents = [x.shape[a] for a in norm_axes]
            v = cast_to(xv[i], acc)
            if center:
                m = reduce(extents, lambda *r: read(r), "mean", acc)
                var = reduce(extents, lambda *r: (read(r) - m) * (read(r) - m), "mean", acc)
                v = (v - m) * Intrinsic("rsqrt", (var + Constant(eps, at),), at)
            else:
                ms = reduce(extents, lambda *r: read(r) * read(r), "mean", acc)
                v = v * Intrinsic("rsqrt", (ms + Constant(eps, at),), at)
            if weight is not None:
                v = v * cast_to(weight[affine_index(i)], acc)
            if bias is not None:
                v = v + cast_to(bias[affine_index(i)], acc)
            return cast_to(v, x.dtype)

        return compute("out", x.shape, value)

    attrs = {"axes": norm_axes, "eps": eps, "params": tuple(p is not None for p in params)}
    return apply(name, attrs, inputs, define)[0]


def layer_norm(x: Tensor, weight: Tensor | None = None, bias: Tensor | None = None, eps: float = 1e-5,
               normalized_shape: Any = None) -> Tensor:
    """Normalization over the last dimensions (those of `weight`, or `normalized_shape`; default: the last)."""
    shape = tuple(normalized_shape) if normalized_shape is not None else (
        tuple(weight.shape) if weight is not None else (x.shape[-1],))
    if tuple(x.shape[x.ndim - len(shape):]) != shape:
        raise ValueError(f"layer_norm: normalized shape {shape_str(shape)} does not end input shape "
                         f"{shape_str(x.shape)}")
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    return _normalize("layer_norm", x, [weight, bias], axes, eps, True, lambda i: tuple(i[x.ndim - len(shape):]))


def rms_norm(x: Tensor, weight: Tensor | None = None, eps: float = 1e-6) -> Tensor:
    """x / sqrt(mean(x^2 over the last axis) + eps) * weight."""
    return _normalize("rms_norm", x, [weight], (x.ndim - 1,), eps, False, lambda i: (i[-1],))


def batch_norm(x: Tensor, running_mean: Tensor, running_var: Tensor, weight: Tensor | None = None,
               bias: Tensor | None = None, eps: float = 1e-5) -> Tensor:
    """Inference batch norm over axis 1: (x - running_mean) / sqrt(running_var + eps) * weight + bias."""
    parts = [(running_var + eps) ** -0.5]
    scale = parts[0] * weight if weight is not None else parts[0]
    shape = [1] * x.ndim
    shape[1] = x.shape[1]
    from stdlib_ops.operators.transform import reshape

    y = (x - reshape(running_mean, shape)) * reshape(scale, shape)
    return y + reshape(bias, shape) if bias is not None else y


def group_norm(x: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalization over groups of channels (axis 1) and the spatial axes, then per-channel weight and bias."""
    from stdlib_ops.operators.transform import reshape

    n, c = x.shape[0], x.shape[1]
    if c % num_groups:
        raise ValueError(f"group_norm: {c} channels do not split into {num_groups} groups")
    grouped = reshape(x, [n, num_groups, -1])
    normed = reshape(_normalize("group_norm", grouped, [None], (2,), eps, True, lambda i: i), x.shape)
    shape = [1] * x.ndim
    shape[1] = c
    if weight is not None:
        normed = normed * reshape(weight, shape)
    return normed + reshape(bias, shape) if bias is not None else normed


