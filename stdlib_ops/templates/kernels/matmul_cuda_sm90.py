"""The batched half-precision matmul template for Hopper (sm_90a): TMA copies into 128-byte-swizzled shared memory,
a ring of full and empty mbarriers, and warpgroup MMA (wgmma) issued by warp-specialized consumer warpgroups.

`c[b, i, j] = sum_k a[b, i, k] * b[b, k, j]` with f16 or bf16 inputs, f32 accumulation and an f16, bf16 or f32
output; `a` is row-major `[batch, m, k]` and `b` row-major `[batch, k, n]`, read through tensor maps (`TensorMap`
parameters: the caller passes the tensors themselves).

- **Warp specialization.** A block has `1 + consumers` warpgroups (128 threads each). Warpgroup 0 is the producer:
  it lowers its register budget (`setmaxnreg_dec`) and one of its threads issues every TMA copy. Each consumer
  warpgroup raises its budget (`setmaxnreg_inc`) and owns 64 rows of the `block_m = 64 * consumers` rows of the
  block's tile, all `block_n` columns of it.
- **The ring** (`hidet_lang.cuda.tiles`: the kernel's `SharedMemoryPlan`, its `StageRing`). `stages` buffers (by
  default as many as shared memory holds beside the epilogue's tiles, at most 8), each an `a` tile (`block_m x
  64`) and a `b` tile (`64 x block_n`: 64-column atoms side by side), swizzled by 128 bytes as TMA writes them (the
  tensor maps' boxes derive from the tiles' types). Stage s has a full barrier (one arrival, the producer's, plus
  the copies' bytes) and an empty barrier (one arrival a consumer warpgroup, by one elected thread, once the
  warpgroup's wgmma reads of the stage are done). The producer waits for "empty", announces the bytes and issues
  the copies; the consumers wait for "full", multiply, and release the stage.
- **wgmma.** Per 64-deep k step, for each 16-deep slice, a consumer issues one m64nNk16 `wgmma_mma_async` with N =
  `block_n` (up to 256: the whole width of its tile, so `a`'s slice is read from shared memory once a slice, not
  once every 64 columns): `a`'s tile is K-major, `b`'s MN-major (`b` is row-major `[k, n]`: a `transposed`
  descriptor), its 64-column atoms side by side (the descriptor's leading byte offset steps from one to the next).
  A step's group stays in flight while the next is issued (`wgmma_wait_group(1)`); a stage is released once its
  group is done.
- **Schedules.** Cooperative (the default): both consumers on one tile, 64 rows each. Ping-pong (a tuning point):
  each consumer its own tiles of 128 rows (two m64nNk16 wgmma a slice, N at most 128), taking the block's tiles in
  turn, their main loops one after the other (`WarpgroupTurns`), so that one's epilogue runs under the other's main
  loop and the tensor cores do not wait for stores; a stage is then released by the one consumer that read it.
- **Persistent grid.** At most `blocks` blocks (`NUM_SMS` by default); each cluster of `cluster` blocks walks the
  units of `cluster` vertically neighbouring tiles `c, c + clusters, ...` (c: the cluster's index), the block of
  rank r taking the unit's r-th tile row, in groups of `GROUP_M` unit rows (`tile_order`: a group's blocks share
  rows of `a` and columns of `b` in L2), batch entries outermost. The ring's stage and phase run on across tiles, so
  the producer loads the next tile's first stages while the consumers store the last one.
- **Clusters.** With `cluster = 2` the two blocks of a cluster (sm_90's thread block clusters) compute tiles of
  the same columns, so they need the same `b` tile each step: each producer loads half of its 64 k rows
  (`tma_load_multicast`) into both blocks' shared memory, completing the bytes on both blocks' full barriers, which
  halves the `b` traffic from L2. A stage of a block is then written by both producers, so its empty barrier
  gathers the consumers of both blocks (thread r of each consumer warpgroup arrives on block r's,
  `mbarrier_arrive_cluster`) before either producer refills it. The blocks start after both have initialized their
  barriers and leave together (`cluster_sync`), since each arrives on and copies into the other's shared memory.
  Both blocks walk the same units and steps (the second block of a unit past the last tile row computes zeros and
  stores nothing), so their rings stay in step. The default is 1: clusters of 2 pay off where L2 bandwidth limits the
  kernel (large n and k), which only a measurement on the GPU can tell; `ops.tune` searches both.
- **Epilogue.** The accumulators leave through shared memory (`AccumulatorStaging`): each consumer warp writes its
  16 rows, 64 columns a pass, into a padded tile no two lanes of a store share a bank of, and stores them back as
  16-byte vectors along the rows of `c` (`STG.E.128`, no element stores: n is a multiple of 8, and the launch
  refuses a `c` that is not 16-byte aligned, as every allocation is).
- **Every size.** TMA fills the parts of a box outside the tensor with zeros (ragged m, n and k tiles add nothing);
  rows past `m` are stored nowhere (n is a multiple of 8, so a vector lies inside `c` or past it whole). TMA needs
  rows that span multiples of 16 bytes: k and n must be multiples of 8.

The kernel reads `a` and `b` only through TMA, so no prologue can be fused into it; `c` is only stored by vector
stores: an epilogue fuses there (the rewrite makes a vector store element stores through the epilogue). The CUDA
matmul adapter takes this template on sm_90a targets where TMA can read the task's tensors themselves
(`hopper_binding`), and the tensor-core template otherwise, or where a graph fuses a prologue into the matmul
(`choose_schedule(..., prologue=True)` names that kernel). Shared memory is all dynamic (no static shared memory),
so that the tiles start at the 1024-byte boundary the swizzle needs.
`MATMUL_CUDA_SM90_SPACE` is what `ops.tune` searches.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from hidet_lang import attrs, f32, i32, meta, register_tensor, script, script_module
from hidet_lang.cuda import (
    blockIdx,
    cluster_sync,
    copy_vector,
    fence_mbarrier_init,
    gridDim,
    setmaxnreg_dec,
    setmaxnreg_inc,
    syncthreads,
    syncwarp,
    threadIdx,
    tma_load,
    tma_load_multicast,
    wgmma_commit_group,
    wgmma_descriptor,
    wgmma_fence,
    wgmma_mma_async,
    wgmma_wait_group,
)
from hidet_lang.cuda.tiles import WARPGROUP_WARPS, AccumulatorStaging, SharedMemoryPlan, swizzled_tile, tile_tensor_map
from hidet_lang.cuda_limits import shared_memory_per_block
from hidet_lang.frontend.script import ScriptModule
from stdlib_ops.schedule.signature import KernelSignature
from stdlib_ops.task import Task
from stdlib_ops.templates.binding import TemplateBinding, shape_of
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import mma_dtypes
from stdlib_ops.templates.kernels.tile_order import grouped_tile
from stdlib_ops.templates.params import Size, check_sizes, require
from stdlib_ops.templates.sizes import bind_sizes
from stdlib_ops.templates.space import TuningSpace, declare_space
from stdlib_ops.templates.views import Dim, View, same_dim

WARPGROUP = 128  # threads of a warpgroup
BLOCK_K = 64  # k a step: 128 bytes of f16 or bf16, one row of the 128-byte swizzle
ATOM = 64  # rows of a consumer's share of the tile (wgmma's M) and columns of a b tile (one MN-major atom row)
WGMMA_K = 16
NUM_SMS = 132  # an H100 SXM's and an H200's SMs: the persistent grid's most blocks
MAX_SMEM_BYTES = shared_memory_per_block("sm_90")  # the most shared memory a block of an sm_90 GPU may have
PRODUCER_REGISTERS = 40  # the producer's register budget a thread (it only issues copies)
CONSUMER_REGISTERS = 232  # a consumer's: up to 128 accumulators a thread and the addressing around them
TMA_ELEMENT_MULTIPLE = 8  # a TMA tensor's rows span multiples of 16 bytes: 8 elements of 16 bits

SCHEDULES = ("cooperative", "pingpong")
PINGPONG_BLOCK_N = 128  # a ping-pong consumer's tile is 128 x block_n: 2 x block_n / 2 accumulators a thread

MATMUL_CUDA_SM90_SPACE = TuningSpace(
    {"block_n": (None, 256, 128, 64), "stages": (None, 4, 3), "consumers": (2, 1), "cluster": (1, 2),
     "schedule": SCHEDULES},
    default={"block_n": None, "stages": None, "consumers": 2, "cluster": 1, "schedule": "cooperative"},
    constraint=lambda p: p["schedule"] == "cooperative" or (
        p["consumers"] == 2 and p["cluster"] == 1 and p["block_n"] in (None, 128, 64)),
)
"""The tuning space (`ops.tune`): the tile's columns (None: `default_block_n`), the ring's stages (None: as many as
shared memory holds), the consumer warpgroups (64 rows of the tile each), the blocks of a cluster that share `b`'s
tiles through multicast, and the consumers' schedule: cooperative (both on one tile) or ping-pong (each on its own
128-row tile, their main loops in turn, one's epilogue under the other's main loop)."""
MAX_STAGES = 8


def default_block_n(n: Size) -> int:
    """The tile's columns for products of `n` columns: 256 (one m64n256 wgmma a slice, CUTLASS's design point) where
    `n` is symbolic or at least 256, else the fewest 64-column atoms that cover `n`."""
    return 256 if not isinstance(n, int) else min(256, ATOM * -(-n // ATOM))
CLUSTERS = (1, 2)  # the cluster sizes the template takes


def _registers_fit(consumers: int) -> bool:
    """Whether the warpgroups' register budgets fit an SM's 65536 registers."""
    return WARPGROUP * (PRODUCER_REGISTERS + consumers * CONSUMER_REGISTERS) <= 65536


@declare_space(MATMUL_CUDA_SM90_SPACE)
def matmul_cuda_sm90(batch: Size, m: Size, n: Size, k: Size, out_dtype: str = "float16", *,
                     dtype: str | None = None, block_n: int | None = None, stages: int | None = None,
                     consumers: int = 2, cluster: int = 1, schedule: str = "cooperative",
                     blocks: int = NUM_SMS) -> ScriptModule:
    """A module with one kernel `matmul(<symbolic sizes>, a, b, c)` computing `c = a @ b` on Hopper's tensor cores
    (built for 'cuda:sm_90a').

    `a: TensorMap(dtype, [batch, m, k])`, `b: TensorMap(dtype, [batch, k, n])` (the caller passes the tensors; `[m,
    k]` and `[k, n]` when batch is 1), `c: out_dtype[batch, m, n]`; each size is an int or a symbolic name; k and n
    are multiples of 8 (checked here when known, at the launch otherwise). `dtype` is float16 or bfloat16 (None:
    `out_dtype` where it is one of them, else float16). The block tile is `64 * consumers` x `block_n` (a multiple
    of 64, at most 256; None: `default_block_n`), computed by `consumers` (1 or 2) consumer warpgroups from a ring
    of `stages` (2 to 8; None: as many as the shared memory of an sm_90 block holds) shared buffers. `cluster` (1
    or 2) blocks of a cluster share `b`'s tiles (a multicast of half of each from either block). `schedule` is
    'cooperative' or 'pingpong' (two consumers, cluster 1, block_n at most 128: each consumer its own 128-row
    tiles, in turn). The persistent grid has at most `blocks` blocks (one an SM of the GPU: `NUM_SMS`), a multiple
    of `cluster`."""
    name = "matmul_cuda_sm90"
    check_sizes(name, {"batch": batch, "m": m, "n": n, "k": k})
    dt, out = mma_dtypes(name, out_dtype, dtype)
    for size_name, size in (("k", k), ("n", n)):
        require(not isinstance(size, int) or size % TMA_ELEMENT_MULTIPLE == 0, name,
                f"{size_name}={size}: TMA needs rows of a multiple of 16 bytes ({TMA_ELEMENT_MULTIPLE} elements)")
    require(schedule in SCHEDULES, name, f"schedule must be one of {SCHEDULES}")
    pingpong = schedule == "pingpong"
    require(not pingpong or (consumers == 2 and cluster == 1), name,
            "the ping-pong schedule takes two consumers and blocks of their own (cluster 1)")
    if block_n is None:
        block_n = min(PINGPONG_BLOCK_N, default_block_n(n)) if pingpong else default_block_n(n)
    require(block_n % ATOM == 0 and ATOM <= block_n <= 256, name, "block_n must be 64, 128, 192 or 256")
    require(not pingpong or block_n <= PINGPONG_BLOCK_N, name,
            f"a ping-pong consumer's 128 x block_n accumulators fit its registers up to block_n={PINGPONG_BLOCK_N}")
    require(consumers in (1, 2) and _registers_fit(consumers), name, "consumers must be 1 or 2")
    m_atoms = 2 if pingpong else 1  # the 64-row wgmma a consumer issues a slice: its rows of a tile, 64 at a time
    block_m = 2 * ATOM if pingpong else ATOM * consumers  # a tile's rows: one consumer's, or every consumer's
    b_rows = BLOCK_K // cluster  # the k rows of a b tile that each block of a cluster loads for both
    everyone = (1 << cluster) - 1  # the multicast mask: every block of the cluster
    a_tile = swizzled_tile(dt, [block_m, BLOCK_K])
    b_tile = swizzled_tile(dt, [BLOCK_K, block_n])  # its 64-column atoms side by side, as one wgmma reads them
    stage_bytes = (block_m + block_n) * BLOCK_K * dt.nbytes  # what the copies of a stage land on its full barrier
    plan = SharedMemoryPlan()
    staging = AccumulatorStaging(plan, out, block_n, WARPGROUP_WARPS * consumers)
    if stages is None:  # as many as fit beside the epilogue's tiles, with two barriers each
        stages = min(MAX_STAGES, (MAX_SMEM_BYTES - plan.nbytes) // (stage_bytes + 16))
    require(2 <= stages <= MAX_STAGES, name, f"stages must be 2 to {MAX_STAGES}")
    require(cluster in CLUSTERS, name, "cluster must be 1 or 2")
    require(blocks >= cluster, name, f"blocks must be at least the cluster's {cluster}")
    a_stages = plan.tiles(a_tile, stages)
    b_stages = plan.tiles(b_tile, stages)
    # a stage is released by the consumers that read it: every one of every block, or the one whose tile it holds
    ring = plan.ring(stages, releases=cluster * (1 if pingpong else consumers), cluster=cluster)
    turns = plan.turns(consumers) if pingpong else None
    require(plan.nbytes <= MAX_SMEM_BYTES, name, f"{plan.nbytes} bytes of shared memory (at most "
                                                 f"{MAX_SMEM_BYTES // 1024} KB)")
    threads = WARPGROUP * (1 + consumers)
    batched = batch != 1  # one batch entry: two-dimensional tensor maps
    vector = staging.vector_elements

    with script_module() as module:

        @script
        def matmul(batch: i32, m: i32, n: i32, k: i32,
                   a: tile_tensor_map(a_tile, operand_shape([batch, m, k], batched)),
                   b: tile_tensor_map(b_tile, operand_shape([batch, k, n], batched), rows=b_rows),
                   c: out[batch, m, n]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = threads
            # a cluster a unit of `cluster` tile rows, at most `blocks` blocks (a conditional expression: arithmetic
            # any launcher evaluates)
            attrs.cuda.grid_dim = cluster * (
                batch * ((m + cluster * block_m - 1) // (cluster * block_m)) * ((n + block_n - 1) // block_n)
                if batch * ((m + cluster * block_m - 1) // (cluster * block_m)) * ((n + block_n - 1) // block_n)
                < blocks // cluster else blocks // cluster)
            if cluster > 1:
                attrs.cuda.cluster_dim = cluster
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            attrs.cuda.min_blocks = 1
            if threadIdx.x == 0:
                ring.init()
                if pingpong:
                    turns.init()
                fence_mbarrier_init()
            if cluster > 1:
                cluster_sync()  # the other block's barriers are ready before its copies and arrivals reach them
            else:
                syncthreads()
            units_m = (m + cluster * block_m - 1) // (cluster * block_m)  # units of `cluster` tile rows
            tiles_n = (n + block_n - 1) // block_n
            per_batch = units_m * tiles_n
            rank = blockIdx.x % cluster  # the block's rank in its cluster: its tile row of a unit
            unit_row: i32 = 0  # the row and the column of the unit at hand (`tile_order`)
            tile_col: i32 = 0
            steps = (k + BLOCK_K - 1) // BLOCK_K
            role = threadIdx.x // WARPGROUP  # 0: the producer; 1 to consumers: a consumer
            if role == 0:
                setmaxnreg_dec(PRODUCER_REGISTERS)
                if threadIdx.x == 0:
                    it = 0  # the ring's step, counted across tiles
                    for unit in range(blockIdx.x // cluster, batch * per_batch, gridDim.x // cluster):
                        bi = unit // per_batch
                        grouped_tile(unit % per_batch, units_m, tiles_n, ~unit_row, ~tile_col)
                        m0 = (unit_row * cluster + rank) * block_m
                        n0 = tile_col * block_n
                        for step in range(steps):
                            s = ring.stage(it)
                            ring.acquire(it)
                            ring.expect(it, stage_bytes)
                            tma_load(a_stages.address(s), a, box_at(bi, m0, step * BLOCK_K, batched),
                                     ring.full_barrier(it))
                            for j in meta.range(block_n // ATOM):  # this block's rows of each atom, to every block
                                rows = box_at(bi, step * BLOCK_K + rank * b_rows, n0 + j * ATOM, batched)
                                if cluster > 1:
                                    tma_load_multicast(b_stages.address(s, rank * b_rows, j), b, rows,
                                                       ring.full_barrier(it), everyone)
                                else:
                                    tma_load(b_stages.address(s, 0, j), b, rows, ring.full_barrier(it))
                            it += 1
            else:
                setmaxnreg_inc(CONSUMER_REGISTERS)
                t = threadIdx.x % WARPGROUP
                warp = threadIdx.x // 32 - WARPGROUP_WARPS  # the warp's epilogue tile
                lane = threadIdx.x % 32
                rows = 0 if pingpong else (role - 1) * ATOM  # this warpgroup's first row of the tile
                acc = register_tensor(f32, [m_atoms, block_n // 2])  # 64 x block_n accumulators of one wgmma each
                walkers = gridDim.x // cluster  # the block's units: every `walkers`-th from its own
                units = (batch * per_batch - 1 - blockIdx.x // cluster + walkers) // walkers
                # cooperative: every consumer takes every unit; ping-pong: the consumers take them in turn
                for j in range(role - 1 if pingpong else 0, units, consumers if pingpong else 1):
                    unit = blockIdx.x // cluster + j * walkers
                    bi = unit // per_batch
                    grouped_tile(unit % per_batch, units_m, tiles_n, ~unit_row, ~tile_col)
                    m0 = (unit_row * cluster + rank) * block_m
                    n0 = tile_col * block_n
                    for mi in meta.range(m_atoms):
                        for r in meta.range(block_n // 2):
                            acc[mi, r] = 0.0
                    if pingpong:  # this consumer's turn on the tensor cores: the other's epilogue runs meanwhile
                        turns.wait(j // consumers, role - 1)
                    for step in range(steps):
                        it = j * steps + step  # the ring's step, as the producer counts them
                        s = ring.stage(it)
                        ring.wait(it)
                        wgmma_fence()  # the accumulators were written (zeroed) or read (stored) before
                        for kk in meta.range(BLOCK_K // WGMMA_K):
                            for mi in meta.range(m_atoms):
                                wgmma_mma_async(~acc[mi, 0],
                                                wgmma_descriptor(a_stages.rows(s, rows + mi * ATOM, ATOM),
                                                                 k=kk * WGMMA_K),
                                                wgmma_descriptor(b_stages.at(s), k=kk * WGMMA_K, transposed=True),
                                                dtype=dt, trans_b=True, n=block_n)
                        wgmma_commit_group()
                        if step > 0:  # one group in flight: the previous step's is done, release its stage
                            wgmma_wait_group(1, acc)
                            ring.release(it - 1, t)
                    if pingpong:
                        turns.pass_on(role - 1)
                    wgmma_wait_group(0, acc)  # the tile's last step is done: release its stage
                    ring.release(j * steps + steps - 1, t)
                    for mi in meta.range(m_atoms):
                        for part in meta.range(block_n // ATOM):  # through shared memory, 64 columns a pass
                            staging.stage(acc, warp, lane, part, (mi,))
                            for row, vec in staging.lanes.on(lane):
                                i = m0 + rows + mi * ATOM + 16 * (warp % WARPGROUP_WARPS) + row
                                jj = n0 + part * ATOM + vec * vector
                                if i < m and jj < n:  # n is a multiple of 8: the vector lies inside c whole
                                    copy_vector(~c[bi, i, jj], staging.vector(warp, row, vec), 16)
                            syncwarp()  # the warp's reads of its tile are done before the next pass writes it
            if cluster > 1:
                cluster_sync()  # neither block leaves while the other may still copy into it or arrive on it

    return bind_sizes(module, "matmul", {"batch": batch, "m": m, "n": n, "k": k})


def operand_shape(shape: list[Any], batched: bool) -> list[Any]:
    """The shape of an operand `[batch, rows, cols]` as its tensor map reads it: without the batch dimension where
    there is one batch entry."""
    return shape if batched else shape[1:]


def box_at(batch_index: Any, row: Any, col: Any, batched: bool) -> list[Any]:
    """The coordinates of the box at (`batch_index`, `row`, `col`) in a map of an operand of `operand_shape`."""
    return [batch_index, row, col] if batched else [row, col]


def hopper_binding(task: Task, signature: KernelSignature, sizes: Mapping[str, Dim], views: Sequence[View],
                   dtype: str, fallback: TemplateBinding) -> TemplateBinding:
    """The binding of the f16 or bf16 matmul task `task` (its batched-matmul `sizes` and `views`) to this template,
    taken on sm_90a targets and falling back to `fallback` elsewhere; `fallback` itself where TMA cannot read the
    operands: a vector operand, operands of different ranks or above 3 (a folded or broadcast batch), one batch
    entry of a 3-D product, or k or n not a multiple of 8 known at build time."""
    x, y = signature.inputs
    xs, ys = shape_of(x), shape_of(y)
    k, n = sizes["k"], sizes["n"]
    plain = len(xs) == len(ys) == 2 or (len(xs) == len(ys) == 3 and same_dim(xs[0], ys[0])
                                         and same_dim(xs[0], sizes["batch"]) and not same_dim(xs[0], 1))
    aligned = all(isinstance(d, int) and d % TMA_ELEMENT_MULTIPLE == 0 for d in (k, n))
    if any(task.attrs.get("vector_operands", (False, False))) or not plain or not aligned:
        return fallback
    whole = [dataclasses.replace(view, whole=True) for view in views[:2]]
    return TemplateBinding("matmul_cuda_sm90", matmul_cuda_sm90, signature, sizes, [*whole, views[2]],
                           {"out_dtype": dtype, "dtype": dtype}, needs_arch="sm_90a", fallback=fallback,
                           flops=matmul_flops)


def matmul_flops(sizes: Mapping[str, int]) -> float:
    """The arithmetic of a batched matmul of `sizes` (batch, m, n, k): a multiply and an add a term."""
    return 2.0 * sizes["batch"] * sizes["m"] * sizes["n"] * sizes["k"]
