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
from hidet_lang.frontend.loops import GridLoop, UnrolledLoop
from hidet_lang.ir import expr as E
from hidet_lang.ir.layout import Layout
from hidet_lang.ir.loop_attrs import parse_loop_attrs
from hidet_lang.ir.stmt import AsmStmt, DeclScope
from hidet_lang.ir.types import DataType, PointerType, TensorType, VectorType, dtype_from_name, int32

FUNC_ATTRS = ("func_kind", "func_name", "noinline", "fast_math", "no_alias")
CUDA_ATTRS = ("grid_dim", "block_dim", "dynamic_smem_bytes", "min_blocks", "cluster_dim")


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
    """What `register_tensor(f32, [4, 4])` evaluates to: the parser declares a local array for it.

    `layout` is the tensor's layout (`None`: row-major over `shape`); when it is set, `shape` is its shape.
    """

    dtype: DataType
    shape: tuple[int, ...]
    scope: DeclScope = DeclScope.LOCAL
    layout: Layout | None = None


@dataclass(frozen=True)
class TensorPointerRequest:
    """What `tensor_pointer(f32, [n], init=x)` evaluates to: a pointer viewed as a tensor of that shape."""

    dtype: DataType
    shape: tuple[Any, ...]
    init: Any


def _as_dtype(dtype: DataType | str) -> DataType:
    if isinstance(dtype, DataType):
        return dtype
    if isinstance(dtype, VectorType):
        raise dtype.not_an_element_type()
    if isinstance(dtype, str):
        return dtype_from_name(dtype)
    raise TypeError(f"expected a data type such as f32 or 'float32', got {dtype!r}")


def _as_shape(shape: Any) -> tuple[Any, ...]:
    if isinstance(shape, (int, E.Expr)):
        return (shape,)
    if isinstance(shape, Sequence):
        return tuple(shape)
    raise TypeError(f"a shape is a list of extents, got {shape!r}")


def _pointer_shape(shape: Any) -> tuple[Any, ...]:
    """The shape of a tensor a pointer points at: Python ints as they are, other extents as IR values."""
    return tuple(d if isinstance(d, int) else E.convert(d) for d in _as_shape(shape))


def local_tensor_request(
    dtype: DataType | str, shape: Sequence[int] | None, layout: Layout | None, scope: DeclScope, func: str
) -> LocalTensorRequest:
    """The request behind `register_tensor`, `tensor` and `shared_tensor`: the shape follows from the layout
    when omitted; when both are given they must agree (a `ValueError` naming `func` otherwise)."""
    if layout is not None and not isinstance(layout, Layout):
        hint = f" (pass the scope by keyword: scope={layout!r})" if isinstance(layout, str) else ""
        raise TypeError(f"{func}: layout must be a layout such as row_major(4, 4), got {layout!r}{hint}")
    if shape is None:
        if layout is None:
            raise TypeError(f"{func} needs a shape or a layout, e.g. {func}(f32, [4, 4])")
        return LocalTensorRequest(_as_dtype(dtype), layout.shape, scope, layout)
    dims = _as_shape(shape)
    for d in dims:
        if isinstance(d, bool) or not isinstance(d, int) or d <= 0:
            raise ValueError(f"a local tensor's shape must be positive Python ints, got {list(dims)}")
    if layout is not None and dims != layout.shape:
        raise ValueError(
            f"{func}: the shape {list(dims)} does not match the shape {list(layout.shape)} of the layout {layout}; "
            "give one of them, or make them agree"
        )
    return LocalTensorRequest(_as_dtype(dtype), dims, scope, layout)


def register_tensor(
    dtype: DataType | str, shape: Sequence[int] | None = None, layout: Layout | None = None
) -> LocalTensorRequest:
    """A local array of `dtype` with a constant `shape` (in registers on CUDA, on the stack on the CPU).

    `layout` (e.g. `column_major(4, 8)`, or `local_layout(16, 16) * row_major(4, 4)` mirroring a task mapping)
    maps indices to storage offsets and sets the storage size; the shape follows from it when omitted.
    """
    return local_tensor_request(dtype, shape, layout, DeclScope.LOCAL, "register_tensor")


