"""The sm_80 tile pieces alone (`hidet_lang.cuda.async_copy`, `hidet_lang.cuda.fragments`): the copy mappings cover
each tile's chunks once and write each 128-byte line with 8 consecutive threads; on the emulator against numpy, a
tile copied by `TileCopy` through a `CopyPipeline` (odd, unaligned and ragged sizes), and one warp's product of
swizzled tiles read by `ldmatrix` with the accumulator stored from its cells."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f16, f32, i32
from hidet_lang.cuda import threadIdx
from hidet_lang.cuda.async_copy import CopyPipeline, TileCopy, chunk_tile
from hidet_lang.cuda.fragments import Accumulator, WarpMma, load_b_trans
from hidet_lang.cuda.tiles import SharedMemoryPlan, padded_tile
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir.expr import Var
from hidet_lang.testing import example_count

# ------------------------------------------------------------------------------------------------ build-time values


@pytest.mark.parametrize(("dtype", "shape", "threads"), [
    (f16, [128, 32], 256), (f16, [32, 128], 256), (f32, [32, 128], 128), (f16, [16, 64], 256),
    (f32, [64, 32], 32), (f16, [40, 96], 96)])
def test_a_copy_covers_every_chunk_once_and_writes_whole_lines(dtype, shape, threads) -> None:
    tile = chunk_tile(dtype, shape) if shape[1] * dtype.nbytes in (32, 64, 128, 256) else padded_tile(dtype, shape, 8)
    copy = TileCopy(tile, threads)
    tasks = [copy.mapping(t) for t in range(min(threads, copy.mapping.num_workers))]
    cells = sorted(cell for t in tasks for cell in t if cell[0] < shape[0])
    assert cells == [(r, c) for r in range(shape[0]) for c in range(copy.row_chunks)]
    if tile.layout.size == shape[0] * shape[1]:  # a swizzled tile: each 8 threads' chunks fill one 128-byte line
        for k in range(len(tasks[0])):
            lines = {}
            for t in range(0, len(tasks), 8):
                starts = {tile.layout(r, c * copy.vector) * dtype.nbytes // 128 for r, c in (tasks[u][k] for u in
                                                                                          range(t, t + 8))}
                lines[t] = starts
            assert all(len(v) == 1 for v in lines.values()), (k, lines)


def test_the_accumulator_cells_are_the_mma_layout() -> None:
    frags = Accumulator(32, 16)
    assert frags.registers == 16
    for lane in range(32):
        cells = frags.cells(lane)
        assert [(i, j) for i, j, _ in cells] == frags.mapping(lane)
        assert [r for *_, r in cells] == list(range(16))
        # register 4 t + e of tile t is C[g + 8 (e / 2), 2 (l % 4) + e % 2] of that tile (the PTX layout)
        g, q = lane // 4, lane % 4
        assert cells[6][:2] == (16 * 0 + g + 8, 8 * 1 + 2 * q)
        assert cells[9][:2] == (16 * 1 + g, 2 * q + 1)


def test_bad_pieces_are_refused_where_they_are_asked_for() -> None:
    with pytest.raises(ValueError, match="a power of two bytes, at least 32"):
        chunk_tile(f16, [64, 8])
    with pytest.raises(ValueError, match="positive multiple of 32"):
        TileCopy(chunk_tile(f16, [64, 32]), 48)
    with pytest.raises(ValueError, match="stages is an int from 2 to 8"):
        CopyPipeline(1)
    with pytest.raises(ValueError, match="rows is a positive multiple of 16"):
        Accumulator(24, 8)
    with pytest.raises(ValueError, match="a multiple of 16 rows and 8 columns"):
        Accumulator(32, 16).tile(None, 8, 0)
    with pytest.raises(TypeError, match="f16, bf16 or f32"):
        WarpMma("int8", 16, 16)
    with pytest.raises(TypeError, match="transposes 16-bit elements"):
        load_b_trans(None, Var("t", f32[16, 16]), 0, 0, 0)


# ------------------------------------------------------------------------------------------------- on the emulator

COPY_ROWS, COPY_COLS, COPY_THREADS = 32, 64, 128


def copy_module(stages: int):
    """A kernel that walks `a [rows, cols]` in [32, 64] f16 tiles through a pipeline of `stages` buffers and copies
    each tile from shared memory to `out` (zeros where the tile runs past `a`)."""
    plan = SharedMemoryPlan()
    tile = chunk_tile(f16, [COPY_ROWS, COPY_COLS])
    buffers = plan.tiles(tile, stages)
    copy = TileCopy(tile, COPY_THREADS)
    pipe = CopyPipeline(stages)
    with hidet.script_module() as module:

        @hidet.script
        def tiles(rows: i32, cols: i32, a: f16[rows, cols], out: f16[rows, cols]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = COPY_THREADS
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            steps = (rows + COPY_ROWS - 1) // COPY_ROWS * ((cols + COPY_COLS - 1) // COPY_COLS)
            per_row = (cols + COPY_COLS - 1) // COPY_COLS
            for it in range(pipe.iterations(steps)):
                pipe.wait()
                if pipe.fills(it, steps):
                    for row, chunk in copy.mapping.on(threadIdx.x):
                        copy.copy(buffers.at(pipe.fill_stage(it)), row, chunk, a,
                                  [it // per_row * COPY_ROWS, it % per_row * COPY_COLS], cols % 8 == 0)
                pipe.commit()
                if pipe.reads(it):
                    step = it - (pipe.stages - 1)
                    for row, chunk in copy.mapping.on(threadIdx.x):
                        for e in range(8):
                            i = step // per_row * COPY_ROWS + row
                            j = step % per_row * COPY_COLS + chunk * 8 + e
                            if i < rows and j < cols:
                                out[i, j] = buffers.at(pipe.read_stage(it))[row, chunk * 8 + e]

    return module.build(check=True)


@settings(max_examples=example_count(8), deadline=None)
@given(st.integers(1, 100), st.integers(1, 200), st.sampled_from([2, 3, 4]))
def test_tiles_copied_through_the_pipeline_land_where_their_layout_says(rows: int, cols: int, stages: int) -> None:
    a = (np.arange(rows * cols) % 2039).astype(np.float16).reshape(rows, cols)
    out = np.full((rows, cols), np.nan, np.float16)
    copy_module(stages)["tiles"](rows, cols, a, out)
    np.testing.assert_array_equal(out, a)


def warp_product_module(dtype: str, k_major: bool):
    """One warp's [32, 16] product of a [32, 32] tile and a [32, 16] one (as [16, 32] where `k_major`), copied
    into swizzled shared tiles, read by `WarpMma` and stored from the accumulator's cells."""
    plan = SharedMemoryPlan()
    a_tile = chunk_tile(dtype, [32, 32])
    b_tile = chunk_tile(dtype, [16, 32] if k_major else [32, 16 if dtype != "float32" else 32])
    a_smem, b_smem = plan.tiles(a_tile), plan.tiles(b_tile)
    a_copy, b_copy = TileCopy(a_tile, 32), TileCopy(b_tile, 32)
    warp = WarpMma(dtype, 32, 16, b_k_major=k_major)
    frags = warp.accumulator
    dt = as_dtype(dtype)
    pipe = CopyPipeline(2)
    b_shape = [16, 32] if k_major else [32, b_tile.shape[1]]
    with hidet.script_module() as module:

        @hidet.script
        def product(a: dt[32, 32], b: dt[b_shape[0], b_shape[1]], c: f32[32, 16]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            for row, chunk in a_copy.mapping.on(threadIdx.x):
                a_copy.copy(a_smem.at(), row, chunk, a, [0, 0])
            for row, chunk in b_copy.mapping.on(threadIdx.x):
                b_copy.copy(b_smem.at(), row, chunk, b, [0, 0])
            pipe.commit()
            pipe.wait()
            if dtype == "float32":
                for row, chunk in a_copy.mapping.on(threadIdx.x):
                    a_copy.round_tf32(a_smem.at(), row, chunk)
                for row, chunk in b_copy.mapping.on(threadIdx.x):
                    b_copy.round_tf32(b_smem.at(), row, chunk)
                pipe.wait()
            acc = frags.tensor()
            ra = warp.a_registers()
            rb = warp.b_registers()
            for r in range(frags.registers):
                acc[r] = 0.0
            warp.multiply(acc, ra, rb, a_smem.at(), b_smem.at(), 0, 0, threadIdx.x)
            for i, j, r in frags.cells(threadIdx.x):
                c[i, j] = acc[r]

    return module.build(check=True)


@pytest.mark.parametrize(("dtype", "k_major"), [("float16", False), ("bfloat16", True), ("float32", False),
                                                ("float32", True)])
def test_a_warps_product_of_swizzled_tiles_lands_in_its_cells(dtype: str, k_major: bool) -> None:
    npt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}[dtype]
    a = (np.arange(32 * 32).reshape(32, 32) % 7 - 3).astype(npt)
    b_kn = (np.arange(32 * 32).reshape(32, 32) % 5 - 2).astype(npt)
    b = np.ascontiguousarray(b_kn[:, :16].T) if k_major else (b_kn if dtype == "float32" else b_kn[:, :16].copy())
    c = np.full((32, 16), np.nan, np.float32)
    warp_product_module(dtype, k_major)["product"](a, b, c)
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b_kn[:, :16].astype(np.float32))
