"""The type of a tensor-map kernel parameter: a global tensor that a CUDA kernel reads and writes by TMA boxes.

`TensorMapType` is a `TensorType` (the caller passes the tensor itself, checked like any tensor argument: dtype,
shape, contiguity) that also carries the box a TMA copy moves and the shared-memory swizzle. The kernel does not
index it: it hands it to `hidet_lang.cuda.tma`'s copies. The launcher encodes the tensor map of the tensor it was
given (on a GPU the driver's 128-byte CUtensorMap, passed as a `const __grid_constant__` kernel parameter; on the
emulator the emulator's map) before each launch.
"""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.ir.layout import SWIZZLE_MODES
from hidet_lang.ir.types import TensorType

TMA_MAX_BOX = 256
"""The largest extent of a TMA box in any dimension."""


@dataclass(frozen=True, slots=True)
class TensorMapType(TensorType):
    """A row-major global tensor of `dtype` and `shape` (2 to 5 dims) read and written by TMA in boxes of `box`
    (one extent per dim, 1 to 256; the innermost spans a multiple of 16 bytes, at most `swizzle` bytes when
    swizzled), placed in shared memory with `swizzle` (0, 32, 64 or 128 bytes; see `swizzled_layout`)."""

    box: tuple[int, ...] = ()
    swizzle: int = 0

    def __post_init__(self) -> None:
        TensorType.__post_init__(self)
        if self.layout is not None:
            raise ValueError("a tensor map's tensor is row-major; it takes no layout")
        rank = len(self.shape)
        if not 2 <= rank <= 5:
            raise ValueError(f"a tensor map has 2 to 5 dims, got the shape {list(self.shape)}")
        box = tuple(self.box)
        if len(box) != rank or not all(isinstance(b, int) and not isinstance(b, bool) for b in box):
            raise ValueError(f"a tensor map's box is {rank} Python ints, one a dim of {list(self.shape)}; got {box!r}")
        if not all(1 <= b <= TMA_MAX_BOX for b in box):
            raise ValueError(f"a tensor map's box extents are 1 to {TMA_MAX_BOX}, got {list(box)}")
        if self.swizzle not in SWIZZLE_MODES:
            raise ValueError(f"a tensor map's swizzle is one of {list(SWIZZLE_MODES)} (bytes), got {self.swizzle!r}")
        row = box[-1] * self.dtype.nbytes
        if row % 16 or (self.swizzle and row > self.swizzle):
            limit = f" and at most its swizzle of {self.swizzle} bytes" if self.swizzle else ""
            raise ValueError(f"a tensor map's innermost box spans {row} bytes; TMA needs a multiple of 16{limit}")
        inner = self.shape[-1]
        if isinstance(inner, int) and inner * self.dtype.nbytes % 16:
            raise ValueError(f"a tensor map's rows of {inner} {self.dtype} elements span {inner * self.dtype.nbytes} "
                             "bytes; TMA needs its tensor's byte strides to be multiples of 16")
        object.__setattr__(self, "box", box)

    @property
    def box_bytes(self) -> int:
        """The bytes one box moves (what a load completes on its mbarrier)."""
        n = self.dtype.nbytes
        for b in self.box:
            n *= b
        return n

    def __str__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"TensorMap({self.dtype}, [{dims}], box={list(self.box)}, swizzle={self.swizzle})"
