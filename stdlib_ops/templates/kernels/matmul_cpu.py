"""The batched matmul template for the CPU, in the style of GotoBLAS and BLIS: packed panels and a register-blocked
micro-kernel of SIMD vectors.

`c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]`, accumulated in f32 (f16 operands are converted as they are packed).

- **Macro tiles.** The output is cut into tiles of at most `mc x nc`, spread over the OpenMP threads by one
  parallel loop over batch entries x column tiles x row tiles (the row tiles innermost: a thread's consecutive
  tiles pack the same block of `b`, which the previous one left in the caches: 5% faster at 2048^3 on one thread
  than the other order). Tiles are made equal (up to a micro-tile) and, where that gives fewer than `min_tiles` of
  them (small, tall or wide products), cut further, columns first, so that every thread gets work without knowing
  how many there are.
- **Packing.** For each `kc` block of k, the tile's `mc x kc` block of `a` is packed into `mr`-row panels
  (`kc x mr`: the `mr` values one step of k broadcasts are contiguous) and the `kc x nc` block of `b` into panels
  of whole micro-panels, at least 32 columns wide (`kc x 32` for `nr` = 16 or 32: a copy loop the C compiler
  vectorizes rather than unrolling it into scalars), converted to f32 and zero-padded past the matrices' edges.
  The packing is the only place `a` and `b` are read; its loops run along the rows of `a` and `b`.
- **Few rows.** A tile of fewer rows than a micro-tile (a product of one row: a vector times a matrix) is computed
  straight from `b`, unpacked: for each row of `b`, a multiply and an add along it into the f32 tile, which the C
  compiler vectorizes (the bandwidth of reading `b` bounds it; a micro-tile would waste most of its rows).
- **Micro-kernel.** A `cpu_internal` function kept out of line (`attrs.noinline`, so that GCC allocates its
  registers for it alone). For an `mr x nr` micro-tile, `mr * nr / lanes` vector accumulators (a local array read
  and written at constant offsets only, which the C compiler keeps in registers) start from the tile's f32
  accumulator array, or from a row of zeros on the first k block (a choice of pointer, not of vectors); each step
  of k broadcasts the `mr` values of `a` and multiplies them into the `nr / lanes` vectors of `b` with fused
  multiply-adds (one rounding each); the accumulators go back to the f32 array. It never branches on the edges:
  the padding is zeros; a last panel of `b` one vector wide or less gets a micro-kernel one vector wide. Its loads
  and stores are the unaligned kind, correct at any address; where GCC sees that an address is aligned (it aligns
  these large local arrays to 64 bytes) it emits the aligned instruction.
- **Weights packed once.** With `packed`, `b` is instead the f32 panels `pack_matmul_weights` made of a constant
  `[k, n]` matrix when the graph was built (`matmul_packed`): `ceil(n / pw)` panels of `k x pw`, the layout the
  kernel packs `b` into, for every k at once. The kernel then packs only `a` and hands the micro-kernels the panels
  where they lie (`k * pw` floats apart); its macro tiles start at whole panels. The products are the same, in the
  same order: the same bits as packing `b` on every call.
- **bfloat16 pairs.** Where `bf16_pairs` (bf16 operands, 16 lanes, and the machine's AVX512-BF16 dot product
  measured faster than its f32 FMAs: `cpu_peak.bf16_dot_pays`), `a` and `b` are packed as the bf16 they are, two
  steps of k side by side in each row of a panel (an odd k's last pair ends in a zero), and the micro-kernel takes
  a pair of steps at a time with `f32x16_dot_bf16`: the pair's exact products added to the f32 accumulators, each
  sum rounded once. Elsewhere bf16 converts to f32 as it is packed, as f16 does.
- **Output.** After the last k block the valid rows and columns of the f32 array are stored into `c` element by
  element, which is where a fused epilogue lands.

The vector width is the widest the machine's C compiler enables (16 lanes with AVX-512F, 8 with AVX and FMA, 4 with
SSE and FMA), unless `lanes` says; `DEFAULT_BLOCKS` gives each width its micro-tile and cache blocks,
`MATMUL_CPU_SPACE` what a tuning run may change. The kernel follows the kernel contract: `a` and `b` are only read
element by element, `c` only stored element by element (with `packed`, the panels, a constant of the graph that no
prologue is fused into, are handed to the micro-kernels by address).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from hidet_lang import attrs, bfloat16, f32, grid, i32, i64, meta, register_tensor, script, script_module
from hidet_lang import cpu as vectors
from hidet_lang.frontend.script import ScriptFunction, ScriptModule
from stdlib_ops.schedule.signature import kernel_signature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, common_dtype, shape_of
from stdlib_ops.templates.cpu_lanes import machine_lanes, template_lanes
from stdlib_ops.templates.cpu_peak import bf16_dot_pays
from stdlib_ops.templates.kernels.matmul_views import matmul_views
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CPU, library_template
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.space import TuningSpace, declare_space
from stdlib_ops.templates.views import View, product, unravel

MATMUL_CPU_DTYPES = ("float32", "float16", "bfloat16")
BF16_DOT_LANES = 16  # the vector width of the bfloat16 pairs' dot product (`f32x16_dot_bf16`)

PREFETCH_STEPS = 16
"""How many steps of k ahead of the row of `b` it multiplies the f32 micro-kernel asks for that row (a software
prefetch a cache line): where `b` is a graph's weights, streamed from memory (BERT's leave the caches between
calls), 128 x 768 @ 768 x 3072 with 16 copies of the weights in turn went 2.49 -> 2.36 ms, with one 2.24 -> 2.14;
8 and 32 steps did as well."""

MAX_LOCAL_BYTES = 2 * 1024 * 1024
"""The most the packed panels and the accumulator tile may take together: they live on the stack of each OpenMP
thread (8 MB by default on Linux; hidet_lang refuses a single local array over 4 MB)."""


@dataclass(frozen=True)
class Blocks:
    """The blocking of one vector width: the micro-tile `mr x nr` (`nr` a multiple of the width) and the cache
    blocks `mc x nc` (a macro tile: `mc` a multiple of `mr`, `nc` of the packed panels' width) and `kc` (a k
    block)."""

    mr: int
    nr: int
    mc: int
    nc: int
    kc: int


DEFAULT_BLOCKS = {
    16: Blocks(mr=8, nr=32, mc=256, nc=512, kc=256),
    8: Blocks(mr=6, nr=16, mc=192, nc=512, kc=256),
    4: Blocks(mr=6, nr=8, mc=96, nc=256, kc=256),
}
"""Defaults per vector width. 16 lanes: 16 zmm accumulators, 2 vectors of `b` and a broadcast (of 32 registers);
8 lanes: 12 ymm accumulators of 16 registers, as in GotoBLAS's Haswell kernel; 4 lanes: the same with xmm. The
micro-tiles of a tile run column panel by column panel: a `kc x nr` micro-panel of `b` (the vectors) stays in L1
while the `mc x kc` block of `a` streams from L2, `mr` floats a step of k rather than the `nr` of the other order
(in turns, 2 threads: 1024^3 230 -> 245 GFLOP/s, 512x768 @ 768x3072 231 -> 254). The three local arrays take
1.25 MB (16 lanes), 1.1 MB (8) and 0.47 MB (4) of a thread's stack."""


