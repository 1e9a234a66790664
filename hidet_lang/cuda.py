"""CUDA primitives for kernels: thread and block indices, barriers, warp operations, atomics, shared memory.

Use them inside `cuda_kernel` / `cuda_internal` functions (`from hidet_lang.cuda import threadIdx, ...`).
Each evaluates, while the kernel is parsed, to an IR intrinsic that only the CUDA code generator (and the
CUDA emulator) can lower; using one in a CPU function is an error at that line.
"""

from __future__ import annotations

from typing import Any

from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import LocalTensorRequest, local_tensor_request, printf, register_tensor
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir import expr as E
from hidet_lang.ir.intrinsics import CUDA_INTRINSICS
from hidet_lang.ir.layout import Layout
from hidet_lang.ir.types import DataType, PointerType, int32, uint32, void

FULL_MASK = 0xFFFFFFFF


class _Dim3:
    """`threadIdx`, `blockIdx`, `blockDim`, `gridDim`: `.x`, `.y`, `.z` are i32 IR values."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _axis(self, axis: str) -> E.Intrinsic:
        return E.Intrinsic(f"{self.name}.{axis}", (), int32)

    @property
    def x(self) -> E.Intrinsic:
        return self._axis("x")

    @property
    def y(self) -> E.Intrinsic:
        return self._axis("y")

    @property
    def z(self) -> E.Intrinsic:
        return self._axis("z")

    def __repr__(self) -> str:
        return self.name


threadIdx = _Dim3("threadIdx")
blockIdx = _Dim3("blockIdx")
blockDim = _Dim3("blockDim")
gridDim = _Dim3("gridDim")


def _scalar(value: Any, what: str) -> E.Expr:
    e = E.convert(value)
    semantics.scalar_type(e, what)
    return e


def _mask(mask: Any) -> E.Expr:
    return semantics.cast(mask, uint32)


def syncthreads() -> E.Intrinsic:
    """Barrier for all threads of the block (`__syncthreads`)."""
    return E.Intrinsic("syncthreads", (), void)


def syncthreads_and(predicate: Any) -> E.Intrinsic:
    """Barrier; nonzero iff the predicate is nonzero for every thread of the block."""
    return E.Intrinsic("syncthreads_and", (semantics.cast(predicate, int32),), int32)


def syncthreads_or(predicate: Any) -> E.Intrinsic:
    """Barrier; nonzero iff the predicate is nonzero for some thread of the block."""
    return E.Intrinsic("syncthreads_or", (semantics.cast(predicate, int32),), int32)


def syncthreads_count(predicate: Any) -> E.Intrinsic:
    """Barrier; the number of threads of the block whose predicate is nonzero."""
    return E.Intrinsic("syncthreads_count", (semantics.cast(predicate, int32),), int32)


def syncwarp(mask: Any = FULL_MASK) -> E.Intrinsic:
    """Barrier for the threads of the warp named in `mask`."""
    return E.Intrinsic("syncwarp", (_mask(mask),), void)


def _shuffle(kind: str, mask: Any, value: Any, lane: Any, width: Any) -> E.Intrinsic:
    v = _scalar(value, kind)
    return E.Intrinsic(kind, (_mask(mask), v, semantics.cast(lane, int32), semantics.cast(width, int32)), v.type)


def shfl_sync(mask: Any, value: Any, src_lane: Any, width: int = 32) -> E.Intrinsic:
    """`value` as held by lane `src_lane` of the warp (within groups of `width` lanes)."""
    return _shuffle("shfl_sync", mask, value, src_lane, width)


def shfl_up_sync(mask: Any, value: Any, delta: Any, width: int = 32) -> E.Intrinsic:
    """`value` from the lane `delta` below this one (this lane's own value where there is none)."""
    return _shuffle("shfl_up_sync", mask, value, delta, width)


def shfl_down_sync(mask: Any, value: Any, delta: Any, width: int = 32) -> E.Intrinsic:
    """`value` from the lane `delta` above this one (this lane's own value where there is none)."""
    return _shuffle("shfl_down_sync", mask, value, delta, width)


def shfl_xor_sync(mask: Any, value: Any, lane_mask: Any, width: int = 32) -> E.Intrinsic:
    """`value` from the lane whose index is this lane's xor `lane_mask`."""
    return _shuffle("shfl_xor_sync", mask, value, lane_mask, width)


def ballot_sync(mask: Any, predicate: Any) -> E.Intrinsic:
    """A bit mask of the lanes in `mask` whose predicate is nonzero."""
    return E.Intrinsic("ballot_sync", (_mask(mask), semantics.cast(predicate, int32)), uint32)


def any_sync(mask: Any, predicate: Any) -> E.Intrinsic:
    """Nonzero iff the predicate is nonzero for some lane in `mask`."""
    return E.Intrinsic("any_sync", (_mask(mask), semantics.cast(predicate, int32)), int32)


def all_sync(mask: Any, predicate: Any) -> E.Intrinsic:
    """Nonzero iff the predicate is nonzero for every lane in `mask`."""
    return E.Intrinsic("all_sync", (_mask(mask), semantics.cast(predicate, int32)), int32)


def _atomic(kind: str, address: Any, *values: Any) -> E.Intrinsic:
    addr = E.convert(address)
    t = addr.type
    if not isinstance(t, PointerType):
        raise TypeError(f"{kind} needs an address, e.g. {kind}(~hist[k], 1); got {semantics.describe(addr)}")
    dtype = t.dtype
    allowed = ("int32", "uint32", "int64", "uint64", "float32", "float64")
    if dtype.name not in allowed or (kind in ("atomic_min", "atomic_max") and dtype.is_float):
        raise TypeError(f"{kind} is not available for {dtype}")
    return E.Intrinsic(kind, (addr, *(semantics.cast(v, dtype) for v in values)), dtype)


def atomic_add(address: Any, value: Any) -> E.Intrinsic:
    """Atomically add `value` to `*address`; the old value."""
    return _atomic("atomic_add", address, value)


def atomic_sub(address: Any, value: Any) -> E.Intrinsic:
    """Atomically subtract `value` from `*address`; the old value."""
    return _atomic("atomic_sub", address, value)


def atomic_min(address: Any, value: Any) -> E.Intrinsic:
    """Atomically store min(*address, value); the old value (integers)."""
    return _atomic("atomic_min", address, value)


def atomic_max(address: Any, value: Any) -> E.Intrinsic:
    """Atomically store max(*address, value); the old value (integers)."""
    return _atomic("atomic_max", address, value)


def atomic_exchange(address: Any, value: Any) -> E.Intrinsic:
    """Atomically store `value`; the old value."""
    return _atomic("atomic_exchange", address, value)


def atomic_cas(address: Any, compare: Any, value: Any) -> E.Intrinsic:
    """Atomically store `value` if `*address == compare`; the old value."""
    return _atomic("atomic_cas", address, compare, value)


def shared_tensor(dtype: DataType | str, shape: Any = None, layout: Layout | None = None) -> LocalTensorRequest:
    """A tensor in the block's shared memory (constant shape); `layout` as in `register_tensor` (the shape
    follows from it when omitted; e.g. `strided_layout([64, 8], strides=[9, 1])` pads each row)."""
    return local_tensor_request(dtype, shape, layout, "shared", "shared_tensor")


def dynamic_shared_memory(byte_offset: Any, dtype: DataType | str) -> E.Intrinsic:
    """A pointer of `dtype` into the block's dynamic shared memory, `byte_offset` bytes from its start."""
    t = as_dtype(dtype)
    return E.Intrinsic("dynamic_shared_memory", (semantics.cast(byte_offset, int32),), PointerType(t))


def lane_id() -> E.Expr:
    """The thread's lane in its warp: threadIdx.x % 32 (for one-dimensional blocks)."""
    return semantics.binary("%", threadIdx.x, 32)


def warp_id() -> E.Expr:
    """The thread's warp in its block: threadIdx.x / 32 (for one-dimensional blocks)."""
    return semantics.binary("/", threadIdx.x, 32)


__all__ = [
    "all_sync", "any_sync", "atomic_add", "atomic_cas", "atomic_exchange", "atomic_max", "atomic_min", "atomic_sub",
    "CUDA_INTRINSICS", "ballot_sync", "blockDim", "blockIdx", "dynamic_shared_memory", "gridDim", "lane_id", "printf",
    "register_tensor", "shared_tensor", "shfl_down_sync", "shfl_sync", "shfl_up_sync", "shfl_xor_sync",
    "syncthreads", "syncthreads_and", "syncthreads_count", "syncthreads_or", "syncwarp", "threadIdx", "warp_id",
]
