"""Network operators as single tasks (one kernel each): softmax, log_softmax, layer_norm, rms_norm,
group_norm, batch_norm (inference); their signatures are torch.nn.functional's (softmax also takes numpy's
`axis`)."""

from __future__ import annotations

import numbers
from typing import Any

from hidet_lang.ir.expr import Constant, Expr, Intrinsic
from stdlib_ops.compute import as_dtype, cast_to, compute, reduce
from stdlib_ops.operators.base import apply, as_tensors, normalize_axis, shape_str
from stdlib_ops.operators.transform import reshape
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


def softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """exp(x - max) / sum(exp(x - max)) along `axis` (or torch's `dim`; default: the last axis)."""
    return _softmax("softmax", x, _one_axis("softmax", axis, dim), log=False)


def log_softmax(x: Tensor, axis: int | None = None, *, dim: int | None = None) -> Tensor:
    """The logarithm of softmax along `axis` (or torch's `dim`; default: the last axis), computed stably."""
    return _softmax("log_softmax", x, _one_axis("log_softmax", axis, dim), log=True)


def _one_axis(name: str, axis: int | None, dim: int | None) -> int:
    """The axis that numpy's `axis` or torch's `dim` names (-1 when neither is given); both is an error."""
    if axis is not None and dim is not None:
        raise TypeError(f"{name}: got axis={axis!r} and dim={dim!r}; dim is torch's name for axis, pass one of them")
    return next((a for a in (axis, dim) if a is not None), -1)


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


