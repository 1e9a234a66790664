"""The max-pooling template for the CPU over NCHW tensors (`max_pool2d_cpu`).

`out[b, c, y, x]` is the largest of `x[b, c, y * sh + ky * dh - ph, x * sw + kx * dw - pw]` over the window's
taps inside the input (padding never wins; a NaN in the window gives NaN, as the operator's compute definition and
numpy's `max`). The threads share the (image, channel) planes. Each input row a window reads is copied once, split
by column modulo `sw` into phases of a local f32 row padded with -inf (the copy loop, element by element, which the
C compiler vectorizes with permutes), so that tap `kx` of output column `u` is entry `u + kx * dw // sw` of phase
`kx * dw % sw`: the taps along x are whole vectors of `lanes` floats at the output columns only (`hidet_lang.cpu`'s
`max` of the loads). The row's maxima along x go to a ring of `(kh - 1) * dh + 1` rows, from which every output
row whose window holds that input row takes them (with a 3-row window and stride 2, half the rows serve two output
rows); the output row is their `max` across the window's rows, stored element by element. The comparisons are the
vector type's (the C compiler vectorizes no data-dependent select here: its loop if-conversion is off, see
`codegen.toolchain.compiler`), so a NaN is tracked beside the maxima at both steps: `+inf` plus `max(inf, v)` of
every tap stays `+inf` while the taps are numbers and becomes NaN for good at the first NaN, and `min(maxima, that)`
gives the maximum, or NaN. Only the batch may be symbolic: every other size is a constant of the kernel. The
vectors are the machine's widest, as wide as the stores of the compiler's copy loop (`-mprefer-vector-width=512`):
a 16-float load of what two 8-float stores wrote waits for them to reach the cache, which made 16 lanes 1.25x
slower than 8 while GCC vectorized that loop for 256-bit registers; with 512-bit stores, 16 lanes take 0.22 ms
against 8 lanes' 0.33 at batch 1, 0.97 against 2.05 at batch 8.

Measured on this project's 2-core AVX-512 machine (shared with other work, whose load varied while measuring),
ResNet-18's pooling (64 channels, 112x112, 3x3 stride 2 padding 1), 2 threads, in turns (`timing.in_turns`, 21
loops of about 10 ms each), medians of several runs, standalone: batch 1, this template 0.19-0.20 ms (before
this layout, with each row copied for every window and the maxima taken at every input column: 0.45-0.47 ms),
ONNX Runtime's MaxPool node alone 0.20-0.25 ms while the machine was quiet (up to 1 ms under the other load);
batch 8, 1.57-2.0 ms (before: 3.5-3.9 ms), ONNX Runtime's node 2.0-2.2 ms while quiet. A stream that reads the
input once and writes the output once takes 0.115 ms at batch 1 on the same machine; with 8 of the 64 channels
(the data in cache) it takes 3 us a plane and one thread is as fast as two: the gap is the work per plane.

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
    span = -(-ow // lanes) * lanes  # the output columns, rounded up to whole vectors
    taps = [divmod(kx * dw, sw) for kx in range(kw)]  # tap kx of output column u: entry u + q of phase r
    phases = sorted({r for _, r in taps})  # the phases (padded input columns mod sw) the taps read
    where = [q + phases.index(r) * (span + taps[-1][0]) for q, r in taps]  # tap kx: its entry for u = 0
    length = span + taps[-1][0]  # the entries of a phase
    # phase r's entries q in [first, stop) hold input columns q * sw + r - pl (the others stay -inf)
    ranges = [(max(0, -(-(pl - r) // sw)), min(length, -(-(w + pl - r) // sw))) for r in phases]
    rows = (kh - 1) * dh + 1  # the ring of row maxima holds input row iy in slot iy % rows

    with script_module() as module:

        @script
        def max_pool2d(batch: i32, x: dt[batch, channels, h, w], out: dt[batch, channels, oh, ow]):
            attrs.func_kind = "cpu_kernel"
            for t in grid(batch * channels, attrs="p"):  # the (image, channel) planes
                bi = t // channels
                c = t % channels
                source = register_tensor(f32, [len(phases) * length])  # an input row, phase after phase
                ring = register_tensor(f32, [rows * span])  # per input row: the maxima of its windows along x
                held = register_tensor(i32, [rows])  # the input row each slot of the ring holds (-1: none)
                best = register_tensor(f32, [span])
                for u in range(i64(len(phases) * length)):
                    source[u] = -math.inf
                for k in range(rows):
                    held[k] = -1
                for y in range(oh):
                    for ky in meta.range(kh):  # the rows of the window not in the ring: split, reduced along x
                        iy = y * sh + ky * dh - ph
                        if iy >= 0 and iy < h and held[iy % rows] != iy:
                            slot = iy % rows
                            held[slot] = iy
                            for p in meta.range(len(phases)):
                                for q in range(i64(ranges[p][0]), i64(ranges[p][1])):
                                    source[p * length + q] = f32(x[bi, c, iy, q * sw + phases[p] - pl])
                            for j in range(0, span, lanes):
                                m = load(~source[where[0] + j])
                                if kw > 1:
                                    nan = vmax(broadcast(math.inf), m)  # max(inf, v): v when NaN, else inf
                                    for kx in meta.range(1, kw):
                                        v = load(~source[where[kx] + j])
                                        m = vmax(m, v)
                                        nan = nan + vmax(broadcast(math.inf), v)
                                    m = vmin(m, nan)  # NaN where a tap was NaN
                                store(~ring[slot * span + j], m)
                    for j in range(0, span, lanes):  # across the window's rows
                        m = broadcast(-math.inf)
                        nan = broadcast(math.inf)
                        for ky in meta.range(kh):
                            iy = y * sh + ky * dh - ph
                            if iy >= 0 and iy < h:
                                v = load(~ring[iy % rows * span + j])
                                m = vmax(m, v)
                                nan = nan + vmax(broadcast(math.inf), v)
                        store(~best[j], vmin(m, nan))
                    for u in range(i64(ow)):
                        out[bi, c, y, u] = dt(best[u])

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
