"""The batched matmul template for the CUDA cores, on the tile layer: shared-memory block tiles copied by
`async_copy.TileCopy` (16-byte `cp_async` copies) through a `CopyPipeline` of shared buffers, and a register tile a
thread indexed only by constants.

`c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]`, accumulated in f32 with fused multiply-adds.

- **Block tiles.** A block computes a `block_m x block_n` tile of one batch entry; its threads form a
  `(block_m / thread_m) x (block_n / thread_n)` grid. Blocks go over the tiles in groups of `GROUP_M` tile rows
  (`tile_order`: a group's blocks share their rows of `a` and columns of `b` in L2), batch entries outermost.
- **Copies.** Along k, steps of `block_k`: the tiles of `a` (`block_m x block_k`, rows as they are in memory) and
  `b` (`block_k x block_n`), row-major `tiles.padded_tile`s without padding in the kernel's `SharedMemoryPlan`, are
  copied into one of `stages` shared buffers in chunks of 4 elements by `TileCopy`, whose task mapping puts
  consecutive threads on consecutive chunks. Where the row length is a multiple of 4 (so that a chunk's address is
  16-byte aligned), a chunk inside the matrix is one 16-byte `cp_async` (`LDGSTS.128`, no registers on the way),
  zeros outside; otherwise (and for f16 and bf16 operands) a chunk is 4 element reads, each predicated, zeros
  outside the matrices. The `CopyPipeline` issues the copy of step s + stages - 1 before step s is multiplied.
- **Register tile.** A thread owns `thread_m` consecutive rows and `thread_n` columns in groups of 4 spread over
  the tile (column `g * block_n / (thread_n / 4) + 4 * tx + c`), so that a warp's reads of a row of `b` are
  consecutive 16-byte words. For every 4 steps of k it reads 4 values along k of each of its rows of `a` and,
  per step, its `thread_n` values of `b`: each group of 4 is one 16-byte aligned shared read (`LDS.128`), and
  the `thread_m x thread_n` accumulators, the rows of `a` and the row of `b` are register tensors indexed only by
  constants (`meta.range`), so the compiler keeps them in registers (no local memory).
- **Occupancy.** `min_blocks = 2` (launch bounds): at most 128 registers for 256 threads, so two blocks share an
  SM and hide each other's waits at the barriers.
- **Output.** The accumulators are stored into `c` element by element where they fall inside it, which is where a
  fused epilogue lands. f16 and bf16 operands go through the element reads (converted to f32).

The kernel follows the kernel contract: `a` and `b` are only read element by element or as the source of a
`cp_async` (a fused prologue turns those into element reads), `c` is only stored element by element.
`MATMUL_CUDA_SPACE` is what `ops.tune` searches; its default point chooses the tiles by the problem's size
(`default_tiles`): the largest tiles that still give the GPU enough blocks.
"""

from __future__ import annotations

from hidet_lang import attrs, f32, i32, meta, option, register_tensor, script, script_module
from hidet_lang.cuda import blockIdx, threadIdx
from hidet_lang.cuda.async_copy import CopyPipeline, TileCopy
from hidet_lang.cuda.tiles import SharedMemoryPlan, padded_tile
from hidet_lang.cuda_limits import MAX_STATIC_SHARED_BYTES
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import matmul_cuda_f16_mma
from stdlib_ops.templates.kernels.matmul_cuda_sm90 import hopper_binding
from stdlib_ops.templates.kernels.matmul_cuda_tf32 import matmul_cuda_tf32
from stdlib_ops.templates.kernels.matmul_views import matmul_views
from stdlib_ops.templates.kernels.register_tile import CHUNK, register_tile
from stdlib_ops.templates.kernels.tile_order import block_tile, tile_blocks
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype, tile_for_blocks
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.space import TuningSpace, consistent_tiles, declare_space

MATMUL_CUDA_DTYPES = ("float32", "float16", "bfloat16")
MAX_SMEM_BYTES = MAX_STATIC_SHARED_BYTES  # shared memory a block may have without opting into more

