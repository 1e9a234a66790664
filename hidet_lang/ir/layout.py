"""Data layouts: how the index tuples of a tensor map to offsets in its storage.

A layout is an immutable value with

- ``layout.shape``: the index space, a tuple of positive ints;
- ``layout.size``: how many elements of storage it needs;
- ``layout(*indices)``: the storage offset of an index tuple within ``shape``, in ``[0, size)``. The indices
  may be Python ints (checked to lie within the shape) or IR expressions, which gives the offset as IR
  (indices are assumed non-negative and in range, so IR ``/`` and ``%``, which truncate, act as ``//`` and
  ``%``). Parts that are constant fold away: a ``local_layout`` contributes nothing to the expression, and an
  index that only a local dimension uses is not evaluated at all.

The building blocks are

- ``row_major(*shape)``: the usual C order (last dim contiguous); ``size = prod(shape)``;
- ``column_major(*shape)``: Fortran order (first dim contiguous); ``size = prod(shape)``;
- ``local_layout(*shape)``: ``size = 1`` and every index maps to 0: these dims are spread over the threads
  (each thread holds one element of them), not stored;
- ``strided_layout(shape, ranks=None, *, strides=None)``: explicit strides, or a dim order given by ranks;
- ``outer * inner`` (tiling; same number of dims): shape ``outer.shape[d] * inner.shape[d]``, size
  ``outer.size * inner.size``; index ``i`` maps to ``outer(i // inner.shape) * inner.size + inner(i % inner.shape)``
  (elementwise ``//`` and ``%``);
- ``a + b`` (concatenation of dims): shape ``a.shape + b.shape``, size ``a.size * b.size``; ``(i..., j...)``
  maps to ``a(i) * b.size + b(j)``.

A register tensor whose layout mirrors a task mapping (``local_layout`` where the mapping is spatial,
``row_major`` where it repeats) is indexed with the mapping's task coordinates: each worker's tasks get
distinct offsets in ``[0, size)``, and the storage holds only one worker's share. Example::

    >>> layout = local_layout(4, 2) * row_major(2, 2) * local_layout(2, 16) * row_major(4, 4)
    >>> layout.shape, layout.size        # mirrors spatial(4, 2).repeat(2, 2).spatial(2, 16).repeat(4, 4)
    ((64, 256), 64)
    >>> row_major(2, 3)(1, 2), column_major(2, 3)(1, 2)
    (5, 5)

The module is pure Python; it imports the IR (for ``isinstance`` checks) only when an index is not an int.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from hidet_lang.ir.node import Node

__all__ = [
    "ComposedLayout",
    "ConcatLayout",
    "Layout",
    "StridedLayout",
    "SwizzledLayout",
    "column_major",
    "local_layout",
    "row_major",
    "strided_layout",
    "swizzled_layout",
]


# ----------------------------------------------------------------------------------------------------------
# argument validation


def _as_int(value: Any, what: str) -> int:
    """``value`` as a Python int (numpy integers are converted); bools, floats and others are a TypeError."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an int, got the bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(value).__name__} {value!r}") from None


def _sequence(value: Any, what: str) -> tuple[Any, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise TypeError(f"{what} must be a sequence of ints, got {value!r}")
    return tuple(value)


def _shape(shape: Any, func: str) -> tuple[int, ...]:
    """A validated shape: a non-empty sequence of positive ints."""
    dims = _sequence(shape, f"{func}: the shape")
    if not dims:
        raise ValueError(f"{func}: a layout needs at least one dimension")
    result = tuple(_as_int(e, f"{func}: the extent of dim {d} in {list(dims)}") for d, e in enumerate(dims))
    for d, e in enumerate(result):
        if e <= 0:
            raise ValueError(f"{func}: extents must be positive, got {e} for dim {d} in {list(result)}")
    return result


def _shape_args(args: tuple[Any, ...], func: str) -> tuple[int, ...]:
    """Normalizes ``f(4, 8)`` and ``f([4, 8])`` to the validated shape ``(4, 8)``."""
    if len(args) == 1 and isinstance(args[0], (tuple, list)):
        args = tuple(args[0])
    return _shape(args, func)


def _row_major_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    strides, stride = [], 1
    for extent in reversed(shape):
        strides.append(stride)
        stride *= extent
    return tuple(reversed(strides))


# ----------------------------------------------------------------------------------------------------------
# offset arithmetic on ints and IR expressions (constant parts fold; indices are non-negative)


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, int) and a == 0:
        return b
    if isinstance(b, int) and b == 0:
        return a
    return a + b


