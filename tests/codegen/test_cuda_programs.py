"""CUDA programs written in the DSL, run where CUDA modules run (the GPU, else the emulator), against numpy."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f16, f32, i32, spatial
from hidet_lang import errors as hidet_lang_errors
from hidet_lang.cuda import (
    atomic_add,
    blockDim,
    blockIdx,
    dynamic_shared_memory,
    shared_tensor,
    shfl_down_sync,
    shfl_xor_sync,
    syncthreads,
    syncthreads_count,
    threadIdx,
)
from hidet_lang.testing import arrays, example_count

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

with hidet.script_module() as vec_module:

    @hidet.script
    def vec_add(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 128
        attrs.cuda.grid_dim = (n + 127) // 128  # MARK: vec-grid
        i = blockIdx.x * 128 + threadIdx.x
        if i < n:
            c[i] = a[i] + b[i]


vec = vec_module.build()


@settings(max_examples=example_count(25), deadline=None)
@given(arrays("float32", st.integers(1, 700).map(lambda n: (2, n))))
def test_vector_add(ab: np.ndarray) -> None:
    a, b = ab
    c = np.full_like(a, np.nan)
    vec(len(a), a.copy(), b.copy(), c)
    np.testing.assert_array_equal(c, a + b)


def test_vector_add_with_cuda_arrays() -> None:
    a, b = hidet.randn([300], device="cuda"), hidet.randn([300], device="cuda")
    c = hidet.zeros([300], device="cuda")
    vec(300, a, b, c)
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())


def test_the_cuda_matmul_example() -> None:
    sys.path.insert(0, str(EXAMPLES))
    import cuda_matmul

    built = cuda_matmul.module.build()
    for m, n, k in ((1, 1, 1), (65, 63, 9), (130, 70, 45)):
        a = np.random.randn(m, k).astype(np.float32)
        b = np.random.randn(k, n).astype(np.float32)
        c = np.zeros((m, n), np.float32)
        built(m, n, k, a, b, c)
        # float32 sums of k products in another order than numpy's BLAS
        np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5 * k)


with hidet.script_module() as reduce_module:

    @hidet.script
    def block_sum(n: i32, x: f32[n], sums: f32[n // 256 + 1], positive: i32[n // 256 + 1]):  # noqa: F821
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = n // 256 + 1
        partial = shared_tensor(f32, [8])
        i = blockIdx.x * 256 + threadIdx.x
        v = x[i] if i < n else 0.0
        count = syncthreads_count(v > 0.0)
        for offset in (16, 8, 4, 2, 1):
            v += shfl_down_sync(0xFFFFFFFF, v, offset)
        if threadIdx.x % 32 == 0:
            partial[threadIdx.x / 32] = v
        syncthreads()
        if threadIdx.x < 32:
            w = partial[threadIdx.x] if threadIdx.x < 8 else 0.0
            for mask in (4, 2, 1):
                w += shfl_xor_sync(0xFFFFFFFF, w, mask)
            if threadIdx.x == 0:
                sums[blockIdx.x] = w
                positive[blockIdx.x] = count


def _block_sum_reference(padded: np.ndarray) -> np.ndarray:
    """block_sum's float32 additions in its order (shuffle-down within each warp, then xor across the 8 warp
    sums), so the result is bitwise equal."""
    lanes = np.arange(32)
    v = padded.reshape(len(padded), 8, 32)
    for offset in (16, 8, 4, 2, 1):  # a lane whose source is past the warp's end gets its own value
        v = v + v[..., np.where(lanes + offset < 32, lanes + offset, lanes)]
    w = np.zeros((len(padded), 32), np.float32)
    w[:, :8] = v[..., 0]
    for mask in (4, 2, 1):
        w = w + w[:, lanes ^ mask]
    return w[:, 0]


def test_block_reduction_with_shuffles_and_barrier_votes() -> None:
    built = reduce_module.build()
    for n in (1, 255, 256, 1000):
        x = np.random.randn(n).astype(np.float32)
        blocks = n // 256 + 1
        sums, positive = np.zeros(blocks, np.float32), np.zeros(blocks, np.int32)
        built["block_sum"](n, x, sums, positive)
        padded = np.concatenate([x, np.zeros(blocks * 256 - n, np.float32)]).reshape(blocks, 256)
        np.testing.assert_array_equal(sums, _block_sum_reference(padded))
        np.testing.assert_array_equal(positive, (padded > 0).sum(axis=1))


with hidet.script_module() as hist_module:

    @hidet.script
    def histogram(n: i32, values: i32[n], hist: i32[16], total: f32[1]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = (n + 63) // 64
        i = blockIdx.x * blockDim.x + threadIdx.x
        if i < n:
            atomic_add(~hist[values[i] % 16], 1)
            atomic_add(~total[0], 0.5)


@settings(max_examples=example_count(15), deadline=None)
@given(arrays("int32", st.integers(1, 500).map(lambda n: (n,)), elements=st.integers(0, 1000)))
def test_atomic_histogram(values: np.ndarray) -> None:
    hist, total = np.zeros(16, np.int32), np.zeros(1, np.float32)
    hist_module.build()(len(values), values, hist, total)
    np.testing.assert_array_equal(hist, np.bincount(values % 16, minlength=16))
    assert total[0] == 0.5 * len(values)  # exact: sums of 0.5 up to 250 are representable


with hidet.script_module() as pipeline_module:

    @hidet.script
    def reverse_tiles(x: f32[512], y: f32[512]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 128
        attrs.cuda.grid_dim = 4
        attrs.cuda.dynamic_smem_bytes = 128 * 4
        buf = dynamic_shared_memory(0, f32)
        buf[threadIdx.x] = x[blockIdx.x * 128 + threadIdx.x]
        syncthreads()
        y[blockIdx.x * 128 + threadIdx.x] = buf[127 - threadIdx.x]

    @hidet.script
    def scale(k: f16, y: f32[512]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 16
        for i in spatial(512).on(blockIdx.x * 32 + threadIdx.x):
            y[i] = f32(f16(y[i]) * k)

    @hidet.script
    def reverse_then_scale(x: f32[512], y: f32[512]):
        attrs.func_kind = "public"
        reverse_tiles(x, y)
        scale(2.0, y)


def test_public_function_launches_kernels_in_order() -> None:
    x = np.random.randn(512).astype(np.float32)
    y = np.zeros(512, np.float32)
    pipeline_module.build()(x, y)
    expected = x.reshape(4, 128)[:, ::-1].reshape(-1).astype(np.float16) * np.float16(2)
    np.testing.assert_array_equal(y, expected.astype(np.float32))


def test_launch_with_a_zero_grid_from_a_parameter_is_an_error_naming_the_kernel_and_attribute_line() -> None:
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "MARK: vec-grid" in text)
    with pytest.raises(RuntimeError, match=rf"test_cuda_programs.py:{line}: kernel 'vec_add': grid_dim \(0, 1, 1\)"):
        vec(0, np.zeros(0, np.float32), np.zeros(0, np.float32), np.zeros(0, np.float32))


with hidet.script_module() as assert_module:

    @hidet.script
    def checked(n: i32, a: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        assert a[threadIdx.x] >= 0.0, "negative input"
        a[threadIdx.x] = 1.0


def test_device_assertion_is_an_assertion_error_after_the_call() -> None:
    built = assert_module.build()
    a = np.ones(32, np.float32)
    built(32, a)
    a[5] = -1.0
    with pytest.raises(AssertionError, match="negative input"):
        built(32, a)
    built(32, np.ones(32, np.float32))  # the failure was reported once, not carried over


def bf16_bits(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to bfloat16 (nearest even), as raw bits."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.astype(np.uint32) << 16).view(np.float32)


with hidet.script_module() as bf16_module:

    @hidet.script
    def bf16_fma(a: hidet.bf16[64], b: hidet.bf16[64], scale: hidet.bf16, c: hidet.bf16[64]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = 1
        c[threadIdx.x] = a[threadIdx.x] * b[threadIdx.x] * scale


def test_bf16_kernel_with_raw_bits_on_the_host() -> None:
    a, b = bf16_bits(np.random.randn(64)), bf16_bits(np.random.randn(64))
    c = np.zeros(64, np.uint16)
    bf16_module.build()(a, b, 0.5, c)
    # each bf16 operation rounds its float result to bf16 once, as the GPU's operators do
    expected = bf16_bits(bf16_values(bf16_bits(bf16_values(a) * bf16_values(b))) * np.float32(0.5))
    np.testing.assert_array_equal(c, expected)


def test_bf16_in_the_host_code_of_a_cuda_module_is_an_error_at_the_parameter() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def kernel(a: f32[4]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim, attrs.cuda.block_dim = 1, 1
            a[0] = a[1]

        @hidet.script
        def cpu_bf16(a: hidet.bf16[4]):
            attrs.func_kind = "public"
            a[0] = a[1]

    with pytest.raises(hidet_lang_errors.DSLTypeError, match="bf16 is not supported in the host code") as excinfo:
        module.build()
    assert excinfo.value.span is not None and excinfo.value.span.line == cpu_bf16.ir.params[0].span.line


with hidet.script_module() as big_smem_module:

    @hidet.script
    def through_shared(n: i32, x: f32[256], y: f32[256]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 256
        attrs.cuda.grid_dim = 1
        attrs.cuda.dynamic_smem_bytes = n * 4  # MARK: big-smem
        fixed = shared_tensor(f32, [1024])  # 4 KB of static shared memory
        buf = dynamic_shared_memory(0, f32)
        fixed[threadIdx.x] = x[threadIdx.x]
        buf[n - 1 - threadIdx.x] = fixed[threadIdx.x] * 2.0
        syncthreads()
        y[threadIdx.x] = buf[n - 256 + threadIdx.x]


@pytest.mark.skipif(backend() != "emulator", reason="on a GPU the limit is the device's")
def test_shared_memory_is_limited_by_the_target_architecture() -> None:
    x = np.random.randn(256).astype(np.float32)
    sm80_floats = (163 * 1024 - 4096) // 4  # sm_80: 163 KB a block, static and dynamic together
    y = np.zeros(256, np.float32)
    big_smem_module.build(target="cuda:sm_80")(sm80_floats, x, y)
    np.testing.assert_array_equal(y, 2 * x[::-1])
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "MARK: big-smem" in text)
    with pytest.raises(RuntimeError, match=rf"test_cuda_programs.py:{line}: kernel 'through_shared': 4096 bytes of "
                       rf"static shared memory \+ dynamic_smem_bytes {4 * sm80_floats + 4} exceed the 166912 bytes"):
        big_smem_module.build(target="cuda:sm_80")(sm80_floats + 1, x, y)
    y = np.zeros(256, np.float32)
    big_smem_module.build(target="cuda:sm_90")(sm80_floats + 1, x, y)  # sm_90: 227 KB
    np.testing.assert_array_equal(y, 2 * x[::-1])
    with pytest.raises(RuntimeError, match="exceed the 166912 bytes"):  # each target keeps its own limit
        big_smem_module.build(target="cuda:sm_80")(sm80_floats + 1, x, y)
