"""Tests of the CUDA emulator's runtime (codegen/include/hidet_lang/cuda_emulator.h, cuda_primitives.h).

Hand-written CUDA C, compiled as C++ with the emulator header by `emulator_harness`, launched through
`hl_emu_launch` and checked against numpy. No GPU is needed: the GPU branch of the primitives header is only
compiled, with NVRTC. Launches that could hang or crash if the emulator regressed (deadlock detection, stack
guard) run in a child process.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from emulator_harness import EmulatorLaunchError, EmulatorModule, build_module, launch_isolated

from codegen.toolchain.elf import read_symbols
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.nvrtc import compile_cubin

FULL = 0xFFFFFFFF

BASIC_SRC = r"""
#include "hidet_lang/cuda_primitives.h"

extern "C" __global__ void __launch_bounds__(256) vadd(int32_t n, float *a, float *b, float *c) {
    int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}

extern "C" __global__ void __launch_bounds__(256) matmul(int32_t m, int32_t n, int32_t k, float *a, float *b,
                                                          float *c) {
    __shared__ float ta[16][16];
    __shared__ float tb[16][16];
    int tx = (int)threadIdx.x, ty = (int)threadIdx.y;
    int row = (int)blockIdx.y * 16 + ty, col = (int)blockIdx.x * 16 + tx;
    float acc = 0.0f;
    for (int k0 = 0; k0 < k; k0 += 16) {
        ta[ty][tx] = (row < m && k0 + tx < k) ? a[row * k + k0 + tx] : 0.0f;
        tb[ty][tx] = (k0 + ty < k && col < n) ? b[(k0 + ty) * n + col] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < 16; ++kk) acc += ta[ty][kk] * tb[kk][tx];
        __syncthreads();
    }
    if (row < m && col < n) c[row * n + col] = acc;
}

extern "C" __global__ void __launch_bounds__(256) block_reduce(float *x, float *sums, int32_t *counts,
                                                                int32_t *alls, int32_t *anys) {
    __shared__ float s[256];
    int t = (int)threadIdx.x, b = (int)blockIdx.x, g = b * 256 + t;
    float v = x[g];
    counts[g] = __syncthreads_count(v > 0.5f);
    alls[g] = __syncthreads_and(v >= 0.25f);
    anys[g] = __syncthreads_or(v > 0.99f);
    s[t] = v;
    __syncthreads();
    for (int k = 128; k > 0; k >>= 1) {
        if (t < k) s[t] += s[t + k];
        __syncthreads();
    }
    if (t == 0) sums[b] = s[0];
}

// the barrier votes of any int predicates (CUDA: a count of the nonzero ones; and/or as 0 or 1)
extern "C" __global__ void __launch_bounds__(64) int_votes(int32_t *preds, int32_t *out) {
    int t = (int)threadIdx.x;
    out[3 * t] = __syncthreads_count(preds[t]);
    out[3 * t + 1] = __syncthreads_and(preds[t]);
    out[3 * t + 2] = __syncthreads_or(preds[t]);
}

extern "C" __global__ void __launch_bounds__(128) warp_reduce(float *x, int32_t *xi, float *down_f, int32_t *down_i,
                                                               float *xor_f, int32_t *xor_i, uint32_t *ballots) {
    int t = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    float f = x[t], g = x[t];
    int i = xi[t], j = xi[t];
    for (int off = 16; off > 0; off >>= 1) {
        f += hl_shfl_down_sync(0xffffffffu, f, off, 32);
        i += hl_shfl_down_sync(0xffffffffu, i, off, 32);
        g += hl_shfl_xor_sync(0xffffffffu, g, off, 32);
        j += hl_shfl_xor_sync(0xffffffffu, j, off, 32);
    }
    ballots[t] = hl_ballot_sync(0xffffffffu, x[t] > 0.5f);
    down_f[t] = f;
    down_i[t] = i;
    xor_f[t] = g;
    xor_i[t] = j;
}

extern "C" __global__ void votes(float *x, uint32_t *ballots, int32_t *anys, int32_t *alls) {
    int t = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    ballots[t] = hl_ballot_sync(0xffffffffu, x[t] > 0.5f);
    anys[t] = hl_any_sync(0xffffffffu, x[t] > 0.9f);
    alls[t] = hl_all_sync(0xffffffffu, x[t] > 0.1f);
    hl_syncwarp(0xffffffffu);
}

extern "C" __global__ void __launch_bounds__(64) shuffles(int32_t width, int32_t *idx_out, int32_t *up_out,
                                                           int32_t *down_out, int32_t *xor_out, int32_t *xor_far_out,
                                                           int32_t *wrap_out, double *d_out, int64_t *l_out,
                                                           float *h_out, float *bf_out, uint32_t *u_out) {
    int t = (int)threadIdx.x;
    int v = 1000 + t;
    idx_out[t] = hl_shfl_sync(0xffffffffu, v, (t * 3 + 1) % 11, width);
    up_out[t] = hl_shfl_up_sync(0xffffffffu, v, 3, width);
    down_out[t] = hl_shfl_down_sync(0xffffffffu, v, 3, width);
    xor_out[t] = hl_shfl_xor_sync(0xffffffffu, v, 5, width);
    xor_far_out[t] = hl_shfl_xor_sync(0xffffffffu, v, 12, width);
    wrap_out[t] = hl_shfl_sync(0xffffffffu, v, t + 40, width);
    d_out[t] = hl_shfl_sync(0xffffffffu, 0.1 * t + 1e10, 7, width);
    l_out[t] = hl_shfl_down_sync(0xffffffffu, (int64_t)t << 40, 1, width);
    h_out[t] = (float)hl_shfl_xor_sync(0xffffffffu, (half)(0.25f * (float)t), 1, width);
    bf_out[t] = __bfloat162float(hl_shfl_xor_sync(0xffffffffu, __float2bfloat16(0.5f * (float)t), 2, width));
    u_out[t] = hl_shfl_up_sync(0xffffffffu, 4000000000u + (uint32_t)t, 1, width);
}

extern "C" __global__ void __launch_bounds__(256) atomics(int32_t n, int32_t *vals, int32_t *hist, float *fx,
                                                           float *fsum, int32_t *fmax_bits, int64_t *lsum,
                                                           int32_t *imin, int32_t *imax, uint32_t *usub,
                                                           int32_t *slot, int32_t *olds) {
    int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i >= n) return;
    hl_atomic_add(&hist[vals[i]], 1);
    hl_atomic_add(fsum, fx[i]);
    int old = *(volatile int32_t *)fmax_bits;  // a float maximum through a compare-and-swap loop
    while (__int_as_float(old) < fx[i]) {
        int prev = hl_atomic_cas(fmax_bits, old, __float_as_int(fx[i]));
        if (prev == old) break;
        old = prev;
    }
    hl_atomic_add(lsum, (int64_t)vals[i] << 33);
    hl_atomic_min(imin, vals[i] - 7);
    hl_atomic_max(imax, vals[i] * 3);
    hl_atomic_sub(usub, 2u);
    olds[i] = hl_atomic_exchange(slot, i);
}

