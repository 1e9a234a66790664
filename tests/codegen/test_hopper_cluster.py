"""Thread block clusters on the emulator against numpy: ranks and distributed shared memory over cluster shapes of
1, 2 and 4 blocks, remote mbarrier arrivals, TMA multicast over random masks and boxes (past the tensor's edges
too); the misuse the checking mode reports at the DSL line (a rank outside the cluster, a multicast mask naming a
block outside it, a cluster barrier some block never reaches: a deadlock report, not a hang); the build's and the
launch's refusals (an architecture below sm_90, a grid that is not a whole number of clusters, static shared memory
on the emulator, a shape of too many blocks); and the CUDA C NVRTC makes of it (`__cluster_dims__`, the cluster
barrier, a multicast UTMALDG)."""

from __future__ import annotations

import importlib.util
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.runtime.cuda_backend import backend
from codegen.toolchain import nvrtc
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.sass import find_tool
from hidet_lang import attrs, f32, i32, u64
from hidet_lang.cuda import (
    TensorMap,
    blockIdx,
    cluster_arrive,
    cluster_map_shared,
    cluster_rank,
    cluster_size,
    cluster_sync,
    cluster_wait,
    dynamic_shared_memory,
    fence_mbarrier_init,
    gridDim,
    mbarrier_arrive_cluster,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    shared_tensor,
    threadIdx,
    tma_box_bytes,
    tma_load_multicast,
)
from hidet_lang.errors import DSLTypeError, DSLValueError
from hidet_lang.passes.pipeline import lower
from hidet_lang.target import Target, TargetKind
from hidet_lang.testing import example_count

emulator_reports = pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")

THREADS = 40  # a block: a warp and a partial one
SHAPES = [(1, 1), (2, 1), (4, 1), (1, 2), (2, 2)]  # cluster shapes (x, y): 1, 2 and 4 blocks


def dsl_line(marker: str) -> int:
    """The line of this file that holds `marker` (a comment on the line a report must name)."""
    return next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if marker in text)


@cache
def exchange_module():
    """For each cluster shape (cx, cy) of `SHAPES`, two kernels of clusters of cx x cy blocks on a grid of (cx gx) x
    (cy gy) blocks (one module: one build):
    - `ranks_<cx>x<cy>`: each block's rank and its cluster's size, and each thread's value as the next rank's block
      holds it (written into its shared memory, read through cluster_map_shared);
    - `relay_<cx>x<cy>`: thread 0 of each block writes its block's value into the next rank's inbox and arrives on
      that block's mbarrier; each block waits on its own and stores what it received."""
    with hidet.script_module() as module:
        for cx, cy in SHAPES:
            exchange_kernels(cx, cy)
    return module.build(target="cuda:sm_90", check=True)


