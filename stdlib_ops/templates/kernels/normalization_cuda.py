"""Row-wise CUDA templates over a 2-D view `[rows, cols]`: softmax, log-softmax, layer norm and RMS norm.

One block of `threads` threads handles one row: each thread strides over the row's columns, and the row's
maximum and sums are block reductions (`block_reduce`: warp shuffles, then one partial per warp in shared
memory). Arithmetic is in f32 whatever the storage dtype. Softmax subtracts the row's maximum before `exp`
(no overflow); layer norm takes the variance as the mean of squared deviations from the mean (two passes, no
cancellation). Every kernel follows the kernel contract: inputs are only read element by element, the output
only stored element by element.
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, i32, rsqrt, script, script_module
from hidet_lang.cuda import blockIdx, threadIdx
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.types import DataType
from stdlib_ops.templates.kernels.block_reduce import block_reducers
from stdlib_ops.templates.kernels.row_views import RowTemplates, register_row_templates
from stdlib_ops.templates.params import Size, check_sizes, template_dtype
from stdlib_ops.templates.sizes import bind_sizes

NORMALIZATION_DTYPES = ("float32", "float16", "bfloat16")


def _prepare(template: str, rows: Size, cols: Size, dtype: str) -> DataType:
    check_sizes(template, {"rows": rows, "cols": cols})
    return template_dtype(template, dtype, NORMALIZATION_DTYPES)


def softmax_cuda(rows: Size, cols: Size, dtype: str = "float32", *, threads: int = 128) -> ScriptModule:
    """A module with one kernel `softmax(<symbolic sizes>, x, y)`: `y[r] = exp(x[r] - max x[r]) / sum(...)`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name."""
    return _softmax("softmax_cuda", rows, cols, dtype, threads, log=False)


def log_softmax_cuda(rows: Size, cols: Size, dtype: str = "float32", *, threads: int = 128) -> ScriptModule:
    """A module with one kernel `log_softmax(<symbolic sizes>, x, y)`: `y[r] = x[r] - max - log(sum exp(x[r] - max))`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name."""
    return _softmax("log_softmax_cuda", rows, cols, dtype, threads, log=True)


def _softmax(template: str, rows: Size, cols: Size, dtype: str, threads: int, log: bool) -> ScriptModule:
    dt = _prepare(template, rows, cols, dtype)
    _, _, block_sum, block_max = block_reducers(threads)
    kernel_name = "log_softmax" if log else "softmax"

    with script_module() as module:

        @script
        def softmax(rows: i32, cols: i32, x: dt[rows, cols], y: dt[rows, cols]):
            attrs.func_name = kernel_name
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = rows
            row = blockIdx.x
            local_max = f32(x[row, 0])
            for c in range(threadIdx.x, cols, threads):
                local_max = max(local_max, f32(x[row, c]))
            row_max = block_max(local_max)
            local_sum: f32 = 0.0
            for c in range(threadIdx.x, cols, threads):
                local_sum += math.exp(f32(x[row, c]) - row_max)
            total = block_sum(local_sum)
            if log:
                log_total = math.log(total)
                for c in range(threadIdx.x, cols, threads):
                    y[row, c] = dt(f32(x[row, c]) - row_max - log_total)
            else:
                scale = 1.0 / total
                for c in range(threadIdx.x, cols, threads):
                    y[row, c] = dt(math.exp(f32(x[row, c]) - row_max) * scale)

    return bind_sizes(module, kernel_name, {"rows": rows, "cols": cols})


def layer_norm_cuda(rows: Size, cols: Size, eps: float = 1e-5, dtype: str = "float32", *,
                    threads: int = 128) -> ScriptModule:
    """A module with one kernel `layer_norm(<symbolic sizes>, x, weight, bias, y)`:
    `y[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias` with the row's mean and (biased) variance.

    `x, y: dtype[rows, cols]`, `weight, bias: dtype[cols]`; each size is an int or a symbolic name."""
    dt = _prepare("layer_norm_cuda", rows, cols, dtype)
    _, _, block_sum, _ = block_reducers(threads)

    with script_module() as module:

        @script
        def layer_norm(rows: i32, cols: i32, x: dt[rows, cols], weight: dt[cols], bias: dt[cols], y: dt[rows, cols]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = rows
            row = blockIdx.x
            local_sum: f32 = 0.0
            for c in range(threadIdx.x, cols, threads):
                local_sum += f32(x[row, c])
            mean = block_sum(local_sum) / f32(cols)
            local_squares: f32 = 0.0
            for c in range(threadIdx.x, cols, threads):
                d = f32(x[row, c]) - mean
                local_squares += d * d
            inv_std = rsqrt(block_sum(local_squares) / f32(cols) + eps)
            for c in range(threadIdx.x, cols, threads):
                y[row, c] = dt((f32(x[row, c]) - mean) * inv_std * f32(weight[c]) + f32(bias[c]))

    return bind_sizes(module, "layer_norm", {"rows": rows, "cols": cols})


def rms_norm_cuda(rows: Size, cols: Size, eps: float = 1e-6, dtype: str = "float32", *,
                  threads: int = 128) -> ScriptModule:
    """A module with one kernel `rms_norm(<symbolic sizes>, x, weight, y)`:
    `y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight`.

    `x, y: dtype[rows, cols]`, `weight: dtype[cols]`; each size is an int or a symbolic name."""
    dt = _prepare("rms_norm_cuda", rows, cols, dtype)
    _, _, block_sum, _ = block_reducers(threads)

    with script_module() as module:

        @script
        def rms_norm(rows: i32, cols: i32, x: dt[rows, cols], weight: dt[cols], y: dt[rows, cols]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = rows
            row = blockIdx.x
            local_squares: f32 = 0.0
            for c in range(threadIdx.x, cols, threads):
                v = f32(x[row, c])
                local_squares += v * v
            inv_rms = rsqrt(block_sum(local_squares) / f32(cols) + eps)
            for c in range(threadIdx.x, cols, threads):
                y[row, c] = dt(f32(x[row, c]) * inv_rms * f32(weight[c]))

    return bind_sizes(module, "rms_norm", {"rows": rows, "cols": cols})


register_row_templates("cuda", RowTemplates(NORMALIZATION_DTYPES, {
    "softmax": softmax_cuda, "log_softmax": log_softmax_cuda, "layer_norm": layer_norm_cuda, "rms_norm": rms_norm_cuda,
}))