def tensor(
    dtype: DataType | str,
    shape: Sequence[int] | None = None,
    layout: Layout | None = None,
    scope: str = "register",
) -> LocalTensorRequest:
    """A local tensor; `scope` is 'register' (or 'local'), or 'shared' in CUDA kernels. `shape` and `layout`
    are as in `register_tensor`."""
    if scope not in ("register", "local", "shared"):
        raise ValueError(f"tensor scope {scope!r} is not one of 'register', 'local', 'shared'")
    scope_kind = DeclScope.SHARED if scope == "shared" else DeclScope.LOCAL
    return local_tensor_request(dtype, shape, layout, scope_kind, "tensor")


def tensor_pointer(dtype: DataType | str, shape: Sequence[Any], init: Any = None) -> TensorPointerRequest:
    """A pointer viewed as a tensor of `shape` (extents may be IR values), initialised from `init`."""
    return TensorPointerRequest(_as_dtype(dtype), _pointer_shape(shape), init)


def grid(*extents: Any, attrs: str | None = None, bind_tuple: bool = False) -> GridLoop:
    """Nested loops over `extents`; `attrs` (also the last positional argument, as in Hidet Script) has one token
    per dimension: '.' plain, 'u' unrolled ('uN' by a factor of N, 'u+' completely), 'p' parallel ('pN' on N
    threads; OpenMP on the CPU), see `hidet_lang.ir.loop_attrs`.

    A loop with one name over several dimensions binds the list of indices (`for idx in grid(m, n)`); so does one
    over a single dimension when `bind_tuple` is set or the extents are given as a list (`for idx in grid([n])`
    binds `[i]`), as in Hidet Script."""
    if attrs is None and len(extents) > 1 and isinstance(extents[-1], str):
        extents, attrs = extents[:-1], extents[-1]
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
        bind_tuple = True
    if not extents:
        raise ValueError("grid() needs at least one extent")
    spec = attrs if attrs is not None else "." * len(extents)
    return GridLoop(tuple(extents), parse_loop_attrs(spec, len(extents), "grid"), bind_tuple)


@dataclass(frozen=True)
class ParamTypes:
    """The annotation `meta.types([...])`: a parameter that stands for one parameter per type."""

    types: tuple[Any, ...]


class meta:  # noqa: N801 - spelled as in Hidet Script
    """Loops unrolled while parsing (`for i in meta.range(4):` runs the body four times with i = 0..3), and
    parameter lists (`args: meta.types([int, f32])`)."""

    @staticmethod
    def types(arg_types: Sequence[Any]) -> ParamTypes:
        """A parameter annotation standing for one parameter per type (DSL types, or Python's int, float and bool),
        bound in the body as a tuple of them: `args: meta.types([i32, f32])` takes two arguments, `args[0]` and
        `args[1]`."""
        types = tuple(arg_types)
        if not types:
            raise ValueError("meta.types needs at least one type")
        return ParamTypes(types)

    @staticmethod
    def range(*args: int) -> UnrolledLoop:
        """Like Python's range, unrolled while parsing: the loop variable is a Python int in the body."""
        return UnrolledLoop(tuple(range(*args)))

    @staticmethod
    def each(values: Sequence[Any]) -> UnrolledLoop:
        """Unrolls the body over the given Python values."""
        return UnrolledLoop(tuple(values))


def printf(fmt: str, *args: Any) -> E.Intrinsic:
    """C `printf` of scalars and addresses (`%p` of a pointer or tensor); the output is flushed when the kernel
    returns."""
    if not isinstance(fmt, str):
        raise TypeError("printf's first argument must be a format string")
    exprs = []
    for a in args:
        e = E.convert(a)
        t = semantics.scalar_type(e, "printf") if not isinstance(e.type, (TensorType, PointerType)) else None
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


