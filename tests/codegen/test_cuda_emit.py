"""Structural checks of the emitted CUDA C, and the errors CUDA programs get before anything runs."""

from __future__ import annotations

import pytest

import hidet_lang as hidet
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from hidet_lang import attrs, bf16, f16, f32, i32, repeat, spatial
from hidet_lang.cuda import blockIdx, shared_tensor, syncthreads, threadIdx
from hidet_lang.errors import DSLError
from hidet_lang.passes.pipeline import lower


def device_source(module) -> str:
    return emit_cuda(plan_module(lower(module.ir_module())))[0]


def kernel_body(source: str, name: str) -> str:
    """The text of kernel `name`'s definition."""
    start = source.index(f"void {name}(", source.index(f"void {name}(") + 1)
    return source[start:]


def mapping_kernel(block: int):
    with hidet.script_module() as module:

        @hidet.script
        def spread(out: f32[4, 32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = block
            attrs.cuda.grid_dim = 1
            for i, j in spatial(4, 32).on(threadIdx.x):
                out[i, j] = 1.0

    return kernel_body(device_source(module), "spread")


def test_spatial_mapping_over_thread_index_is_index_arithmetic_without_loop_or_guard() -> None:
    body = mapping_kernel(128)
    assert "for (" not in body
    assert "threadIdx.x" in body and "/ 32" in body and "% 32" in body
    assert "if (" not in body, "block_dim == workers: the guard is provably true"


def test_mapping_with_fewer_workers_than_threads_keeps_its_guard() -> None:
    body = mapping_kernel(256)
    assert "if (" in body and "< 128" in body


def test_repeat_with_unroll_attrs_lowers_to_an_unrolled_loop() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def tile(out: f32[8, 4]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 8
            attrs.cuda.grid_dim = 1
            for i, j in (spatial(8, 1) * repeat(1, 4, attrs=".u")).on(threadIdx.x):
                out[i, j] = 2.0

    body = kernel_body(device_source(module), "tile")
    assert body.count("for (") == 2
    pragma_at = body.index("#pragma unroll")
    assert body.index("for (", pragma_at) < body.index("\n", body.index("\n", pragma_at) + 1)


def test_shared_memory_launch_bounds_and_barrier() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def staged(a: f32[256], b: f32[256]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = 2
            attrs.cuda.min_blocks = 2
            buf = shared_tensor(f32, [128])
            buf[threadIdx.x] = a[blockIdx.x * 128 + threadIdx.x]
            syncthreads()
            b[blockIdx.x * 128 + threadIdx.x] = buf[127 - threadIdx.x]

    device, host = emit_cuda(plan_module(lower(module.ir_module())))
    assert "__launch_bounds__(128, 2)" in device
    assert "__shared__ float buf[128];" in device
    assert "__syncthreads();" in device
    assert "launch_staged(" in host and "hl_launch(0, &info" in host


def error_line(excinfo: pytest.ExceptionInfo) -> int:
    return excinfo.value.span.line


def line_of(marker: str) -> int:
    with open(__file__) as f:
        for number, text in enumerate(f, 1):
            if marker in text and "line_of(" not in text:
                return number
    raise AssertionError(marker)


def test_half_precision_scalars_reach_the_kernel_as_16_bit_values() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def halves(v: f16, w: bf16, out: f16[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            out[threadIdx.x] = v + f16(float(w))

    device, host = emit_cuda(plan_module(lower(module.ir_module())))
    # the kernel's parameters are 2 bytes, as the launcher's argument array holds them (ctypes passes floats,
    # which only the host launcher converts)
    assert "void halves(half v, __nv_bfloat16 w, half * out)" in device
    assert "void launch_halves(float v_f32, float w_f32, " in host
    assert "_Float16 v = (_Float16)v_f32;" in host and "uint16_t w = hl_bf16_bits(w_f32);" in host


def test_block_dim_over_1024_threads_is_an_error_at_the_attribute() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def too_big(a: f32[16]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = (64, 32)  # MARK: block-too-big
            attrs.cuda.grid_dim = 1
            a[0] = 1.0

    with pytest.raises(DSLError, match="2048 threads") as excinfo:
        module.build()
    assert error_line(excinfo) == line_of("MARK: block-too-big")


def test_grid_dim_of_zero_is_an_error_at_the_attribute() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def empty_grid(a: f32[16]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 0  # MARK: grid-zero
            a[0] = 1.0

    with pytest.raises(DSLError, match=r"grid_dim.x = 0") as excinfo:
        module.build()
    assert error_line(excinfo) == line_of("MARK: grid-zero")


def test_static_shared_memory_over_48_kb_is_an_error_at_the_declaration() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def hungry(a: f32[16]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            small = shared_tensor(f32, [1024])
            big = shared_tensor(f32, [12 * 1024])  # MARK: smem-too-big
            small[0] = big[0]

    with pytest.raises(DSLError, match="shared memory") as excinfo:
        module.build()
    assert error_line(excinfo) == line_of("MARK: smem-too-big")


def test_thread_index_in_a_cpu_function_is_an_error_at_that_line() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def cpu_func(a: f32[16]):
            attrs.func_kind = "public"
            a[threadIdx.x] = 1.0  # MARK: thread-in-cpu

    with pytest.raises(DSLError, match="threadIdx.x is a CUDA construct") as excinfo:
        module.build()
    assert error_line(excinfo) == line_of("MARK: thread-in-cpu")


def test_parallel_loop_in_a_kernel_is_an_error_at_that_line() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def openmp_in_kernel(a: f32[16]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 1
            attrs.cuda.grid_dim = 1
            for i in hidet.grid(16, attrs="p"):  # MARK: parallel-in-kernel
                a[i] = 0.0

    with pytest.raises(DSLError, match="parallel loops") as excinfo:
        module.build()
    assert error_line(excinfo) == line_of("MARK: parallel-in-kernel")


def test_kernel_without_launch_configuration_is_an_error() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def unconfigured(a: f32[16]):
            attrs.func_kind = "cuda_kernel"
            a[0] = 1.0

    with pytest.raises(DSLError, match="attrs.cuda.grid_dim and attrs.cuda.block_dim"):
        module.build()

def test_host_function_of_a_cuda_module_cannot_touch_device_data() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def fill(n: i32, a: f32[n]):  # noqa: F821 - `n` is the parameter
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = (n + 31) // 32
            i = blockIdx.x * 32 + threadIdx.x
            if i < n:
                a[i] = 1.0

        @hidet.script
        def host(n: i32, a: f32[n]):  # noqa: F821
            attrs.func_kind = "public"
            fill(n, a)
            a[0] = 2.0  # MARK: host-touches-device

    with pytest.raises(DSLError, match="live on the device") as excinfo:
        module.build()
    assert error_line(excinfo) == line_of("MARK: host-touches-device")
