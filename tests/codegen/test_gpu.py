"""CUDA kernels on a real GPU against numpy (skipped where no CUDA GPU is usable)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import blockIdx, dynamic_shared_memory, syncthreads, threadIdx

pytestmark = pytest.mark.gpu

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def vector_add_module():
    with hidet.script_module() as module:

        @hidet.script
        def vec_add(n: i32, a: f32[n], b: f32[n], c: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = (n + 127) // 128
            i = blockIdx.x * 128 + threadIdx.x
            if i < n:
                c[i] = a[i] + b[i]

    return module.build()


def test_vector_add_with_numpy_arguments_is_copied_to_and_from_the_device() -> None:
    built = vector_add_module()
    assert built.target.is_cuda and not built.target.emulated
    n = 1000
    a, b = np.random.rand(2, n).astype(np.float32)
    c = np.zeros(n, np.float32)
    built(n, a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_vector_add_with_device_arrays() -> None:
    built = vector_add_module()
    n = 4097
    a = hidet.randn([n], device="cuda")
    b = hidet.randn([n], device="cuda")
    c = hidet.empty([n], device="cuda")
    built(n, a, b, c)
    np.testing.assert_array_equal(c.numpy(), a.numpy() + b.numpy())


def test_tiled_matmul_example_on_the_gpu() -> None:
    sys.path.insert(0, str(EXAMPLES))
    import cuda_matmul

    built = cuda_matmul.module.build()
    m, n, k = 130, 70, 45
    a = np.random.randn(m, k).astype(np.float32)
    b = np.random.randn(k, n).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    built(m, n, k, a, b, c)
    # float32 sums of k products in another order than numpy's BLAS
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5 * k)


def test_public_function_launching_two_kernels_and_large_dynamic_shared_memory() -> None:
    words = 16 * 1024  # 64 KB of dynamic shared memory: needs the opt-in attribute

    with hidet.script_module() as module:

        @hidet.script
        def reverse_block(x: f32[1024], y: f32[1024]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 1024
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = words * 4
            buf = dynamic_shared_memory(0, f32)
            buf[threadIdx.x * 16] = x[threadIdx.x]
            syncthreads()
            y[threadIdx.x] = buf[(1023 - threadIdx.x) * 16]

        @hidet.script
        def twice(x: f32[1024], y: f32[1024], z: f32[1024]):
            attrs.func_kind = "public"
            reverse_block(x, y)
            reverse_block(y, z)

    x = np.random.rand(1024).astype(np.float32)
    y, z = np.zeros(1024, np.float32), np.zeros(1024, np.float32)
    module.build()(x, y, z)
    np.testing.assert_array_equal(y, x[::-1])
    np.testing.assert_array_equal(z, x)


def test_illegal_address_is_a_python_exception_naming_the_driver_error(tmp_path) -> None:
    program = textwrap.dedent("""
        import numpy as np
        import hidet_lang as hidet
        from hidet_lang import attrs, f32, i64
        from hidet_lang.cuda import threadIdx

        with hidet.script_module() as module:
            @hidet.script
            def wild(a: f32[4], offset: i64):
                attrs.func_kind = "cuda_kernel"
                attrs.cuda.block_dim = 1
                attrs.cuda.grid_dim = 1
                a[offset] = 1.0

        try:
            module.build()(np.zeros(4, np.float32), 1 << 40)
        except RuntimeError as e:
            print("raised:", e)
    """)
    script = tmp_path / "wild.py"
    script.write_text(program)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert "raised:" in done.stdout and "CUDA_ERROR_ILLEGAL_ADDRESS" in done.stdout, done.stdout + done.stderr


def test_device_assertion_on_the_gpu_is_an_assertion_error() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def checked(a: f32[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            assert a[threadIdx.x] >= 0.0, "negative input"

    built = module.build()
    built(np.ones(32, np.float32))
    with pytest.raises(AssertionError, match="negative input"):
        built(-np.ones(32, np.float32))
    built(np.ones(32, np.float32))
