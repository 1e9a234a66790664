"""A direct conv2d template for the CPU over NCHW tensors, or tensors in blocks of channels, with weights packed
once: vectors along the output channels, broadcasts of the input, no im2col (`conv2d_channel_vectors_cpu`).

`out[b, o, y, x] = sum over (ci, ky, kx) of x[b, g * cg + ci, y * sh + ky * dh - ph, x * sw + kx * dw - pw]
* weight[o, ci, ky, kx] (+ bias[o])`, accumulated in f32, with the weights given as the f32 panels
`pack_conv2d_weights(weight, groups, rows=nr)` makes of them when the graph is built: per group, `nr` output
channels a panel (two vectors), their weights for each tap `k = (ci * kh + ky) * kw + kx` side by side.

- **Slabs.** The unit of parallel work is (image, group, band of output rows, chunk of the group's panels). It
  first copies the input rows its band reads, the group's channels, into a local f32 slab with the padding written
  as zeros (`slab[ci, row, col]`, `col` counting from the first padding column; with the input in blocks of `c`
  channels, `slab[ci / c, row, col, ci % c]`, each pixel's run of channels copied whole): the only place `x` is
  read, one element at a time (where a fused prologue lands; f16 and bf16 convert here). Along an axis where the
  kernel is one tap, the slab holds only the rows or columns the taps read (a strided 1x1 convolution copies its
  output's pixels alone: ResNet's 64 -> 128-channel 1x1 stride-2 shortcut in blocks, batch 1, 0.169 -> 0.135 ms).
  Past that, no bounds are checked.
- **Micro-kernel.** A `cpu_internal` function kept out of line computes a run of up to `MAX_PIXELS` output pixels
  by the `nr` channels of a panel over every tap: two vector accumulators a pixel in registers (28 of 32 with
  AVX-512); per tap two vectors of weights (the panel's row, read in order) and a broadcast of an input value a
  pixel from the slab, two fused multiply-adds a pixel. The pixels are unrolled; the fewer there are, the more
  weight bytes a multiply-add streams from L2. A row of `ow` pixels is cut into `ceil(ow / MAX_PIXELS)` runs as
  equal as can be (two micro-kernels, `mr` and `mr + 1` pixels, where `ow` does not divide): 56 -> 4 x 14; rows
  shorter than half of `MAX_PIXELS` go several to a run: 7 -> 2 rows of 7 (a band's last odd row alone), which
  took ResNet-18's 512-channel 7x7 layer from 1.06 to 0.84 ms.
- **Order.** Within a unit, panel by panel and, in a panel, row by row: a panel's weights (`K * nr` floats, 590 KB
  at 512 channels 3x3) stay in L2 while every pixel of the band passes, and the slab too. Work is split into more
  bands or more chunks only to give every thread a unit (`min_tiles` of them in all where the sizes allow): chunks
  where the group's weights outweigh its slab (a band reads every weight of its panels again), bands otherwise (a
  chunk copies its slab again).
- **Output.** The micro-kernels leave their tiles side by side in a local array, a block of whole output rows of a
  panel (`STORE_FLOATS`, or within L1 for few taps: `FEW_TAPS`); the kernel then stores the block into `out`
  element by element, with the bias (where a fused epilogue lands), channel by channel: each channel's rows of the
  block are one run of `out`, and so are a fused residual's reads (a run of 14 pixels at a time had the residual's
  lines fetched 14 floats at a time: ResNet's 64-channel 3x3 layer with its residual add and ReLU, batch 8, 9.6 ->
  8.0 ms; batch 1 1.23 -> 1.12 ms). An output in blocks of `nr` channels (`out_block`) is stored pixel by pixel,
  each pixel's `nr` channels a run of `out`, as the tile holds them: one vector store a pixel where NCHW takes `nr`
  scalar ones.

The padding of the input makes each tap a plain offset: a convolution's bounds are paid once per input element
(the slab's copy) rather than per tap and pixel, as the implicit GEMM's im2col pays them (its packed panels are
`K` times the pixels). Measured against the implicit GEMM on ResNet-18's layers (batch 1, 2 threads): see
`conv2d_packed_on_cpu`.

The kernel follows the kernel contract: `x` and `bias` are only read element by element, `out` only stored element
by element; the panels (a constant of the graph no prologue is fused into) are handed to the micro-kernel by
address.
"""

