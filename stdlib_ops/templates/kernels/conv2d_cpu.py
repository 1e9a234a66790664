"""conv2d templates for the CPU over NCHW tensors: an implicit GEMM on the matmul template's micro-kernel, and a
direct schedule for depthwise convolutions (and others of few channels a group).

`out[b, o, y, x] = sum over (ci, ky, kx) of x[b, g * cg + ci, y * sh + ky * dh - ph, x * sw + kx * dw - pw]
* weight[o, ci, ky, kx] (+ bias[o])` with `g = o / og` (`cg = channels / groups`, `og = out_channels / groups`),
accumulated in f32 (f16 operands are converted as they are read). Only the batch may be symbolic: every other
size is a constant of the kernel.

- **Implicit GEMM** (`conv2d_gemm_cpu`). Per image and group a matrix product: M = `og` output channels, N =
  `oh * ow` output pixels, K = `cg * kh * kw`. The blocking is `matmul_cpu`'s (`DEFAULT_BLOCKS`, its `tile_kernel`
  and `micro_kernel`): macro tiles of at most `mc x nc` spread over the threads by one parallel loop over images x
  groups x row tiles x column tiles, cut into a multiple of `min_tiles` where there are few (the longer side of the
  product first); a k block of `kc` at a time, `a` (the weights) packed in `mr`-row panels and `b` in
  `IM2COL_PANEL`-column panels. The im2col is done while packing
  `b`, straight from `x` with no im2col buffer: a packed row (one `(ci, ky, kx)`) of a panel is cut into runs within
  one output row (`(oy, ox)` walked incrementally, no division per element), and each run into a left padding of
  zeros, an interior copied from one input row (contiguous for stride 1, so the C compiler vectorizes it) and a
  right padding of zeros; the bounds of the interior come from `(ky, kx)` once per run. After the last k block the
  tile is stored into `out` element by element (with the bias), which is where a fused epilogue lands.
- **Direct** (`conv2d_direct_cpu`), for depthwise and narrow grouped convolutions (any `cg`, any `og`). The
  threads share the (image, output channel) planes; a plane's output row is an f32 row accumulator (in the L1
  cache) that takes, for each `(ci, ky, kx)`, a weight times a row of the input, along `ox` (vectorized;
  contiguous for stride 1). A tap's range of `ox` is cut to where it reads inside the input, so the loop has no
  bounds checks and the padding (zeros) costs nothing.

Choosing per shape (`conv2d_schedule`, what `conv2d_on_cpu` applies): the direct schedule when a group has at most 2
input channels (`cg <= 2`: depthwise convolutions and the narrowest grouped ones), the implicit GEMM otherwise.
A graph packs constant weights once (`conv2d_packed`); those of a 3x3 or larger kernel with wide groups are read by
the direct template of `conv2d_cpu_channels` instead (vectors along the output channels, no im2col: 1.3-1.6x the
implicit GEMM on ResNet-18's layers, see `conv2d_packed_on_cpu`);
the rule-based scheduler is slower than both everywhere measured, so no shape is declined. The direct schedule
runs at ~25 GFLOP/s whatever `cg` (a row update per tap), the implicit GEMM's micro-kernel wastes the rows of a
micro-tile (8) a group lacks and its packing is paid per tap, so the direct one wins only for few channels a group.
Measured on this project's 2-core AVX-512 machine (shared with other work, so within ~20% and sometimes far worse;
best of 40 runs), milliseconds, 3x3 kernels stride 1 padding 1 unless said, with onnxruntime 1.32 (2 threads):

==================================================  =======  ======  ==========  =====
input, weight (groups)                              gemm     direct  rule-based  ORT
==================================================  =======  ======  ==========  =====
1x64x56x56, 64x64 (1)                               1.48     -       146         1.37
1x64x56x56, 64x1 (64, depthwise)                    0.37     0.15    10.7        0.32
1x256x56x56, 256x1 (256, depthwise)                 1.77     0.54    -           1.36
1x64x56x56, 64x2 (32)                               0.49     0.28    -           0.44
1x64x56x56, 64x4 (16)                               0.53     0.56    5.7         0.46
1x64x56x56, 64x8 (8)                                0.53     1.17    -           1.00
1x3x224x224, 32x3 stride 2 (1)                      0.21     -       6.1         0.22
1x3x224x224, 64x3x7x7 stride 2 padding 3 (1)        2.02     -       -           3.34
1x256x56x56, 64x256x1x1 padding 0 (1)               0.66     -       -           0.57
==================================================  =======  ======  ==========  =====

Both kernels follow the kernel contract: `x`, `weight` and `bias` are only read element by element, `out` only
stored element by element.
"""