def exchange_kernels(cx: int, cy: int) -> None:
    """The two kernels of `exchange_module` for clusters of cx x cy blocks (in the script module being defined)."""
    ranks_name, relay_name = f"ranks_{cx}x{cy}", f"relay_{cx}x{cy}"

    @hidet.script
    def ranks(gx: i32, gy: i32, values: i32[THREADS * 64], rank: i32[64], size: i32[64],
              neighbour: i32[THREADS * 64]):
        attrs.func_kind = "cuda_kernel"
        attrs.func_name = ranks_name
        attrs.cuda.grid_dim = (gx * cx, gy * cy)
        attrs.cuda.block_dim = THREADS
        attrs.cuda.cluster_dim = (cx, cy)
        attrs.cuda.dynamic_smem_bytes = THREADS * 4
        block = blockIdx.x + blockIdx.y * gridDim.x
        t = threadIdx.x
        slot = dynamic_shared_memory(0, i32)
        slot[t] = values[block * THREADS + t]
        if t == 0:
            rank[block] = cluster_rank()
            size[block] = cluster_size()
        cluster_sync()  # every block's slots are written
        other = cluster_map_shared(slot, (cluster_rank() + 1) % cluster_size())
        neighbour[block * THREADS + t] = other[(t + 1) % THREADS]
        cluster_sync()  # no block leaves while the others read its slots

    @hidet.script
    def relay(gx: i32, gy: i32, values: i32[64], received: i32[64]):
        attrs.func_kind = "cuda_kernel"
        attrs.func_name = relay_name
        attrs.cuda.grid_dim = (gx * cx, gy * cy)
        attrs.cuda.block_dim = THREADS
        attrs.cuda.cluster_dim = (cx, cy)
        attrs.cuda.dynamic_smem_bytes = 16
        block = blockIdx.x + blockIdx.y * gridDim.x
        bar = dynamic_shared_memory(0, u64)
        inbox = dynamic_shared_memory(8, i32)
        if threadIdx.x == 0:
            mbarrier_init(bar, 1)
            fence_mbarrier_init()
        cluster_sync()  # every block's barrier is initialized before another arrives on it
        if threadIdx.x == 0:
            after = (cluster_rank() + 1) % cluster_size()
            cluster_map_shared(inbox, after)[0] = values[block]
            mbarrier_arrive_cluster(bar, after)  # release: the write above is seen by the waiters there
        mbarrier_wait(bar, 0)
        if threadIdx.x == 0:  # the arrival's release orders the other block's write before this read
            received[block] = inbox[0]
        cluster_sync()



