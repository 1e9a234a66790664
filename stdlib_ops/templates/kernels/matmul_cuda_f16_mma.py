"""The batched half-precision matmul template on the tensor cores (sm_80 and later): a pipeline of 16-byte `cp_async`
copies into swizzled shared memory, `ldmatrix` fragments and `mma.m16n8k16`.

`c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]` with f16 or bf16 inputs, f32 accumulation and an f16, bf16 or f32
output; `a` is row-major `[m, k]` and `b` row-major `[k, n]`, as the matmul task gives them.

- **Block tiles.** A block computes a `block_m x block_n` tile of one batch entry with `(block_m / warp_m) x
  (block_n / warp_n)` warps; a warp owns a `warp_m x warp_n` tile of `(warp_m / 16) x (warp_n / 8)` mma tiles,
  whose f32 accumulators are register tensors indexed only by constants (`meta.range`). Blocks go over the tiles
  in groups of `GROUP_M` tile rows (`tile_order`: a group's blocks share rows of `a` and columns of `b` in L2),
  batch entries outermost. `default_tiles` chooses 128 x 128 tiles of 8 warps (64 x 32 each), or 64 x 64 tiles of
  4 warps where those give a GPU too few blocks. Blocks of up to 256 threads whose warp tiles are at most 64 x 32
  ask for two blocks an SM (launch bounds), which holds a thread to 128 registers at 256 threads (the 128 x 128
  tile needs 128 without spilling; a 64 x 64 warp tile's 128 accumulators would spill).
- **Copies.** Along k, steps of `BLOCK_K` = 32: the tiles of `a` (`block_m x 32`) and `b` (`32 x block_n`) are
  copied into one of `stages` buffers of dynamic shared memory in chunks of 8 elements (16 bytes). A chunk inside
  the matrix whose rows are a multiple of 8 elements long (so that its address is 16-byte aligned) is one
  `cp_async` of 16 bytes (`LDGSTS.128`); a chunk outside is zeros, and where the rows are not a multiple of 8 long
  every element is read on its own (zeros outside the matrix), so every shape is correct. The copy of step
  s + stages - 1 is issued before step s is multiplied (`cp_async_wait_group(stages - 2)` and one barrier a step).
- **Swizzle.** The tiles are `async_copy.chunk_tile`s: 16-byte chunks swizzled within 128-byte lines, so that the
  eight rows one 8x8 matrix of an `ldmatrix` reads (or the eight chunks a quarter warp copies) fall in eight
  different groups of four banks.
- **Fragments.** For each 16 of the 32 k: `ldmatrix_x4` loads the A fragment of each 16-row mma tile (lane l
  addresses row l % 16, chunk l / 16), `ldmatrix_x4_trans` the B fragments of two 8-column mma tiles at once from
  the row-major `b` tile (lane l addresses k row l % 16, chunk l / 16), then each warp issues its
  `mma_m16n8k16_f16_f32` (or `_bf16_f32`) instructions.
- **Output.** Once the main loop is done, each warp writes its accumulators, rounded to the output type, into a
  shared tile of its own laid over the stage buffers (`fragment_staging.FragmentStaging`), reads them back as
  16-byte vectors (consecutive lanes along a row) and stores each into `c` with one 128-bit store where it lies
  inside `c` and is 16-byte aligned, element by element otherwise: both are where a fused epilogue lands.

The kernel follows the kernel contract: `a` and `b` are only read element by element or as the source of a
`cp_async` (a fused prologue turns those into element reads), `c` is only stored element by element or by
`copy_vector` under `address_aligned`. The 16-byte
copies assume that the tensors' data start at 16-byte aligned addresses (as every allocation does).
`MATMUL_CUDA_F16_MMA_SPACE` is what `ops.tune` searches.
"""

from __future__ import annotations

from hidet_lang import attrs, i32, meta, register_tensor, script, script_module
from hidet_lang.cuda import address_aligned, blockIdx, copy_vector, syncthreads, threadIdx
from hidet_lang.cuda.async_copy import CopyPipeline, TileCopy, chunk_tile
from hidet_lang.cuda.fragment_staging import FragmentStaging
from hidet_lang.cuda.fragments import WarpMma, tf32_b_tile
from hidet_lang.cuda.tiles import SharedMemoryPlan
from hidet_lang.cuda_limits import shared_memory_per_block
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.types import DataType
from stdlib_ops.templates.kernels.tile_order import block_tile, tile_blocks
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype, tile_for_blocks
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.space import TuningSpace, consistent_tiles, declare_space

MMA_M, MMA_N, MMA_K = 16, 8, 16
BLOCK_K = 32  # k a step: two mma k steps, a 64-byte row of the a tile
CHUNK = 8  # elements of a copy chunk and of an ldmatrix row: 16 bytes of f16 or bf16
INPUT_DTYPES = ("float16", "bfloat16")
OUTPUT_DTYPES = ("float16", "bfloat16", "float32")
MIN_ARCH = "sm_80"  # mma.sync, ldmatrix, cp.async
MAX_SMEM_BYTES = shared_memory_per_block(MIN_ARCH)
"""The most dynamic shared memory a block may have on every GPU the template runs on (the table's for `MIN_ARCH`)."""

