"""Thread block clusters (sm_90): groups of blocks that run at the same time on neighbouring SMs, wait for each
other and reach each other's shared memory.

A kernel asks for clusters with `attrs.cuda.cluster_dim = 2` (or a tuple of up to three Python ints, at most 8
blocks in all); its grid must be a whole number of clusters in each dimension (checked at build time for a constant
grid, at the launch otherwise), and it needs `cuda:sm_90` or later. A block's rank in its cluster,
`cluster_rank()`, numbers its position in the cluster x fastest::

    @hidet.script
    def kernel(out: i32[8]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = 4
        attrs.cuda.block_dim = 32
        attrs.cuda.cluster_dim = 2
        slot = dynamic_shared_memory(0, i32)
        if threadIdx.x == 0:
            slot[0] = blockIdx.x
        cluster_sync()                                    # every block has written its slot
        other = cluster_map_shared(slot, 1 - cluster_rank())
        if threadIdx.x == 0:
            out[blockIdx.x] = other[0]                    # the neighbour's block index
        cluster_sync()                                    # no block leaves while the other reads its memory

- `cluster_arrive()` / `cluster_wait()` (or both: `cluster_sync()`) are a barrier of all the cluster's threads,
  split so that work may go between them: writes before the arrival are visible to every thread of the cluster
  after its wait. A block must not exit while another still reads its shared memory or arrives on its barriers:
  end such a kernel with a `cluster_sync()`.
- `cluster_map_shared(p, rank)`: the address `p` of this block's shared memory at the same offset in the block of
  rank `rank`, readable and writable (distributed shared memory).
- `mbarrier_arrive_cluster(bar, rank)`: an arrival on the mbarrier at `bar`'s offset in the block of rank `rank`
  (a consumer releasing a stage that another block's producer refills).
- `tma_load_multicast(dst, tensor_map, coords, bar, cta_mask)`: one TMA load delivered to `dst`'s offset in every
  block whose rank bit `cta_mask` sets, completing the box's bytes on each one's mbarrier at `bar`'s offset (each
  of those barriers must expect them).

On the emulator the blocks of a cluster run together (their threads are fibers of one OS thread), with the GPU's
semantics; a cluster kernel's shared memory must be dynamic there (`dynamic_shared_memory`: static shared memory
would be the OS thread's, shared by the blocks; the build says so). Its checking mode names the DSL line of a rank
outside the cluster, a multicast mask naming a block outside it, or an address outside the dynamic shared
memory; a cluster barrier that some block never reaches fails the launch with a deadlock report of every block
instead of hanging.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hidet_lang.cuda.mbarrier import _barrier
from hidet_lang.cuda.tma import _coordinates, _shared_tile, _tensor_map
from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import _pointer_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.intrinsics import TMA_RANKS, intrinsic
from hidet_lang.ir.types import PointerType, int32

MAX_MULTICAST_MASK = 0xFFFF
"""A multicast mask has one bit a rank of the cluster (16 bits in PTX)."""


def cluster_rank() -> E.Intrinsic:
    """The block's rank in its cluster (i32, 0 to `cluster_size() - 1`, x fastest; 0 without a cluster)."""
    return intrinsic("cluster_rank")


def cluster_size() -> E.Intrinsic:
    """The blocks of the block's cluster (i32; 1 without a cluster)."""
    return intrinsic("cluster_size")


def cluster_arrive() -> E.Intrinsic:
    """Arrive at the cluster barrier (release: this thread's writes before it are visible to the cluster's threads
    after their `cluster_wait`). Every thread of the cluster arrives once before it waits."""
    return intrinsic("cluster_arrive")


def cluster_wait() -> E.Intrinsic:
    """Wait until every thread of the cluster that has not exited has arrived at the cluster barrier (acquire)."""
    return intrinsic("cluster_wait")


def cluster_sync() -> E.Intrinsic:
    """`cluster_arrive()` then `cluster_wait()`: a barrier of every thread of the cluster."""
    return intrinsic("cluster_sync")


def cluster_map_shared(ptr: Any, rank: Any) -> E.Intrinsic:
    """The shared-memory address `ptr` (a pointer or a shared tensor, for its first element) of this block at the
    same offset in the block of rank `rank` of the cluster: a pointer of the same type, to read and write there."""
    e = _pointer_to(ptr, "cluster_map_shared")
    t = e.type
    assert isinstance(t, PointerType)
    if t.is_void:
        raise TypeError("cluster_map_shared needs a typed pointer (e.g. ~tile[0] or dynamic_shared_memory(0, f32)), "
                        "got a void pointer")
    return intrinsic("cluster_map_shared", e, semantics.cast(rank, int32))


def mbarrier_arrive_cluster(bar: Any, rank: Any) -> E.Intrinsic:
    """Arrive once on the mbarrier at `bar`'s offset in the block of rank `rank` of the cluster (release at cluster
    scope: this thread's reads and writes before it are ordered before that barrier's phase completes)."""
    return intrinsic("mbarrier_arrive_cluster", _barrier(bar, "mbarrier_arrive_cluster"), semantics.cast(rank, int32))


def tma_load_multicast(dst: Any, tensor_map: Any, coords: Sequence[Any], bar: Any, cta_mask: Any) -> E.Intrinsic:
    """`tma_load` delivered to every block of the cluster whose rank bit `cta_mask` sets (bit r: rank r): the box of
    `tensor_map` at `coords` lands at `dst`'s offset in each of them and completes its bytes (`tma_box_bytes`) on
    each one's mbarrier at `bar`'s offset. A Python-int mask is checked here (16 bits); the emulator checks that
    it names blocks of the cluster."""
    if isinstance(cta_mask, int) and not isinstance(cta_mask, bool) and not 0 < cta_mask <= MAX_MULTICAST_MASK:
        raise ValueError(f"tma_load_multicast's cta_mask has one bit a block rank (1 to 0x{MAX_MULTICAST_MASK:x}), "
                         f"got {cta_mask!r}")
    address, t = _tensor_map(tensor_map, "tma_load_multicast")
    rank = len(t.shape)
    assert rank in TMA_RANKS
    return intrinsic(f"tma_load_multicast_{rank}d", _shared_tile(dst, t, "tma_load_multicast"), address,
                     _barrier(bar, "tma_load_multicast"), semantics.cast(cta_mask, int32),
                     *_coordinates(coords, t, "tma_load_multicast"))


__all__ = ["cluster_arrive", "cluster_map_shared", "cluster_rank", "cluster_size", "cluster_sync", "cluster_wait",
           "mbarrier_arrive_cluster", "tma_load_multicast"]
