"""Scaled dot-product attention on the tensor cores (sm_80 and later), FlashAttention-2 style.

`o[b, i] = sum_j softmax_j(scale * q[b, i] . k[b, j] + mask[b, i, j]) v[b, j]` for f16 or bf16 `q, k, v, o` and a
head dimension that is a multiple of 16 (32 to 256), with f32 scores, softmax and accumulators.

- **Warps.** A block has `warps` warps; `kv_split` of them share a 16-row tile of queries and split the keys
  between them, so a block owns `block_q = 16 * warps / kv_split` consecutive queries of one head batch. With
  `kv_split = 1` (the prefill schedule) each warp owns 16 queries and walks every key; with `kv_split = warps` (the
  decoding schedule, for a handful of queries against a long cache) the warps walk different keys of the same 16
  queries and their partial results are combined in shared memory at the end (each warp's running maximum, sum
  and output rescaled to the common maximum).
- **Q.** The block's q tile is copied into shared memory once (`cp_async`, zeros past `seq_q`) and each warp keeps
  its 16 rows in registers as `mma_m16n8k16` A fragments (`ldmatrix_x4`), `head_dim / 16` of them; the k and v
  buffers then take its shared memory.
- **K and V.** The keys go by in tiles of `kv_split * block_k` rows (warp w of a split takes rows
  `w * block_k ...`), each copied with 16-byte `cp_async` into one of two shared buffers (the copy of tile t + 1
  runs while tile t is multiplied); rows past `seq_k` are zeros. Shared rows are padded by 16 bytes, so that the
  eight rows an `ldmatrix` reads lie in eight different bank groups.
- **Scores.** `S = Q K^T` with K's B fragments from `ldmatrix_x4` (K rows are the columns of K^T), then scaled,
  the additive mask added, and keys past `seq_k` (or, causally, past the query) set to -inf.
- **Online softmax.** Each lane holds two rows of its warp's tile (g and g + 8 of the accumulator layout); the
  tile's row maxima are combined over the quad of lanes sharing a row (`shfl_xor_sync`), the running maximum is
  raised, the running sum and output are rescaled by `exp(old - new)`; a row that has seen only -inf keeps a
  shift of 0, so that a fully masked row ends with sum 0 and an output of 0 (as torch's SDPA gives).
- **P V.** The probabilities are rounded to the input dtype and are, as they lie in the accumulators, the A
  fragments of `O += P V`, whose B fragments come from `ldmatrix_x4_trans` of the row-major V tile.
- **Causal** blocks stop at the tile holding their last query's diagonal (keys after it are never read).
- **Output.** O times the reciprocal of the row's sum (0 where the sum is 0), rounded to the dtype, stored
  element by element.
- **Split-k** (`key_splits` = S > 1, for decoding: `attention_decode_cuda`). S blocks share a query tile, block s
  walking keys `s * ceil(seq_k / S)` on (a ragged last split, an empty one past the keys); each stores its
  normalized partial output and its log-sum-exp in f32 in place of the output, for a merge to combine.

The kernel follows the kernel contract: q, k, v are read as `cp_async` sources, the mask by element reads, o only
stored element by element. The 16-byte copies assume 16-byte aligned tensors with rows of a multiple of 8 elements
(the head dimension is a multiple of 16).
"""

from __future__ import annotations

import math

from hidet_lang import attrs, f32, i32, meta, register_tensor, script, script_module, tensor_pointer, u32
from hidet_lang.cuda import (
    FULL_MASK,
    blockIdx,
    cp_async,
    cp_async_commit_group,
    cp_async_wait_group,
    dynamic_shared_memory,
    ldmatrix_x4,
    ldmatrix_x4_trans,
    mma_m16n8k16_bf16_f32,
    mma_m16n8k16_f16_f32,
    shfl_xor_sync,
    syncthreads,
    threadIdx,
)
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.sizes import bind_sizes

