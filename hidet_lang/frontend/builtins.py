"""Host-side objects a kernel names: `attrs`, `grid`, `meta`, local tensors, `printf`, math functions.

Inside a `@hidet.script` function the parser evaluates calls of these while parsing; those that stand for
IR (a local array, a `printf`) return requests or IR nodes that the parser turns into statements.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hidet_lang.frontend import semantics
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType, TensorType, dtype_from_name, int32

FUNC_ATTRS = ("func_kind", "func_name")
CUDA_ATTRS = ("grid_dim", "block_dim", "dynamic_smem_bytes", "min_blocks")


class _AttrsNamespace:
    """`attrs.func_kind = 'public'` inside a kernel sets the function's attributes; see FUNC_ATTRS, CUDA_ATTRS."""

    __slots__ = ("names", "prefix")

    def __init__(self, names: tuple[str, ...], prefix: str) -> None:
        object.__setattr__(self, "names", names)
        object.__setattr__(self, "prefix", prefix)

    def __setattr__(self, name: str, value: Any) -> None:
        raise RuntimeError(f"{self.prefix}{name} can only be set inside a @hidet.script function")

    def __repr__(self) -> str:
        return self.prefix.rstrip(".")


class _FuncAttrsNamespace(_AttrsNamespace):
    __slots__ = ()

    @property
    def cuda(self) -> _AttrsNamespace:
        return cuda_attrs


attrs = _FuncAttrsNamespace(FUNC_ATTRS + ("cuda",), "attrs.")
cuda_attrs = _AttrsNamespace(CUDA_ATTRS, "attrs.cuda.")


@dataclass(frozen=True)
class LocalTensorRequest:
    """What `register_tensor(f32, [4, 4])` evaluates to: the parser declares a local array for it."""

    dtype: DataType
    shape: tuple[int, ...]
    scope: str = ""


@dataclass(frozen=True)
class TensorPointerRequest:
    """What `tensor_pointer(f32, [n], init=x)` evaluates to: a pointer viewed as a tensor of that shape."""

    dtype: DataType
    shape: tuple[Any, ...]
    init: Any


@dataclass(frozen=True)
class GridLoop:
    """`grid(4, 4, attrs='p.')`: nested loops; per dimension '.' plain, 'u' unrolled, 'p' parallel (OpenMP)."""

    extents: tuple[Any, ...]
    kinds: tuple[str, ...]


@dataclass(frozen=True)
class MetaRange:
    """`meta.range(...)`: a loop unrolled while parsing; its variable is a Python int in the body."""

    values: tuple[Any, ...]


def _as_dtype(dtype: DataType | str) -> DataType:
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, str):
        return dtype_from_name(dtype)
    raise TypeError(f"expected a data type such as f32 or 'float32', got {dtype!r}")


def _as_shape(shape: Any) -> tuple[Any, ...]:
    if isinstance(shape, (int, E.Expr)):
        return (shape,)
    if isinstance(shape, Sequence):
        return tuple(shape)
    raise TypeError(f"a shape is a list of extents, got {shape!r}")


def register_tensor(dtype: DataType | str, shape: Sequence[int]) -> LocalTensorRequest:
    """A local array of `dtype` with a constant `shape` (in registers on CUDA, on the stack on the CPU)."""
    dims = _as_shape(shape)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(f"a local tensor's shape must be positive Python ints, got {list(dims)}")
    return LocalTensorRequest(_as_dtype(dtype), dims)


def tensor(dtype: DataType | str, shape: Sequence[int], scope: str = "register") -> LocalTensorRequest:
    """A local tensor; `scope` is 'register' (or 'local'), or 'shared' in CUDA kernels."""
    if scope not in ("register", "local", "shared"):
        raise ValueError(f"tensor scope {scope!r} is not one of 'register', 'local', 'shared'")
    request = register_tensor(dtype, shape)
    return LocalTensorRequest(request.dtype, request.shape, "shared" if scope == "shared" else "")


def tensor_pointer(dtype: DataType | str, shape: Sequence[Any], init: Any = None) -> TensorPointerRequest:
    """A pointer viewed as a tensor of `shape` (extents may be IR values), initialised from `init`."""
    return TensorPointerRequest(_as_dtype(dtype), _as_shape(shape), init)


def grid(*extents: Any, attrs: str | None = None) -> GridLoop:
    """Nested loops over `extents`; `attrs` has one character per dimension: '.', 'u' (unroll), 'p' (parallel)."""
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    if not extents:
        raise ValueError("grid() needs at least one extent")
    spec = attrs if attrs is not None else "." * len(extents)
    if len(spec) != len(extents) or any(c not in ".up" for c in spec):
        raise ValueError(
            f"grid attrs {spec!r} must have one character per dimension ({len(extents)}), each '.', 'u' or 'p'"
        )
    names = {".": "", "u": "unroll", "p": "parallel"}
    return GridLoop(tuple(extents), tuple(names[c] for c in spec))


class meta:  # noqa: N801 - spelled as in Hidet Script
    """Loops unrolled while parsing: `for i in meta.range(4):` runs the body four times with i = 0..3."""

    @staticmethod
    def range(*args: int) -> MetaRange:
        """Like Python's range, unrolled while parsing."""
        return MetaRange(tuple(range(*args)))

    @staticmethod
    def each(values: Sequence[Any]) -> MetaRange:
        """Unrolls the body over the given Python values."""
        return MetaRange(tuple(values))


def printf(fmt: str, *args: Any) -> E.Intrinsic:
    """C `printf`; the output is flushed when the kernel returns."""
    if not isinstance(fmt, str):
        raise TypeError("printf's first argument must be a format string")
    exprs = []
    for a in args:
        e = E.convert(a)
        t = semantics.scalar_type(e, "printf") if not isinstance(e.type, TensorType) else None
        if t is not None and t.is_float and t.nbytes < 8:
            e = E.Cast(e, dtype_from_name("float64"))
        exprs.append(e)
    return E.Intrinsic("printf", (E.StringLiteral(fmt), *exprs), int32)


def rsqrt(x: Any) -> E.Expr:
    """1 / sqrt(x)."""
    return semantics.math_call("rsqrt", x)


def exp(x: Any) -> E.Expr:
    """e ** x."""
    return semantics.math_call("exp", x)


def sqrt(x: Any) -> E.Expr:
    """The square root of x."""
    return semantics.math_call("sqrt", x)


# Python's `math` functions (and a few builtins) as the intrinsics they stand for inside a kernel.
PYTHON_MATH = {
    math.exp: "exp", math.log: "log", math.sqrt: "sqrt", math.sin: "sin", math.cos: "cos", math.tan: "tan",
    math.tanh: "tanh", math.erf: "erf", math.floor: "floor", math.ceil: "ceil", math.pow: "pow",
    math.fabs: "abs", math.log2: "log2", math.atan: "atan", math.asin: "asin", math.acos: "acos",
    math.sinh: "sinh", math.cosh: "cosh", math.log1p: "log1p", math.expm1: "expm1", math.atan2: "atan2",
    math.fmod: "fmod", math.trunc: "trunc", abs: "abs", min: "min", max: "max", pow: "pow", round: "round",
}
if hasattr(math, "exp2"):
    PYTHON_MATH[math.exp2] = "exp2"

# Python's conversion builtins inside a kernel.
PYTHON_CASTS = {float: "float32", int: "int32", bool: "bool"}
