"""A CUDA template for softmax and log-softmax over a leading or middle axis, seen as the view `[outer, extent, inner]`
(the normalized axis in the middle), and the registration of softmax on CUDA along any axis.

A block takes one `outer` index and `COLUMNS` consecutive `inner` positions: a warp's lanes read `COLUMNS`
consecutive values of one row (coalesced), the block's warps take rows `w, w + warps, ...`. Each column's maximum,
then its sum of `exp(x - max)`, are the warps' partial results met in shared memory (`block_reduce.column_reducer`).
Where a thread's values of its column fit `MAX_CACHED` registers (`extent <= MAX_CACHED * warps`, checked at run
time), it reads them once and keeps their exponentials for the output (each computed once); a longer column is read
again each pass and its exponentials computed again for the output. Arithmetic is in f32 whatever the storage dtype;
inputs are only read element by element and the output only stored element by element (the fusion contract). Softmax
over the last axis goes to the row template (`normalization_cuda`).
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, i32, meta, register_tensor, script, script_module
from hidet_lang.cuda import shared_tensor
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype, shape_of
from stdlib_ops.templates.kernels.block_reduce import (
    COLUMNS,
    column_blocks,
    column_position,
    column_reducer,
    require_warps,
)
from stdlib_ops.templates.kernels.normalization_cuda import CUDA_ROWS, MAX_CACHED, NORMALIZATION_DTYPES
from stdlib_ops.templates.kernels.row_views import softmax_rows
from stdlib_ops.templates.params import Size, check_sizes, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.views import View, product, unravel


def softmax_columns_cuda(outer: Size, extent: Size, inner: Size, dtype: str = "float32", *, log: bool = False,
                         threads: int = 256) -> ScriptModule:
    """A module with one kernel `softmax_columns(<symbolic sizes>, x, y)`: softmax (or, with `log`, log-softmax) of
    `x[o, :, j]` into `y[o, :, j]`.

    `x, y: dtype[outer, extent, inner]`; each size is an int or a symbolic name."""
    name = "softmax_columns_cuda"
    check_sizes(name, {"outer": outer, "extent": extent, "inner": inner})
    warps = require_warps(name, threads)
    dt = template_dtype(name, dtype, NORMALIZATION_DTYPES)
    column_max, column_sum = column_reducer(threads, "max"), column_reducer(threads, "sum")

    with script_module() as module:

        @script
        def softmax_columns(outer: i32, extent: i32, inner: i32, x: dt[outer, extent, inner],
                            y: dt[outer, extent, inner]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = column_blocks(outer, inner)
            o, j, warp, lane = column_position(inner)
            partials = shared_tensor(f32, [warps, COLUMNS])
            if extent <= MAX_CACHED * warps:  # the thread's values of its column fit the registers: exp once each
                v = register_tensor(f32, [MAX_CACHED])
                local_max: f32 = -math.inf
                for i in meta.range(MAX_CACHED):
                    v[i] = -math.inf
                    if j < inner and warp + i * warps < extent:
                        v[i] = f32(x[o, warp + i * warps, j])
                    local_max = max(local_max, v[i])
                top = column_max(partials, warp, lane, local_max)
                local_sum: f32 = 0.0
                for i in meta.range(MAX_CACHED):
                    if log:
                        local_sum += math.exp(v[i] - top)  # exp(-inf) = 0 past the column's end
                    else:
                        v[i] = math.exp(v[i] - top)
                        local_sum += v[i]
                total = column_sum(partials, warp, lane, local_sum)
                log_total = math.log(total)
                scale = 1.0 / total
                for i in meta.range(MAX_CACHED):
                    if j < inner and warp + i * warps < extent:
                        if log:
                            y[o, warp + i * warps, j] = dt(v[i] - top - log_total)
                        else:
                            y[o, warp + i * warps, j] = dt(v[i] * scale)
            else:  # a long column: read again each pass
                local_max: f32 = -math.inf
                if j < inner:
                    for k in range(warp, extent, warps):
                        local_max = max(local_max, f32(x[o, k, j]))
                top = column_max(partials, warp, lane, local_max)
                local_sum: f32 = 0.0
                if j < inner:
                    for k in range(warp, extent, warps):
                        local_sum += math.exp(f32(x[o, k, j]) - top)
                log_total = math.log(column_sum(partials, warp, lane, local_sum))
                if j < inner:
                    for k in range(warp, extent, warps):
                        if log:
                            y[o, k, j] = dt(f32(x[o, k, j]) - top - log_total)
                        else:
                            y[o, k, j] = dt(math.exp(f32(x[o, k, j]) - top - log_total))

    return bind_sizes(module, "softmax_columns", {"outer": outer, "extent": extent, "inner": inner})


def softmax_on_cuda(task: Task) -> TemplateBinding | None:
    """Softmax or log-softmax along any axis: the row template for the last axis, the columns template otherwise."""
    rows = softmax_rows(task, CUDA_ROWS)
    if rows is not None:
        return rows
    dtype = common_dtype(task, NORMALIZATION_DTYPES)
    axis = task.attrs.get("axis")
    if dtype is None or not isinstance(axis, int) or len(task.inputs) != 1 or len(task.outputs) != 1:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    x, out = task.inputs[0], signature.outputs[0]
    shape = shape_of(x)
    lead, middle, trail = shape[:axis], shape[axis:axis + 1], shape[axis + 1:]

    def index(i: tuple) -> tuple:
        return (*unravel(i[0], lead), *unravel(i[1], middle), *unravel(i[2], trail))

    sizes = {"outer": product(lead), "extent": product(middle), "inner": product(trail)}
    views = [View(x, index), View(out, index)]
    return TemplateBinding("softmax_columns_cuda", softmax_columns_cuda, signature, sizes, views,
                           {"dtype": dtype, "log": task.name == "log_softmax"})


for _name in ("softmax", "log_softmax"):
    library_template(_name, LIBRARY_CUDA)(softmax_on_cuda)
del _name
