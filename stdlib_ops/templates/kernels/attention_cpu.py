"""Scaled dot-product attention for the CPU in one kernel: tiles of queries against tiles of keys and values with
the online softmax, on the CPU's vector types.

`o[b, i] = sum_j softmax_j(scale * q[b, i] . k[b, j] + mask[b, i, j]) v[b, j]`, where with `causal=True` query i
sees only keys j <= i (aligned at the top left, as torch's `is_causal`).

- **Work.** One parallel loop over (head batch, tile of `block_q` queries); a tile's queries, scaled, its running
  maxima and sums and its f32 output accumulators live in local arrays of the thread.
- **Key tiles.** The tile walks the keys in tiles of `block_k` (four vectors): it packs the tile of k transposed
  (`head_dim x block_k`, a step of the head dimension is one row of keys) and the tile of v (`block_k x` the value
  dimension rounded up to whole vectors), zero-padded past the sequence. Causally, the walk stops at the tile's
  last query.
- **Scores.** A register-blocked micro-kernel (`scores_<rows>x<block_k>`) computes `rows x block_k` scores at once:
  each step of the head dimension broadcasts one scaled query value a row and multiplies it into the four vectors
  of the packed keys with fused multiply-adds.
- **Online softmax.** Per query row, keys past the sequence or (causally) after the query become -inf, the mask
  is added, the tile's maximum raises the row's running maximum, the running sum and output accumulators are
  rescaled by `exp(old max - new max)`, and the scores become the weights `exp(score - new max)` (vector exp). A
  row that has seen only -inf keeps weights of 0; a row whose every key is masked ends with a sum of 0 and an
  output of 0, as torch's SDPA gives.
- **Weighted values.** A second micro-kernel (`values_<rows>x<cols>`) adds `weights @ v_tile` into the output
  accumulators, `rows` rows by up to four vectors of the value dimension at a time.

Arithmetic is in f32 whatever the storage dtype. The kernel follows the kernel contract: q, k, v and the mask are
only read element by element (while packing), o only stored element by element.
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, grid, i32, meta, register_tensor, script, script_module
from hidet_lang import cpu as vectors
from hidet_lang.frontend.script import ScriptFunction, ScriptModule
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding
from stdlib_ops.templates.cpu_lanes import machine_lanes, template_lanes
from stdlib_ops.templates.kernels.attention_cuda import head_batch_operands
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.registry import LIBRARY_CPU, library_template
from stdlib_ops.templates.sizes import bind_sizes

ATTENTION_CPU_DTYPES = ("float32", "float16", "bfloat16")
MASK_CPU_DTYPES = ("float32", "float16", "bfloat16", "float64")
MAX_HEAD_DIM = 512
"""The largest head and value dimensions: the packed tiles and accumulators of a thread stay well within its
stack."""
ROWS = 4
"""Query rows a micro-kernel computes at once: 4 rows x 4 vectors of accumulators (16 registers)."""
CHUNK_VECTORS = 4
"""The most vectors of the value dimension the weighted-values micro-kernel accumulates at a time."""
NEG_INF = -math.inf


def attention_cpu(batch_heads: Size, seq_q: Size, seq_k: Size, head_dim: int, value_dim: int | None = None,
                  causal: bool = False, dtype: str = "float32", *, scale: float | None = None,
                  mask_dtype: str | None = None, lanes: int | None = None, block_q: int = 64) -> ScriptModule:
    """A module with one CPU kernel `attention(<symbolic sizes>, q, k, v, [mask,] o)`.

    `q: dtype[batch_heads, seq_q, head_dim]`, `k: dtype[batch_heads, seq_k, head_dim]`,
    `v: dtype[batch_heads, seq_k, value_dim]` (`value_dim` defaults to `head_dim`), `o: dtype[batch_heads, seq_q,
    value_dim]`, and with `mask_dtype` an additive `mask: mask_dtype[batch_heads, seq_q, seq_k]`; the sizes are
    ints or symbolic names, the head and value dimensions ints. `scale` defaults to 1 / sqrt(head_dim). Schedule
    parameters: `lanes`, the vector width (4, 8 or 16; None: the machine's widest), and `block_q`, the queries of a
    unit of parallel work (a multiple of 4).
    """
    name = "attention_cpu"
    check_sizes(name, {"batch_heads": batch_heads, "seq_q": seq_q, "seq_k": seq_k})
    value_dim = head_dim if value_dim is None else value_dim
    for label, dim in (("head_dim", head_dim), ("value_dim", value_dim)):
        require(isinstance(dim, int) and 1 <= dim <= MAX_HEAD_DIM, name,
                f"{label} must be an int in 1..{MAX_HEAD_DIM}, got {dim!r}")
    dt = template_dtype(name, dtype, ATTENTION_CPU_DTYPES)
    mdt = None if mask_dtype is None else template_dtype(name, mask_dtype, MASK_CPU_DTYPES)
    lanes = template_lanes(name, lanes)
    require(block_q % ROWS == 0 and block_q >= ROWS, name, f"block_q must be a positive multiple of {ROWS}")
    factor = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    block_k = 4 * lanes
    vectors_k = block_k // lanes
    padded_v = -(-value_dim // lanes) * lanes  # the value dimension in whole vectors
    has_mask = mdt is not None
    score_tile = scores_kernel(lanes, head_dim, block_k)
    value_tile = values_kernel(lanes, block_k, padded_v)
    vmax, vload, vstore, vexp, vbroadcast, vsetzero, vreduce_max, vreduce_sum = (
        getattr(vectors, f"f32x{lanes}_{op}") for op in
        ("max", "load", "store", "exp", "broadcast", "setzero", "reduce_max", "reduce_sum"))

    with script_module() as module:

        @script
        def attention(batch_heads: i32, seq_q: i32, seq_k: i32, q: dt[batch_heads, seq_q, head_dim],
                      k: dt[batch_heads, seq_k, head_dim], v: dt[batch_heads, seq_k, value_dim],
                      rest: meta.types([mdt[batch_heads, seq_q, seq_k], dt[batch_heads, seq_q, value_dim]]
                                       if has_mask else [dt[batch_heads, seq_q, value_dim]])):
            attrs.func_kind = "cpu_kernel"
            o = rest[len(rest) - 1]
            tiles_q = (seq_q + block_q - 1) // block_q
            for t in grid(batch_heads * tiles_q, attrs="p"):
                bh = t // tiles_q
                q0 = t % tiles_q * block_q
                rows = min(block_q, seq_q - q0)
                queries = register_tensor(f32, [block_q * head_dim])
                keys = register_tensor(f32, [head_dim * block_k])  # transposed: a row per step of head_dim
                values = register_tensor(f32, [block_k * padded_v])
                weights = register_tensor(f32, [ROWS * block_k])
                acc = register_tensor(f32, [block_q * padded_v])
                running_max = register_tensor(f32, [block_q])
                running_sum = register_tensor(f32, [block_q])
                for i in range(block_q):
                    for c in range(head_dim):
                        queries[i * head_dim + c] = f32(q[bh, q0 + i, c]) * factor if i < rows else 0.0
                    for c in range(padded_v):
                        acc[i * padded_v + c] = 0.0
                    running_max[i] = NEG_INF
                    running_sum[i] = 0.0
                kv_end = min(seq_k, q0 + rows) if causal else seq_k
                for k0 in range(0, kv_end, block_k):
                    cols = min(block_k, seq_k - k0)
                    for j in range(block_k):
                        for c in range(head_dim):
                            keys[c * block_k + j] = f32(k[bh, k0 + j, c]) if j < cols else 0.0
                        for c in range(padded_v):
                            inside = j < cols and c < value_dim
                            values[j * padded_v + c] = f32(v[bh, k0 + j, c]) if inside else 0.0
                    for g in range(0, rows, ROWS):
                        score_tile(~queries[g * head_dim], ~keys[0], ~weights[0])
                        for r in range(ROWS):
                            i = g + r
                            qi = q0 + i
                            w = ~weights[r * block_k]
                            if i < rows:
                                if has_mask or cols < block_k or (causal and k0 + block_k - 1 > qi):
                                    for j in range(block_k):
                                        s = w[j]
                                        if has_mask:
                                            s = s + f32(rest[0][bh, qi, k0 + j]) if j < cols else s
                                        allowed = j < cols and (not causal or k0 + j <= qi)
                                        w[j] = s if allowed else NEG_INF
                                top = vload(w)
                                for n in meta.range(1, vectors_k):
                                    top = vmax(top, vload(w + n * lanes))
                                new_max = max(running_max[i], vreduce_max(top))
                                correction: f32 = 1.0
                                if new_max == NEG_INF:  # only -inf so far: weights of 0
                                    for n in meta.range(vectors_k):
                                        vstore(w + n * lanes, vsetzero())
                                else:
                                    correction = math.exp(running_max[i] - new_max)
                                    shift = vbroadcast(new_max)
                                    total = vsetzero()
                                    for n in meta.range(vectors_k):
                                        p = vexp(vload(w + n * lanes) - shift)
                                        vstore(w + n * lanes, p)
                                        total = total + p
                                    running_sum[i] = running_sum[i] * correction + vreduce_sum(total)
                                    running_max[i] = new_max
                                rescale = vbroadcast(correction)
                                for n in range(padded_v // lanes):
                                    row = ~acc[i * padded_v + n * lanes]
                                    vstore(row, vload(row) * rescale)
                            else:
                                for n in meta.range(vectors_k):
                                    vstore(w + n * lanes, vsetzero())
                        value_tile(~weights[0], ~values[0], ~acc[g * padded_v])
                for i in range(rows):
                    total_i = running_sum[i]
                    for c in range(value_dim):
                        o[bh, q0 + i, c] = dt(acc[i * padded_v + c] / total_i) if total_i > 0.0 else dt(0.0)

    return bind_sizes(module, "attention", {"batch_heads": batch_heads, "seq_q": seq_q, "seq_k": seq_k})


def scores_kernel(lanes: int, head_dim: int, block_k: int) -> ScriptFunction:
    """The `cpu_internal` function `scores_<ROWS>x<block_k>(queries, keys, out)`: `out[r * block_k + j] = sum over
    c of queries[r * head_dim + c] * keys[c * block_k + j]` for `ROWS` rows, the accumulators a local array read
    and written at constant offsets only (the C compiler keeps them in vector registers)."""
    load, store, fma, broadcast, setzero = (getattr(vectors, f"f32x{lanes}_{op}") for op in
                                            ("load", "store", "fma", "broadcast", "setzero"))
    cells = [(r, n) for r in range(ROWS) for n in range(block_k // lanes)]
    name = f"scores_{ROWS}x{block_k}_{head_dim}"

    @script
    def scores(queries: ~f32, keys: ~f32, out: ~f32):
        attrs.func_kind = "cpu_internal"
        attrs.func_name = name
        attrs.noinline = True  # compiled on its own: the accumulators get the vector registers
        regs = register_tensor(f32, [ROWS * block_k])
        for r, n in cells:
            store(~regs[r * block_k + n * lanes], setzero())
        for c in range(head_dim):
            for r in meta.range(ROWS):
                a = broadcast(queries[r * head_dim + c])
                for n in meta.range(block_k // lanes):
                    cell = ~regs[r * block_k + n * lanes]
                    store(cell, fma(a, load(keys + c * block_k + n * lanes), load(cell)))
        for r, n in cells:
            store(out + r * block_k + n * lanes, load(~regs[r * block_k + n * lanes]))

    return scores


def values_kernel(lanes: int, block_k: int, padded_v: int) -> ScriptFunction:
    """The `cpu_internal` function `values_<ROWS>x<padded_v>(weights, values, acc)`: `acc[r * padded_v + c] +=
    sum over j of weights[r * block_k + j] * values[j * padded_v + c]` for `ROWS` rows, up to `CHUNK_VECTORS`
    vectors of columns at a time held in registers."""
    load, store, fma, broadcast = (getattr(vectors, f"f32x{lanes}_{op}") for op in
                                   ("load", "store", "fma", "broadcast"))
    total = padded_v // lanes
    chunks = [(start * lanes, min(CHUNK_VECTORS, total - start)) for start in range(0, total, CHUNK_VECTORS)]
    width = CHUNK_VECTORS * lanes
    name = f"values_{ROWS}x{padded_v}_{block_k}"

    @script
    def weighted_values(weights: ~f32, values: ~f32, acc: ~f32):
        attrs.func_kind = "cpu_internal"
        attrs.func_name = name
        attrs.noinline = True
        regs = register_tensor(f32, [ROWS * width])
        for c0, count in chunks:
            for r in meta.range(ROWS):
                for n in meta.range(count):
                    store(~regs[r * width + n * lanes], load(acc + r * padded_v + c0 + n * lanes))
            for j in range(block_k):
                for r in meta.range(ROWS):
                    p = broadcast(weights[r * block_k + j])
                    for n in meta.range(count):
                        cell = ~regs[r * width + n * lanes]
                        store(cell, fma(p, load(values + j * padded_v + c0 + n * lanes), load(cell)))
            for r in meta.range(ROWS):
                for n in meta.range(count):
                    store(acc + r * padded_v + c0 + n * lanes, load(~regs[r * width + n * lanes]))

    return weighted_values


@library_template("attention", LIBRARY_CPU)
def attention_on_cpu(task: Task) -> TemplateBinding | None:
    """Scaled dot-product attention over `[..., seq, dim]` f32 or f16 tensors whose batch dimensions broadcast (key
    and value heads shared by groups of query heads with `enable_gqa`), with any scale, causal or not, an
    optional additive mask, head and value dimensions known at build time, where the machine has vector FMA."""
    operands = head_batch_operands(task)
    if operands is None or machine_lanes() is None:
        return None
    head_dim, value_dim, dtype, mask_dtype = operands.head_dim, operands.value_dim, operands.dtype, operands.mask_dtype
    if not (isinstance(head_dim, int) and isinstance(value_dim, int)) or max(head_dim, value_dim) > MAX_HEAD_DIM:
        return None
    if dtype not in ATTENTION_CPU_DTYPES or (mask_dtype is not None and mask_dtype not in MASK_CPU_DTYPES):
        return None
    return operands.binding("attention_cpu", attention_cpu, {**operands.options, "value_dim": value_dim})
