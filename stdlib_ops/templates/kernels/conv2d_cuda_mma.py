"""The conv2d template on the tensor cores (sm_80 and later): an implicit GEMM whose operand tiles are gathered from
the input and the weight into swizzled shared memory, multiplied with `ldmatrix` fragments and `mma.m16n8k16` (f16,
bf16) or `mma.m16n8k8` (f32 read as TF32), f32 accumulators, and the bias and the output stored element by element.

Per group, `out[pixel, o] = sum_k A[pixel, k] * W[o, k]` (`conv2d_geometry`: M pixels, N output channels of the
group, K taps in the layout's order). The block tiles (`mma_tiles`), the warp tiles, the swizzle, the `cp_async`
pipeline of `stages` buffers and the fragments are those of `matmul_cuda_f16_mma` (its `swizzled_chunk`, mma
sizes and `BLOCK_K`), with these differences:

- **The A tile (the gather).** Element `(pixel, k)` of a `block_m x 32` tile is the input at
  `(iy, ix) = (oy * sh + ky * dh - ph, ox * sw + kx * dw - pw)`, zero outside the input (the padding) and past M
  or K. In NHWC, where a group's channels are a multiple of 8, a run of 8 consecutive k is 8 consecutive channels of
  one pixel and one tap: one 16-byte `cp_async`, or zeros (consecutive threads along k). Otherwise every element is
  read on its own, by consecutive threads along the pixels (in NCHW consecutive `ox`: coalesced reads; in NHWC
  reads `C` elements apart, dense for the few channels of a network's first layer), `UNROLL` at a time. The
  pixels a thread gathers are the same at every step: their image and the input row and column of their first tap
  are computed once, into registers.
- **The weight tile.** The weight is row-major `[O, K]` in both layouts, so its tile is stored like the A tile,
  `block_n x 32` with k along a row (16-byte `cp_async` copies where K is a multiple of 8), and the B fragments
  are read with the plain (untransposed) `ldmatrix_x4`: two 8-column mma tiles' fragments at once.
- **TF32.** f32 tensors (which `conv2d_on_cuda` gives this template only where `hidet.option.allow_tf32(True)`
  allows it) fill the same 64-byte rows with 16 taps a step, two `mma.m16n8k8` k steps of 8 (the `ldmatrix`
  fragments of 32-bit elements are exactly TF32's A and B fragments); every element is gathered on its own and
  rounded to TF32 (`cvt_rna_tf32_f32`: nearest, ties away from zero) as it is stored into shared memory, so the
  tensor cores multiply exactly the rounded operands.
- **Output.** Blocks go over the group's tiles in groups of `GROUP_M` tile rows (`tile_order`), groups outermost;
  each accumulator inside the output is stored with the bias added at `out[b, o, oy, ox]` (or `out[b, oy, ox, o]`),
  which is where a fused epilogue lands. A lane's rows and columns of its accumulator (`Accumulator.lane_rows`,
  `lane_columns`) give the work shared by a row's or a column's cells once: a row's pixel is decomposed once, a
  column's bias read once (before any store, which the compiler could not move a read of `bias` across).

The kernel follows the kernel contract: `x`, `weight` and `bias` are only read element by element or as the
source of a `cp_async`, `out` is only stored element by element. The 16-byte copies assume that the tensors' data
start at 16-byte aligned addresses (as every allocation does)."""

from __future__ import annotations

from hidet_lang import attrs, f32, i32, meta, register_tensor, repeat, script, script_module, spatial
from hidet_lang.cuda import blockIdx, cp_async, cvt_rna_tf32_f32, threadIdx
from hidet_lang.cuda.async_copy import CopyPipeline, TileCopy, chunk_tile
from hidet_lang.cuda.fragments import WarpMma
from hidet_lang.cuda.tiles import SharedMemoryPlan
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.templates.kernels.conv2d_geometry import Pair, bind_conv2d, conv_geometry
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import BLOCK_K, CHUNK, ENOUGH_BLOCKS, INPUT_DTYPES, MMA_M, MMA_N
from stdlib_ops.templates.kernels.tile_order import block_tile, tile_blocks
from stdlib_ops.templates.params import Size, require, tile_for_blocks

ROW_CHUNKS = BLOCK_K // CHUNK
"""16-byte chunks a row of a shared tile holds (64 bytes, `matmul_cuda_f16_mma`'s): 32 taps of f16 or bf16, 16 of
f32."""

UNROLL = 4
"""Element gathers of the input a thread issues back to back (more keep more loads in flight, and more registers
live)."""

