"""Sums, extrema and arg-extrema over the threads of a warp and of a block, as `cuda_internal` script functions.

`block_reducers(threads)` gives `(warp_sum, warp_max, block_sum, block_max)` for blocks of `threads` threads (a
multiple of 32, at most 1024). The warp functions combine the 32 lanes' values with `shfl_xor_sync` (a butterfly:
every lane ends with the result). The block functions reduce each warp, publish one partial per warp in shared
memory, and let every thread combine the partials in the same order, so every thread returns the same value;
they end with a barrier, so consecutive calls may reuse the shared partials. Every thread of the block must call
them (they contain barriers). `extremum_reducers` gives maxima and minima that are NaN where a value is (numpy's
`max`), and `arg_reducers` the index of the largest or smallest value (numpy's `argmax` and `argmin`).
"""

from __future__ import annotations

from hidet_lang import attrs, f32, i32, meta, script
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


def extremum_reducers(threads: int, kind: str) -> tuple[ScriptFunction, ScriptFunction]:
    """`warp_<kind>, block_<kind>` ('max' or 'min') for blocks of `threads` threads, giving NaN where any thread's
    value is NaN (numpy's `max`): a value combines with another only while it is a number."""
    require(kind in ("max", "min"), "extremum_reducers", f"kind {kind!r} (max or min)")
    require(threads % WARP == 0 and WARP <= threads <= 1024, "extremum_reducers",
            f"{threads} threads a block (need whole warps, at most 1024)")
    warps = threads // WARP
    is_max = kind == "max"
    warp_name, block_name = f"warp_nan_{kind}", f"block_nan_{kind}"

    @script
    def warp_extremum(value: f32) -> f32:
        attrs.func_name = warp_name
        attrs.func_kind = "cuda_internal"
        best = value
        for delta in meta.each(BUTTERFLY):
            other = shfl_xor_sync(FULL_MASK, best, delta)
            if best == best:
                best = max(best, other) if is_max else min(best, other)
        return best

    @script
    def block_extremum(value: f32) -> f32:
        attrs.func_name = block_name
        attrs.func_kind = "cuda_internal"
        partials = shared_tensor(f32, [warps])
        partial = warp_extremum(value)
        if threadIdx.x % WARP == 0:
            partials[threadIdx.x // WARP] = partial
        syncthreads()
        best = partials[0]
        for w in range(1, warps):
            if best == best:
                best = max(best, partials[w]) if is_max else min(best, partials[w])
        syncthreads()
        return best

    return warp_extremum, block_extremum


def arg_reducers(threads: int, kind: str) -> tuple[ScriptFunction, ScriptFunction, ScriptFunction]:
    """`better, warp_arg, block_arg` for an argmax (`kind` 'max') or argmin over blocks of `threads` threads.

    A candidate is a value and its index. `better(v, i, best, index)` says whether candidate (v, i) replaces
    (best, index) under numpy's rule: the first NaN wins, else the largest (smallest) value, the first index among
    equal ones. `warp_arg(value, index)` and `block_arg(value, index)` return the winning index of the warp's or
    the block's candidates (every thread gets it); a thread with no candidate passes the identity value (-inf for
    an argmax) and an index past every real one."""
    require(kind in ("max", "min"), "arg_reducers", f"kind {kind!r} (max or min)")
    warps = threads // WARP
    is_max = kind == "max"
    better_name, warp_arg_name, block_arg_name = f"arg{kind}_better", f"warp_arg{kind}", f"block_arg{kind}"

    @script
    def better(v: f32, i: i32, best: f32, index: i32) -> bool:
        attrs.func_name = better_name
        attrs.func_kind = "cuda_internal"
        if best != best:
            return v != v and i < index
        if v != v:
            return True
        if v == best:
            return i < index
        return v > best if is_max else v < best

    @script
    def warp_arg(value: f32, index: i32) -> i32:
        attrs.func_name = warp_arg_name
        attrs.func_kind = "cuda_internal"
        best = value
        at = index
        for delta in meta.each(BUTTERFLY):
            other = shfl_xor_sync(FULL_MASK, best, delta)
            other_at = shfl_xor_sync(FULL_MASK, at, delta)
            if better(other, other_at, best, at):
                best = other
                at = other_at
        return at

    @script
    def block_arg(value: f32, index: i32) -> i32:
        attrs.func_name = block_arg_name
        attrs.func_kind = "cuda_internal"
        values = shared_tensor(f32, [warps])
        indices = shared_tensor(i32, [warps])
        best = value
        at = index
        for delta in meta.each(BUTTERFLY):
            other = shfl_xor_sync(FULL_MASK, best, delta)
            other_at = shfl_xor_sync(FULL_MASK, at, delta)
            if better(other, other_at, best, at):
                best = other
                at = other_at
        if threadIdx.x % WARP == 0:
            values[threadIdx.x // WARP] = best
            indices[threadIdx.x // WARP] = at
        syncthreads()
        best = values[0]
        at = indices[0]
        for w in range(1, warps):
            if better(values[w], indices[w], best, at):
                best = values[w]
                at = indices[w]
        syncthreads()
        return at

    return better, warp_arg, block_arg
