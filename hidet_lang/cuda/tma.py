"""TMA, Hopper's tensor memory accelerator: boxes of a global tensor copied to and from shared memory by one
thread's instruction (PTX `cp.async.bulk.tensor`, sm_90).

A kernel reads a global tensor through TMA by declaring the parameter as a tensor map::

    @hidet.script
    def kernel(a: TensorMap(f16, [M, K], box=[64, 64], swizzle=128), ...):
        tile = shared_tensor(f16, layout=swizzled_layout([64, 64], f16, swizzle=128))
        bar = shared_tensor(u64, [1])
        if threadIdx.x == 0:
            mbarrier_init(~bar[0], 1)
            fence_mbarrier_init()
        syncthreads()
        if threadIdx.x == 0:
            mbarrier_arrive_expect_tx(~bar[0], tma_box_bytes(a))
            tma_load(tile, a, [row, col], ~bar[0])
        mbarrier_wait(~bar[0], 0)
        ... tile[i, j] ...

and the caller passes the tensor itself (a numpy array on the emulator, a device array on a GPU), checked like any
tensor argument; the launcher encodes its tensor map before each launch. `tile[i, j]` is element (row + i, col + j)
of `a`, or 0 where that lies outside `a`: a box may hang over the tensor's edges (and start at negative
coordinates), so every shape is handled. A store writes a box back, skipping its elements outside the tensor.

Requirements the hardware makes (checked at the launch or, for shared addresses, by the emulator): the tensor's
rows span a multiple of 16 bytes; the innermost box dim spans a multiple of 16 bytes, at most the swizzle's span;
the shared tile is 128-byte aligned, 1024 for the 128-byte swizzle (a shared tensor of `swizzled_layout` is
declared so).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hidet_lang.cuda.mbarrier import _barrier
from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import _as_dtype, _pointer_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.intrinsics import TMA_RANKS, intrinsic
from hidet_lang.ir.layout import SwizzledLayout
from hidet_lang.ir.tensor_map import TensorMapType
from hidet_lang.ir.types import DataType, TensorType, int32


def TensorMap(dtype: DataType | str, shape: Sequence[Any], box: Sequence[int], swizzle: int = 0) -> TensorMapType:
    """The type of a kernel parameter read and written through TMA: a row-major `dtype` tensor of `shape` (2 to 5
    dims), copied in boxes of `box` (one Python int a dim, 1 to 256) placed in shared memory with `swizzle` (0, 32,
    64 or 128 bytes). Use it as a parameter annotation; a ValueError says what the hardware does not allow."""
    return TensorMapType(_as_dtype(dtype), tuple(shape), None, tuple(box), swizzle)


def _tensor_map(value: Any, what: str) -> tuple[E.Expr, TensorMapType]:
    """The address of the tensor-map parameter `value`, and its type."""
    e = E.convert(value)
    t = e.type
    if not isinstance(e, E.Var) or not isinstance(t, TensorMapType):
        raise TypeError(f"{what} needs a tensor-map parameter (annotated TensorMap(dtype, shape, box=..., "
                        f"swizzle=...)), got {semantics.describe(e)}")
    return E.Address(e), t


def _coordinates(coords: Any, t: TensorMapType, what: str) -> list[E.Expr]:
    """The box's coordinates (outermost first, as the tensor's indices) as i32, innermost first as PTX takes them."""
    if not isinstance(coords, (list, tuple)) or len(coords) != len(t.shape):
        raise TypeError(f"{what} takes the box's {len(t.shape)} coordinates as a list (one a dim of {t}), got "
                        f"{coords!r}")
    return [semantics.cast(c, int32) for c in reversed(coords)]


def _shared_tile(value: Any, t: TensorMapType, what: str) -> E.Expr:
    """The shared tile's address; a tensor must have the box's shape and the map's swizzle."""
    e = E.convert(value)
    tile = e.type
    if isinstance(tile, TensorType):
        layout = tile.layout
        swizzle = layout.swizzle if isinstance(layout, SwizzledLayout) else 0 if layout is None else None
        if tile.dtype != t.dtype or tuple(tile.shape) != t.box or swizzle != t.swizzle:
            raise TypeError(f"{what}: the shared tile {semantics.describe(e)} does not hold the box of {t}: declare "
                            f"it shared_tensor({t.dtype}, layout=swizzled_layout({list(t.box)}, {t.dtype}, "
                            f"swizzle={t.swizzle}))")
    return _pointer_to(e, what)


def tma_load(dst: Any, tensor_map: Any, coords: Sequence[Any], bar: Any) -> E.Intrinsic:
    """Copy the box of `tensor_map` at `coords` (its first element's indices, outermost first; they may be negative
    or run past the tensor, where the box is filled with zeros) into the shared tile `dst`, swizzled as the map
    says; the copy completes the box's bytes (`tma_box_bytes`) on the mbarrier `bar`, whose phase must expect them
    (`mbarrier_arrive_expect_tx`). Wait on `bar` before reading the tile."""
    address, t = _tensor_map(tensor_map, "tma_load")
    rank = len(t.shape)
    assert rank in TMA_RANKS
    return intrinsic(f"tma_load_{rank}d", _shared_tile(dst, t, "tma_load"), address, _barrier(bar, "tma_load"),
                     *_coordinates(coords, t, "tma_load"))


def tma_store(tensor_map: Any, coords: Sequence[Any], src: Any) -> E.Intrinsic:
    """Copy the shared tile `src` (laid out as a load of the map places it) to the box of `tensor_map` at `coords`;
    elements outside the tensor are not written. Call `fence_proxy_async_shared()` and `syncthreads()` after the
    threads write the tile, and `tma_store_commit_group()` / `tma_store_wait_group(0)` before the tile is reused or
    the kernel relies on the data being in global memory."""
    address, t = _tensor_map(tensor_map, "tma_store")
    rank = len(t.shape)
    return intrinsic(f"tma_store_{rank}d", address, _shared_tile(src, t, "tma_store"),
                     *_coordinates(coords, t, "tma_store"))


def tma_box_bytes(tensor_map: Any) -> int:
    """The bytes one box of `tensor_map` moves (a Python int): what a load completes on its mbarrier."""
    return _tensor_map(tensor_map, "tma_box_bytes")[1].box_bytes


def tma_store_commit_group() -> E.Intrinsic:
    """Close the group of this thread's TMA stores issued since the last commit (PTX `cp.async.bulk.commit_group`)."""
    return intrinsic("tma_store_commit_group")


def tma_store_wait_group(n: int) -> E.Intrinsic:
    """Wait until at most `n` (a Python int, 0 to 7) of this thread's committed store groups still read shared
    memory (PTX `cp.async.bulk.wait_group.read n`)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 7:
        raise ValueError(f"tma_store_wait_group takes a Python int from 0 to 7, got {n!r}")
    return intrinsic("tma_store_wait_group", E.Constant(n, int32))


def fence_proxy_async_shared() -> E.Intrinsic:
    """Make the threads' writes of shared memory visible to TMA (PTX `fence.proxy.async.shared::cta`): between
    writing a tile and storing it with `tma_store`."""
    return intrinsic("fence_proxy_async_shared")


__all__ = ["TensorMap", "fence_proxy_async_shared", "tma_box_bytes", "tma_load", "tma_store",
           "tma_store_commit_group", "tma_store_wait_group"]