TILES = ((128, 128, 64, 32), (128, 64, 64, 32), (64, 64, 32, 32))
"""The tiles (block_m, block_n, warp_m, warp_n) `mma_tiles` chooses from, largest first: `matmul_cuda_f16_mma`'s,
and a 128 x 64 one for convolutions of 64 output channels a group (common in image networks)."""


def mma_tiles(groups: int, m: Size, n: int) -> tuple[int, int, int, int]:
    """The tile for `groups` products of `m` pixels by `n` output channels: of the `TILES` that fit them, the
    largest that gives `ENOUGH_BLOCKS` blocks (`tile_for_blocks`)."""
    return tile_for_blocks(TILES, groups, m, n, ENOUGH_BLOCKS)


def conv2d_cuda_mma(batch: Size, channels: int, height: int, width: int, out_channels: int, kernel: Pair,
                    stride: Pair = (1, 1), padding: Pair = (0, 0), dilation: Pair = (1, 1), groups: int = 1,
                    bias: bool = False, dtype: str = "float16", layout: str = "NCHW", *, stages: int = 4,
                    tiles: tuple[int, int, int, int] | None = None) -> ScriptModule:
    """A module with one kernel `conv2d(<batch if symbolic>, x, weight[, bias], out)`: the convolution as an
    implicit GEMM on the tensor cores (see the module's docstring), f16, bf16 or f32 (TF32) tensors, f32
    accumulation.

    Shapes as `conv2d_geometry` gives them for `layout`; `bias: dtype[out_channels]` when `bias`; `batch` is an int
    or a symbolic name. `tiles` is `(block_m, block_n, warp_m, warp_n)` (None: `mma_tiles`),
    whose block's threads are a multiple of `block_m`; `stages` (2 to 8) shared buffers pipeline the copies."""
    name = "conv2d_cuda_mma"
    geo, dt = conv_geometry(name, batch, channels, height, width, out_channels, kernel, stride, padding, dilation,
                            groups, layout, dtype, (*INPUT_DTYPES, "float32"))
    oh, ow = geo.out_size
    cg, og, taps = geo.group_channels, geo.group_out_channels, geo.taps
    block_m, block_n, warp_m, warp_n = tiles or mma_tiles(
        groups, batch * oh * ow if isinstance(batch, int) else "m", og)
    warps_n = block_n // warp_n
    threads = 32 * (block_m // warp_m) * warps_n
    require(block_m % warp_m == 0 and block_n % warp_n == 0 and warp_m % MMA_M == 0 and warp_n % (2 * MMA_N) == 0,
            name, "warp tiles (multiples of 16) must divide the block tile")
    require(threads <= 1024 and threads % block_m == 0, name, "a block's threads must be a multiple of block_m")
    require(2 <= stages <= 8, name, "stages must be 2 to 8")
    tf32 = dt.name == "float32"
    per_chunk = 16 // dt.nbytes  # elements of a 16-byte chunk, of an ldmatrix row
    block_k = ROW_CHUNKS * per_chunk  # k a step: 32 of f16 or bf16, 16 of f32
    a_tile, w_tile = chunk_tile(dt, [block_m, block_k]), chunk_tile(dt, [block_n, block_k])
    plan = SharedMemoryPlan()
    a_stages, w_stages = plan.tiles(a_tile, stages), plan.tiles(w_tile, stages)
    a_copy, w_copy = TileCopy(a_tile, threads), TileCopy(w_tile, threads)
    pipe = CopyPipeline(stages)
    warp = WarpMma(dt, warp_m, warp_n, b_k_major=True)
    frags = warp.accumulator
    min_blocks = 2 if threads <= 256 and warp_m * warp_n <= 64 * 32 else 1
    nhwc = geo.nhwc
    h, w = geo.height, geo.width
    # 16-byte copies (not for TF32, whose operands are rounded as they are gathered): in NHWC, 8 consecutive k are
    # 8 channels of one tap
    vector_a = nhwc and cg % per_chunk == 0 and not tf32
    vector_w = taps % per_chunk == 0 and not tf32
    # element gathers: consecutive threads along the pixels, a thread's one pixel at `elements_a` taps a step,
    # UNROLL at a time
    elements_a = block_m * block_k // threads
    require(threads <= block_m * ROW_CHUNKS and elements_a % UNROLL == 0, name,
            f"a block's threads must be at most {ROW_CHUNKS} * block_m")
    gather = repeat(1, elements_a, attrs=f".u{UNROLL}") * spatial(block_m, threads // block_m, ranks=[1, 0])
    rows_a = len(a_copy.mapping(0)) if vector_a else 1  # the pixels a thread gathers
    pixels = oh * ow
    has_bias = bias

    with script_module() as module:

        @script
        def conv2d(batch: i32, x: geo.x_type(dt, batch), weight: geo.weight_type(dt), bias: dt[out_channels],
                   out: geo.out_type(dt, batch)):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = tile_blocks(batch * pixels, og, block_m, block_n) * groups
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            attrs.cuda.min_blocks = min_blocks
            lane = threadIdx.x % 32
            acc = frags.tensor()
            ra = warp.a_registers()
            rb = warp.b_registers()
            for r in range(frags.registers):
                acc[r] = 0.0
            m = batch * pixels
            g: i32 = 0  # the block's group and tile: GROUP_M tile rows at a time, column by column (`tile_order`)
            m0: i32 = 0
            n0: i32 = 0
            block_tile(blockIdx.x, m, og, block_m, block_n, ~g, ~m0, ~n0)
            wm = threadIdx.x // 32 // warps_n * warp_m
            wn = threadIdx.x // 32 % warps_n * warp_n
            a_image = register_tensor(i32, [rows_a])  # per gathered pixel: its image, and the input's row and
            a_y = register_tensor(i32, [rows_a])  # column under its kernel's first tap (`ConvGeometry.first_tap`)
            a_x = register_tensor(i32, [rows_a])
            for row, _chunk, t in a_copy.tasks(threadIdx.x) if vector_a else [(threadIdx.x % block_m, 0, 0)]:
                a_image[t], a_y[t], a_x[t] = geo.first_tap(m0 + row, m)
            steps = (taps + block_k - 1) // block_k
            for it in range(pipe.iterations(steps)):  # gather step `it`, multiply step `it - stages + 1`
                pipe.wait()
                if pipe.fills(it, steps):
                    a_fill = a_stages.at(pipe.fill_stage(it))
                    w_fill = w_stages.at(pipe.fill_stage(it))
                    k0 = it * block_k
                    if vector_a:
                        for row, chunk, t in a_copy.tasks(threadIdx.x):
                            kk = k0 + chunk * per_chunk
                            channel, iy, ix = geo.tap_input(g, a_y[t], a_x[t], kk)
                            if kk < taps and iy >= 0 and iy < h and ix >= 0 and ix < w:
                                cp_async(~a_fill[row, chunk * per_chunk], ~x[geo.x_index(a_image[t], channel, iy, ix)],
                                         16)
                            else:
                                a_copy.zero(a_fill, row, chunk)
                    else:
                        for row, col in gather.on(threadIdx.x):
                            kk = k0 + col
                            channel, iy, ix = geo.tap_input(g, a_y[0], a_x[0], kk)
                            inside = kk < taps and iy >= 0 and iy < h and ix >= 0 and ix < w
                            value = x[geo.x_index(a_image[0], channel, iy, ix)] if inside else dt(0.0)
                            a_fill[row, col] = cvt_rna_tf32_f32(value) if tf32 else value
                    for row, chunk in w_copy.mapping.on(threadIdx.x):
                        o = g * og + n0 + row
                        live = n0 + row < og
                        for e in meta.range(1 if vector_w else per_chunk):
                            kk = k0 + chunk * per_chunk + e
                            ci, ky, kx = geo.tap_position(kk)
                            if vector_w:
                                if live and kk < taps:
                                    cp_async(~w_fill[row, chunk * per_chunk], ~weight[geo.weight_index(o, ci, ky, kx)],
                                             16)
                                else:
                                    w_copy.zero(w_fill, row, chunk)
                            else:
                                inside = live and kk < taps
                                value = weight[geo.weight_index(o, ci, ky, kx)] if inside else dt(0.0)
                                w_fill[row, chunk * per_chunk + e] = cvt_rna_tf32_f32(value) if tf32 else value
                pipe.commit()
                if pipe.reads(it):
                    warp.multiply(acc, ra, rb, a_stages.at(pipe.read_stage(it)), w_stages.at(pipe.read_stage(it)),
                                  wm, wn, lane)
            shift = register_tensor(f32, [frags.cols // 4])  # the bias of each of the lane's columns
            for j, cj in frags.lane_columns(lane):
                shift[cj] = f32(bias[g * og + n0 + wn + j]) if has_bias and n0 + wn + j < og else 0.0
            for i, ri in frags.lane_rows(lane):  # a row's output pixel worked out once
                pixel = m0 + wm + i
                image, oy, ox = geo.pixel_position(pixel)
                for j, cj in frags.lane_columns(lane):
                    if pixel < m and n0 + wn + j < og:
                        out[geo.out_index(image, g * og + n0 + wn + j, oy, ox)] = dt(acc[frags.register(ri, cj)]
                                                                                     + shift[cj])

    return bind_conv2d(module, batch, has_bias)
