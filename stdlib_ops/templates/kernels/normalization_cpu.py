"""Row-wise CPU templates over a 2-D view `[rows, cols]`: softmax, log-softmax, layer norm and RMS norm.

The rows are spread over the OpenMP threads (`grid(rows, attrs='p')`). A thread copies its row, `chunk` values
at a time, into a local f32 buffer with element reads (where a fused prologue is computed), reduces the buffer
with the CPU's vector types (`row_reduce_cpu`, vectors of `lanes` floats: the widest the machine has unless
given), and writes the results with element stores (where a fused epilogue is computed), so every kernel follows
the fusion contract. A row that fits in one chunk (`cols <= chunk`, the common case) is read from memory once and
written once; the reductions and the output loop run over the buffer, which stays in the L1 cache:

- softmax: the row's maximum, then `exp(v - max)` stored back into the buffer while it is summed, then the
  buffer times `1 / sum` is stored (three passes over the buffer, one over memory each way);
- log-softmax: the maximum, the sum of `exp(v - max)`, then `(v - max) - log(sum)`;
- layer norm: the mean and variance by the corrected two-pass algorithm (Chan, Golub and LeVeque): the sum gives
  a first mean, then one pass sums the deviations `d = v - mean` and their squares; the mean is corrected by
  `sum(d) / n` and the sum of squared deviations is `sum(d^2) - sum(d)^2 / n`. Deviations from a mean are small,
  so a row with a large mean loses no accuracy to cancellation (a one-pass `E[x^2] - E[x]^2` would);
- RMS norm: the sum of squares, then `v / sqrt(mean square + eps) * weight`.

A longer row is taken chunk by chunk: softmax keeps a running maximum and rescales its running sum when the
maximum grows (the online softmax), layer norm merges the chunks' means and sums of squared deviations with
Chan's pairwise formula; the output pass then reads the row again (softmax recomputes the exp of each chunk).
The loops over a row's columns count in i64: the C code is compiled with `-fwrapv`, under which an i32 index
`row * cols + j` may wrap, so the compiler could not treat the addresses as consecutive and would gather and
scatter element by element instead of moving whole vectors (three times slower). Arithmetic is in f32 whatever the
storage dtype (f16 values are converted as they are read and rounded once
as they are stored).
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, grid, i32, i64, register_tensor, rsqrt, script, script_module
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir.types import DataType
from stdlib_ops.templates.cpu_lanes import template_lanes
from stdlib_ops.templates.kernels.row_reduce_cpu import RowReducers, row_reducers
from stdlib_ops.templates.kernels.row_views import RowTemplates, register_row_templates
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CPU
from stdlib_ops.templates.sizes import bind_sizes

NORMALIZATION_CPU_DTYPES = ("float32", "float16", "bfloat16")

CHUNK = 4096
"""The default length of a thread's row buffer, in f32 values (16 KB: it stays in the L1 cache)."""


def _prepare(template: str, rows: Size, cols: Size, dtype: str, lanes: int | None,
             chunk: int) -> tuple[DataType, RowReducers]:
    """The storage dtype and the row reductions of the template's vector width, after checking the parameters."""
    check_sizes(template, {"rows": rows, "cols": cols})
    dt = template_dtype(template, dtype, NORMALIZATION_CPU_DTYPES)
    require(chunk >= 1, template, f"a chunk of {chunk} values")
    return dt, row_reducers(template_lanes(template, lanes))


def softmax_cpu(rows: Size, cols: Size, dtype: str = "float32", *, lanes: int | None = None,
                chunk: int = CHUNK) -> ScriptModule:
    """A module with one CPU kernel `softmax(<symbolic sizes>, x, y)`: `y[r] = exp(x[r] - max x[r]) / sum(...)`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name. `lanes`: the vector width (4, 8 or 16;
    default the machine's widest); `chunk`: the length of the row buffer."""
    return _softmax("softmax_cpu", rows, cols, dtype, lanes, chunk, log=False)


def log_softmax_cpu(rows: Size, cols: Size, dtype: str = "float32", *, lanes: int | None = None,
                    chunk: int = CHUNK) -> ScriptModule:
    """A module with one CPU kernel `log_softmax(<symbolic sizes>, x, y)`:
    `y[r] = x[r] - max - log(sum exp(x[r] - max))`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name; `lanes` and `chunk` as for `softmax_cpu`."""
    return _softmax("log_softmax_cpu", rows, cols, dtype, lanes, chunk, log=True)


