"""The tile layer (`hidet_lang.cuda.tiles`) alone: the plan's placement arithmetic, the swizzled tile and the tensor
map derived from it, the staging tiles' banks, and on the emulator against numpy a ring of stages that TMA fills
and a consumer warpgroup drains over several rounds, and an accumulator stored through the staging tiles onto odd
and misaligned outputs."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f16, f32, i32, meta, register_tensor
from hidet_lang.cuda import (
    address_aligned,
    copy_vector,
    fence_mbarrier_init,
    syncthreads,
    syncwarp,
    threadIdx,
    tma_load,
    wgmma_accumulator_col,
    wgmma_accumulator_row,
)
from hidet_lang.cuda.tiles import (
    AccumulatorStaging,
    SharedMemoryPlan,
    padded_tile,
    swizzled_tile,
    tile_tensor_map,
)
from hidet_lang.ir.layout import swizzled_layout
from hidet_lang.testing import example_count

# ------------------------------------------------------------------------------------------------ build-time values


def test_the_plan_places_tiles_at_their_alignment_and_barriers_after_them() -> None:
    plan = SharedMemoryPlan()
    padded = plan.tiles(padded_tile(f16, [16, 64], pad=8), count=3)  # 15 rows of 72 halves and one of 64: 2288 B
    swizzled = plan.tiles(swizzled_tile(f16, [64, 64]), count=2)  # at the 128-byte swizzle's period, 1024 bytes
    ring = plan.ring(4, releases=2)
    assert (padded.offset, padded.stride) == (0, 2288)
    assert (swizzled.offset, swizzled.stride) == (7168, 8192)
    assert (ring.full.offset, ring.empty.offset) == (7168 + 16384, 7168 + 16384 + 32)
    assert plan.nbytes == 7168 + 16384 + 64


def test_a_wide_swizzled_tile_is_its_atoms_side_by_side_and_its_map_reads_one_atom() -> None:
    tile = swizzled_tile(f16, [64, 256])
    atom = swizzled_layout([64, 64], f16, swizzle=128)
    for r, c in [(0, 0), (5, 70), (63, 255), (17, 130), (8, 191)]:
        assert tile.layout(r, c) == (c // 64) * 64 * 64 + atom(r, c % 64)
    tensor_map = tile_tensor_map(tile, [7, 1000, 4096], rows=32)
    assert (tensor_map.box, tensor_map.swizzle, tensor_map.shape) == ((1, 32, 64), 128, (7, 1000, 4096))


def test_bad_tiles_and_plans_are_refused_where_they_are_asked_for() -> None:
    with pytest.raises(ValueError, match="no whole number of 128-byte swizzle atoms"):
        swizzled_tile(f16, [60, 64])
    with pytest.raises(ValueError, match="swizzle is 32, 64 or 128"):
        swizzled_tile(f16, [64, 64], swizzle=16)
    with pytest.raises(ValueError, match="count is a positive int"):
        SharedMemoryPlan().tiles(swizzled_tile(f16, [64, 64]), count=0)
    with pytest.raises(ValueError, match="a cluster of 1, 2, 4 or 8 blocks"):
        SharedMemoryPlan().ring(3, releases=3, cluster=3)
    with pytest.raises(TypeError, match="takes a swizzled tile"):
        tile_tensor_map(padded_tile(f16, [16, 64], 8), [128, 128])
    with pytest.raises(ValueError, match="a multiple of 8"):
        SharedMemoryPlan().tiles(swizzled_tile(f16, [64, 64])).address(0, row=4)
    with pytest.raises(ValueError, match="16- or 32-bit elements and a multiple of 64"):
        AccumulatorStaging(SharedMemoryPlan(), f16, 96, 4)


def conflict_ways(byte_addresses: list[int], width: int) -> int:
    """The wavefronts a warp's shared-memory access of `width` bytes a lane takes: 128 bytes a wavefront (lanes in
    phases of 128 / width), and within a phase the most distinct 4-byte words one bank holds."""
    lanes_a_phase = 128 // width
    ways = 0
    for first in range(0, len(byte_addresses), lanes_a_phase):
        banks: dict[int, set[int]] = {}
        for address in byte_addresses[first:first + lanes_a_phase]:
            for word in range(address // 4, (address + width) // 4):
                banks.setdefault(word % 32, set()).add(word)
        ways += max(len(words) for words in banks.values())
    return ways // (len(byte_addresses) // lanes_a_phase)


@pytest.mark.parametrize("dtype", [f16, f32])
def test_the_staging_tiles_take_one_wavefront_a_phase_for_the_pairs_written_and_the_vectors_read(dtype) -> None:
    staging = AccumulatorStaging(SharedMemoryPlan(), dtype, 64, 4)
    layout, nbytes = staging.tiles.tile.layout, dtype.nbytes
    for r in range(0, 32, 2):  # a lane writes its pair (r, r + 1) of adjacent columns as one access
        pairs = [layout(wgmma_accumulator_row(lane, r), wgmma_accumulator_col(lane, r)) * nbytes for lane in range(32)]
        assert conflict_ways(pairs, 2 * nbytes) == 1, r
    tasks = [staging.lanes(lane) for lane in range(32)]
    for k in range(len(tasks[0])):  # the k-th vector of every lane, read at once
        vectors = [layout(row, vec * staging.vector_elements) * nbytes for row, vec in (t[k] for t in tasks)]
        assert conflict_ways(vectors, 16) == 1, k
    cells = sorted(cell for t in tasks for cell in t)
    assert cells == [(row, vec) for row in range(16) for vec in range(64 // staging.vector_elements)]


# ------------------------------------------------------------------------------------------------- on the emulator

RING_ROWS = 64  # rows of a ring's tile (64 f16 columns: one 128-byte swizzle atom)


def ring_copy_module(stages: int):
    """A kernel whose producer thread TMA-loads a tensor's [64, 64] tiles, one a step, through a ring of `stages`
    into shared memory, from which a consumer warp copies each to `out`, then releases its stage."""
    plan = SharedMemoryPlan()
    tile = swizzled_tile(f16, [RING_ROWS, 64])
    buffers = plan.tiles(tile, stages)
    ring = plan.ring(stages, releases=1)
    with hidet.script_module() as module:

        @hidet.script
        def ring_copy(rows: i32, a: tile_tensor_map(tile, [rows, 64]), out: f16[rows, 64]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 64
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            if threadIdx.x == 0:
                ring.init()
                fence_mbarrier_init()
            syncthreads()
            steps = rows / RING_ROWS
            if threadIdx.x == 0:
                for it in range(steps):
                    ring.acquire(it)
                    ring.expect(it, RING_ROWS * 64 * 2)
                    tma_load(buffers.address(ring.stage(it)), a, [it * RING_ROWS, 0], ring.full_barrier(it))
            elif threadIdx.x >= 32:
                lane = threadIdx.x - 32
                for it in range(steps):
                    ring.wait(it)
                    staged = buffers.at(ring.stage(it))
                    for e in range(lane, RING_ROWS * 64, 32):
                        out[it * RING_ROWS + e / 64, e % 64] = staged[e / 64, e % 64]
                    syncwarp()  # the warp's reads of the stage are done
                    ring.release(it, lane)

    return module


@pytest.mark.parametrize("stages,steps", [(2, 7), (3, 3), (4, 9)])
def test_a_ring_hands_every_step_through_its_stages_over_several_rounds(stages: int, steps: int) -> None:
    a = (np.arange(steps * RING_ROWS * 64) % 2039).astype(np.float16).reshape(steps * RING_ROWS, 64)
    out = np.zeros_like(a)
    ring_copy_module(stages).build(target="cuda:sm_90a")(steps * RING_ROWS, a, out)
    np.testing.assert_array_equal(out, a)


def staging_module(dtype, columns: int):
    """A kernel whose warpgroup holds a 64 x `columns` wgmma accumulator of known values (row * 67 + column, modulo
    2039: exact in f16) and stores it into `out[m, n]` through the staging tiles: 16-byte vectors where they fit
    the output and it is aligned, element by element otherwise."""
    plan = SharedMemoryPlan()
    staging = AccumulatorStaging(plan, dtype, columns, 4)
    vector = staging.vector_elements
    with hidet.script_module() as module:

        @hidet.script
        def store_accumulator(m: i32, n: i32, out: dtype[m, n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            t = threadIdx.x
            warp = t / 32
            lane = t % 32
            acc = register_tensor(f32, [columns // 2])
            for r in meta.range(columns // 2):
                acc[r] = f32((wgmma_accumulator_row(t, r) * 67 + wgmma_accumulator_col(t, r)) % 2039)
            for part in meta.range(columns // 64):
                staging.stage(acc, warp, lane, part)
                for row, vec in staging.lanes.on(lane):
                    i = 16 * warp + row
                    j = part * 64 + vec * vector
                    if i < m:
                        if j + vector <= n and address_aligned(~out[i, j], 16):
                            copy_vector(~out[i, j], staging.vector(warp, row, vec), 16)
                        else:
                            for e in meta.range(vector):
                                if j + e < n:
                                    out[i, j + e] = staging.element(warp, row, vec * vector + e)
                syncwarp()

    return module.build(target="cuda:sm_90a")


@settings(max_examples=example_count(8), deadline=None)
@given(st.sampled_from([f16, f32]), st.sampled_from([64, 128]), st.data())
def test_an_accumulator_stored_through_the_staging_tiles_lands_in_its_place(dtype, columns: int,
                                                                           data: st.DataObject) -> None:
    m, n = data.draw(st.integers(1, 64)), data.draw(st.integers(1, columns))
    misaligned = data.draw(st.booleans())  # the output one element past a 16-byte boundary: element stores
    buffer = np.full(m * n + 1, -1, dtype.numpy_name)
    out = buffer[int(misaligned):int(misaligned) + m * n].reshape(m, n)
    staging_module(dtype, columns)(m, n, out)
    rows, cols = np.meshgrid(np.arange(m), np.arange(n), indexing="ij")
    np.testing.assert_array_equal(out, ((rows * 67 + cols) % 2039).astype(dtype.numpy_name))
    assert buffer[0 if misaligned else -1] == -1  # nothing past the output


def turns_module(groups: int):
    """A kernel whose `groups` warpgroups take `rounds` turns each; in its turn a warpgroup dawdles (the lower its
    index, the longer), then its thread 0 writes its group and turn at the next place of `order` (a counter in global
    memory: the checking mode orders shared-memory accesses by block barriers only, not by mbarriers)."""
    plan = SharedMemoryPlan()
    turns = plan.turns(groups)
    with hidet.script_module() as module:

        @hidet.script
        def take_turns(rounds: i32, order: i32[rounds * groups], counter: i32[1]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128 * groups
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = plan.nbytes
            if threadIdx.x == 0:
                turns.init()
                fence_mbarrier_init()
            syncthreads()
            group = threadIdx.x / 128
            t = threadIdx.x % 128
            for turn in range(rounds):
                turns.wait(turn, group)
                for _ in range(4 * (groups - group)):  # the first groups slowest: only the turns keep the order
                    syncwarp()
                if t == 0:
                    order[counter[0]] = 100 * group + turn
                    counter[0] = counter[0] + 1
                syncwarp()
                turns.pass_on(group)

    return module.build(target="cuda:sm_90a")


@pytest.mark.parametrize("groups,rounds", [(2, 5), (3, 4)])
def test_warpgroups_take_their_turns_in_order(groups: int, rounds: int) -> None:
    order = np.full(groups * rounds, -1, np.int32)
    turns_module(groups)(rounds, order, np.zeros(1, np.int32))
    assert order.tolist() == [100 * g + turn for turn in range(rounds) for g in range(groups)]