from __future__ import annotations

from hidet_lang import attrs, f32, grid, i32, i64, meta, register_tensor, script, script_module
from hidet_lang import cpu as vectors
from hidet_lang.frontend.script import ScriptFunction, ScriptModule
from stdlib_ops.templates.cpu_lanes import template_lanes
from stdlib_ops.templates.kernels.conv2d_geometry import Pair, bind_conv2d, conv_geometry, output_size
from stdlib_ops.templates.params import Size, require

CONV2D_CHANNELS_DTYPES = ("float32", "float16", "bfloat16")

MAX_PIXELS = {16: 14, 8: 6, 4: 6}
"""The most output pixels a micro-kernel computes at once, per vector width: `2 * mr` accumulators, two vectors of
weights and a broadcast in the vector registers (32 with AVX-512, 16 below)."""

PREFETCH_TAPS = 64
"""How far ahead of the taps it multiplies the micro-kernel asks for the panel's weights (a software prefetch a
cache line): the panels stream from memory where the weights are a graph's (ResNet-18's 9.4 MB at 512 channels
leave every cache between calls), in 4 KB pages the hardware's prefetcher follows one at a time. 512 channels
7x7, weights not cached (12 copies in turn): 1.22 -> 0.91 ms; 256 channels 14x14: 1.09 -> 0.70 ms; 16 taps ahead
gained less, 128 no more."""

STORE_FLOATS = 16 * 1024
"""About the most floats of results a unit keeps before storing them (64 KB): whole output rows, so that each
channel's stores, and the reads of a fused epilogue's other inputs (a residual), are runs of several rows."""

FEW_TAPS = 256
"""Below this many taps (input channels x kernel taps: ResNet's stem has 3 x 49 = 147), a call of the micro-kernel
computes too little to hide its results' copy-out: the block of results is then kept within L1 (`L1_STORE_FLOATS`),
whose channel-by-channel reads of the pixels' vectors (32 floats apart) otherwise wait on L2. The stem, batch 1:
1.20 -> 1.08 ms, batch 8: 9.8 -> 8.8; a 64-channel 3x3 layer with a fused residual, batch 8, lost 5% that way
(shorter runs of the residual's reads), so the other convolutions keep `STORE_FLOATS`."""

L1_STORE_FLOATS = 8 * 1024
"""The block of results of a convolution of `FEW_TAPS` (32 KB, within a core's L1 beside the slab's lines)."""

SLAB_FLOATS = 256 * 1024
"""The most floats a unit's slab of padded input holds (1 MB: within a core's L2 beside a panel of weights, and far
below the local-array limit); a band has as many output rows as fit."""


def panel_channels(lanes: int) -> int:
    """The output channels of a panel, `nr`: two vectors of `lanes` floats."""
    return 2 * lanes


def slab_strides(kernel: Pair, stride: Pair) -> Pair:
    """The strides of the output pixels within a slab: the convolution's, except along an axis where the kernel is
    one tap wide, whose slab holds only the input rows or columns the taps read (a strided 1x1 convolution's slab is
    its output's pixels: the copy steps over the others)."""
    return (stride[0] if kernel[0] > 1 else 1, stride[1] if kernel[1] > 1 else 1)


def slab_shape(height: int, width: int, kernel: Pair, stride: Pair, padding: Pair,
               dilation: Pair) -> tuple[int, int, int]:
    """`(oh, tap_rows, cols)` of one input channel: the output rows, the slab rows one output row reads and the
    slab's columns (those every output row reads, padding included)."""
    (kh, kw), (sh, sw), (dh, dw) = kernel, stride, dilation
    oh = output_size(height, kh, sh, padding[0], dh)
    ow = output_size(width, kw, sw, padding[1], dw)
    return oh, (kh - 1) * dh + 1, (ow - 1) * slab_strides(kernel, stride)[1] + (kw - 1) * dw + 1


