"""Sums, extrema and arg-extrema over the threads of a warp and of a block, as `cuda_internal` script functions.

`block_reducers(threads)` gives `(warp_sum, warp_max, block_sum, block_max)` for blocks of `threads` threads (a
multiple of 32, at most 1024). The warp functions combine the 32 lanes' values with `shfl_xor_sync` (a butterfly:
every lane ends with the result). The block functions reduce each warp, publish one partial per warp in shared
memory, and let every thread combine the partials in the same order, so every thread returns the same value;
they end with a barrier, so consecutive calls may reuse the shared partials. Every thread of the block must call
them (they contain barriers). `extremum_reducers` gives maxima and minima that are NaN where a value is (numpy's
`max`), and `arg_reducers` the index of the largest or smallest value (numpy's `argmax` and `argmin`).
`column_blocks`, `column_position` and `column_reducer` give the column templates (`reduction_cuda`,
`softmax_columns_cuda`) their grid, each thread's place, and the meeting of the warps' values of a column. Every
reduction folds values with one `combiner`, which a thread's own loop over its values may call too.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from hidet_lang import attrs, f32, i32, meta, script
from hidet_lang.cuda import FULL_MASK, blockIdx, shared_tensor, shfl_xor_sync, syncthreads, threadIdx
from hidet_lang.frontend.script import ScriptFunction
from stdlib_ops.templates.params import require

WARP = 32
BUTTERFLY = (16, 8, 4, 2, 1)
COMBINED = ("sum", "max", "nan_max", "nan_min")
"""The operations a reduction combines values with (`combiner`)."""
COLUMNS = 32
"""The inner positions a block of a column template takes (`column_reducer`): one warp's consecutive reads."""


def require_warps(template: str, threads: int) -> int:
    """The warps of a block of `threads` threads, which `template` needs to be whole warps, at most 1024 threads."""
    require(threads % WARP == 0 and WARP <= threads <= 1024, template,
            f"{threads} threads a block (need whole warps, at most 1024)")
    return threads // WARP


def block_reducers(threads: int) -> tuple[ScriptFunction, ScriptFunction, ScriptFunction, ScriptFunction]:
    """`warp_sum, warp_max, block_sum, block_max` for blocks of `threads` threads."""
    warp_sum, block_sum = _reducers("block_reducers", threads, "sum")
    warp_max, block_max = _reducers("block_reducers", threads, "max")
    return warp_sum, warp_max, block_sum, block_max


def extremum_reducers(threads: int, kind: str) -> tuple[ScriptFunction, ScriptFunction]:
    """`warp_<kind>, block_<kind>` ('max' or 'min') for blocks of `threads` threads, giving NaN where any thread's
    value is NaN (numpy's `max`): a value combines with another only while it is a number."""
    require(kind in ("max", "min"), "extremum_reducers", f"kind {kind!r} (max or min)")
    return _reducers("extremum_reducers", threads, f"nan_{kind}")


