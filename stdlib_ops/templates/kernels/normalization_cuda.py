"""Row-wise CUDA templates over a 2-D view `[rows, cols]`: softmax, log-softmax, layer norm and RMS norm (the norms
with or without their weight and bias), and group norm's normalization (the layer norm template over its groups).

A row is shared by `width` threads (`row_layout`): a warp per row for short rows (several rows a block), the whole
block for long ones. The threads take the row in chunks of one 16-byte vector (`row_chunks`: 8 f16 or bf16, 4 f32),
loaded and stored with 128-bit accesses where the row is whole aligned vectors and element by element otherwise (an
odd row, a misaligned view), in the same kernel; they combine their partial maxima and sums with warp shuffles, or
block reductions (`block_reduce`: shuffles, then one partial per warp in shared memory). Where the number of columns
is known at build time, or at run time for symbolic columns (`row_layout`), and each thread's share is at most
`MAX_CACHED` values, the row is kept in registers: read once, written once, and softmax computes each exponential
once (the row keeps them, then scales them by the sum's reciprocal). A longer row is read chunk by chunk each pass
(from the cache, mostly); softmax keeps its exponentials in dynamic shared memory where they fit `SHARED_ROW_BYTES`
(each computed once), and computes them again for the output past that. Arithmetic is in f32 whatever the storage
dtype. Softmax subtracts the row's maximum before `exp` (no overflow); layer norm takes the variance as the mean of
squared deviations from the mean (two passes, no cancellation). Every kernel follows the fusion contract: inputs are
read by element reads or vector loads, the output written by element stores or vector stores.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from hidet_lang import attrs, f32, i32, meta, register_tensor, rsqrt, script, script_module, tensor_pointer
from hidet_lang.cuda import blockIdx, dynamic_shared_memory, threadIdx
from hidet_lang.frontend import semantics
from hidet_lang.frontend.script import ScriptFunction, ScriptModule
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.kernels.block_reduce import WARP, block_reducers, require_warps
from stdlib_ops.templates.kernels.row_chunks import RowChunks
from stdlib_ops.templates.kernels.row_views import RowTemplates, register_row_templates, rows_binding, trailing_axes
from stdlib_ops.templates.params import Size, check_sizes, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CUDA, library_template
from stdlib_ops.templates.sizes import bind_sizes, drop_params

NORMALIZATION_DTYPES = ("float32", "float16", "bfloat16")
MAX_CACHED = 32
"""The most row values a thread keeps in registers (more would spill)."""
WARP_ROW_MAX_COLS = 1024
"""The longest rows (columns known at build time) that one warp handles alone."""


SHARED_ROW_BYTES = 96 * 1024
"""The most shared memory a softmax block keeps a long row's exponentials in (every architecture from sm_80 has
it: 99 KB on sm_86 and sm_89)."""
BLOCK_SIZES = (128, 256, 512, 1024)
"""The block sizes a row template picks from where none is given."""


@dataclass(frozen=True)
class RowLayout:
    """How a block's `threads` threads share rows: `width` threads a row (a warp or the block), `rows_per_block`
    rows, each thread keeping `cached` values of its row in registers (0: none; each pass reads the row)."""

    threads: int
    width: int
    rows_per_block: int
    cached: int


def row_layout(cols: Size, threads: int | None = None) -> RowLayout:
    """A warp per row for rows of at most `WARP_ROW_MAX_COLS` columns known at build time, else the block; the row
    in registers where a thread's share is at most `MAX_CACHED` values: for columns known only at run time, up to
    `MAX_CACHED` values a thread, which the kernels check at run time (`cols <= cached * width`), reading longer rows
    pass by pass. Without `threads`, blocks of 128 threads, or for longer rows the fewest of `BLOCK_SIZES` that keep
    a row in registers (the most where none does; 512 for rows known only at run time, which keeps up to 16384
    columns in registers)."""
    if threads is None:
        fitting = [t for t in BLOCK_SIZES if isinstance(cols, int) and -(-cols // t) <= MAX_CACHED]
        threads = fitting[0] if fitting else BLOCK_SIZES[-1] if isinstance(cols, int) else 512
    require_warps("normalization_cuda", threads)
    if isinstance(cols, int) and cols <= WARP_ROW_MAX_COLS:
        return RowLayout(threads, WARP, threads // WARP, -(-cols // WARP))
    share = -(-cols // threads) if isinstance(cols, int) else MAX_CACHED
    return RowLayout(threads, threads, 1, share if share <= MAX_CACHED else 0)


@dataclass(frozen=True)
class RowPlan:
    """What a row template knows of its rows at build time: how its threads share them (`layout`), the `chunks` a
    thread takes a row in, and the sum and the maximum over a row's threads (`block_reduce`: a warp's or the block's).
    Its methods give a kernel, while it is parsed, its grid and each thread's row and lane."""

    layout: RowLayout
    chunks: RowChunks
    row_sum: ScriptFunction
    row_max: ScriptFunction

    @property
    def kept(self) -> int:
        """The chunks of its row a thread keeps in registers (at least one)."""
        return self.chunks.chunks(self.layout.cached)

    @property
    def slots(self) -> int:
        """The registers a thread keeps its share of a row in: `kept` chunks of `lanes` values."""
        return self.kept * self.chunks.lanes

    @property
    def capacity(self) -> int:
        """The longest row the registers hold (0 where the row is read pass by pass)."""
        return self.slots * self.layout.width if self.layout.cached else 0

    @property
    def span(self) -> int:
        """The columns one chunk of each of a row's threads covers."""
        return self.layout.width * self.chunks.lanes

    def blocks(self, rows: Any) -> Any:
        """The grid's blocks for `rows` rows (an int or an IR expression)."""
        per_block = self.layout.rows_per_block
        return (rows + per_block - 1) // per_block

    def row_and_lane(self) -> tuple[E.Expr, E.Expr]:
        """The running thread's row, and its lane among the row's `width` threads (IR)."""
        width = self.layout.width
        return blockIdx.x * self.layout.rows_per_block + threadIdx.x // width, threadIdx.x % width


