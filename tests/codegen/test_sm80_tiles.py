"""The sm_80 tile pieces alone (`hidet_lang.cuda.async_copy`, `hidet_lang.cuda.fragments`): the copy mappings cover
each tile's chunks once and write each 128-byte line with 8 consecutive threads; a gather's tasks cover each cell
once, consecutive threads along the rows or the columns asked for; on the emulator against numpy, a
tile copied by `TileCopy` through a `CopyPipeline` (odd, unaligned and ragged sizes), an f16 source copied into an
f32 tile (element reads, converted), and one warp's product of
swizzled tiles read by `ldmatrix` with the accumulator stored from its cells; a lane's rows and columns of its
accumulator; tf32 B fragments read from `tf32_b_tile` with no bank conflicts (and from a 128-byte swizzle with two
ways, counted on the emulator); an accumulator stored through `FragmentStaging` as 16-byte vectors (odd output
sizes against numpy, no bank conflicts for 16-bit outputs)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f16, f32, i32, register_tensor
from hidet_lang.cuda import address_aligned, copy_vector, threadIdx
from hidet_lang.cuda.async_copy import CopyPipeline, TileCopy, TileGather, chunk_tile
from hidet_lang.cuda.fragment_staging import FragmentStaging
from hidet_lang.cuda.fragments import Accumulator, WarpMma, load_b_tf32, load_b_trans, tf32_b_tile
from hidet_lang.cuda.tiles import SharedMemoryPlan, padded_tile
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir.evaluate import evaluate
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



@pytest.mark.parametrize(("rows", "cols", "threads", "along"), [
    (128, 8, 256, "rows"), (64, 16, 128, "rows"), (128, 8, 256, "cols"), (20, 8, 64, "cols"), (16, 4, 128, "cols")])
def test_a_gather_gives_each_cell_to_one_thread_in_the_order_asked(rows, cols, threads, along) -> None:
    gather = TileGather(rows, cols, threads, along)
    worker = Var("worker", i32)
    cells = []
    for t in range(threads):
        tasks = [(evaluate(r, {worker: t}), evaluate(c, {worker: t}), i) for r, c, i in gather.tasks(worker)]
        assert [(r, c) for r, c, _ in tasks] == gather.mapping(t)
        # a thread's row is the same in all its tasks along rows, its column along cols; `r` numbers its rows
        assert len({r for r, _, _ in tasks} if along == "rows" else {c for _, c, _ in tasks}) == 1
        assert [(evaluate(r, {worker: t}), i) for r, i in gather.rows_of(worker)] == \
            sorted({(r, i) for r, _, i in tasks}, key=lambda cell: cell[1])
        assert [i for _, i in gather.rows_of(worker)] == list(range(gather.thread_rows))
        for r, c, _ in tasks:
            inside = gather.inside(r, c)
            assert (evaluate(inside, {}) if gather.guarded else inside) == (r < rows and c < cols)
        cells += [(r, c) for r, c, _ in tasks if r < rows and c < cols]
    assert sorted(cells) == [(r, c) for r in range(rows) for c in range(cols)]
    first = [gather.mapping(t)[0] for t in range(4)]
    step = (1, 0) if along == "rows" else (0, 1)  # consecutive threads on consecutive rows or columns
    assert all((b[0] - a[0], b[1] - a[1]) == step for a, b in zip(first, first[1:]))


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
    with pytest.raises(ValueError, match="no whole number of rows"):
        TileGather(48, 8, 64, "rows")
    with pytest.raises(ValueError, match="along is 'rows' or 'cols'"):
        TileGather(16, 8, 64, "both")
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



def widening_copy_module():
    """A kernel that copies an f16 `a [rows, 8]` into an f32 [16, 8] tile (16-byte copies asked for, which a
    source of another type cannot take) and stores the tile into `out`."""
    plan = SharedMemoryPlan()
    tile = padded_tile(f32, [16, 8], 0)
    buffer = plan.tiles(tile)
    copy = TileCopy(tile, 32)
    with hidet.script_module() as module:

        @hidet.script
        def widen(rows: i32, a: f16[rows, 8], out: f32[16, 8]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            smem = buffer.at()
            for row, chunk in copy.mapping.on(threadIdx.x):
                copy.copy(smem, row, chunk, a, [0, 0], True)
            for row, chunk in copy.mapping.on(threadIdx.x):
                for e in range(4):
                    out[row, chunk * 4 + e] = smem[row, chunk * 4 + e]

    return module.build(check=True)


@pytest.mark.parametrize("rows", [16, 11])
def test_a_source_of_another_type_is_read_element_by_element_and_converted(rows: int) -> None:
    a = (np.arange(rows * 8) - 40.5).astype(np.float16).reshape(rows, 8)
    out = np.full((16, 8), np.nan, np.float32)
    widening_copy_module()["widen"](rows, a, out)
    expected = np.zeros((16, 8), np.float32)
    expected[:rows] = a
    np.testing.assert_array_equal(out, expected)

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


# ------------------------------------------------------------------------------ rows, columns, staging, bank conflicts


@pytest.mark.parametrize(("rows", "cols"), [(16, 8), (32, 16), (64, 32), (16, 128)])
def test_a_lanes_rows_and_columns_name_the_registers_of_its_cells(rows: int, cols: int) -> None:
    frags = Accumulator(rows, cols)
    for lane in (0, 5, 31):
        cells = {(i, j): r for i, j, r in frags.cells(lane)}
        lane_rows, lane_cols = frags.lane_rows(lane), frags.lane_columns(lane)
        assert len(lane_rows) == rows // 8 and len(lane_cols) == cols // 4
        assert {(i, j): frags.register(s, c) for i, s in lane_rows for j, c in lane_cols} == cells
        assert all(sorted(frags.row_registers(s)) == sorted(r for (i2, _), r in cells.items() if i2 == i)
                   for i, s in lane_rows)
    with pytest.raises(ValueError, match="slots within"):
        frags.register(rows // 8, 0)


def tf32_b_module(tile):
    """A warp reading every tf32 B fragment of a [32, 32] f32 `tile` (`load_b_tf32`) and storing the two values of
    each lane in order into `out [4, 4, 32, 2]` (k step, 8-column tile, lane, register)."""
    plan = SharedMemoryPlan()
    smem = plan.tiles(tile)
    copy = TileCopy(tile, 32)
    with hidet.script_module() as module:

        @hidet.script
        def fragments(b: f32[32, 32], out: f32[4, 4, 32, 2]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            for row, chunk in copy.mapping.on(threadIdx.x):
                copy.copy(smem.at(), row, chunk, b, [0, 0])
            CopyPipeline(2).commit()
            CopyPipeline(2).wait()
            rb = register_tensor(f32, [2])
            for k in range(4):
                for n in range(4):
                    load_b_tf32(~rb[0], smem.at(), 8 * k, 8 * n, threadIdx.x)  # the line whose reads are counted
                    out[k, n, threadIdx.x, 0] = rb[0]
                    out[k, n, threadIdx.x, 1] = rb[1]

    return module.build(check=True)


def shared_records(p, line_text: str) -> list:
    """The profile `p`'s shared-memory records of the line of this file that holds `line_text` (at least one)."""
    with open(__file__) as source:
        number = next(n for n, text in enumerate(source, 1) if line_text in text)
    records = [r for r in p.lines() if r.file == __file__ and r.line == number and r.space == "shared"]
    assert records, number
    return records