from __future__ import annotations

import math

import numpy as np

from hidet_lang import attrs, f32, grid, i32, i64, register_tensor, script, script_module
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype, shape_of
from stdlib_ops.templates.cpu_lanes import machine_lanes, template_lanes
from stdlib_ops.templates.cpu_threads import machine_threads
from stdlib_ops.templates.kernels.conv2d_cpu_channels import (
    band_rows,
    blocks_fit,
    conv2d_channel_vectors_cpu,
    panel_channels,
)
from stdlib_ops.templates.kernels.conv2d_geometry import Pair, bind_conv2d, conv_geometry
from stdlib_ops.templates.kernels.matmul_cpu import DEFAULT_BLOCKS, MAX_LOCAL_BYTES, row_panels, tile_kernel
from stdlib_ops.templates.params import Size, require
from stdlib_ops.templates.registry import LIBRARY_CPU, library_template
from stdlib_ops.templates.views import View

CONV2D_CPU_DTYPES = ("float32", "float16", "bfloat16")

IM2COL_PANEL = 128
"""The width of the packed panels of `b` in the implicit GEMM, where `nc` is a multiple of it (else the widest that
divides `nc`): a packed row of a panel is copied from the input in runs within one output row, and wider panels
make longer runs (at the benchmark's 64 -> 64 channels on 56x56, 8% faster than matmul_cpu's 32-column panels)."""


def conv2d_schedule(channels: int, groups: int) -> str:
    """The template `conv2d_on_cpu` uses for a convolution (the rule measured in the module's docstring): `'direct'`
    when a group has at most 2 input channels (depthwise convolutions among them), `'gemm'` (the implicit GEMM)
    otherwise."""
    return "direct" if channels // groups <= 2 else "gemm"


