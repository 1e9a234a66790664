"""The table of torch operations the `torch.compile` backend converts, each onto stdlib_ops operators.

`FUNCTIONS` maps callables (torch functions, `torch.nn.functional` and `torch._C._nn` functions, `operator.*`)
and `METHODS` maps Tensor method names to converters with torch's own signature (so an FX node's args and kwargs
bind as in torch); a converter receives stdlib_ops Tensors where torch had tensors (constants already converted),
and Python values (ints, or strings for symbolic sizes) for sizes. `MODULES` maps `nn.Module` types (FX
`call_module` nodes) to converters taking the module, a `constant` function that turns the module's parameters
into stdlib_ops constants, and the call's arguments.

An in-place form (`h.mul_(2)`, `torch.relu_(h)`, `h += x`, `F.relu(h, inplace=True)`) converts as its
out-of-place form: the converter gives the new value, and the FX import (`torch_fx`) writes it into the tensor
(`is_inplace_method`, `INPLACE_FUNCTIONS` and the `inplace` argument say which calls write). `out=` arguments
never reach a converter either: the FX import writes the result into them.

Operations that would need data of the graph's inputs to shape a result, or that change state (dropout and batch
norm in training mode), raise a ValueError naming the operation and the argument.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812 - torch's own alias
from torch import nn

import stdlib_ops as ops
from stdlib_ops.tensor import DTYPES, Tensor

Converter = Callable[..., Any]
ModuleConverter = Callable[..., Any]

FUNCTIONS: dict[Any, Converter] = {}
METHODS: dict[str, Converter] = {}
MODULES: dict[type, ModuleConverter] = {}

# functions that write their first argument in place (F.relu_ is torch.relu_)
INPLACE_FUNCTIONS = {operator.iadd, operator.isub, operator.imul, operator.itruediv, operator.ifloordiv,
                     operator.ipow, operator.iand, operator.ior, torch.relu_}
# Tensor methods named in torch's in-place style that change no values
VALUE_PRESERVING_METHODS = {"requires_grad_"}


def is_inplace_method(name: str) -> bool:
    """True for a Tensor method that writes its tensor in place: torch's trailing-underscore names (`mul_`) and the
    in-place operators' methods (`__iadd__`)."""
    if name.startswith("__") and name.endswith("__"):
        return getattr(operator, name[2:-2], None) in INPLACE_FUNCTIONS
    return name.endswith("_") and name not in VALUE_PRESERVING_METHODS


def converts(*targets: Any) -> Callable[[Converter], Converter]:
    """Register the decorated converter for `targets`: callables, and strings naming Tensor methods."""

    def register(fn: Converter) -> Converter:
        for target in targets:
            if isinstance(target, str):
                METHODS[target] = fn
            else:
                FUNCTIONS[target] = fn
        return fn

    return register


def converts_module(*types: type) -> Callable[[ModuleConverter], ModuleConverter]:
    """Register the decorated converter for the `nn.Module` types `types`."""

    def register(fn: ModuleConverter) -> ModuleConverter:
        for t in types:
            MODULES[t] = fn
        return fn

    return register


def dtype_name(dtype: torch.dtype) -> str:
    """The stdlib_ops (numpy) name of a torch dtype; TypeError for dtypes stdlib_ops lacks."""
    name = str(dtype).removeprefix("torch.")
    if name not in DTYPES:
        raise TypeError(f"torch dtype {dtype} has no stdlib_ops counterpart (supported: {', '.join(DTYPES)})")
    return name


def _is_float(x: Tensor) -> bool:
    return x.dtype in ("float16", "float32", "float64", "bfloat16")


def _axes(dim: Any) -> Any:
    """torch's `dim` argument (int, sequence, or None) as stdlib_ops' `axis`."""
    return None if dim is None or (isinstance(dim, (list, tuple)) and not dim) else dim


def _sizes(sizes: Sequence[Any]) -> list[Any]:
    """Varargs sizes (`x.view(2, 3)`) or one sequence of them (`x.view((2, 3))`) as one list."""
    if len(sizes) == 1 and isinstance(sizes[0], (list, tuple, torch.Size)):
        return list(sizes[0])
    return list(sizes)


def _as_tensor(value: Any, like: Tensor) -> Tensor:
    """A Python scalar operand as a 0-d tensor of torch's result dtype next to `like`."""
    return value if isinstance(value, Tensor) else ops.asarray(np.asarray(value, _scalar_dtype(value, like)),
                                                              device=like.device)


def _scalar_dtype(value: Any, like: Tensor) -> str:
    """torch's dtype for a Python scalar next to a tensor: the tensor's unless the scalar's kind is wider."""
    if isinstance(value, bool) or (isinstance(value, int) and like.dtype != "bool"):
        return like.dtype
    if isinstance(value, (int, float)) and not _is_float(like):
        return "float32" if isinstance(value, float) else "int64"
    return like.dtype


# ---------------------------------------------------------------- element-wise


def promoted(a: Any, b: Any) -> tuple[Any, Any]:
    """Tensor operands cast as torch promotes them where numpy would not: an integer or bool tensor next to a
    float tensor takes the float's dtype, and a 0-d float tensor next to a wider-dimensional float tensor takes
    that tensor's dtype."""
    if not (isinstance(a, Tensor) and isinstance(b, Tensor)) or a.dtype == b.dtype:
        return a, b
    if _is_float(a) != _is_float(b):
        return (a, _cast(b, a.dtype)) if _is_float(a) else (_cast(a, b.dtype), b)
    if _is_float(a) and (a.ndim == 0) != (b.ndim == 0):
        return (_cast(a, b.dtype), b) if a.ndim == 0 else (a, _cast(b, a.dtype))
    return a, b