extern "C" __global__ void __launch_bounds__(128) dyn_reverse(float *x, float *y, int32_t *misalign) {
    float *buf = (float *)(hl_dynamic_smem() + 16);
    int t = (int)threadIdx.x, b = (int)blockIdx.x, n = (int)blockDim.x;
    buf[t] = x[b * n + t];
    __syncthreads();
    y[b * n + t] = buf[n - 1 - t];
    if (t == 0) misalign[b] = (int)((uintptr_t)hl_dynamic_smem() % 16);
}

extern "C" __global__ void __launch_bounds__(256) f32_to_f16(int32_t n, float *x, uint16_t *bits, float *back) {
    int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i >= n) return;
    half h = (half)x[i];
    bits[i] = __half_as_ushort(h);
    back[i] = (float)h;
}

extern "C" __global__ void __launch_bounds__(256) f16_to_f32(int32_t n, uint16_t *bits, float *out, uint16_t *again) {
    int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i >= n) return;
    float f = __half2float(__ushort_as_half(bits[i]));
    out[i] = f;
    again[i] = __half_as_ushort(__float2half(f));
}

extern "C" __global__ void __launch_bounds__(256) f32_to_bf16(int32_t n, float *x, uint16_t *bits, float *back) {
    int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i >= n) return;
    __nv_bfloat16 h = __float2bfloat16(x[i]);
    bits[i] = __bfloat16_as_ushort(h);
    back[i] = __bfloat162float(h);
}

extern "C" __global__ void __launch_bounds__(256) half_arith(int32_t n, uint16_t *a, uint16_t *b, uint16_t *sum,
                                                              uint16_t *prod, uint16_t *diff, uint16_t *quot,
                                                              int32_t *less) {
    int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i >= n) return;
    half x = __ushort_as_half(a[i]), y = __ushort_as_half(b[i]);
    sum[i] = __half_as_ushort(x + y);
    prod[i] = __half_as_ushort(x * y);
    diff[i] = __half_as_ushort(x - y);
    quot[i] = __half_as_ushort(x / y);
    less[i] = x < y;
}

extern "C" __global__ void say(int32_t tag) {
    printf("hl-emu tag %d thread %d block %d\n", tag, (int)threadIdx.x, (int)blockIdx.x);
}

extern "C" __global__ void index3d(int32_t *out) {
    int nthreads = (int)(blockDim.x * blockDim.y * blockDim.z);
    int block = (int)(blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y);
    int thread = (int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y);
    int32_t *o = out + (block * nthreads + thread) * 12;
    o[0] = (int)threadIdx.x, o[1] = (int)threadIdx.y, o[2] = (int)threadIdx.z;
    o[3] = (int)blockIdx.x, o[4] = (int)blockIdx.y, o[5] = (int)blockIdx.z;
    o[6] = (int)blockDim.x, o[7] = (int)blockDim.y, o[8] = (int)blockDim.z;
    o[9] = (int)gridDim.x, o[10] = (int)gridDim.y, o[11] = (int)gridDim.z;
}

extern "C" __global__ void index3d_sync(int32_t *out, int32_t *lane0) {
    __shared__ int32_t seen[1024];
    int nthreads = (int)(blockDim.x * blockDim.y * blockDim.z);
    int block = (int)(blockIdx.x + blockIdx.y * gridDim.x + blockIdx.z * gridDim.x * gridDim.y);
    int thread = (int)(threadIdx.x + threadIdx.y * blockDim.x + threadIdx.z * blockDim.x * blockDim.y);
    seen[thread] = thread;
    __syncthreads();
    int g = block * nthreads + thread;
    out[g] = seen[nthreads - 1 - thread];
    lane0[g] = hl_shfl_sync(0xffffffffu, thread, 0, 32);
}

extern "C" __global__ void order_record(int32_t *counter, int32_t *ticket, int32_t *out) {
    int b = (int)blockIdx.x;
    if (threadIdx.x == 0) ticket[b] = hl_atomic_add(counter, 1);
    out[b * (int)blockDim.x + (int)threadIdx.x] = b * 1000 + (int)threadIdx.x;
}
"""

ERRORS_SRC = r"""
#include "hidet_lang/cuda_primitives.h"

extern "C" __global__ void diverge_if(float *out) {
    int t = (int)threadIdx.x;
    if (t < 16) {
        __syncthreads();  // @barrier-in-if
    }
    out[t] = 1.0f;
}

extern "C" __global__ void diverge_else(float *out) {
    int t = (int)threadIdx.x;
    if (t < 16) {
        __syncthreads();  // @then-barrier
    } else {
        __syncthreads();  // @else-barrier
    }
    out[t] = 1.0f;
}

extern "C" __global__ void early_exit(int32_t n, float *out) {
    int t = (int)(threadIdx.x + threadIdx.y * blockDim.x);
    if (t >= n) return;
    out[t] = 1.0f;
    __syncthreads();  // @after-exit
    out[t] += 1.0f;
}

extern "C" __global__ void warp_exit(float *out) {
    int t = (int)threadIdx.x;
    if (t == 7) return;
    out[t] = hl_shfl_down_sync(0xffffffffu, 1.0f, 1, 32);  // @warp-op
}

extern "C" __global__ void warp_mismatch(float *out) {
    int t = (int)threadIdx.x;
    float v;
    if (t < 16) v = hl_shfl_xor_sync(0xffffffffu, 1.0f, 1, 32);  // @xor-a
    else v = hl_shfl_xor_sync(0xffffffffu, 2.0f, 1, 32);  // @xor-b
    out[t] = v;
}

extern "C" __global__ void bad_mask(float *out) {
    int t = (int)threadIdx.x;
    out[t] = hl_shfl_sync(0x0000ffffu, 1.0f, 0, 32);  // @bad-mask
}

extern "C" __global__ void half_warps(float *out) {
    int t = (int)threadIdx.x;
    unsigned m = t < 16 ? 0x0000ffffu : 0xffff0000u;
    float v = (float)t;
    if (t < 16) v += hl_shfl_xor_sync(m, v, 1, 32);
    else v += hl_shfl_xor_sync(m, v, 2, 32);
    out[t] = v;
}

extern "C" __global__ void checked(int32_t bad, float *out) {
    int t = (int)threadIdx.x;
    if (t == bad) {
        hl_assert_fail(4242);
        return;
    }
    __syncthreads();
    out[(int)blockIdx.x * (int)blockDim.x + t] = 1.0f;
}

