"""Row-wise CUDA templates over a 2-D view `[rows, cols]`: softmax, log-softmax, layer norm and RMS norm (the norms
with or without their weight and bias), and group norm's normalization (the layer norm template over its groups).

A row is shared by `width` threads (`row_layout`): a warp per row for short rows (several rows a block), the whole
block for long ones; the threads stride over the row's columns (thread `t` takes columns `t, t + width, ...`, so a
warp's reads are consecutive) and combine their partial maxima and sums with warp shuffles, or block reductions
(`block_reduce`: shuffles, then one partial per warp in shared memory). Where the number of columns is known at
build time, or at run time for symbolic columns (`row_layout`), and each thread's share is at most `MAX_CACHED`
values, the row is kept in registers: read once, written once, and softmax computes each exponential once (the
row keeps them, then scales them by the sum's reciprocal). Otherwise each pass reads the row again (from the
cache, mostly). Arithmetic is in f32 whatever the storage
dtype. Softmax subtracts the row's maximum before `exp` (no overflow); layer norm takes the variance as the mean of
squared deviations from the mean (two passes, no cancellation). Every kernel follows the kernel contract: inputs
are only read element by element, the output only stored element by element.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from hidet_lang import attrs, f32, i32, meta, register_tensor, rsqrt, script, script_module
from hidet_lang.cuda import blockIdx, threadIdx
from hidet_lang.frontend.script import ScriptFunction, ScriptModule
from hidet_lang.ir.types import DataType
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.kernels.block_reduce import WARP, block_reducers
from stdlib_ops.templates.kernels.row_views import RowTemplates, register_row_templates, rows_binding, trailing_axes
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.sizes import bind_sizes, drop_params

NORMALIZATION_DTYPES = ("float32", "float16", "bfloat16")
MAX_CACHED = 32
"""The most row values a thread keeps in registers (more would spill)."""
WARP_ROW_MAX_COLS = 1024
"""The longest rows (columns known at build time) that one warp handles alone."""


BLOCK_SIZES = (128, 256, 512, 1024)
"""The block sizes a row template picks from where none is given."""


@dataclass(frozen=True)
class RowLayout:
    """How a block's `threads` threads share rows: `width` threads a row (a warp or the block), `rows_per_block`
    rows, each thread keeping `cached` values of its row in registers (0: none; each pass reads the row)."""

    threads: int
    width: int
    rows_per_block: int
    cached: int


def row_layout(cols: Size, threads: int | None = None) -> RowLayout:
    """A warp per row for rows of at most `WARP_ROW_MAX_COLS` columns known at build time, else the block; the row
    in registers where a thread's share is at most `MAX_CACHED` values: for columns known only at run time, up to
    `MAX_CACHED` values a thread, which the kernels check at run time (`cols <= cached * width`), reading longer rows
    pass by pass. Without `threads`, blocks of 128 threads, or for longer rows the fewest of `BLOCK_SIZES` that keep
    a row in registers (the most where none does; 512 for rows known only at run time, which keeps up to 16384
    columns in registers)."""
    if threads is None:
        fitting = [t for t in BLOCK_SIZES if isinstance(cols, int) and -(-cols // t) <= MAX_CACHED]
        threads = fitting[0] if fitting else BLOCK_SIZES[-1] if isinstance(cols, int) else 512
    require(threads % WARP == 0 and WARP <= threads <= 1024, "normalization_cuda",
            f"{threads} threads a block (need whole warps, at most 1024)")
    if isinstance(cols, int) and cols <= WARP_ROW_MAX_COLS:
        return RowLayout(threads, WARP, threads // WARP, -(-cols // WARP))
    share = -(-cols // threads) if isinstance(cols, int) else MAX_CACHED
    return RowLayout(threads, threads, 1, share if share <= MAX_CACHED else 0)


def _prepare(template: str, rows: Size, cols: Size, dtype: str) -> DataType:
    check_sizes(template, {"rows": rows, "cols": cols})
    return template_dtype(template, dtype, NORMALIZATION_DTYPES)


def _row_reducers(layout: RowLayout) -> tuple[ScriptFunction, ScriptFunction]:
    """The sum and maximum over the threads sharing a row."""
    warp_sum, warp_max, block_sum, block_max = block_reducers(layout.threads)
    return (warp_sum, warp_max) if layout.width == WARP else (block_sum, block_max)


def softmax_cuda(rows: Size, cols: Size, dtype: str = "float32", *, threads: int | None = None) -> ScriptModule:
    """A module with one kernel `softmax(<symbolic sizes>, x, y)`: `y[r] = exp(x[r] - max x[r]) / sum(...)`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name."""
    return _softmax("softmax_cuda", rows, cols, dtype, threads, log=False)


def log_softmax_cuda(rows: Size, cols: Size, dtype: str = "float32", *, threads: int | None = None) -> ScriptModule:
    """A module with one kernel `log_softmax(<symbolic sizes>, x, y)`: `y[r] = x[r] - max - log(sum exp(x[r] - max))`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name."""
    return _softmax("log_softmax_cuda", rows, cols, dtype, threads, log=True)


def _softmax(template: str, rows: Size, cols: Size, dtype: str, threads: int | None, log: bool) -> ScriptModule:
    dt = _prepare(template, rows, cols, dtype)
    layout = row_layout(cols, threads)
    threads, width, per_block, cached = layout.threads, layout.width, layout.rows_per_block, layout.cached
    row_sum, row_max = _row_reducers(layout)
    kernel_name = "log_softmax" if log else "softmax"

    with script_module() as module:

        @script
        def softmax(rows: i32, cols: i32, x: dt[rows, cols], y: dt[rows, cols]):
            attrs.func_name = kernel_name
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = (rows + per_block - 1) // per_block
            row = blockIdx.x * per_block + threadIdx.x // width
            lane = threadIdx.x % width
            if row < rows:
                if cols <= cached * width:  # the row fits the registers (known at build time where cols is)
                    v = register_tensor(f32, [max(cached, 1)])
                    local_max: f32 = -math.inf
                    for j in meta.range(cached):
                        v[j] = -math.inf
                        if lane + j * width < cols:
                            v[j] = f32(x[row, lane + j * width])
                        local_max = max(local_max, v[j])
                    top = row_max(local_max)
                    local_sum: f32 = 0.0
                    for j in meta.range(cached):
                        if log:
                            local_sum += math.exp(v[j] - top)  # exp(-inf) = 0 past the row's end
                        else:
                            v[j] = math.exp(v[j] - top)  # each exponential once: the row keeps them
                            local_sum += v[j]
                    total = row_sum(local_sum)
                    if log:
                        log_total = math.log(total)
                        for j in meta.range(cached):
                            if lane + j * width < cols:
                                y[row, lane + j * width] = dt(v[j] - top - log_total)
                    else:
                        scale = 1.0 / total
                        for j in meta.range(cached):
                            if lane + j * width < cols:
                                y[row, lane + j * width] = dt(v[j] * scale)
                else:
                    local_max: f32 = -math.inf
                    for c in range(lane, cols, width):
                        local_max = max(local_max, f32(x[row, c]))
                    top = row_max(local_max)
                    local_sum: f32 = 0.0
                    for c in range(lane, cols, width):
                        local_sum += math.exp(f32(x[row, c]) - top)
                    log_total = math.log(row_sum(local_sum))
                    for c in range(lane, cols, width):
                        if log:
                            y[row, c] = dt(f32(x[row, c]) - top - log_total)
                        else:
                            y[row, c] = dt(math.exp(f32(x[row, c]) - top - log_total))

    return bind_sizes(module, kernel_name, {"rows": rows, "cols": cols})


def layer_norm_cuda(rows: Size, cols: Size, eps: float = 1e-5, dtype: str = "float32", *, weight: bool = True,
                    bias: bool = True, threads: int | None = None) -> ScriptModule:
    """A module with one kernel `layer_norm(<symbolic sizes>, x, [weight], [bias], y)`:
    `y[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias` with the row's mean and (biased) variance; without
    `weight` or `bias` (the flags) the kernel has no such parameter and skips that step.

    `x, y: dtype[rows, cols]`, `weight, bias: dtype[cols]`; each size is an int or a symbolic name."""
    return _norm("layer_norm_cuda", "layer_norm", rows, cols, eps, dtype, weight, bias, threads, center=True)


def rms_norm_cuda(rows: Size, cols: Size, eps: float = 1e-6, dtype: str = "float32", *, weight: bool = True,
                  threads: int | None = None) -> ScriptModule:
    """A module with one kernel `rms_norm(<symbolic sizes>, x, [weight], y)`:
    `y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight` (without `weight`, the flag, no such parameter or product).

    `x, y: dtype[rows, cols]`, `weight: dtype[cols]`; each size is an int or a symbolic name."""
    return _norm("rms_norm_cuda", "rms_norm", rows, cols, eps, dtype, weight, False, threads, center=False)


def _norm(template: str, kernel_name: str, rows: Size, cols: Size, eps: float, dtype: str, has_weight: bool,
          has_bias: bool, threads: int | None, center: bool) -> ScriptModule:
    """Layer norm (`center`) or RMS norm of the rows, times the weight and plus the bias where they are given."""
    dt = _prepare(template, rows, cols, dtype)
    layout = row_layout(cols, threads)
    threads, width, per_block, cached = layout.threads, layout.width, layout.rows_per_block, layout.cached
    row_sum, _ = _row_reducers(layout)

    with script_module() as module:

        @script
        def norm(rows: i32, cols: i32, x: dt[rows, cols], weight: dt[cols], bias: dt[cols], y: dt[rows, cols]):
            attrs.func_name = kernel_name
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = (rows + per_block - 1) // per_block
            row = blockIdx.x * per_block + threadIdx.x // width
            lane = threadIdx.x % width
            if row < rows:
                if cols <= cached * width:  # the row fits the registers (known at build time where cols is)
                    v = register_tensor(f32, [max(cached, 1)])
                    local_sum: f32 = 0.0
                    for j in meta.range(cached):
                        v[j] = 0.0
                        if lane + j * width < cols:
                            v[j] = f32(x[row, lane + j * width])
                        local_sum += v[j]
                    mean: f32 = 0.0
                    if center:
                        mean = row_sum(local_sum) / f32(cols)
                    local_squares: f32 = 0.0
                    for j in meta.range(cached):
                        if lane + j * width < cols:
                            local_squares += (v[j] - mean) * (v[j] - mean)
                    scale = rsqrt(row_sum(local_squares) / f32(cols) + eps)
                    for j in meta.range(cached):
                        if lane + j * width < cols:
                            out = (v[j] - mean) * scale
                            if has_weight:
                                out = out * f32(weight[lane + j * width])
                            if has_bias:
                                out = out + f32(bias[lane + j * width])
                            y[row, lane + j * width] = dt(out)
                else:
                    mean: f32 = 0.0
                    if center:
                        local_sum: f32 = 0.0
                        for c in range(lane, cols, width):
                            local_sum += f32(x[row, c])
                        mean = row_sum(local_sum) / f32(cols)
                    local_squares: f32 = 0.0
                    for c in range(lane, cols, width):
                        d = f32(x[row, c]) - mean
                        local_squares += d * d
                    scale = rsqrt(row_sum(local_squares) / f32(cols) + eps)
                    for c in range(lane, cols, width):
                        out = (f32(x[row, c]) - mean) * scale
                        if has_weight:
                            out = out * f32(weight[c])
                        if has_bias:
                            out = out + f32(bias[c])
                        y[row, c] = dt(out)

    unused = [name for name, given in (("weight", has_weight), ("bias", has_bias)) if not given]
    bound = bind_sizes(module, kernel_name, {"rows": rows, "cols": cols})
    return drop_params(bound, kernel_name, unused) if unused else bound


CUDA_ROWS = RowTemplates(NORMALIZATION_DTYPES, {
    "softmax": softmax_cuda, "log_softmax": log_softmax_cuda, "layer_norm": layer_norm_cuda, "rms_norm": rms_norm_cuda,
})
register_row_templates(LIBRARY_CUDA, CUDA_ROWS)


@library_template("layer_norm", LIBRARY_CUDA)
def layer_norm_rows_cuda(task: Task) -> TemplateBinding | None:
    """Layer norm over trailing axes, with or without its weight and its bias."""
    weight, bias = task.attrs.get("params", (False, False))
    return rows_binding(task, CUDA_ROWS, "axes", weight + bias, eps=float(task.attrs["eps"]), weight=weight,
                        bias=bias)


@library_template("rms_norm", LIBRARY_CUDA)
def rms_norm_rows_cuda(task: Task) -> TemplateBinding | None:
    """RMS norm over trailing axes, with or without its weight."""
    (weight,) = task.attrs.get("params", (False,))
    if trailing_axes(task, "axes") is None:
        return None
    return rows_binding(task, CUDA_ROWS, "axes", int(weight), eps=float(task.attrs["eps"]), weight=weight)


@library_template("group_norm", LIBRARY_CUDA)
def group_norm_rows_cuda(task: Task) -> TemplateBinding | None:
    """Group norm's normalization (over the last axis of its `[batch, groups, rest]` view): the layer norm template
    without weight and bias (group norm's per-channel weight and bias are operators of their own)."""
    if task.attrs.get("params") != (False,) or trailing_axes(task, "axes") != 1:
        return None
    rows = RowTemplates(NORMALIZATION_DTYPES, {"group_norm": layer_norm_cuda})
    return rows_binding(task, rows, "axes", 0, eps=float(task.attrs["eps"]), weight=False, bias=False)
