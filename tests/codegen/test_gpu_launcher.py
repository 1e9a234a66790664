"""The GPU host code (kernel launchers), run on the CPU against a stand-in for the CUDA driver's entry points.

The launcher computes the launch configuration from the parameters, packs the arguments for cuLaunchKernel,
raises the dynamic shared memory limit when asked for more than 48 KB, and turns driver failures into errors;
this checks all of that without a GPU.
"""

from __future__ import annotations

import ctypes

import pytest

import hidet_lang as hidet
from codegen.cuda_build import HOST_FLAGS
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.toolchain.cache import build_and_load
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import blockIdx, dynamic_shared_memory, threadIdx
from hidet_lang.passes.pipeline import lower
from hidet_lang.version import __version__

LAUNCH = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, *([ctypes.c_uint] * 7), ctypes.c_void_p,
                          ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p)
SET_ATTRIBUTE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)

with hidet.script_module() as module:

    @hidet.script
    def scale(n: i32, k: f32, a: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (32, 4)
        attrs.cuda.grid_dim = (n + 127) // 128
        attrs.cuda.dynamic_smem_bytes = n * 4
        buf = dynamic_shared_memory(0, f32)
        i = blockIdx.x * 128 + threadIdx.y * 32 + threadIdx.x
        if i < n:
            buf[i % 128] = a[i] * k
            a[i] = buf[i % 128]


STATIC_SMEM = 8192
SMEM_LIMIT = 100 * 1024


class FakeDriver:
    """Records what the launcher hands to cuLaunchKernel / cuFuncSetAttribute; returns `result`."""

    def __init__(self) -> None:
        self.launches: list[dict] = []
        self.attributes: list[tuple[int, int, int]] = []
        self.result = 0
        self.launch = LAUNCH(self._launch)
        self.set_attribute = SET_ATTRIBUTE(self._set_attribute)

    def _launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        n = ctypes.cast(params[0], ctypes.POINTER(ctypes.c_int32))[0]
        k = ctypes.cast(params[1], ctypes.POINTER(ctypes.c_float))[0]
        a = ctypes.cast(params[2], ctypes.POINTER(ctypes.c_void_p))[0]
        self.launches.append(dict(func=func, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem, n=n, k=k, a=a))
        return self.result

    def _set_attribute(self, func, attribute, value):
        self.attributes.append((func, attribute, value))
        return 0


@pytest.fixture(scope="module")
def library() -> ctypes.CDLL:
    _, host = emit_cuda(plan_module(lower(module.ir_module())))
    lib = build_and_load(host, language="c", flags=HOST_FLAGS, version=__version__)
    lib.hidet_lang_bind_gpu.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_longlong]
    return lib


@pytest.fixture
def launcher(library: ctypes.CDLL):
    """A fresh driver bound to the launchers: binding also resets what the launchers remember (the dynamic shared
    memory each kernel has opted in to), so no test depends on what an earlier one launched."""
    lib = library
    driver = FakeDriver()
    handles = (ctypes.c_void_p * 1)(0x1234)
    static_smem = (ctypes.c_longlong * 1)(STATIC_SMEM)  # as the driver would report it
    lib.hidet_lang_bind_gpu(ctypes.cast(driver.launch, ctypes.c_void_p), ctypes.cast(driver.set_attribute,
                            ctypes.c_void_p), ctypes.cast(handles, ctypes.c_void_p),
                            ctypes.cast(static_smem, ctypes.c_void_p), SMEM_LIMIT)
    launch = lib.launch_scale
    launch.argtypes = [ctypes.c_int32, ctypes.c_float, ctypes.c_void_p]
    status = lib.hidet_lang_launch_status
    status.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_int)]

    def call(n: int, k: float, a: int) -> tuple[int, str, int]:
        launch(n, k, a)
        message, code = ctypes.c_char_p(), ctypes.c_int()
        failed = status(ctypes.byref(message), ctypes.byref(code))
        return failed, (message.value or b"").decode(), code.value

    return driver, call


def test_launch_configuration_and_arguments_reach_the_driver(launcher) -> None:
    driver, call = launcher
    assert call(1000, 2.5, 0xABC000) == (0, "", 0)
    last = driver.launches[-1]
    assert last["func"] == 0x1234
    assert last["grid"] == (8, 1, 1) and last["block"] == (32, 4, 1)
    assert last["smem"] == 4000 and last["n"] == 1000 and last["k"] == 2.5 and last["a"] == 0xABC000
    assert driver.attributes == []


def test_static_and_dynamic_shared_memory_over_48_kb_in_all_opt_in(launcher) -> None:
    driver, call = launcher
    budget = 48 * 1024 - STATIC_SMEM
    before = len(driver.attributes)
    assert call(budget // 4, 1.0, 0x1000)[0] == 0  # exactly 48 KB in all: no opt-in needed
    assert driver.attributes[before:] == []
    assert call(budget // 4 + 1, 1.0, 0x1000)[0] == 0
    assert driver.attributes[before:] == [(0x1234, 8, budget + 4)]
    assert driver.launches[-1]["smem"] == budget + 4


def test_more_than_48_kb_of_dynamic_shared_memory_raises_the_limit_once(launcher) -> None:
    driver, call = launcher
    before = len(driver.attributes)
    call(16384, 1.0, 0x1000)
    call(16384, 1.0, 0x1000)
    assert driver.attributes[before:] == [(0x1234, 8, 65536)]
    assert driver.launches[-1]["smem"] == 65536


def test_shared_memory_over_the_devices_limit_is_refused_before_the_driver(launcher) -> None:
    driver, call = launcher
    before = (len(driver.launches), len(driver.attributes))
    n = (SMEM_LIMIT - STATIC_SMEM) // 4 + 1
    failed, message, code = call(n, 1.0, 0x1000)
    assert failed and code == -1
    assert (f"kernel 'scale': {STATIC_SMEM} bytes of static shared memory + dynamic_smem_bytes {n * 4} exceed the "
            f"{SMEM_LIMIT} bytes a block may have on this device") in message
    assert (len(driver.launches), len(driver.attributes)) == before
    assert call(n - 1, 1.0, 0x1000)[0] == 0


def test_driver_failure_is_reported_with_its_code_and_the_kernel(launcher) -> None:
    driver, call = launcher
    driver.result = 700  # CUDA_ERROR_ILLEGAL_ADDRESS
    try:
        failed, message, code = call(10, 1.0, 0x1000)
    finally:
        driver.result = 0
    assert failed and code == 700
    assert "kernel 'scale'" in message and "driver error 700" in message
    assert call(10, 1.0, 0x1000)[0] == 0, "the failure was reported once"


def test_a_grid_of_zero_is_refused_before_the_driver(launcher) -> None:
    driver, call = launcher
    before = len(driver.launches)
    failed, message, code = call(0, 1.0, 0x1000)
    assert failed and "grid_dim (0, 1, 1) is invalid" in message
    assert len(driver.launches) == before
