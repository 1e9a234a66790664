"""The programs of API.md §1-§3 and §5 (the parts that exist), run as written."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings

import hidet_lang as hidet
import hidet_lang.testing
from hidet_lang import attrs, f32, i32
from hidet_lang.testing import example_count


def test_section_1_a_cpu_function() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def launch(a: f32[1024], b: f32[1024], c: f32[1024]):
            attrs.func_kind = "public"  # host-callable; compiled for the CPU
            for i in range(1024):
                c[i] = a[i] + b[i]

    m = module.build()  # target inferred from the function kinds: here 'cpu'
    a, b = np.random.rand(2, 1024).astype(np.float32)
    c = np.empty(1024, np.float32)
    m(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    c[:] = 0
    m["launch"](a, b, c)
    np.testing.assert_array_equal(c, a + b)
    assert "void launch(float * a, float * b, float * c)" in m.source()
    assert m.target == hidet.target.Target.of("cpu")


def test_section_1_runtime_sizes_through_pointers() -> None:
    from hidet_lang import tensor_pointer

    with hidet.script_module() as module:

        @hidet.script
        def saxpy(n: i32, a: f32, x: ~f32, y: ~f32):
            attrs.func_kind = "public"
            xs = tensor_pointer(f32, [n], init=x)
            ys = tensor_pointer(f32, [n], init=y)
            for i in range(n):
                ys[i] = a * xs[i] + ys[i]

    x, y = np.random.rand(2, 33).astype(np.float32)
    expected = np.float32(2.0) * x + y
    module.build()(33, 2.0, x, y)
    np.testing.assert_array_equal(y, expected)  # 2 * x is exact, so fused or not the one rounding is the same


def test_section_2_a_cuda_kernel() -> None:
    from hidet_lang.cuda import blockIdx, threadIdx

    with hidet.script_module() as module:

        @hidet.script
        def vec_add(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = (n + 127) // 128  # may use parameters
            i = blockIdx.x * 128 + threadIdx.x
            if i < n:
                c[i] = a[i] + b[i]

    m = module.build()
    n = 1000
    a, b = np.random.rand(2, n).astype(np.float32)
    c = np.empty(n, np.float32)
    m(n, a, b, c)  # runs on the GPU if there is one, else on the CUDA emulator
    np.testing.assert_array_equal(c, a + b)
    assert 'extern "C" __global__' in m.source()
    assert m.cubin[:4] == b"\x7fELF"
    assert module.build(target="cuda:sm_90").cubin[:4] == b"\x7fELF"
    x = hidet.randn([16, 16], device="cuda")
    np.testing.assert_array_equal(hidet.asarray(x.numpy(), device="cuda").numpy(), x.numpy())


def test_section_3_task_mappings() -> None:
    from hidet_lang import auto_map, grid, register_tensor, repeat, spatial
    from hidet_lang.cuda import shared_tensor, threadIdx

    m = spatial(4, 8) * repeat(2, 2)  # 32 workers; task shape (8, 16); same as spatial(4, 8).repeat(2, 2)
    assert m.num_workers == 32 and m.task_shape == (8, 16)
    assert m(5) == [(0, 10), (0, 11), (1, 10), (1, 11)]
    assert m == spatial(4, 8).repeat(2, 2)
    picture = m.visualize().splitlines()  # a header, the column numbers, a rule, then one row of workers a row
    assert picture[0] == "spatial(4, 8) * repeat(2, 2): 32 worker(s), task shape (8, 16)"
    assert picture[3] == "0 |  0  0  1  1  2  2  3  3  4  4  5  5  6  6  7  7"  # worker 5 has columns 10 and 11
    assert len(picture) == 3 + 8

    with hidet.script_module() as module:

        @hidet.script
        def kernel(a: f32[64, 8], out: f32[8, 16], total: f32[1]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = 1
            smem_a = shared_tensor(f32, [64, 8])
            acc = register_tensor(f32, [4, 4])
            for i, k in auto_map(64, 8, workers=128).on(threadIdx.x):
                smem_a[i, k] = a[i, k]
            for i, j in grid(4, 4):
                acc[i, j] = 0.0
            for i, j in m.on(threadIdx.x):  # each thread runs the body for each of its tasks
                out[i, j] = f32(threadIdx.x)
            if threadIdx.x == 0:
                total[0] = 0.0

    a = np.random.rand(64, 8).astype(np.float32)
    out, total = np.full((8, 16), -1, np.float32), np.ones(1, np.float32)
    module.build()(a, out, total)
    for w in range(32):
        for i, j in m(w):
            assert out[i, j] == w
    assert (out >= 0).all(), "every element is some worker's task"
    assert total[0] == 0.0  # written by thread 0 (it held 1.0 before)


@settings(max_examples=example_count(20), deadline=None)
@given(hidet.testing.arrays(dtype="float32", shape=hidet.testing.shapes(min_dims=1, max_dims=3)))
def test_section_5_strategies_and_check_kernel(x: np.ndarray) -> None:
    size = x.size

    def relu_reference(inp: np.ndarray, out: np.ndarray) -> None:
        out[...] = np.maximum(inp, 0)

    flat = x.reshape(-1)
    with hidet.script_module() as module:

        @hidet.script
        def relu(inp: f32[size], out: f32[size]):
            attrs.func_kind = "public"
            for i in range(size):
                out[i] = inp[i] if inp[i] > 0.0 else 0.0

    hidet.testing.check_kernel(module.build(), relu_reference, flat, np.zeros_like(flat))