def band_rows(channels: int, height: int, width: int, kernel: Pair, stride: Pair, padding: Pair, dilation: Pair,
              slab_floats: int = SLAB_FLOATS) -> int:
    """The most output rows a band may hold for `channels` input channels a group within `slab_floats` (0 where
    not even one fits)."""
    oh, tap_rows, cols = slab_shape(height, width, kernel, stride, padding, dilation)
    slab_rows = slab_floats // (channels * cols)  # (rows - 1) * sh + tap_rows slab rows for `rows` output rows
    return min(oh, (slab_rows - tap_rows) // slab_strides(kernel, stride)[0] + 1) if slab_rows >= tap_rows else 0


def suits_channel_vectors(channels: int, height: int, width: int, out_channels: int, kernel: Pair, stride: Pair,
                          padding: Pair, dilation: Pair, groups: int, lanes: int) -> bool:
    """Whether the packed convolution is this template's rather than the implicit GEMM's: a kernel of more than one
    tap (a 1x1 convolution's micro-kernel would loop over the channels alone and its stores would weigh: the GEMM's
    is faster, 0.088 vs 0.102 ms at 64 -> 128 channels 56x56 stride 2), a slab of one output row within
    `SLAB_FLOATS`, and panels at least 3/4 full of a group's channels (the GEMM's panels are 4 times narrower)."""
    og, nr = out_channels // groups, panel_channels(lanes)
    return (kernel[0] * kernel[1] > 1 and 4 * og >= 3 * nr * -(-og // nr)
            and band_rows(channels // groups, height, width, kernel, stride, padding, dilation) >= 1)


def blocks_fit(channels: int, out_channels: int, groups: int, in_block: int, out_block: int, lanes: int) -> bool:
    """Whether the template reads its input in blocks of `in_block` channels (0: NCHW) and writes its output in
    blocks of `out_block` (0: NCHW) for a convolution of `channels` -> `out_channels` in `groups` groups: a block of
    input channels within one group, a block of output channels one panel (`nr`), whole panels a group."""
    cg, og, nr = channels // groups, out_channels // groups, panel_channels(lanes)
    return (in_block >= 0 and (in_block == 0 or cg % in_block == 0)
            and out_block in (0, nr) and (out_block == 0 or og % nr == 0))


def _split(units: int, min_tiles: int, bands: int, oh: int, panels: int, weights_first: bool) -> tuple[int, int]:
    """`(bands, chunks)`: at least `bands` bands (of at most `oh`) and one chunk (of at most `panels`), more of the
    cheaper kind (chunks when `weights_first`: the weights outweigh the slab) until `units * bands * chunks` reaches
    `min_tiles`."""
    chunks = 1
    for cheap in (("chunks", "bands") if weights_first else ("bands", "chunks")):
        need = -(-min_tiles // (units * bands * chunks))
        if cheap == "chunks":
            chunks = min(panels, chunks * need)
        else:
            bands = min(oh, bands * need)
    return bands, chunks


def conv2d_channel_vectors_cpu(batch: Size, channels: int, height: int, width: int, out_channels: int,
                               kernel: Pair, stride: Pair = (1, 1), padding: Pair = (0, 0),
                               dilation: Pair = (1, 1), groups: int = 1, bias: bool = False,
                               dtype: str = "float32", in_block: int = 0, out_block: int = 0, *,
                               lanes: int | None = None, min_tiles: int = 4, slab_floats: int = SLAB_FLOATS,
                               store_floats: int | None = None) -> ScriptModule:
    """A module with one CPU kernel `conv2d(<batch if symbolic>, x, weight[, bias], out)`: the convolution directly
    from slabs of padded input, vectors along the output channels (see the module's docstring).

    `x: dtype[batch, channels, height, width]`, `weight: f32[groups * ceil(og / nr), cg * kh * kw, nr]` (the
    panels `pack_conv2d_weights(w, groups, rows=nr)` makes, `nr = 2 * lanes`), `bias: dtype[out_channels]` (when
    `bias`), `out: dtype[batch, out_channels, oh, ow]`; `batch` is an int or a symbolic name. With `in_block` > 0,
    `x` is in blocks of as many channels, `dtype[batch, channels / in_block, height, width, in_block]` (dividing a
    group's channels); with `out_block` (`nr`, dividing a group's output channels), `out` is `dtype[batch,
    out_channels / nr, oh, ow, nr]` (`stdlib_ops.operators.channel_blocks`). Schedule parameters:
    `lanes` (the vector width; None: the machine's widest), `min_tiles` (the least number of units of work where
    the sizes allow: the threads), `slab_floats` (the most floats of a slab, which sets the bands' rows) and
    `store_floats` (about the most floats of results kept before they are stored; None: `L1_STORE_FLOATS` for fewer
    than `FEW_TAPS` taps, else `STORE_FLOATS`)."""
    name = "conv2d_channel_vectors_cpu"
    geo, dt = conv_geometry(name, batch, channels, height, width, out_channels, kernel, stride, padding, dilation,
                            groups, "NCHW", dtype, CONV2D_CHANNELS_DTYPES)
    lanes = template_lanes(name, lanes)
    require(lanes in MAX_PIXELS, name, f"lanes must be one of {', '.join(map(str, MAX_PIXELS))}")
    require(min_tiles >= 1, name, "min_tiles must be positive")
    nr = panel_channels(lanes)
    require(blocks_fit(channels, out_channels, groups, in_block, out_block, lanes), name,
            f"blocks of {in_block} input and {out_block} output channels do not fit {channels} -> {out_channels} "
            f"channels in {groups} groups with {nr}-channel panels")
    cb = in_block or 1  # the slab's channels a run of memory, as the input's
    oh, ow = geo.out_size
    h, w, kh, kw = height, width, kernel[0], kernel[1]
    (sh, sw), (ph, pl), (dh, dw) = stride, padding, dilation
    cg, og, k = geo.group_channels, geo.group_out_channels, geo.taps
    most_rows = band_rows(cg, h, w, kernel, stride, padding, dilation, slab_floats)
    require(most_rows >= 1, name, f"one output row's slab ({cg} channels) exceeds {slab_floats} floats")
    _, tap_rows, cols = slab_shape(h, w, kernel, stride, padding, dilation)
    ssh, ssw = slab_strides(kernel, stride)
    row_step, col_step = sh // ssh, sw // ssw  # the input rows and columns a slab row and column step over
    first_col, end_col = min(-(-pl // col_step), cols), min(-(-(pl + w) // col_step), cols)  # those inside
    group_panels = -(-og // nr)
    weight_floats, band_floats = og * k, cg * cols * ((most_rows - 1) * ssh + tap_rows)
    bands, chunks = _split(groups * (batch if isinstance(batch, int) else 1), min_tiles, -(-oh // most_rows), oh,
                           group_panels, weight_floats > band_floats)
    rows_per_band = -(-oh // bands)
    bands = -(-oh // rows_per_band)
    panels_per_chunk = -(-group_panels // chunks)
    chunks = -(-group_panels // panels_per_chunk)
    slab_rows = (rows_per_band - 1) * ssh + tap_rows  # slab rows of a band
    block_floats = slab_rows * cols * cb  # the slab of a block of cb channels, pixel by pixel
    most = MAX_PIXELS[lanes]
    runs = -(-ow // most)  # a row of pixels in runs of mr or mr + 1 pixels
    mr, wide = ow // runs, ow % runs  # the first `wide` runs have mr + 1 pixels
    ry = max(1, most // ow)  # rows a run spans where a row is short (a last one of fewer rows: one by one)
    micro = {shape: channel_micro_kernel(lanes, *shape, cg, kh, kw, ssw * cb, ssh * cols * cb, dh * cols * cb,
                                         dw * cb, cb, block_floats)
             for shape in {(ry, mr), (1, mr), (ry, mr + 1 if wide else mr)}}
    broad, narrow, single = micro[ry, mr + 1 if wide else mr], micro[ry, mr], micro[1, mr]
    if store_floats is None:
        store_floats = L1_STORE_FLOATS if k < FEW_TAPS else STORE_FLOATS
    block_rows = max(ry, min(rows_per_band, store_floats // (ow * nr) // ry * ry))  # rows stored at once
    tile_floats = block_rows * ow * nr
    has_bias = bias
    x_shape = (channels // cb, h, w, cb) if in_block else (channels, h, w)
    out_shape = (out_channels // nr, oh, ow, nr) if out_block else (out_channels, oh, ow)
    tap_step = dw * cb

    with script_module() as module:

        @script
        def conv2d(batch: i32, x: dt[(batch,) + x_shape], weight: f32[groups * group_panels, k, nr],
                   bias: dt[out_channels], out: dt[(batch,) + out_shape]):
            attrs.func_kind = "cpu_kernel"
            for bi, g, band, chunk in grid(batch, groups, bands, chunks, attrs="pppp"):
                y0 = band * rows_per_band
                p0 = chunk * panels_per_chunk
                rows = min(rows_per_band, oh - y0)
                slab = register_tensor(f32, [cg * slab_rows * cols])
                tile = register_tensor(f32, [tile_floats])
                iy0 = y0 * sh - ph  # the input row of the slab's first row
                for kb, r in grid(cg // cb, (rows - 1) * ssh + tap_rows):  # slab[kb, r, col, c]: channel kb * cb + c
                    iy = iy0 + r * row_step
                    base = kb * block_floats + r * cols * cb
                    lo = 0
                    hi = 0
                    if iy >= 0 and iy < h:  # else a row of padding
                        lo = first_col
                        hi = end_col
                    for j in range(i64(lo * cb)):
                        slab[base + j] = 0.0
                    if in_block:
                        for j in range(i64(lo), i64(hi)):
                            for c in range(i64(cb)):
                                slab[base + j * cb + c] = f32(x[bi, g * cg // cb + kb, iy, j * col_step - pl, c])
                    else:
                        for j in range(i64(lo), i64(hi)):
                            slab[base + j] = f32(x[bi, g * cg + kb, iy, j * col_step - pl])
                    for j in range(i64(hi * cb), i64(cols * cb)):
                        slab[base + j] = 0.0
                for p in range(p0, min(p0 + panels_per_chunk, group_panels)):
                    oc0 = g * og + p * nr
                    live = min(nr, og - p * nr)
                    for yb in range(0, rows, block_rows):  # a block of rows, its tiles side by side in `tile`
                        block = min(block_rows, rows - yb)
                        y = yb
                        while y < yb + block:
                            run_rows = ry if y + ry <= yb + block else 1
                            for run in range(runs):
                                ox0 = run * mr + min(run, wide)
                                pixels = ~slab[(y * ssh * cols + ox0 * ssw) * cb]
                                panel = ~weight[g * group_panels + p, 0, 0]
                                at = ~tile[((y - yb) * ow + ox0) * nr]
                                if run_rows < ry:
                                    single(pixels, panel, at, kw, tap_step)
                                elif run < wide:
                                    broad(pixels, panel, at, kw, tap_step)
                                else:
                                    narrow(pixels, panel, at, kw, tap_step)
                            y += run_rows
                        if out_block:  # the block's pixels, each a run of nr channels, as the tile holds them
                            for i, u in grid(block, ow):
                                for j in range(i64(nr)):
                                    shift = f32(bias[oc0 + j]) if has_bias else 0.0
                                    out[bi, oc0 // nr, y0 + yb + i, u, j] = dt(tile[(i * ow + u) * nr + j] + shift)
                        else:
                            for j in range(live):  # a channel's rows of the block, one after the other in `out`
                                shift = f32(bias[oc0 + j]) if has_bias else 0.0
                                for i in range(block):
                                    for u in range(i64(ow)):
                                        out[bi, oc0 + j, y0 + yb + i, u] = dt(tile[(i * ow + u) * nr + j] + shift)

    return bind_conv2d(module, batch, has_bias)


def channel_micro_kernel(lanes: int, rows: int, cols: int, channels: int, kh: int, kw: int, sw: int, pixel_row: int,
                         tap_row: int, dw: int, block: int, block_step: int) -> ScriptFunction:
    """The `cpu_internal` function `pixels_<rows>x<cols>x<nr>(slab, panel, tile, taps, tap_step)`: for `rows x
    cols` output pixels (pixel `(i, u)` at `i * pixel_row + u * sw` in the slab from `slab`) and the `nr = 2 * lanes`
    channels of `panel` (`channels * kh * kw` rows of `nr` weights), `tile[(i * cols + u) * nr + j] = sum over
    (ci, ky, kx) of slab[(ci // block) * block_step + ci % block + ky * tap_row + kx * dw + i * pixel_row + u * sw]
    * panel[(ci * kh + ky) * kw + kx, j]`, with `taps` = kw and `tap_step` = dw (the slab holds its channels in
    blocks of `block`, each `block_step` floats: one block of one channel for NCHW's slab).

    The accumulators are a local array read and written only at constant offsets (kept in vector registers by the C
    compiler); the pixels are unrolled while parsing. The kernel's columns are a loop whose count and step are
    arguments: known to the C compiler, it unrolls them and carries the input values one tap shares with the next
    in registers (predictive commoning), which spills the accumulators."""
    load, store, fma, broadcast, setzero, prefetch = (getattr(vectors, f"f32x{lanes}_{op}") for op in
                                                      ("load", "store", "fma", "broadcast", "setzero", "prefetch"))
    nr = panel_channels(lanes)
    panel_vectors = nr // lanes
    pixels = rows * cols
    cells = [(u, v) for u in range(pixels) for v in range(panel_vectors)]  # the accumulators, unrolled while parsing
    offsets = [i * pixel_row + u * sw for i in range(rows) for u in range(cols)]
    name = f"pixels_{rows}x{cols}x{nr}"

    @script
    def micro(slab: ~f32, panel: ~f32, tile: ~f32, taps: i32, tap_step: i32):
        attrs.func_kind = "cpu_internal"
        attrs.func_name = name
        attrs.noinline = True  # compiled on its own: the accumulators get the vector registers
        regs = register_tensor(f32, [pixels * nr])
        weights = register_tensor(f32, [nr])  # a tap's weights
        for u, v in cells:
            store(~regs[u * nr + v * lanes], setzero())
        for kb in range(channels // block):
            for c in range(block):
                for ky in range(kh):
                    tap = slab + kb * block_step + c + ky * tap_row  # (kb * block + c, ky, kx)'s first pixel's value
                    for _ in range(taps):
                        for line in meta.range(0, nr, 16):  # the weights PREFETCH_TAPS taps ahead, a cache line each
                            prefetch(panel + PREFETCH_TAPS * nr + line)
                        for v in meta.range(panel_vectors):
                            store(~weights[v * lanes], load(panel + v * lanes))
                        for u in meta.range(pixels):
                            value = broadcast(tap[offsets[u]])
                            for v in meta.range(panel_vectors):
                                cell = ~regs[u * nr + v * lanes]
                                store(cell, fma(value, load(~weights[v * lanes]), load(cell)))
                        panel = panel + nr
                        tap = tap + tap_step
        for u, v in cells:
            store(tile + u * nr + v * lanes, load(~regs[u * nr + v * lanes]))

    return micro
