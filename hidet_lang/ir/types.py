"""Scalar data types, tensor types and pointer types of the IR.

Scalar types are singletons (`f32`, `i32`, ...); `f32[16, 16]` is a tensor type and `~f32` a pointer type.
`f32x4`, `f32x8` and `f32x16` are SIMD vector value types of CPU functions (`hidet_lang.cpu`): a value of one
holds that many f32 lanes; it lives in a variable, a parameter or a return value, never in a tensor.
Tensor shapes hold ints or IR expressions (a dimension may name an earlier integer parameter); a tensor type
may carry a layout (`hidet_lang.ir.layout`), row-major when it has none.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hidet_lang.ir.layout import Layout, row_major


@dataclass(frozen=True, slots=True)
class DataType:
    """A scalar type: its DSL name, short name, C name, size in bytes and kind."""

    name: str
    short_name: str
    c_name: str
    nbytes: int
    kind: str  # 'bool', 'int', 'uint' or 'float'

    @property
    def is_float(self) -> bool:
        """True for floating-point types."""
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        """True for signed and unsigned integer types (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        """True for the boolean type."""
        return self.kind == "bool"

    @property
    def numpy_name(self) -> str:
        """The numpy dtype name of this type."""
        return "bool" if self.kind == "bool" else self.name

    def __getitem__(self, shape: Any) -> TensorType:
        shape = shape if isinstance(shape, tuple) else (shape,)
        return TensorType(self, tuple(shape))

    def __invert__(self) -> PointerType:
        return PointerType(self)

    def __str__(self) -> str:
        return self.short_name

    def __repr__(self) -> str:
        return self.short_name


@dataclass(frozen=True, slots=True)
class TensorType:
    """A tensor of `dtype` with `shape`; a parameter of this type is passed by address.

    `layout` (a `hidet_lang.ir.layout.Layout`) maps indices to storage offsets; `None` means row-major over
    `shape`. A layout's shape must equal `shape` (a `ValueError` otherwise), and a layout that is exactly
    `row_major(*shape)` is stored as `None`, so the two spellings of a row-major tensor compare (and hash)
    equal. `str()` shows a layout after the shape: `f32[4, 8; column_major(4, 8)]`.
    """

    dtype: DataType
    shape: tuple
    layout: Layout | None = None

    def __post_init__(self) -> None:
        layout = self.layout
        if layout is None:
            return
        if not isinstance(layout, Layout):
            raise TypeError(f"a tensor's layout must be a Layout (e.g. row_major(4, 4)), got {layout!r}")
        if tuple(self.shape) != layout.shape:
            raise ValueError(
                f"the shape {list(self.shape)} of a {self.dtype} tensor does not match the shape "
                f"{list(layout.shape)} of its layout {layout}"
            )
        object.__setattr__(self, "shape", layout.shape)
        if layout == row_major(*layout.shape):
            object.__setattr__(self, "layout", None)

    @property
    def storage_size(self) -> int | None:
        """How many elements the storage holds: the layout's size, else the product of a constant shape
        (`None` when an extent is not a Python int)."""
        if self.layout is not None:
            return self.layout.size
        if not all(isinstance(d, int) for d in self.shape):
            return None
        return math.prod(self.shape)

    def __invert__(self) -> PointerType:
        return PointerType(self)

    def __str__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"{self.dtype}[{dims}]" if self.layout is None else f"{self.dtype}[{dims}; {self.layout}]"


@dataclass(frozen=True, slots=True)
class PointerType:
    """A pointer to a scalar (or to a tensor's first element), or C's `void *` (`void_p`: an address without an
    element type, which arithmetic moves by bytes)."""

    base: DataType | TensorType | VoidType

    @property
    def dtype(self) -> DataType:
        """The element type the pointer points at (an AttributeError for a void pointer, which has none)."""
        if self.is_void:
            raise AttributeError("a void pointer (void_p) has no element type; cast it to a typed pointer first, "
                                 "e.g. cast(p, ~f32)")
        return self.base if isinstance(self.base, DataType) else self.base.dtype

    @property
    def is_void(self) -> bool:
        """Whether this is `void_p`."""
        return isinstance(self.base, VoidType)

    def __str__(self) -> str:
        return f"~{self.base}"


@dataclass(frozen=True, slots=True)
class VectorType:
    """A SIMD vector of `lanes` values of `dtype`, a value type of CPU functions: `f32x4`, `f32x8`, `f32x16`.

    Only those three exist (a `ValueError` for any other); `f32x8[4]` is a `TypeError`, since tensors hold
    scalars only."""

    dtype: DataType
    lanes: int

    def __post_init__(self) -> None:
        if (getattr(self.dtype, "name", None), self.lanes) not in VECTOR_SHAPES:
            raise ValueError(f"no vector type of {self.lanes} x {self.dtype}; the vector types are "
                             f"{', '.join(f'f32x{n}' for _, n in VECTOR_SHAPES)}")

    @property
    def name(self) -> str:
        """The long name, as Hidet spells it: `float32x8`."""
        return f"{self.dtype.name}x{self.lanes}"

    @property
    def short_name(self) -> str:
        """The short name: `f32x8`."""
        return f"{self.dtype.short_name}x{self.lanes}"

    @property
    def nbytes(self) -> int:
        """The size of a value in bytes (also its alignment for aligned loads and stores)."""
        return self.dtype.nbytes * self.lanes

    def not_an_element_type(self) -> TypeError:
        """The error for a tensor or pointer of this vector type (`f32x8[4]`, `~f32x8`, `register_tensor(f32x8,
        ...)`): tensors and pointers hold scalars only."""
        return TypeError(f"{self} is a vector value type, and tensors and pointers hold scalars only: use an "
                         f"{self.dtype} tensor (or ~{self.dtype} pointer) and move vectors in and out of it with "
                         f"{self}_load / {self}_store")

    def __getitem__(self, shape: Any) -> TensorType:
        raise self.not_an_element_type()

    def __invert__(self) -> PointerType:
        raise self.not_an_element_type()

    def __str__(self) -> str:
        return self.short_name

    def __repr__(self) -> str:
        return self.short_name


@dataclass(frozen=True, slots=True)
class VoidType:
    """The return type of functions that return nothing."""

    def __str__(self) -> str:
        return "void"


Type = DataType | TensorType | PointerType | VectorType | VoidType

boolean = DataType("bool", "bool", "bool", 1, "bool")
int8 = DataType("int8", "i8", "int8_t", 1, "int")
int16 = DataType("int16", "i16", "int16_t", 2, "int")
int32 = DataType("int32", "i32", "int32_t", 4, "int")
int64 = DataType("int64", "i64", "int64_t", 8, "int")
uint8 = DataType("uint8", "u8", "uint8_t", 1, "uint")
uint16 = DataType("uint16", "u16", "uint16_t", 2, "uint")
uint32 = DataType("uint32", "u32", "uint32_t", 4, "uint")
uint64 = DataType("uint64", "u64", "uint64_t", 8, "uint")
float16 = DataType("float16", "f16", "_Float16", 2, "float")
bfloat16 = DataType("bfloat16", "bf16", "__bf16", 2, "float")  # on the CPU computed through f32 (cpu_bfloat16.h)
float32 = DataType("float32", "f32", "float", 4, "float")
float64 = DataType("float64", "f64", "double", 8, "float")
void = VoidType()
void_p = PointerType(void)

VECTOR_SHAPES = (("float32", 4), ("float32", 8), ("float32", 16))  # (element type name, lanes) of the vector types
float32x4 = VectorType(float32, 4)
float32x8 = VectorType(float32, 8)
float32x16 = VectorType(float32, 16)
VECTOR_TYPES: tuple[VectorType, ...] = (float32x4, float32x8, float32x16)

ALL_DTYPES: tuple[DataType, ...] = (
    boolean, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, bfloat16, float32, float64,
)
DTYPE_BY_NAME: dict[str, DataType] = {
    **{t.name: t for t in ALL_DTYPES},
    **{t.short_name: t for t in ALL_DTYPES},
}


def dtype_from_name(name: str) -> DataType:
    """The scalar type called `name` ('float32', 'f32', 'bool', ...); ValueError naming the valid ones."""
    try:
        return DTYPE_BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown data type {name!r}; valid: {', '.join(t.name for t in ALL_DTYPES)}") from None


def unsigned_of(t: DataType) -> DataType:
    """The unsigned integer type of integer type `t`'s width (`t` itself when it is unsigned)."""
    return dtype_from_name(f"uint{8 * t.nbytes}")


def promote(a: DataType, b: DataType) -> DataType:
    """The type values of types `a` and `b` are converted to before a binary operation (floats win, then the wider,
    unsigned on ties, as C; a bool converts to the other type, two bools stay bool: `BinaryOp.type` says which
    operators then compute in i32)."""
    if a == b:
        return a
    if a.is_float or b.is_float:
        floats = [t for t in (a, b) if t.is_float]
        if len(floats) == 2 and a.nbytes == b.nbytes == 2:
            return float32  # f16 with bf16: neither holds the other
        return max(floats, key=lambda t: t.nbytes)
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.nbytes != b.nbytes:
        return a if a.nbytes > b.nbytes else b
    return a if a.kind == "uint" else b


def element_type(t: Type) -> DataType:
    """The scalar type stored in a tensor or pointed at by a pointer."""
    if isinstance(t, DataType):
        return t
    if isinstance(t, TensorType):
        return t.dtype
    if isinstance(t, PointerType):
        return t.dtype
    raise TypeError(f"{t} has no element type")
