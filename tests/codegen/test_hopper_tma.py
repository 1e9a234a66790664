"""TMA (Hopper's tensor memory accelerator) in DSL kernels on the emulator, against numpy: tiled loads of 2-D to
5-D boxes (partial boxes over the tensor's edges, negative coordinates, every swizzle) into shared tiles read
through `swizzled_layout`, stores that skip what lies outside the tensor, the checks of a misaligned tile, and the
machine code NVRTC makes of a TMA kernel for sm_90a (UTMALDG, and SYNCS for its mbarrier)."""

from __future__ import annotations

import importlib.util
import subprocess
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.runtime.cuda_backend import backend
from codegen.toolchain import nvrtc
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.sass import find_tool
from hidet_lang import attrs, f16, f32, i32, u64
from hidet_lang.cuda import (
    TensorMap,
    blockIdx,
    dynamic_shared_memory,
    fence_mbarrier_init,
    fence_proxy_async_shared,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    shared_tensor,
    swizzled_layout,
    syncthreads,
    threadIdx,
    tma_box_bytes,
    tma_load,
    tma_store,
    tma_store_commit_group,
    tma_store_wait_group,
)
from hidet_lang.errors import DSLError
from hidet_lang.passes.pipeline import lower
from hidet_lang.target import Target, TargetKind
from hidet_lang.testing import example_count

# the emulator's reports of misuse (a GPU faults, or computes garbage)
emulator_reports = pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")

THREADS = 64


def reference_box(a: np.ndarray, start: list[int], box: list[int]) -> np.ndarray:
    """The box of `a` at `start` (outermost first), zero where it lies outside `a`: what a TMA load gives."""
    out = np.zeros(box, a.dtype)
    src, dst = [], []
    for s, b, n in zip(start, box, a.shape):
        lo, hi = max(s, 0), min(s + b, n)
        if hi <= lo:
            return out
        src.append(slice(lo, hi))
        dst.append(slice(lo - s, hi - s))
    out[tuple(dst)] = a[tuple(src)]
    return out


