"""The batched matmul template for CUDA: shared-memory block tiles, double-buffered with `cp_async`.

`c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]`, accumulated in f32. Each block computes a `block_m x block_n`
tile of one batch entry. Along k, tiles of `a` (`block_m x block_k`) and `b` (`block_k x block_n`) are copied
into one of two shared buffers while the other is being multiplied: the copy of step s+1 is issued (as
`cp_async` of one element each for f32, as element loads converted to f32 otherwise) before the wait for step s.
Every thread accumulates a `thread_m x thread_n` patch of the tile in registers. Elements outside the matrices
are zeros in shared memory and never stored, so every shape is correct.

The kernel follows the kernel contract: `a` and `b` are only read element by element (or through `cp_async` of
one element's address), `c` is only stored element by element.
"""

from __future__ import annotations

from hidet_lang import attrs, auto_map, f32, i32, register_tensor, repeat, script, script_module, spatial
from hidet_lang.cuda import (
    blockIdx,
    cp_async,
    cp_async_commit_group,
    cp_async_wait_group,
    shared_tensor,
    syncthreads,
    threadIdx,
)
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import matmul_cuda_f16_mma
from stdlib_ops.templates.kernels.matmul_views import matmul_views
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import library_template
from stdlib_ops.templates.sizes import bind_sizes

MATMUL_CUDA_DTYPES = ("float32", "float16", "bfloat16")


def matmul_cuda(batch: Size, m: Size, n: Size, k: Size, dtype: str = "float32", *, block_m: int = 64,
                block_n: int = 64, block_k: int = 8, thread_m: int = 4, thread_n: int = 4) -> ScriptModule:
    """A module with one kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` per batch entry.

    `a: dtype[batch, m, k]`, `b: dtype[batch, k, n]`, `c: dtype[batch, m, n]`; each size is an int or a symbolic
    name. A block has `(block_m / thread_m) * (block_n / thread_n)` threads.
    """
    name = "matmul_cuda"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    dt = template_dtype(name, dtype, MATMUL_CUDA_DTYPES)
    require(block_m % thread_m == 0 and block_n % thread_n == 0, name, "thread tiles must divide the block tile")
    threads = (block_m // thread_m) * (block_n // thread_n)
    require(32 <= threads <= 1024 and threads % 32 == 0, name, f"{threads} threads a block (need 32..1024, whole "
            "warps)")
    smem_bytes = 2 * (block_m + block_n) * block_k * 4
    require(smem_bytes <= 48 * 1024, name, f"{smem_bytes} bytes of shared memory (at most 48 KB)")
    tile = spatial(block_m // thread_m, block_n // thread_n) * repeat(thread_m, thread_n)
    load_a = auto_map(block_m, block_k, workers=threads)
    load_b = auto_map(block_k, block_n, workers=threads)
    copy_async = dt.name == "float32"  # cp_async moves whole elements of 4, 8 or 16 bytes

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: dt[batch, m, k], b: dt[batch, k, n], c: dt[batch, m, n]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            # one grid dimension (x allows 2**31 - 1 blocks; y and z only 65535, fewer than a batch may need)
            attrs.cuda.grid_dim = (n + block_n - 1) // block_n * ((m + block_m - 1) // block_m) * batch
            smem_a = shared_tensor(f32, [2, block_m, block_k])
            smem_b = shared_tensor(f32, [2, block_k, block_n])
            acc = register_tensor(f32, [thread_m, thread_n])
            for i, j in repeat(thread_m, thread_n).on(0):
                acc[i, j] = 0.0
            tiles_n = (n + block_n - 1) // block_n
            tiles_m = (m + block_m - 1) // block_m
            bi = blockIdx.x // (tiles_n * tiles_m)
            m0 = blockIdx.x // tiles_n % tiles_m * block_m
            n0 = blockIdx.x % tiles_n * block_n
            steps = (k + block_k - 1) // block_k
            for step in range(steps + 1):
                if step < steps:  # issue the copy of step `step` into buffer step % 2
                    buf = step % 2
                    k0 = step * block_k
                    for i, kk in load_a.on(threadIdx.x):
                        if m0 + i < m and k0 + kk < k:
                            if copy_async:
                                cp_async(~smem_a[buf, i, kk], ~a[bi, m0 + i, k0 + kk], 4)
                            else:
                                smem_a[buf, i, kk] = f32(a[bi, m0 + i, k0 + kk])
                        else:
                            smem_a[buf, i, kk] = 0.0
                    for kk, j in load_b.on(threadIdx.x):
                        if k0 + kk < k and n0 + j < n:
                            if copy_async:
                                cp_async(~smem_b[buf, kk, j], ~b[bi, k0 + kk, n0 + j], 4)
                            else:
                                smem_b[buf, kk, j] = f32(b[bi, k0 + kk, n0 + j])
                        else:
                            smem_b[buf, kk, j] = 0.0
                cp_async_commit_group()
                if step > 0:  # multiply the tiles of step - 1 while the copy of step is in flight
                    cp_async_wait_group(1)
                    syncthreads()
                    prev = (step - 1) % 2
                    for kk in range(block_k):
                        for i, j in tile.on(threadIdx.x):
                            acc[i % thread_m, j % thread_n] += smem_a[prev, i, kk] * smem_b[prev, kk, j]
                    syncthreads()
            for i, j in tile.on(threadIdx.x):
                if m0 + i < m and n0 + j < n:
                    c[bi, m0 + i, n0 + j] = dt(acc[i % thread_m, j % thread_n])

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})


@library_template("matmul", "cuda")
def matmul_on_cuda(task: Task) -> TemplateBinding | None:
    """The tensor-core template (`matmul_cuda_f16_mma`) for f16 operands, this tiled cp_async template for f32 and
    bf16 ones."""
    signature = kernel_signature(task.inputs, task.outputs)
    shapes = matmul_views(task, signature)
    dtype = common_dtype(task, MATMUL_CUDA_DTYPES)
    if shapes is None or dtype is None:
        return None
    sizes, views = shapes
    if dtype == "float16":
        return TemplateBinding("matmul_cuda_f16_mma", matmul_cuda_f16_mma, signature, sizes, views,
                               {"out_dtype": dtype})
    return TemplateBinding("matmul_cuda", matmul_cuda, signature, sizes, views, {"dtype": dtype})