TILES = ((128, 128, 8, 8), (64, 64, 4, 4), (32, 32, 4, 4))
"""The tiles `default_tiles` chooses from, largest first: (block_m, block_n, thread_m, thread_n)."""

ENOUGH_BLOCKS = 132
"""Blocks that keep a large GPU busy (one for each of an H200's 132 SMs; the smaller tiles fit several blocks on
an SM): the largest tile that gives this many is taken."""


def default_tiles(batch: Size, m: Size, n: Size) -> tuple[int, int, int, int]:
    """The tile (block_m, block_n, thread_m, thread_n) for a product of these sizes: the largest of `TILES` that
    gives `ENOUGH_BLOCKS` blocks (the smallest when none does); the largest when a size is symbolic."""
    return tile_for_blocks(TILES, batch, m, n, ENOUGH_BLOCKS)


MATMUL_CUDA_SPACE = TuningSpace(
    {"block_m": (None, 128, 64, 32), "block_n": (None, 128, 64, 32), "thread_m": (None, 8, 4),
     "thread_n": (None, 8, 4), "block_k": (8, 16), "stages": (2, 3)},
    default={"block_m": None, "block_n": None, "thread_m": None, "thread_n": None, "block_k": 8, "stages": 2},
    constraint=consistent_tiles(("block_m", "block_n"), ("thread_m", "thread_n"), range(64, 257)),  # threads
)
"""The tuning space (`ops.tune`): the block and thread tiles (None for all four: chosen by the problem's size,
`default_tiles`), the k step and the number of shared buffers."""