TILES = ((128, 128, 64, 32), (64, 64, 32, 32))
"""The tiles `default_tiles` chooses from, largest first: (block_m, block_n, warp_m, warp_n)."""

ENOUGH_BLOCKS = 108
"""Blocks that keep a GPU busy (one for each of an A100's 108 SMs): the 128 x 128 tile is taken where it gives this
many."""


def default_tiles(batch: Size, m: Size, n: Size) -> tuple[int, int, int, int]:
    """The tile (block_m, block_n, warp_m, warp_n) for a product of these sizes: the largest of `TILES` that gives
    `ENOUGH_BLOCKS` blocks (the smallest when none does); the largest when a size is symbolic."""
    return tile_for_blocks(TILES, batch, m, n, ENOUGH_BLOCKS)


def mma_dtypes(template: str, out_dtype: str, dtype: str | None) -> tuple[DataType, DataType]:
    """The operands' and the output's data types of a half-precision tensor-core matmul (this template's, and
    `matmul_cuda_sm90`'s), checked in the name of `template`: `dtype` one of `INPUT_DTYPES` (None: `out_dtype` where
    it is one of them, else float16), `out_dtype` one of `OUTPUT_DTYPES`."""
    out = template_dtype(template, out_dtype, OUTPUT_DTYPES)
    if dtype is None:
        dtype = out.name if out.name in INPUT_DTYPES else "float16"
    return template_dtype(template, dtype, INPUT_DTYPES), out


MATMUL_CUDA_F16_MMA_SPACE = TuningSpace(
    {"block_m": (None, 128, 64, 256), "block_n": (None, 128, 64, 256), "warp_m": (None, 64, 32),
     "warp_n": (None, 32, 64), "stages": (4, 3, 5)},
    default={"block_m": None, "block_n": None, "warp_m": None, "warp_n": None, "stages": 4},
    constraint=consistent_tiles(("block_m", "block_n"), ("warp_m", "warp_n"), range(4, 17)),  # warps
)
"""The tuning space (`ops.tune`): the block and warp tiles (None for all four: chosen by the problem's size,
`default_tiles`) and the number of shared buffers of the copy pipeline."""


@declare_space(MATMUL_CUDA_F16_MMA_SPACE)
def matmul_cuda_f16_mma(batch: Size, m: Size, n: Size, k: Size, out_dtype: str = "float16", *,
                        dtype: str | None = None, block_m: int | None = None, block_n: int | None = None,
                        warp_m: int | None = None, warp_n: int | None = None, stages: int = 4) -> ScriptModule:
    """A module with one kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` on the tensor cores.

    `a: dtype[batch, m, k]`, `b: dtype[batch, k, n]`, `c: out_dtype[batch, m, n]`; each size is an int or a
    symbolic name. `dtype` is float16 or bfloat16 (None: `out_dtype` where it is one of them, else float16).
    A block has `32 * (block_m / warp_m) * (block_n / warp_n)` threads; `warp_m` is a multiple of 16, `warp_n` of
    16, and the block tile sides powers of two; when the four tile sizes are None, `default_tiles` chooses them.
    `stages` shared buffers (2 to 8) pipeline the copies."""
    name = "matmul_cuda_f16_mma"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    dt, out = mma_dtypes(name, out_dtype, dtype)
    if block_m is None and block_n is None and warp_m is None and warp_n is None:
        block_m, block_n, warp_m, warp_n = default_tiles(batch, m, n)
    return mma_matmul(name, dt, out, batch, m, n, k, (block_m, block_n, warp_m, warp_n), stages)