MMA_M, MMA_N, MMA_K = 16, 8, 16
CHUNK = 8  # elements of a 16-byte copy and of an ldmatrix row
PAD = 8  # elements each shared row is padded by (16 bytes)
MMA_DTYPES = ("float16", "bfloat16")
MASK_DTYPES = ("float32", "float16", "bfloat16", "float64")
HEAD_DIMS = (32, 64, 96, 128, 160, 192, 224, 256)
MAX_SMEM_BYTES = 160 * 1024  # within an sm_80 block's 163 KB of dynamic shared memory


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
    tile_k = kv_split * block_k  # key rows a shared buffer holds
    row = head_dim + PAD  # elements of a shared row
    q_bytes = block_q * row * 2
    kv_bytes = 2 * tile_k * row * 2  # one buffer: a k tile then a v tile
    combine_bytes = warps * MMA_M * (head_dim + 2) * 4 if kv_split > 1 else 0
    smem_bytes = max(q_bytes, 2 * kv_bytes, combine_bytes)
    require(smem_bytes <= MAX_SMEM_BYTES, name, f"{smem_bytes} bytes of shared memory (at most {MAX_SMEM_BYTES})")
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    mma = mma_m16n8k16_bf16_f32 if dt.name == "bfloat16" else mma_m16n8k16_f16_f32
    d_steps, d_tiles = head_dim // MMA_K, head_dim // MMA_N
    k_steps, k_tiles = block_k // MMA_K, block_k // MMA_N
    q_chunks, kv_chunks = block_q * head_dim // CHUNK, tile_k * head_dim // CHUNK
    row_chunks = head_dim // CHUNK
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
            smem_q = tensor_pointer(dt, [block_q, row], init=dynamic_shared_memory(0, dt))
            smem_kv = tensor_pointer(dt, [2, 2, tile_k, row], init=dynamic_shared_memory(0, dt))
            qa = register_tensor(u32, [d_steps, 4])
            kb = register_tensor(u32, [4])
            vb = register_tensor(u32, [4])
            pa = register_tensor(dt, [8])
            s = register_tensor(f32, [k_tiles, 4])
            acc = register_tensor(f32, [d_tiles, 4])
            row_max = register_tensor(f32, [2])
            row_sum = register_tensor(f32, [2])
            tiles_q = (seq_q + block_q - 1) // block_q
            ks_id = blockIdx.x % key_splits  # the block's split of the keys
            bh = blockIdx.x // key_splits // tiles_q
            q0 = blockIdx.x // key_splits % tiles_q * block_q
            lane = threadIdx.x % 32
            warp = threadIdx.x // 32
            wq = warp // kv_split * MMA_M  # the warp's first query row in the block
            wk = warp % kv_split * block_k  # the warp's first key row in a shared tile
            for t in meta.range(-(-q_chunks // threads)):
                qc = threadIdx.x + t * threads
                if q_chunks % threads == 0 or qc < q_chunks:
                    qr = qc // row_chunks
                    qcol = qc % row_chunks * CHUNK
                    if q0 + qr < seq_q:
                        cp_async(~smem_q[qr, qcol], ~q[bh, q0 + qr, qcol], 16)
                    else:
                        for e in meta.range(CHUNK):
                            smem_q[qr, qcol + e] = dt(0.0)
            cp_async_commit_group()
            cp_async_wait_group(0)
            syncthreads()
            for ks in meta.range(d_steps):
                ldmatrix_x4(~qa[ks, 0], ~smem_q[wq + lane % 16, ks * MMA_K + lane // 16 * CHUNK])
            for h in meta.range(2):
                row_max[h] = -math.inf
                row_sum[h] = 0.0
            for n in meta.range(d_tiles):
                for e in meta.range(4):
                    acc[n, e] = 0.0
            syncthreads()  # the q tile is in registers: its shared memory takes the first k/v tile
            kv_end = min(seq_k, q0 + block_q) if causal else seq_k
            split_len = (seq_k + key_splits - 1) // key_splits  # the block's keys: kv_begin ... kv_stop - 1
            kv_begin = ks_id * split_len
            kv_stop = min(kv_end, kv_begin + split_len)
            tiles = (kv_stop - kv_begin + tile_k - 1) // tile_k if kv_stop > kv_begin else 0
            for tile in range(tiles + 1):  # copy tile `tile`, multiply tile `tile - 1`
                if tile < tiles:
                    fill = tile % 2
                    fill_k0 = kv_begin + tile * tile_k
                    for t in meta.range(-(-kv_chunks // threads)):
                        c = threadIdx.x + t * threads
                        if kv_chunks % threads == 0 or c < kv_chunks:
                            r = c // row_chunks
                            col = c % row_chunks * CHUNK
                            if fill_k0 + r < kv_stop:
                                cp_async(~smem_kv[fill, 0, r, col], ~k[bh, fill_k0 + r, col], 16)
                                cp_async(~smem_kv[fill, 1, r, col], ~v[bh, fill_k0 + r, col], 16)
                            else:
                                for e in meta.range(CHUNK):
                                    smem_kv[fill, 0, r, col + e] = dt(0.0)
                                    smem_kv[fill, 1, r, col + e] = dt(0.0)
                cp_async_commit_group()
                cp_async_wait_group(1)  # all but the copy just issued are in place
                syncthreads()
                if tile > 0:
                    buf = (tile - 1) % 2
                    k0 = kv_begin + (tile - 1) * tile_k + wk
                    for n in meta.range(k_tiles):
                        for e in meta.range(4):
                            s[n, e] = 0.0
                    for ks in meta.range(d_steps):
                        for pair in meta.range(k_tiles // 2):
                            key = wk + pair * 2 * MMA_N + lane // 16 * 8 + lane % 8
                            ldmatrix_x4(~kb[0], ~smem_kv[buf, 0, key, ks * MMA_K + lane // 8 % 2 * CHUNK])
                            mma(~qa[ks, 0], ~kb[0], ~s[2 * pair, 0])
                            mma(~qa[ks, 0], ~kb[2], ~s[2 * pair + 1, 0])
                    masked = k0 + block_k > kv_stop or has_mask or (causal and k0 + block_k - 1 > q0 + wq)
                    for n in meta.range(k_tiles):
                        for e in meta.range(4):
                            s[n, e] = s[n, e] * scale
                    if masked:
                        for n in meta.range(k_tiles):
                            for e in meta.range(4):
                                i = q0 + wq + lane // 4 + e // 2 * 8
                                j = k0 + n * MMA_N + lane % 4 * 2 + e % 2
                                if j >= kv_stop or (causal and j > i):
                                    s[n, e] = -math.inf
                                elif has_mask:
                                    if i < seq_q:
                                        s[n, e] = s[n, e] + f32(rest[0][bh, i, j])
                    for h in meta.range(2):
                        tile_max: f32 = -math.inf
                        for n in meta.range(k_tiles):
                            tile_max = max(tile_max, max(s[n, 2 * h], s[n, 2 * h + 1]))
                        tile_max = max(tile_max, shfl_xor_sync(FULL_MASK, tile_max, 1))
                        tile_max = max(tile_max, shfl_xor_sync(FULL_MASK, tile_max, 2))
                        new_max = max(row_max[h], tile_max)
                        shift = 0.0 if new_max == -math.inf else new_max
                        correction = math.exp(row_max[h] - shift)
                        row_max[h] = new_max
                        total: f32 = 0.0
                        for n in meta.range(k_tiles):
                            for e in meta.range(2):
                                p = math.exp(s[n, 2 * h + e] - shift)
                                s[n, 2 * h + e] = p
                                total += p
                        row_sum[h] = row_sum[h] * correction + total
                        for n in meta.range(d_tiles):
                            acc[n, 2 * h] = acc[n, 2 * h] * correction
                            acc[n, 2 * h + 1] = acc[n, 2 * h + 1] * correction
                    for kk in meta.range(k_steps):
                        for e in meta.range(8):
                            pa[e] = dt(s[2 * kk + e // 4, e % 4])
                        for pair in meta.range(d_tiles // 2):
                            key = wk + kk * MMA_K + lane % 16
                            ldmatrix_x4_trans(~vb[0], ~smem_kv[buf, 1, key, pair * 2 * MMA_N + lane // 16 * CHUNK])
                            mma(~pa[0], ~vb[0], ~acc[2 * pair, 0])
                            mma(~pa[0], ~vb[2], ~acc[2 * pair + 1, 0])
                syncthreads()  # every warp is done with the buffer the next copy refills
            for h in meta.range(2):
                row_sum[h] += shfl_xor_sync(FULL_MASK, row_sum[h], 1)
                row_sum[h] += shfl_xor_sync(FULL_MASK, row_sum[h], 2)
            if kv_split > 1:  # the first warp of each split combines its split's warps (the buffers are free)
                part = tensor_pointer(f32, [warps, MMA_M, head_dim + 2], init=dynamic_shared_memory(0, f32))
                for h in meta.range(2):
                    pr = lane // 4 + h * 8
                    if lane % 4 == 0:
                        part[warp, pr, head_dim] = row_max[h]
                        part[warp, pr, head_dim + 1] = row_sum[h]
                    for n in meta.range(d_tiles):
                        for e in meta.range(2):
                            part[warp, pr, n * MMA_N + lane % 4 * 2 + e] = acc[n, 2 * h + e]
                syncthreads()
                if warp % kv_split == 0:
                    for h in meta.range(2):
                        pr = lane // 4 + h * 8
                        top: f32 = -math.inf
                        for w in meta.range(kv_split):
                            top = max(top, part[warp + w, pr, head_dim])
                        top_shift = 0.0 if top == -math.inf else top
                        sum_all: f32 = 0.0
                        for w in meta.range(kv_split):
                            weight = math.exp(part[warp + w, pr, head_dim] - top_shift)
                            sum_all += part[warp + w, pr, head_dim + 1] * weight
                        row_sum[h] = sum_all
                        row_max[h] = top
                        for n in meta.range(d_tiles):
                            for e in meta.range(2):
                                out_all: f32 = 0.0
                                for w in meta.range(kv_split):
                                    weight2 = math.exp(part[warp + w, pr, head_dim] - top_shift)
                                    out_all += part[warp + w, pr, n * MMA_N + lane % 4 * 2 + e] * weight2
                                acc[n, 2 * h + e] = out_all
            if warp % kv_split == 0:
                if split:  # the split's log-sum-exp, then (below) its partial output
                    for h in meta.range(2):
                        li = q0 + wq + lane // 4 + h * 8
                        if lane % 4 == 0 and li < seq_q:
                            o[ks_id, bh, li] = row_max[h] + math.log(row_sum[h]) if row_sum[h] > 0.0 else -math.inf
                for h in meta.range(2):  # row_max now holds the reciprocal of the row's sum (0 for a sum of 0)
                    row_max[h] = 1.0 / row_sum[h] if row_sum[h] > 0.0 else 0.0
                for n in meta.range(d_tiles):
                    for e in meta.range(4):
                        oi = q0 + wq + lane // 4 + e // 2 * 8
                        if oi < seq_q:
                            col = n * MMA_N + lane % 4 * 2 + e % 2
                            if split:
                                rest[len(rest) - 2][ks_id, bh, oi, col] = acc[n, e] * row_max[e // 2]
                            else:
                                o[bh, oi, col] = dt(acc[n, e] * row_max[e // 2])

    return bind_sizes(module, "attention", {"batch_heads": batch_heads, "seq_q": seq_q, "seq_k": seq_k})
