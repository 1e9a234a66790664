"""The ONNX operator table: `CONVERTERS` maps an op_type of the default domain (opset 13 and later) to the function
that converts one node onto stdlib_ops operators.

A value is a `Tensor` (a graph value, or a constant) or a numpy array known while importing (initializers,
Constant nodes and what is computed from them alone). Shape computations stay known: `Shape` gives an array of
the dimensions, whose entries are ints and, for symbolic dimensions, their names (an object array), and the
operators on shapes (Gather, Slice, Concat, Unsqueeze, Squeeze, Cast, arithmetic, comparisons, Where, Range,
ConstantOfShape, ...) compute on such arrays at import time, so Reshape and Expand receive static or symbolic
shapes. A node converts to tensors as soon as one of its inputs is a graph value.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

import stdlib_ops.operators as ops
from stdlib_ops.dims import dim_product, factors, make_dim
from stdlib_ops.tensor import Tensor, asarray

Value = Tensor | np.ndarray
Converter = Callable[["Node"], list[Value]]
CONVERTERS: dict[str, Converter] = {}


class ConversionError(ValueError):
    """A node the importer cannot convert, or an operator that refused its operands; the message names the node."""


class Scope:
    """What the conversions of one graph share: one constant per known array."""

    def __init__(self) -> None:
        self.constants: dict[int, tuple[np.ndarray, Tensor]] = {}

    def constant(self, array: np.ndarray) -> Tensor:
        """A constant tensor holding `array` (one per array, however often it is used)."""
        if id(array) not in self.constants:
            self.constants[id(array)] = (array, asarray(array))
        return self.constants[id(array)][1]

    def broadcast(self, value: np.ndarray, dims: Sequence[Any]) -> Tensor:
        """The known `value` broadcast to `dims`, which may be symbolic (then the graph computes it)."""
        if not any(isinstance(d, str) for d in dims):
            return self.constant(np.array(np.broadcast_to(value, dims)))
        return ops.broadcast_to(self.constant(np.asarray(value)), list(dims))


class Node:
    """One ONNX node being converted: its attributes, its input values, and errors that name it."""

    def __init__(self, proto: onnx.NodeProto, inputs: list[Value | None], scope: Scope) -> None:
        self.proto = proto
        self.op_type = proto.op_type
        self.inputs = inputs
        self.scope = scope
        self.attrs = {a.name: a for a in proto.attribute}

    @property
    def title(self) -> str:
        """The node as error messages name it: 'name' (OpType)."""
        return f"{describe(self.proto)} ({self.op_type})"

    def fail(self, message: str) -> ConversionError:
        """An error about this node."""
        return ConversionError(f"ONNX node {self.title}: {message}")

    def attr(self, name: str, default: Any = None) -> Any:
        """The attribute `name` as a Python value (strings decoded, tensors as numpy arrays), or `default`."""
        if name not in self.attrs:
            return default
        value = helper.get_attribute_value(self.attrs[name])
        if isinstance(value, bytes):
            return value.decode()
        if isinstance(value, onnx.TensorProto):
            return numpy_helper.to_array(value)
        return value

    def has(self, k: int) -> bool:
        """Whether optional input `k` is given."""
        return k < len(self.inputs) and self.inputs[k] is not None

    def is_known(self, k: int) -> bool:
        """Whether input `k` is known while importing."""
        return isinstance(self.inputs[k], np.ndarray)

    def all_known(self) -> bool:
        """Whether every given input is known while importing."""
        return all(v is None or isinstance(v, np.ndarray) for v in self.inputs)

    def known(self, k: int) -> np.ndarray:
        """Input `k`, which must be known while importing (a constant, or computed from shapes and constants)."""
        value = self.inputs[k] if k < len(self.inputs) else None
        if not isinstance(value, np.ndarray):
            raise self.fail(f"input {k} ({self.proto.input[k]!r}) must be known while importing (a constant, or "
                            f"computed from shapes and constants); here it is computed from the graph's inputs")
        return value

    def ints(self, k: int) -> list[Any]:
        """Known input `k` as a list of ints and symbolic-dimension names."""
        return [v if isinstance(v, str) else int(v) for v in self.known(k).reshape(-1).tolist()]

    def scalar(self, k: int) -> Any:
        """Known input `k`, a one-element array, as a Python number (or a symbolic-dimension name)."""
        values = self.ints(k) if self.known(k).dtype.kind in "iuO" else self.known(k).reshape(-1).tolist()
        if len(values) != 1:
            raise self.fail(f"input {k} ({self.proto.input[k]!r}) must hold one value, got {len(values)}")
        return values[0]

    def tensor(self, k: int) -> Tensor:
        """Input `k` as a tensor (a known array becomes a constant)."""
        value = self.inputs[k]
        if isinstance(value, Tensor):
            return value
        if value is None:
            raise self.fail(f"input {k} is missing")
        if value.dtype == object:
            raise self.fail(f"input {k} ({self.proto.input[k]!r}) holds the symbolic dimensions {value.tolist()}, "
                            f"which cannot be used as tensor data")
        return self.scope.constant(value)

    def optional_tensor(self, k: int) -> Tensor | None:
        """Input `k` as a tensor, or None when it is not given."""
        return self.tensor(k) if self.has(k) else None

    def axes(self, k: int) -> list[int] | None:
        """The `axes` of the node: input `k` where the opset takes them as an input, else the attribute."""
        if self.has(k):
            return [int(a) for a in self.ints(k)]
        axes = self.attr("axes")
        return None if axes is None else [int(a) for a in axes]


def describe(proto: onnx.NodeProto) -> str:
    """A node's name in messages: its name, or its first output's when it has none."""
    return repr(proto.name) if proto.name else f"<unnamed, output {proto.output[0]!r}>"


def converts(*op_types: str) -> Callable[[Converter], Converter]:
    """Register the decorated function as the converter of `op_types`."""

    def register(fn: Converter) -> Converter:
        for op_type in op_types:
            CONVERTERS[op_type] = fn
        return fn

    return register


# ---- known values: arrays of dimensions -----------------------------------------------------------------------


def dims_array(dims: Sequence[Any]) -> np.ndarray:
    """Dimensions (ints, symbolic names) as a known 1-D value: int64, or an object array when one is symbolic."""
    if any(isinstance(d, str) for d in dims):
        out = np.empty(len(dims), dtype=object)
        out[:] = list(dims)
        return out
    return np.asarray([int(d) for d in dims], dtype=np.int64).reshape(len(dims))


def known_array(value: Any, dtype: Any = np.int64) -> np.ndarray:
    """A known result as an array (numpy gives scalars for some): object arrays without symbolic names become
    `dtype`."""
    array = np.asarray(value, dtype=object) if isinstance(value, str) else np.asarray(value)
    if array.dtype == object and not any(isinstance(v, str) for v in array.reshape(-1).tolist()):
        return array.astype(dtype)
    return array


def _exact_quotient(a: Any, b: Any) -> Any:
    """The dimension a / b where it divides exactly for every value of the symbols, else None."""
    (names_a, factor_a), (names_b, factor_b) = factors(a), factors(b)
    if Counter(names_b) - Counter(names_a) or factor_b == 0 or factor_a % factor_b:
        return None
    return make_dim((Counter(names_a) - Counter(names_b)).elements(), factor_a // factor_b)


def _symbolic(name: str, fn: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """`fn` on dimensions, where a symbolic one (at least 1, value unknown) is kept only in the results that are
    certain: products (x * 4 is the dimension 'x*4'), exact quotients (x*4 / 4), x + 0, x - 0, x - x,
    max(x, 1), min(x, 1), max(x, x)."""

    def op(a: Any, b: Any) -> Any:
        if not (isinstance(a, str) or isinstance(b, str)):
            return fn(a, b)
        same = a == b
        natural = all(isinstance(d, str) or d >= 0 for d in (a, b))
        rules = {
            "Mul": dim_product([a, b]) if natural else None,
            "Add": a if b == 0 else b if a == 0 else None,
            "Sub": 0 if same else a if b == 0 else None,
            "Div": _exact_quotient(a, b) if natural else None,
            "Max": a if same or b == 1 else b if a == 1 else None,
            "Min": a if same else 1 if 1 in (a, b) else None,
        }
        result = rules.get(name)
        if result is None:
            raise ValueError(f"the shape computation {name}({a!r}, {b!r}) has no value as a dimension of "
                             f"stdlib_ops (a symbolic dimension is a product of names and an int)")
        return result

    return op


def _int_div(a: Any, b: Any) -> Any:
    """ONNX's integer division: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a < 0) == (b < 0) else -q