def cluster_ranks(cx: int, cy: int, gx: int, gy: int) -> tuple[np.ndarray, np.ndarray]:
    """Each block's rank (x fastest within its cluster) and the linear index of the block of the next rank of its
    cluster, blocks numbered x + y * grid_x."""
    size = cx * cy
    rank = np.zeros(gx * cx * gy * cy, np.int32)
    after = np.zeros_like(rank)
    for y in range(gy * cy):
        for x in range(gx * cx):
            r = x % cx + (y % cy) * cx
            nxt = (r + 1) % size
            rank[x + y * gx * cx] = r
            after[x + y * gx * cx] = (x - x % cx + nxt % cx) + (y - y % cy + nxt // cx) * gx * cx
    return rank, after


@settings(max_examples=example_count(6), deadline=None)
@given(st.sampled_from(SHAPES), st.integers(1, 3), st.integers(1, 2), st.integers(0, 2**32 - 1))
def test_blocks_of_a_cluster_read_each_others_shared_memory_and_arrive_on_each_others_barriers(
        shape: tuple[int, int], gx: int, gy: int, seed: int) -> None:
    cx, cy = shape
    blocks = gx * cx * gy * cy
    values = np.random.default_rng(seed).integers(-10**6, 10**6, THREADS * 64).astype(np.int32)
    rank, size = np.full(64, -1, np.int32), np.full(64, -1, np.int32)
    neighbour = np.full(THREADS * 64, -1, np.int32)
    module = exchange_module()
    module[f"ranks_{cx}x{cy}"](gx, gy, values, rank, size, neighbour)
    expected_rank, after = cluster_ranks(cx, cy, gx, gy)
    np.testing.assert_array_equal(rank[:blocks], expected_rank)
    np.testing.assert_array_equal(size[:blocks], cx * cy)
    grid_values = values[:blocks * THREADS].reshape(blocks, THREADS)
    np.testing.assert_array_equal(neighbour[:blocks * THREADS].reshape(blocks, THREADS),
                                  np.roll(grid_values[after], -1, axis=1))
    received = np.full(64, -1, np.int32)
    module[f"relay_{cx}x{cy}"](gx, gy, values[:64], received)
    # block b receives the value of the block whose next rank b is
    expected = np.empty(blocks, np.int32)
    expected[after] = values[:blocks]
    np.testing.assert_array_equal(received[:blocks], expected)


BOX = (8, 8)  # a multicast box of f32: rows, columns (32 bytes a row)
SLOT_BYTES = BOX[0] * BOX[1] * 4
SLOTS_AT = 128  # the barrier, then a slot a source rank (128-byte aligned, as TMA needs)


MULTICAST_SIZES = (1, 2, 4)


def multicast_script(sizes: tuple[int, ...] = MULTICAST_SIZES):
    """For each cluster size in `sizes`, `multicast_<size>`: clusters of `size` blocks along x; the block of rank r
    loads the box of `a` at `coords[r]` into slot r of every block whose bit `masks[r]` sets; each block waits for
    the boxes addressed to it and copies them to `out`."""
    with hidet.script_module() as module:
        for size in sizes:
            multicast_kernel(size)
    return module


def multicast_kernel(size: int) -> None:
    """`multicast_<size>` of `multicast_script` (in the script module being defined)."""
    name = f"multicast_{size}"

    @hidet.script
    def multicast(clusters: i32, rows: i32, cols: i32, a: TensorMap(f32, [rows, cols], box=list(BOX)),  # noqa: F821
                  masks: i32[size], coords: i32[size, 2], out: f32[8, size, BOX[0], BOX[1]]):
        attrs.func_kind = "cuda_kernel"
        attrs.func_name = name
        attrs.cuda.grid_dim = clusters * size
        attrs.cuda.block_dim = 64
        attrs.cuda.cluster_dim = size
        attrs.cuda.dynamic_smem_bytes = SLOTS_AT + size * SLOT_BYTES
        me = cluster_rank()
        bar = dynamic_shared_memory(0, u64)
        if threadIdx.x == 0:
            mbarrier_init(bar, 1)
            fence_mbarrier_init()
        cluster_sync()
        if threadIdx.x == 0:
            expected = 0
            for r in range(size):
                if (masks[r] >> me) & 1:
                    expected += tma_box_bytes(a)
            mbarrier_arrive_expect_tx(bar, expected)  # the boxes may land before: their bytes wait for this
            tma_load_multicast(dynamic_shared_memory(SLOTS_AT + me * SLOT_BYTES, f32), a,
                               [coords[me, 0], coords[me, 1]], bar, masks[me])
        mbarrier_wait(bar, 0)
        for r in range(size):
            if (masks[r] >> me) & 1:
                slot = dynamic_shared_memory(SLOTS_AT + r * SLOT_BYTES, f32)
                e = threadIdx.x
                out[blockIdx.x, r, e // BOX[1], e % BOX[1]] = slot[e]
        cluster_sync()  # no block leaves while a copy may still land in it


@cache
def multicast_module():
    """`multicast_script` built for the emulator's checking mode."""
    return multicast_script().build(target="cuda:sm_90", check=True)


@settings(max_examples=example_count(6), deadline=None)
@given(st.data(), st.sampled_from([1, 2, 4]), st.integers(1, 2), st.integers(1, 20), st.integers(1, 5))
def test_a_multicast_load_lands_in_every_block_its_mask_names(draw: st.DataObject, size: int, clusters: int,
                                                              rows: int, cols4: int) -> None:
    cols = 4 * cols4  # rows of a multiple of 16 bytes
    masks = np.array([draw.draw(st.integers(1, (1 << size) - 1)) for _ in range(size)], np.int32)
    coords = np.array([[draw.draw(st.integers(-BOX[0], rows)), draw.draw(st.integers(-BOX[1], cols))]
                       for _ in range(size)], np.int32)
    a = np.random.default_rng(draw.draw(st.integers(0, 2**32 - 1))).uniform(-1, 1, (rows, cols)).astype(np.float32)
    out = np.full((8, size, *BOX), np.nan, np.float32)
    multicast_module()[f"multicast_{size}"](clusters, rows, cols, a, masks, coords, out)
    padded = np.zeros((rows + 2 * BOX[0], cols + 2 * BOX[1]), np.float32)  # zeros outside the tensor
    padded[BOX[0]:BOX[0] + rows, BOX[1]:BOX[1] + cols] = a
    expected = np.full_like(out, np.nan)
    for block in range(clusters * size):
        for r in range(size):
            if masks[r] >> (block % size) & 1:
                row, col = coords[r] + BOX
                expected[block, r] = padded[row:row + BOX[0], col:col + BOX[1]]
    np.testing.assert_array_equal(out, expected)


@emulator_reports
def test_a_rank_outside_the_cluster_is_reported_at_its_line() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def outside(out: i32[2]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 2
            attrs.cuda.block_dim = 32
            attrs.cuda.cluster_dim = 2
            attrs.cuda.dynamic_smem_bytes = 16
            slot = dynamic_shared_memory(0, i32)
            far = cluster_map_shared(slot, cluster_size())  # the rank outside
            out[blockIdx.x] = far[0]

    line = dsl_line("# the rank outside")
    with pytest.raises(RuntimeError, match=rf"names block rank 2, outside the cluster of 2 blocks .*"
                                           rf"{Path(__file__).name}:{line}"):
        module.build(target="cuda:sm_90", check=True)["outside"](np.zeros(2, np.int32))


@emulator_reports
def test_a_multicast_mask_naming_a_block_outside_the_cluster_is_reported_at_its_line() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def wide(a: TensorMap(f32, [8, 8], box=[8, 8])):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 2
            attrs.cuda.block_dim = 32
            attrs.cuda.cluster_dim = 2
            attrs.cuda.dynamic_smem_bytes = 128 + 256
            bar = dynamic_shared_memory(0, u64)
            if threadIdx.x == 0:
                mbarrier_init(bar, 1)
                mbarrier_arrive_expect_tx(bar, tma_box_bytes(a))
                tma_load_multicast(dynamic_shared_memory(128, f32), a, [0, 0], bar, 0b101)  # the wide mask
            mbarrier_wait(bar, 0)

    line = dsl_line("# the wide mask")
    with pytest.raises(RuntimeError, match=rf"the mask 0x5 names block ranks outside the cluster of 2 blocks .*"
                                           rf"{Path(__file__).name}:{line}"):
        module.build(target="cuda:sm_90", check=True)["wide"](np.zeros((8, 8), np.float32))


@emulator_reports
def test_a_cluster_barrier_a_block_never_reaches_is_a_deadlock_report_not_a_hang() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def stuck(out: i32[2]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 2
            attrs.cuda.block_dim = 32
            attrs.cuda.cluster_dim = 2
            attrs.cuda.dynamic_smem_bytes = 16
            bar = dynamic_shared_memory(0, u64)
            if threadIdx.x == 0:
                mbarrier_init(bar, 1)
            cluster_sync()
            if cluster_rank() == 1:
                mbarrier_wait(bar, 0)  # no thread ever arrives on it
            cluster_sync()
            out[blockIdx.x] = 1

    for check in (False, True):
        with pytest.raises(RuntimeError, match=r"deadlock: no thread of the cluster of 2 blocks can proceed \(the "
                                               r"cluster barrier awaits 32 threads\): block \(0, 0, 0\) \(rank 0\): "
                                               r"threads 0-31 wait at the cluster barrier .* \| block \(1, 0, 0\) "
                                               r"\(rank 1\): threads 0-31 wait on mbarrier"):
            module.build(target="cuda:sm_90", check=check)["stuck"](np.zeros(2, np.int32))


@emulator_reports
def test_arriving_twice_or_waiting_without_arriving_at_the_cluster_barrier_is_reported_at_its_line() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def twice(out: i32[2]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 2
            attrs.cuda.block_dim = 32
            attrs.cuda.cluster_dim = 2
            cluster_arrive()
            cluster_arrive()  # the second arrival
            out[blockIdx.x] = 1

        @hidet.script
        def unannounced(out: i32[2]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 2
            attrs.cuda.block_dim = 32
            attrs.cuda.cluster_dim = 2
            cluster_wait()  # the wait without an arrival
            out[blockIdx.x] = 1

    built = module.build(target="cuda:sm_90", check=True)
    name = Path(__file__).name
    with pytest.raises(RuntimeError, match=rf"cluster_arrive twice .*{name}:{dsl_line('# the second arrival')}"):
        built["twice"](np.zeros(2, np.int32))
    with pytest.raises(RuntimeError, match=rf"cluster_wait without a cluster_arrive before it, at .*{name}:"
                                           rf"{dsl_line('# the wait without an arrival')}"):
        built["unannounced"](np.zeros(2, np.int32))


def cluster_kernel(grid: object, cluster: object, static_shared: bool = False):
    """A module of one kernel `k(n, out)` of clusters of `cluster` blocks on a grid of `grid` (which may use n)."""
    with hidet.script_module() as module:

        @hidet.script
        def k(n: i32, out: i32[64]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = grid(n) if callable(grid) else grid  # the grid
            attrs.cuda.block_dim = 32
            attrs.cuda.cluster_dim = cluster  # the cluster
            if static_shared:
                scratch = shared_tensor(i32, [32])  # the static array
                scratch[threadIdx.x] = n
            out[blockIdx.x] = cluster_rank()

    return module


def test_what_a_cluster_cannot_be_is_refused_at_the_users_line() -> None:
    name = Path(__file__).name
    with pytest.raises(DSLTypeError, match=rf"{name}:{dsl_line('# the cluster')}:\d+: error: .*clusters .*need "
                                           r"CUDA architecture sm_90 or later"):
        cluster_kernel(4, 2).build(target="cuda:sm_80")
    with pytest.raises(DSLValueError, match=rf"{name}:{dsl_line('# the grid')}:\d+: error: .*grid_dim.x = 3 is not "
                                            r"a multiple of cluster_dim.x = 2"):
        cluster_kernel(3, 2).build(target="cuda:sm_90")
    for bad in (9, (4, 4), 0, 2.0, (2, True)):
        with pytest.raises(DSLValueError, match="cluster_dim"):
            cluster_kernel(8, bad)
    if backend() == "emulator":
        with pytest.raises(DSLTypeError, match=rf"{name}:{dsl_line('# the static array')}:\d+: error: .*declare its "
                                               r"shared memory with dynamic_shared_memory"):
            cluster_kernel(4, 2, static_shared=True).build(target="cuda:sm_90")


def test_a_computed_grid_that_is_not_a_whole_number_of_clusters_is_refused_at_the_launch() -> None:
    built = cluster_kernel(lambda n: n, 4).build(target="cuda:sm_90")
    out = np.full(64, -1, np.int32)
    built["k"](8, out)
    np.testing.assert_array_equal(out[:8], [0, 1, 2, 3] * 2)
    with pytest.raises(RuntimeError, match=rf"{Path(__file__).name}:{dsl_line('# the grid')}: kernel 'k': grid_dim "
                                           r"\(6, 1, 1\) is not a multiple of cluster_dim \(4, 1, 1\)"):
        built["k"](6, out)


CUOBJDUMP = find_tool("cuobjdump")


@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
def test_nvrtc_compiles_clusters_to_cluster_dims_the_cluster_barrier_and_a_multicast_load(tmp_path: Path) -> None:
    ir = multicast_script((2,)).ir_module()
    source = emit_cuda(plan_module(lower(ir, Target(TargetKind.CUDA, "sm_90a"))))[0]
    assert "HL_CLUSTER_DIMS(2, 1, 1)" in source
    cubin = tmp_path / "cluster.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(source, "sm_90a", include_dirs=[str(INCLUDE_DIR)]))
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    assert "UTMALDG.2D.MULTICAST" in sass
    assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass
