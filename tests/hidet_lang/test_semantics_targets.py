"""Inline PTX refused where it cannot run is a DSLTypeError ("not supported") at its line, like every other
construct a target or kind does not allow; Python helpers called in a kernel store into its tensors."""

import numpy as np
import pytest
from semantics_checks import assert_error_at_marker

import hidet_lang as hidet
from hidet_lang import asm, attrs, cuda, f32, i32
from hidet_lang.errors import DSLSyntaxError, DSLTypeError, DSLValueError


def ptx_on_the_emulator() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def lane_ids(out: i32[32]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            lane: i32 = 0
            asm("mov.u32 %0, %%laneid;", outputs=[lane], is_volatile=True)  # ERROR
            out[cuda.threadIdx.x] = lane
    module.build()


def ptx_on_the_cpu() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def lane_ids(out: i32[32]):
            attrs.func_kind = "cpu_kernel"
            lane: i32 = 0
            asm("mov.u32 %0, %%laneid;", outputs=[lane])  # ERROR
            out[0] = lane
    module.build("cpu")


def test_inline_ptx_on_the_emulator_is_not_supported_error() -> None:
    from codegen.runtime.cuda_backend import backend

    if backend() != "emulator":
        pytest.skip("the emulator's refusal of inline PTX; CUDA modules build for a GPU here")
    error = assert_error_at_marker(ptx_on_the_emulator, DSLTypeError, "not supported on this target")
    assert not isinstance(error, DSLSyntaxError)


def test_inline_ptx_on_the_cpu_is_not_supported_error() -> None:
    error = assert_error_at_marker(ptx_on_the_cpu, DSLTypeError, "not supported on the CPU")
    assert not isinstance(error, DSLSyntaxError)


def noinline_in_cuda() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def lane_id() -> i32:  # ERROR
            attrs.func_kind = "cuda_internal"
            attrs.noinline = True
            return cuda.threadIdx.x

        @hidet.script
        def lane_ids(out: i32[32]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            out[cuda.threadIdx.x] = lane_id()
    module.build()


def test_noinline_is_refused_in_cuda_functions() -> None:
    """CUDA device functions are always inlined; `attrs.noinline` is for CPU functions."""
    assert_error_at_marker(noinline_in_cuda, DSLValueError, "attrs.noinline applies to CPU functions")


def store_scaled(buf: object, i: object, v: object) -> None:
    """A Python helper that stores: `buf[i] = 2 * v` and `buf[i] += 1`."""
    buf[i] = 2.0 * v  # type: ignore[index]
    buf[i] += 1.0  # type: ignore[index]


def test_a_helper_stores_into_a_cpu_kernel_tensor() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def kernel(x: f32[8], out: f32[8]):
            attrs.func_kind = "cpu_kernel"
            for i in range(8):
                store_scaled(out, i, x[i])
    x = np.arange(8, dtype=np.float32)
    out = np.zeros(8, np.float32)
    module.build("cpu")(x, out)
    np.testing.assert_array_equal(out, 2 * x + 1)


def test_a_helper_stores_into_a_cuda_kernel_tensor() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def kernel(x: f32[32], out: f32[32]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            store_scaled(out, cuda.threadIdx.x, x[cuda.threadIdx.x])
    x = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    module.build()(x, out)
    np.testing.assert_array_equal(out, 2 * x + 1)


def stores_then_returns(buf: object, i: object) -> object:
    buf[i] = 1.0  # type: ignore[index]
    return i


def storing_helper_in_an_expression() -> None:
    @hidet.script
    def kernel(out: f32[8], idx: i32[8]):
        attrs.func_kind = "cpu_kernel"
        for i in range(8):
            idx[i] = stores_then_returns(out, i) + 1  # ERROR


def test_a_storing_helper_inside_an_expression_is_an_error_at_the_call() -> None:
    assert_error_at_marker(storing_helper_in_an_expression, DSLTypeError,
                           "stores_then_returns() stores into a tensor, so it must be called as a statement")


def warp_shuffle_on_the_cpu() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def total(x: f32[32], out: f32[1]):
            attrs.func_kind = "cpu_kernel"
            out[0] = cuda.shfl_xor_sync(cuda.FULL_MASK, x[0], 1)  # ERROR
    module.build("cpu")


def test_a_cuda_intrinsic_in_a_cpu_function_is_refused_at_its_line() -> None:
    error = assert_error_at_marker(warp_shuffle_on_the_cpu, DSLTypeError, "shfl_xor_sync is a CUDA construct and "
                                   "'total' is a 'cpu_kernel' function")
    assert not isinstance(error, DSLSyntaxError)


def float_compare_and_swap() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def swap(x: f32[32]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            cuda.atomic_cas(~x[cuda.threadIdx.x], 0.0, 1.0)  # ERROR
    module.build()


def test_an_atomic_on_a_type_it_does_not_take_is_refused_at_its_line() -> None:
    """The element types an atomic takes are the intrinsic table's: compare-and-swap takes integers (the GPU and
    the emulator have no float one)."""
    assert_error_at_marker(float_compare_and_swap, DSLTypeError, "atomic_cas is not available for f32")


def async_copy_before_ampere() -> None:
    with hidet.script_module() as module:
        @hidet.script
        def stage(x: f32[32], out: f32[32]):
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            tile = cuda.shared_tensor(f32, [32])
            cuda.cp_async(~tile[cuda.threadIdx.x], ~x[cuda.threadIdx.x], 4)  # ERROR
            cuda.cp_async_wait_all()
            out[cuda.threadIdx.x] = tile[cuda.threadIdx.x]
    module.build("cuda:sm_75")


def test_an_intrinsic_newer_than_the_target_architecture_is_refused_at_its_line() -> None:
    """On a GPU and on the emulator alike: the intrinsic table's minimum architecture of `cp_async` is sm_80."""
    assert_error_at_marker(async_copy_before_ampere, DSLTypeError, "cp_async_4 needs CUDA architecture sm_80 or "
                           "later, and the module is built for sm_75; build it with target='cuda:sm_80'")