def _softmax(template: str, rows: Size, cols: Size, dtype: str, lanes: int | None, chunk: int,
             log: bool) -> ScriptModule:
    dt, r = _prepare(template, rows, cols, dtype, lanes, chunk)
    kernel_name = "log_softmax" if log else "softmax"
    exp_sum = r.row_exp_sum if log else r.row_exp_sum_in_place  # softmax keeps the exps of a one-chunk row

    with script_module() as module:

        @script
        def softmax(rows: i32, cols: i32, x: dt[rows, cols], y: dt[rows, cols]):
            attrs.func_name = kernel_name
            attrs.func_kind = "cpu_kernel"
            for row in grid(rows, attrs="p"):
                buf = register_tensor(f32, [chunk])
                row_max: f32 = -math.inf
                total: f32 = 0.0
                for c0 in range(0, cols, chunk):
                    n = min(chunk, cols - c0)
                    for j in range(i64(n)):
                        buf[j] = f32(x[row, c0 + j])
                    new_max = max(row_max, r.row_shift(~buf[0], n))
                    total = total * math.exp(row_max - new_max)  # the online softmax: 0 for the first chunk
                    row_max = new_max
                    total += exp_sum(~buf[0], n, row_max)
                if log:
                    log_total = math.log(total)
                    if cols <= chunk:
                        for j in range(i64(cols)):
                            y[row, j] = dt(buf[j] - row_max - log_total)
                    else:
                        for c in range(i64(cols)):
                            y[row, c] = dt(f32(x[row, c]) - row_max - log_total)
                else:
                    scale = 1.0 / total
                    if cols <= chunk:
                        for j in range(i64(cols)):
                            y[row, j] = dt(buf[j] * scale)
                    else:
                        for c0 in range(0, cols, chunk):
                            n = min(chunk, cols - c0)
                            for j in range(i64(n)):
                                buf[j] = f32(x[row, c0 + j])
                            r.row_exp_sum_in_place(~buf[0], n, row_max)
                            for j in range(i64(n)):
                                y[row, c0 + j] = dt(buf[j] * scale)

    return bind_sizes(module, kernel_name, {"rows": rows, "cols": cols})


def layer_norm_cpu(rows: Size, cols: Size, eps: float = 1e-5, dtype: str = "float32", *, lanes: int | None = None,
                   chunk: int = CHUNK) -> ScriptModule:
    """A module with one CPU kernel `layer_norm(<symbolic sizes>, x, weight, bias, y)`:
    `y[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias` with the row's mean and (biased) variance.

    `x, y: dtype[rows, cols]`, `weight, bias: dtype[cols]`; each size is an int or a symbolic name; `lanes` and
    `chunk` as for `softmax_cpu`."""
    dt, r = _prepare("layer_norm_cpu", rows, cols, dtype, lanes, chunk)

    with script_module() as module:

        @script
        def layer_norm(rows: i32, cols: i32, x: dt[rows, cols], weight: dt[cols], bias: dt[cols], y: dt[rows, cols]):
            attrs.func_kind = "cpu_kernel"
            for row in grid(rows, attrs="p"):
                buf = register_tensor(f32, [chunk])
                sums = register_tensor(f32, [2])
                mean: f32 = 0.0
                squares: f32 = 0.0  # the sum of squared deviations from the mean
                for c0 in range(0, cols, chunk):
                    n = min(chunk, cols - c0)
                    for j in range(i64(n)):
                        buf[j] = f32(x[row, c0 + j])
                    count = f32(n)
                    chunk_mean = r.row_sum(~buf[0], n) / count
                    r.row_deviations(~buf[0], n, chunk_mean, ~sums[0])
                    chunk_mean += sums[0] / count
                    chunk_squares = max(sums[1] - sums[0] * sums[0] / count, 0.0)
                    seen = f32(c0)
                    delta = chunk_mean - mean
                    mean += delta * (count / (seen + count))  # Chan's merge: exactly the chunk's for the first
                    squares += chunk_squares + delta * delta * (seen * count / (seen + count))
                inv_std = rsqrt(squares / f32(cols) + eps)
                if cols <= chunk:
                    for j in range(i64(cols)):
                        y[row, j] = dt((buf[j] - mean) * inv_std * f32(weight[j]) + f32(bias[j]))
                else:
                    for c in range(i64(cols)):
                        y[row, c] = dt((f32(x[row, c]) - mean) * inv_std * f32(weight[c]) + f32(bias[c]))

    return bind_sizes(module, "layer_norm", {"rows": rows, "cols": cols})


def rms_norm_cpu(rows: Size, cols: Size, eps: float = 1e-6, dtype: str = "float32", *, lanes: int | None = None,
                 chunk: int = CHUNK) -> ScriptModule:
    """A module with one CPU kernel `rms_norm(<symbolic sizes>, x, weight, y)`:
    `y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight`.

    `x, y: dtype[rows, cols]`, `weight: dtype[cols]`; each size is an int or a symbolic name; `lanes` and `chunk`
    as for `softmax_cpu`."""
    dt, r = _prepare("rms_norm_cpu", rows, cols, dtype, lanes, chunk)

    with script_module() as module:

        @script
        def rms_norm(rows: i32, cols: i32, x: dt[rows, cols], weight: dt[cols], y: dt[rows, cols]):
            attrs.func_kind = "cpu_kernel"
            for row in grid(rows, attrs="p"):
                buf = register_tensor(f32, [chunk])
                sums = register_tensor(f32, [2])
                squares: f32 = 0.0
                for c0 in range(0, cols, chunk):
                    n = min(chunk, cols - c0)
                    for j in range(i64(n)):
                        buf[j] = f32(x[row, c0 + j])
                    r.row_deviations(~buf[0], n, 0.0, ~sums[0])
                    squares += sums[1]
                inv_rms = rsqrt(squares / f32(cols) + eps)
                if cols <= chunk:
                    for j in range(i64(cols)):
                        y[row, j] = dt(buf[j] * inv_rms * f32(weight[j]))
                else:
                    for c in range(i64(cols)):
                        y[row, c] = dt(f32(x[row, c]) * inv_rms * f32(weight[c]))

    return bind_sizes(module, "rms_norm", {"rows": rows, "cols": cols})


register_row_templates(LIBRARY_CPU, RowTemplates(NORMALIZATION_CPU_DTYPES, {
    "softmax": softmax_cpu, "log_softmax": log_softmax_cpu, "layer_norm": layer_norm_cpu, "rms_norm": rms_norm_cpu,
}, needs_lanes=True))
