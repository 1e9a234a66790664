"""The register-blocked tile of the CUDA-core GEMM templates (`matmul_cuda`, `conv2d_cuda_gemm`): a block computes a
`block_m x block_n` tile with `(block_m / thread_m) x (block_n / thread_n)` threads, a thread `thread_m` consecutive
rows and `thread_n` columns in groups of `CHUNK` spread over the tile (column `p * group_stride + CHUNK * tx + c` of
its group `p`), so that a warp's reads of a row of the shared tile are consecutive 16-byte words."""

from __future__ import annotations

from stdlib_ops.templates.params import require

CHUNK = 4
"""f32 elements of a 16-byte copy chunk or shared read."""


def register_tile(name: str, block_m: int, block_n: int, thread_m: int, thread_n: int, block_k: int, stages: int,
                  chunked: dict[str, int]) -> tuple[int, int, int, int]:
    """`(threads_n, threads, groups_n, group_stride)` of a register-blocked tile: its threads along n, its threads,
    a thread's groups of `CHUNK` columns and the distance between them; after checking the tile (ScheduleError
    naming the template `name`): positive sizes, thread tiles that divide the block tile, the sizes of `chunked`
    (by name) multiples of `CHUNK`, 2 to 8 `stages` and whole warps, at most 1024 threads."""
    require(min(block_m, block_n, thread_m, thread_n, block_k) >= 1, name, "tile sizes must be positive")
    require(block_m % thread_m == 0 and block_n % thread_n == 0, name, "thread tiles must divide the block tile")
    require(all(size % CHUNK == 0 for size in chunked.values()), name,
            f"{' and '.join(chunked)} must be multiples of {CHUNK}")
    require(2 <= stages <= 8, name, "stages must be 2 to 8")
    threads_n = block_n // thread_n
    threads = (block_m // thread_m) * threads_n
    require(32 <= threads <= 1024 and threads % 32 == 0, name, f"{threads} threads a block (need 32..1024, whole "
            "warps)")
    groups_n = thread_n // CHUNK
    return threads_n, threads, groups_n, block_n // groups_n
