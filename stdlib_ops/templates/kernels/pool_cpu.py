"""The max-pooling template for the CPU over NCHW tensors (`max_pool2d_cpu`).

`out[b, c, y, x]` is the largest of `x[b, c, y * sh + ky * dh - ph, x * sw + kx * dw - pw]` over the window's
taps inside the input (padding never wins; a NaN in the window gives NaN, as the operator's compute definition and
numpy's `max`). The threads share the (image, channel) planes. For an output row, each input row its windows read
is copied into a local f32 row padded with -inf (the copy loop the C compiler vectorizes), and the window's taps
along x are taken as whole vectors of `lanes` floats at every input column `j` (`hidet_lang.cpu`'s `max` of the
loads at `j + kx * dw`), then across the rows; the output row takes every `sw`-th column of the result. The
comparisons are the vector type's (the C compiler vectorizes no data-dependent select here: its loop if-conversion
is off, see `codegen.toolchain.compiler`), so a NaN is tracked beside the maxima: `+inf` plus `max(inf, v)` of
every tap stays `+inf` while the taps are numbers and becomes NaN for good at the first NaN, and `min(maxima,
that)` gives the maximum, or NaN. Only the batch may be symbolic: every other size is a constant of the kernel.

Measured on this project's 2-core AVX-512 machine (shared with other work, which held part of the cores), ResNet-18's
pooling (64 channels, 112x112, 3x3 stride 2 padding 1), batch 1, 2 threads, 7 turns of 30 calls in one process,
medians of two runs: this template 0.52-0.53 ms, the rule-based scheduler's kernel (one output a worker) 1.64-1.80
ms, ONNX Runtime's MaxPool node alone 0.29-0.33 ms (0.11 ms inside its ResNet-18, where it pools the blocked NCHWc
layout its convolutions leave).

The kernel follows the kernel contract: `x` is only read element by element and `out` only stored element by
element.
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, grid, i32, i64, meta, register_tensor, script, script_module
from hidet_lang import cpu as vectors
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype, shape_of
from stdlib_ops.templates.cpu_lanes import machine_lanes, template_lanes
from stdlib_ops.templates.kernels.conv2d_geometry import Pair
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CPU, library_template
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.views import View

MAX_POOL_CPU_DTYPES = ("float32", "float16", "bfloat16")


def max_pool2d_cpu(batch: Size, channels: int, height: int, width: int, out_size: Pair, kernel: Pair,
                   stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1),
                   dtype: str = "float32", *, lanes: int | None = None) -> ScriptModule:
    """A module with one CPU kernel `max_pool2d(<batch if symbolic>, x, out)`: `x: dtype[batch, channels, height,
    width]`, `out: dtype[batch, channels, *out_size]` (`out_size` as the operator computes it, `ceil_mode`'s last
    window included), the windows of `kernel` taps `dilation` apart, `stride` apart, over the input padded by
    `padding` (see the module's docstring), with vectors of `lanes` floats (None: the machine's widest)."""
    name = "max_pool2d_cpu"
    check_sizes(name, {"batch": batch})
    dt = template_dtype(name, dtype, MAX_POOL_CPU_DTYPES)
    for what, value in {"channels": channels, "height": height, "width": width, "out_size": out_size,
                        "kernel": kernel, "stride": stride, "dilation": dilation}.items():
        values = value if isinstance(value, tuple) else (value,)
        require(all(isinstance(v, int) and v >= 1 for v in values), name,
                f"{what} must be positive ints, got {value!r}")
    require(min(padding) >= 0, name, f"padding must not be negative, got {padding}")
    h, w, (oh, ow), (kh, kw) = height, width, out_size, kernel
    (sh, sw), (ph, pl), (dh, dw) = stride, padding, dilation
    lanes = template_lanes(name, lanes)
    load, store, broadcast, vmax, vmin = (getattr(vectors, f"f32x{lanes}_{op}") for op in
                                          ("load", "store", "broadcast", "max", "min"))
    span = -(-((ow - 1) * sw + 1) // lanes) * lanes  # the input columns an output row's windows start at, rounded
    padded = span + (kw - 1) * dw  # a padded input row: pl columns of -inf, the row, -inf to the end
    right = max(0, min(w, padded - pl))  # the input columns the padded row holds

    with script_module() as module:

        @script
        def max_pool2d(batch: i32, x: dt[batch, channels, h, w], out: dt[batch, channels, oh, ow]):
            attrs.func_kind = "cpu_kernel"
            for t in grid(batch * channels, attrs="p"):  # the (image, channel) planes
                bi = t // channels
                c = t % channels
                source = register_tensor(f32, [padded])
                best = register_tensor(f32, [span])  # per start column: the window's maximum so far
                seen = register_tensor(f32, [span])  # +inf, or NaN once the window held a NaN
                for u in range(i64(padded)):
                    source[u] = -math.inf
                for y in range(oh):
                    for j in range(0, span, lanes):
                        store(~best[j], broadcast(-math.inf))
                        store(~seen[j], broadcast(math.inf))
                    for ky in range(kh):
                        iy = y * sh + ky * dh - ph
                        if iy >= 0 and iy < h:
                            for u in range(i64(right)):
                                source[pl + u] = f32(x[bi, c, iy, u])
                            for j in range(0, span, lanes):
                                m = load(~best[j])
                                nan = load(~seen[j])
                                for kx in meta.range(kw):
                                    v = load(~source[j + kx * dw])
                                    m = vmax(m, v)
                                    nan = nan + vmax(broadcast(math.inf), v)  # max(inf, v): v when NaN, else inf
                                store(~best[j], m)
                                store(~seen[j], nan)
                    for j in range(0, span, lanes):
                        store(~best[j], vmin(load(~best[j]), load(~seen[j])))  # NaN where the window had one
                    for u in range(i64(ow)):
                        out[bi, c, y, u] = dt(best[u * sw])

    return bind_sizes(module, "max_pool2d", {"batch": batch})


@library_template("max_pool2d", LIBRARY_CPU)
def max_pool2d_on_cpu(task: Task) -> TemplateBinding | None:
    """The row-vectorized template for 4-D (NCHW) f32, f16 and bf16 inputs whose sizes other than the batch are
    known at build time, where the machine has vector FMA (3-D inputs go to the rule-based scheduler)."""
    dtype = common_dtype(task, MAX_POOL_CPU_DTYPES)
    if dtype is None or len(task.inputs) != 1 or len(task.outputs) != 1 or machine_lanes() is None:
        return None
    (x,), (out,) = task.inputs, task.outputs
    if len(shape_of(x)) != 4:
        return None
    batch, channels, height, width = shape_of(x)
    out_size = tuple(shape_of(out)[2:])
    if not all(isinstance(d, int) for d in (channels, height, width, *out_size)):
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    options = {"channels": channels, "height": height, "width": width, "out_size": out_size,
               "kernel": tuple(task.attrs["kernel_size"]), "stride": tuple(task.attrs["stride"]),
               "padding": tuple(task.attrs["padding"]), "dilation": tuple(task.attrs["dilation"]), "dtype": dtype}
    views = [View(t, lambda i: i) for t in (*task.inputs, *signature.outputs)]
    return TemplateBinding("max_pool2d_cpu", max_pool2d_cpu, signature, {"batch": batch}, views, options)