@declare_space(MATMUL_CUDA_SPACE)
def matmul_cuda(batch: Size, m: Size, n: Size, k: Size, dtype: str = "float32", *, block_m: int | None = None,
                block_n: int | None = None, thread_m: int | None = None, thread_n: int | None = None,
                block_k: int = 8, stages: int = 2) -> ScriptModule:
    """A module with one kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` per batch entry.

    `a: dtype[batch, m, k]`, `b: dtype[batch, k, n]`, `c: dtype[batch, m, n]`; each size is an int or a symbolic
    name. A block has `(block_m / thread_m) * (block_n / thread_n)` threads; `thread_n` and `block_k` are multiples
    of 4. When the four tile sizes are None, `default_tiles` chooses them; `stages` shared buffers (2 or more)
    pipeline the copies."""
    name = "matmul_cuda"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    dt = template_dtype(name, dtype, MATMUL_CUDA_DTYPES)
    if block_m is None and block_n is None and thread_m is None and thread_n is None:
        block_m, block_n, thread_m, thread_n = default_tiles(batch, m, n)
    require(None not in (block_m, block_n, thread_m, thread_n), name,
            "give all four tile sizes (block_m, block_n, thread_m, thread_n) or none")
    assert block_m is not None and block_n is not None and thread_m is not None and thread_n is not None
    # the columns of a thread: g * group_stride + CHUNK * tx + c
    threads_n, threads, groups_n, group_stride = register_tile(
        name, block_m, block_n, thread_m, thread_n, block_k, stages, {"thread_n": thread_n, "block_k": block_k})
    a_tile, b_tile = padded_tile(f32, [block_m, block_k], 0), padded_tile(f32, [block_k, block_n], 0)
    plan = SharedMemoryPlan()
    a_stages, b_stages = plan.tiles(a_tile, stages), plan.tiles(b_tile, stages)
    require(plan.nbytes <= MAX_SMEM_BYTES, name, f"{plan.nbytes} bytes of shared memory (at most 48 KB)")
    a_copy, b_copy = TileCopy(a_tile, threads), TileCopy(b_tile, threads)
    pipe = CopyPipeline(stages)

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: dt[batch, m, k], b: dt[batch, k, n], c: dt[batch, m, n]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.min_blocks = 2  # at most 128 registers for 256 threads: two blocks an SM hide each other's waits
            # one grid dimension (x allows 2**31 - 1 blocks; y and z only 65535, fewer than a batch may need)
            attrs.cuda.grid_dim = tile_blocks(m, n, block_m, block_n) * batch
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            acc = register_tensor(f32, [thread_m, thread_n])
            ra = register_tensor(f32, [thread_m, CHUNK])
            rb = register_tensor(f32, [thread_n])
            for i in meta.range(thread_m):
                for j in meta.range(thread_n):
                    acc[i, j] = 0.0
            bi: i32 = 0  # the block's batch entry and tile: GROUP_M tile rows at a time, column by column
            m0: i32 = 0
            n0: i32 = 0
            block_tile(blockIdx.x, m, n, block_m, block_n, ~bi, ~m0, ~n0)
            ty = threadIdx.x // threads_n
            tx = threadIdx.x % threads_n
            steps = (k + block_k - 1) // block_k
            for it in range(pipe.iterations(steps)):  # copy step `it`, multiply step `it - stages + 1`
                pipe.wait()
                if pipe.fills(it, steps):
                    a_fill = a_stages.at(pipe.fill_stage(it))
                    b_fill = b_stages.at(pipe.fill_stage(it))
                    for row, chunk in a_copy.mapping.on(threadIdx.x):
                        a_copy.copy(a_fill, row, chunk, a, [bi, m0, it * block_k], k % CHUNK == 0)
                    for row, chunk in b_copy.mapping.on(threadIdx.x):
                        b_copy.copy(b_fill, row, chunk, b, [bi, it * block_k, n0], n % CHUNK == 0)
                pipe.commit()
                if pipe.reads(it):
                    a_buf = a_stages.at(pipe.read_stage(it))
                    b_buf = b_stages.at(pipe.read_stage(it))
                    for kg in meta.range(block_k // CHUNK):
                        for i in meta.range(thread_m):
                            for e in meta.range(CHUNK):
                                ra[i, e] = a_buf[ty * thread_m + i, kg * CHUNK + e]
                        for e in meta.range(CHUNK):
                            for g in meta.range(groups_n):
                                for cc in meta.range(CHUNK):
                                    rb[g * CHUNK + cc] = b_buf[kg * CHUNK + e, g * group_stride + tx * CHUNK + cc]
                            for i in meta.range(thread_m):
                                for j in meta.range(thread_n):
                                    acc[i, j] += ra[i, e] * rb[j]
            for i in meta.range(thread_m):
                for g in meta.range(groups_n):
                    for cc in meta.range(CHUNK):
                        gi = m0 + ty * thread_m + i
                        gj = n0 + g * group_stride + tx * CHUNK + cc
                        if gi < m and gj < n:
                            c[bi, gi, gj] = dt(acc[i, g * CHUNK + cc])

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})


@library_template("matmul", LIBRARY_CUDA)
def matmul_on_cuda(task: Task) -> TemplateBinding | None:
    """The Hopper template (`matmul_cuda_sm90`) for f16 and bf16 operands on sm_90a where TMA can read them, else
    the tensor-core template (`matmul_cuda_f16_mma`); for f32 ones the TF32 tensor-core template
    (`matmul_cuda_tf32`) where `hidet.option.allow_tf32()` allows it, else this CUDA-core template."""
    signature = kernel_signature(task.inputs, task.outputs)
    shapes = matmul_views(task, signature)
    dtype = common_dtype(task, MATMUL_CUDA_DTYPES)
    if shapes is None or dtype is None:
        return None
    sizes, views = shapes
    if dtype in ("float16", "bfloat16"):
        tensor_cores = TemplateBinding("matmul_cuda_f16_mma", matmul_cuda_f16_mma, signature, sizes, views,
                                       {"out_dtype": dtype})
        return hopper_binding(task, signature, sizes, views, dtype, tensor_cores)
    if dtype == "float32" and option.allow_tf32():
        return TemplateBinding("matmul_cuda_tf32", matmul_cuda_tf32, signature, sizes, views)
    return TemplateBinding("matmul_cuda", matmul_cuda, signature, sizes, views, {"dtype": dtype})