def _fold_binary(node: Node, name: str, numeric: Callable[[np.ndarray, np.ndarray], Any],
                 on_dims: Callable[[Any, Any], Any]) -> np.ndarray:
    """A binary operator on two known inputs; object arrays (shapes with symbolic names) go element by element."""
    a, b = node.known(0), node.known(1)
    if a.dtype == object or b.dtype == object:
        try:
            return known_array(np.frompyfunc(_symbolic(name, on_dims), 2, 1)(a, b))
        except ValueError as e:
            raise node.fail(str(e)) from None
    return known_array(numeric(a, b), np.result_type(a, b))


# ---- element-wise ----------------------------------------------------------------------------------------------

UNARY: dict[str, Callable[[Tensor], Tensor]] = {
    "Relu": ops.relu, "Neg": ops.neg, "Abs": ops.abs, "Exp": ops.exp, "Log": ops.log, "Sqrt": ops.sqrt,
    "Sigmoid": ops.sigmoid, "Tanh": ops.tanh, "Erf": ops.erf, "Floor": ops.floor, "Ceil": ops.ceil,
    "Round": ops.round, "Sin": ops.sin, "Cos": ops.cos,
    "Reciprocal": lambda x: ops.div(1.0, x),
    "IsNaN": lambda x: ops.not_equal(x, x),
}


@converts(*UNARY)
def unary(node: Node) -> list[Value]:
    """Element-wise functions of one tensor."""
    if node.op_type in ("Neg", "Abs") and node.all_known():
        fn = np.negative if node.op_type == "Neg" else np.abs
        value = node.known(0)
        if value.dtype != object:
            return [known_array(fn(value), value.dtype)]
    return [UNARY[node.op_type](node.tensor(0))]


def _tensor_div(a: Tensor, b: Tensor) -> Tensor:
    """ONNX's Div: true division of floats, truncating division of integers."""
    if a.dtype.startswith(("float", "bfloat")):
        return ops.div(a, b)
    q = ops.div(a, b)
    return ops.cast(ops.where(ops.less(q, 0.0), ops.ceil(q), ops.floor(q)), a.dtype)