def _reducers(template: str, threads: int, op: str) -> tuple[ScriptFunction, ScriptFunction]:
    """`warp_<op>, block_<op>` for blocks of `threads` threads, folding values with `combiner(op)`."""
    warps = require_warps(template, threads)
    combine = combiner(op)
    warp_name, block_name = f"warp_{op}", f"block_{op}"

    @script
    def warp_reduce(value: f32) -> f32:
        attrs.func_name = warp_name
        attrs.func_kind = "cuda_internal"
        acc = value
        for delta in meta.each(BUTTERFLY):
            acc = combine(acc, shfl_xor_sync(FULL_MASK, acc, delta))
        return acc

    @script
    def block_reduce(value: f32) -> f32:
        attrs.func_name = block_name
        attrs.func_kind = "cuda_internal"
        partials = shared_tensor(f32, [warps])
        partial = warp_reduce(value)
        if threadIdx.x % WARP == 0:
            partials[threadIdx.x // WARP] = partial
        syncthreads()
        acc = partials[0]
        for w in range(1, warps):
            acc = combine(acc, partials[w])
        syncthreads()
        return acc

    return warp_reduce, block_reduce


def column_blocks(outer: Any, inner: Any) -> Any:
    """The grid of a column template over `[outer, extent, inner]`: a block for each `outer` index and each strip of
    `COLUMNS` `inner` positions (the sizes ints or IR expressions)."""
    return outer * ((inner + COLUMNS - 1) // COLUMNS)


def column_position(inner: Any) -> tuple[Any, Any, Any, Any]:
    """`o, j, warp, lane` of the running thread of a column template's block (IR, while the kernel is parsed): the
    block's `outer` index, the thread's `inner` position `j` (lane `lane` of its strip of `COLUMNS`), and its warp,
    which takes rows `warp, warp + warps, ...` of the column."""
    strips = (inner + COLUMNS - 1) // COLUMNS
    lane = threadIdx.x % WARP
    return blockIdx.x // strips, blockIdx.x % strips * COLUMNS + lane, threadIdx.x // WARP, lane


def column_reducer(threads: int, op: str) -> ScriptFunction:
    """`column_<op>(partials, warp, lane, value)` for the column templates' blocks of `threads` threads, whose warp
    `warp` holds `value` of column `lane` (of `COLUMNS`): the warps' values of the column folded with `combiner(op)`
    in the order of the warps, met in `partials` (shared, `f32[warps, COLUMNS]`). Every thread of the block calls it
    (it has barriers), and the partials are free again when it returns."""
    warps = require_warps("column_reducer", threads)
    combine = combiner(op)
    name = f"column_{op}"

    @script
    def column_reduce(partials: f32[warps, COLUMNS], warp: i32, lane: i32, value: f32) -> f32:
        attrs.func_name = name
        attrs.func_kind = "cuda_internal"
        partials[warp, lane] = value
        syncthreads()
        acc = partials[0, lane]
        for w in range(1, warps):
            acc = combine(acc, partials[w, lane])
        syncthreads()
        return acc

    return column_reduce


@cache
def combiner(op: str) -> ScriptFunction:
    """The `cuda_internal` function `combine_<op>(acc, value)` that a reduction folds each value into its result with:
    the sum ('sum'), the larger ('max'), or the larger or smaller while `acc` is a number and `acc` once it is NaN
    ('nan_max', 'nan_min': numpy's `max` and `min`). One function an operation, whatever calls it, so that a module
    holds it once."""
    require(op in COMBINED, "combiner", f"operation {op!r} (one of {', '.join(COMBINED)})")
    name = f"combine_{op}"
    total, is_max, keep_nan = op == "sum", op.endswith("max"), op.startswith("nan_")

    @script
    def combine(acc: f32, value: f32) -> f32:
        attrs.func_name = name
        attrs.func_kind = "cuda_internal"
        if total:
            return acc + value
        else:
            best = max(acc, value) if is_max else min(acc, value)
            return best if not keep_nan or acc == acc else acc

    return combine


def arg_reducers(threads: int, kind: str) -> tuple[ScriptFunction, ScriptFunction, ScriptFunction]:
    """`better, warp_arg, block_arg` for an argmax (`kind` 'max') or argmin over blocks of `threads` threads.

    A candidate is a value and its index. `better(v, i, best, index)` says whether candidate (v, i) replaces
    (best, index) under numpy's rule: the first NaN wins, else the largest (smallest) value, the first index among
    equal ones. `warp_arg(value, index)` and `block_arg(value, index)` return the winning index of the warp's or
    the block's candidates (every thread gets it); a thread with no candidate passes the identity value (-inf for
    an argmax) and an index past every real one."""
    require(kind in ("max", "min"), "arg_reducers", f"kind {kind!r} (max or min)")
    warps = require_warps("arg_reducers", threads)
    is_max = kind == "max"
    better_name, warp_arg_name, block_arg_name = f"arg{kind}_better", f"warp_arg{kind}", f"block_arg{kind}"
    warp_candidate_name = f"warp_arg{kind}_candidate"

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
    def warp_candidate(best: ~f32, at: ~i32):
        attrs.func_name = warp_candidate_name
        attrs.func_kind = "cuda_internal"
        for delta in meta.each(BUTTERFLY):
            other = shfl_xor_sync(FULL_MASK, best[0], delta)
            other_at = shfl_xor_sync(FULL_MASK, at[0], delta)
            if better(other, other_at, best[0], at[0]):
                best[0] = other
                at[0] = other_at

    @script
    def warp_arg(value: f32, index: i32) -> i32:
        attrs.func_name = warp_arg_name
        attrs.func_kind = "cuda_internal"
        best = value
        at = index
        warp_candidate(~best, ~at)
        return at

    @script
    def block_arg(value: f32, index: i32) -> i32:
        attrs.func_name = block_arg_name
        attrs.func_kind = "cuda_internal"
        values = shared_tensor(f32, [warps])
        indices = shared_tensor(i32, [warps])
        best = value
        at = index
        warp_candidate(~best, ~at)
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