def load_module(dtype, shape: list[int], box: list[int], swizzle: int, start: list[int]):
    """A kernel that TMA-loads the box of its tensor at `start` into a swizzled tile, then copies the tile (read
    through its layout) to `out`; `raw[k]` gets the tile's element at element offset `places[k]` from its start."""
    rank = len(shape)
    size = int(np.prod(box))
    strides = [int(np.prod(box[d + 1:])) for d in range(rank)]
    with hidet.script_module() as module:

        @hidet.script
        def load_box(a: TensorMap(dtype, shape, box=box, swizzle=swizzle), out: dtype[size], raw: dtype[size],
                     places: i32[size]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = THREADS
            attrs.cuda.grid_dim = 1
            tile = shared_tensor(dtype, layout=swizzled_layout(box, dtype, swizzle=swizzle))
            bar = shared_tensor(u64, [1])
            if threadIdx.x == 0:
                mbarrier_init(~bar[0], 1)
                fence_mbarrier_init()
            syncthreads()
            if threadIdx.x == 0:
                mbarrier_arrive_expect_tx(~bar[0], tma_box_bytes(a))
                tma_load(tile, a, start, ~bar[0])
            mbarrier_wait(~bar[0], 0)
            flat = ~tile[(0,) * rank]
            for k in range(threadIdx.x, size, THREADS):
                index = []
                rest = k
                for d in hidet.meta.range(rank):
                    index.append(rest / strides[d] % box[d])
                out[k] = tile[index]
                raw[k] = flat[places[k]]

    return module.build(target="cuda:sm_90", check=True)


def swizzled_offsets(size: int, nbytes: int, swizzle: int) -> np.ndarray:
    """Where TMA puts the elements of a row-major box in shared memory, in elements from the tile's start: byte
    address bits 4-6 (the 16-byte chunk) XORed with bits 7-9 (the 128-byte line), 1, 2 or 3 of them."""
    offsets = np.arange(size) * nbytes
    bits = {0: 0, 32: 1, 64: 2, 128: 3}[swizzle]
    return ((offsets ^ (((offsets >> 7) & ((1 << bits) - 1)) << 4)) // nbytes).astype(np.int32)


@st.composite
def boxes(draw: st.DrawFn) -> tuple[object, list[int], list[int], int, list[int]]:
    """A dtype, a tensor shape (2 to 5 dims, odd extents), a box hanging over its edges, a swizzle, a start."""
    dtype = draw(st.sampled_from([f16, f32]))
    nbytes = dtype.nbytes
    rank = draw(st.integers(2, 5))
    swizzle = draw(st.sampled_from([0, 32, 64, 128]))
    inner_bytes = draw(st.sampled_from([n for n in (16, 32, 64, 128) if not swizzle or n <= swizzle]))
    inner_box = inner_bytes // nbytes
    outer_max = {2: 9, 3: 5, 4: 3, 5: 3}[rank]
    box = [draw(st.integers(1, outer_max)) for _ in range(rank - 1)] + [inner_box]
    shape = [draw(st.integers(1, 7)) for _ in range(rank - 1)] + [draw(st.integers(1, 5)) * 16 // nbytes]
    start = [draw(st.integers(-b, n)) for b, n in zip(box, shape)]
    return dtype, shape, box, swizzle, start


@settings(max_examples=example_count(6), deadline=None)
@given(boxes(), st.integers(0, 2**31 - 1))
def test_a_tma_load_fills_the_swizzled_tile_with_the_box_and_zeros_outside_the_tensor(case, seed: int) -> None:
    dtype, shape, box, swizzle, start = case
    a = np.random.default_rng(seed).standard_normal(shape).astype(dtype.numpy_name)
    size = int(np.prod(box))
    out, raw = np.full(size, np.nan, a.dtype), np.full(size, np.nan, a.dtype)
    places = swizzled_offsets(size, dtype.nbytes, swizzle)
    load_module(dtype, shape, box, swizzle, start)["load_box"](a, out, raw, places)
    expected = reference_box(a, start, box)
    np.testing.assert_array_equal(out.reshape(box), expected)  # through swizzled_layout
    np.testing.assert_array_equal(raw.reshape(box), expected)  # where the hardware's swizzle puts them


def store_module(shape: list[int], box: list[int], swizzle: int, start: list[int]):
    """A kernel that TMA-loads the box at the origin of `a` and TMA-stores it at `start` of `b`."""
    with hidet.script_module() as module:

        @hidet.script
        def copy_box(a: TensorMap(f32, shape, box=box, swizzle=swizzle),
                     b: TensorMap(f32, shape, box=box, swizzle=swizzle)):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            tile = shared_tensor(f32, layout=swizzled_layout(box, f32, swizzle=swizzle))
            bar = shared_tensor(u64, [1])
            if threadIdx.x == 0:
                mbarrier_init(~bar[0], 1)
                fence_mbarrier_init()
            syncthreads()
            if threadIdx.x == 0:
                mbarrier_arrive_expect_tx(~bar[0], tma_box_bytes(a))
                tma_load(tile, a, [0, 0], ~bar[0])
            mbarrier_wait(~bar[0], 0)
            fence_proxy_async_shared()
            syncthreads()
            if threadIdx.x == 0:
                tma_store(b, start, tile)
                tma_store_commit_group()
                tma_store_wait_group(0)

    return module.build(target="cuda:sm_90", check=True)


@settings(max_examples=example_count(4), deadline=None)
@given(st.integers(1, 9), st.integers(1, 3), st.sampled_from([0, 32, 64, 128]), st.integers(1, 8),
       st.data())
def test_a_tma_store_writes_the_box_inside_the_tensor_only(rows: int, cols4: int, swizzle: int, box_rows: int,
                                                           data: st.DataObject) -> None:
    box = [box_rows, (swizzle or 64) // 4]
    shape = [rows, 4 * cols4]
    start = [data.draw(st.integers(-box[0], rows)), data.draw(st.integers(-box[1], shape[1]))]
    a = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) + 1
    b = np.full(shape, -1.0, np.float32)
    store_module(shape, box, swizzle, start)["copy_box"](a, b)
    tile = reference_box(a, [0, 0], box)
    expected = np.full(shape, -1.0, np.float32)
    padded = np.full([rows + 2 * box[0] + 2, shape[1] + 2 * box[1] + 2], -1.0, np.float32)
    padded[box[0]:box[0] + rows, box[1]:box[1] + shape[1]] = expected
    padded[start[0] + box[0]:start[0] + 2 * box[0], start[1] + box[1]:start[1] + 2 * box[1]] = tile
    np.testing.assert_array_equal(b, padded[box[0]:box[0] + rows, box[1]:box[1] + shape[1]])


@emulator_reports
def test_a_tile_that_is_not_1024_byte_aligned_for_the_128_byte_swizzle_is_reported_at_the_dsl_line() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def misaligned(a: TensorMap(f16, [64, 64], box=[8, 64], swizzle=128)):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = 4096
            bar = shared_tensor(u64, [1])
            if threadIdx.x == 0:
                mbarrier_init(~bar[0], 1)
                mbarrier_arrive_expect_tx(~bar[0], tma_box_bytes(a))
                tma_load(dynamic_shared_memory(128, f16), a, [0, 0], ~bar[0])  # the misaligned line
            mbarrier_wait(~bar[0], 0)

    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "the misaligned line" in text)
    with pytest.raises(RuntimeError, match=rf"is not 1024-byte aligned .*, at .*{Path(__file__).name}:{line}$"):
        module.build(target="cuda:sm_90", check=True)["misaligned"](np.zeros([64, 64], np.float16))


def test_a_tile_whose_layout_is_not_the_maps_swizzle_is_refused_at_parse_time() -> None:
    with pytest.raises(DSLError, match="does not hold the box"):
        with hidet.script_module():

            @hidet.script
            def wrong_tile(a: TensorMap(f16, [64, 64], box=[8, 64], swizzle=128)):
                attrs.func_kind = "cuda_kernel"
                attrs.cuda.block_dim = 32
                attrs.cuda.grid_dim = 1
                tile = shared_tensor(f16, [8, 64])
                bar = shared_tensor(u64, [1])
                tma_load(tile, a, [0, 0], ~bar[0])


def test_a_tensor_map_that_tma_cannot_address_is_refused_where_it_is_declared() -> None:
    with pytest.raises(ValueError, match="multiples of 16"):
        TensorMap(f16, [10, 7], box=[8, 8])
    with pytest.raises(ValueError, match="at most its swizzle of 32 bytes"):
        TensorMap(f32, [10, 64], box=[8, 16], swizzle=32)


CUOBJDUMP = find_tool("cuobjdump")


@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
def test_nvrtc_compiles_a_tma_kernel_for_sm_90a_to_utmaldg_and_mbarrier_instructions(tmp_path: Path) -> None:
    with hidet.script_module() as module:

        @hidet.script
        def tma_tile(a: TensorMap(f16, [128, 64], box=[64, 64], swizzle=128), out: f32[1]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = 2
            tile = shared_tensor(f16, layout=swizzled_layout([64, 64], f16, swizzle=128))
            bar = shared_tensor(u64, [1])
            if threadIdx.x == 0:
                mbarrier_init(~bar[0], 1)
                fence_mbarrier_init()
            syncthreads()
            if threadIdx.x == 0:
                mbarrier_arrive_expect_tx(~bar[0], tma_box_bytes(a))
                tma_load(tile, a, [blockIdx.x * 64, 0], ~bar[0])
            mbarrier_wait(~bar[0], 0)
            if threadIdx.x == 0:
                out[0] = f32(tile[3, 5])

    source = emit_cuda(plan_module(lower(module.ir_module(), Target(TargetKind.CUDA, "sm_90a"))))[0]
    cubin = tmp_path / "tma.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(source, "sm_90a", include_dirs=[str(INCLUDE_DIR)]))
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    assert "UTMALDG" in sass
    assert "SYNCS" in sass