def _tensor_pow(a: Tensor, b: Tensor) -> Tensor:
    """ONNX's Pow: the result has the base's dtype, whatever the exponent's."""
    return ops.pow(a, b if b.dtype == a.dtype else ops.cast(b, a.dtype))


BINARY: dict[str, tuple[Callable[..., Tensor], Callable[..., Any], Callable[[Any, Any], Any]]] = {
    # op_type: (on tensors, on known numeric arrays, on single dimensions)
    "Add": (ops.add, np.add, operator.add),
    "Sub": (ops.sub, np.subtract, operator.sub),
    "Mul": (ops.mul, np.multiply, operator.mul),
    "Div": (_tensor_div, lambda a, b: np.frompyfunc(_int_div, 2, 1)(a, b) if a.dtype.kind in "iu" else a / b,
            _int_div),
    "Pow": (_tensor_pow, lambda a, b: np.power(a, b.astype(a.dtype)).astype(a.dtype), operator.pow),
    "Max": (ops.maximum, np.maximum, max),
    "Min": (ops.minimum, np.minimum, min),
}


@converts(*BINARY, "Sum", "Mean")
def binary(node: Node) -> list[Value]:
    """Arithmetic with numpy's broadcasting (Max, Min, Sum and Mean take any number of operands)."""
    name = "Add" if node.op_type in ("Sum", "Mean") else node.op_type
    tensor_fn, numeric, on_dims = BINARY[name]
    if len(node.inputs) == 1:
        return [node.inputs[0]]
    if len(node.inputs) == 2 and node.all_known() and node.op_type != "Mean":
        return [_fold_binary(node, name, numeric, on_dims)]
    result = node.tensor(0)
    for k in range(1, len(node.inputs)):
        result = tensor_fn(result, node.tensor(k))
    if node.op_type == "Mean":
        result = ops.div(result, float(len(node.inputs)))
    return [result]


COMPARISONS: dict[str, tuple[Callable[..., Tensor], Callable[[Any, Any], Any]]] = {
    "Equal": (ops.equal, operator.eq), "Less": (ops.less, operator.lt),
    "LessOrEqual": (ops.less_equal, operator.le), "Greater": (ops.greater, operator.gt),
    "GreaterOrEqual": (ops.greater_equal, operator.ge),
}


@converts(*COMPARISONS)
def comparison(node: Node) -> list[Value]:
    """Element-wise comparisons giving bool tensors; on known shapes, only equality may involve a symbol."""
    tensor_fn, fn = COMPARISONS[node.op_type]
    if node.all_known():
        a, b = node.known(0), node.known(1)
        if node.op_type != "Equal" and (a.dtype == object or b.dtype == object):
            raise node.fail(f"comparing the symbolic dimensions {a.tolist()} and {b.tolist()} has no known result")
        return [np.asarray(np.frompyfunc(fn, 2, 1)(a, b), dtype=bool)]
    return [tensor_fn(node.tensor(0), node.tensor(1))]


@converts("Not", "And", "Or", "Xor")
def logical(node: Node) -> list[Value]:
    """Logical operators on bool tensors."""
    if node.all_known():
        fns = {"Not": np.logical_not, "And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}
        return [np.asarray(fns[node.op_type](*[node.known(k) for k in range(len(node.inputs))]))]
    a = node.tensor(0)
    if node.op_type == "Not":
        return [ops.equal(a, False)]
    b = node.tensor(1)
    if node.op_type == "And":
        return [ops.where(a, b, False)]
    if node.op_type == "Or":
        return [ops.where(a, True, b)]
    return [ops.not_equal(a, b)]


@converts("Where")
def where(node: Node) -> list[Value]:
    """Elements of the second input where the condition holds, else of the third."""
    if node.all_known():
        return [known_array(np.where(node.known(0), node.known(1), node.known(2)), node.known(1).dtype)]
    return [ops.where(node.tensor(0), node.tensor(1), node.tensor(2))]


@converts("Clip")
def clip(node: Node) -> list[Value]:
    """Each element limited to [min, max] (inputs 1 and 2, either may be absent)."""
    x = node.tensor(0)
    for k, fn in ((1, ops.maximum), (2, ops.minimum)):
        if node.has(k) and not node.is_known(k):
            x = fn(x, node.tensor(k))
    bounds = [node.scalar(k) if node.has(k) and node.is_known(k) else None for k in (1, 2)]
    if bounds == [None, None]:
        return [x]
    number = float if x.dtype.startswith(("float", "bfloat")) else int
    return [ops.clip(x, *[None if b is None else number(b) for b in bounds])]


@converts("Cast", "CastLike")
def cast(node: Node) -> list[Value]:
    """The input converted to the dtype of `to` (Cast) or of the second input (CastLike)."""
    if node.op_type == "Cast":
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(node.attr("to"))).name
    else:
        dtype = node.known(1).dtype.name if node.is_known(1) else node.tensor(1).dtype
    if node.is_known(0):
        value = node.known(0)
        if value.dtype != object:
            return [value.astype(dtype)]
        if np.dtype(dtype).kind in "iu":
            return [value]
        raise node.fail(f"the symbolic dimensions {value.tolist()} cannot be cast to {dtype}")
    x = node.tensor(0)
    return [x if x.dtype == dtype else ops.cast(x, dtype)]


