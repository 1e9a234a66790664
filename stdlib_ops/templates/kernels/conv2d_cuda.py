"""conv2d templates for CUDA: an f32 implicit GEMM on the CUDA cores, a direct kernel for depthwise convolutions,
and the registration that chooses between them and the tensor-core template (`conv2d_cuda_mma`).

Tensors, layouts and the implicit GEMM's extents are `conv2d_geometry`'s (NCHW, or NHWC with the weight
`[O, KH, KW, C / groups]`); only the batch may be symbolic.

- **f32 implicit GEMM** (`conv2d_cuda_gemm`), per group `out[pixel, o] = sum_k A[pixel, k] * W[o, k]`, with
  `matmul_cuda`'s register blocking: a block computes a `block_m x block_n` tile (pixels x output channels) with
  `(block_m / thread_m) x (block_n / thread_n)` threads, a thread `thread_m` consecutive pixels and `thread_n`
  channels in groups of 4 spread over the tile, its accumulators, pixels and channels register tensors indexed by
  constants. Along K, steps of `block_k` taps are gathered into one of `stages` shared buffers (the tile layer's
  `SharedMemoryPlan` and `CopyPipeline`), both tiles stored k-major (`[block_k, block_m]`, `[block_k, block_n]`
  `tiles.padded_tile`s without padding) so that a thread's 4 pixels or 4 channels of one tap are one 16-byte shared
  read. The gathers are element by element (`async_copy.TileGather`: an element's place in the input depends on
  its tap, and it lands transposed): an element of the input at `(oy * sh + ky * dh - ph, ox * sw + kx * dw -
  pw)`, zero outside it (the padding), in NCHW by consecutive threads along the pixels (coalesced along `ox`), in
  NHWC along k (consecutive channels), the weight along k; the pixels a thread gathers are the same at every step,
  their image and the input row and column of their first tap computed once, into registers indexed by the
  gather's row numbers. The accumulators are stored with the bias where they fall inside the output, which is
  where a fused epilogue lands.
- **Direct** (`conv2d_cuda_direct`), for depthwise convolutions and others of few input channels a group: a thread
  per output element in the output's memory order (consecutive threads: consecutive `ox` in NCHW, consecutive
  output channels in NHWC, so that both the reads and the stores are coalesced) sums its `cg * KH * KW` taps in
  f32, skipping those in the padding.

Choosing (`conv2d_on_cuda`): the direct kernel where a group has at most `DIRECT_CHANNELS` input channels, else the
tensor-core template for f16 and bf16 (and in TF32 for f32 where `hidet.option.allow_tf32(True)` allows it), and
the f32 implicit GEMM for the other f32 convolutions. Both kernels follow the kernel contract: `x`, `weight` and `bias`
are only read element by element, `out` only stored element by element.
"""

from __future__ import annotations

from hidet_lang import attrs, f32, i32, meta, option, register_tensor, script, script_module
from hidet_lang.cuda import blockIdx, threadIdx
from hidet_lang.cuda.async_copy import CopyPipeline, TileGather
from hidet_lang.cuda.tiles import SharedMemoryPlan, padded_tile
from hidet_lang.cuda_limits import MAX_STATIC_SHARED_BYTES
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype, shape_of
from stdlib_ops.templates.kernels.conv2d_cuda_mma import conv2d_cuda_mma
from stdlib_ops.templates.kernels.conv2d_geometry import Pair, bind_conv2d, conv_geometry
from stdlib_ops.templates.kernels.register_tile import CHUNK, register_tile
from stdlib_ops.templates.kernels.tile_order import block_tile, tile_blocks
from stdlib_ops.templates.params import Size, require, tile_for_blocks
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.views import View

CONV2D_CUDA_DTYPES = ("float32", "float16", "bfloat16")
DIRECT_CHANNELS = 2
"""The most input channels a group that `conv2d_on_cuda` gives to the direct kernel (depthwise convolutions have
one): a GEMM of K = cg * KH * KW that small wastes most of a block's tile."""
DIRECT_THREADS = 256

TILES = ((128, 128, 8, 8), (128, 64, 8, 8), (64, 64, 4, 4), (32, 32, 4, 4))
"""The tiles (block_m, block_n, thread_m, thread_n) of the f32 implicit GEMM, largest first."""