def row_plan(dt: DataType, cols: Size, threads: int | None = None, vectors: bool = True) -> RowPlan:
    """The plan of a row template over rows of `cols` columns of `dt` (`row_layout` for `threads`; `vectors`: whether
    the rows may be accessed as 16-byte vectors)."""
    layout = row_layout(cols, threads)
    warp_sum, warp_max, block_sum, block_max = block_reducers(layout.threads)
    on_warp = layout.width == WARP
    return RowPlan(layout, RowChunks(dt, layout.width, vectors), warp_sum if on_warp else block_sum,
                   warp_max if on_warp else block_max)


def _prepare(template: str, rows: Size, cols: Size, dtype: str, threads: int | None, vectors: bool) -> RowPlan:
    check_sizes(template, {"rows": rows, "cols": cols})
    return row_plan(template_dtype(template, dtype, NORMALIZATION_DTYPES), cols, threads, vectors)


def softmax_cuda(rows: Size, cols: Size, dtype: str = "float32", *, threads: int | None = None,
                 vectors: bool = True) -> ScriptModule:
    """A module with one kernel `softmax(<symbolic sizes>, x, y)`: `y[r] = exp(x[r] - max x[r]) / sum(...)`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name; `vectors`: whether rows may be accessed as
    16-byte vectors (`row_chunks`)."""
    return _softmax("softmax_cuda", rows, cols, dtype, threads, vectors, log=False)


def log_softmax_cuda(rows: Size, cols: Size, dtype: str = "float32", *, threads: int | None = None,
                     vectors: bool = True) -> ScriptModule:
    """A module with one kernel `log_softmax(<symbolic sizes>, x, y)`: `y[r] = x[r] - max - log(sum exp(x[r] - max))`.

    `x, y: dtype[rows, cols]`; each size is an int or a symbolic name; `vectors` as for `softmax_cuda`."""
    return _softmax("log_softmax_cuda", rows, cols, dtype, threads, vectors, log=True)