def _tiles(units: int, m: int, n: int, mr: int, nr: int, mc: int, nc: int, min_tiles: int) -> tuple[int, int]:
    """The macro tile `(tile_m, tile_n)` of an `m x n` product done `units` times: at most `mc x nc`, made equal
    (whole micro-tiles), and cut further until there are at least `min_tiles` tiles in all and a multiple of
    `min_tiles` of them where the size allows (so that 2 or 4 threads end together). The longer side is cut: every
    extra column tile packs the weights (`m x k`) again, every extra row tile the input's columns (`k x n`)."""

    def equal(size: int, tiles: int, unit: int) -> int:
        share = -(-size // tiles)
        return -(-share // unit) * unit

    def count(tile_m: int, tile_n: int) -> int:
        return units * -(-m // tile_m) * -(-n // tile_n)

    tile_m, tile_n = equal(m, -(-m // mc), mr), equal(n, -(-n // nc), nr)
    rows_first = m > n
    start, stop, unit = (-(-m // tile_m), -(-m // mr), mr) if rows_first else (-(-n // tile_n), -(-n // nr), nr)
    for tiles in range(start, stop + 1):  # the first count of tiles that balances the threads
        cut = equal(m if rows_first else n, tiles, unit)
        candidate = (cut, tile_n) if rows_first else (tile_m, cut)
        total = count(*candidate)
        if total >= 16 * min_tiles or total >= min_tiles and total % min_tiles == 0:
            return candidate
    return (mr, tile_n) if rows_first else (tile_m, nr)  # as many tiles as there are micro-tiles


def _panel_width(tile_n: int, nr: int, nc: int) -> int:
    """The width of the packed panels of `b` for macro tiles `tile_n` columns wide: `IM2COL_PANEL` where `nc` is a
    multiple of it (else the widest that divides `nc`), or one panel of the tile's whole micro-panels where that is
    narrower (7x7 outputs: 64 columns packed for 49 pixels, not 128)."""
    return min(math.gcd(IM2COL_PANEL, nc), -(-tile_n // nr) * nr)


def pack_conv2d_weights(weight: np.ndarray, groups: int, lanes: int | None = None,
                        rows: int | None = None) -> np.ndarray:
    """A convolution's weights `[out_channels, channels / groups, kh, kw]` as the f32 panels the implicit GEMM reads
    with `packed=True`: per group, its output channels in panels of `rows` (None: `mr`, the micro-tile's rows for
    `lanes`; None: the machine's widest), zero-padded past the last; panel p holds, for each
    k = `(ci * kh + ky) * kw + kx`, the `rows` weights of its channels (`[groups * panels, k, rows]`). The direct
    template `conv2d_channel_vectors_cpu` reads the same layout with `rows` its vectors' channels."""
    height = DEFAULT_BLOCKS[template_lanes("pack_conv2d_weights", lanes)].mr if rows is None else rows
    by_group = weight.reshape(groups, weight.shape[0] // groups, -1)  # a group's [og, k] rows
    return np.concatenate([row_panels(group, height) for group in by_group])


@script
def next_tap(ci: ~i32, ky: ~i32, kx: ~i32, kh: i32, kw: i32):
    """Step (`ci`, `ky`, `kx`), the input channel and the tap of one row of the implicit GEMM's k, to the next row:
    the tap's column fastest, then its row, then the channel."""
    attrs.func_kind = "cpu_internal"
    kx[0] = kx[0] + 1
    if kx[0] == kw:
        kx[0] = 0
        ky[0] = ky[0] + 1
        if ky[0] == kh:
            ky[0] = 0
            ci[0] = ci[0] + 1


def conv2d_gemm_cpu(batch: Size, channels: int, height: int, width: int, out_channels: int, kernel: Pair,
                    stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1,
                    bias: bool = False, dtype: str = "float32", *, packed: bool = False, lanes: int | None = None,
                    mc: int | None = None, nc: int | None = None, kc: int | None = None,
                    min_tiles: int = 4) -> ScriptModule:
    """A module with one CPU kernel `conv2d(<batch if symbolic>, x, weight[, bias], out)`: the convolution as an
    implicit GEMM (see the module's docstring).

    `x: dtype[batch, channels, height, width]`, `weight: dtype[out_channels, channels / groups, *kernel]`,
    `bias: dtype[out_channels]` (when `bias`), `out: dtype[batch, out_channels, oh, ow]`; `batch` is an int or a
    symbolic name. With `packed`, `weight` is instead the f32 panels `pack_conv2d_weights` makes of it once
    (`f32[groups * ceil(out_channels / groups / mr), channels / groups * kh * kw, mr]`, `mr` the micro-tile's rows for
    `lanes`), which the micro-kernel reads where they lie: no packing of the weights per call. Schedule parameters:
    `lanes` (the vector width; None: the machine's widest), the cache blocks
    `mc`, `nc`, `kc` (None: `DEFAULT_BLOCKS`' for the width) and `min_tiles` (the least number of macro tiles,
    and what their count is a multiple of where the size allows)."""
    name = "conv2d_gemm_cpu"
    geo, dt = conv_geometry(name, batch, channels, height, width, out_channels, kernel, stride, padding, dilation,
                            groups, "NCHW", dtype, CONV2D_CPU_DTYPES)
    oh, ow = geo.out_size
    lanes = template_lanes(name, lanes)
    require(lanes in DEFAULT_BLOCKS, name, f"lanes must be one of {', '.join(map(str, DEFAULT_BLOCKS))}")
    blocks = DEFAULT_BLOCKS[lanes]
    mr, nr = blocks.mr, blocks.nr
    mc, nc, kc = (blocks.mc if mc is None else mc, blocks.nc if nc is None else nc, blocks.kc if kc is None else kc)
    require(min(mc, nc, kc, min_tiles) >= 1, name, "block sizes must be positive")
    require(mc % mr == 0 and math.gcd(IM2COL_PANEL, nc) % nr == 0, name,
            f"mc must be a multiple of {mr} and nc of {nr}")
    require(4 * (mc * kc + kc * nc + mc * nc) <= MAX_LOCAL_BYTES, name,
            f"the packed blocks and the tile must fit in {MAX_LOCAL_BYTES // 1024} KB")
    h, w, kh, kw = height, width, kernel[0], kernel[1]
    (sh, sw), (ph, pl), (dh, dw) = stride, padding, dilation
    cg, og = channels // groups, out_channels // groups
    m, n, k = og, oh * ow, cg * kh * kw
    tile_m, tile_n = _tiles(groups * (batch if isinstance(batch, int) else 1), m, n, mr, nr, mc, nc, min_tiles)
    tiles_m, tiles_n = -(-m // tile_m), -(-n // tile_n)
    pw = _panel_width(tile_n, nr, nc)
    tile = tile_kernel(lanes, mr, nr, pw, nc)
    has_bias = bias
    group_panels = -(-m // mr)  # the weights' panels of a group, when packed
    weight_type = f32[groups * group_panels, k, mr] if packed else dt[out_channels, cg, kh, kw]
    a_block = 1 if packed else mc * kc  # the tile's packed block of the weights (none when packed once)

    with script_module() as module:

        @script
        def conv2d(batch: i32, x: dt[batch, channels, h, w], weight: weight_type, bias: dt[out_channels],
                   out: dt[batch, out_channels, oh, ow]):
            attrs.func_kind = "cpu_kernel"
            for bi, g, tile_row, tile_col in grid(batch, groups, tiles_m, tiles_n, attrs="pppp"):
                m0 = tile_row * tile_m
                n0 = tile_col * tile_n
                rows = min(tile_m, m - m0)
                cols = min(tile_n, n - n0)
                panels_m = (rows + mr - 1) // mr
                panels_b = (cols + pw - 1) // pw
                packed_a = register_tensor(f32, [a_block])
                packed_b = register_tensor(f32, [kc * nc])
                acc = register_tensor(f32, [mc * nc])  # row-major, nc columns a row
                oy0 = n0 // ow  # the output pixel of the tile's first column
                ox0 = n0 % ow
                ci0: i32 = 0  # (ci0, ky0, kx0): the first k of the block
                ky0: i32 = 0
                kx0: i32 = 0
                for k0 in range(0, k, kc):
                    depth = min(kc, k - k0)
                    if not packed:
                        for p in range(panels_m):  # a panel of the weights: depth x mr, row r at column r
                            panel = p * mr * depth
                            o0 = g * og + m0 + p * mr
                            live = min(mr, m - m0 - p * mr)
                            ci: i32 = ci0
                            ky: i32 = ky0
                            kx: i32 = kx0
                            for kk in range(depth):
                                for r in range(mr):
                                    packed_a[panel + kk * mr + r] = f32(weight[o0 + r, ci, ky, kx]) if r < live else 0.0
                                next_tap(~ci, ~ky, ~kx, kh, kw)
                    for kk in range(depth):  # a row of the panels of b: one (ci, ky, kx), im2col by runs
                        channel = g * cg + ci0
                        dy = ky0 * dh - ph
                        dx = kx0 * dw - pl
                        first_ox = 0 if dx >= 0 else (sw - 1 - dx) // sw  # the ox that read inside the input row
                        end_ox = 0 if w - dx <= 0 else min(ow, (w - dx + sw - 1) // sw)
                        for q in range(panels_b):
                            dst = q * pw * depth + kk * pw
                            y = oy0 + (ox0 + q * pw) // ow
                            x1 = (ox0 + q * pw) % ow
                            j = 0
                            while j < pw:  # runs within one output row: zeros, a copy of an input row, zeros
                                run = min(pw - j, ow - x1)
                                iy = y * sh + dy
                                lo = 0
                                hi = 0
                                if y < oh and iy >= 0 and iy < h:  # else padding, or past the last pixel
                                    lo = min(max(first_ox - x1, 0), run)
                                    hi = min(max(end_ox - x1, lo), run)
                                for u in range(i64(lo)):
                                    packed_b[dst + j + u] = 0.0
                                for u in range(i64(lo), i64(hi)):
                                    packed_b[dst + j + u] = f32(x[bi, channel, iy, (x1 + u) * sw + dx])
                                for u in range(i64(hi), i64(run)):
                                    packed_b[dst + j + u] = 0.0
                                j += run
                                y += 1
                                x1 = 0
                        next_tap(~ci0, ~ky0, ~kx0, kh, kw)
                    if packed:  # the panels of the weights where they lie, k floats x mr apart
                        tile(panels_m, (cols + nr - 1) // nr, cols, depth, ~weight[g * group_panels + m0 // mr, k0, 0],
                             k * mr, ~packed_b[0], pw * depth, ~acc[0], k0 == 0)
                    else:
                        tile(panels_m, (cols + nr - 1) // nr, cols, depth, ~packed_a[0], mr * depth, ~packed_b[0],
                             pw * depth, ~acc[0], k0 == 0)
                for i in range(rows):
                    oc = g * og + m0 + i
                    shift = f32(bias[oc]) if has_bias else 0.0
                    y = oy0
                    x0 = ox0
                    j = 0
                    while j < cols:  # runs within one output row
                        run = min(cols - j, ow - x0)
                        for u in range(i64(run)):
                            out[bi, oc, y, x0 + u] = dt(acc[i * nc + j + u] + shift)
                        j += run
                        y += 1
                        x0 = 0

    return bind_conv2d(module, batch, has_bias)


def conv2d_direct_cpu(batch: Size, channels: int, height: int, width: int, out_channels: int, kernel: Pair,
                      stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1,
                      bias: bool = False, dtype: str = "float32") -> ScriptModule:
    """A module with one CPU kernel `conv2d(<batch if symbolic>, x, weight[, bias], out)`: the convolution by the
    direct schedule (see the module's docstring), meant for depthwise convolutions and those of few channels a
    group.

    Tensors and sizes as for `conv2d_gemm_cpu`."""
    name = "conv2d_direct_cpu"
    geo, dt = conv_geometry(name, batch, channels, height, width, out_channels, kernel, stride, padding, dilation,
                            groups, "NCHW", dtype, CONV2D_CPU_DTYPES)
    oh, ow = geo.out_size
    h, w, kh, kw = height, width, kernel[0], kernel[1]
    (sh, sw), (ph, pl), (dh, dw) = stride, padding, dilation
    cg, og = channels // groups, out_channels // groups
    has_bias = bias

    with script_module() as module:

        @script
        def conv2d(batch: i32, x: dt[batch, channels, h, w], weight: dt[out_channels, cg, kh, kw],
                   bias: dt[out_channels], out: dt[batch, out_channels, oh, ow]):
            attrs.func_kind = "cpu_kernel"
            for t in grid(batch * out_channels, attrs="p"):  # the (image, output channel) planes
                bi = t // out_channels
                oc = t % out_channels
                g = oc // og
                shift = f32(bias[oc]) if has_bias else 0.0
                row = register_tensor(f32, [ow])
                for y in range(oh):
                    for u in range(i64(ow)):
                        row[u] = shift
                    for ci, ky in grid(cg, kh):
                        iy = y * sh + ky * dh - ph
                        if iy >= 0 and iy < h:
                            for kx in range(kw):
                                dx = kx * dw - pl
                                first_ox = 0 if dx >= 0 else (sw - 1 - dx) // sw  # the ox that read inside
                                end_ox = 0 if w - dx <= 0 else min(ow, (w - dx + sw - 1) // sw)
                                tap = f32(weight[oc, ci, ky, kx])
                                for u in range(i64(first_ox), i64(end_ox)):
                                    row[u] += tap * f32(x[bi, g * cg + ci, iy, u * sw + dx])
                    for u in range(i64(ow)):
                        out[bi, oc, y, u] = dt(row[u])

    return bind_conv2d(module, batch, has_bias)


@library_template("conv2d", LIBRARY_CPU)
def conv2d_on_cpu(task: Task) -> TemplateBinding | None:
    """The implicit GEMM on the matmul micro-kernel, or the direct schedule for few channels a group, for f32 and
    f16 tensors whose sizes other than the batch are known at build time, where the machine has vector FMA."""
    dtype = common_dtype(task, CONV2D_CPU_DTYPES)
    if dtype is None or len(task.inputs) not in (2, 3) or len(task.outputs) != 1 or machine_lanes() is None:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    (batch, channels, height, width), (out_channels, _, kh, kw) = shape_of(task.inputs[0]), shape_of(task.inputs[1])
    if not all(isinstance(d, int) for d in (channels, height, width, out_channels, kh, kw)):
        return None
    groups = int(task.attrs["groups"])
    schedule = conv2d_schedule(channels, groups)
    template = conv2d_direct_cpu if schedule == "direct" else conv2d_gemm_cpu
    options = {"channels": channels, "height": height, "width": width, "out_channels": out_channels,
               "kernel": (kh, kw), "stride": tuple(task.attrs["stride"]), "padding": tuple(task.attrs["padding"]),
               "dilation": tuple(task.attrs["dilation"]), "groups": groups, "bias": len(task.inputs) == 3,
               "dtype": dtype}
    views = [View(t, lambda i: i) for t in (*task.inputs, *signature.outputs)]
    return TemplateBinding(template.__name__, template, signature, {"batch": batch}, views, options)


@library_template("conv2d_packed", LIBRARY_CPU)
def conv2d_packed_on_cpu(task: Task) -> TemplateBinding | None:
    """The kernel reading weights packed once (`conv2d_packed`), by the panels' height: two vectors of channels, the
    direct template `conv2d_channel_vectors_cpu` (where its slab fits); the micro-tile's rows, the implicit GEMM
    (`conv2d_gemm_cpu` with `packed`), with as few macro tiles as keep every thread busy (`min_tiles`: the threads,
    not 4: with no weights to pack, a tile's cost beyond its arithmetic is the im2col of its columns, which every
    extra row tile does again). Either way the input and output share a dtype the templates take.

    Which height the graph packs is `suits_channel_vectors`' choice. Measured on ResNet-18's convolutions, batch 1,
    2 threads (AVX-512), in turns, medians, milliseconds: the implicit GEMM, the direct template, torch (oneDNN):

    ===============================  ======  ======  =====
    input, weight, stride            GEMM    direct  torch
    ===============================  ======  ======  =====
    64x56x56, 64x3x3                 1.251   0.897   1.005
    64x56x56, 128x3x3, 2             0.645   0.454   0.596
    128x28x28, 128x3x3               1.122   0.801   0.882
    128x28x28, 256x3x3, 2            0.711   0.435   0.589
    256x14x14, 256x3x3               1.318   0.802   0.969
    256x14x14, 512x3x3, 2            0.751   0.557   0.787
    512x7x7, 512x3x3                 1.455   1.057   1.291
    3x224x224, 64x7x7, 2 (pad 3)     1.209   0.854   0.940
    64x56x56, 128x1x1, 2 (pad 0)     0.088   0.102   0.176
    ===============================  ======  ======  =====
    """
    lanes = machine_lanes()
    dtypes = {task.inputs[0].type.dtype.name, *(o.dtype.name for o in task.outputs)}
    dtypes |= {t.type.dtype.name for t in task.inputs[2:]}
    if lanes is None or len(dtypes) != 1 or next(iter(dtypes)) not in CONV2D_CPU_DTYPES:
        return None
    x_shape, rows, attrs = shape_of(task.inputs[0]), shape_of(task.inputs[1])[-1], task.attrs
    batch, height, width = x_shape[0], x_shape[2], x_shape[3]
    in_block, out_block = (x_shape[4] if len(x_shape) == 5 else 0), attrs["out_block"]
    channels = x_shape[1] * max(in_block, 1)
    options = {"channels": channels, "height": height, "width": width, "out_channels": attrs["out_channels"],
               "kernel": tuple(attrs["kernel"]), "stride": tuple(attrs["stride"]),
               "padding": tuple(attrs["padding"]), "dilation": tuple(attrs["dilation"]), "groups": attrs["groups"],
               "bias": len(task.inputs) == 3, "dtype": dtypes.pop(), "lanes": lanes, "min_tiles": machine_threads()}
    geometry = [options[key] for key in ("kernel", "stride", "padding", "dilation")]
    if (rows == panel_channels(lanes) and band_rows(channels // attrs["groups"], height, width, *geometry) >= 1
            and blocks_fit(channels, attrs["out_channels"], attrs["groups"], in_block, out_block, lanes)):
        template = conv2d_channel_vectors_cpu
        options.update(in_block=in_block, out_block=out_block)
    elif in_block or out_block:  # only the channel vectors' template reads and writes blocks of channels
        return None
    elif rows == DEFAULT_BLOCKS[lanes].mr:
        template, options = conv2d_gemm_cpu, {**options, "packed": True}
    else:
        return None
    signature = kernel_signature(task.inputs, task.outputs)
    views = [View(t, lambda i: i) for t in (*task.inputs, *signature.outputs)]
    return TemplateBinding(template.__name__, template, signature, {"batch": batch}, views, options)