@converts("Identity", "Dropout")
def identity(node: Node) -> list[Value]:
    """The input itself (Dropout in inference: its mask output is not supported)."""
    if node.op_type == "Dropout" and node.has(2) and bool(node.scalar(2)):
        raise node.fail("training_mode=True is not supported (inference only)")
    return [node.inputs[0]]


def _gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    inner = ops.mul(ops.add(x, ops.mul(ops.mul(ops.mul(x, x), x), 0.044715)), math.sqrt(2.0 / math.pi))
    return ops.mul(ops.mul(x, 0.5), ops.add(ops.tanh(inner), 1.0))


@converts("Gelu")
def gelu(node: Node) -> list[Value]:
    """GELU, exact (erf) or with the tanh approximation."""
    approximate = node.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise node.fail(f"approximate={approximate!r} is not supported (only 'none' and 'tanh')")
    x = node.tensor(0)
    return [ops.gelu(x) if approximate == "none" else _gelu_tanh(x)]


@converts("LeakyRelu", "PRelu")
def leaky_relu(node: Node) -> list[Value]:
    """x where x >= 0, else x times the slope (the attribute alpha, or PRelu's broadcast second input)."""
    x = node.tensor(0)
    slope = node.tensor(1) if node.op_type == "PRelu" else node.attr("alpha", 0.01)
    return [ops.where(ops.greater_equal(x, 0.0), x, ops.mul(x, slope))]


@converts("HardSigmoid", "HardSwish")
def hard_sigmoid(node: Node) -> list[Value]:
    """max(0, min(1, alpha x + beta)); HardSwish multiplies it by x (alpha 1/6, beta 1/2)."""
    x = node.tensor(0)
    alpha, beta = (node.attr("alpha", 0.2), node.attr("beta", 0.5)) if node.op_type == "HardSigmoid" else (1 / 6, 0.5)
    gate = ops.clip(ops.add(ops.mul(x, alpha), beta), 0.0, 1.0)
    return [gate if node.op_type == "HardSigmoid" else ops.mul(x, gate)]


# ---- linear algebra and networks -------------------------------------------------------------------------------


@converts("MatMul")
def matmul(node: Node) -> list[Value]:
    """numpy's matmul."""
    return [ops.matmul(node.tensor(0), node.tensor(1))]


@converts("Gemm")
def gemm(node: Node) -> list[Value]:
    """alpha * A' @ B' + beta * C, A' and B' transposed where transA / transB say."""
    a, b = node.tensor(0), node.tensor(1)
    if node.attr("transA", 0):
        a = ops.transpose(a)
    if node.attr("transB", 0):
        b = ops.transpose(b)
    y = ops.matmul(a, b)
    alpha, beta = node.attr("alpha", 1.0), node.attr("beta", 1.0)
    if alpha != 1.0:
        y = ops.mul(y, alpha)
    if node.has(2) and beta != 0.0:
        c = node.tensor(2)
        y = ops.add(y, c if beta == 1.0 else ops.mul(c, beta))
    return [y]


def _spatial_attrs(node: Node, rank: int, name: str, default: int) -> list[int]:
    values = list(node.attr(name, [default] * rank))
    if len(values) != rank:
        raise node.fail(f"{name} {values} does not have one entry per spatial axis ({rank})")
    return values