ENOUGH_BLOCKS = 132
"""Blocks that keep a large GPU busy (one for each of an H200's 132 SMs)."""


def gemm_tiles(groups: int, m: Size, n: int) -> tuple[int, int, int, int]:
    """The f32 GEMM's tile for `groups` products of `m` pixels by `n` channels: of the tiles that fit them, the
    largest that gives `ENOUGH_BLOCKS` blocks (`tile_for_blocks`)."""
    return tile_for_blocks(TILES, groups, m, n, ENOUGH_BLOCKS)


def conv2d_cuda_gemm(batch: Size, channels: int, height: int, width: int, out_channels: int, kernel: Pair,
                     stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1,
                     bias: bool = False, dtype: str = "float32", layout: str = "NCHW", *, block_k: int = 8,
                     stages: int = 2, tiles: tuple[int, int, int, int] | None = None) -> ScriptModule:
    """A module with one kernel `conv2d(<batch if symbolic>, x, weight[, bias], out)`: the convolution as an f32
    implicit GEMM on the CUDA cores (see the module's docstring).

    Shapes as `conv2d_geometry` gives them for `layout`; `bias: f32[out_channels]` when `bias`; `batch` is an int
    or a symbolic name. `tiles` is `(block_m, block_n, thread_m, thread_n)` (None: `gemm_tiles`), `thread_m`
    and `thread_n` multiples of 4; `block_k` taps a step, `stages` (2 to 8) shared buffers."""
    name = "conv2d_cuda_gemm"
    geo, dt = conv_geometry(name, batch, channels, height, width, out_channels, kernel, stride, padding, dilation,
                            groups, layout, dtype, ("float32",))
    oh, ow = geo.out_size
    og, taps = geo.group_out_channels, geo.taps
    block_m, block_n, thread_m, thread_n = tiles or gemm_tiles(
        groups, batch * oh * ow if isinstance(batch, int) else "m", og)
    # the channels of a thread: q * group_stride + CHUNK * tx + c
    threads_n, threads, groups_n, group_stride = register_tile(
        name, block_m, block_n, thread_m, thread_n, block_k, stages, {"thread_m": thread_m, "thread_n": thread_n})
    nhwc = geo.nhwc
    h, w = geo.height, geo.width
    # both tiles k-major: a thread's 4 pixels or 4 channels of one tap are one 16-byte shared read
    a_tile, w_tile = padded_tile(f32, [block_k, block_m], 0), padded_tile(f32, [block_k, block_n], 0)
    plan = SharedMemoryPlan()
    a_stages, w_stages = plan.tiles(a_tile, stages), plan.tiles(w_tile, stages)
    require(plan.nbytes <= MAX_STATIC_SHARED_BYTES, name, "at most 48 KB of shared memory")
    pipe = CopyPipeline(stages)
    loads_a = block_m * block_k
    require(loads_a % threads == 0 and threads % block_m == 0 and threads % block_k == 0, name,
            "a block's threads must be a multiple of block_m and of block_k, and divide block_m * block_k")
    # the gathers' cells (pixel or output channel, tap): in NHWC consecutive threads along k (a thread's k fixed,
    # its pixels `threads / block_k` apart), in NCHW along the pixels (coalesced along `ox`; a thread's pixel fixed),
    # the weight's along k (its rows)
    a_gather = TileGather(block_m, block_k, threads, "cols" if nhwc else "rows")
    w_gather = TileGather(block_n, block_k, threads, "cols")
    rows_a = a_gather.thread_rows  # the pixels a thread gathers
    pixels = oh * ow
    has_bias = bias

    with script_module() as module:

        @script
        def conv2d(batch: i32, x: geo.x_type(dt, batch), weight: geo.weight_type(dt), bias: dt[out_channels],
                   out: geo.out_type(dt, batch)):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.min_blocks = 2  # at most 128 registers for 256 threads: two blocks an SM hide each other's waits
            attrs.cuda.grid_dim = tile_blocks(batch * pixels, og, block_m, block_n) * groups
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            acc = register_tensor(f32, [thread_m, thread_n])
            ra = register_tensor(f32, [thread_m])
            rb = register_tensor(f32, [thread_n])
            for i in meta.range(thread_m):
                for j in meta.range(thread_n):
                    acc[i, j] = 0.0
            m = batch * pixels
            g: i32 = 0  # the block's group and tile: GROUP_M tile rows at a time, column by column (`tile_order`)
            m0: i32 = 0
            n0: i32 = 0
            block_tile(blockIdx.x, m, og, block_m, block_n, ~g, ~m0, ~n0)
            ty = threadIdx.x // threads_n
            tx = threadIdx.x % threads_n
            a_image = register_tensor(i32, [rows_a])  # per gathered pixel: its image, and the input's row and
            a_y = register_tensor(i32, [rows_a])  # column under its kernel's first tap (`ConvGeometry.first_tap`)
            a_x = register_tensor(i32, [rows_a])
            for row, r in a_gather.rows_of(threadIdx.x):
                a_image[r], a_y[r], a_x[r] = geo.first_tap(m0 + row, m)
            steps = (taps + block_k - 1) // block_k
            for it in range(pipe.iterations(steps)):  # gather step `it`, multiply step `it - stages + 1`
                pipe.wait()
                if pipe.fills(it, steps):
                    k0 = it * block_k  # the step's first tap
                    a_fill = a_stages.at(pipe.fill_stage(it))
                    w_fill = w_stages.at(pipe.fill_stage(it))
                    for row, col, r in a_gather.tasks(threadIdx.x):
                        kk = k0 + col
                        channel, iy, ix = geo.tap_input(g, a_y[r], a_x[r], kk)
                        inside = kk < taps and iy >= 0 and iy < h and ix >= 0 and ix < w
                        a_fill[col, row] = x[geo.x_index(a_image[r], channel, iy, ix)] if inside else 0.0
                    for row, col, _r in w_gather.tasks(threadIdx.x):
                        if w_gather.inside(row, col):
                            kk = k0 + col
                            ci, ky, kx = geo.tap_position(kk)
                            o = g * og + n0 + row
                            inside = n0 + row < og and kk < taps
                            w_fill[col, row] = weight[geo.weight_index(o, ci, ky, kx)] if inside else 0.0
                pipe.commit()
                if pipe.reads(it):
                    a_buf = a_stages.at(pipe.read_stage(it))
                    w_buf = w_stages.at(pipe.read_stage(it))
                    for kk in meta.range(block_k):
                        for i in meta.range(thread_m):
                            ra[i] = a_buf[kk, ty * thread_m + i]
                        for p in meta.range(groups_n):
                            for c in meta.range(CHUNK):
                                rb[p * CHUNK + c] = w_buf[kk, p * group_stride + tx * CHUNK + c]
                        for i in meta.range(thread_m):
                            for j in meta.range(thread_n):
                                acc[i, j] += ra[i] * rb[j]
            for p in meta.range(groups_n):  # the bias of the thread's output channels, in the place of its row of w
                for c in meta.range(CHUNK):
                    j = n0 + p * group_stride + tx * CHUNK + c
                    rb[p * CHUNK + c] = (bias[g * og + j] if j < og else 0.0) if has_bias else 0.0
            for i in meta.range(thread_m):
                pixel = m0 + ty * thread_m + i
                bi, oy, ox = geo.pixel_position(pixel)
                for p in meta.range(groups_n):
                    for c in meta.range(CHUNK):
                        j = n0 + p * group_stride + tx * CHUNK + c
                        if pixel < m and j < og:
                            o = g * og + j
                            out[geo.out_index(bi, o, oy, ox)] = acc[i, p * CHUNK + c] + rb[p * CHUNK + c]

    return bind_conv2d(module, batch, has_bias)