def panel_width(nr: int) -> int:
    """The width of the packed panels of `b` for micro-tiles `nr` wide: whole micro-panels, at least 32 floats (a
    copy loop the C compiler vectorizes rather than unrolls)."""
    return nr * -(-32 // nr)


def pack_matmul_weights(weight: np.ndarray, lanes: int | None = None) -> np.ndarray:
    """The f32 panels of the constant matrix `weight` ([k, n], f32 or f16) that the template reads with `packed`
    (for the micro-tile of `lanes`; None: the machine's widest): `[ceil(n / pw), k, pw]`, panel `q` holding columns
    `q * pw ...` of every row, zeros past the last column."""
    if weight.ndim != 2 or weight.dtype not in (np.float32, np.float16):
        raise ValueError(f"pack_matmul_weights: expected a float32 or float16 matrix [k, n], got {weight.dtype} "
                         f"{weight.shape}")
    return row_panels(weight.T, panel_width(DEFAULT_BLOCKS[template_lanes("pack_matmul_weights", lanes)].nr))


def row_panels(rows: np.ndarray, height: int) -> np.ndarray:
    """The `[count, k]` matrix `rows` as f32 panels of `height` of its rows, each row a column of its panel:
    `[ceil(count / height), k, height]`, zeros past the last row (the layout the micro-kernels read a panel in:
    the `height` values of one step of k side by side)."""
    count, k = rows.shape
    panels = -(-count // height)
    padded = np.zeros((panels * height, k), np.float32)
    padded[:count] = rows
    return np.ascontiguousarray(padded.reshape(panels, height, k).transpose(0, 2, 1))


def _fits(point: dict[str, int | None]) -> bool:
    """Whether a point's blocks fit in `MAX_LOCAL_BYTES` with the largest defaults (16 lanes) where it keeps them."""
    widest = DEFAULT_BLOCKS[16]
    mc, nc, kc = widest.mc, point["nc"] or widest.nc, point["kc"] or widest.kc
    return 4 * (mc * kc + kc * nc + mc * nc) <= MAX_LOCAL_BYTES


MATMUL_CPU_SPACE = TuningSpace(
    {"kc": (None, 128, 384), "nc": (None, 256, 1024), "min_tiles": (4, 2, 8)},
    default={"kc": None, "nc": None, "min_tiles": 4},
    constraint=_fits,
)
"""The tuning space (`ops.tune`): the k block, the macro tile's width and how finely small products are cut,
valid for every vector width (None: the width's default; `nc` a multiple of every width's packed panels)."""


@declare_space(MATMUL_CPU_SPACE)
def matmul_cpu(batch: Size, m: Size, n: Size, k: Size, dtype: str = "float32", *, lanes: int | None = None,
               mr: int | None = None, nr: int | None = None, mc: int | None = None, nc: int | None = None,
               kc: int | None = None, min_tiles: int = 4, packed: bool = False,
               bf16_pairs: bool | None = None) -> ScriptModule:
    """A module with one CPU kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` per batch entry.

    `a: dtype[batch, m, k]`, `b: dtype[batch, k, n]`, `c: dtype[batch, m, n]`; each size is an int or a symbolic
    name. Schedule parameters (None: the default of `DEFAULT_BLOCKS` for the width):

    - `lanes`: the vector width, 16 (f32x16), 8 (f32x8) or 4 (f32x4); None: the widest the machine has;
    - `mr`, `nr`: the micro-tile, `mr * nr / lanes` accumulators in vector registers (`nr` a multiple of `lanes`);
    - `mc`, `nc`: the largest macro tile, the unit of parallel work, whose f32 accumulators live in a local array
      (`mc` a multiple of `mr`; `nc` of the packed panels of `b`: `nr`, or its smallest multiple of 32 or more);
      `kc`: the k block packed at a time;
    - `min_tiles`: the least number of macro tiles a product is cut into where its size allows (the threads share
      them);
    - `packed`: `b` is the f32 panels `pack_matmul_weights` makes of a `[k, n]` matrix (`ceil(n / pw)` x k x pw,
      `pw = panel_width(nr)`), read where they lie; `batch` is then 1 and `n`, `k` ints;
    - `bf16_pairs`: bfloat16 operands are packed as they are, two steps of k side by side, and multiplied by
      `f32x16_dot_bf16` (16 lanes, `kc` even, not with `packed`); None: where the operands are bfloat16, the
      vector width is 16, `b` is not packed and the dot product outruns f32 FMAs here (`bf16_dot_pays`).
    """
    name = "matmul_cpu"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    dt = template_dtype(name, dtype, MATMUL_CPU_DTYPES)
    lanes = template_lanes(name, lanes)
    require(lanes in DEFAULT_BLOCKS, name, f"lanes must be one of {', '.join(map(str, DEFAULT_BLOCKS))}")
    default = DEFAULT_BLOCKS[lanes]
    mr, nr, mc, nc, kc = (default.mr if mr is None else mr, default.nr if nr is None else nr,
                          default.mc if mc is None else mc, default.nc if nc is None else nc,
                          default.kc if kc is None else kc)
    require(min(mr, nr, mc, nc, kc, min_tiles) >= 1, name, "block sizes must be positive")
    require(nr % lanes == 0, name, f"nr must be a multiple of lanes ({lanes})")
    if bf16_pairs is None:
        bf16_pairs = dt == bfloat16 and lanes == BF16_DOT_LANES and not packed and bf16_dot_pays()
    require(not bf16_pairs or (dt == bfloat16 and lanes == BF16_DOT_LANES and not packed and kc % 2 == 0), name,
            f"bf16_pairs takes bfloat16 operands, {BF16_DOT_LANES} lanes, an even kc and b not packed")
    panel_dtype = bfloat16 if bf16_pairs else f32  # what the packed panels of a and b hold
    pw = panel_width(nr)  # b is packed in panels of pw columns
    require(not packed or (batch == 1 and isinstance(n, int) and isinstance(k, int)), name,
            "packed weights need batch 1 and known n and k")
    step_n = pw if packed else nr  # macro tiles start at whole panels of the packed weights
    panels_shape = (-(-n // pw), k, pw) if packed else None  # b's, when packed
    b_block = 1 if packed else kc * nc  # the tile's packed block of b (none when packed once)
    require(mc % mr == 0, name, "mc must be a multiple of mr")
    require(nc % pw == 0, name, f"nc must be a multiple of {pw} (nr, at least 32: the packed panels of b)")
    require(4 * (mc * kc + kc * nc + mc * nc) <= MAX_LOCAL_BYTES, name,
            f"the packed blocks and the tile must fit in {MAX_LOCAL_BYTES // 1024} KB")
    tile = tile_kernel(lanes, mr, nr, pw, nc, bf16_pairs)

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32, a: dt[batch, m, k],
                   b: f32[panels_shape] if packed else dt[batch, k, n], c: dt[batch, m, n]):
            attrs.func_kind = "cpu_kernel"
            # macro tiles: as large as mc x nc allows, then cut further until there are min_tiles (columns first)
            tiles_m = (m + mc - 1) // mc
            tiles_n = (n + nc - 1) // nc
            if batch * tiles_m * tiles_n < min_tiles:
                cut = (min_tiles + batch * tiles_m * tiles_n - 1) // (batch * tiles_m * tiles_n)
                tiles_n = min(tiles_n * cut, (n + nr - 1) // nr)
            if batch * tiles_m * tiles_n < min_tiles:
                cut = (min_tiles + batch * tiles_m * tiles_n - 1) // (batch * tiles_m * tiles_n)
                tiles_m = min(tiles_m * cut, (m + mr - 1) // mr)
            tile_m = ((m + tiles_m - 1) // tiles_m + mr - 1) // mr * mr  # equal tiles, whole micro-tiles
            tile_n = ((n + tiles_n - 1) // tiles_n + step_n - 1) // step_n * step_n
            tiles_m = (m + tile_m - 1) // tile_m
            tiles_n = (n + tile_n - 1) // tile_n
            for t in grid(batch * tiles_m * tiles_n, attrs="p"):
                bi = t // (tiles_m * tiles_n)
                m0 = t % tiles_m * tile_m
                n0 = t // tiles_m % tiles_n * tile_n
                rows = min(tile_m, m - m0)
                cols = min(tile_n, n - n0)
                panels_m = (rows + mr - 1) // mr
                panels_n = (cols + nr - 1) // nr
                panels_b = (cols + pw - 1) // pw  # the packed panels of b the tile takes
                packed_a = register_tensor(panel_dtype, [mc * kc])
                packed_b = register_tensor(panel_dtype, [b_block])
                acc = register_tensor(f32, [mc * nc])  # row-major, nc columns a row
                if rows < mr:  # fewer rows than a micro-tile (a product of one row): straight from b, unpacked
                    for i in range(rows):
                        for j in range(i64(cols)):
                            acc[i * nc + j] = 0.0
                    for kk in range(k):
                        for i in range(rows):
                            aik = f32(a[bi, m0 + i, kk])
                            if packed:  # along a row of each panel
                                for q in range((cols + pw - 1) // pw):
                                    for j in range(i64(min(pw, cols - q * pw))):
                                        acc[i * nc + q * pw + j] += aik * b[n0 // pw + q, kk, j]
                            else:
                                for j in range(i64(cols)):  # along a row of b: the C compiler vectorizes it
                                    acc[i * nc + j] += aik * f32(b[bi, kk, n0 + j])
                elif bf16_pairs:  # the operands' bf16 as they are, two steps of k side by side
                    for k0 in range(0, k, kc):
                        depth = min(kc, k - k0)
                        steps = (depth + 1) // 2  # pairs of steps of k; an odd depth's last pair ends in a zero
                        for p in range(panels_m):  # a panel: steps x mr x 2, row r's pair at columns 2 r, 2 r + 1
                            for kk in range(i64(steps)):
                                for r in meta.range(mr):
                                    for e in meta.range(2):
                                        inside = m0 + p * mr + r < m and 2 * kk + e < depth
                                        packed_a[p * mr * 2 * steps + (kk * mr + r) * 2 + e] = \
                                            a[bi, m0 + p * mr + r, k0 + 2 * kk + e] if inside else bfloat16(0.0)
                        for kk in range(steps):  # panels of steps x pw x 2: two rows of b interleaved
                            for q in range(panels_b):
                                dst = q * pw * 2 * steps + kk * pw * 2
                                col = n0 + q * pw
                                if col + pw <= n and 2 * kk + 1 < depth:
                                    for j in range(i64(pw)):
                                        packed_b[dst + 2 * j] = b[bi, k0 + 2 * kk, col + j]
                                        packed_b[dst + 2 * j + 1] = b[bi, k0 + 2 * kk + 1, col + j]
                                else:  # past the last column or the last step of k: zeros
                                    for j in range(i64(pw)):
                                        for e in meta.range(2):
                                            inside = col + j < n and 2 * kk + e < depth
                                            packed_b[dst + 2 * j + e] = \
                                                b[bi, k0 + 2 * kk + e, col + j] if inside else bfloat16(0.0)
                        tile(panels_m, panels_n, cols, steps, ~packed_a[0], mr * 2 * steps, ~packed_b[0],
                             pw * 2 * steps, ~acc[0], k0 == 0)
                else:
                    for k0 in range(0, k, kc):
                        depth = min(kc, k - k0)
                        for p in range(panels_m):  # a panel: depth x mr, row r of the panel at column r
                            panel = p * mr * depth
                            i0 = m0 + p * mr
                            if i0 + mr <= m:
                                for kk in range(i64(depth)):
                                    for r in meta.range(mr):
                                        packed_a[panel + kk * mr + r] = f32(a[bi, i0 + r, k0 + kk])
                            else:
                                for kk in range(i64(depth)):
                                    for r in meta.range(mr):
                                        inside = i0 + r < m
                                        packed_a[panel + kk * mr + r] = f32(a[bi, i0 + r, k0 + kk]) if inside else 0.0
                        if packed:  # the panels of b where they lie, k rows of pw floats apart
                            tile(panels_m, panels_n, cols, depth, ~packed_a[0], mr * depth, ~b[n0 // pw, k0, 0], k * pw,
                                 ~acc[0], k0 == 0)
                        else:
                            full_b = cols // pw  # whole panels of b, then one padded with zeros
                            for kk in range(depth):  # along the rows of b
                                for q in range(full_b):
                                    for j in range(i64(pw)):
                                        packed_b[q * pw * depth + kk * pw + j] = f32(b[bi, k0 + kk, n0 + q * pw + j])
                                if full_b * pw < cols:
                                    for j in range(i64(pw)):
                                        jj = n0 + full_b * pw + j
                                        edge = full_b * pw * depth + kk * pw + j
                                        packed_b[edge] = f32(b[bi, k0 + kk, jj]) if jj < n else 0.0
                            tile(panels_m, panels_n, cols, depth, ~packed_a[0], mr * depth, ~packed_b[0], pw * depth,
                                 ~acc[0], k0 == 0)
                for i in range(rows):
                    for j in range(i64(cols)):
                        c[bi, m0 + i, n0 + j] = dt(acc[i * nc + j])

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})


@library_template("matmul", LIBRARY_CPU)
def matmul_on_cpu(task: Task) -> TemplateBinding | None:
    """The packed, register-blocked CPU template for f32 and f16 operands, where the machine has vector FMA."""
    signature = kernel_signature(task.inputs, task.outputs)
    shapes = matmul_views(task, signature)
    dtype = common_dtype(task, MATMUL_CPU_DTYPES)
    if shapes is None or dtype is None or machine_lanes() is None:
        return None
    sizes, views = shapes
    return TemplateBinding("matmul_cpu", matmul_cpu, signature, sizes, views, {"dtype": dtype})


@library_template("matmul_packed", LIBRARY_CPU)
def matmul_packed_on_cpu(task: Task) -> TemplateBinding | None:
    """The template reading weights packed once (`matmul_packed`), where the panels are as wide as the machine's
    micro-tile packs them and the input and output share a dtype the template takes. The input's leading axes fold
    into the rows of one product."""
    lanes = machine_lanes()
    signature = kernel_signature(task.inputs, task.outputs)
    (x, panels), (out,) = signature.inputs, signature.outputs
    dtype = x.type.dtype.name
    if lanes is None or dtype not in MATMUL_CPU_DTYPES or out.type.dtype.name != dtype:
        return None
    xs, pw = shape_of(x), shape_of(panels)[-1]
    if pw != panel_width(DEFAULT_BLOCKS[lanes].nr):
        return None
    lead = xs[:-1]
    sizes = {"batch": 1, "m": product(lead), "n": task.attrs["n"], "k": xs[-1]}
    views = [View(x, lambda i: (*unravel(i[1], lead), i[2])), View(panels, lambda i: i),
             View(out, lambda i: (*unravel(i[1], lead), i[2]))]
    return TemplateBinding("matmul_cpu", matmul_cpu, signature, sizes, views,
                           {"dtype": dtype, "lanes": lanes, "packed": True})


def tile_kernel(lanes: int, mr: int, nr: int, pw: int, nc: int, bf16_pairs: bool = False) -> ScriptFunction:
    """The `cpu_internal` function `tile_<mr>x<nr>(panels_m, panels_n, cols, depth, packed_a, stride_a, packed_b,
    stride_b, acc, first)`: one k block of a macro tile, `acc (+)= packed_a @ packed_b` (from zeros when `first`),
    micro-tile by micro-tile.

    `packed_a` holds `panels_m` panels of `depth x mr` (row r of a panel at column r), `stride_a` elements apart
    (`mr * depth` where the block is packed for the tile, more where the panels are cut from weights packed once for
    every k), `packed_b` panels of
    `depth x pw` (`pw` a multiple of `nr`: `pw / nr` micro-panels side by side), `stride_b` elements apart (`pw *
    depth`, or more where the panels are weights packed once for every k), covering `cols` columns in
    `panels_n` micro-panels; `acc` is row-major, `nc` columns a row. The micro-kernels are `mr x nr`, and one
    vector wide for a last micro-panel that narrow. With `bf16_pairs` the panels are bfloat16 and each of their
    `depth` rows holds two steps of k side by side (`depth x mr x 2`, `depth x pw x 2`)."""
    micro = {cols: micro_kernel(lanes, mr, cols, mr, pw, nc, bf16_pairs) for cols in {nr, lanes}}
    name = f"tile_{mr}x{nr}" + ("_bf16_pairs" if bf16_pairs else "")
    pair = 2 if bf16_pairs else 1  # the steps of k a row of a panel holds
    panel = bfloat16 if bf16_pairs else f32

    @script
    def tile(panels_m: i32, panels_n: i32, cols: i32, depth: i32, packed_a: ~panel, stride_a: i32, packed_b: ~panel,
             stride_b: i32, acc: ~f32, first: bool):
        attrs.func_kind = "cpu_internal"
        attrs.func_name = name
        for q in range(panels_n):  # a micro-panel of b stays in L1 while the panels of a stream past it
            for p in range(panels_m):
                pa = packed_a + p * stride_a
                pb = packed_b + i64(q * nr // pw) * stride_b + q * nr % pw * pair
                ct = acc + p * mr * nc + q * nr
                if cols - q * nr <= lanes:  # a last panel of b one vector wide or less
                    micro[lanes](depth, pa, pb, ct, first)
                else:
                    micro[nr](depth, pa, pb, ct, first)

    return tile


def micro_kernel(lanes: int, rows: int, cols: int, lda: int, ldb: int, ldc: int,
                 bf16_pairs: bool = False) -> ScriptFunction:
    """The `cpu_internal` function `micro_<rows>x<cols>(depth, pa, pb, ct, first)`: `ct[r * ldc + j] (+)= sum over
    kk of pa[kk * lda + r] * pb[kk * ldb + j]` for the `rows x cols` micro-tile at `ct`, starting from zeros when
    `first`.

    The accumulators are a local array read and written only at constant offsets, one vector at a time, so the C
    compiler keeps them in vector registers (its scalar replacement of aggregates) and the k loop is `rows`
    broadcasts and `rows * cols / lanes` fused multiply-adds on registers, the pointers to the panels advancing by
    a row a step, asking for `b`'s row `PREFETCH_STEPS` steps ahead (a software prefetch). With `bf16_pairs` the
    panels are bfloat16, each row two steps of k side by side (element `2 r + e` of a row of `pa` is step `2 kk + e`
    of row r), and a row of them is `rows * cols / lanes` `f32x16_dot_bf16` (the broadcast of a row's pair,
    AVX512-BF16's `vdpbf16ps`)."""
    load, store, fma, broadcast, setzero, prefetch = (getattr(vectors, f"f32x{lanes}_{op}") for op in
                                                      ("load", "store", "fma", "broadcast", "setzero", "prefetch"))
    dot_bf16 = vectors.f32x16_dot_bf16
    per_row = cols // lanes
    cells = [(r, v) for r in range(rows) for v in range(per_row)]  # the accumulators, unrolled while parsing
    name = f"micro_{rows}x{cols}" + ("_bf16_pairs" if bf16_pairs else "")
    panel = bfloat16 if bf16_pairs else f32
    pair = 2 if bf16_pairs else 1

    @script
    def micro(depth: i32, pa: ~panel, pb: ~panel, ct: ~f32, first: bool):
        attrs.func_kind = "cpu_internal"
        attrs.func_name = name
        attrs.noinline = True  # compiled on its own: the accumulators get the vector registers
        regs = register_tensor(f32, [rows * cols])
        zeros = register_tensor(f32, [cols])  # the first k block starts from a row of zeros, every row
        for v in meta.range(per_row):
            store(~zeros[v * lanes], setzero())
        src = ~zeros[0] if first else ct  # a choice of pointers, not of vectors: no copies of accumulators
        stride = 0 if first else ldc
        for r, v in cells:
            store(~regs[r * cols + v * lanes], load(src + r * stride + v * lanes))
        for _ in range(depth):
            if not bf16_pairs:  # b's row PREFETCH_STEPS steps ahead, a cache line at a time
                for line in meta.range(0, cols, 16):
                    prefetch(pb + PREFETCH_STEPS * ldb + line)
            for r in meta.range(rows):
                if bf16_pairs:
                    for v in meta.range(per_row):
                        store(~regs[r * cols + v * lanes],
                              dot_bf16(load(~regs[r * cols + v * lanes]), pa + 2 * r, pb + v * lanes * 2))
                else:
                    ar = broadcast(pa[r])
                    for v in meta.range(per_row):
                        store(~regs[r * cols + v * lanes],
                              fma(ar, load(pb + v * lanes), load(~regs[r * cols + v * lanes])))
            pa = pa + lda * pair
            pb = pb + ldb * pair
        for r, v in cells:
            store(ct + r * ldc + v * lanes, load(~regs[r * cols + v * lanes]))

    return micro
