"""Read-only arrays for tensor parameters: accepted for a parameter the function only reads (on the CPU, on the CUDA
emulator, in a GPU call), and refused before any code runs, naming the parameter, for one it may write: by a store,
through a pointer to one of its elements, through an atomic, by a function it is passed to, by a kernel that a
public function launches with it, or as an output of inline PTX."""

from __future__ import annotations

import dataclasses
import os
import traceback
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis.extra.numpy import arrays
from hypothesis.strategies import floats

import hidet_lang as hidet
from codegen.runtime import cuda_driver
from codegen.runtime.aliasing import written_array_params
from codegen.runtime.argument_checks import read_only_message
from codegen.runtime.arguments import make_caller
from hidet_lang import asm, attrs, f32, i32
from hidet_lang.cuda import atomic_add, threadIdx
from hidet_lang.testing import example_count

N = 37
TARGETS = pytest.mark.parametrize("target", ["cpu", "cuda"])  # 'cuda': a GPU where there is one, else the emulator


def read_only(array: np.ndarray) -> np.ndarray:
    """A read-only copy of `array`."""
    copy = array.copy()
    copy.flags.writeable = False
    return copy


def axpy_module(target: str) -> hidet.ScriptModule:
    """out = alpha * x + y (x and y only read) as a CPU function or a CUDA kernel; a CPU call counts itself in
    calls[0], so a test sees that no code ran."""
    with hidet.script_module() as module:
        if target == "cpu":

            @hidet.script
            def axpy(calls: i32[1], alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
                attrs.func_kind = "public"
                calls[0] += 1
                for i in range(N):
                    out[i] = alpha * x[i] + y[i]
        else:

            @hidet.script
            def axpy(calls: i32[1], alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
                attrs.cuda.grid_dim = 1
                attrs.cuda.block_dim = 64
                i = threadIdx.x
                if i == 0:
                    calls[0] += 1
                if i < N:
                    out[i] = alpha * x[i] + y[i]

    return module


AXPY = {target: axpy_module(target) for target in ("cpu", "cuda")}
VALUES = arrays(np.float32, N, elements=floats(-4, 4, width=32))


@TARGETS
@settings(max_examples=example_count(5), deadline=None)
@given(x=VALUES, y=VALUES, alpha=floats(-4, 4, width=32))
def test_read_only_arrays_for_parameters_the_function_only_reads(target: str, x: np.ndarray, y: np.ndarray,
                                                                 alpha: float) -> None:
    built = AXPY[target].build()
    calls, out = np.zeros(1, np.int32), np.zeros(N, np.float32)
    built(calls, alpha, read_only(x), read_only(y), out)
    want = np.float32(alpha) * x + y
    np.testing.assert_allclose(out, want, rtol=2**-23, atol=2**-20)  # one rounding, or a fused multiply-add
    shared = read_only(x)  # one read-only array for both read parameters
    built(calls, alpha, shared, shared, out)
    np.testing.assert_allclose(out, np.float32(alpha) * x + x, rtol=2**-23, atol=2**-20)
    assert calls[0] == 2


@TARGETS
@pytest.mark.parametrize("param", ["calls", "out"])
def test_a_read_only_array_for_a_written_parameter_is_refused(target: str, param: str) -> None:
    x = np.arange(N, dtype=np.float32)
    args = {"calls": np.zeros(1, np.int32), "x": x, "y": x, "out": np.zeros(N, np.float32)}
    args[param] = read_only(args[param])
    with pytest.raises(ValueError) as refused:
        AXPY[target].build()(args["calls"], 2.0, args["x"], args["y"], args["out"])  # the user's line
    assert str(refused.value) == read_only_message("axpy", param)
    assert args["calls"][0] == 0 and not args["out"].any()  # no code ran
    user, *runtime = traceback.extract_tb(refused.value.__traceback__)
    assert user.line.endswith("# the user's line") and [(Path(f.filename).name, f.name) for f in runtime] == [
        ("module.py", "__call__")]


def written_names(script: object, *module: object) -> set[str]:
    """The names of the parameters that `written_array_params` finds written in the script function (following
    calls into the other script functions `module`)."""
    functions = {f.ir.name: f.ir for f in (script, *module)}
    return {p.name for p in written_array_params(script.ir, functions)}


def assert_refused_then_written(built: object, func: str, param: str, args: dict[str, np.ndarray],
                                want: np.ndarray) -> None:
    """`built` refuses a read-only array for `param` (naming it), leaving every argument as it was, and with a
    writeable one writes `want` into it: the write the refusal guards against happens."""
    before = {name: array.copy() for name, array in args.items()}
    with pytest.raises(ValueError) as refused:
        built(*[read_only(a) if name == param else a for name, a in args.items()])
    assert str(refused.value) == read_only_message(func, param)
    for name, array in args.items():
        np.testing.assert_array_equal(array, before[name])
    built(*args.values())
    np.testing.assert_array_equal(args[param], want)


def test_a_parameter_passed_to_a_function_that_writes_it_is_written() -> None:
    """Through two calls: `a` reaches a store, `src` only element reads."""
    with hidet.script_module() as module:

        @hidet.script
        def fill(v: f32[4], values: f32[4]):
            attrs.func_kind = "cpu_internal"
            for i in range(4):
                v[i] = values[i] + 1.0

        @hidet.script
        def middle(v: f32[4], values: f32[4]):
            attrs.func_kind = "cpu_internal"
            fill(v, values)

        @hidet.script
        def entry(a: f32[4], src: f32[4]):
            attrs.func_kind = "public"
            middle(a, src)

    assert written_names(entry, middle, fill) == {"a"}
    assert written_names(entry) == {"a", "src"}  # calls of functions it cannot see may write any argument
    src = np.array([3, 1, 4, 1], np.float32)
    built = module.build()
    assert_refused_then_written(built, "entry", "a", {"a": np.zeros(4, np.float32), "src": src}, src + 1)
    a = np.zeros(4, np.float32)
    built(a, read_only(src))
    np.testing.assert_array_equal(a, src + 1)


def test_a_parameter_passed_to_a_recursive_call_counts_as_written() -> None:
    """A call back into a function being analysed may write its arguments: `v`, only read here, counts as written
    once `helper` names the function itself."""
    with hidet.script_module():

        @hidet.script
        def helper(v: f32[4], out: f32[4]):
            attrs.func_kind = "cpu_internal"
            out[0] = v[0]

        @hidet.script
        def walk(v: f32[4], out: f32[4]):
            attrs.func_kind = "cpu_internal"
            out[1] = v[1]
            helper(v, out)

    assert {p.name for p in written_array_params(walk.ir, {"helper": helper.ir})} == {"out"}
    itself = dataclasses.replace(walk.ir, name="helper")  # calls helper(v, out): itself
    assert {p.name for p in written_array_params(itself, {"helper": itself})} == {"v", "out"}


def test_a_parameter_written_through_a_pointer_to_its_element_is_written() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def through_pointer(a: f32[4], src: f32[4]):
            attrs.func_kind = "public"
            p = ~a[1]
            for i in range(3):
                p[i] = src[i] * 2.0

    assert written_names(through_pointer) == {"a"}
    src = np.array([3, 1, 4, 1], np.float32)
    assert_refused_then_written(module.build(), "through_pointer", "a", {"a": np.zeros(4, np.float32), "src": src},
                                np.array([0, 6, 2, 8], np.float32))


def test_a_parameter_written_by_an_atomic_is_written() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def count(totals: f32[2], src: f32[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            atomic_add(~totals[threadIdx.x % 2], src[threadIdx.x])

    assert written_names(count) == {"totals"}
    src = np.arange(32, dtype=np.float32)
    assert_refused_then_written(module.build(), "count", "totals", {"totals": np.zeros(2, np.float32), "src": src},
                                np.array([src[0::2].sum(), src[1::2].sum()], np.float32))


def test_a_parameter_a_public_function_launches_a_writing_kernel_with_is_written() -> None:
    with hidet.script_module() as module:

        @hidet.script
        def double(out: f32[32], src: f32[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.grid_dim = 1
            attrs.cuda.block_dim = 32
            out[threadIdx.x] = src[threadIdx.x] * 2.0

        @hidet.script
        def launch(out: f32[32], src: f32[32]):
            attrs.func_kind = "public"
            double(out, src)

    assert written_names(launch, double) == {"out"}
    src = np.arange(32, dtype=np.float32)
    built = module.build()
    assert_refused_then_written(built, "launch", "out", {"out": np.zeros(32, np.float32), "src": src}, src * 2)
    out = np.zeros(32, np.float32)
    built(out, read_only(src))  # src is only read, by the kernel the function launches
    np.testing.assert_array_equal(out, src * 2)


with hidet.script_module() as ptx_module:

    @hidet.script
    def ptx_copy(x: f32[32], y: f32[32]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = 1
        attrs.cuda.block_dim = 32
        asm("mov.f32 %0, %1;", outputs=[y[threadIdx.x]], inputs=[x[threadIdx.x]])


@pytest.mark.parametrize("on_gpu", [False, True])
def test_an_output_of_inline_ptx_is_written(monkeypatch: pytest.MonkeyPatch, on_gpu: bool) -> None:
    """A GPU call's and a host call's caller refuse a read-only `y` before the function runs (a stand-in here:
    inline PTX runs on a GPU only)."""
    assert written_names(ptx_copy) == {"y"}
    monkeypatch.setattr(cuda_driver, "ensure_current", lambda: None)
    ran = []
    caller = make_caller(ptx_copy.ir, lambda *args: ran.append(args), None, on_gpu=on_gpu)
    with pytest.raises(ValueError) as refused:
        caller(np.zeros(32, np.float32), read_only(np.zeros(32, np.float32)))
    assert str(refused.value) == read_only_message("ptx_copy", "y")
    assert ran == []


def device_memory(address: int, read_only: bool, shape: tuple[int, ...] = (N,), typestr: str = "<f4") -> object:
    """An object that offers device memory at `address` by `__cuda_array_interface__` (f32[N] by default)."""
    interface = {"shape": shape, "typestr": typestr, "data": (address, read_only), "version": 3}
    return type("Foreign", (), {"__cuda_array_interface__": interface})()


def test_read_only_device_memory_only_for_parameters_only_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU call passes device memory as it is: read-only memory (the interface's flag) for `x` and `y`, which
    `axpy` only reads, but not for `out`."""
    monkeypatch.setattr(cuda_driver, "ensure_current", lambda: None)
    ran = []
    caller = make_caller(AXPY["cuda"].ir_module().functions[0], lambda *args: ran.append(args), None, on_gpu=True)
    calls = device_memory(0x100, False, (1,), "<i4")
    x, y, out = (device_memory(address, read_only) for address, read_only in ((0x1000, True), (0x2000, True),
                                                                               (0x3000, False)))
    caller(calls, 1.5, x, y, out)
    assert [args[2:] for args in ran] == [(0x1000, 0x2000, 0x3000)]
    with pytest.raises(ValueError) as refused:
        caller(calls, 1.5, x, y, device_memory(0x3000, True))
    assert str(refused.value) == read_only_message("axpy", "out")
    assert len(ran) == 1


@pytest.mark.gpu
@pytest.mark.skipif("FAKE_CUDA_CC" in os.environ, reason="inline PTX runs on a real GPU only (the simulated GPU "
                                                         "runs kernels on the emulator)")
def test_an_output_of_inline_ptx_comes_back_from_the_gpu() -> None:
    x, y = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    ptx_module.build()(read_only(x), y)
    np.testing.assert_array_equal(y, x)
