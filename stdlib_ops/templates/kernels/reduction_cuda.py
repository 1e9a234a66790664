"""CUDA templates for reductions over a run of consecutive axes, seen as the view `[outer, extent, inner]` of the
input (the reduced axes in the middle) and `[outer, inner]` of the output: `sum`, `mean`, `max`, `min`, `var` and
`std` (with `ddof`), and `argmax` / `argmin` over one axis.

- **Rows** (`reduce_rows_cuda`, trailing axes: `inner` is 1). A row is shared by a warp (rows of at most
  `WARP_ROW_MAX_COLS` values known at build time; several rows a block) or by the whole block (longer rows);
  its threads read the row in chunks of one 16-byte vector each (`row_chunks`: 128-bit loads where the row is
  whole aligned vectors, element loads otherwise, in the same kernel), then combine their partial results
  with warp shuffles and, for a block, one partial a warp in shared memory (`block_reduce`). A variance takes the
  mean first, then the mean of squared deviations (two passes, no cancellation).
- **Columns** (`reduce_columns_cuda`, leading or middle axes: `inner` above 1). A block takes one `outer` index and
  `COLUMNS` consecutive `inner` positions: a warp's lanes read `COLUMNS` consecutive values of one row (coalesced),
  the block's warps take rows `w, w + warps, ...`, and the warps' partial results meet in shared memory
  (`block_reduce.column_reducer`).

Arithmetic is in f32 whatever the storage dtype. `max` and `min` are NaN where a reduced value is (numpy's `max`);
`argmax` and `argmin` give the first index of the largest (smallest) value, or of the first NaN, as numpy does. Both
kernels follow the fusion contract: the input is read by element reads or vector loads, the output stored element by
element.
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, i32, i64, meta, register_tensor, script, script_module
from hidet_lang.cuda import shared_tensor
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.types import DataType
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.kernels.block_reduce import (
    COLUMNS,
    WARP,
    arg_reducers,
    column_blocks,
    column_position,
    column_reducer,
    combiner,
    extremum_reducers,
    require_warps,
)
from stdlib_ops.templates.kernels.normalization_cuda import row_plan
from stdlib_ops.templates.kernels.reduction_views import reduction_views
from stdlib_ops.templates.kernels.row_views import whole_vectors
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.sizes import bind_sizes

REDUCTION_CUDA_DTYPES = ("float32", "float16", "bfloat16")
ROW_KINDS = ("sum", "mean", "max", "min", "var", "std", "argmax", "argmin")
COLUMN_KINDS = ("sum", "mean", "max", "min", "var", "std")
COMBINED = {"sum": "sum", "mean": "sum", "var": "sum", "std": "sum", "max": "nan_max", "min": "nan_min"}
"""How each kind but the arg ones combines values (`block_reduce.combiner`)."""
START = {"sum": 0.0, "mean": 0.0, "var": 0.0, "std": 0.0, "max": -math.inf, "min": math.inf, "argmax": -math.inf,
         "argmin": math.inf}
NO_INDEX = 2**31 - 1
"""The index of a thread that holds no candidate of an argmax: past every real one."""


def _check(template: str, kind: str, kinds: tuple[str, ...], dtype: str, sizes: dict[str, Size], ddof: int,
           threads: int) -> DataType:
    check_sizes(template, sizes)
    require(kind in kinds, template, f"kind {kind!r} (supported: {', '.join(kinds)})")
    require(ddof >= 0, template, f"ddof {ddof} (at least 0)")
    require_warps(template, threads)
    return template_dtype(template, dtype, REDUCTION_CUDA_DTYPES)


def reduce_rows_cuda(outer: Size, extent: Size, kind: str, dtype: str = "float32", *, ddof: int = 0,
                     threads: int = 256, vectors: bool = True) -> ScriptModule:
    """A module with one kernel `reduce(<symbolic sizes>, x, y)`: `y[o] = kind(x[o, :])`.

    `x: dtype[outer, extent]`, `y: dtype[outer]` (`int64[outer]` for argmax and argmin); each size is an int or a
    symbolic name; `ddof`: the variance's divisor is `extent - ddof`; `vectors`: whether rows may be read as 16-byte
    vectors (`row_chunks`)."""
    name = "reduce_rows_cuda"
    dt = _check(name, kind, ROW_KINDS, dtype, {"outer": outer, "extent": extent}, ddof, threads)
    out_dt = i64 if kind.startswith("arg") else dt
    plan = row_plan(dt, extent, threads, vectors)
    chunks, lanes, span, width = plan.chunks, plan.chunks.lanes, plan.span, plan.layout.width
    if kind in ("max", "min"):
        combine = combiner(COMBINED[kind])
        warp_ext, block_ext = extremum_reducers(threads, kind)
        row_ext = warp_ext if width == WARP else block_ext
    if kind.startswith("arg"):
        better, warp_arg, block_arg = arg_reducers(threads, kind[3:])
        row_arg = warp_arg if width == WARP else block_arg
    start = START[kind]

    with script_module() as module:

        @script
        def reduce(outer: i32, extent: i32, x: dt[outer, extent], y: out_dt[outer]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = plan.blocks(outer)
            row, lane = plan.row_and_lane()
            if row < outer:
                vector = chunks.vectors(extent, (~x[row, 0],))
                share = chunks.share(lane, extent, vector)
                streamed = (extent + span - 1) // span
                c = register_tensor(f32, [lanes])
                if kind in ("sum", "mean", "var", "std"):
                    local_sum: f32 = 0.0
                    for j in range(streamed):
                        share.load(c, 0, x, (row,), j, 0.0)
                        for k in meta.range(lanes):
                            local_sum += c[k]
                    total = plan.row_sum(local_sum)
                    if kind in ("var", "std"):
                        mean = total / f32(extent)
                        local_squares: f32 = 0.0
                        for j in range(streamed):
                            share.load(c, 0, x, (row,), j, mean)  # (mean - mean)^2 = 0 past the row's end
                            for k in meta.range(lanes):
                                local_squares += (c[k] - mean) * (c[k] - mean)
                        variance = plan.row_sum(local_squares) / f32(extent - ddof)
                        if lane == 0:
                            y[row] = dt(math.sqrt(variance) if kind == "std" else variance)
                    elif lane == 0:
                        y[row] = dt(total / f32(extent) if kind == "mean" else total)
                elif kind in ("max", "min"):
                    best: f32 = start
                    for j in range(streamed):
                        share.load(c, 0, x, (row,), j, start)
                        for k in meta.range(lanes):
                            best = combine(best, c[k])
                    top = row_ext(best)
                    if lane == 0:
                        y[row] = dt(top)
                else:
                    best: f32 = start
                    at: i32 = NO_INDEX
                    for j in range(streamed):
                        share.load(c, 0, x, (row,), j, start)
                        for k in meta.range(lanes):
                            if share.valid(j, k) and better(c[k], share.column(j, k), best, at):
                                best = c[k]
                                at = share.column(j, k)
                    winner = row_arg(best, at)
                    if lane == 0:
                        y[row] = i64(winner)

    return bind_sizes(module, "reduce", {"outer": outer, "extent": extent})


def reduce_columns_cuda(outer: Size, extent: Size, inner: Size, kind: str, dtype: str = "float32", *, ddof: int = 0,
                        threads: int = 256) -> ScriptModule:
    """A module with one kernel `reduce(<symbolic sizes>, x, y)`: `y[o, j] = kind(x[o, :, j])`.

    `x: dtype[outer, extent, inner]`, `y: dtype[outer, inner]`; each size is an int or a symbolic name."""
    name = "reduce_columns_cuda"
    dt = _check(name, kind, COLUMN_KINDS, dtype, {"outer": outer, "extent": extent, "inner": inner}, ddof, threads)
    warps = threads // WARP
    start = START[kind]
    combine = combiner(COMBINED[kind])
    column_total = column_reducer(threads, COMBINED[kind])

    with script_module() as module:

        @script
        def reduce(outer: i32, extent: i32, inner: i32, x: dt[outer, extent, inner], y: dt[outer, inner]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = column_blocks(outer, inner)
            o, j, warp, lane = column_position(inner)
            partials = shared_tensor(f32, [warps, COLUMNS])
            acc: f32 = start
            if j < inner:
                for k in range(warp, extent, warps):
                    acc = combine(acc, f32(x[o, k, j]))
            total = column_total(partials, warp, lane, acc)
            if kind in ("var", "std"):
                mean = total / f32(extent)
                squares: f32 = 0.0
                if j < inner:
                    for k in range(warp, extent, warps):
                        d = f32(x[o, k, j]) - mean
                        squares += d * d
                variance = column_total(partials, warp, lane, squares) / f32(extent - ddof)
                if warp == 0 and j < inner:
                    y[o, j] = dt(math.sqrt(variance) if kind == "std" else variance)
            elif warp == 0 and j < inner:
                y[o, j] = dt(total / f32(extent) if kind == "mean" else total)

    return bind_sizes(module, "reduce", {"outer": outer, "extent": extent, "inner": inner})


def reduction_on_cuda(task: Task) -> TemplateBinding | None:
    """A reduction (its kind: the task's name) over consecutive axes, as `[outer, extent, inner]`: the rows template
    when no axis follows the reduced ones, the columns template otherwise (not for argmax and argmin)."""
    arg = task.name in ("argmax", "argmin")
    axis = task.attrs.get("axis")
    views = reduction_views(task, ((axis,) if axis is not None else ()) if arg else task.attrs.get("axes") or ())
    if views is None:
        return None
    dtype = task.inputs[0].type.dtype.name
    if dtype not in REDUCTION_CUDA_DTYPES or (not arg and task.outputs[0].dtype.name != dtype):
        return None
    sizes = {"outer": views.outer, "extent": views.extent}
    options = {"kind": task.name, "dtype": dtype, "ddof": int(task.attrs.get("ddof", 0))}
    if isinstance(views.inner, int) and views.inner == 1:
        rows_options = {**options, "vectors": whole_vectors(views.middle, dtype)}
        return TemplateBinding("reduce_rows_cuda", reduce_rows_cuda, views.signature, sizes, views.rows, rows_options)
    if arg:
        return None
    return TemplateBinding("reduce_columns_cuda", reduce_columns_cuda, views.signature,
                           {**sizes, "inner": views.inner}, views.columns, options)


for _kind in ROW_KINDS:
    library_template(_kind, LIBRARY_CUDA)(reduction_on_cuda)
del _kind