def conv2d_cuda_direct(batch: Size, channels: int, height: int, width: int, out_channels: int, kernel: Pair,
                       stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1,
                       bias: bool = False, dtype: str = "float32", layout: str = "NCHW") -> ScriptModule:
    """A module with one kernel `conv2d(<batch if symbolic>, x, weight[, bias], out)`: the convolution by the
    direct kernel (see the module's docstring), meant for depthwise convolutions and others of few input channels
    a group; f32, f16 or bf16 tensors, f32 accumulation.

    Tensors and sizes as for `conv2d_cuda_gemm`."""
    name = "conv2d_cuda_direct"
    geo, dt = conv_geometry(name, batch, channels, height, width, out_channels, kernel, stride, padding, dilation,
                            groups, layout, dtype, CONV2D_CUDA_DTYPES)
    oh, ow = geo.out_size
    cg, og = geo.group_channels, geo.group_out_channels
    nhwc = geo.nhwc
    (kh, kw), (sh, sw), (ph, pw), (dh, dw) = geo.kernel, geo.stride, geo.padding, geo.dilation
    h, w = geo.height, geo.width
    per_image = out_channels * oh * ow
    has_bias = bias

    with script_module() as module:

        @script
        def conv2d(batch: i32, x: geo.x_type(dt, batch), weight: geo.weight_type(dt), bias: dt[out_channels],
                   out: geo.out_type(dt, batch)):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = DIRECT_THREADS
            attrs.cuda.grid_dim = (batch * per_image + DIRECT_THREADS - 1) // DIRECT_THREADS
            index = blockIdx.x * DIRECT_THREADS + threadIdx.x
            if index < batch * per_image:
                bi = index // per_image
                o = index % out_channels if nhwc else index % per_image // (oh * ow)
                oy = index % per_image // (ow * out_channels) if nhwc else index % (oh * ow) // ow
                ox = index % (ow * out_channels) // out_channels if nhwc else index % ow
                c0 = o // og * cg
                total = f32(bias[o]) if has_bias else 0.0
                for ci in range(cg):
                    for ky in meta.range(kh):
                        iy = oy * sh + ky * dh - ph
                        for kx in meta.range(kw):
                            ix = ox * sw + kx * dw - pw
                            if iy >= 0 and iy < h and ix >= 0 and ix < w:
                                total += f32(x[geo.x_index(bi, c0 + ci, iy, ix)]) * \
                                    f32(weight[geo.weight_index(o, ci, ky, kx)])
                out[geo.out_index(bi, o, oy, ox)] = dt(total)

    return bind_conv2d(module, batch, has_bias)