def _binary(fn: Callable[[Any, Any], Tensor]) -> Converter:
    def convert(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002 - torch's name
        return fn(*promoted(input, other if alpha == 1 else ops.mul(other, alpha)))

    return convert


converts(torch.add, operator.add, operator.iadd, "add", "add_", "__add__", "__iadd__")(_binary(ops.add))
converts(torch.sub, torch.subtract, operator.sub, operator.isub, "sub", "sub_", "__sub__")(_binary(ops.sub))
converts(torch.mul, torch.multiply, operator.mul, operator.imul, "mul", "mul_", "__mul__")(_binary(ops.mul))


@converts(torch.rsub, "__rsub__")
def rsub(input: Any, other: Any, *, alpha: Any = 1) -> Tensor:  # noqa: A002 - torch's name
    """`other - alpha * input`."""
    return ops.sub(other, input if alpha == 1 else ops.mul(input, alpha))


METHODS["__radd__"] = lambda input, other: ops.add(other, input)
METHODS["__rmul__"] = lambda input, other: ops.mul(other, input)


@converts(torch.div, torch.divide, torch.true_divide, operator.truediv, operator.itruediv, "div", "div_",
          "divide", "true_divide", "__truediv__", "__rtruediv__", operator.floordiv, "__floordiv__")
def div(input: Any, other: Any, *, rounding_mode: str | None = None) -> Tensor:  # noqa: A002 - torch's name
    """True division, or rounded toward zero ('trunc') or down ('floor', which `//` is). Integers are divided
    exactly (`ops.floor_divide`, whatever their size), never through a float quotient."""
    a, b = promoted(input, other)
    if rounding_mode is None:
        return ops.div(a, b)
    if rounding_mode == "floor":
        return ops.floor_divide(a, b)
    if rounding_mode != "trunc":
        raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
    if any(isinstance(v, float) or isinstance(v, Tensor) and _is_float(v) for v in (a, b)):
        q = ops.div(a, b)
        return ops.where(ops.less(q, 0), ops.ceil(q), ops.floor(q))
    # the floored quotient, one more where a remainder is left and the exact quotient is negative (the remainder,
    # which takes the divisor's sign, then has another sign than the dividend)
    q, r = ops.floor_divide(a, b), ops.remainder(a, b)
    rounded_down = ops.not_equal(ops.less(r, 0), ops.less(a, 0))
    return ops.where(ops.not_equal(r, 0), ops.where(rounded_down, ops.add(q, 1), q), q)


FUNCTIONS[operator.floordiv] = FUNCTIONS[operator.ifloordiv] = lambda a, b: div(a, b, rounding_mode="floor")
METHODS["__floordiv__"] = FUNCTIONS[operator.floordiv]
METHODS["__rtruediv__"] = lambda input, other: ops.div(other, input)


@converts(torch.remainder, operator.mod, "remainder", "__mod__")
def remainder(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's name
    """input - floor(input / other) * other (the sign of `other`, as Python's %), in the operands' dtype."""
    return ops.remainder(*promoted(input, other))


@converts(torch.pow, operator.pow, operator.ipow, "pow", "pow_", "__pow__", "__rpow__")
def pow(input: Any, exponent: Any) -> Tensor:  # noqa: A001, A002 - torch's names
    """`input ** exponent`; x ** 2 and x ** 0.5 as a product and a square root."""
    if isinstance(exponent, (int, float)) and not isinstance(exponent, bool) and isinstance(input, Tensor):
        if exponent == 2:
            return ops.mul(input, input)
        if exponent == 0.5 and _is_float(input):
            return ops.sqrt(input)
    return ops.pow(*promoted(input, exponent))


METHODS["__rpow__"] = lambda input, other: ops.pow(other, input)


def _unary(fn: Callable[[Tensor], Tensor]) -> Converter:
    def convert(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        return fn(input)

    return convert


_UNARY: dict[Callable[[Tensor], Tensor], tuple[Any, ...]] = {
    ops.neg: (torch.neg, torch.negative, operator.neg, "neg", "negative", "__neg__"),
    ops.exp: (torch.exp, "exp", "exp_"),
    ops.log: (torch.log, "log", "log_"),
    ops.sqrt: (torch.sqrt, "sqrt", "sqrt_"),
    ops.rsqrt: (torch.rsqrt, "rsqrt", "rsqrt_"),
    ops.sigmoid: (torch.sigmoid, F.sigmoid, torch.special.expit, "sigmoid", "sigmoid_"),
    ops.tanh: (torch.tanh, F.tanh, "tanh", "tanh_"),
    ops.abs: (torch.abs, torch.absolute, operator.abs, "abs", "abs_", "__abs__"),
    ops.erf: (torch.erf, torch.special.erf, "erf", "erf_"),
    ops.sin: (torch.sin, "sin"),
    ops.cos: (torch.cos, "cos"),
    ops.floor: (torch.floor, "floor"),
    ops.ceil: (torch.ceil, "ceil"),
    ops.round: (torch.round, "round"),
}
for _fn, _targets in _UNARY.items():
    converts(*_targets)(_unary(_fn))


@converts(torch.relu, torch.relu_, F.relu, F.relu_, "relu", "relu_")
def relu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 - torch's name
    """max(x, 0)."""
    return ops.relu(input)


@converts(F.silu)
def silu(input: Tensor, inplace: bool = False) -> Tensor:  # noqa: A002 - torch's name
    """x * sigmoid(x)."""
    return ops.silu(input)


@converts(F.gelu, torch._C._nn.gelu)
def gelu(input: Tensor, approximate: str = "none") -> Tensor:  # noqa: A002 - torch's name
    """GELU with the exact erf form ('none') or torch's tanh approximation ('tanh')."""
    if approximate == "none":
        return ops.gelu(input)
    if approximate != "tanh":
        raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    inner = ops.mul(ops.add(input, ops.mul(ops.mul(ops.mul(input, input), input), 0.044715)), math.sqrt(2 / math.pi))
    return ops.mul(ops.mul(input, 0.5), ops.add(ops.tanh(inner), 1.0))


@converts(F.leaky_relu)
def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:  # noqa: A002
    """x where x > 0, else negative_slope * x."""
    return ops.where(ops.greater(input, 0), input, ops.mul(input, negative_slope))


@converts(F.hardtanh, F.relu6)
def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:  # noqa: A002
    """x limited to [min_val, max_val] (relu6: [0, 6])."""
    return ops.clip(input, min_val, max_val)


FUNCTIONS[F.relu6] = lambda input, inplace=False: ops.clip(input, 0.0, 6.0)


@converts(torch.clamp, torch.clip, "clamp", "clip", "clamp_", "clip_")
def clamp(input: Tensor, min: Any = None, max: Any = None) -> Tensor:  # noqa: A001, A002 - torch's names
    """x limited to [min, max]; either bound may be None or a tensor."""
    if isinstance(min, Tensor) or isinstance(max, Tensor):
        out = input if min is None else ops.maximum(input, min)
        return out if max is None else ops.minimum(out, max)
    return ops.clip(input, min, max)


@converts(torch.maximum, "maximum")
def maximum(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's name
    """The element-wise larger."""
    return ops.maximum(*promoted(input, other))


converts(torch.minimum, "minimum")(lambda input, other: ops.minimum(*promoted(input, other)))


@converts(torch.where, "where")
def where(condition: Any, input: Any = None, other: Any = None) -> Tensor:  # noqa: A002 - torch's name
    """`input` where `condition` holds, else `other` (the one-argument form, which gives indices, is not
    convertible: its shape depends on the data)."""
    if input is None and other is None:
        raise ValueError("torch.where(condition) with one argument (the indices of true elements) has a "
                         "data-dependent shape; it is not supported")
    if isinstance(condition, Tensor) and isinstance(input, Tensor) and not isinstance(other, Tensor):
        other = _as_tensor(other, input)
    elif isinstance(condition, Tensor) and isinstance(other, Tensor) and not isinstance(input, Tensor):
        input = _as_tensor(input, other)
    return ops.where(condition, *promoted(input, other))


@converts(torch.masked_fill, "masked_fill", "masked_fill_")
def masked_fill(input: Tensor, mask: Tensor, value: Any) -> Tensor:  # noqa: A002 - torch's name
    """`value` (a Python scalar or a 0-d tensor) where the bool `mask`, broadcast to the input's shape, holds, else
    `input`; in the input's dtype (`att.masked_fill(causal == 0, float('-inf'))`)."""
    if mask.dtype != "bool":
        raise ValueError(f"masked_fill: the mask must be a bool tensor, got {mask.dtype}")
    fill = _cast(value, input.dtype) if isinstance(value, Tensor) else ops.asarray(np.asarray(value, input.dtype),
                                                                                   device=input.device)
    return ops.where(mask, fill, input)


@converts(torch.tril, "tril", "tril_")
def tril(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002 - torch's name
    """The elements of each matrix (the last two axes) on and below its `diagonal`-th diagonal (column - row <=
    diagonal), zeros above: a causal mask's triangle."""
    rows, columns = _matrix_sides(input, "tril")
    return _keep(input, np.tri(rows, columns, diagonal, dtype=bool))


@converts(torch.triu, "triu", "triu_")
def triu(input: Tensor, diagonal: int = 0) -> Tensor:  # noqa: A002 - torch's name
    """The elements of each matrix (the last two axes) on and above its `diagonal`-th diagonal (column - row >=
    diagonal), zeros below."""
    rows, columns = _matrix_sides(input, "triu")
    return _keep(input, ~np.tri(rows, columns, diagonal - 1, dtype=bool))


def _matrix_sides(x: Tensor, name: str) -> tuple[int, int]:
    """The sizes of the last two axes, which must be known."""
    if x.ndim < 2 or not all(isinstance(d, int) for d in x.shape[-2:]):
        raise ValueError(f"{name}: the input needs two trailing axes of known sizes, got shape {x.shape}")
    return x.shape[-2], x.shape[-1]


def _keep(x: Tensor, keep: np.ndarray) -> Tensor:
    """`x` where the constant `keep` (broadcast over the leading axes) holds, zero elsewhere."""
    zero = ops.asarray(np.zeros((), x.dtype), device=x.device)
    return ops.where(ops.asarray(keep, device=x.device), x, zero)


def _compare(fn: Callable[[Any, Any], Tensor]) -> Converter:
    def convert(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's name
        return fn(input, other)

    return convert


converts(torch.eq, operator.eq, "eq", "__eq__")(_compare(ops.equal))
converts(torch.ne, operator.ne, "ne", "__ne__", "not_equal")(_compare(ops.not_equal))
converts(torch.lt, torch.less, operator.lt, "lt", "less", "__lt__")(_compare(ops.less))
converts(torch.le, torch.less_equal, operator.le, "le", "less_equal", "__le__")(_compare(ops.less_equal))
converts(torch.gt, torch.greater, operator.gt, "gt", "greater", "__gt__")(_compare(ops.greater))
converts(torch.ge, torch.greater_equal, operator.ge, "ge", "greater_equal", "__ge__")(_compare(ops.greater_equal))


def _logical(name: str, combine: Callable[[Tensor, Tensor], Tensor]) -> Converter:
    def convert(input: Any, other: Any) -> Tensor:  # noqa: A002 - torch's name
        a, b = (_as_bool(v, name) for v in (input, other))
        return combine(a, b)

    return convert


def _as_bool(value: Any, name: str) -> Tensor:
    if not isinstance(value, Tensor) or value.dtype != "bool":
        raise ValueError(f"{name}: only bool tensors are supported (bitwise operations on integers are not), got "
                         f"{value.dtype if isinstance(value, Tensor) else type(value).__name__}")
    return value


converts(operator.and_, operator.iand, torch.logical_and, torch.bitwise_and, "logical_and", "__and__")(
    _logical("and", lambda a, b: ops.where(a, b, a)))
converts(operator.or_, operator.ior, torch.logical_or, torch.bitwise_or, "logical_or", "__or__")(
    _logical("or", lambda a, b: ops.where(a, a, b)))


@converts(torch.logical_not, operator.invert, "logical_not", "__invert__", "bitwise_not")
def logical_not(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    """The negation of a bool tensor."""
    return ops.equal(_as_bool(input, "not"), False)


# ---------------------------------------------------------------- reductions


def _reduction(fn: Callable[..., Tensor]) -> Converter:
    def convert(input: Tensor, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Tensor:  # noqa: A002
        x = input if dtype is None else ops.cast(input, dtype_name(dtype))
        if fn is ops.sum and dtype is None and not _is_float(x):
            x = ops.cast(x, "int64")  # torch sums integers and bools as int64
        return fn(x, axis=_axes(dim), keepdims=keepdim)

    return convert


converts(torch.sum, "sum")(_reduction(ops.sum))
converts(torch.mean, "mean")(_reduction(ops.mean))
converts(torch.prod, "prod")(_reduction(ops.prod))
converts(torch.amax, "amax")(_reduction(ops.max))
converts(torch.amin, "amin")(_reduction(ops.min))


def _extreme(values: Callable[..., Tensor], index: Callable[..., Tensor],
             pairwise: Callable[[Any, Any], Tensor]) -> Converter:
    """torch.max/min: of all elements, (values, indices) along `dim`, or the element-wise extreme of two tensors."""

    def convert(input: Tensor, dim: Any = None, keepdim: bool = False) -> Any:  # noqa: A002 - torch's name
        if isinstance(dim, Tensor):
            return pairwise(input, dim)
        if dim is None:
            return values(input)
        return torch.return_types.max((values(input, axis=dim, keepdims=keepdim),
                                       index(input, axis=dim, keepdims=keepdim)))

    return convert


converts(torch.max, "max")(_extreme(ops.max, ops.argmax, ops.maximum))
converts(torch.min, "min")(_extreme(ops.min, ops.argmin, ops.minimum))


@converts(torch.argmax, "argmax")
def argmax(input: Tensor, dim: int | None = None, keepdim: bool = False) -> Tensor:  # noqa: A002
    """The index of the first largest element along `dim` (of the flattened tensor when None)."""
    return ops.argmax(input, axis=dim, keepdims=keepdim)


FUNCTIONS[torch.argmin] = METHODS["argmin"] = lambda input, dim=None, keepdim=False: ops.argmin(input, dim, keepdim)


def _variance(fn: Callable[..., Tensor]) -> Converter:
    def convert(input: Tensor, dim: Any = None, unbiased: bool | None = None, keepdim: bool = False, *,  # noqa: A002
                correction: Any = None) -> Tensor:
        if isinstance(dim, bool):  # torch.var(x, unbiased)
            dim, unbiased = None, dim
        ddof = correction if correction is not None else (0 if unbiased is False else 1)
        return fn(input, axis=_axes(dim), keepdims=keepdim, ddof=int(ddof))

    return convert


converts(torch.var, "var")(_variance(ops.var))
converts(torch.std, "std")(_variance(ops.std))


@converts(F.softmax, torch.softmax, torch.special.softmax, "softmax")
def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa: A002
    """softmax along `dim` (computed in `dtype` when given)."""
    return ops.softmax(_softmax_input(input, dim, dtype), axis=dim)


@converts(F.log_softmax, torch.log_softmax, torch.special.log_softmax, "log_softmax")
def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Tensor:  # noqa
    """log_softmax along `dim`."""
    return ops.log_softmax(_softmax_input(input, dim, dtype), axis=dim)


def _softmax_input(x: Tensor, dim: Any, dtype: Any) -> Tensor:
    if dim is None:
        raise ValueError("softmax: dim=None (torch's deprecated implicit choice) is not supported; pass dim")
    return x if dtype is None else ops.cast(x, dtype_name(dtype))


@converts(torch.cumsum, "cumsum", "cumsum_")
def cumsum(input: Tensor, dim: int, *, dtype: Any = None) -> Tensor:  # noqa: A002 - torch's name
    """Running sums along `dim` (element i sums elements 0..i; integers and bools as int64, as torch sums them): one
    sum over the last axis of the input repeated n times and masked by a constant lower triangle, which is exact for
    integers (RoBERTa's and OPT's position ids) and adds a float's terms in another order than torch's sequential
    scan (within n ulps of the sum of their magnitudes)."""
    x = input if dtype is None else _cast(input, dtype_name(dtype))
    x = x if dtype is not None or _is_float(x) else _cast(x, "int64")
    if x.ndim == 0:
        return x
    axis = dim % x.ndim
    n = x.shape[axis]
    if not isinstance(n, int):
        raise ValueError(f"cumsum: the summed axis must have a known size, got shape {x.shape}")
    order = list(range(x.ndim))
    order[axis], order[-1] = order[-1], order[axis]
    last = x if axis == x.ndim - 1 else ops.transpose(x, order)
    zero = ops.asarray(np.zeros((), x.dtype), device=x.device)
    prefix = ops.asarray(np.tri(n, n, dtype=bool), device=x.device)  # [i, j]: j <= i
    sums = ops.sum(ops.where(prefix, ops.expand_dims(last, -2), zero), axis=-1)
    return sums if axis == x.ndim - 1 else ops.transpose(sums, order)


# ---------------------------------------------------------------- linear algebra


@converts(torch.matmul, operator.matmul, "matmul", "__matmul__", torch.bmm, "bmm", torch.mm, "mm")
def matmul(input: Tensor, other: Tensor) -> Tensor:  # noqa: A002 - torch's name
    """`input @ other` (bmm and mm are the 3-D and 2-D cases)."""
    return ops.matmul(input, other)


@converts(torch.addmm, "addmm")
def addmm(input: Any, mat1: Tensor, mat2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (mat1 @ mat2)."""
    product = ops.matmul(mat1, mat2)
    product = product if alpha == 1 else ops.mul(product, alpha)
    return ops.add(product, input if beta == 1 else ops.mul(input, beta)) if beta != 0 else product


@converts(torch.baddbmm, "baddbmm")
def baddbmm(input: Any, batch1: Tensor, batch2: Tensor, *, beta: Any = 1, alpha: Any = 1) -> Tensor:  # noqa: A002
    """beta * input + alpha * (batch1 @ batch2), batch by batch (BLOOM's ALiBi scores)."""
    return addmm(input, batch1, batch2, beta=beta, alpha=alpha)


@converts(F.linear, torch._C._nn.linear)
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:  # noqa: A002 - torch's name
    """x @ weight.T + bias; a constant weight is transposed once, here."""
    return _bias(ops.matmul(input, _transposed(weight)), bias)


def _transposed(w: Tensor) -> Tensor:
    """`w.T`: a constant's transposed copy (no kernel), or a transpose operator on a symbolic tensor."""
    if w.is_symbolic:
        return ops.transpose(w)
    return ops.asarray(np.ascontiguousarray(w.numpy().T), device=w.device)


def _bias(y: Tensor, bias: Tensor | None) -> Tensor:
    return y if bias is None else ops.add(y, bias)


# ---------------------------------------------------------------- networks


@converts(torch.conv2d, F.conv2d)
def conv2d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """2-D convolution; padding may be 'valid' or 'same' (with stride 1)."""
    if isinstance(padding, str):
        padding = _padding_of(padding, weight.shape[-2:], dilation, stride)
    return ops.conv2d(input, weight, bias, stride=stride, padding=padding, dilation=dilation, groups=groups)


@converts(torch.conv1d, F.conv1d)
def conv1d(input: Tensor, weight: Tensor, bias: Tensor | None = None, stride: Any = 1,  # noqa: A002
           padding: Any = 0, dilation: Any = 1, groups: int = 1) -> Tensor:
    """1-D convolution of (N, C, L) or unbatched (C, L) input, as a 2-D one over a height of 1."""
    batched = input.ndim == 3
    x = ops.expand_dims(input if batched else ops.expand_dims(input, 0), 2)
    pad = padding if isinstance(padding, str) else (0, _single(padding))
    y = conv2d(x, _with_unit_height(weight), bias, (1, _single(stride)), pad, (1, _single(dilation)), groups)
    return ops.squeeze(y, (2,) if batched else (0, 2))


def _single(value: Any) -> int:
    """A 1-D convolution's stride, padding or dilation: an int, or a sequence of one."""
    return value if isinstance(value, int) else int(value[0])


def _with_unit_height(w: Tensor) -> Tensor:
    """A 1-D convolution's weight (O, C, K) as a 2-D one (O, C, 1, K): a constant reshaped here, once."""
    if w.is_symbolic:
        return ops.expand_dims(w, 2)
    return ops.asarray(np.expand_dims(w.numpy(), 2), device=w.device)


def _padding_of(mode: str, kernel: Sequence[int], dilation: Any, stride: Any) -> tuple[int, int]:
    """torch's padding for 'valid' (none) or 'same' (the output as large as the input; stride 1, symmetric)."""
    if mode == "valid":
        return (0, 0)
    d = (dilation, dilation) if isinstance(dilation, int) else tuple(dilation)
    total = [d[a] * (kernel[a] - 1) for a in range(2)]
    if mode != "same" or stride not in (1, (1, 1)) or any(t % 2 for t in total):
        raise ValueError(f"conv2d: padding={mode!r} is supported as 'valid', or 'same' with stride 1 and an even "
                         f"total padding (got stride {stride}, kernel {tuple(kernel)}, dilation {dilation})")
    return (total[0] // 2, total[1] // 2)


@converts(F.batch_norm, torch.batch_norm)
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None,  # noqa: A002
               weight: Tensor | None = None, bias: Tensor | None = None, training: bool = False,
               momentum: float = 0.1, eps: float = 1e-5, *rest: Any) -> Tensor:
    """Inference batch norm with the running statistics; constant statistics fold into one scale and shift."""
    if training or running_mean is None or running_var is None:
        raise ValueError("batch_norm in training mode (batch statistics, running-stat updates) is not supported; "
                         "call model.eval() before torch.compile")
    params = [running_mean, running_var, weight, bias]
    if any(p is not None and p.is_symbolic for p in params):
        return ops.batch_norm(input, running_mean, running_var, weight, bias, eps=eps)
    mean, var = (p.numpy().astype(np.float64) for p in (running_mean, running_var))
    scale = 1.0 / np.sqrt(var + eps) * (1.0 if weight is None else weight.numpy().astype(np.float64))
    shift = (0.0 if bias is None else bias.numpy().astype(np.float64)) - mean * scale
    shape = (-1,) + (1,) * (input.ndim - 2)
    dtype = input.dtype
    return ops.add(ops.mul(input, _constant(scale.reshape(shape), dtype, input)),
                   _constant(shift.reshape(shape), dtype, input))


def _constant(values: np.ndarray, dtype: str, like: Tensor) -> Tensor:
    return ops.asarray(values.astype(dtype), device=like.device)


@converts(F.layer_norm, torch.layer_norm)
def layer_norm(input: Tensor, normalized_shape: Sequence[int], weight: Tensor | None = None,  # noqa: A002
               bias: Tensor | None = None, eps: float = 1e-5, *rest: Any) -> Tensor:
    """Normalization over the last `len(normalized_shape)` dimensions."""
    return ops.layer_norm(input, tuple(normalized_shape), weight, bias, eps)


@converts(F.group_norm, torch.group_norm)
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,  # noqa
               eps: float = 1e-5, *rest: Any) -> Tensor:
    """Normalization over groups of channels and the spatial axes."""
    return ops.group_norm(input, num_groups, weight, bias, eps=eps)


@converts(F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, torch.dropout)
def dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:  # noqa: A002
    """The identity at inference; dropout while training (random) is not supported."""
    if training and p > 0:
        raise ValueError(f"dropout with training=True and p={p} draws random numbers; it is not supported "
                         f"(call model.eval() before torch.compile)")
    return input


@converts(F.pad, torch._C._nn.pad)
def pad(input: Tensor, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Tensor:  # noqa
    """Constant padding: `pad` holds (before, after) amounts from the last axis backwards; negative ones crop."""
    if mode != "constant":
        raise ValueError(f"pad: mode={mode!r} is not supported (only 'constant')")
    if len(pad) % 2 or len(pad) // 2 > input.ndim:
        raise ValueError(f"pad: {len(pad)} amounts for a tensor of {input.ndim} axes")
    widths = [(0, 0)] * input.ndim
    for k in range(len(pad) // 2):
        widths[input.ndim - 1 - k] = (int(pad[2 * k]), int(pad[2 * k + 1]))
    if any(b < 0 or a < 0 for b, a in widths):
        input = ops.getitem(input, tuple(slice(max(-b, 0), a if a < 0 else None) for b, a in widths))
    grow = [(max(b, 0), max(a, 0)) for b, a in widths]
    return input if not any(b or a for b, a in grow) else ops.pad(input, grow, value or 0)


@converts(F.embedding)
def embedding(input: Tensor, weight: Tensor, padding_idx: Any = None, max_norm: Any = None,  # noqa: A002
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """The rows of `weight` at the indices `input` (padding_idx matters only to training)."""
    if max_norm is not None:
        raise ValueError("embedding with max_norm renormalizes the weight in place; it is not supported")
    return ops.take(weight, input, axis=0)


@converts(F.max_pool2d, torch.max_pool2d, F.max_pool2d_with_indices)
def max_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,  # noqa
               ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """Max pooling (ceil_mode and indices are not supported)."""
    if ceil_mode or return_indices:
        raise ValueError("max_pool2d: ceil_mode=True and return_indices=True are not supported")
    return ops.max_pool2d(input, kernel_size, stride=stride or None, padding=padding, dilation=dilation)


@converts(F.avg_pool2d, torch._C._nn.avg_pool2d)
def avg_pool2d(input: Tensor, kernel_size: Any, stride: Any = None, padding: Any = 0,  # noqa: A002
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: Any = None) -> Tensor:
    """Average pooling (ceil_mode and divisor_override are not supported)."""
    if ceil_mode or divisor_override is not None:
        raise ValueError("avg_pool2d: ceil_mode=True and divisor_override are not supported")
    return ops.avg_pool2d(input, kernel_size, stride=stride or None, padding=padding,
                          count_include_pad=count_include_pad)


@converts(F.adaptive_avg_pool2d, torch._C._nn.adaptive_avg_pool2d)
def adaptive_avg_pool2d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002 - torch's name
    """Average pooling into `output_size` bins."""
    return ops.adaptive_avg_pool2d(input, output_size)


@converts(F.adaptive_avg_pool1d, torch.adaptive_avg_pool1d)
def adaptive_avg_pool1d(input: Tensor, output_size: Any) -> Tensor:  # noqa: A002 - torch's name
    """Average pooling of (N, C, L) into `output_size` bins, as the 2-D pooling over a height of 1."""
    if input.ndim != 3:
        raise ValueError(f"adaptive_avg_pool1d: the input must be (N, C, L), got shape {input.shape}")
    pooled = ops.adaptive_avg_pool2d(ops.expand_dims(input, 2), (1, _single(output_size)))
    return ops.squeeze(pooled, (2,))


@converts(torch._weight_norm)
def weight_norm(v: Tensor, g: Tensor, dim: int = 0) -> Tensor:
    """`nn.utils.weight_norm`'s weight: v * (g / the 2-norm of v over every axis but `dim`; over all for -1)."""
    axes = None if dim == -1 else tuple(a for a in range(v.ndim) if a != dim % v.ndim)
    norm = ops.sqrt(ops.sum(ops.mul(v, v), axis=axes, keepdims=True))
    return ops.mul(v, ops.div(g, norm))


@converts(F.scaled_dot_product_attention, torch._C._nn.scaled_dot_product_attention)
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None,
                                 dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                                 enable_gqa: bool = False) -> Tensor:
    """softmax(q k^T * scale + mask) v as one `ops.attention` with every argument: a bool mask keeps the keys where
    it is true, a float mask is added to the scores, `is_causal` keeps key j for query i when j <= i, `scale`
    defaults to 1 / sqrt(D), and with `enable_gqa` query head h reads key/value head h // (H / H_kv). Dropout draws
    random numbers: a `dropout_p` other than 0 (training) is refused, and so is a mask with `is_causal`, as torch
    refuses it."""
    if dropout_p:
        raise ValueError(f"scaled_dot_product_attention: dropout_p={dropout_p} draws random numbers; only inference "
                         f"(dropout_p=0) is supported")
    if attn_mask is not None and is_causal:
        raise ValueError("scaled_dot_product_attention: attn_mask and is_causal=True together (torch refuses them "
                         "too); put the causal mask into attn_mask")
    return ops.attention(query, key, value, bool(is_causal), attn_mask=attn_mask, scale=scale,
                         enable_gqa=bool(enable_gqa))


def _swap_last(ndim: int) -> tuple[int, ...]:
    return (*range(ndim - 2), ndim - 1, ndim - 2)


# ---------------------------------------------------------------- data movement


@converts(torch.cat, torch.concat, torch.concatenate)
def cat(tensors: Sequence[Tensor], dim: int = 0, *, axis: int | None = None) -> Tensor:
    """The tensors joined along `dim` (empty 1-D tensors, torch's legacy filler, are skipped)."""
    parts = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)]
    return parts[0] if len(parts) == 1 else ops.concat(parts, axis=dim if axis is None else axis)


@converts(torch.stack)
def stack(tensors: Sequence[Tensor], dim: int = 0) -> Tensor:
    """The tensors joined along a new axis `dim`."""
    return ops.stack(list(tensors), axis=dim)


@converts(torch.split, "split")
def split(tensor: Tensor, split_size_or_sections: Any, dim: int = 0) -> tuple[Tensor, ...]:
    """Pieces of `split_size_or_sections` elements along `dim` (the last may be smaller), or of the sizes given."""
    n = tensor.shape[dim]
    if isinstance(split_size_or_sections, int):
        sizes = [min(split_size_or_sections, n - k) for k in range(0, n, split_size_or_sections)]
    else:
        sizes = list(split_size_or_sections)
    cuts = list(np.cumsum(sizes)[:-1])
    return tuple(ops.split(tensor, [int(c) for c in cuts], axis=dim))


@converts(torch.chunk, "chunk")
def chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002 - torch's name
    """`chunks` pieces of ceil(n / chunks) elements along `dim` (fewer when they run out)."""
    n = input.shape[dim]
    return split(input, -(-n // chunks), dim)


@converts(torch.unbind, "unbind")
def unbind(input: Tensor, dim: int = 0) -> tuple[Tensor, ...]:  # noqa: A002 - torch's name
    """The slices along `dim`, each without that axis."""
    index = [slice(None)] * input.ndim
    out = []
    for k in range(input.shape[dim]):
        index[dim] = k
        out.append(ops.getitem(input, tuple(index)))
    return tuple(out)


@converts(torch.squeeze, "squeeze")
def squeeze(input: Tensor, dim: Any = None) -> Tensor:  # noqa: A002 - torch's name
    """Without the size-1 axes among `dim` (all when None); torch leaves the other axes named alone."""
    axes = range(input.ndim) if dim is None else ([dim] if isinstance(dim, int) else list(dim))
    ones = tuple(a % input.ndim for a in axes if input.shape[a] == 1)
    return ops.squeeze(input, ones) if ones else input


@converts(torch.unsqueeze, "unsqueeze")
def unsqueeze(input: Tensor, dim: int) -> Tensor:  # noqa: A002 - torch's name
    """With a size-1 axis inserted at `dim`."""
    return ops.expand_dims(input, dim % (input.ndim + 1))


@converts(torch.flatten, "flatten")
def flatten(input: Tensor, start_dim: int = 0, end_dim: int = -1) -> Tensor:  # noqa: A002 - torch's name
    """The axes from `start_dim` to `end_dim` merged into one."""
    if input.ndim == 0:
        return ops.reshape(input, [1])
    s, e = start_dim % input.ndim, end_dim % input.ndim
    if s >= e:
        return input
    return ops.reshape(input, [*input.shape[:s], -1, *input.shape[e + 1:]])


@converts(torch.permute, "permute")
def permute(input: Tensor, *dims: Any) -> Tensor:  # noqa: A002 - torch's name
    """The axes reordered as `dims`."""
    return ops.transpose(input, _sizes(dims))


@converts(torch.transpose, torch.swapaxes, torch.swapdims, "transpose", "swapaxes", "swapdims")
def transpose(input: Tensor, dim0: int, dim1: int) -> Tensor:  # noqa: A002 - torch's name
    """Axes `dim0` and `dim1` swapped."""
    perm = list(range(input.ndim))
    a, b = dim0 % input.ndim, dim1 % input.ndim
    perm[a], perm[b] = perm[b], perm[a]
    return input if a == b else ops.transpose(input, perm)


@converts(torch.t, "t")
def t(input: Tensor) -> Tensor:  # noqa: A002 - torch's name
    """A 2-D tensor transposed (fewer dimensions: unchanged)."""
    return ops.transpose(input) if input.ndim == 2 else input


@converts(torch.reshape, "reshape", "view")
def reshape(input: Tensor, *shape: Any) -> Tensor:  # noqa: A002 - torch's name
    """The same elements with a new shape (sizes may be symbolic; one may be -1)."""
    if len(shape) == 1 and isinstance(shape[0], torch.dtype):
        raise ValueError("view(dtype) reinterprets bits; it is not supported")
    return ops.reshape(input, _sizes(shape))


METHODS["view_as"] = METHODS["reshape_as"] = lambda input, other: ops.reshape(input, list(other.shape))


@converts("expand", torch.broadcast_to)
def expand(input: Tensor, *sizes: Any) -> Tensor:  # noqa: A002 - torch's name
    """`input` broadcast to `sizes` (-1 keeps a dimension; new dimensions lead)."""
    target = _sizes(sizes)
    lead = len(target) - input.ndim
    shape = [input.shape[k - lead] if d == -1 else d for k, d in enumerate(target)]
    return input if tuple(shape) == tuple(input.shape) else ops.broadcast_to(input, shape)


METHODS["expand_as"] = lambda input, other: expand(input, list(other.shape))


@converts("contiguous", "clone", "detach", torch.clone, torch.detach, "requires_grad_", "cpu")
def identity(input: Tensor, *args: Any, **kwargs: Any) -> Tensor:  # noqa: A002 - torch's name
    """The same values (layout, gradients and copies do not exist in a stdlib_ops graph)."""
    return input


@converts("to", "type")
def to(input: Tensor, *args: Any, **kwargs: Any) -> Any:  # noqa: A002 - torch's name
    """`input` cast to the dtype among the arguments (a torch dtype, or the dtype of a tensor); devices are the
    compiled graph's business, so a device argument changes nothing."""
    dtype = kwargs.get("dtype")
    for a in args:
        if isinstance(a, torch.dtype):
            dtype = a
        elif isinstance(a, Tensor):
            return _cast(input, a.dtype)
    if dtype is None and not args and not kwargs:
        return str(input.dtype)  # x.type() with no arguments names the type
    return input if dtype is None else _cast(input, dtype_name(dtype))


def _cast(x: Tensor, dtype: str) -> Tensor:
    return x if x.dtype == dtype else ops.cast(x, dtype)


METHODS["type_as"] = lambda input, other: _cast(input, other.dtype)
for _method, _dtype in {"float": "float32", "double": "float64", "half": "float16", "bfloat16": "bfloat16",
                        "int": "int32", "long": "int64", "bool": "bool", "short": "int16"}.items():
    METHODS[_method] = (lambda d: lambda input, *a, **k: _cast(input, d))(_dtype)


@converts(operator.getitem)
def getitem(value: Any, index: Any) -> Any:
    """Indexing: a tensor by ints, slices, None and Ellipsis (basic) or by integer tensors (advanced,
    broadcast together, in consecutive leading positions); Python sequences (sizes, tuples of results)."""
    if not isinstance(value, Tensor):
        return value[index]
    items = index if isinstance(index, tuple) else (index,)
    if not any(isinstance(i, Tensor) for i in items):
        return ops.getitem(value, items)
    return _advanced_index(value, items)


def _advanced_index(x: Tensor, items: tuple) -> Tensor:
    """x[i0, i1, ..., :, ...] with integer tensors i0..ik on the leading axes: one `take` from the flattened x."""
    k = 0
    while k < len(items) and isinstance(items[k], Tensor):
        k += 1
    rest = items[k:]
    if any(isinstance(i, Tensor) for i in rest) or any(i != slice(None) for i in rest):
        raise ValueError("indexing with tensors is supported on leading axes followed by full slices only")
    for i in items[:k]:
        if i.dtype == "bool":
            raise ValueError("indexing with a bool mask has a data-dependent shape; it is not supported")
    if any(isinstance(d, str) for d in x.shape[:k + 1]):
        raise ValueError(f"indexing with tensors on symbolic dimensions is not supported (shape {x.shape})")
    strides = [math.prod(x.shape[a + 1:k]) for a in range(k)]
    flat_index: Any = None
    for i, stride, size in zip(items[:k], strides, x.shape[:k]):
        i = ops.where(ops.less(i, 0), ops.add(i, size), i)
        term = ops.mul(ops.cast(i, "int64"), stride)
        flat_index = term if flat_index is None else ops.add(flat_index, term)
    return ops.take(ops.reshape(x, [-1, *x.shape[k:]]), flat_index, axis=0)


@converts(torch.gather, "gather")
def gather(input: Tensor, dim: int, index: Tensor, *, sparse_grad: bool = False) -> Tensor:  # noqa: A002
    """out[..., i_dim, ...] = input[..., index[..., i_dim, ...], ...]: one `take` from the flattened input at
    flat positions computed from `index` (its shape must be known)."""
    if any(isinstance(d, str) for d in (*index.shape, *input.shape)):
        raise ValueError(f"gather: symbolic shapes are not supported (input {input.shape}, index {index.shape})")
    dim %= input.ndim
    strides = [math.prod(input.shape[a + 1:]) for a in range(input.ndim)]
    grid = np.indices(index.shape, dtype=np.int64)
    base = sum(grid[a] * strides[a] for a in range(input.ndim) if a != dim)
    offsets = ops.asarray(np.asarray(base, np.int64), device=input.device)
    flat = ops.add(ops.mul(ops.cast(index, "int64"), strides[dim]), offsets)
    return ops.take(ops.reshape(input, [-1]), flat, axis=0)


@converts("size")
def size(input: Tensor, dim: int | None = None) -> Any:  # noqa: A002 - torch's name
    """The shape (a tuple) or one dimension: ints, or strings for symbolic sizes."""
    return tuple(input.shape) if dim is None else input.shape[dim]


@converts("dim", "ndimension")
def dim(input: Tensor) -> int:  # noqa: A002 - torch's name
    """The number of dimensions."""
    return input.ndim


@converts(builtins.getattr)
def attribute(value: Any, name: str) -> Any:
    """Tensor attributes FX records as `getattr` calls: shape, ndim, dtype, T; other objects' attributes."""
    if not isinstance(value, Tensor):
        return getattr(value, name)
    if name == "shape":
        return tuple(value.shape)
    if name == "ndim":
        return value.ndim
    if name == "dtype":
        return getattr(torch, value.dtype)
    if name in ("T", "mT"):
        return ops.transpose(value) if name == "T" else ops.transpose(value, _swap_last(value.ndim))
    raise ValueError(f"the tensor attribute {name!r} is not supported")


# ---------------------------------------------------------------- modules


@converts_module(nn.Linear)
def linear_module(m: nn.Linear, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.Linear."""
    return linear(x, constant(m.weight), constant(m.bias))


@converts_module(nn.Conv2d)
def conv2d_module(m: nn.Conv2d, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.Conv2d (zero padding only)."""
    if m.padding_mode != "zeros":
        raise ValueError(f"nn.Conv2d with padding_mode={m.padding_mode!r} is not supported")
    return conv2d(x, constant(m.weight), constant(m.bias), m.stride, m.padding, m.dilation, m.groups)


@converts_module(nn.Conv1d)
def conv1d_module(m: nn.Conv1d, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.Conv1d (zero padding only)."""
    if m.padding_mode != "zeros":
        raise ValueError(f"nn.Conv1d with padding_mode={m.padding_mode!r} is not supported")
    return conv1d(x, constant(m.weight), constant(m.bias), m.stride, m.padding, m.dilation, m.groups)


@converts_module(nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)
def batch_norm_module(m: nn.modules.batchnorm._BatchNorm, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.BatchNorm in eval mode (its running statistics)."""
    training = m.training or m.running_mean is None
    return batch_norm(x, constant(m.running_mean), constant(m.running_var), constant(m.weight), constant(m.bias),
                      training, 0.0, m.eps)


@converts_module(nn.LayerNorm)
def layer_norm_module(m: nn.LayerNorm, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.LayerNorm."""
    return layer_norm(x, m.normalized_shape, constant(m.weight), constant(m.bias), m.eps)


@converts_module(nn.Embedding)
def embedding_module(m: nn.Embedding, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.Embedding."""
    return embedding(x, constant(m.weight), m.padding_idx, m.max_norm)


@converts_module(nn.MaxPool2d)
def max_pool2d_module(m: nn.MaxPool2d, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.MaxPool2d."""
    return max_pool2d(x, m.kernel_size, m.stride, m.padding, m.dilation, m.ceil_mode, m.return_indices)


@converts_module(nn.AvgPool2d)
def avg_pool2d_module(m: nn.AvgPool2d, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.AvgPool2d."""
    return avg_pool2d(x, m.kernel_size, m.stride, m.padding, m.ceil_mode, m.count_include_pad, m.divisor_override)


@converts_module(nn.AdaptiveAvgPool2d)
def adaptive_avg_pool2d_module(m: nn.AdaptiveAvgPool2d, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.AdaptiveAvgPool2d."""
    return ops.adaptive_avg_pool2d(x, m.output_size)


@converts_module(nn.AdaptiveAvgPool1d)
def adaptive_avg_pool1d_module(m: nn.AdaptiveAvgPool1d, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.AdaptiveAvgPool1d."""
    return adaptive_avg_pool1d(x, m.output_size)


@converts_module(nn.Flatten)
def flatten_module(m: nn.Flatten, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.Flatten (from dim 1 by default)."""
    return flatten(x, m.start_dim, m.end_dim)


@converts_module(nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout)
def dropout_module(m: nn.Module, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """nn.Dropout: the identity in eval mode."""
    return dropout(x, m.p, m.training)


@converts_module(nn.Identity)
def identity_module(m: nn.Module, constant: Callable[[Any], Any], x: Tensor, *args: Any, **kwargs: Any) -> Tensor:
    """nn.Identity."""
    return x


@converts_module(nn.ReLU, nn.ReLU6, nn.Sigmoid, nn.Tanh, nn.SiLU, nn.GELU, nn.LeakyReLU, nn.Softmax, nn.LogSoftmax)
def activation_module(m: nn.Module, constant: Callable[[Any], Any], x: Tensor) -> Tensor:
    """The activation modules, through their functional converters."""
    if isinstance(m, nn.GELU):
        return gelu(x, m.approximate)
    if isinstance(m, nn.LeakyReLU):
        return leaky_relu(x, m.negative_slope)
    if isinstance(m, (nn.Softmax, nn.LogSoftmax)):
        return (softmax if isinstance(m, nn.Softmax) else log_softmax)(x, m.dim)
    simple = {nn.ReLU: ops.relu, nn.Sigmoid: ops.sigmoid, nn.Tanh: ops.tanh, nn.SiLU: ops.silu}
    if isinstance(m, nn.ReLU6):
        return ops.clip(x, 0.0, 6.0)
    return simple[type(m)](x)


# ---------------------------------------------------------------- constants


def _factory(fn: Callable[..., torch.Tensor]) -> Converter:
    """A torch factory (arange, zeros, ...): a constant made by torch when its sizes are known."""

    def convert(*args: Any, **kwargs: Any) -> torch.Tensor:
        values = [*args, *kwargs.values()]
        if any(isinstance(v, str) for v in _leaves(values)):
            raise ValueError(f"{getattr(fn, '__name__', fn)} with a symbolic size is not supported")
        return fn(*args, **kwargs)

    return convert


for _f in (torch.arange, torch.zeros, torch.ones, torch.full, torch.tensor, torch.empty, torch.eye,
           torch.linspace, torch.finfo, torch.iinfo):
    FUNCTIONS[_f] = _factory(_f)


def _leaves(values: Any) -> list[Any]:
    out = []
    for v in values:
        out.extend(_leaves(v) if isinstance(v, (list, tuple)) else [v])
    return out


@converts(torch._C._log_api_usage_once)
def log_api_usage_once(event: str) -> None:
    """torch's usage log (an `nn.Module` made inside `forward`, as `self.layers[:n]` makes one, writes to it):
    nothing to compute."""
    return None


def fill_like(value: float, shape_from_args: bool) -> Converter:
    """zeros_like/ones_like (the input's shape) or new_zeros/new_ones (the sizes given), filled with `value`."""

    def convert(input: Tensor, *args: Any, dtype: Any = None, **kwargs: Any) -> Tensor:  # noqa: A002
        shape = _sizes(args) if shape_from_args else list(input.shape)
        name = input.dtype if dtype is None else dtype_name(dtype)
        return ops.broadcast_to(ops.asarray(np.asarray(value, name), device=input.device), shape)

    return convert


FUNCTIONS[torch.zeros_like] = fill_like(0, False)
FUNCTIONS[torch.ones_like] = fill_like(1, False)
METHODS["new_zeros"] = fill_like(0, True)
METHODS["new_ones"] = fill_like(1, True)
FUNCTIONS[torch.full_like] = lambda input, fill_value, *, dtype=None, **k: fill_like(fill_value, False)(
    input, dtype=dtype)
METHODS["new_full"] = lambda input, size, fill_value, *, dtype=None, **k: fill_like(fill_value, True)(
    input, size, dtype=dtype)
