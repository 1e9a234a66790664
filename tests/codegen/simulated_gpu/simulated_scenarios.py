"""Driver-level behaviour of the GPU path, run by test_simulated_gpu.py on a simulated sm_86 (99 KB of shared
memory a block): the device's architecture is the default target, device memory goes back to the caching
allocator and from it to the driver, and shared memory beyond the device's limit is refused before the launch."""

from __future__ import annotations

import ctypes
import gc
import inspect
import threading
from collections.abc import Callable

import numpy as np
import pytest
from simulated_driver import driver

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import blockIdx, dynamic_shared_memory, shared_tensor, syncthreads, threadIdx

live_allocations = driver().fake_cuda_live_allocations
live_allocations.restype = ctypes.c_int

with hidet.script_module() as scale_module:

    @hidet.script
    def scale(n: i32, a: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = (n + 63) // 64
        i = blockIdx.x * 64 + threadIdx.x
        if i < n:
            a[i] = a[i] * 2.0


def smem_module(dynamic_bytes: int) -> hidet.ScriptModule:
    """A kernel with 16 KB of static shared memory and `dynamic_bytes` of dynamic shared memory."""
    with hidet.script_module() as module:

        @hidet.script
        def reverse(x: f32[256], y: f32[256]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 256
            attrs.cuda.grid_dim = 1
            attrs.cuda.dynamic_smem_bytes = dynamic_bytes  # SMEM-LINE
            fixed = shared_tensor(f32, [4096])
            extra = dynamic_shared_memory(0, f32)
            fixed[threadIdx.x * 16] = x[threadIdx.x]
            syncthreads()
            extra[threadIdx.x] = fixed[(255 - threadIdx.x) * 16]
            y[threadIdx.x] = extra[threadIdx.x]

    return module


def line_of(marker: str) -> int:
    lines, first = inspect.getsourcelines(smem_module)
    return first + next(i for i, line in enumerate(lines) if marker in line)


def test_the_default_target_is_the_devices_architecture() -> None:
    assert str(scale_module.build().target) == "cuda:sm_86"


def test_numpy_arguments_leave_no_device_memory_behind() -> None:
    built = scale_module.build()
    hidet.cuda.empty_cache()
    before, in_use = live_allocations(), hidet.cuda.memory_stats()["allocated"]
    a = np.arange(100, dtype=np.float32)
    built(100, a)
    np.testing.assert_array_equal(a, np.arange(100, dtype=np.float32) * 2)
    assert hidet.cuda.memory_stats()["allocated"] == in_use  # the staging buffer went back to the cache
    hidet.cuda.empty_cache()
    assert live_allocations() == before


def test_a_refused_launch_leaves_no_device_memory_behind() -> None:
    built = scale_module.build()
    hidet.cuda.empty_cache()
    before, in_use = live_allocations(), hidet.cuda.memory_stats()["allocated"]
    with pytest.raises(RuntimeError, match=r"kernel 'scale': grid_dim \(0, 1, 1\) is invalid"):
        built(0, np.zeros(0, np.float32))
    assert hidet.cuda.memory_stats()["allocated"] == in_use
    hidet.cuda.empty_cache()
    assert live_allocations() == before


def test_device_arrays_free_their_memory_when_collected() -> None:
    hidet.cuda.empty_cache()
    before = live_allocations()
    a = hidet.asarray(np.arange(10, dtype=np.float32), device="cuda")
    scale_module.build()(10, a)
    np.testing.assert_array_equal(a.numpy(), np.arange(10, dtype=np.float32) * 2)
    assert live_allocations() == before + 1
    del a
    gc.collect()
    assert live_allocations() == before + 1  # its block is cached for the next array of its size
    hidet.cuda.empty_cache()
    assert live_allocations() == before


def test_shared_memory_up_to_the_devices_limit_runs() -> None:
    x = np.random.rand(256).astype(np.float32)
    y = np.zeros(256, np.float32)
    smem_module(80 * 1024).build()(x, y)  # 16 KB static + 80 KB dynamic, within 99 KB
    np.testing.assert_array_equal(y, x[::-1])


def test_shared_memory_over_the_devices_limit_is_refused_before_the_launch() -> None:
    built = smem_module(90 * 1024).build()  # 16 KB static + 90 KB dynamic: over 99 KB
    y = np.zeros(256, np.float32)
    with pytest.raises(RuntimeError) as excinfo:
        built(np.ones(256, np.float32), y)
    message = str(excinfo.value)
    assert f"{__file__}:{line_of('SMEM-LINE')}: kernel 'reverse'" in message
    assert "16384 bytes of static shared memory + dynamic_smem_bytes 92160 exceed the 101376 bytes" in message
    assert not y.any()


def in_a_new_thread(work: Callable[[], object]) -> object:
    """What `work()` returns when run in a thread of its own (its exception, raised here)."""
    outcome: list[object] = []

    def run() -> None:
        try:
            outcome.append(work())
        except BaseException as e:  # noqa: BLE001 - raised again in the calling thread
            outcome.append(e)

    worker = threading.Thread(target=run)
    worker.start()
    worker.join()
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    return outcome[0]


def test_each_thread_gets_the_context_made_current() -> None:
    a = hidet.asarray(np.ones(10, np.float32), device="cuda")
    np.testing.assert_array_equal(in_a_new_thread(a.numpy), np.ones(10, np.float32))
    in_a_new_thread(lambda: scale_module.build()(10, a))
    np.testing.assert_array_equal(a.numpy(), np.full(10, 2, np.float32))
    made_there = in_a_new_thread(lambda: hidet.zeros([3], device="cuda"))
    np.testing.assert_array_equal(made_there.numpy(), np.zeros(3, np.float32))
