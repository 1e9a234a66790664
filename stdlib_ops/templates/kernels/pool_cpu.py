"""The max-pooling templates for the CPU: over NCHW tensors (`max_pool2d_cpu`), and over channels in blocks
(`max_pool2d_blocked_cpu`, the layout [N, C/c, H, W, c] the graph gives convolutions' outputs).

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

The blocked template computes `out[b, k, y, x, j]`, the largest of `x[b, k, iy, ix, j]` over the same windows,
with the vectors along the block's channels: a pixel's c channels are contiguous, so tap (ky, kx) of output column
`u` is a run of c floats of an input row and no phase split is needed. The threads share the (image, block)
planes. Each input row is copied once (element by element, converted to f32) into a ring of `(kh - 1) * dh + 1`
local rows of `W * c` floats, padded with -inf columns on both sides; a window row outside the input reads one more
slot, -inf throughout, so the taps have no conditions. A row new to the ring is copied column by column as the
output row's windows first reach its columns, between the windows' maxima rather than all at once before them,
which lets the machine's loads of `x` overlap the arithmetic (no window reads the columns past the last one's).
Each output pixel's `c / lanes` vectors are the `max` of its `kh * kw` taps' loads, with the NaN tracked beside
them as above (once, over all the taps), into a local row stored to `out` element by element. `lanes` must divide
the block; the binding takes the machine's widest that does (16 for blocks of 16 or 32 with AVX-512, 8 for blocks
of 8 there), and declines a block that no width divides.

Measured on the same machine, quiet, ResNet-18's pooling as [B, 2, 112, 112, 32], 2 threads, in turns
(`timing.in_turns`, 45 to 63 loops of about 10 ms each), medians of two or three runs, the built kernels against
`max_pool2d_cpu` on [B, 64, 112, 112]: batch 1, 0.21-0.22 ms against 0.22-0.23 ms; batch 8, 0.93-0.98 ms against
0.93-0.99 ms. Through eager calls (which also allocate the output), batch 1 0.32-0.35 ms against 0.33-0.34, batch
8 1.02-1.07 ms against 1.05-1.10. 8 lanes instead of 16: the same at batch 1, 0.98-1.00 ms at batch 8. The designs this
one was chosen over, measured beside it: the whole new rows copied before the windows' maxima, as fast at batch 1
and 1.09-1.14 ms at batch 8 (the lazy copy's 1.00-1.08 in those runs); (image, block, output row) units, each
copying its window's rows, 0.25-0.26 ms and 1.25-1.29 ms; the maxima down the columns into a local row first, then
along it (fewer vector operations, more loads and stores), 0.23-0.24 ms and 1.19-1.22 ms. A kernel copying the same
rows and storing the output without the maxima takes 0.18-0.19 ms and 0.74-0.75 ms; without the NaN tracking (not
the operator's semantics) the whole-rows design takes 0.20-0.22 ms and 0.91-0.93 ms. With two blocks a plane at
batch 1, the (image, block) units keep two threads busy, no more.

The kernels follow the kernel contract: `x` is only read element by element and `out` only stored element by
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
from stdlib_ops.templates.cpu_lanes import VECTOR_LANES, machine_has_lanes, machine_lanes, template_lanes
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
    _check_positive(name, {"channels": channels, "height": height, "width": width, "out_size": out_size,
                           "kernel": kernel, "stride": stride, "dilation": dilation}, padding)
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


def max_pool2d_blocked_cpu(batch: Size, blocks: int, height: int, width: int, block: int, out_size: Pair,
                           kernel: Pair, stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1),
                           dtype: str = "float32", *, lanes: int | None = None) -> ScriptModule:
    """A module with one CPU kernel `max_pool2d(<batch if symbolic>, x, out)`: `x: dtype[batch, blocks, height, width,
    block]`, `out: dtype[batch, blocks, *out_size, block]`, the channels in blocks of `block` (channel `ch` at block
    `ch // block`, entry `ch % block`), the windows of `kernel` taps `dilation` apart, `stride` apart, over the input
    padded by `padding` (see the module's docstring), with vectors of `lanes` floats (None: the machine's widest),
    which must divide `block`."""
    name = "max_pool2d_blocked_cpu"
    check_sizes(name, {"batch": batch})
    dt = template_dtype(name, dtype, MAX_POOL_CPU_DTYPES)
    _check_positive(name, {"blocks": blocks, "height": height, "width": width, "block": block, "out_size": out_size,
                           "kernel": kernel, "stride": stride, "dilation": dilation}, padding)
    h, w, (oh, ow), (kh, kw) = height, width, out_size, kernel
    (sh, sw), (ph, pl), (dh, dw) = stride, padding, dilation
    lanes = template_lanes(name, lanes)
    require(block % lanes == 0, name, f"the block of {block} channels is not a multiple of {lanes} lanes")
    load, store, broadcast, vmax, vmin = (getattr(vectors, f"f32x{lanes}_{op}") for op in
                                          ("load", "store", "broadcast", "max", "min"))
    columns = max(pl + w, (ow - 1) * sw + (kw - 1) * dw + 1)  # the padded input's columns the windows reach
    row = columns * block  # the floats of a padded input row
    rows = (kh - 1) * dh + 1  # the ring holds input row iy in slot iy % rows; slot `rows` is padding throughout
    reach = (kw - 1) * dw - pl + 1  # the windows of output column u read the input columns below u * sw + reach

    with script_module() as module:

        @script
        def max_pool2d(batch: i32, x: dt[batch, blocks, h, w, block], out: dt[batch, blocks, oh, ow, block]):
            attrs.func_kind = "cpu_kernel"
            for bi, k in grid(batch, blocks, attrs="pp"):  # the (image, block) planes
                ring = register_tensor(f32, [(rows + 1) * row])  # padded input rows
                held = register_tensor(i32, [rows])  # the input row each slot holds (-1: none)
                start = register_tensor(i32, [kh])  # where each row of the window starts in the ring
                fresh = register_tensor(i32, [kh])  # the input row to copy into the window's row ky (-1: none)
                best = register_tensor(f32, [ow * block])  # an output row
                for e in range(i64((rows + 1) * row)):
                    ring[e] = -math.inf
                for slot in range(rows):
                    held[slot] = -1
                for y in range(oh):
                    for ky in meta.range(kh):  # the window's rows: in the ring, or the padding slot
                        iy = y * sh + ky * dh - ph
                        start[ky] = rows * row
                        fresh[ky] = -1
                        if iy >= 0 and iy < h:
                            slot = iy % rows
                            start[ky] = slot * row
                            if held[slot] != iy:
                                held[slot] = iy
                                fresh[ky] = iy
                    copied = 0  # the fresh rows' columns copied so far (no window reads the others)
                    for u in range(ow):
                        reached = min(u * sw + reach, w)
                        if reached > copied:  # the fresh rows' columns this window reaches first
                            for ky in meta.range(kh):
                                if fresh[ky] >= 0:
                                    for ix in range(copied, reached):
                                        for j in range(block):
                                            ring[start[ky] + (ix + pl) * block + j] = f32(x[bi, k, fresh[ky], ix, j])
                            copied = reached
                        for j in range(0, block, lanes):  # the taps' vectors of the block's channels
                            m = load(~ring[start[0] + u * sw * block + j])
                            nan = vmax(broadcast(math.inf), m)  # max(inf, v): v when NaN, else inf
                            for tap in meta.range(1, kh * kw):
                                v = load(~ring[start[tap // kw] + (u * sw + tap % kw * dw) * block + j])
                                m = vmax(m, v)
                                nan = nan + vmax(broadcast(math.inf), v)
                            store(~best[u * block + j], vmin(m, nan))  # NaN where a tap was NaN
                    for u in range(ow):
                        for j in range(block):
                            out[bi, k, y, u, j] = dt(best[u * block + j])

    return bind_sizes(module, "max_pool2d", {"batch": batch})


def _check_positive(template: str, sizes: dict[str, int | Pair], padding: Pair) -> None:
    """ScheduleError naming `template` unless every one of `sizes` (ints or pairs) is positive and `padding` is not
    negative."""
    for what, value in sizes.items():
        values = value if isinstance(value, tuple) else (value,)
        require(all(isinstance(v, int) and v >= 1 for v in values), template,
                f"{what} must be positive ints, got {value!r}")
    require(min(padding) >= 0, template, f"padding must not be negative, got {padding}")


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


@library_template("max_pool2d_blocked", LIBRARY_CPU)
def max_pool2d_blocked_on_cpu(task: Task) -> TemplateBinding | None:
    """The block-vectorized template for 5-D (N, C/c, H, W, c) f32, f16 and bf16 inputs whose sizes other than the
    batch are known at build time, with the machine's widest vectors whose lanes divide the block c (None where no
    width does, or the machine has no vector FMA)."""
    dtype = common_dtype(task, MAX_POOL_CPU_DTYPES)
    if dtype is None or len(task.inputs) != 1 or len(task.outputs) != 1:
        return None
    (x,), (out,) = task.inputs, task.outputs
    batch, blocks, height, width, block = shape_of(x)
    out_size = tuple(shape_of(out)[2:4])
    if not all(isinstance(d, int) for d in (blocks, height, width, block, *out_size)):
        return None
    lanes = next((n for n in VECTOR_LANES if block % n == 0 and machine_has_lanes(n)), None)
    if lanes is None:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    options = {"blocks": blocks, "height": height, "width": width, "block": block, "out_size": out_size,
               "kernel": tuple(task.attrs["kernel_size"]), "stride": tuple(task.attrs["stride"]),
               "padding": tuple(task.attrs["padding"]), "dilation": tuple(task.attrs["dilation"]), "dtype": dtype,
               "lanes": lanes}
    views = [View(t, lambda i: i) for t in (*task.inputs, *signature.outputs)]
    return TemplateBinding("max_pool2d_blocked_cpu", max_pool2d_blocked_cpu, signature, {"batch": batch}, views,
                           options)
