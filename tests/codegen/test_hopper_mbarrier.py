"""mbarriers on the emulator: a producer/consumer ring of TMA loads over several stages against numpy, and the
misuse the emulator reports (a wait no thread can satisfy, a barrier used before init)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f32, u64
from hidet_lang.cuda import (
    TensorMap,
    fence_mbarrier_init,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_init,
    mbarrier_wait,
    shared_tensor,
    swizzled_layout,
    syncthreads,
    threadIdx,
    tma_box_bytes,
    tma_load,
)
from hidet_lang.testing import example_count

# the emulator's reports of misuse (a GPU hangs, or computes garbage)
emulator_reports = pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")

ROWS, BOX_K, CONSUMERS = 8, 16, 8


def ring_module(k: int, stages: int):
    """Thread 0 streams the [ROWS, k] tensor through `stages` shared tiles (full/empty mbarriers); threads 1 to 8 each
    sum one row of every tile; out[r] = the row sum."""
    steps = (k + BOX_K - 1) // BOX_K
    with hidet.script_module() as module:

        @hidet.script
        def ring(a: TensorMap(f32, [ROWS, k], box=[ROWS, BOX_K], swizzle=64), out: f32[ROWS]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 1 + CONSUMERS
            attrs.cuda.grid_dim = 1
            tiles = shared_tensor(f32, layout=swizzled_layout([stages * ROWS, BOX_K], f32, swizzle=64))
            full = shared_tensor(u64, [stages])
            empty = shared_tensor(u64, [stages])
            if threadIdx.x == 0:
                for s in range(stages):
                    mbarrier_init(~full[s], 1)
                    mbarrier_init(~empty[s], CONSUMERS)
                fence_mbarrier_init()
            syncthreads()
            if threadIdx.x == 0:
                for step in range(steps):
                    s = step % stages
                    mbarrier_wait(~empty[s], (step / stages + 1) % 2)
                    mbarrier_arrive_expect_tx(~full[s], tma_box_bytes(a))
                    tma_load(~tiles[s * ROWS, 0], a, [0, step * BOX_K], ~full[s])
            else:
                r = threadIdx.x - 1
                acc = f32(0.0)
                for step in range(steps):
                    s = step % stages
                    mbarrier_wait(~full[s], step / stages % 2)
                    for j in range(BOX_K):
                        acc += tiles[s * ROWS + r, j]
                    mbarrier_arrive(~empty[s])
                out[r] = acc

    return module.build(target="cuda:sm_90", check=True)


@settings(max_examples=example_count(4), deadline=None)
@given(st.integers(1, 9), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_a_ring_of_stages_streams_every_tile_once_in_order(k4: int, stages: int, seed: int) -> None:
    k = 4 * k4 * 3  # rows of 16-byte multiples, and tiles past the end that TMA fills with zeros
    a = np.random.default_rng(seed).integers(-8, 8, [ROWS, k]).astype(np.float32)  # exact sums in f32
    out = np.zeros(ROWS, np.float32)
    ring_module(k, stages)["ring"](a, out)
    np.testing.assert_array_equal(out, a.sum(axis=1))


@emulator_reports
def test_a_wait_that_no_thread_can_satisfy_is_a_deadlock_report_not_a_hang() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def stuck(out: f32[1]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            bar = shared_tensor(u64, [1])
            if threadIdx.x == 0:
                mbarrier_init(~bar[0], 64)  # more arrivals than the block has threads
            syncthreads()
            mbarrier_arrive(~bar[0])
            mbarrier_wait(~bar[0], 0)
            out[0] = 1.0

    for check in (False, True):
        with pytest.raises(RuntimeError, match=r"deadlock: thread \d+ waits on mbarrier .*\(32 of 64 arrivals"):
            module.build(target="cuda:sm_90", check=check)["stuck"](np.zeros(1, np.float32))


@emulator_reports
def test_a_barrier_used_before_init_is_reported_at_its_line_in_checking_mode() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def uninitialized(out: f32[1]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            bar = shared_tensor(u64, [1])
            mbarrier_arrive(~bar[0])  # the uninitialized use
            out[0] = 1.0

    with pytest.raises(RuntimeError, match=r"never initialized .*test_hopper_mbarrier.py:\d+"):
        module.build(target="cuda:sm_90", check=True)["uninitialized"](np.zeros(1, np.float32))