def _pointer_to(value: Any, what: str) -> E.Expr:
    """`value` as a pointer expression: pointers as they are, tensors by the address of their first element."""
    e = E.convert(value)
    t = e.type
    if isinstance(t, PointerType):
        return e
    if isinstance(t, TensorType):
        return semantics.first_element_address(e)
    raise TypeError(f"{what} needs a pointer or a tensor (e.g. ~x[i] or x), got {semantics.describe(e)}")


def cast(value: Any, target: Any) -> E.Expr:
    """`value` converted to a scalar type (`cast(x, f32)`), or a pointer viewed as another pointer type
    (`cast(p, ~f16)`, `cast(p, ~f32[4, 4])`)."""
    if isinstance(target, str):
        target = _as_dtype(target)
    if isinstance(target, DataType):
        return semantics.cast(value, target)
    if isinstance(target, PointerType):
        e = E.convert(value)
        if isinstance(e.type, DataType) and e.type.is_integer:  # an address held in an integer (void_p(0))
            return E.Reinterpret(e, target)
        return E.Reinterpret(_pointer_to(e, "cast() to a pointer type"), target)
    raise TypeError(f"cast() converts to a scalar type (f32) or a pointer type (~f32), got {target!r}")


def view(value: Any, tensor_type: Any) -> E.Expr:
    """The memory of a tensor or pointer seen as a tensor of another type and shape: `view(buf, f16[8, 8])`."""
    if not isinstance(tensor_type, TensorType):
        raise TypeError(f"view() takes a tensor type such as f16[8, 8], got {tensor_type!r}")
    return E.Reinterpret(_pointer_to(value, "view()"), PointerType(tensor_type))


def as_tensor_pointer(value: Any, dtype: DataType | str, shape: Sequence[Any]) -> E.Expr:
    """A pointer (or tensor) seen as a pointer to a tensor of `dtype` and `shape` (extents may be IR values)."""
    return E.Reinterpret(_pointer_to(value, "as_tensor_pointer()"),
                         PointerType(TensorType(_as_dtype(dtype), _pointer_shape(shape))))


def deref(pointer: Any) -> E.Expr:
    """The value a pointer points at."""
    e = E.convert(pointer)
    if not isinstance(e.type, PointerType):
        raise TypeError(f"deref() needs a pointer, got {semantics.describe(e)}")
    return E.Dereference(e)


def address(value: Any) -> E.Expr:
    """The address of a variable or an element (as `~x[i]`); a vector variable's is its first lane's."""
    e = E.convert(value)
    if isinstance(e, (E.TensorElement, E.Var)):
        return semantics.first_element_address(e) if isinstance(e.type, TensorType) else E.Address(e)
    raise TypeError(f"address() takes a variable or an element such as a[i], got {semantics.describe(e)}")


def asm(template: str, outputs: Sequence[Any] = (), inputs: Sequence[Any] = (), is_volatile: bool = False) -> Any:
    """Inline PTX in a CUDA function: `asm("mov.u32 %0, %%laneid;", outputs=[lane])`. Outputs are variables,
    elements or `deref(pointer)` (written), inputs scalar values or pointers (addresses, as `[%1]` takes them);
    operand constraints follow from their types. PTX compiles with NVRTC for a GPU; the CUDA emulator cannot run
    it."""
    if not isinstance(template, str):
        raise TypeError("asm() takes the PTX template as a Python string")
    outs = tuple(E.convert(o) for o in outputs)
    for o in outs:
        if not isinstance(o, (E.Var, E.TensorElement, E.Dereference)):
            raise TypeError(f"an asm output must be a variable, an element or deref(pointer), got "
                            f"{semantics.describe(o)}")
    ins = tuple(E.convert(i) for i in inputs)
    for e in (*outs, *(i for i in ins if not isinstance(i.type, PointerType))):  # an input may be an address
        semantics.scalar_type(e, "asm()")
    return AsmStmt(template, outs, ins, bool(is_volatile))