extern "C" __global__ void big_stack(int32_t n, float *out) {
    volatile float buf[131072];  // 512 KiB on the thread's stack
    for (int i = 0; i < n; ++i) buf[i] = 1.0f;
    float s = 0.0f;
    for (int i = 0; i < n; ++i) s += buf[i];
    out[threadIdx.x] = s;
}
"""


@pytest.fixture(scope="module")
def basic(tmp_path_factory: pytest.TempPathFactory) -> EmulatorModule:
    return build_module(BASIC_SRC, tmp_path_factory.mktemp("emu_basic"), "basic")


@pytest.fixture(scope="module")
def errors(tmp_path_factory: pytest.TempPathFactory) -> EmulatorModule:
    return build_module(ERRORS_SRC, tmp_path_factory.mktemp("emu_errors"), "errors")


def grid_for(n: int, block: int) -> int:
    return (n + block - 1) // block


# ----------------------------------------------------------------------------------------------------
# Kernels that give numpy's results


def test_vector_add_without_fibers(basic: EmulatorModule) -> None:
    assert not basic.kernels["vadd"].needs_fibers
    rng = np.random.default_rng(0)
    n = 100_003
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    c = np.zeros(n, np.float32)
    basic.launch("vadd", grid_for(n, 256), 256, n, a, b, c)
    np.testing.assert_array_equal(c, a + b)


@pytest.mark.parametrize("m, n, k", [(48, 80, 32), (50, 70, 30)])
def test_tiled_matmul_with_shared_memory_and_barriers(basic: EmulatorModule, m: int, n: int, k: int) -> None:
    assert basic.kernels["matmul"].needs_fibers
    rng = np.random.default_rng(1)
    a, b = rng.random((m, k), dtype=np.float32), rng.random((k, n), dtype=np.float32)
    c = np.full((m, n), np.nan, np.float32)
    basic.launch("matmul", (grid_for(n, 16), grid_for(m, 16)), (16, 16), m, n, k, a, b, c)
    # k non-negative products: each float32 sum is within k * 2**-24 (2e-6) relative of the exact one in any order
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=0)


def test_block_reduction_and_syncthreads_count_and_or(basic: EmulatorModule) -> None:
    rng = np.random.default_rng(2)
    blocks = 6
    x = rng.random(blocks * 256, dtype=np.float32)
    x[256:512] = np.maximum(x[256:512], 0.3)  # block 1: every value >= 0.25, none above 0.99
    x[256:512] = np.minimum(x[256:512], 0.9)
    sums = np.zeros(blocks, np.float32)
    counts, alls, anys = (np.full(blocks * 256, -1, np.int32) for _ in range(3))
    basic.launch("block_reduce", blocks, 256, x, sums, counts, alls, anys)
    per_block = x.reshape(blocks, 256)
    tree = per_block.copy()  # the kernel's pairwise tree, in float32: bitwise equal
    for k in (128, 64, 32, 16, 8, 4, 2, 1):
        tree[:, :k] = tree[:, :k] + tree[:, k:2 * k]
    np.testing.assert_array_equal(sums, tree[:, 0])
    expected_counts = np.repeat((per_block > 0.5).sum(axis=1), 256).reshape(blocks, 256)
    np.testing.assert_array_equal(counts.reshape(blocks, 256), expected_counts)
    np.testing.assert_array_equal(alls.reshape(blocks, 256)[:, 0], (per_block >= 0.25).all(axis=1))
    np.testing.assert_array_equal(anys.reshape(blocks, 256)[:, 0], (per_block > 0.99).any(axis=1))
    assert alls[256] == 1 and anys[256] == 0  # the planted block
    assert (alls.reshape(blocks, 256) == alls.reshape(blocks, 256)[:, :1]).all()  # every thread got the result


def test_barrier_votes_with_exactly_one_thread_different(basic: EmulatorModule) -> None:
    # per block: every thread's value in [0.3, 0.4] (all >= 0.25, none > 0.5 or > 0.99) but one, at the first, the
    # last or a middle thread, which alone flips __syncthreads_and (0.1), __syncthreads_or (0.995) or adds one to
    # __syncthreads_count (0.6); the last block has no odd thread, and the one before it all but one thread counted
    odd = [(0, 0.1), (255, 0.1), (137, 0.1), (0, 0.995), (255, 0.995), (91, 0.995), (200, 0.6), (0, 0.6)]
    blocks = len(odd) + 2
    x = np.full((blocks, 256), 0.35, np.float32)
    for b, (thread, value) in enumerate(odd):
        x[b, thread] = value
    x[-2] = 0.6
    x[-2, 3] = 0.35
    sums = np.zeros(blocks, np.float32)
    counts, alls, anys = (np.full(blocks * 256, -1, np.int32) for _ in range(3))
    basic.launch("block_reduce", blocks, 256, x.ravel(), sums, counts, alls, anys)
    got = {name: v.reshape(blocks, 256) for name, v in (("count", counts), ("and", alls), ("or", anys))}
    want = {"count": (x > 0.5).sum(axis=1), "and": (x >= 0.25).all(axis=1), "or": (x > 0.99).any(axis=1)}
    for name in got:  # every thread of a block gets its block's result
        np.testing.assert_array_equal(got[name], np.repeat(want[name].astype(np.int32), 256).reshape(blocks, 256),
                                      err_msg=name)
    assert list(want["and"]) == [False] * 3 + [True] * 7 and list(want["or"]) == [False] * 3 + [True] * 3 + [False] * 4
    assert list(want["count"][6:]) == [1, 1, 255, 0]


@pytest.mark.parametrize("preds", [[7], [-3], [0], [7, -3, 2], [7, 0, -1]], ids=str)
def test_barrier_votes_of_int_predicates_are_counts_and_truth_values(basic: EmulatorModule, preds: list[int]) -> None:
    # a block of one thread included (it has no other thread to wait for)
    n = len(preds)
    out = np.full(3 * n, -9, np.int32)
    basic.launch("int_votes", 1, n, np.array(preds, np.int32), out)
    nonzero = [p != 0 for p in preds]
    want = [sum(nonzero), int(all(nonzero)), int(any(nonzero))]
    np.testing.assert_array_equal(out.reshape(n, 3), np.array([want] * n, np.int32))


def _simulate_down(v: np.ndarray, off: int) -> np.ndarray:
    lanes = np.arange(32)
    src = np.where(lanes + off < 32, lanes + off, lanes)
    return v + v[:, src]


def test_warp_reductions_with_shfl_down_xor_and_ballot(basic: EmulatorModule) -> None:
    rng = np.random.default_rng(3)
    n = 4 * 128
    x = rng.random(n, dtype=np.float32)
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    down_f, xor_f = np.zeros(n, np.float32), np.zeros(n, np.float32)
    down_i, xor_i = np.zeros(n, np.int32), np.zeros(n, np.int32)
    ballots = np.zeros(n, np.uint32)
    basic.launch("warp_reduce", n // 128, 128, x, xi, down_f, down_i, xor_f, xor_i, ballots)
    f, g, i, j = (arr.reshape(-1, 32).copy() for arr in (x, x, xi, xi))
    for off in (16, 8, 4, 2, 1):  # the same float32 operations in the same order: bitwise equal
        f, i = _simulate_down(f, off), _simulate_down(i, off)
        g = g + g[:, np.arange(32) ^ off]
        j = j + j[:, np.arange(32) ^ off]
    np.testing.assert_array_equal(down_f.reshape(-1, 32), f)
    np.testing.assert_array_equal(down_i.reshape(-1, 32), i)
    np.testing.assert_array_equal(xor_f.reshape(-1, 32), g)
    np.testing.assert_array_equal(xor_i.reshape(-1, 32), j)
    assert (down_i.reshape(-1, 32)[:, 0] == xi.reshape(-1, 32).sum(axis=1)).all()
    bits = (x.reshape(-1, 32) > 0.5).astype(np.uint64) << np.arange(32, dtype=np.uint64)
    expected = bits.sum(axis=1).astype(np.uint32)
    np.testing.assert_array_equal(ballots.reshape(-1, 32), np.repeat(expected, 32).reshape(-1, 32))


def test_votes_in_a_partial_warp(basic: EmulatorModule) -> None:
    # 48 threads: the second warp has 16 lanes; a full mask names only the lanes that exist
    x = np.linspace(0.0, 1.0, 48, dtype=np.float32)
    ballots = np.zeros(48, np.uint32)
    anys, alls = np.zeros(48, np.int32), np.zeros(48, np.int32)
    basic.launch("votes", 1, 48, x, ballots, anys, alls)
    for warp, lanes in ((0, slice(0, 32)), (1, slice(32, 48))):
        values = x[lanes]
        expected = sum(1 << k for k, v in enumerate(values) if v > 0.5)
        assert (ballots[lanes] == expected).all(), warp
        assert (anys[lanes] == int((values > 0.9).any())).all()
        assert (alls[lanes] == int((values > 0.1).all())).all()
    assert alls[0] == 0 and alls[40] == 1 and anys[0] == 0 and anys[47] == 1


def _shuffle_reference(op: str, value: np.ndarray, param: np.ndarray | int, width: int) -> np.ndarray:
    """CUDA's documented __shfl_*_sync semantics for 64 lanes (two warps) of `value`."""
    out = value.copy()
    for t in range(len(value)):
        lane, base = t % 32, t - t % 32
        p = int(param[t]) if isinstance(param, np.ndarray) else param
        if op == "idx":
            src = (lane // width) * width + p % width
        elif op == "up":
            src = lane - p if lane % width >= p else lane
        elif op == "down":
            src = lane + p if lane % width + p < width else lane
        else:  # xor: a later group of `width` lanes gives the caller's own value
            src = lane ^ p if (lane ^ p) // width <= lane // width else lane
        out[t] = value[base + src]
    return out


@pytest.mark.parametrize("width", [8, 16, 32])
def test_shuffles_with_width_subgroups(basic: EmulatorModule, width: int) -> None:
    t = np.arange(64)
    outs = [np.zeros(64, np.int32) for _ in range(6)]
    d_out, l_out = np.zeros(64, np.float64), np.zeros(64, np.int64)
    h_out, bf_out, u_out = np.zeros(64, np.float32), np.zeros(64, np.float32), np.zeros(64, np.uint32)
    basic.launch("shuffles", 1, 64, width, *outs, d_out, l_out, h_out, bf_out, u_out)
    v = 1000 + t
    np.testing.assert_array_equal(outs[0], _shuffle_reference("idx", v, (t * 3 + 1) % 11, width))
    np.testing.assert_array_equal(outs[1], _shuffle_reference("up", v, 3, width))
    np.testing.assert_array_equal(outs[2], _shuffle_reference("down", v, 3, width))
    np.testing.assert_array_equal(outs[3], _shuffle_reference("xor", v, 5, width))
    np.testing.assert_array_equal(outs[4], _shuffle_reference("xor", v, 12, width))
    np.testing.assert_array_equal(outs[5], _shuffle_reference("idx", v, t + 40, width))
    np.testing.assert_array_equal(d_out, _shuffle_reference("idx", 0.1 * t + 1e10, 7, width))
    np.testing.assert_array_equal(l_out, _shuffle_reference("down", t.astype(np.int64) << 40, 1, width))
    np.testing.assert_array_equal(h_out, _shuffle_reference("xor", 0.25 * t, 1, width).astype(np.float32))
    np.testing.assert_array_equal(bf_out, _shuffle_reference("xor", 0.5 * t, 2, width).astype(np.float32))
    np.testing.assert_array_equal(u_out, _shuffle_reference("up", 4_000_000_000 + t, 1, width).astype(np.uint32))
    if width == 8:  # spot checks of the reference itself
        assert outs[1][9] == 1009 and outs[1][11] == 1008  # lane 9 is lane 1 of its group: keeps its value
        assert outs[4][12] == 1000 and outs[4][0] == 1000  # xor 12 reaches back a group, never forward


def test_atomics_histogram_float_add_cas_loop_and_integer_ops(basic: EmulatorModule) -> None:
    rng = np.random.default_rng(4)
    n = 10_000
    vals = rng.integers(0, 16, n).astype(np.int32)
    hist = np.zeros(16, np.int32)
    fx = (rng.integers(0, 128, n) / 8).astype(np.float32)  # multiples of 1/8: every partial sum is exact
    fsum = np.zeros(1, np.float32)
    fmax_bits = np.array([-1.0], np.float32).view(np.int32)
    lsum = np.zeros(1, np.int64)
    imin, imax = np.array([1 << 30], np.int32), np.array([-(1 << 30)], np.int32)
    usub = np.array([5], np.uint32)
    slot, olds = np.array([-7], np.int32), np.zeros(n, np.int32)
    basic.launch("atomics", grid_for(n, 256), 256, n, vals, hist, fx, fsum, fmax_bits, lsum, imin, imax, usub, slot,
                 olds)
    np.testing.assert_array_equal(hist, np.bincount(vals, minlength=16))
    assert fsum[0] == fx.astype(np.float64).sum()
    assert fmax_bits.view(np.float32)[0] == fx.max()
    assert lsum[0] == (vals.astype(np.int64) << 33).sum()
    assert imin[0] == vals.min() - 7 and imax[0] == vals.max() * 3
    assert usub[0] == (5 - 2 * n) % 2**32
    # each exchange returned the value before it: the chain of values is the initial one and every index once
    assert sorted([*olds.tolist(), int(slot[0])]) == sorted([-7, *range(n)])


def test_dynamic_shared_memory(basic: EmulatorModule) -> None:
    blocks = 8
    x = np.arange(blocks * 128, dtype=np.float32)
    y = np.zeros_like(x)
    misalign = np.full(blocks, -1, np.int32)
    basic.launch("dyn_reverse", blocks, 128, x, y, misalign, smem=16 + 128 * 4)
    np.testing.assert_array_equal(y.reshape(blocks, 128), x.reshape(blocks, 128)[:, ::-1])
    assert (misalign == 0).all()


def _f32_samples() -> np.ndarray:
    rng = np.random.default_rng(5)
    special = np.array([0.0, -0.0, 1.0, -2.5, 65504.0, 65519.99, 65520.0, -65520.0, 1e9, 2.0**-24, 2.0**-25,
                        3 * 2.0**-25, 2.0**-26, 2.0**-14, 2.0**-14 * 0.999, 1 + 2.0**-11, 1 + 3 * 2.0**-11,
                        np.inf, -np.inf, np.nan, 3.3961e38, 3.4e38, 1e-40, -1e-42], np.float32)
    patterns = rng.integers(0, 2**32, 200_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    scaled = (rng.standard_normal(50_000) * 10.0 ** rng.integers(-9, 6, 50_000)).astype(np.float32)
    return np.concatenate([special, patterns, scaled])


def test_half_conversions_match_numpy_float16(basic: EmulatorModule) -> None:
    x = _f32_samples()
    n = len(x)
    bits, back = np.zeros(n, np.uint16), np.zeros(n, np.float32)
    basic.launch("f32_to_f16", grid_for(n, 256), 256, n, x, bits, back)
    with np.errstate(over="ignore"):
        expected = x.astype(np.float16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(bits[~nan], expected.view(np.uint16)[~nan])
    np.testing.assert_array_equal(back[~nan], expected.astype(np.float32)[~nan])
    assert ((bits[nan] & 0x7C00) == 0x7C00).all() and ((bits[nan] & 0x3FF) != 0).all()
    # every half bit pattern to float and back
    every = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    out, again = np.zeros(65536, np.float32), np.zeros(65536, np.uint16)
    basic.launch("f16_to_f32", 256, 256, 65536, every, out, again)
    reference = every.view(np.float16).astype(np.float32)
    finite = ~np.isnan(reference)
    np.testing.assert_array_equal(out[finite], reference[finite])
    assert np.isnan(out[~finite]).all()
    np.testing.assert_array_equal(again[finite], every[finite])


def _bf16_reference(x: np.ndarray) -> np.ndarray:
    """Round float32 to bfloat16 bits, nearest with ties to even, from the two candidate values in float64."""
    u = x.view(np.uint32).astype(np.int64)
    sign = u & 0x80000000
    lower = (u & 0x7FFF0000) >> 16  # magnitude bits, truncated
    upper = lower + 1

    def value(m: np.ndarray) -> np.ndarray:
        exp, mant = m >> 7, m & 0x7F
        normal = (1 + mant / 128.0) * np.exp2(exp.astype(np.float64) - 127)
        return np.where(exp == 0, mant / 128.0 * 2.0**-126, normal)  # exponent 255 stands for 2^128

    with np.errstate(invalid="ignore"):  # signalling NaN patterns
        mag = np.abs(x.astype(np.float64))
    below, above = mag - value(lower), value(upper) - mag
    pick_upper = (above < below) | ((above == below) & (lower % 2 == 1))
    result = np.where(pick_upper, upper, lower)
    result = np.where(np.isinf(x), 0x7F80, result)
    return ((sign >> 16) | result).astype(np.uint16)


def test_bfloat16_conversion_matches_a_bit_level_reference(basic: EmulatorModule) -> None:
    x = _f32_samples()
    n = len(x)
    bits, back = np.zeros(n, np.uint16), np.zeros(n, np.float32)
    basic.launch("f32_to_bf16", grid_for(n, 256), 256, n, x, bits, back)
    nan = np.isnan(x)
    expected = _bf16_reference(x)
    np.testing.assert_array_equal(bits[~nan], expected[~nan])
    np.testing.assert_array_equal(back[~nan], (expected[~nan].astype(np.uint32) << 16).view(np.float32))
    assert ((bits[nan] & 0x7F80) == 0x7F80).all() and ((bits[nan] & 0x7F) != 0).all()
    assert bits[np.flatnonzero(x == np.float32(3.4e38))[0]] == 0x7F80  # rounds up to infinity


def test_half_arithmetic_matches_numpy(basic: EmulatorModule) -> None:
    rng = np.random.default_rng(6)
    n = 100_000
    a = (rng.standard_normal(n) * 100).astype(np.float16)
    b = (rng.standard_normal(n) * 100).astype(np.float16)
    b[:10] = a[:10]
    outs = [np.zeros(n, np.uint16) for _ in range(4)]
    less = np.zeros(n, np.int32)
    basic.launch("half_arith", grid_for(n, 256), 256, n, a.view(np.uint16), b.view(np.uint16), *outs, less)
    with np.errstate(all="ignore"):
        for out, expected in zip(outs, (a + b, a * b, a - b, a / b)):
            np.testing.assert_array_equal(out.view(np.float16), expected)
    np.testing.assert_array_equal(less, (a < b).astype(np.int32))


def test_printf_output_reaches_stdout(basic: EmulatorModule, capfd: pytest.CaptureFixture[str]) -> None:
    basic.launch("say", 2, 3, 17)
    lines = [line for line in capfd.readouterr().out.splitlines() if line.startswith("hl-emu")]
    assert sorted(lines) == sorted(f"hl-emu tag 17 thread {t} block {b}" for b in range(2) for t in range(3))


@pytest.mark.parametrize("kernel", ["index3d", "index3d_sync"])
def test_three_dimensional_grid_and_block(basic: EmulatorModule, kernel: str) -> None:
    grid, block = (2, 3, 4), (4, 2, 5)
    nthreads, nblocks = 4 * 2 * 5, 2 * 3 * 4
    if kernel == "index3d":
        out = np.full(nblocks * nthreads * 12, -1, np.int32)
        basic.launch(kernel, grid, block, out)
        rows = out.reshape(nblocks, nthreads, 12)
        bz, by, bx = np.unravel_index(np.arange(nblocks), grid[::-1])
        tz, ty, tx = np.unravel_index(np.arange(nthreads), block[::-1])
        shape = (nblocks, nthreads, 3)
        np.testing.assert_array_equal(rows[:, :, 0:3], np.broadcast_to(np.stack([tx, ty, tz], 1), shape))
        np.testing.assert_array_equal(rows[:, :, 3:6], np.broadcast_to(np.stack([bx, by, bz], 1)[:, None], shape))
        assert (rows[:, :, 6:9] == block).all() and (rows[:, :, 9:12] == grid).all()
    else:
        out, lane0 = np.full(nblocks * nthreads, -1, np.int32), np.full(nblocks * nthreads, -1, np.int32)
        basic.launch(kernel, grid, block, out, lane0)
        linear = np.arange(nthreads)
        shape = (nblocks, nthreads)
        np.testing.assert_array_equal(out.reshape(shape), np.broadcast_to(linear[::-1], shape))
        np.testing.assert_array_equal(lane0.reshape(shape), np.broadcast_to(linear // 32 * 32, shape))


def _order_run(basic: EmulatorModule, blocks: int) -> np.ndarray:
    counter, ticket = np.zeros(1, np.int32), np.full(blocks, -1, np.int32)
    out = np.zeros(blocks * 32, np.int32)
    basic.launch("order_record", blocks, 32, counter, ticket, out)
    np.testing.assert_array_equal(out.reshape(blocks, 32), np.arange(blocks)[:, None] * 1000 + np.arange(32))
    assert sorted(ticket.tolist()) == list(range(blocks))
    return ticket


def test_random_block_order(basic: EmulatorModule, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = 256
    monkeypatch.delenv("HIDET_LANG_EMU_BLOCK_ORDER", raising=False)
    linear = _order_run(basic, blocks)
    assert np.corrcoef(linear, np.arange(blocks))[0, 1] > 0.9
    monkeypatch.setenv("HIDET_LANG_EMU_BLOCK_ORDER", "random")
    monkeypatch.setenv("HIDET_LANG_EMU_SEED", "12345")
    shuffled = _order_run(basic, blocks)
    assert abs(np.corrcoef(shuffled, np.arange(blocks))[0, 1]) < 0.5
    monkeypatch.setenv("HIDET_LANG_EMU_SEED", "54321")
    assert not np.array_equal(_order_run(basic, blocks), shuffled)
    monkeypatch.setenv("HIDET_LANG_EMU_BLOCK_ORDER", "sideways")
    with pytest.raises(EmulatorLaunchError, match="HIDET_LANG_EMU_BLOCK_ORDER=sideways"):
        _order_run(basic, blocks)


# ----------------------------------------------------------------------------------------------------
# Bad launches and bad kernels: errors, never a hang or a crash


def test_invalid_launch_configurations(basic: EmulatorModule) -> None:
    x = np.zeros(4, np.float32)
    with pytest.raises(EmulatorLaunchError, match=r"kernel 'vadd'.*block_dim \(2048, 1, 1\) is invalid"):
        basic.launch("vadd", 1, 2048, 4, x, x, x)
    with pytest.raises(EmulatorLaunchError, match=r"grid_dim \(0, 1, 1\) is invalid"):
        basic.launch("vadd", 0, 32, 4, x, x, x)
    with pytest.raises(EmulatorLaunchError, match=r"block_dim \(32, 32, 2\)"):
        basic.launch("vadd", 1, (32, 32, 2), 4, x, x, x)
    basic.launch("vadd", 1, 4, 4, x, x, x)  # the module still works


def test_barrier_in_a_kernel_launched_without_fibers(basic: EmulatorModule) -> None:
    x = np.zeros(256, np.float32)
    i = np.zeros(256, np.int32)
    pattern = r"kernel 'block_reduce'.*__syncthreads_count \(generated line \d+\).*needs_fibers=0"
    with pytest.raises(EmulatorLaunchError, match=pattern):
        basic.launch("block_reduce", 1, 256, x, x[:1], i, i, i, needs_fibers=False)


def test_barrier_inside_an_if_is_reported_with_its_line(errors: EmulatorModule) -> None:
    result = launch_isolated(errors, "diverge_if", 1, 32, np.zeros(32, np.float32))
    line = errors.line_of("@barrier-in-if")
    assert result.rc == 1, result.output
    assert "kernel 'diverge_if', block (0, 0, 0)" in result.message
    assert f"threads 0-15 wait at __syncthreads (generated line {line})" in result.message
    assert "threads 16-31 have exited" in result.message


def test_threads_at_different_barriers(errors: EmulatorModule) -> None:
    result = launch_isolated(errors, "diverge_else", 2, 64, np.zeros(64, np.float32))
    assert result.rc == 1, result.output
    assert "barrier divergence" in result.message and "kernel 'diverge_else'" in result.message
    assert f"threads 0-15 wait at __syncthreads (generated line {errors.line_of('@then-barrier')})" in result.message
    assert f"threads 16-63 wait at __syncthreads (generated line {errors.line_of('@else-barrier')})" in result.message


def test_early_exit_while_others_wait_at_a_barrier(errors: EmulatorModule) -> None:
    result = launch_isolated(errors, "early_exit", (3, 1, 1), (8, 4, 1), 20, np.zeros(32, np.float32))
    assert result.rc == 1, result.output
    assert "exited while other threads wait at a barrier" in result.message
    assert f"threads 0-19 wait at __syncthreads (generated line {errors.line_of('@after-exit')})" in result.message
    assert "threads 20-31 have exited" in result.message
    assert "threadIdx.x + threadIdx.y * 8" in result.message  # 2-D block: how threads are numbered
    ok = launch_isolated(errors, "early_exit", 1, 32, 32, np.zeros(32, np.float32))
    assert ok.rc == 0 and (ok.arrays[0] == 2.0).all()


def test_warp_operation_waiting_for_an_exited_lane(errors: EmulatorModule) -> None:
    result = launch_isolated(errors, "warp_exit", 1, 64, np.zeros(64, np.float32))
    assert result.rc == 1, result.output
    line = errors.line_of("@warp-op")
    assert f"wait at hl_shfl_down_sync with mask 0xffffffff (generated line {line})" in result.message
    assert "threads 7, 32-63 have exited" in result.message  # warp 1 finished


def test_lanes_at_different_warp_operations(errors: EmulatorModule) -> None:
    result = launch_isolated(errors, "warp_mismatch", 1, 32, np.zeros(32, np.float32))
    assert result.rc == 1, result.output
    assert "warp divergence" in result.message
    assert f"(generated line {errors.line_of('@xor-a')})" in result.message
    assert f"(generated line {errors.line_of('@xor-b')})" in result.message


def test_mask_without_the_callers_lane(errors: EmulatorModule) -> None:
    result = launch_isolated(errors, "bad_mask", 1, 32, np.zeros(32, np.float32))
    assert result.rc == 1, result.output
    assert "mask 0x0000ffff, which does not name its own lane" in result.message
    assert f"(generated line {errors.line_of('@bad-mask')})" in result.message


def test_half_warps_with_their_own_masks(errors: EmulatorModule) -> None:
    result = launch_isolated(errors, "half_warps", 1, 32, np.zeros(32, np.float32))
    assert result.rc == 0, result.output
    t = np.arange(32)
    np.testing.assert_array_equal(result.arrays[0], np.where(t < 16, t + (t ^ 1), t + (t ^ 2)))


def test_device_assertion_is_recorded_and_taken_once(errors: EmulatorModule) -> None:
    failed = launch_isolated(errors, "checked", 4, 32, 5, np.zeros(128, np.float32))
    assert failed.rc == 0, failed.output  # like a GPU kernel that records the line and returns
    assert failed.assert_line == 4242
    passed = launch_isolated(errors, "checked", 4, 32, -1, np.zeros(128, np.float32))
    assert passed.rc == 0 and passed.assert_line == 0 and (passed.arrays[0] == 1.0).all()


def test_take_assert_line_in_process(errors: EmulatorModule) -> None:
    out = np.zeros(32, np.float32)
    errors.launch("checked", 1, 1, 0, out)  # one thread: no fibers, nobody left waiting
    assert errors.take_assert_line() == 4242
    assert errors.take_assert_line() == 0


def test_stack_size_setting_and_guard_page(errors: EmulatorModule) -> None:
    out = np.zeros(2, np.float32)
    big = launch_isolated(errors, "big_stack", 1, 2, 131072, out, env={"HIDET_LANG_EMU_STACK_KB": "768"})
    assert big.rc == 0, big.output
    assert (big.arrays[0] == 131072).all()
    overflow = launch_isolated(errors, "big_stack", 1, 2, 131072, out, env={"HIDET_LANG_EMU_STACK_KB": None})
    assert overflow.rc == 1 and "stack overflow" in overflow.message, overflow.output  # an error, not a crash
    bad = launch_isolated(errors, "big_stack", 1, 2, 4, out, env={"HIDET_LANG_EMU_STACK_KB": "lots"})
    assert bad.rc == 1 and "HIDET_LANG_EMU_STACK_KB=lots" in bad.message


# ----------------------------------------------------------------------------------------------------
# The guarded and checked accesses the code generator emits for the emulator

CHECKS_SRC = r"""
#include "hidet_lang/cuda_primitives.h"

extern "C" __global__ void guarded_store(int32_t n, int32_t extent, float *c) {
    int i = (int)blockIdx.x * (int)blockDim.x + (int)threadIdx.x;
    if (i < n) *hl_emu_store_guard(c, (long long)i, (long long)extent, "c", "prog.py:12") = 1.0f;
}

extern "C" __global__ void local_read(int32_t k, float *out) {
    float local[8];
    for (int i = 0; i < 8; ++i) *hl_emu_checked(local, (long long)i, 8LL, 2 | 16, "local", "prog.py:20") = (float)i;
    out[threadIdx.x] = *hl_emu_checked(local, (long long)k, 8LL, 1 | 16, "local", "prog.py:21");
}

// shift: thread t reads s[t - shift] (t >= shift; else its own s[t]) after writing s[t]; with_barrier puts a
// barrier in between
extern "C" __global__ void shared_shift(int32_t shift, int32_t with_barrier, int32_t writers, float *out) {
    __shared__ float s[64];
    hl_emu_shared_declared(s, sizeof(s), "s", "prog.py:30");
    int t = (int)threadIdx.x;
    if (t < writers) *hl_emu_checked(s, (long long)t, 64LL, 2 | 8, "s", "prog.py:31") = (float)t;
    if (with_barrier) __syncthreads();
    int j = t >= shift ? t - shift : t;
    out[t] = *hl_emu_checked(s, (long long)j, 64LL, 1 | 8, "s", "prog.py:33");
    __syncthreads();
}

// lanes of one warp hand values over through shared memory, ordered by __syncwarp (or not)
extern "C" __global__ void warp_handover(int32_t sync, float *out) {
    __shared__ float s[32];
    hl_emu_shared_declared(s, sizeof(s), "s", "prog.py:40");
    int t = (int)threadIdx.x;
    *hl_emu_checked(s, (long long)t, 32LL, 2 | 8, "s", "prog.py:41") = (float)t;
    if (sync) __syncwarp();
    out[t] = *hl_emu_checked(s, (long long)(t > 0 ? t - 1 : 0), 32LL, 1 | 8, "s", "prog.py:43");
    __syncwarp();
}

// every thread reads s[0]; then thread 1 overwrites it with (or without) a barrier in between
extern "C" __global__ void write_after_reads(int32_t with_barrier, float *out) {
    __shared__ float s[4];
    hl_emu_shared_declared(s, sizeof(s), "s", "prog.py:50");
    int t = (int)threadIdx.x;
    if (t == 0) *hl_emu_checked(s, 0LL, 4LL, 2 | 8, "s", "prog.py:51") = 5.0f;
    __syncthreads();
    out[t] = *hl_emu_checked(s, 0LL, 4LL, 1 | 8, "s", "prog.py:53");
    if (with_barrier) __syncthreads();
    if (t == 1) *hl_emu_checked(s, 0LL, 4LL, 2 | 8, "s", "prog.py:55") = 6.0f;
    __syncthreads();
}
"""


@pytest.fixture(scope="module")
def checks(tmp_path_factory: pytest.TempPathFactory) -> EmulatorModule:
    return build_module(CHECKS_SRC, tmp_path_factory.mktemp("emu_checks"), "checks")


def test_store_guard_stops_an_out_of_bounds_store(checks: EmulatorModule) -> None:
    c = np.zeros(80, np.float32)
    checks.launch("guarded_store", 1, 64, 64, 64, c)
    assert (c[:64] == 1).all() and (c[64:] == 0).all()
    c[:] = 0
    with pytest.raises(EmulatorLaunchError, match=r"kernel 'guarded_store', block \(1, 0, 0\): thread 0: "
                       r"out-of-bounds access: writes c\[64\], which has 64 elements, at prog.py:12"):
        checks.launch("guarded_store", 2, 64, 80, 64, c)
    assert (c[64:] == 0).all()  # nothing written past the extent
    checks.launch("guarded_store", 2, 64, 80, -1, c)  # extent unknown: no check
    assert (c == 1).all()


def test_checked_read_of_a_local_array(checks: EmulatorModule) -> None:
    out = np.zeros(4, np.float32)
    checks.launch("local_read", 1, 4, 7, out)
    assert (out == 7).all()
    with pytest.raises(EmulatorLaunchError, match=r"reads local\[8\], which has 8 elements, at prog.py:21"):
        checks.launch("local_read", 1, 4, 8, out)


def test_shared_memory_checks(checks: EmulatorModule) -> None:
    out = np.zeros(64, np.float32)
    checks.launch("shared_shift", 1, 64, 1, 1, 64, out)  # barrier between the writes and the reads: fine
    np.testing.assert_array_equal(out, np.maximum(np.arange(64) - 1, 0))
    with pytest.raises(EmulatorLaunchError, match=r"thread 1: reads s\[0\] \(shared, declared at prog.py:30\), "
                       r"written by thread 0 since the last barrier: a race, at prog.py:33"):
        checks.launch("shared_shift", 1, 64, 1, 0, 64, out)
    # after the barrier the last thread to arrive goes on first
    with pytest.raises(EmulatorLaunchError, match=r"thread 63: reads s\[62\] .*uninitialized shared memory, at "
                       r"prog.py:33"):
        checks.launch("shared_shift", 1, 64, 1, 1, 32, out)  # s[32:] is never written
    out[:] = 0
    checks.launch("shared_shift", 1, 64, 0, 0, 64, out)  # each thread reads its own write: no race
    np.testing.assert_array_equal(out, np.arange(64))


def test_syncwarp_orders_shared_accesses_of_one_warp(checks: EmulatorModule) -> None:
    out = np.zeros(32, np.float32)
    checks.launch("warp_handover", 1, 32, 1, out)
    np.testing.assert_array_equal(out, np.maximum(np.arange(32) - 1, 0))
    with pytest.raises(EmulatorLaunchError, match="thread 1: reads s.0. .*written by thread 0 since the last barrier"):
        checks.launch("warp_handover", 1, 32, 0, out)


def test_write_after_other_threads_read_is_a_race(checks: EmulatorModule) -> None:
    out = np.zeros(8, np.float32)
    checks.launch("write_after_reads", 1, 8, 1, out)
    assert (out == 5).all()
    with pytest.raises(EmulatorLaunchError, match=r"thread 1: writes s\[0\] .*read by thread 0 since the last "
                       r"barrier: a race, at prog.py:55"):
        checks.launch("write_after_reads", 1, 8, 0, out)


# ----------------------------------------------------------------------------------------------------
# Every primitive for every type: the same source runs on the emulator and compiles with NVRTC

INT_TYPES = ("int32_t", "uint32_t", "int64_t", "uint64_t")
FLOAT_TYPES = ("float", "double")
NUMPY = {"int32_t": np.int32, "uint32_t": np.uint32, "int64_t": np.int64, "uint64_t": np.uint64,
         "float": np.float32, "double": np.float64}


def _all_types_source() -> str:
    parts = [r"""
#include "hidet_lang/cuda_primitives.h"
"""]
    for t in INT_TYPES + FLOAT_TYPES:
        is_int = t in INT_TYPES
        body = [
            f"    {t} v = ({t})i;",
            "    hl_atomic_add(&p[0], v);",
            "    hl_atomic_sub(&p[1], v);",
            "    olds[i] = hl_atomic_exchange(&p[2], v);",
            "    sh[i] = hl_shfl_xor_sync(0xffffffffu, v, 1, 32) + hl_shfl_sync(0xffffffffu, v, 3) "
            "+ hl_shfl_up_sync(0xffffffffu, v, 1, 32) + hl_shfl_down_sync(0xffffffffu, v, 1);",
        ]
        if is_int:
            body += [
                f"    hl_atomic_min(&p[3], ({t})(v + 3));",
                f"    hl_atomic_max(&p[4], ({t})(v + 3));",
                f"    {t} seen = p[5];",
                "    for (;;) {",
                f"        {t} prev = hl_atomic_cas(&p[5], seen, ({t})(seen + 1));",
                "        if (prev == seen) break;",
                "        seen = prev;",
                "    }",
            ]
        parts.append(
            f'extern "C" __global__ void __launch_bounds__(64) all_{t}({t} *p, {t} *olds, {t} *sh) {{\n'
            "    int i = (int)threadIdx.x;\n" + "\n".join(body) + "\n}\n"
        )
    parts.append(r"""
extern "C" __global__ void __launch_bounds__(64) all_misc(float *out, uint32_t *bits) {
    int t = (int)threadIdx.x;
    half h = hl_shfl_sync(0xffffffffu, (half)1.5f, 0, 32);
    __nv_bfloat16 b = hl_shfl_down_sync(0xffffffffu, __float2bfloat16(2.5f), 1, 32);
    unsigned ballot = hl_ballot_sync(0xffffffffu, t & 1);
    int any = hl_any_sync(0xffffffffu, t == 3), all = hl_all_sync(0xffffffffu, t >= 0);
    hl_syncwarp(0xffffffffu);
    __syncthreads();
    int c = __syncthreads_count(t & 1) + __syncthreads_and(t >= 0) + __syncthreads_or(t == 0);
    float *dyn = (float *)(hl_dynamic_smem() + 0);
    dyn[t] = (float)h + __bfloat162float(b) + __half2float(__float2half(0.5f));
    __syncthreads();
    out[t] = dyn[63 - t] + expf(0.0f) + sqrtf(4.0f) + fmaxf(1.0f, 2.0f);
    bits[t] = ballot + (unsigned)(any + all + c);
    if (t == 70) {
        hl_assert_fail(7);
        return;
    }
}
""")
    return "".join(parts)


def test_every_primitive_for_every_type_on_the_emulator(tmp_path: Path) -> None:
    module = build_module(_all_types_source(), tmp_path, "all_types")
    n = 64
    i = np.arange(n)
    for t in INT_TYPES + FLOAT_TYPES:
        dt = NUMPY[t]
        p = np.array([0, 1000, 77, 1000, 0, 0], dtype=dt)
        olds, sh = np.zeros(n, dt), np.zeros(n, dt)
        module.launch(f"all_{t}", 1, n, p, olds, sh)
        v = i.astype(dt)
        assert p[0] == v.sum() and p[1] == np.array(1000 - int(i.sum())).astype(dt), t
        assert sorted([*olds.tolist(), p[2]]) == sorted([77, *v.tolist()]), t
        lane = i % 32
        up = np.where(lane >= 1, v - 1, v)
        down = np.where(lane <= 30, v + 1, v)
        expected = (i ^ 1).astype(dt) + (i - lane + 3).astype(dt) + up + down
        np.testing.assert_array_equal(sh, expected.astype(dt), err_msg=t)
        if t in INT_TYPES:
            assert p[3] == 3 and p[4] == n + 2 and p[5] == n, t
    out, bits = np.zeros(n, np.float32), np.zeros(n, np.uint32)
    module.launch("all_misc", 1, n, out, bits, smem=n * 4)
    np.testing.assert_array_equal(out, np.full(n, 1.5 + 2.5 + 0.5 + 1 + 2 + 2, np.float32))
    # ballot 0xaaaaaaaa, any (t == 3: warp 0 only), all, then count (32) + and (1) + or (1)
    np.testing.assert_array_equal(bits, (0xAAAAAAAA + (i < 32) + 1 + 32 + 1 + 1).astype(np.uint32))
    assert module.take_assert_line() == 0


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_gpu_branch_of_the_primitives_header_compiles_with_nvrtc(arch: str) -> None:
    cubin = compile_cubin(_all_types_source(), arch, include_dirs=[str(INCLUDE_DIR)])
    names = {symbol.name for symbol in read_symbols(cubin)}
    assert {f"all_{t}" for t in INT_TYPES + FLOAT_TYPES} | {"all_misc", "hl_assert_line"} <= names
