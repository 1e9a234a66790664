"""Scaled dot-product attention for Hopper (sm_90a), FlashAttention-3 style: TMA copies into 128-byte-swizzled
shared memory, a ring of full and empty mbarriers fed by a producer warpgroup, and warpgroup MMA (wgmma) issued by
consumer warpgroups that keep the softmax in registers.

`o[b, h, i] = sum_j softmax_j(scale * q[b, h, i] . k[b, h / group, j] + mask[b, h, i, j]) v[b, h / group, j]` for
f16 or bf16 `q, k, v, o` of head dimension 64 or 128, with f32 scores, softmax and accumulators; `group` query heads
share a key/value head (grouped-query attention, read in place). The tensors are `[batch, heads, seq, head_dim]`, or
`[heads, seq, head_dim]` (one batch entry), read through tensor maps (`TensorMap` parameters: the caller passes the
tensors themselves).

- **Warpgroups.** A block has `1 + consumers` warpgroups (128 threads each) and owns `block_q = 64 * consumers`
  consecutive queries of one head. Warpgroup 0 is the producer: it lowers its register budget (`setmaxnreg_dec`)
  and one of its threads issues every TMA copy. Each consumer raises its budget (`setmaxnreg_inc`) and owns 64 of
  the block's queries: wgmma's M.
- **Q** is copied once, a consumer's 64 queries as one tile (`swizzled_tile`: its 64-column atoms side by side),
  on a barrier of its own.
- **Two rings** (`hidet_lang.cuda.tiles`): `stages` buffers of k tiles and as many of v tiles, each `block_k x
  head_dim`. Each ring's stage has a full barrier (the producer's arrival plus the copies' bytes) and an empty one
  (one arrival a consumer warpgroup, by an elected thread, once the warpgroup's wgmma reads of it are done), so S of
  a tile waits for its keys only and P V for its values.
- **S = Q K^T** by wgmma, both operands K-major in shared memory (the head dimension is the reduction), into an
  accumulator of 64 x `block_k` f32 a consumer.
- **Online softmax** on the accumulator registers: a thread holds two rows of its warp's 16 (`wgmma_accumulator_row`),
  whose maxima and sums are combined over the four threads sharing a row (`shfl_xor_sync`). Scores are kept in
  powers of 2 (scaled by `scale * log2(e)`, the mask by `log2(e)`), so that each weight is one `exp2`. A row that
  has seen only -inf keeps a shift of 0, so that a fully masked row ends with sum 0 and an output of 0 (as torch's
  SDPA).
- **O += P V** with P, rounded to the input dtype, taken from the registers as wgmma's A fragment: register
  `8 kk + e` of S is element e of the A fragment of the kk-th 16 keys, so no shuffle is needed. V's tile is
  MN-major (keys are the reduction, rows of V): a `transposed` descriptor over the stage's v tiles side by side,
  one m64nDk16 wgmma (D the head dimension) a 16 keys.
- **Overlap.** Step t of a consumer issues tile t's `S = Q K^T`, then tile t - 1's `P V`, waits for S only
  (`wgmma_wait_group(1)`) and computes tile t's softmax while that `P V` runs; then it waits for `P V`, releases
  the stage, rescales O and rounds the new P into the A fragments. Step 0 multiplies a P of zeros by tile 0's V, so
  that every step commits the same two groups (the compiler, which follows the groups along every path, then sees
  S complete after the wait); the last tile's `P V` follows the loop. The softmax only reads S (writing a wgmma's
  accumulators while another wgmma runs would make the compiler serialize them): each score is scaled as it is
  read, twice (for the row maximum, then for the exponential: one FFMA and one `ex2.approx`, the kernel being
  fast-math), and the exponentials are written as the next tile's A fragments of P, beside the ones `P V` reads.
  So a consumer holds S, O and two P's: 192 registers at 128 x 128 tiles, which fit its 232 without spills.
- **Ping-pong.** Two consumers take turns issuing their wgmma (`WarpgroupTurns`): one's S and P V go to the tensor
  cores while the other runs its softmax, as FlashAttention-3's two warpgroups do.
- **Edge tiles** (past the keys' end, on the causal diagonal, under a mask) test each score against two bounds a
  thread works out once a tile (`edge_score`); the other tiles take no test.
- **Causal** blocks stop at the tile holding their last query's diagonal, and the blocks of a head take its query
  tiles from the last: the longest walks start first, the short ones fill the tail of the grid.
- **Every size.** TMA fills the parts of a box outside the tensor with zeros; keys past `seq_k` (and, causally,
  past the query: queries see keys j <= i, as torch's `is_causal`) score -inf, and rows past `seq_q` are stored
  nowhere. The additive mask is read element by element, only on the rows inside `seq_q`.
- **O** leaves through shared memory (`AccumulatorStaging`): a warp's 16 rows of 64 columns a pass, stored as
  16-byte vectors (`STG.E.128`, no element stores: the launch refuses an `o` that is not 16-byte aligned).

The kernel reads q, k and v only through TMA (no prologue fuses into them; their rows of head_dim 16-bit elements
are multiples of 16 bytes), the mask by element reads, and stores o by 16-byte vector stores (which a fused epilogue
turns into element stores). Shared memory is all
dynamic, so that the tiles start at the 1024-byte boundary the swizzle needs. The attention adapter takes this
template on sm_90a targets where TMA can read the task's tensors (`hopper_attention_binding`), and the sm_80
tensor-core template `attention_cuda_mma` otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hidet_lang import attrs, f32, i32, meta, register_tensor, script, script_module
from hidet_lang.cuda import (
    FULL_MASK,
    blockIdx,
    copy_vector,
    fence_mbarrier_init,
    mbarrier_arrive_expect_tx,
    mbarrier_wait,
    setmaxnreg_dec,
    setmaxnreg_inc,
    shfl_xor_sync,
    syncthreads,
    syncwarp,
    threadIdx,
    tma_load,
    wgmma_accumulator_col,
    wgmma_accumulator_row,
    wgmma_commit_group,
    wgmma_descriptor,
    wgmma_fence,
    wgmma_mma_async,
    wgmma_wait_group,
)
from hidet_lang.cuda.tiles import (
    BARRIER_BYTES,
    WARPGROUP_WARPS,
    AccumulatorStaging,
    SharedMemoryPlan,
    swizzled_tile,
    tile_tensor_map,
)
from hidet_lang.frontend import semantics
from hidet_lang.frontend.script import ScriptModule
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from stdlib_ops.schedule.signature import KernelSignature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, shape_of
from stdlib_ops.templates.kernels.matmul_cuda_sm90 import MAX_SMEM_BYTES, PRODUCER_REGISTERS, WARPGROUP, WGMMA_K
from stdlib_ops.templates.params import Size, check_sizes, require, template_dtype
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.views import Dim, View, broadcast_batch, same_dim

LOG2E = math.log2(math.e)
ROWS = 64  # queries of a consumer (wgmma's M), and head-dimension columns of a tile (one 128-byte swizzle row)
HEAD_DIMS = (64, 128)
BLOCK_KS = (64, 128)
DTYPES = ("float16", "bfloat16")
MASK_DTYPES = ("float32", "float16", "bfloat16", "float64")
DECODING_QUERIES = 16  # queries the tensor-core template's decoding schedule takes (its warps split the keys)
CONSUMER_REGISTERS = {1: 256, 2: 232}  # a consumer's, by consumers: S, its exponentials, P, O and the softmax


def default_schedule(head_dim: int, seq_k: Size) -> dict[str, int]:
    """The schedule for `head_dim` (64 or 128) and `seq_k` keys: two consumers (128 queries a block) in rings of
    three stages, tiles of 128 keys (S by m64n128 wgmma, FlashAttention-3's tile) unless the keys are known to fit
    64."""
    wide = not isinstance(seq_k, int) or seq_k > 64
    return {"consumers": 2, "block_k": 128 if wide else 64, "stages": 3}


def attention_cuda_sm90(batch: Size, heads: Size, kv_heads: Size, seq_q: Size, seq_k: Size, head_dim: int,
                        causal: bool = False, dtype: str = "float16", *, group: int = 1, batched: bool | None = None,
                        scale: float | None = None, mask_dtype: str | None = None, consumers: int | None = None,
                        block_k: int | None = None, stages: int | None = None) -> ScriptModule:
    """A module with one kernel `attention(<symbolic sizes>, q, k, v, [mask,] o)` on Hopper's tensor cores (built
    for 'cuda:sm_90a').

    `q: TensorMap(dtype, [batch, heads, seq_q, head_dim])`, `k, v: TensorMap(dtype, [batch, kv_heads, seq_k,
    head_dim])`, `o: dtype[batch, heads, seq_q, head_dim]`, and where `mask_dtype` is given an additive `mask:
    mask_dtype[batch, heads, seq_q, seq_k]`; without the batch dimension (`[heads, ...]`, `[kv_heads, ...]`) unless
    `batched` (default: where batch is not 1). Query head h reads key/value head `h / group` (`heads = group *
    kv_heads`, checked where both are ints). Sizes are ints or symbolic names; `head_dim` is 64 or 128; `scale`
    defaults to 1 / sqrt(head_dim). The schedule (`consumers`: 1 or 2 warpgroups of 64 queries; `block_k`: 64 or 128
    keys a tile; `stages`: 2 to 8 ring buffers) defaults to `default_schedule`'s."""
    name = "attention_cuda_sm90"
    check_sizes(name, {"batch": batch, "heads": heads, "kv_heads": kv_heads, "seq_q": seq_q, "seq_k": seq_k})
    require(head_dim in HEAD_DIMS, name, f"head_dim must be one of {HEAD_DIMS}, got {head_dim!r}")
    dt = template_dtype(name, dtype, DTYPES)
    mdt = None if mask_dtype is None else template_dtype(name, mask_dtype, MASK_DTYPES)
    require(isinstance(group, int) and group >= 1, name, f"group must be a positive int, got {group!r}")
    require(not (isinstance(heads, int) and isinstance(kv_heads, int)) or heads == group * kv_heads, name,
            f"heads ({heads}) must be group ({group}) times kv_heads ({kv_heads})")
    batched = batch != 1 if batched is None else batched
    require(batched or batch == 1, name, "an unbatched kernel has a batch of 1")
    schedule = default_schedule(head_dim, seq_k)
    consumers = schedule["consumers"] if consumers is None else consumers
    block_k = schedule["block_k"] if block_k is None else block_k
    require(consumers in (1, 2), name, "consumers must be 1 or 2")
    require(block_k in BLOCK_KS, name, f"block_k must be one of {BLOCK_KS}")
    block_q = ROWS * consumers
    scale = 1.0 / math.sqrt(head_dim) if scale is None else float(scale)
    scale_log2 = scale * LOG2E  # the softmax runs in powers of 2: exp(x) = exp2(x log2(e))
    threads = WARPGROUP * (1 + consumers)
    has_mask = mdt is not None
    s_regs = block_k // 2  # a thread's registers of a 64 x block_k S tile
    k_slices = block_k // WGMMA_K
    q_tile = swizzled_tile(dt, [ROWS, head_dim])  # a consumer's queries, their 64-column atoms side by side
    kv_tile = swizzled_tile(dt, [block_k, head_dim])  # a stage's keys or values
    kv_bytes = block_k * head_dim * dt.nbytes
    plan = SharedMemoryPlan()
    staging = AccumulatorStaging(plan, dt, head_dim, WARPGROUP_WARPS * consumers)  # O's way out
    q_tiles = plan.tiles(q_tile, consumers)
    # by default the schedule's stages where they fit, fewer where not (two of 128 keys at head dimension 128)
    fit = (MAX_SMEM_BYTES - plan.nbytes - BARRIER_BYTES) // (2 * kv_bytes + 4 * BARRIER_BYTES)  # and q's barrier
    stages = min(schedule["stages"], fit) if stages is None else stages
    require(2 <= stages <= 8, name, "stages must be 2 to 8")
    k_stages = plan.tiles(kv_tile, stages)
    v_stages = plan.tiles(kv_tile, stages)
    q_full = plan.barriers(1)
    k_ring = plan.ring(stages, releases=consumers)  # S(t) waits for K(t) only, P V(t) for V(t)
    v_ring = plan.ring(stages, releases=consumers)
    turns = plan.turns(consumers) if consumers > 1 else None  # ping-pong: the consumers issue their wgmma in turn
    require(plan.nbytes <= MAX_SMEM_BYTES, name, f"{plan.nbytes} bytes of shared memory (at most "
                                                 f"{MAX_SMEM_BYTES // 1024} KB)")
    vector = staging.vector_elements

    def edge_score(score: Any, r: int, key_limit: Any, diagonal: Any, masked: tuple[Any, ...]) -> Any:
        """The scaled score `score` of a thread's register `r` of S in an edge tile (IR, while the kernel is
        parsed): -inf where its key is past the keys' end (its column, less the thread's, reaches `key_limit`) or,
        causally, past its query (its column less its row, both less the thread's, exceed `diagonal`); plus the
        additive mask in powers of 2 where there is one (`masked`: the mask, the batch entry, the head, the thread's
        first query and key, the queries' count)."""
        column, row = wgmma_accumulator_col(0, r), wgmma_accumulator_row(0, r)  # the register's own share
        hidden = semantics.binary("<=", key_limit, column)
        if causal:
            hidden = semantics.binary("||", hidden, semantics.binary("<", diagonal, column - row))
        if has_mask:
            mask, b, h, i0, j0, seq_q = masked
            i, jk = semantics.binary("+", i0, row), semantics.binary("+", j0, column)
            term = semantics.cast(semantics.element(mask, (b, h, i, jk) if batched else (h, i, jk)), f32)
            score = E.IfThenElse(semantics.binary("<", i, seq_q),
                                 semantics.binary("+", score, semantics.binary("*", term, LOG2E)), score)
        return E.IfThenElse(hidden, E.Constant(-math.inf, f32), semantics.cast(score, f32))

    def product_with_values(tile: Any, acc_o: Any, pa: Any) -> S.Stmt:
        """O += P V of tile `tile` (IR, while the kernel is parsed): once its values are in, the fence, one
        m64nDk16 wgmma a 16 keys from P's A fragments in registers and V's stage read MN-major, then the commit."""
        values = v_stages.at(v_ring.stage(tile))
        issue = [wgmma_mma_async(E.Address(semantics.element(acc_o, (0,))), E.Address(semantics.element(pa, (kk, 0))),
                                 wgmma_descriptor(values, k=kk * WGMMA_K, transposed=True), dtype=dt, trans_b=True,
                                 n=head_dim) for kk in range(k_slices)]
        return S.seq([S.EvaluateStmt(e) for e in (v_ring.wait(tile), wgmma_fence(), *issue, wgmma_commit_group())])

    with script_module() as module:

        @script
        def attention(batch: i32, heads: i32, kv_heads: i32, seq_q: i32, seq_k: i32,
                      q: tile_tensor_map(q_tile, head_shape([batch, heads, seq_q, head_dim], batched)),
                      k: tile_tensor_map(kv_tile, head_shape([batch, kv_heads, seq_k, head_dim], batched)),
                      v: tile_tensor_map(kv_tile, head_shape([batch, kv_heads, seq_k, head_dim], batched)),
                      rest: meta.types(([] if not has_mask else [mdt[batch, heads, seq_q, seq_k]] if batched
                                        else [mdt[heads, seq_q, seq_k]])
                                       + ([dt[batch, heads, seq_q, head_dim]] if batched
                                          else [dt[heads, seq_q, head_dim]]))):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            attrs.cuda.grid_dim = (seq_q + block_q - 1) // block_q * batch * heads
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            attrs.cuda.min_blocks = 1
            attrs.fast_math = True  # exp2 one ex2.approx, max one FMNMX: -inf is the only non-finite score
            o = rest[len(rest) - 1]
            if threadIdx.x == 0:
                q_full.init(1)
                k_ring.init()
                v_ring.init()
                if consumers > 1:
                    turns.init()
                fence_mbarrier_init()
            syncthreads()
            tiles_q = (seq_q + block_q - 1) // block_q
            bh = blockIdx.x // tiles_q
            b = bh // heads
            h = bh % heads
            # causal blocks walk keys up to their diagonal: the longest walks go first, the short ones fill the tail
            q0 = (tiles_q - 1 - blockIdx.x % tiles_q if causal else blockIdx.x % tiles_q) * block_q
            kv_end = min(seq_k, q0 + block_q) if causal else seq_k
            tiles = (kv_end + block_k - 1) // block_k
            role = threadIdx.x // WARPGROUP  # 0: the producer; 1 to consumers: a consumer
            if role == 0:
                setmaxnreg_dec(PRODUCER_REGISTERS)
                if threadIdx.x == 0:
                    mbarrier_arrive_expect_tx(q_full.at(0), consumers * ROWS * head_dim * dt.nbytes)
                    for c in meta.range(consumers):
                        for dc in meta.range(head_dim // ROWS):
                            tma_load(q_tiles.address(c, 0, dc), q, box_at(b, h, q0 + c * ROWS, dc * ROWS, batched),
                                     q_full.at(0))
                    for it in range(tiles):
                        for ring, stages_of, source in meta.each([(k_ring, k_stages, k), (v_ring, v_stages, v)]):
                            ring.acquire(it)
                            ring.expect(it, kv_bytes)
                            for dc in meta.range(head_dim // ROWS):
                                tma_load(stages_of.address(ring.stage(it), 0, dc), source,
                                         box_at(b, h // group, it * block_k, dc * ROWS, batched),
                                         ring.full_barrier(it))
            else:
                setmaxnreg_inc(CONSUMER_REGISTERS[consumers])
                t = threadIdx.x % WARPGROUP
                warp = threadIdx.x // 32 - WARPGROUP_WARPS  # the warp's staging tile
                lane = threadIdx.x % 32
                rows = (role - 1) * ROWS  # this warpgroup's queries in the block
                acc_s = register_tensor(f32, [s_regs])  # S
                acc_o = register_tensor(f32, [head_dim // 2])  # O: the 64 x head_dim accumulator of one wgmma
                pa = register_tensor(dt, [k_slices, 8])  # P's A fragments, one a 16 keys, which P V reads
                p_next = register_tensor(dt, [k_slices, 8])  # the next tile's, made while that P V runs
                row_max = register_tensor(f32, [2])
                row_sum = register_tensor(f32, [2])
                correction = register_tensor(f32, [2])  # the factor O is rescaled by before the next P V
                for hh in meta.range(2):
                    row_max[hh] = -math.inf
                    row_sum[hh] = 0.0
                    correction[hh] = 1.0
                for r in meta.range(s_regs):
                    pa[r // 8, r % 8] = dt(0.0)
                for r in meta.range(head_dim // 2):
                    acc_o[r] = 0.0
                mbarrier_wait(q_full.at(0), 0)
                # step `it` issues S of tile `it`, then P V of tile `it - 1` (its P in registers), and computes the
                # softmax of tile `it` while that P V runs. Step 0 multiplies a P of zeros by tile 0's V: every step
                # then commits the same groups, so that the compiler sees S done after `wgmma_wait_group(1)`; the last
                # tile's P V follows the loop
                for it in range(tiles):
                    if consumers > 1:  # this consumer's turn on the tensor cores: the other's softmax runs meanwhile
                        turns.wait(it, role - 1)
                    k_ring.wait(it)
                    wgmma_fence()  # S was read into P by the last step
                    for kk in meta.range(head_dim // WGMMA_K):
                        wgmma_mma_async(acc_s, wgmma_descriptor(q_tiles.at(role - 1), k=kk * WGMMA_K),
                                        wgmma_descriptor(k_stages.at(k_ring.stage(it)), k=kk * WGMMA_K),
                                        dtype=dt, scale_d=0 if kk == 0 else 1)
                    wgmma_commit_group()
                    pv = max(it - 1, 0)  # the tile whose P V this step issues
                    product_with_values(pv, acc_o, pa)
                    if consumers > 1:
                        turns.pass_on(role - 1)
                    wgmma_wait_group(1, acc_s)  # S is done, P V may still run
                    k_ring.release(it, t)
                    k0 = it * block_k
                    # a tile past the keys' end, on the causal diagonal or under a mask rewrites its scores
                    edge = k0 + block_k > seq_k or has_mask or (causal and k0 + block_k - 1 > q0 + rows)
                    # the thread's bounds on its registers' columns, and where its mask elements lie (`edge_score`)
                    key_limit = seq_k - k0 - wgmma_accumulator_col(t, 0)
                    diagonal = q0 + rows + wgmma_accumulator_row(t, 0) - k0 - wgmma_accumulator_col(t, 0)
                    masked = (rest[0], b, h, q0 + rows + wgmma_accumulator_row(t, 0),
                              k0 + wgmma_accumulator_col(t, 0), seq_q)
                    for hh in meta.range(2):
                        tile_max: f32 = -math.inf
                        for n in meta.range(block_k // 8):
                            for e in meta.range(2):
                                r = 4 * n + 2 * hh + e
                                score = acc_s[r] * scale_log2  # S is only read: writing it while P V runs
                                if edge:  # would make the compiler serialize every wgmma
                                    score = edge_score(score, r, key_limit, diagonal, masked)
                                tile_max = max(tile_max, score)
                        tile_max = max(tile_max, shfl_xor_sync(FULL_MASK, tile_max, 1))
                        tile_max = max(tile_max, shfl_xor_sync(FULL_MASK, tile_max, 2))
                        new_max = max(row_max[hh], tile_max)
                        shift = 0.0 if new_max == -math.inf else new_max
                        correction[hh] = math.exp2(row_max[hh] - shift)
                        row_max[hh] = new_max
                        total: f32 = 0.0
                        for n in meta.range(block_k // 8):
                            for e in meta.range(2):
                                r = 4 * n + 2 * hh + e
                                score = acc_s[r] * scale_log2
                                if edge:
                                    score = edge_score(score, r, key_limit, diagonal, masked)
                                p = math.exp2(score - shift)  # one FFMA and the exponential where not edge
                                p_next[r // 8, r % 8] = dt(p)
                                total += p
                        row_sum[hh] = row_sum[hh] * correction[hh] + total
                    wgmma_wait_group(0, acc_o)  # P V is done: its values are free, its P registers too
                    if it > 0:
                        v_ring.release(pv, t)
                    for r in meta.range(head_dim // 2):
                        acc_o[r] = acc_o[r] * correction[r // 2 % 2]
                    for r in meta.range(s_regs):
                        pa[r // 8, r % 8] = p_next[r // 8, r % 8]
                product_with_values(tiles - 1, acc_o, pa)  # the last tile's P V
                wgmma_wait_group(0, acc_o)
                v_ring.release(tiles - 1, t)
                for hh in meta.range(2):  # the row's sum over its four threads, then its reciprocal (0 for 0)
                    row_sum[hh] += shfl_xor_sync(FULL_MASK, row_sum[hh], 1)
                    row_sum[hh] += shfl_xor_sync(FULL_MASK, row_sum[hh], 2)
                    row_sum[hh] = 1.0 / row_sum[hh] if row_sum[hh] > 0.0 else 0.0
                for r in meta.range(head_dim // 2):
                    acc_o[r] = acc_o[r] * row_sum[r // 2 % 2]
                for part in meta.range(head_dim // ROWS):  # O through shared memory, 64 columns a pass
                    staging.stage(acc_o, warp, lane, part)
                    for row, vec in staging.lanes.on(lane):
                        oi = q0 + rows + 16 * (warp % WARPGROUP_WARPS) + row
                        oc = part * ROWS + vec * vector
                        if oi < seq_q:  # rows of head_dim 16-bit elements: whole 16-byte vectors
                            if batched:
                                copy_vector(~o[b, h, oi, oc], staging.vector(warp, row, vec), 16)
                            else:
                                copy_vector(~o[h, oi, oc], staging.vector(warp, row, vec), 16)
                    syncwarp()  # the warp's reads of its tile are done before the next pass writes it

    return bind_sizes(module, "attention", {"batch": batch, "heads": heads, "kv_heads": kv_heads, "seq_q": seq_q,
                                            "seq_k": seq_k})


def head_shape(shape: list, batched: bool) -> list:
    """The shape `[batch, heads, seq, head_dim]` of q, k or v as its tensor map reads it: `[heads, seq, head_dim]`
    where the kernel is not batched."""
    return shape if batched else shape[1:]


def box_at(batch_index: object, head: object, row: object, col: object, batched: bool) -> list:
    """The coordinates of the box at (`batch_index`, `head`, `row`, `col`) in a map of `head_shape`."""
    return [batch_index, head, row, col] if batched else [head, row, col]


def hopper_attention_binding(task: Task, signature: KernelSignature, fallback: TemplateBinding) -> TemplateBinding:
    """The binding of the attention task `task` to this template, taken on sm_90a targets and falling back to
    `fallback` (the tensor-core template's binding) elsewhere. `fallback` itself where TMA cannot read q, k and v as
    they are (ranks other than 3 or 4, batch dimensions that broadcast: k and v not of q's batch, o not of q's
    shape), where the template does not apply (a head dimension other than 64 or 128, dtypes other than one f16 or
    bf16, a mask of another dtype), or where the tensor-core template's decoding schedule suits the queries better
    (at most `DECODING_QUERIES` of them known at build time)."""
    q, k, v, *mask = task.inputs
    out = signature.outputs[0]
    qs, ks, vs, os = (shape_of(t) for t in (q, k, v, out))
    rank = len(qs)
    dtypes = {t.type.dtype.name for t in (q, k, v, out)}
    if (rank not in (3, 4) or any(len(s) != rank for s in (ks, vs, os)) or qs[-1] not in HEAD_DIMS
            or (isinstance(qs[-2], int) and qs[-2] <= DECODING_QUERIES)
            or len(dtypes) != 1 or not dtypes <= set(DTYPES)
            or not all(same_dim(a, b) for a, b in [*zip(qs, os), *zip(ks, vs), *zip(qs[:-3], ks[:-3])])
            or (mask and mask[0].type.dtype.name not in MASK_DTYPES)):
        return fallback
    group = 1
    if task.attrs.get("enable_gqa", False):
        group = qs[-3] // ks[-3]  # the operator checked that both are ints, one a multiple of the other
    elif not same_dim(qs[-3], ks[-3]):
        return fallback
    batched = rank == 4
    sizes = {"batch": qs[0] if batched else 1, "heads": qs[-3], "kv_heads": ks[-3], "seq_q": qs[-2],
             "seq_k": ks[-2]}
    views = [View(t, _same_indices, whole=True) for t in (q, k, v)]
    views += [View(m, _broadcast_to(shape_of(m))) for m in mask]
    views.append(View(out, _same_indices))
    options = {"head_dim": qs[-1], "causal": bool(task.attrs.get("causal", False)), "dtype": dtypes.pop(),
               "group": group, "batched": batched, "scale": task.attrs.get("scale"),
               "mask_dtype": mask[0].type.dtype.name if mask else None}
    return TemplateBinding("attention_cuda_sm90", attention_cuda_sm90, signature, sizes, views, options,
                           needs_arch="sm_90a", fallback=fallback)


def _same_indices(indices: tuple[E.Expr, ...]) -> tuple[E.Expr, ...]:
    """The template's indices are the task tensor's (a tensor of the template's shape)."""
    return indices


def _broadcast_to(shape: tuple[Dim, ...]) -> Callable[[tuple[E.Expr, ...]], tuple[E.Expr, ...]]:
    """The index into a tensor of `shape` (a mask broadcast to the scores' shape) of the scores' indices."""
    return lambda indices: tuple(broadcast_batch(list(indices), shape))