def layer_norm(x: Tensor, normalized_shape: Any = None, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Tensor:
    """torch.nn.functional.layer_norm: (x - mean) / sqrt(var + eps) over the trailing dimensions `normalized_shape`
    (an int or a sequence; default: the weight's shape, else the last dimension), then times `weight` and plus
    `bias` (each of that shape) where given. The older order layer_norm(x, weight, bias, eps), a tensor second, is
    accepted too."""
    name = "layer_norm"
    if _is_older_order(name, normalized_shape):
        normalized_shape, weight, bias, eps = None, normalized_shape, weight, _older_eps(name, "bias", bias, eps, 1e-5)
    return _trailing_norm(name, x, normalized_shape, {"weight": weight, "bias": bias}, eps, center=True)


def rms_norm(x: Tensor, normalized_shape: Any = None, weight: Any = None, eps: float = 1e-6) -> Tensor:
    """torch.nn.functional.rms_norm: x / sqrt(mean(x^2) + eps) over the trailing dimensions `normalized_shape`
    (as layer_norm's), times `weight` (of that shape) where given. eps is 1e-6 unless given (torch's default is
    the dtype's machine epsilon). The older order rms_norm(x, weight, eps), a tensor second, is accepted too."""
    name = "rms_norm"
    if _is_older_order(name, normalized_shape):
        normalized_shape, weight, eps = None, normalized_shape, _older_eps(name, "weight", weight, eps, 1e-6)
    return _trailing_norm(name, x, normalized_shape, {"weight": weight}, eps, center=False)


def _trailing_norm(name: str, x: Tensor, normalized_shape: Any, params: dict[str, Any], eps: float,
                   center: bool) -> Tensor:
    """layer_norm (`center`) or rms_norm over the trailing dimensions, with `params` (weight, then bias for
    layer_norm; None where not given) each checked to have the normalized shape."""
    x, *tensors = _with_tensors(name, x, *params.values())
    shape = _normalized_shape(name, x, normalized_shape, tensors[0])
    _check_shapes(name, f"the normalized shape {shape_str(shape)}", shape, **dict(zip(params, tensors)))
    lead = x.ndim - len(shape)
    return _normalize(name, x, tensors, tuple(range(lead, x.ndim)), eps, center, lambda i: tuple(i[lead:]))


def _is_older_order(name: str, normalized_shape: Any) -> bool:
    """Whether a norm's second argument is an array (the weight, in the older order) rather than torch's
    normalized_shape (None, an int, a symbolic dimension's name, or a list or tuple, torch.Size included)."""
    if normalized_shape is None or isinstance(normalized_shape, (numbers.Integral, str, list, tuple)):
        return False
    if hasattr(normalized_shape, "shape"):
        return True
    raise TypeError(f"{name}: normalized_shape must be an int or a sequence of ints, got {normalized_shape!r}")


def _older_eps(name: str, place: str, argument: Any, eps: float, default: float) -> float:
    """The eps of an older-order call, whose arguments sit one place before torch's: a number in torch's `place`
    (where the older order had eps) is that call's eps; a tensor there, or eps given twice, is ambiguous."""
    if argument is None:
        return eps
    if isinstance(argument, numbers.Real) and not isinstance(argument, bool) and eps == default:
        return float(argument)
    given = f"a tensor of shape {shape_str(argument.shape)}" if hasattr(argument, "shape") else repr(argument)
    raise TypeError(f"{name}: the second argument is a tensor (the weight of the older order {name}(x, weight, "
                    f"...)), which leaves no place for {place}={given}; write torch's order "
                    f"{name}(x, normalized_shape, weight, ...)")


def _with_tensors(name: str, x: Tensor, *params: Any) -> tuple:
    """`x` and `params` as tensors (numpy arrays and DLPack objects on x's device), None kept None."""
    given = as_tensors(name, x, *[p for p in params if p is not None])
    rest = iter(given[1:])
    return (given[0], *[None if p is None else next(rest) for p in params])


def _normalized_shape(name: str, x: Tensor, normalized_shape: Any, weight: Tensor | None) -> tuple:
    """The trailing dimensions a norm normalizes over: `normalized_shape` (one dimension, an int or a symbolic
    name, or a sequence of them), else the weight's shape, else the last dimension; checked against the input's
    trailing dimensions."""
    if normalized_shape is None:
        dims = tuple(weight.shape) if weight is not None else (x.shape[-1],)
    else:
        one = isinstance(normalized_shape, (numbers.Integral, str))
        dims = (normalized_shape,) if one else tuple(normalized_shape)
        if not all(isinstance(d, str) or (isinstance(d, numbers.Integral) and not isinstance(d, bool)) for d in dims):
            raise TypeError(f"{name}: normalized_shape must be an int or a sequence of ints, got {normalized_shape!r}")
        dims = tuple(d if isinstance(d, str) else int(d) for d in dims)
    if not dims:
        raise ValueError(f"{name}: normalized_shape must name at least one dimension, got {shape_str(dims)}")
    if len(dims) > x.ndim or tuple(x.shape[x.ndim - len(dims):]) != dims:
        raise ValueError(f"{name}: normalized shape {shape_str(dims)} does not end input shape {shape_str(x.shape)}")
    return dims


def _check_shapes(name: str, what: str, shape: tuple, **params: Tensor | None) -> None:
    """Raise unless each given parameter tensor has `shape` (described as `what` in the message)."""
    for param, t in params.items():
        if t is not None and tuple(t.shape) != tuple(shape):
            raise ValueError(f"{name}: {param} of shape {shape_str(t.shape)} does not match {what}")


def batch_norm(x: Tensor, running_mean: Any, running_var: Any, weight: Any = None, bias: Any = None,
               training: bool = False, momentum: float = 0.1, eps: float = 1e-5) -> Tensor:
    """torch.nn.functional.batch_norm in inference: (x - running_mean) / sqrt(running_var + eps) * weight + bias
    over axis 1, each parameter of the channels' size. training=True (batch statistics) is not supported;
    momentum matters to training only."""
    name = "batch_norm"
    if not isinstance(training, bool):
        raise TypeError(f"{name}: training must be a bool, got {training!r} (as in torch, eps comes after training "
                        f"and momentum: pass eps=...)")
    if training:
        raise ValueError(f"{name}: training=True (batch statistics) is not supported; the running statistics "
                         f"normalize (inference)")
    x, running_mean, running_var, weight, bias = _with_tensors(name, x, running_mean, running_var, weight, bias)
    channels = _channels(name, x)
    _check_shapes(name, f"the input's {channels[0]} channels", channels, running_mean=running_mean,
                  running_var=running_var, weight=weight, bias=bias)
    scale = (running_var + eps) ** -0.5
    scale = scale * weight if weight is not None else scale
    y = (x - _per_channel(running_mean, x.ndim)) * _per_channel(scale, x.ndim)
    return y + _per_channel(bias, x.ndim) if bias is not None else y


def group_norm(x: Tensor, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Tensor:
    """torch.nn.functional.group_norm: normalization over groups of channels (axis 1) and the spatial axes, then
    per-channel weight and bias (each of the channels' size) where given."""
    name = "group_norm"
    x, weight, bias = _with_tensors(name, x, weight, bias)
    n, c = x.shape[0], _channels(name, x)[0]
    if c % num_groups:
        raise ValueError(f"{name}: {c} channels do not split into {num_groups} groups")
    _check_shapes(name, f"the input's {c} channels", (c,), weight=weight, bias=bias)
    grouped = reshape(x, [n, num_groups, -1])
    normed = reshape(_normalize(name, grouped, [None], (2,), eps, True, lambda i: i), x.shape)
    if weight is not None:
        normed = normed * _per_channel(weight, x.ndim)
    return normed + _per_channel(bias, x.ndim) if bias is not None else normed


def _channels(name: str, x: Tensor) -> tuple:
    """(C,) of an input of shape (N, C, ...)."""
    if x.ndim < 2:
        raise ValueError(f"{name}: expected an input of shape (N, C, ...), got {shape_str(x.shape)}")
    return (x.shape[1],)


def _per_channel(t: Tensor, ndim: int) -> Tensor:
    """A (C,) tensor shaped (1, C, 1, ...) to broadcast over an `ndim`-dimensional (N, C, ...) input."""
    return reshape(t, [1, -1] + [1] * (ndim - 2))