def mma_matmul(name: str, dt: DataType, out: DataType, batch: Size, m: Size, n: Size, k: Size,
               tile: tuple[int | None, ...], stages: int) -> ScriptModule:
    """The matmul module of `matmul_cuda_f16_mma` (f16 or bf16 `dt`) and `matmul_cuda_tf32` (f32 `dt`, rounded to
    tf32 in shared memory), named `name` in its errors; `tile` is (block_m, block_n, warp_m, warp_n)."""
    block_m, block_n, warp_m, warp_n = tile
    tf32 = dt.name == "float32"
    require(None not in (block_m, block_n, warp_m, warp_n), name,
            "give all four tile sizes (block_m, block_n, warp_m, warp_n) or none")
    assert block_m is not None and block_n is not None and warp_m is not None and warp_n is not None
    require(min(block_m, block_n, warp_m, warp_n) >= 1, name, "tile sizes must be positive")
    if tf32:
        require(warp_m % MMA_M == 0 and warp_n % MMA_N == 0, name,
                "warp_m must be a multiple of 16 and warp_n of 8 (whole mma tiles)")
    else:
        require(warp_m % MMA_M == 0 and warp_n % (2 * MMA_N) == 0, name,
                "warp_m and warp_n must be multiples of 16 (whole mma tiles; B fragments come in pairs)")
    require(block_m % warp_m == 0 and block_n % warp_n == 0, name, "warp tiles must divide the block tile")
    least = 32 if tf32 else 16  # a shared b row of at least 128 (tf32) or 32 bytes
    require(_power_of_two(block_m) and _power_of_two(block_n) and block_n >= least, name,
            f"block_m and block_n must be powers of two (block_n at least {least})")
    require(2 <= stages <= 8, name, "stages must be 2 to 8")
    warps_n = block_n // warp_n
    threads = 32 * (block_m // warp_m) * warps_n
    require(threads <= 1024, name, f"{threads} threads a block (at most 1024)")
    a_tile = chunk_tile(dt, [block_m, BLOCK_K])
    b_tile = tf32_b_tile([BLOCK_K, block_n]) if tf32 else chunk_tile(dt, [BLOCK_K, block_n])
    plan = SharedMemoryPlan()
    a_stages, b_stages = plan.tiles(a_tile, stages), plan.tiles(b_tile, stages)
    a_copy, b_copy = TileCopy(a_tile, threads), TileCopy(b_tile, threads)
    pipe = CopyPipeline(stages)
    warp = WarpMma(dt, warp_m, warp_n)
    frags = warp.accumulator
    # two blocks an SM (at most 128 registers a thread at 256 threads) where a warp's accumulators leave room; tf32's
    # B fragments, read element by element, need more registers than that cap leaves
    min_blocks = 2 if threads <= 256 and warp_m * warp_n <= 64 * 32 and not tf32 else 1
    vector = a_copy.vector  # elements of a 16-byte chunk
    # the epilogue's staging tiles, one a warp, over the stage buffers once the main loop is done with them
    staged = SharedMemoryPlan()
    staging = FragmentStaging(staged, frags, out, threads // 32)
    out_vector = staging.vector_elements
    smem_bytes = max(plan.nbytes, staged.nbytes)
    require(smem_bytes <= MAX_SMEM_BYTES, name,
            f"{smem_bytes} bytes of shared memory (at most {MAX_SMEM_BYTES // 1024} KB)")

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: dt[batch, m, k], b: dt[batch, k, n], c: out[batch, m, n]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            # one grid dimension (x allows 2**31 - 1 blocks; y and z only 65535, fewer than a batch may need)
            attrs.cuda.grid_dim = tile_blocks(m, n, block_m, block_n) * batch
            attrs.cuda.dynamic_smem_bytes = smem_bytes
            attrs.cuda.min_blocks = min_blocks
            lane = threadIdx.x % 32
            warp_id = threadIdx.x // 32
            acc = frags.tensor()
            ra = warp.a_registers()
            rb = warp.b_registers()
            for r in range(frags.registers):
                acc[r] = 0.0
            bi: i32 = 0  # the block's batch entry and tile: GROUP_M tile rows at a time, column by column
            m0: i32 = 0
            n0: i32 = 0
            block_tile(blockIdx.x, m, n, block_m, block_n, ~bi, ~m0, ~n0)
            wm = warp_id // warps_n * warp_m
            wn = warp_id % warps_n * warp_n
            steps = (k + BLOCK_K - 1) // BLOCK_K
            for it in range(pipe.iterations(steps)):  # copy step `it`, multiply step `it - stages + 1`
                pipe.landed()
                if tf32:
                    if pipe.reads(it):  # this thread's chunks of the step multiplied now, rounded in place
                        for row, chunk in a_copy.mapping.on(threadIdx.x):
                            a_copy.round_tf32(a_stages.at(pipe.read_stage(it)), row, chunk)
                        for row, chunk in b_copy.mapping.on(threadIdx.x):
                            b_copy.round_tf32(b_stages.at(pipe.read_stage(it)), row, chunk)
                syncthreads()  # ... for every thread, and every thread is done with the buffer refilled now
                if pipe.fills(it, steps):
                    for row, chunk in a_copy.mapping.on(threadIdx.x):
                        a_copy.copy(a_stages.at(pipe.fill_stage(it)), row, chunk, a, [bi, m0, it * BLOCK_K],
                                    k % vector == 0)
                    for row, chunk in b_copy.mapping.on(threadIdx.x):
                        b_copy.copy(b_stages.at(pipe.fill_stage(it)), row, chunk, b, [bi, it * BLOCK_K, n0],
                                    n % vector == 0)
                pipe.commit()
                if pipe.reads(it):
                    warp.multiply(acc, ra, rb, a_stages.at(pipe.read_stage(it)), b_stages.at(pipe.read_stage(it)),
                                  wm, wn, lane)
            syncthreads()  # every warp is done with the stage buffers: the staging tiles take them
            staging.stage(acc, warp_id, lane)
            held = register_tensor(out, [out_vector])
            for row, vec in staging.lanes.on(lane):
                copy_vector(~held[0], staging.vector(warp_id, row, vec), 16)
                i = m0 + wm + row
                j = n0 + wn + vec * out_vector
                if i < m:
                    if j + out_vector <= n and address_aligned(~c[bi, i, j], 16):
                        copy_vector(~c[bi, i, j], ~held[0], 16)
                    else:
                        for e in meta.range(out_vector):
                            if j + e < n:
                                c[bi, i, j + e] = held[e]

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})


def _power_of_two(x: int) -> bool:
    return x > 0 and x & (x - 1) == 0

