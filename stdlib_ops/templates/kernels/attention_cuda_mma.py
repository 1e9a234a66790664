"""Scaled dot-product attention on the tensor cores (sm_80 and later), FlashAttention-2 style.

`o[b, i] = sum_j softmax_j(scale * q[b, i] . k[b, j] + mask[b, i, j]) v[b, j]` for f16 or bf16 `q, k, v, o` and a
head dimension that is a multiple of 16 (32 to 256), with f32 scores, softmax and accumulators.

- **Warps.** A block has `warps` warps; `kv_split` of them share a 16-row tile of queries and split the keys
  between them, so a block owns `block_q = 16 * warps / kv_split` consecutive queries of one head batch. With
  `kv_split = 1` (the prefill schedule) each warp owns 16 queries and walks every key; with `kv_split = warps` (the
  decoding schedule, for a handful of queries against a long cache) the warps walk different keys of the same 16
  queries and their partial results are combined in shared memory at the end (each warp's running maximum, sum
  and output rescaled to the common maximum).
- **Q.** The block's q tile is copied into shared memory once (`async_copy.TileCopy`, zeros past `seq_q`) and each
  warp keeps its 16 rows in registers as the A operand of `S = Q K^T` (`WarpMma.load_operand`: `ldmatrix_x4`);
  the k and v buffers then take its shared memory (each use of the memory is a `SharedMemoryPlan` from byte 0).
- **K and V.** The keys go by in tiles of `kv_split * block_k` rows (warp w of a split takes rows
  `w * block_k ...`), copied with 16-byte `cp_async` into one of two stages of K and V tiles (`CopyPipeline(2)`:
  the copy of tile t + 1 runs while tile t is multiplied); rows past `seq_k` are zeros. Shared rows are padded by
  16 bytes (`tiles.padded_tile`), so that the eight rows an `ldmatrix` reads lie in eight different bank groups.
- **Scores.** `S = Q K^T` (`WarpMma.multiply_held`, K's B fragments from `ldmatrix_x4`: K rows are the columns of
  K^T), then scaled, the additive mask added, and keys past `seq_k` (or, causally, past the query) set to -inf,
  cell by cell (`Accumulator.cells`).
- **Online softmax.** Each lane holds two rows of its warp's tile (`Accumulator.lane_rows`, their registers
  `row_registers`); the tile's row maxima are combined over the quad of lanes sharing a row (`shfl_xor_sync`), the
  running maximum is raised, the running sum and output are rescaled by `exp(old - new)`; a row that has seen only
  -inf keeps a shift of 0, so that a fully masked row ends with sum 0 and an output of 0 (as torch's SDPA gives).
- **P V.** The probabilities are rounded to the input dtype into registers in the layout of S, which is that of
  the A operand of `O += P V` (`WarpMma.operand`), whose B fragments come from `ldmatrix_x4_trans` of the
  row-major V tile.
- **Causal** blocks stop at the tile holding their last query's diagonal (keys after it are never read).
- **Output.** O times the reciprocal of the row's sum (0 where the sum is 0), rounded to the dtype, stored
  element by element, a row's reciprocal and bound check once a row.
- **Split-k** (`key_splits` = S > 1, for decoding: `attention_decode_cuda`). S blocks share a query tile, block s
  walking keys `s * ceil(seq_k / S)` on (a ragged last split, an empty one past the keys); each stores its
  normalized partial output and its log-sum-exp in f32 in place of the output, for a merge to combine.

The kernel follows the kernel contract: q, k, v are read as `cp_async` sources, the mask by element reads, o only
stored element by element. The 16-byte copies assume 16-byte aligned tensors with rows of a multiple of 8 elements
(the head dimension is a multiple of 16).
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, i32, meta, register_tensor, script, script_module
from hidet_lang.cuda import FULL_MASK, blockIdx, cp_async_wait_group, shfl_xor_sync, syncthreads, threadIdx
from hidet_lang.cuda.async_copy import CopyPipeline, TileCopy
from hidet_lang.cuda.fragments import MMA_M, WarpMma
from hidet_lang.cuda.tiles import SharedMemoryPlan, padded_tile
from hidet_lang.cuda_limits import shared_memory_per_block
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.sizes import bind_sizes

MMA_K = 16  # k of an mma.m16n8k16
PAD = 8  # elements each shared row is padded by (16 bytes)
MMA_DTYPES = ("float16", "bfloat16")
MASK_DTYPES = ("float32", "float16", "bfloat16", "float64")
HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)
MAX_SMEM_BYTES = shared_memory_per_block("sm_80")  # the least a GPU this template runs on gives a block


def default_schedule(seq_q: Size, head_dim: int) -> dict[str, int]:
    """The schedule for `seq_q` queries of `head_dim`: decoding (4 warps splitting the keys of 16 queries) where
    `seq_q` is known to be at most 16, else 4 warps of 16 queries each (64 a block), keys in tiles of 64 (32 for
    head dimensions above 128, whose accumulators take more registers)."""
    block_k = 64 if head_dim <= 128 else 32
    if isinstance(seq_q, int) and seq_q <= MMA_M:
        return {"warps": 4, "kv_split": 4, "block_k": 32 if head_dim <= 128 else 16}
    return {"warps": 4, "kv_split": 1, "block_k": block_k}


def attention_cuda_mma(batch_heads: Size, seq_q: Size, seq_k: Size, head_dim: int, causal: bool = False,
                       dtype: str = "float16", *, scale: float | None = None, mask_dtype: str | None = None,
                       warps: int | None = None, kv_split: int | None = None, block_k: int | None = None,
                       key_splits: int = 1) -> ScriptModule:
    """A module with one kernel `attention(<symbolic sizes>, q, k, v, [mask,] o)` on the tensor cores.

    `q, o: dtype[batch_heads, seq_q, head_dim]`, `k, v: dtype[batch_heads, seq_k, head_dim]`, and where
    `mask_dtype` is given an additive `mask: mask_dtype[batch_heads, seq_q, seq_k]`; `scale` defaults to
    1 / sqrt(head_dim). The sizes are ints or symbolic names; `head_dim` a multiple of 16 up to 256. The schedule
    (`warps`, `kv_split`, `block_k`) defaults to `default_schedule`'s.

    With `key_splits` = S > 1 the keys are split over S blocks per query tile (split-k decoding): split s takes
    keys `s * L ... (s + 1) * L - 1` with `L = ceil(seq_k / S)`, and in place of `o` the kernel stores each split's
    partial result, `part_o: f32[S, batch_heads, seq_q, head_dim]` (normalized by the split's own sum of
    exponentials, 0 where that is 0) and `part_lse: f32[S, batch_heads, seq_q]` (the split's log-sum-exp, -inf
    where it saw no key), which `attention_split.merge_partials` combines."""
    name = "attention_cuda_mma"
    check_sizes(name, {"batch_heads": batch_heads, "seq_q": seq_q, "seq_k": seq_k})
    require(head_dim in HEAD_DIMS, name, f"head_dim must be one of {HEAD_DIMS}, got {head_dim!r}")
    dt = template_dtype(name, dtype, MMA_DTYPES)
    mdt = None if mask_dtype is None else template_dtype(name, mask_dtype, MASK_DTYPES)
    schedule = default_schedule(seq_q, head_dim)
    warps = schedule["warps"] if warps is None else warps
    kv_split = schedule["kv_split"] if kv_split is None else kv_split
    block_k = schedule["block_k"] if block_k is None else block_k
    require(1 <= warps <= 16 and kv_split >= 1 and warps % kv_split == 0, name,
            "warps must be 1 to 16, a multiple of kv_split")
    require(block_k % MMA_K == 0 and block_k >= MMA_K, name, "block_k must be a multiple of 16")
    require(isinstance(key_splits, int) and key_splits >= 1, name, f"key_splits must be at least 1, got {key_splits!r}")
    split = key_splits > 1
    threads = 32 * warps
    block_q = MMA_M * warps // kv_split
    tile_k = kv_split * block_k  # key rows a shared tile holds
    scores = WarpMma(dt, MMA_M, block_k, b_k_major=True)  # a warp's S = Q K^T: 16 queries x block_k keys
    product = WarpMma(dt, MMA_M, head_dim)  # its O += P V: 16 queries x head_dim
    s_frags, o_frags = scores.accumulator, product.accumulator
    q_operand, p_operand = scores.operand(head_dim), product.operand(block_k)
    q_tile, kv_tile = padded_tile(dt, [block_q, head_dim], PAD), padded_tile(dt, [tile_k, head_dim], PAD)
    q_plan, kv_plan, combine_plan = SharedMemoryPlan(), SharedMemoryPlan(), SharedMemoryPlan()  # each from byte 0
    q_smem = q_plan.tiles(q_tile)
    k_smem, v_smem = kv_plan.tiles(kv_tile, 2), kv_plan.tiles(kv_tile, 2)
    # the splits' partial rows: a warp's output, then its rows' maxima and sums
    partials = combine_plan.tiles(padded_tile(f32, [MMA_M, head_dim + 2], 0), warps)
    smem_bytes = max(q_plan.nbytes, kv_plan.nbytes, combine_plan.nbytes if kv_split > 1 else 0)
    require(smem_bytes <= MAX_SMEM_BYTES, name, f"{smem_bytes} bytes of shared memory (at most {MAX_SMEM_BYTES})")
    q_copy, kv_copy = TileCopy(q_tile, threads), TileCopy(kv_tile, threads)
    pipe = CopyPipeline(2)
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    lane_rows = len(o_frags.lane_rows(0))  # rows a lane holds
    has_mask = mdt is not None

    with script_module() as module:

        @script
        def attention(batch_heads: i32, seq_q: i32, seq_k: i32, q: dt[batch_heads, seq_q, head_dim],
                      k: dt[batch_heads, seq_k, head_dim], v: dt[batch_heads, seq_k, head_dim],
                      rest: meta.types(([mdt[batch_heads, seq_q, seq_k]] if has_mask else [])
                                       + ([f32[key_splits, batch_heads, seq_q, head_dim],
                                           f32[key_splits, batch_heads, seq_q]] if split
                                          else [dt[batch_heads, seq_q, head_dim]]))):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = (seq_q + block_q - 1) // block_q * batch_heads * key_splits
            attrs.cuda.dynamic_smem_bytes = smem_bytes
            attrs.cuda.min_blocks = 1
            o = rest[len(rest) - 1]  # the output (part_lse when split)
            qa = q_operand.tensor(dt)
            kb = scores.b_registers()
            vb = product.b_registers()
            s = s_frags.tensor()
            p = p_operand.tensor(dt)
            acc = o_frags.tensor()
            row_max = register_tensor(f32, [lane_rows])
            row_sum = register_tensor(f32, [lane_rows])
            tiles_q = (seq_q + block_q - 1) // block_q
            ks_id = blockIdx.x % key_splits  # the block's split of the keys
            bh = blockIdx.x // key_splits // tiles_q
            q0 = blockIdx.x // key_splits % tiles_q * block_q
            lane = threadIdx.x % 32
            warp = threadIdx.x // 32
            wq = warp // kv_split * MMA_M  # the warp's first query row in the block
            wk = warp % kv_split * block_k  # the warp's first key row in a shared tile
            first_col, _ = o_frags.lane_columns(lane)[0]  # 0 for one lane of each row's quad
            for row, chunk in q_copy.mapping.on(threadIdx.x):
                q_copy.copy(q_smem.at(), row, chunk, q, [bh, q0, 0])
            pipe.commit()
            cp_async_wait_group(0)
            syncthreads()
            scores.load_operand(qa, q_smem.at(), wq, lane)
            for h in range(lane_rows):
                row_max[h] = -math.inf
                row_sum[h] = 0.0
            for r in range(o_frags.registers):
                acc[r] = 0.0
            kv_end = min(seq_k, q0 + block_q) if causal else seq_k
            split_len = (seq_k + key_splits - 1) // key_splits  # the block's keys: kv_begin ... kv_stop - 1
            kv_begin = ks_id * split_len
            kv_stop = min(kv_end, kv_begin + split_len)
            tiles = (kv_stop - kv_begin + tile_k - 1) // tile_k if kv_stop > kv_begin else 0
            # copy tile `it`, multiply tile `it - 1`; the first barrier also ends every warp's reads of the q tile
            for it in range(pipe.iterations(tiles)):
                pipe.wait()
                if pipe.fills(it, tiles):
                    for row, chunk in kv_copy.mapping.on(threadIdx.x):
                        kv_copy.copy(k_smem.at(pipe.fill_stage(it)), row, chunk, k, [bh, kv_begin + it * tile_k, 0],
                                     limit=kv_stop)
                        kv_copy.copy(v_smem.at(pipe.fill_stage(it)), row, chunk, v, [bh, kv_begin + it * tile_k, 0],
                                     limit=kv_stop)
                pipe.commit()
                if pipe.reads(it):
                    k0 = kv_begin + (it - 1) * tile_k + wk  # the warp's first key
                    for r in range(s_frags.registers):
                        s[r] = 0.0
                    scores.multiply_held(s, q_operand, qa, kb, k_smem.at(pipe.read_stage(it)), 0, wk, lane)
                    for r in range(s_frags.registers):
                        s[r] = s[r] * scale
                    if k0 + block_k > kv_stop or has_mask or (causal and k0 + block_k - 1 > q0 + wq):
                        for i, j, r in s_frags.cells(lane):
                            if k0 + j >= kv_stop or (causal and k0 + j > q0 + wq + i):
                                s[r] = -math.inf
                            elif has_mask:
                                if q0 + wq + i < seq_q:
                                    s[r] = s[r] + f32(rest[0][bh, q0 + wq + i, k0 + j])
                    for _i, h in s_frags.lane_rows(lane):
                        tile_max: f32 = -math.inf
                        for r in s_frags.row_registers(h):
                            tile_max = max(tile_max, s[r])
                        tile_max = max(tile_max, shfl_xor_sync(FULL_MASK, tile_max, 1))  # the row's quad of lanes
                        tile_max = max(tile_max, shfl_xor_sync(FULL_MASK, tile_max, 2))
                        new_max = max(row_max[h], tile_max)
                        shift = 0.0 if new_max == -math.inf else new_max
                        correction = math.exp(row_max[h] - shift)
                        row_max[h] = new_max
                        total: f32 = 0.0
                        for r in s_frags.row_registers(h):
                            e = math.exp(s[r] - shift)
                            p[r] = dt(e)
                            total += e
                        row_sum[h] = row_sum[h] * correction + total
                        for r in o_frags.row_registers(h):
                            acc[r] = acc[r] * correction
                    product.multiply_held(acc, p_operand, p, vb, v_smem.at(pipe.read_stage(it)), wk, 0, lane)
            for h in range(lane_rows):
                row_sum[h] += shfl_xor_sync(FULL_MASK, row_sum[h], 1)
                row_sum[h] += shfl_xor_sync(FULL_MASK, row_sum[h], 2)
            if kv_split > 1:  # the first warp of each split combines its split's warps
                syncthreads()  # every warp is done with the k and v tiles, which the partial rows take
                for i, h in o_frags.lane_rows(lane):
                    if first_col == 0:
                        partials.at(warp)[i, head_dim] = row_max[h]
                        partials.at(warp)[i, head_dim + 1] = row_sum[h]
                    for j, c in o_frags.lane_columns(lane):
                        partials.at(warp)[i, j] = acc[o_frags.register(h, c)]
                syncthreads()
                if warp % kv_split == 0:
                    weight = register_tensor(f32, [kv_split])
                    for i, h in o_frags.lane_rows(lane):
                        top: f32 = -math.inf
                        for w in meta.range(kv_split):
                            top = max(top, partials.at(warp + w)[i, head_dim])
                        top_shift = 0.0 if top == -math.inf else top
                        sum_all: f32 = 0.0
                        for w in meta.range(kv_split):
                            weight[w] = math.exp(partials.at(warp + w)[i, head_dim] - top_shift)
                            sum_all += partials.at(warp + w)[i, head_dim + 1] * weight[w]
                        row_sum[h] = sum_all
                        row_max[h] = top
                        for j, c in o_frags.lane_columns(lane):
                            out_all: f32 = 0.0
                            for w in meta.range(kv_split):
                                out_all += partials.at(warp + w)[i, j] * weight[w]
                            acc[o_frags.register(h, c)] = out_all
            if warp % kv_split == 0:
                for i, h in o_frags.lane_rows(lane):
                    oi = q0 + wq + i
                    if oi < seq_q:
                        if split and first_col == 0:  # the split's log-sum-exp
                            o[ks_id, bh, oi] = row_max[h] + math.log(row_sum[h]) if row_sum[h] > 0.0 else -math.inf
                        inverse = 1.0 / row_sum[h] if row_sum[h] > 0.0 else 0.0  # 0 for a sum of 0
                        for j, c in o_frags.lane_columns(lane):
                            if split:
                                rest[len(rest) - 2][ks_id, bh, oi, j] = acc[o_frags.register(h, c)] * inverse
                            else:
                                o[bh, oi, j] = dt(acc[o_frags.register(h, c)] * inverse)

    return bind_sizes(module, "attention", {"batch_heads": batch_heads, "seq_q": seq_q, "seq_k": seq_k})