def _mul(a: Any, b: int) -> Any:
    if b == 0:
        return 0
    if b == 1:
        return a
    if isinstance(a, int) and a == 0:
        return 0
    return a * b


def _div(a: Any, b: int) -> Any:
    return a if b == 1 else a // b  # an IR `//` is C's truncating `/`, equal to floor division here


def _mod(a: Any, b: int) -> Any:
    return 0 if b == 1 else a % b


# ----------------------------------------------------------------------------------------------------------
# layouts


class Layout:
    """Base of layouts: an immutable map from the index tuples of ``shape`` to offsets in ``[0, size)``.

    Subclasses are frozen, slotted dataclasses and compare structurally. They implement ``shape``, ``size``,
    ``_offset`` and ``_fmt``; calling, composition and printing are here.
    """

    __slots__ = ()

    # `shape` (the index space, a tuple of positive ints) is a dataclass field or a property of each subclass;
    # it is not declared here, where a dataclass would take it for the field's default value.
    shape: tuple[int, ...]

    @property
    def size(self) -> int:
        """The number of storage elements the layout needs (every offset is below it)."""
        raise NotImplementedError

    @property
    def ndim(self) -> int:
        """The number of dims of ``shape``."""
        return len(self.shape)

    def _offset(self, indices: tuple[Any, ...]) -> Any:
        """The offset of ``indices`` (already validated: one per dim; ints or IR expressions)."""
        raise NotImplementedError

    def _fmt(self) -> str:
        raise NotImplementedError

    def __call__(self, *indices: Any) -> Any:
        """The storage offset of ``indices`` (one per dim): an int for int indices, else an IR expression.

        ``layout(1, 2)`` and ``layout((1, 2))`` are the same. Int indices must lie within ``shape``
        (``ValueError`` otherwise); IR indices are assumed to. A ``TypeError`` for a wrong number of indices
        or an index that is neither an int nor an IR expression.
        """
        if len(indices) == 1 and isinstance(indices[0], (tuple, list)):
            indices = tuple(indices[0])
        shape = self.shape
        if len(indices) != len(shape):
            raise TypeError(
                f"{self} has {len(shape)} dim{'s' * (len(shape) != 1)} (shape {shape}) but was given "
                f"{len(indices)} ind{'ices' if len(indices) != 1 else 'ex'}"
            )
        checked = []
        for d, (index, extent) in enumerate(zip(indices, shape)):
            if _is_ir(index):
                checked.append(index)
                continue
            i = _as_int(index, f"{self}: index {d}")
            if not 0 <= i < extent:
                raise ValueError(f"{self}: index {i} of dim {d} is out of range [0, {extent}) (shape {shape})")
            checked.append(i)
        return self._offset(tuple(checked))

    def __mul__(self, other: object) -> ComposedLayout:
        """``outer * inner``: tiling, ``ComposedLayout(self, other)`` (both must have the same number of dims)."""
        if not isinstance(other, Layout):
            raise TypeError(
                f"cannot compose the layout {self} with {type(other).__name__} {other!r}: "
                "both operands of `*` must be layouts"
            )
        return ComposedLayout(self, other)

    def __rmul__(self, other: object) -> ComposedLayout:
        raise TypeError(
            f"cannot compose {type(other).__name__} {other!r} with the layout {self}: both operands of `*` must be "
            "layouts (a layout mirrors a task mapping with local_layout where it is spatial, row_major where it "
            "repeats)"
        )

    def __add__(self, other: object) -> ConcatLayout:
        """``a + b``: the dims of ``a`` followed by those of ``b``, ``ConcatLayout(self, other)``."""
        if not isinstance(other, Layout):
            raise TypeError(
                f"cannot concatenate the layout {self} with {type(other).__name__} {other!r}: "
                "both operands of `+` must be layouts"
            )
        return ConcatLayout(self, other)

    def __radd__(self, other: object) -> ConcatLayout:
        raise TypeError(
            f"cannot concatenate {type(other).__name__} {other!r} with the layout {self}: "
            "both operands of `+` must be layouts"
        )

    def __str__(self) -> str:
        return self._fmt()

    def __repr__(self) -> str:
        return self._fmt()


def _is_ir(value: Any) -> bool:
    """Whether an index is an IR expression (a node: the layout module sits below the expressions, whose types
    hold layouts) rather than a Python integer."""
    return isinstance(value, Node)