def conv2d_cuda_schedule(channels: int, groups: int, dtype: str) -> str:
    """The template `conv2d_on_cuda` binds a convolution to: `'direct'` where a group has at most
    `DIRECT_CHANNELS` input channels, else `'mma'` (the tensor cores) for f16 and bf16, and for f32 where
    `hidet.option.allow_tf32(True)` allows TF32, `'gemm'` for the other f32 ones."""
    if channels // groups <= DIRECT_CHANNELS:
        return "direct"
    return "gemm" if dtype == "float32" and not option.allow_tf32() else "mma"


SCHEDULES = {"direct": conv2d_cuda_direct, "gemm": conv2d_cuda_gemm, "mma": conv2d_cuda_mma}


@library_template("conv2d", LIBRARY_CUDA)
@library_template("conv2d_nhwc", LIBRARY_CUDA)
def conv2d_on_cuda(task: Task) -> TemplateBinding | None:
    """The direct kernel, the tensor-core implicit GEMM or the f32 one (`conv2d_cuda_schedule`) for an NCHW
    (`conv2d`) or NHWC (`conv2d_nhwc`) convolution of f32, f16 or bf16 tensors whose sizes other than the batch are
    known at build time."""
    dtype = common_dtype(task, CONV2D_CUDA_DTYPES)
    if dtype is None or len(task.inputs) not in (2, 3) or len(task.outputs) != 1:
        return None
    nhwc = task.name == "conv2d_nhwc"
    signature = kernel_signature(task.inputs, task.outputs)
    x_shape, w_shape = shape_of(task.inputs[0]), shape_of(task.inputs[1])
    batch, height, width, channels = x_shape if nhwc else (x_shape[0], *x_shape[2:], x_shape[1])
    out_channels, kh, kw = (w_shape[0], *(w_shape[1:3] if nhwc else w_shape[2:]))
    if not all(isinstance(d, int) for d in (channels, height, width, out_channels, kh, kw)):
        return None
    groups = int(task.attrs["groups"])
    template = SCHEDULES[conv2d_cuda_schedule(channels, groups, dtype)]
    options = {"channels": channels, "height": height, "width": width, "out_channels": out_channels,
               "kernel": (kh, kw), "stride": tuple(task.attrs["stride"]), "padding": tuple(task.attrs["padding"]),
               "dilation": tuple(task.attrs["dilation"]), "groups": groups, "bias": len(task.inputs) == 3,
               "dtype": dtype, "layout": "NHWC" if nhwc else "NCHW"}
    views = [View(t, lambda i: i) for t in (*task.inputs, *signature.outputs)]
    return TemplateBinding(template.__name__, template, signature, {"batch": batch}, views, options)