def _pads(node: Node, spatial: Sequence[Any], kernel: Sequence[int], strides: Sequence[int],
          dilations: Sequence[int]) -> list[tuple[int, int]]:
    """(begin, end) padding per spatial axis, from `pads` or `auto_pad`."""
    rank = len(spatial)
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad == "VALID":
        return [(0, 0)] * rank
    if auto_pad == "NOTSET":
        pads = _spatial_attrs(node, 2 * rank, "pads", 0)
        return list(zip(pads[:rank], pads[rank:]))
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise node.fail(f"auto_pad={auto_pad!r} is not supported")
    if any(isinstance(d, str) for d in spatial):
        raise node.fail(f"auto_pad={auto_pad!r} needs static spatial sizes, got {list(spatial)}")
    out = []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        total = max(0, (-(-size // s) - 1) * s + (k - 1) * d + 1 - size)
        small = total // 2
        out.append((small, total - small) if auto_pad == "SAME_UPPER" else (total - small, small))
    return out


def _to_2d(node: Node, x: Tensor) -> Tensor:
    """A 3-D (N, C, L) tensor as (N, C, 1, L); 4-D ones as they are; other ranks refused."""
    if x.ndim not in (3, 4):
        raise node.fail(f"only 1-D and 2-D windows are supported, got an input of shape {list(x.shape)}")
    return ops.expand_dims(x, 2) if x.ndim == 3 else x


def _explicit_pad(x: Tensor, pads: list[tuple[int, int]], value: float) -> Tensor:
    return ops.pad(x, [(0, 0), (0, 0), *pads], constant_values=value)


@converts("Conv")
def conv(node: Node) -> list[Value]:
    """1-D and 2-D convolution with strides, dilations, groups and any padding (asymmetric padding is applied by
    a separate pad operator)."""
    x, w, bias = node.tensor(0), node.tensor(1), node.optional_tensor(2)
    rank = x.ndim - 2
    kernel = list(w.shape[2:])
    strides = _spatial_attrs(node, rank, "strides", 1)
    dilations = _spatial_attrs(node, rank, "dilations", 1)
    pads = _pads(node, x.shape[2:], kernel, strides, dilations)
    x, w = _to_2d(node, x), _to_2d(node, w)
    if rank == 1:
        strides, dilations, pads = [1, *strides], [1, *dilations], [(0, 0), *pads]
    padding = [p[0] for p in pads]
    if any(b != e for b, e in pads):
        x, padding = _explicit_pad(x, pads, 0.0), [0, 0]
    y = ops.conv2d(x, w, bias, stride=tuple(strides), padding=tuple(padding), dilation=tuple(dilations),
                   groups=node.attr("group", 1))
    return [ops.squeeze(y, 2) if rank == 1 else y]


def _ceil_extra(size: int, k: int, s: int, d: int, pad: tuple[int, int]) -> int:
    """The padding to add at the end so that the floor-mode output has the ceil-mode size (a last window must
    start inside the input or its left padding)."""
    extent = (k - 1) * d + 1
    out = -(-(size + pad[0] + pad[1] - extent) // s) + 1
    if (out - 1) * s >= size + pad[0]:
        out -= 1
    return max(0, (out - 1) * s + extent - size - pad[0] - pad[1])


@converts("MaxPool", "AveragePool")
def pool(node: Node) -> list[Value]:
    """1-D and 2-D max and average pooling (MaxPool's Indices output is not supported)."""
    x = node.tensor(0)
    rank = x.ndim - 2
    kernel = _spatial_attrs(node, rank, "kernel_shape", 1)
    strides = _spatial_attrs(node, rank, "strides", 1)
    dilations = _spatial_attrs(node, rank, "dilations", 1)
    pads = _pads(node, x.shape[2:], kernel, strides, dilations)
    if node.attr("storage_order", 0):
        raise node.fail("storage_order=1 is not supported")
    is_max = node.op_type == "MaxPool"
    include_pad = bool(node.attr("count_include_pad", 0))
    if node.attr("ceil_mode", 0):
        if any(isinstance(d, str) for d in x.shape[2:]):
            raise node.fail(f"ceil_mode=1 needs static spatial sizes, got {list(x.shape)}")
        extra = [_ceil_extra(*args) for args in zip(x.shape[2:], kernel, strides, dilations, pads)]
        if any(extra) and not is_max:
            raise node.fail("ceil_mode=1 is not supported for AveragePool when it adds a partial window")
        pads = [(b, e + more) for (b, e), more in zip(pads, extra)]
    x = _to_2d(node, x)
    if rank == 1:
        kernel, strides, dilations, pads = [1, *kernel], [1, *strides], [1, *dilations], [(0, 0), *pads]
    padding = [p[0] for p in pads]
    if any(b != e or 2 * b > k for (b, e), k in zip(pads, kernel)):
        if not (is_max or include_pad):
            raise node.fail(f"pads {pads} (asymmetric, or over half the kernel {kernel}) are not supported with "
                            f"count_include_pad=0")
        x, padding = _explicit_pad(x, pads, -math.inf if is_max else 0.0), [0, 0]
    if is_max:
        y = ops.max_pool2d(x, tuple(kernel), tuple(strides), tuple(padding), tuple(dilations))
    else:
        if dilations != [1, 1]:
            raise node.fail(f"dilations {dilations} are not supported for AveragePool")
        y = ops.avg_pool2d(x, tuple(kernel), tuple(strides), tuple(padding), count_include_pad=include_pad)
    return [ops.squeeze(y, 2) if rank == 1 else y]


@converts("GlobalAveragePool", "GlobalMaxPool")
def global_pool(node: Node) -> list[Value]:
    """The mean or the largest element over all spatial axes, kept as size-1 axes."""
    x = node.tensor(0)
    axes = tuple(range(2, x.ndim))
    fn = ops.mean if node.op_type == "GlobalAveragePool" else ops.max
    return [fn(x, axis=axes, keepdims=True)]


@converts("BatchNormalization")
def batch_norm(node: Node) -> list[Value]:
    """Batch normalization in inference mode (the running statistics)."""
    if node.attr("training_mode", 0):
        raise node.fail("training_mode=1 is not supported (inference only)")
    x, scale, bias, mean, var = (node.tensor(k) for k in range(5))
    return [ops.batch_norm(x, mean, var, weight=scale, bias=bias, eps=node.attr("epsilon", 1e-5))]


@converts("InstanceNormalization")
def instance_norm(node: Node) -> list[Value]:
    """Normalization of each channel of each sample over the spatial axes, then the channel's scale and bias."""
    x = node.tensor(0)
    if isinstance(x.shape[1], str):
        raise node.fail(f"the channel dimension must be static, got shape {list(x.shape)}")
    return [ops.group_norm(x, x.shape[1], node.tensor(1), node.tensor(2), eps=node.attr("epsilon", 1e-5))]


@converts("LayerNormalization")
def layer_norm(node: Node) -> list[Value]:
    """Normalization over the axes from `axis` on, then scale and bias (broadcast to those axes); the Mean and
    InvStdDev outputs are not supported."""
    x = node.tensor(0)
    axis = node.attr("axis", -1) % x.ndim
    shape = x.shape[axis:]
    params = []
    for k in (1, 2):
        p = node.optional_tensor(k)
        params.append(p if p is None or tuple(p.shape) == shape else ops.broadcast_to(p, shape))
    return [ops.layer_norm(x, shape, params[0], params[1], eps=node.attr("epsilon", 1e-5))]


@converts("Softmax", "LogSoftmax")
def softmax(node: Node) -> list[Value]:
    """softmax or log_softmax along `axis` (opset 13 and later: one axis, default the last)."""
    fn = ops.softmax if node.op_type == "Softmax" else ops.log_softmax
    return [fn(node.tensor(0), axis=node.attr("axis", -1))]


# ---- reductions ------------------------------------------------------------------------------------------------


def _reduce_axes(node: Node, ndim: int) -> tuple[int, ...] | None:
    """The axes to reduce (the `axes` input or attribute); None for none at all (noop_with_empty_axes)."""
    axes = node.axes(1)
    if not axes:
        return None if node.attr("noop_with_empty_axes", 0) else tuple(range(ndim))
    return tuple(a % ndim for a in axes)


def _log_sum_exp(x: Tensor, axis: tuple[int, ...], keepdims: bool) -> Tensor:
    """log(sum(exp(x))) computed stably: the largest element taken out first."""
    m = ops.max(x, axis=axis, keepdims=True)
    total = ops.log(ops.sum(ops.exp(ops.sub(x, m)), axis=axis, keepdims=True))
    out = ops.add(total, m)
    return out if keepdims else ops.squeeze(out, axis)


REDUCTIONS: dict[str, Callable[[Tensor, tuple[int, ...], bool], Tensor]] = {
    "ReduceSum": lambda x, a, k: ops.sum(x, axis=a, keepdims=k),
    "ReduceMean": lambda x, a, k: ops.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: ops.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: ops.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: ops.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: ops.sum(ops.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: ops.sqrt(ops.sum(ops.mul(x, x), axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: ops.sum(ops.mul(x, x), axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: ops.log(ops.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": _log_sum_exp,
}


@converts(*REDUCTIONS)
def reduction(node: Node) -> list[Value]:
    """Reductions over `axes` (an attribute before opset 18, an input after; ReduceSum's an input from 13)."""
    x = node.tensor(0)
    axes = _reduce_axes(node, x.ndim)
    if axes is None:
        return [x]
    return [REDUCTIONS[node.op_type](x, axes, bool(node.attr("keepdims", 1)))]


@converts("ArgMax", "ArgMin")
def arg_reduce(node: Node) -> list[Value]:
    """The index of the first largest (smallest) element along `axis`, as int64."""
    if node.attr("select_last_index", 0):
        raise node.fail("select_last_index=1 is not supported")
    fn = ops.argmax if node.op_type == "ArgMax" else ops.argmin
    return [fn(node.tensor(0), axis=node.attr("axis", 0), keepdims=bool(node.attr("keepdims", 1)))]


# ---- shapes and data movement ----------------------------------------------------------------------------------


def shape_of(value: Value) -> tuple[Any, ...]:
    """The shape of a value (a tensor's, or a known array's)."""
    return tuple(value.shape)


@converts("Shape")
def shape(node: Node) -> list[Value]:
    """The input's dimensions from `start` to `end`, as a known array (names for symbolic dimensions)."""
    dims = shape_of(node.inputs[0])
    start, end = node.attr("start", 0), node.attr("end", len(dims))
    return [dims_array(dims[slice(start, end)])]


@converts("Size")
def size(node: Node) -> list[Value]:
    """The input's number of elements, known when its shape is static."""
    dims = shape_of(node.inputs[0])
    if any(isinstance(d, str) for d in dims):
        raise node.fail(f"the size of the symbolic shape {list(dims)} is not a dimension of stdlib_ops")
    return [np.asarray(math.prod(dims), dtype=np.int64)]


@converts("Constant")
def constant(node: Node) -> list[Value]:
    """The attribute's value as a known array."""
    kinds = {"value": None, "value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
             "value_ints": np.int64}
    for name, dtype in kinds.items():
        if name in node.attrs:
            return [np.asarray(node.attr(name), dtype=dtype)]
    raise node.fail(f"the attribute {', '.join(node.attrs)} is not supported (only numeric constants)")


@converts("ConstantOfShape")
def constant_of_shape(node: Node) -> list[Value]:
    """A tensor of the known shape filled with the `value` attribute (default 0.0, float32)."""
    fill = node.attr("value")
    fill = np.zeros(1, np.float32) if fill is None else fill
    dims = node.ints(0)
    if all(isinstance(d, int) for d in dims):
        return [np.full(dims, fill.reshape(-1)[0], dtype=fill.dtype)]
    return [node.scope.broadcast(fill.reshape(()), dims)]


@converts("Range")
def range_(node: Node) -> list[Value]:
    """start, start + delta, ... up to limit (excluded): known bounds only."""
    bounds = [node.scalar(k) for k in range(3)]
    if any(isinstance(b, str) for b in bounds):
        raise node.fail(f"a range with the symbolic bounds {bounds} is not supported: stdlib_ops has no arange "
                        f"whose length is a symbolic dimension")
    return [np.arange(*bounds, dtype=node.known(0).dtype)]


def _reshape_target(node: Node, dims: tuple[Any, ...], target: list[Any]) -> list[Any]:
    """Reshape's target with ONNX's rules: 0 copies the input's dimension (unless allowzero); -1 is left to
    `stdlib_ops.reshape` to infer."""
    out = []
    for k, d in enumerate(target):
        if isinstance(d, int) and d == 0 and not node.attr("allowzero", 0):
            if k >= len(dims):
                raise node.fail(f"the 0 at position {k} of shape {target} has no input dimension to copy "
                                f"(input shape {list(dims)})")
            d = dims[k]
        out.append(d)
    return out


@converts("Reshape")
def reshape(node: Node) -> list[Value]:
    """The input with the known shape of input 1."""
    target = _reshape_target(node, shape_of(node.inputs[0]), node.ints(1))
    if node.is_known(0) and all(isinstance(d, int) for d in target):
        return [node.known(0).reshape(target)]
    return [ops.reshape(node.tensor(0), target)]


@converts("Flatten")
def flatten(node: Node) -> list[Value]:
    """The input as a matrix: the axes before `axis` merged into rows, the others into columns."""
    x = node.tensor(0)
    axis = node.attr("axis", 1)
    axis = axis + x.ndim if axis < 0 else axis
    return [ops.reshape(x, [dim_product(x.shape[:axis]), dim_product(x.shape[axis:])])]


@converts("Transpose")
def transpose(node: Node) -> list[Value]:
    """The input's axes permuted by `perm` (reversed by default)."""
    perm = node.attr("perm")
    if node.is_known(0):
        return [np.transpose(node.known(0), perm)]
    return [ops.transpose(node.tensor(0), perm)]


@converts("Squeeze", "Unsqueeze")
def squeeze(node: Node) -> list[Value]:
    """Size-1 axes removed (Squeeze; all of them without `axes`) or inserted (Unsqueeze; axes of the output)."""
    axes = node.axes(1)
    value = node.inputs[0]
    if node.op_type == "Unsqueeze":
        if axes is None:
            raise node.fail("Unsqueeze needs axes")
        out_rank = len(shape_of(value)) + len(axes)
        axes = tuple(sorted(a % out_rank for a in axes))
        return [np.expand_dims(value, axes) if node.is_known(0) else ops.expand_dims(value, axes)]
    if axes is not None:
        axes = tuple(a % len(shape_of(value)) for a in axes)
    return [np.squeeze(value, axes) if node.is_known(0) else ops.squeeze(value, axes)]


@converts("Concat")
def concat(node: Node) -> list[Value]:
    """The inputs joined along `axis`."""
    axis = node.attr("axis")
    if node.all_known():
        parts = [node.known(k) for k in range(len(node.inputs))]
        joined = np.concatenate(parts, axis=axis)
        return [known_array(joined, np.result_type(*[p for p in parts if p.dtype != object] or [np.int64]))]
    return [ops.concat([node.tensor(k) for k in range(len(node.inputs))], axis=axis)]


@converts("Split")
def split(node: Node) -> list[Value]:
    """The input cut along `axis` into the sizes of input 1, or into as many equal parts as outputs (the last
    smaller when `num_outputs` does not divide the axis)."""
    value = node.inputs[0]
    axis = node.attr("axis", 0) % len(shape_of(value))
    size = shape_of(value)[axis]
    count = len(node.proto.output)
    if node.has(1):
        sizes = node.ints(1)
    elif isinstance(size, str):
        raise node.fail(f"splitting the symbolic dimension {size!r} into equal parts is not supported")
    else:
        chunk = -(-size // count)
        sizes = [chunk] * (count - 1) + [size - chunk * (count - 1)]
    cuts = list(np.cumsum(sizes)[:-1]) if sizes else []
    cuts = [int(c) for c in cuts]
    if node.is_known(0):
        return list(np.split(value, cuts, axis=axis))
    return ops.split(value, cuts, axis=axis)


LARGE = 2**31 - 1  # a bound at least this large reaches past every axis (kernels index with int32)


def _slice_bound(node: Node, bound: Any, size: Any, step: int, what: str) -> Any:
    """A start or end of a Python slice (whose clamping is ONNX's); on a symbolic axis only the whole axis, as
    None."""
    if not (isinstance(bound, str) or isinstance(size, str)):
        return bound
    if isinstance(bound, str):
        whole = what == "end" and bound == size
    else:
        whole = bound == 0 or bound <= -LARGE if what == "start" else bound >= LARGE
    if step > 0 and isinstance(size, str) and whole:
        return None
    raise node.fail(f"slicing an axis of size {size!r} with {what} {bound!r} is not supported: stdlib_ops slices a "
                    f"symbolic dimension only whole, and a static one only with static bounds")


@converts("Slice")
def slice_(node: Node) -> list[Value]:
    """The input sliced by the known starts, ends, axes and steps (out-of-range bounds clamped)."""
    dims = shape_of(node.inputs[0])
    starts, ends = node.ints(1), node.ints(2)
    axes = [a % len(dims) for a in node.ints(3)] if node.has(3) else list(range(len(starts)))
    steps = node.ints(4) if node.has(4) else [1] * len(starts)
    index = [slice(None)] * len(dims)
    for axis, start, end, step in zip(axes, starts, ends, steps):
        if step == 0:
            raise node.fail("a step of 0 is not allowed")
        index[axis] = slice(_slice_bound(node, start, dims[axis], step, "start"),
                            _slice_bound(node, end, dims[axis], step, "end"), step)
    if node.is_known(0):
        return [node.known(0)[tuple(index)]]
    return [ops.getitem(node.tensor(0), tuple(index))]


@converts("Gather")
def gather(node: Node) -> list[Value]:
    """The input's elements at the indices of input 1 along `axis` (negative indices count from the end)."""
    axis = node.attr("axis", 0)
    if node.all_known():
        return [np.take(node.known(0), node.known(1), axis=axis)]
    return [ops.take(node.tensor(0), node.tensor(1), axis=axis)]


@converts("GatherElements")
def gather_elements(node: Node) -> list[Value]:
    """out[i][j][k] = data[i][indices[i][j][k]][k] (for axis 1): a take from the flattened data at the flat
    positions; the data's shape and the indices' other axes must be static."""
    axis = node.attr("axis", 0)
    if node.all_known():
        data, indices = node.known(0), node.known(1)
        return [np.take_along_axis(data, np.where(indices < 0, indices + data.shape[axis], indices), axis=axis)]
    x, idx = node.tensor(0), node.tensor(1)
    axis %= x.ndim
    if any(isinstance(d, str) for d in x.shape) or any(isinstance(d, str) for k, d in enumerate(idx.shape)
                                                        if k != axis):
        raise node.fail(f"data of shape {list(x.shape)} and indices of shape {list(idx.shape)}: only the indices' "
                        f"axis {axis} may be symbolic")
    strides = [math.prod(x.shape[k + 1:]) for k in range(x.ndim)]
    offsets = np.zeros([1 if k == axis else d for k, d in enumerate(idx.shape)], dtype=np.int64)
    for k in range(x.ndim):
        if k != axis:
            shape = [1] * x.ndim
            shape[k] = idx.shape[k]
            offsets = offsets + np.arange(idx.shape[k], dtype=np.int64).reshape(shape) * strides[k]
    wrapped = ops.where(ops.less(idx, 0), ops.add(idx, x.shape[axis]), idx)
    flat = ops.add(ops.mul(ops.cast(wrapped, "int64"), strides[axis]), node.scope.constant(offsets))
    return [ops.take(ops.reshape(x, [-1]), flat, axis=0)]


def _broadcast_dims(node: Node, a: Sequence[Any], b: Sequence[Any]) -> list[Any]:
    """numpy's broadcast of two shapes whose entries may be symbolic names."""
    rank = max(len(a), len(b))
    a, b = [1] * (rank - len(a)) + list(a), [1] * (rank - len(b)) + list(b)
    out = []
    for p, q in zip(a, b):
        if p != q and 1 not in (p, q):
            raise node.fail(f"shapes {a} and {b} do not broadcast together")
        out.append(q if p == 1 else p)
    return out


@converts("Expand")
def expand(node: Node) -> list[Value]:
    """The input broadcast with the known shape of input 1 (both ways, as numpy broadcasts two operands)."""
    value = node.inputs[0]
    target = _broadcast_dims(node, shape_of(value), node.ints(1))
    if node.is_known(0) and all(isinstance(d, int) for d in target):
        return [np.array(np.broadcast_to(value, target))]
    if node.is_known(0):
        return [node.scope.broadcast(value, target)]
    x = node.tensor(0)
    return [x if list(x.shape) == target else ops.broadcast_to(x, target)]


@converts("Tile")
def tile(node: Node) -> list[Value]:
    """The input repeated along each axis as often as the known repeats say."""
    repeats = node.ints(1)
    if node.is_known(0):
        return [np.tile(node.known(0), repeats)]
    x = node.tensor(0)
    if len(repeats) != x.ndim:
        raise node.fail(f"{len(repeats)} repeats for an input of shape {list(x.shape)}")
    if any(r != 1 and isinstance(d, str) for r, d in zip(repeats, x.shape)):
        raise node.fail(f"repeating a symbolic dimension ({list(x.shape)} by {repeats}) is not supported")
    spread = ops.reshape(x, [d for dim in x.shape for d in (1, dim)])
    wide = ops.broadcast_to(spread, [d for r, dim in zip(repeats, x.shape) for d in (r, dim)])
    return [ops.reshape(wide, [dim if r == 1 else r * dim for r, dim in zip(repeats, x.shape)])]


@converts("Pad")
def pad(node: Node) -> list[Value]:
    """Constant padding by the known `pads` (begins, then ends) on `axes` (default all)."""
    mode = node.attr("mode", "constant")
    if mode != "constant":
        raise node.fail(f"mode={mode!r} is not supported (only 'constant')")
    x = node.tensor(0)
    pads = node.ints(1)
    axes = [a % x.ndim for a in node.ints(3)] if node.has(3) else list(range(x.ndim))
    if len(pads) != 2 * len(axes) or any(p < 0 for p in pads):
        raise node.fail(f"pads {pads} must be two non-negative entries per axis of {axes}")
    widths = [(0, 0)] * x.ndim
    for k, axis in enumerate(axes):
        widths[axis] = (pads[k], pads[k + len(axes)])
    value = node.scalar(2) if node.has(2) else 0
    return [ops.pad(x, widths, constant_values=value)]