@pytest.mark.parametrize("padded", [True, False])
def test_tf32_b_fragments_read_their_tile_without_bank_conflicts(padded: bool) -> None:
    tile = tf32_b_tile([32, 32]) if padded else chunk_tile(f32, [32, 32])
    b = np.arange(32 * 32, dtype=np.float32).reshape(32, 32)
    out = np.full((4, 4, 32, 2), np.nan, np.float32)
    with hidet.cuda.profile() as p:
        tf32_b_module(tile)["fragments"](b, out)
    lane = np.arange(32)
    for k in range(4):
        for n in range(4):  # B[t, g] and B[t + 4, g] of the 8 x 8 block, g = l / 4, t = l % 4
            np.testing.assert_array_equal(out[k, n, :, 0], b[8 * k + lane % 4, 8 * n + lane // 4])
            np.testing.assert_array_equal(out[k, n, :, 1], b[8 * k + lane % 4 + 4, 8 * n + lane // 4])
    loads = [r for r in shared_records(p, "# the line whose reads are counted") if r.kind == "load"]
    wavefronts, ideal = sum(r.wavefronts for r in loads), sum(r.ideal for r in loads)
    # the 128-byte swizzle puts rows t and t ^ 1 of a fragment's 8 columns on the same banks: two ways
    assert wavefronts == (ideal if padded else 2 * ideal)


def staging_module(dtype: str, rows: int, cols: int, warps: int):
    """`warps` warps, each filling an accumulator tile with `value(cell)` and storing it through `FragmentStaging`
    into `out [m, n]` at rows `rows * warp`: 16-byte stores where a vector lies inside and aligned, elements
    otherwise."""
    frags = Accumulator(rows, cols)
    dt = as_dtype(dtype)
    plan = SharedMemoryPlan()
    staging = FragmentStaging(plan, frags, dt, warps)
    vector = staging.vector_elements
    with hidet.script_module() as module:

        @hidet.script
        def store(m: i32, n: i32, out: dt[m, n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32 * warps
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            lane = threadIdx.x % 32
            warp = threadIdx.x // 32
            acc = frags.tensor()
            for i, j, r in frags.cells(lane):
                acc[r] = f32((warp * rows + i) * 1000 + j)
            staging.stage(acc, warp, lane)  # the staging stores
            held = register_tensor(dt, [vector])
            for row, vec in staging.lanes.on(lane):
                copy_vector(~held[0], staging.vector(warp, row, vec), 16)  # the staging loads
                i = warp * rows + row
                j = vec * vector
                if i < m:
                    if j + vector <= n and address_aligned(~out[i, j], 16):
                        copy_vector(~out[i, j], ~held[0], 16)
                    else:
                        for e in range(vector):
                            if j + e < n:
                                out[i, j + e] = held[e]

    return module.build(check=True)


@settings(max_examples=example_count(6), deadline=None)
@given(st.sampled_from([("float16", 64, 32, 2), ("bfloat16", 16, 64, 1), ("float32", 32, 32, 2),
                        ("float16", 16, 128, 1)]), st.integers(1, 140), st.integers(1, 140))
def test_an_accumulator_staged_through_shared_memory_lands_in_its_cells(case, m: int, n: int) -> None:
    dtype, rows, cols, warps = case
    npt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}[dtype]
    out = np.full((m, n), 7, npt)
    staging_module(dtype, rows, cols, warps)["store"](m, n, out)
    i, j = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    expected = np.where((i < rows * warps) & (j < cols), (i * 1000 + j).astype(np.float32), 7).astype(npt)
    np.testing.assert_array_equal(out, expected)


@pytest.mark.parametrize(("dtype", "rows", "cols"), [("float16", 64, 32), ("bfloat16", 32, 64), ("float16", 16, 16)])
def test_staging_16_bit_accumulators_takes_no_bank_conflicts(dtype: str, rows: int, cols: int) -> None:
    with hidet.cuda.profile() as p:
        npt = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
        staging_module(dtype, rows, cols, 2)["store"](rows * 2, cols, np.zeros((rows * 2, cols), npt))
    for text in ("# the staging stores", "# the staging loads"):
        records = shared_records(p, text)
        assert all(r.wavefronts == r.ideal for r in records), (text, records)


def test_bad_held_operands_and_staging_are_refused_where_they_are_asked_for() -> None:
    with pytest.raises(TypeError, match="held A operands are 16-bit"):
        WarpMma("float32", 16, 16).operand(16)
    with pytest.raises(ValueError, match="k is a positive multiple of 16"):
        WarpMma("float16", 16, 16).operand(24)
    with pytest.raises(ValueError, match="an operand of operand"):
        WarpMma("float16", 32, 16).multiply_held(None, Accumulator(16, 32), None, None, None, 0, 0, 0)
    with pytest.raises(ValueError, match="n a positive multiple of 32"):
        tf32_b_tile([32, 48])
    with pytest.raises(ValueError, match="16- or 32-bit elements"):
        FragmentStaging(SharedMemoryPlan(), Accumulator(16, 16), "float64", 1)
    with pytest.raises(ValueError, match="no whole number of 16-byte vectors a lane"):
        FragmentStaging(SharedMemoryPlan(), Accumulator(16, 8), "float16", 1)
