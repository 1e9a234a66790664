"""Sums and maxima over the threads of a warp and of a block, as `cuda_internal` script functions.

`block_reducers(threads)` gives `(warp_sum, warp_max, block_sum, block_max)` for blocks of `threads` threads (a
multiple of 32, at most 1024). The warp functions combine the 32 lanes' values with `shfl_xor_sync` (a butterfly:
every lane ends with the result). The block functions reduce each warp, publish one partial per warp in shared
memory, and let every thread combine the partials in the same order, so every thread returns the same value;
they end with a barrier, so consecutive calls may reuse the shared partials. Every thread of the block must call
them (they contain barriers).
"""

from __future__ import annotations

from hidet_lang import attrs, f32, meta, script
from hidet_lang.cuda import FULL_MASK, shared_tensor, shfl_xor_sync, syncthreads, threadIdx
from hidet_lang.frontend.script import ScriptFunction
from stdlib_ops.templates.params import require

WARP = 32
BUTTERFLY = (16, 8, 4, 2, 1)


def block_reducers(threads: int) -> tuple[ScriptFunction, ScriptFunction, ScriptFunction, ScriptFunction]:
    """`warp_sum, warp_max, block_sum, block_max` for blocks of `threads` threads."""
    require(threads % WARP == 0 and WARP <= threads <= 1024, "block_reducers",
            f"{threads} threads a block (need whole warps, at most 1024)")
    warps = threads // WARP

    @script
    def warp_sum(value: f32) -> f32:
        attrs.func_kind = "cuda_internal"
        total = value
        for delta in meta.each(BUTTERFLY):
            total += shfl_xor_sync(FULL_MASK, total, delta)
        return total

    @script
    def warp_max(value: f32) -> f32:
        attrs.func_kind = "cuda_internal"
        best = value
        for delta in meta.each(BUTTERFLY):
            best = max(best, shfl_xor_sync(FULL_MASK, best, delta))
        return best

    @script
    def block_sum(value: f32) -> f32:
        attrs.func_kind = "cuda_internal"
        partials = shared_tensor(f32, [warps])
        partial = warp_sum(value)
        if threadIdx.x % WARP == 0:
            partials[threadIdx.x // WARP] = partial
        syncthreads()
        total: f32 = 0.0
        for w in range(warps):
            total += partials[w]
        syncthreads()
        return total

    @script
    def block_max(value: f32) -> f32:
        attrs.func_kind = "cuda_internal"
        partials = shared_tensor(f32, [warps])
        partial = warp_max(value)
        if threadIdx.x % WARP == 0:
            partials[threadIdx.x // WARP] = partial
        syncthreads()
        best = partials[0]
        for w in range(1, warps):
            best = max(best, partials[w])
        syncthreads()
        return best

    return warp_sum, warp_max, block_sum, block_max