def shared_row_bytes(cols: Any, capacity: int, span: int) -> Any:
    """The dynamic shared memory a softmax block keeps a long row's exponentials in: a float for each value of its
    threads' chunks (`span` columns a round), where the row is longer than the registers hold (`capacity`) and this
    fits `SHARED_ROW_BYTES`; 0 otherwise. `cols` an int or an IR expression."""
    if isinstance(cols, int):
        nbytes = -(-cols // span) * span * 4
        return nbytes if cols > capacity and nbytes <= SHARED_ROW_BYTES else 0
    nbytes = semantics.binary("*", semantics.binary("/", semantics.binary("+", cols, span - 1), span), span * 4)
    keeps = semantics.logical("and", semantics.binary(">", cols, capacity),
                              semantics.binary("<=", nbytes, SHARED_ROW_BYTES))
    return E.IfThenElse(keeps, nbytes, E.convert(0))


def _softmax(template: str, rows: Size, cols: Size, dtype: str, threads: int | None, vectors: bool,
             log: bool) -> ScriptModule:
    plan = _prepare(template, rows, cols, dtype, threads, vectors)
    dt, chunks, width, lanes = plan.chunks.dtype, plan.chunks, plan.layout.width, plan.chunks.lanes
    kept, slots, capacity, span = plan.kept, plan.slots, plan.capacity, plan.span
    kernel_name = "log_softmax" if log else "softmax"

    with script_module() as module:

        @script
        def softmax(rows: i32, cols: i32, x: dt[rows, cols], y: dt[rows, cols]):
            attrs.func_name = kernel_name
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = plan.layout.threads
            attrs.cuda.grid_dim = plan.blocks(rows)
            if not log:
                attrs.cuda.dynamic_smem_bytes = shared_row_bytes(cols, capacity, span)
            row, lane = plan.row_and_lane()
            if row < rows:
                vector = chunks.vectors(cols, (~x[row, 0], ~y[row, 0]))
                share = chunks.share(lane, cols, vector)
                if cols <= capacity:  # the row fits the registers (known at build time where cols is)
                    v = register_tensor(f32, [slots])
                    for j in meta.range(kept):
                        share.load(v, j * lanes, x, (row,), j, -math.inf)
                    local_max: f32 = -math.inf
                    for s in meta.range(slots):
                        local_max = max(local_max, v[s])
                    top = plan.row_max(local_max)
                    local_sum: f32 = 0.0
                    for s in meta.range(slots):
                        if log:
                            local_sum += math.exp(v[s] - top)  # exp(-inf) = 0 past the row's end
                        else:
                            v[s] = math.exp(v[s] - top)  # each exponential once: the row keeps them
                            local_sum += v[s]
                    total = plan.row_sum(local_sum)
                    if log:
                        log_total = math.log(total)
                        for s in meta.range(slots):
                            v[s] = v[s] - top - log_total
                    else:
                        scale = 1.0 / total
                        for s in meta.range(slots):
                            v[s] = v[s] * scale
                    for j in meta.range(kept):
                        share.store(y, (row,), j, v, j * lanes)
                else:  # a long row: a chunk at a time, the exponentials kept in shared memory where they fit
                    streamed = (cols + span - 1) // span
                    c = register_tensor(f32, [lanes])
                    local_max: f32 = -math.inf
                    for j in range(streamed):
                        share.load(c, 0, x, (row,), j, -math.inf)
                        for k in meta.range(lanes):
                            local_max = max(local_max, c[k])
                    top = plan.row_max(local_max)
                    kept_row = False
                    if not log:
                        kept_row = shared_row_bytes(cols, capacity, span) > 0
                    exps = tensor_pointer(f32, [SHARED_ROW_BYTES // 4], init=dynamic_shared_memory(0, f32))
                    local_sum: f32 = 0.0
                    for j in range(streamed):
                        share.load(c, 0, x, (row,), j, -math.inf)
                        for k in meta.range(lanes):
                            e = math.exp(c[k] - top)
                            local_sum += e
                            if kept_row:
                                exps[(j * lanes + k) * width + lane] = e
                    total = plan.row_sum(local_sum)
                    log_total = math.log(total)
                    scale = 1.0 / total
                    for j in range(streamed):
                        if kept_row:
                            for k in meta.range(lanes):
                                c[k] = exps[(j * lanes + k) * width + lane] * scale
                        else:
                            share.load(c, 0, x, (row,), j, -math.inf)
                            for k in meta.range(lanes):
                                if log:
                                    c[k] = c[k] - top - log_total
                                else:
                                    c[k] = math.exp(c[k] - top - log_total)
                        share.store(y, (row,), j, c, 0)

    return bind_sizes(module, kernel_name, {"rows": rows, "cols": cols})


def layer_norm_cuda(rows: Size, cols: Size, eps: float = 1e-5, dtype: str = "float32", *, weight: bool = True,
                    bias: bool = True, threads: int | None = None, vectors: bool = True) -> ScriptModule:
    """A module with one kernel `layer_norm(<symbolic sizes>, x, [weight], [bias], y)`:
    `y[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias` with the row's mean and (biased) variance; without
    `weight` or `bias` (the flags) the kernel has no such parameter and skips that step.

    `x, y: dtype[rows, cols]`, `weight, bias: dtype[cols]`; each size is an int or a symbolic name; `vectors` as
    for `softmax_cuda`."""
    return _norm("layer_norm_cuda", "layer_norm", rows, cols, eps, dtype, weight, bias, threads, vectors, center=True)


def rms_norm_cuda(rows: Size, cols: Size, eps: float = 1e-6, dtype: str = "float32", *, weight: bool = True,
                  threads: int | None = None, vectors: bool = True) -> ScriptModule:
    """A module with one kernel `rms_norm(<symbolic sizes>, x, [weight], y)`:
    `y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight` (without `weight`, the flag, no such parameter or product).

    `x, y: dtype[rows, cols]`, `weight: dtype[cols]`; each size is an int or a symbolic name; `vectors` as for
    `softmax_cuda`."""
    return _norm("rms_norm_cuda", "rms_norm", rows, cols, eps, dtype, weight, False, threads, vectors, center=False)


def _norm(template: str, kernel_name: str, rows: Size, cols: Size, eps: float, dtype: str, has_weight: bool,
          has_bias: bool, threads: int | None, vectors: bool, center: bool) -> ScriptModule:
    """Layer norm (`center`) or RMS norm of the rows, times the weight and plus the bias where they are given."""
    plan = _prepare(template, rows, cols, dtype, threads, vectors)
    dt, chunks, lanes = plan.chunks.dtype, plan.chunks, plan.chunks.lanes
    kept, slots, capacity, span = plan.kept, plan.slots, plan.capacity, plan.span

    with script_module() as module:

        @script
        def norm(rows: i32, cols: i32, x: dt[rows, cols], weight: dt[cols], bias: dt[cols], y: dt[rows, cols]):
            attrs.func_name = kernel_name
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = plan.layout.threads
            attrs.cuda.grid_dim = plan.blocks(rows)
            row, lane = plan.row_and_lane()
            if row < rows:
                rows_aligned = (~x[row, 0], ~y[row, 0])
                params_aligned = ((~weight[0],) if has_weight else ()) + ((~bias[0],) if has_bias else ())
                vector = chunks.vectors(cols, rows_aligned + params_aligned)
                share = chunks.share(lane, cols, vector)
                p = register_tensor(f32, [lanes])
                if cols <= capacity:  # the row fits the registers (known at build time where cols is)
                    v = register_tensor(f32, [slots])
                    for j in meta.range(kept):
                        share.load(v, j * lanes, x, (row,), j, 0.0)
                    mean: f32 = 0.0
                    if center:
                        local_sum: f32 = 0.0
                        for s in meta.range(slots):
                            local_sum += v[s]
                        mean = plan.row_sum(local_sum) / f32(cols)
                    local_squares: f32 = 0.0
                    for j in meta.range(kept):
                        for k in meta.range(lanes):
                            if share.valid(j, k):
                                local_squares += (v[j * lanes + k] - mean) * (v[j * lanes + k] - mean)
                    scale = rsqrt(plan.row_sum(local_squares) / f32(cols) + eps)
                    for j in meta.range(kept):
                        for k in meta.range(lanes):
                            v[j * lanes + k] = (v[j * lanes + k] - mean) * scale
                        if has_weight:
                            share.load(p, 0, weight, (), j, 0.0)
                            for k in meta.range(lanes):
                                v[j * lanes + k] = v[j * lanes + k] * p[k]
                        if has_bias:
                            share.load(p, 0, bias, (), j, 0.0)
                            for k in meta.range(lanes):
                                v[j * lanes + k] = v[j * lanes + k] + p[k]
                        share.store(y, (row,), j, v, j * lanes)
                else:  # a long row: a chunk at a time, each pass reading it again
                    streamed = (cols + span - 1) // span
                    c = register_tensor(f32, [lanes])
                    mean: f32 = 0.0
                    if center:
                        local_sum: f32 = 0.0
                        for j in range(streamed):
                            share.load(c, 0, x, (row,), j, 0.0)
                            for k in meta.range(lanes):
                                local_sum += c[k]
                        mean = plan.row_sum(local_sum) / f32(cols)
                    local_squares: f32 = 0.0
                    for j in range(streamed):
                        share.load(c, 0, x, (row,), j, mean)  # (mean - mean)^2 = 0 past the row's end
                        for k in meta.range(lanes):
                            local_squares += (c[k] - mean) * (c[k] - mean)
                    scale = rsqrt(plan.row_sum(local_squares) / f32(cols) + eps)
                    for j in range(streamed):
                        share.load(c, 0, x, (row,), j, 0.0)
                        for k in meta.range(lanes):
                            c[k] = (c[k] - mean) * scale
                        if has_weight:
                            share.load(p, 0, weight, (), j, 0.0)
                            for k in meta.range(lanes):
                                c[k] = c[k] * p[k]
                        if has_bias:
                            share.load(p, 0, bias, (), j, 0.0)
                            for k in meta.range(lanes):
                                c[k] = c[k] + p[k]
                        share.store(y, (row,), j, c, 0)

    unused = [name for name, given in (("weight", has_weight), ("bias", has_bias)) if not given]
    bound = bind_sizes(module, kernel_name, {"rows": rows, "cols": cols})
    return drop_params(bound, kernel_name, unused) if unused else bound


CUDA_ROWS = RowTemplates(NORMALIZATION_DTYPES, {
    "softmax": softmax_cuda, "log_softmax": log_softmax_cuda, "layer_norm": layer_norm_cuda, "rms_norm": rms_norm_cuda,
}, vectors=True)
register_row_templates(LIBRARY_CUDA, CUDA_ROWS)


@library_template("layer_norm", LIBRARY_CUDA)
def layer_norm_rows_cuda(task: Task) -> TemplateBinding | None:
    """Layer norm over trailing axes, with or without its weight and its bias."""
    weight, bias = task.attrs.get("params", (False, False))
    return rows_binding(task, CUDA_ROWS, "axes", weight + bias, eps=float(task.attrs["eps"]), weight=weight,
                        bias=bias)


@library_template("rms_norm", LIBRARY_CUDA)
def rms_norm_rows_cuda(task: Task) -> TemplateBinding | None:
    """RMS norm over trailing axes, with or without its weight."""
    (weight,) = task.attrs.get("params", (False,))
    if trailing_axes(task, "axes") is None:
        return None
    return rows_binding(task, CUDA_ROWS, "axes", int(weight), eps=float(task.attrs["eps"]), weight=weight)


@library_template("group_norm", LIBRARY_CUDA)
def group_norm_rows_cuda(task: Task) -> TemplateBinding | None:
    """Group norm's normalization (over the last axis of its `[batch, groups, rest]` view): the layer norm template
    without weight and bias (group norm's per-channel weight and bias are operators of their own)."""
    if task.attrs.get("params") != (False,) or trailing_axes(task, "axes") != 1:
        return None
    rows = RowTemplates(NORMALIZATION_DTYPES, {"group_norm": layer_norm_cuda}, vectors=True)
    return rows_binding(task, rows, "axes", 0, eps=float(task.attrs["eps"]), weight=False, bias=False)