@dataclass(frozen=True, slots=True, repr=False)
class StridedLayout(Layout):
    """Index ``i`` maps to ``sum(i[d] * strides[d])``; ``size`` is the largest offset plus one.

    ``row_major``, ``column_major``, ``local_layout`` (all strides 0) and ``strided_layout`` build these.
    Strides are non-negative ints; they need not give distinct offsets (a stride of 0 broadcasts a dim).
    """

    shape: tuple[int, ...]
    strides: tuple[int, ...]

    def __post_init__(self) -> None:
        shape = _shape(self.shape, "StridedLayout")
        strides = _sequence(self.strides, "StridedLayout: strides")
        if len(strides) != len(shape):
            raise ValueError(
                f"StridedLayout: {len(strides)} stride(s) {list(strides)} for the {len(shape)} dim(s) of shape "
                f"{list(shape)}; give one per dim"
            )
        strides = tuple(_as_int(s, f"StridedLayout: stride {d}") for d, s in enumerate(strides))
        for d, s in enumerate(strides):
            if s < 0:
                raise ValueError(f"StridedLayout: strides must be non-negative, got {s} for dim {d}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "strides", strides)

    @property
    def size(self) -> int:
        """``1 + sum((shape[d] - 1) * strides[d])``: one past the largest offset."""
        return 1 + sum((e - 1) * s for e, s in zip(self.shape, self.strides))

    def _offset(self, indices: tuple[Any, ...]) -> Any:
        offset: Any = 0
        for index, stride in zip(indices, self.strides):
            offset = _add(offset, _mul(index, stride))
        return offset

    def _fmt(self) -> str:
        dims = ", ".join(map(str, self.shape))
        if not any(self.strides):
            return f"local_layout({dims})"
        if self.strides == _row_major_strides(self.shape):
            return f"row_major({dims})"
        if self.strides == _row_major_strides(self.shape[::-1])[::-1]:
            return f"column_major({dims})"
        return f"strided_layout({list(self.shape)}, strides={list(self.strides)})"


@dataclass(frozen=True, slots=True, repr=False)
class ComposedLayout(Layout):
    """``outer * inner``: each element of ``outer`` is a tile laid out by ``inner``.

    Both have the same number of dims. ``shape[d] = outer.shape[d] * inner.shape[d]``,
    ``size = outer.size * inner.size``, and ``i`` maps to
    ``outer(i // inner.shape) * inner.size + inner(i % inner.shape)`` (elementwise ``//`` and ``%``).
    Composition is associative, like the task mappings it mirrors.
    """

    outer: Layout
    inner: Layout

    def __post_init__(self) -> None:
        for name in ("outer", "inner"):
            value = getattr(self, name)
            if not isinstance(value, Layout):
                raise TypeError(f"ComposedLayout: {name} must be a Layout, got {type(value).__name__} {value!r}")
        if self.outer.ndim != self.inner.ndim:
            raise ValueError(
                f"cannot compose {self.outer} (shape {self.outer.shape}) with {self.inner} "
                f"(shape {self.inner.shape}): both must have the same number of dims"
            )

    @property
    def shape(self) -> tuple[int, ...]:
        """The elementwise product of the two shapes."""
        return tuple(a * b for a, b in zip(self.outer.shape, self.inner.shape))

    @property
    def size(self) -> int:
        """``outer.size * inner.size``."""
        return self.outer.size * self.inner.size

    def _offset(self, indices: tuple[Any, ...]) -> Any:
        tile = self.inner.shape
        outer = self.outer._offset(tuple(_div(i, t) for i, t in zip(indices, tile)))
        inner = self.inner._offset(tuple(_mod(i, t) for i, t in zip(indices, tile)))
        return _add(_mul(outer, self.inner.size), inner)

    def _fmt(self) -> str:
        outer = self.outer._fmt()
        if isinstance(self.outer, ConcatLayout):
            outer = f"({outer})"
        inner = self.inner._fmt()
        if isinstance(self.inner, (ComposedLayout, ConcatLayout)):
            inner = f"({inner})"  # `*` is left-associative: keep the structure visible
        return f"{outer} * {inner}"


@dataclass(frozen=True, slots=True, repr=False)
class ConcatLayout(Layout):
    """``a + b``: the dims of ``a`` followed by the dims of ``b``.

    ``shape = a.shape + b.shape``, ``size = a.size * b.size``, and ``(i..., j...)`` maps to
    ``a(i) * b.size + b(j)``: ``a`` picks a block of ``b.size`` elements, ``b`` the element in it.
    """

    a: Layout
    b: Layout

    def __post_init__(self) -> None:
        for name in ("a", "b"):
            value = getattr(self, name)
            if not isinstance(value, Layout):
                raise TypeError(f"ConcatLayout: {name} must be a Layout, got {type(value).__name__} {value!r}")

    @property
    def shape(self) -> tuple[int, ...]:
        """``a.shape + b.shape``."""
        return self.a.shape + self.b.shape

    @property
    def size(self) -> int:
        """``a.size * b.size``."""
        return self.a.size * self.b.size

    def _offset(self, indices: tuple[Any, ...]) -> Any:
        n = self.a.ndim
        return _add(_mul(self.a._offset(indices[:n]), self.b.size), self.b._offset(indices[n:]))

    def _fmt(self) -> str:
        b = self.b._fmt()
        if isinstance(self.b, ConcatLayout):
            b = f"({b})"  # `+` is left-associative: keep the structure visible
        return f"{self.a._fmt()} + {b}"


# ----------------------------------------------------------------------------------------------------------
# swizzled shared-memory layouts (Hopper's TMA and wgmma)

SWIZZLE_MODES = (0, 32, 64, 128)
"""The shared-memory swizzles of TMA and wgmma, by their span in bytes (0: none)."""


def swizzle_alignment(swizzle: int) -> int:
    """The byte alignment a shared tile of `swizzle` needs for its layout to address what the hardware does: the
    period of the pattern (256, 512, 1024 bytes; 128 unswizzled, TMA's minimum)."""
    return {0: 128, 32: 256, 64: 512, 128: 1024}[swizzle]


@dataclass(frozen=True, slots=True, repr=False)
class SwizzledLayout(Layout):
    """A dense row-major tile whose 16-byte chunks are permuted as Hopper's TMA and wgmma swizzle shared memory.

    With ``swizzle`` 32, 64 or 128 (bytes), the byte offset ``b`` of an element in row-major order becomes
    ``b ^ (((b >> 7) & m) << 4)`` with ``m`` = 1, 3, 7: the 16-byte chunk index (bits 4-6) is XORed with the
    index of the 128-byte line (bits 7-9), CUTLASS's ``Swizzle<1,4,3>``, ``<2,4,3>``, ``<3,4,3>``; 0 is plain
    row-major order. The hardware applies this to the absolute shared address, so a tile must start at a
    multiple of the pattern's period (``swizzle_alignment``; the code generator aligns shared tensors of this
    layout so). The innermost dim spans a multiple of 16 bytes, at most ``swizzle`` bytes when swizzled (as
    TMA's box does); ``size`` is rounded up to whole 128-byte lines.
    """

    shape: tuple[int, ...]
    element_bytes: int
    swizzle: int

    def __post_init__(self) -> None:
        shape = _shape(self.shape, "swizzled_layout()")
        element_bytes = _as_int(self.element_bytes, "swizzled_layout(): the element size")
        swizzle = _as_int(self.swizzle, "swizzled_layout(): swizzle")
        if element_bytes not in (1, 2, 4, 8):
            raise ValueError(f"swizzled_layout(): elements of 1, 2, 4 or 8 bytes, got {element_bytes}")
        if swizzle not in SWIZZLE_MODES:
            raise ValueError(f"swizzled_layout(): swizzle is one of {list(SWIZZLE_MODES)} (bytes), got {swizzle}")
        row = shape[-1] * element_bytes
        if row % 16 or (swizzle and row > swizzle):
            limit = f" and at most the swizzle's {swizzle}" if swizzle else ""
            raise ValueError(f"swizzled_layout(): the innermost dim spans {row} bytes; it must be a multiple of "
                             f"16{limit}")
        object.__setattr__(self, "shape", shape)
        object.__setattr__(self, "element_bytes", element_bytes)
        object.__setattr__(self, "swizzle", swizzle)

    @property
    def size(self) -> int:
        elements = 1
        for extent in self.shape:
            elements *= extent
        if not self.swizzle:
            return elements
        line = 128 // self.element_bytes
        return -(-elements // line) * line

    def _offset(self, indices: tuple[Any, ...]) -> Any:
        offset: Any = 0
        for index, stride in zip(indices, _row_major_strides(self.shape)):
            offset = _add(offset, _mul(index, stride))
        if not self.swizzle:
            return offset
        shift = self.element_bytes.bit_length() - 1  # log2 of the element size
        mask = {32: 1, 64: 3, 128: 7}[self.swizzle]
        return offset ^ (((offset >> (7 - shift)) & mask) << (4 - shift))

    def _fmt(self) -> str:
        return f"swizzled_layout({list(self.shape)}, {self.element_bytes}, swizzle={self.swizzle})"


# ----------------------------------------------------------------------------------------------------------
# constructors


def row_major(*shape: int) -> StridedLayout:
    """The row-major (C order) layout of ``shape``: the last dim is contiguous; ``size = prod(shape)``.

    ``row_major(4, 8)`` and ``row_major([4, 8])`` are the same.
    """
    dims = _shape_args(shape, "row_major()")
    return StridedLayout(dims, _row_major_strides(dims))


def column_major(*shape: int) -> StridedLayout:
    """The column-major (Fortran order) layout of ``shape``: the first dim is contiguous; ``size = prod(shape)``."""
    dims = _shape_args(shape, "column_major()")
    return StridedLayout(dims, _row_major_strides(dims[::-1])[::-1])


def local_layout(*shape: int) -> StridedLayout:
    """A layout of ``shape`` with ``size = 1`` that maps every index to 0.

    Its dims are spread over threads, not stored: in a register tensor that mirrors a task mapping, it stands
    where the mapping is spatial (each thread holds one of those elements, at the same offset).
    """
    dims = _shape_args(shape, "local_layout()")
    return StridedLayout(dims, (0,) * len(dims))


def strided_layout(
    shape: Sequence[int], ranks: Sequence[int] | None = None, *, strides: Sequence[int] | None = None
) -> StridedLayout:
    """A layout of ``shape`` given by its dim order (``ranks``) or by explicit ``strides``.

    - ``ranks`` (as in Hidet, and as ``spatial``/``repeat`` order their dims): a permutation of
      ``range(len(shape))``; ``ranks[d]`` is the rank of dim ``d``, the dim with rank 0 is outermost (largest
      stride) and the one with the highest rank contiguous. The default is row-major; ``ranks=[1, 0]`` on a
      2-D shape is column-major. The layout is dense: ``size = prod(shape)``.
    - ``strides``: one non-negative int per dim; index ``i`` maps to ``sum(i[d] * strides[d])`` and ``size``
      is the largest offset plus one. Use it for padding (``strided_layout([64, 8], strides=[9, 1])``) or
      broadcasting (a stride of 0).

    Giving both is a ``ValueError``.
    """
    func = "strided_layout()"
    dims = _shape(shape, func)
    if strides is not None:
        if ranks is not None:
            raise ValueError(f"{func}: give ranks or strides, not both")
        return StridedLayout(dims, tuple(_sequence(strides, f"{func}: strides")))
    if ranks is None:
        return StridedLayout(dims, _row_major_strides(dims))
    order = tuple(_as_int(r, f"{func}: ranks[{d}]") for d, r in enumerate(_sequence(ranks, f"{func}: ranks")))
    if sorted(order) != list(range(len(dims))):
        raise ValueError(
            f"{func}: ranks must be a permutation of {list(range(len(dims)))} (one rank per dim), got {list(order)}"
        )
    result = [0] * len(dims)
    stride = 1
    for d in sorted(range(len(dims)), key=order.__getitem__, reverse=True):  # the innermost dim first
        result[d] = stride
        stride *= dims[d]
    return StridedLayout(dims, tuple(result))



def swizzled_layout(shape: Sequence[int], dtype: Any, swizzle: int = 128) -> SwizzledLayout:
    """The layout of a shared tile of ``shape`` with elements of ``dtype`` (a data type, or its size in bytes)
    swizzled as TMA and wgmma address it (``swizzle``: 0, 32, 64 or 128 bytes); see ``SwizzledLayout``.

    ``shared_tensor(f16, layout=swizzled_layout([64, 64], f16, swizzle=128))`` is the tile a TMA load of a 64x64
    f16 box with the 128-byte swizzle fills.
    """
    element_bytes = dtype if isinstance(dtype, int) else getattr(dtype, "nbytes", dtype)
    return SwizzledLayout(tuple(_sequence(shape, "swizzled_layout(): the shape")), element_bytes, swizzle)
