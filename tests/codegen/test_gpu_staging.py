"""GPU argument passing, run on the CPU against a stand-in for device memory: numpy arrays are copied to the
device before the call and back after it, device arrays and `__cuda_array_interface__` objects pass their
own pointers, and bad arguments are refused before anything is allocated."""

from __future__ import annotations

import re

import numpy as np
import pytest

import hidet_lang as hidet
from codegen.runtime import cuda_driver, device_staging
from codegen.runtime.allocator import CachingAllocator
from codegen.runtime.arguments import make_caller
from codegen.runtime.arrays import DeviceArray
from hidet_lang import attrs, bf16, f32, i32
from hidet_lang.cuda import threadIdx


class FakeDevice:
    """Device memory as numpy buffers keyed by fake addresses."""

    def __init__(self) -> None:
        self.buffers: dict[int, np.ndarray] = {}
        self.next = 0x10000
        self.allocations = 0  # calls of alloc

    def alloc(self, nbytes: int) -> int:
        self.allocations += 1
        ptr, self.next = self.next, self.next + max(nbytes, 1) + 0x100
        self.buffers[ptr] = np.zeros(max(nbytes, 1), np.uint8)
        return ptr

    def free(self, ptr: int) -> None:
        del self.buffers[ptr]

    def to_device(self, ptr: int, host: np.ndarray) -> None:
        self.buffers[ptr][: host.nbytes] = host.reshape(-1).view(np.uint8)

    def to_host(self, host: np.ndarray, ptr: int) -> None:
        host.reshape(-1).view(np.uint8)[:] = self.buffers[ptr][: host.nbytes]


@pytest.fixture
def device(monkeypatch):
    """The fake device, behind a caching allocator of its own (the process's would keep blocks across tests)."""
    fake = FakeDevice()
    fake.allocator = CachingAllocator(fake.alloc, fake.free, lambda error: False, lambda: None, lambda: (0, 0))
    monkeypatch.setattr(device_staging, "device_allocator", lambda: fake.allocator)
    monkeypatch.setattr(cuda_driver, "mem_alloc", fake.alloc)
    monkeypatch.setattr(cuda_driver, "mem_free", fake.free)
    monkeypatch.setattr(cuda_driver, "copy_to_device", fake.to_device)
    monkeypatch.setattr(cuda_driver, "copy_to_host", fake.to_host)
    monkeypatch.setattr(cuda_driver, "ensure_current", lambda: None)
    return fake


with hidet.script_module():

    @hidet.script
    def scale(n: i32, k: f32, a: f32[n], out: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 32
        attrs.cuda.grid_dim = 1
        out[threadIdx.x] = a[threadIdx.x] * k


def fake_kernel(device: FakeDevice):
    """Does on the fake device what `scale` does on a GPU."""

    def run(n: int, k: float, a: int, out: int) -> None:
        src = device.buffers[a][: n * 4].view(np.float32)
        device.buffers[out][: n * 4] = (src * np.float32(k)).view(np.uint8)

    return run


def test_numpy_arguments_are_copied_in_and_out_and_freed(device) -> None:
    caller = make_caller(scale.ir, fake_kernel(device), None, on_gpu=True)
    a, out = np.arange(5, dtype=np.float32), np.zeros(5, np.float32)
    caller(5, 2.0, a, out)
    np.testing.assert_array_equal(out, a * 2)
    assert device.allocations == 2, "one staging buffer for each array"
    assert device.allocator.stats.allocated == 0, "staging buffers go back to the allocator after the call"
    caller(5, 3.0, a, out)
    np.testing.assert_array_equal(out, a * 3)
    assert device.allocations == 2, "a second call stages into the cached buffers"
    device.allocator.empty_cache()
    assert device.buffers == {}, "the cache gives them back to the device"


def test_device_arrays_and_cuda_array_interface_pass_their_pointers(device) -> None:
    caller = make_caller(scale.ir, fake_kernel(device), None, on_gpu=True)
    a_ptr, out_ptr = device.alloc(16), device.alloc(16)
    device.to_device(a_ptr, np.array([1, 2, 3, 4], np.float32))
    a = DeviceArray((4,), np.float32, a_ptr)

    class Foreign:
        __cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "data": (out_ptr, False), "version": 3}

    caller(4, 3.0, a, Foreign())
    result = np.zeros(4, np.float32)
    device.to_host(result, out_ptr)
    np.testing.assert_array_equal(result, [3, 6, 9, 12])
    a.ptr = 0  # the fake device owns the buffer; keep the finalizer away from the real driver


def test_bad_arguments_are_refused_before_any_allocation(device) -> None:
    caller = make_caller(scale.ir, fake_kernel(device), None, on_gpu=True)
    with pytest.raises(TypeError, match="'a' expects float32"):
        caller(4, 1.0, np.zeros(4, np.float64), np.zeros(4, np.float32))
    assert device.allocations == 0, "a refused call allocates nothing"
    # a bad later argument too: 'a' is fine, but nothing is staged before 'out' is checked
    with pytest.raises(ValueError, match=r"'out' expects shape \(4,\)"):
        caller(4, 1.0, np.zeros(4, np.float32), np.zeros(5, np.float32))
    assert device.allocations == 0, "a refused call allocates nothing"
    assert device.buffers == {}


def test_a_failing_call_still_frees_the_staging_buffers(device) -> None:
    def failing(*args: object) -> None:
        raise RuntimeError("launch failed")

    caller = make_caller(scale.ir, failing, None, on_gpu=True)
    with pytest.raises(RuntimeError, match="launch failed"):
        caller(4, 1.0, np.zeros(4, np.float32), np.zeros(4, np.float32))
    assert device.allocations == 2, "the staging buffers were allocated before the launch"
    assert device.allocator.stats.allocated == 0, "and went back to the allocator"


@pytest.mark.parametrize("shape", [(3,), (4, 1), (1, 4), (2, 2), (), (5,)], ids=str)
def test_a_wrong_rank_or_shape_is_refused_for_every_kind_of_device_argument(device, shape: tuple[int, ...]) -> None:
    calls = []
    caller = make_caller(scale.ir, lambda *args: calls.append(args), None, on_gpu=True)
    ptr = device.alloc(64)

    class Foreign:
        __cuda_array_interface__ = {"shape": shape, "typestr": "<f4", "data": (ptr, False), "version": 3}

    kinds = {"numpy": np.zeros(shape, np.float32), "device array": DeviceArray(shape, np.float32, ptr),
             "__cuda_array_interface__": Foreign()}
    for kind, value in kinds.items():
        with pytest.raises(ValueError, match=re.escape(f"parameter 'out' expects shape (4,), got shape {shape}")):
            caller(4, 1.0, np.zeros(4, np.float32), value)
        assert calls == [], f"{kind}: the kernel was launched"
    assert device.allocations == 1, "a refused call allocates nothing"
    kinds["device array"].ptr = 0  # the fake device owns the buffer; keep the finalizer away from the real driver


with hidet.script_module():

    @hidet.script
    def shift(x: f32[5], y: f32[4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 4
        attrs.cuda.grid_dim = 1
        attrs.no_alias = True
        y[threadIdx.x] = x[threadIdx.x + 1]


def test_a_no_alias_kernel_refuses_overlapping_device_and_numpy_arguments_before_any_allocation(device) -> None:
    calls = []
    caller = make_caller(shift.ir, lambda *args: calls.append(args), None, on_gpu=True)
    ptr = device.alloc(64)
    allocated = device.allocations
    x, y = DeviceArray((5,), np.float32, ptr), DeviceArray((4,), np.float32, ptr + 4)  # y is x[1:]
    with pytest.raises(ValueError, match="arguments 'y' and 'x' share memory"):
        caller(x, y)
    host = np.zeros(9, np.float32)
    with pytest.raises(ValueError, match="arguments 'y' and 'x' share memory"):
        caller(host[:5], host[4:8])  # numpy arrays overlap on the host, before staging
    assert calls == [] and device.allocations == allocated
    caller(x, DeviceArray((4,), np.float32, ptr + 20))  # apart: launched with the device pointers
    assert calls == [(ptr, ptr + 20)]
    x.ptr = y.ptr = 0  # the fake device owns the buffer; keep the finalizer away from the real driver


with hidet.script_module():

    @hidet.script
    def widen(x: bf16[4], out: f32[4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 4
        attrs.cuda.grid_dim = 1
        out[threadIdx.x] = f32(x[threadIdx.x])


def test_bf16_device_arguments_may_be_bit_patterns(device) -> None:
    calls = []
    caller = make_caller(widen.ir, lambda *args: calls.append(args), None, on_gpu=True)
    ptr, out = device.alloc(8), device.alloc(16)

    def foreign(typestr: str, at: int) -> object:
        return type("Foreign", (), {"__cuda_array_interface__": {"shape": (4,), "typestr": typestr,
                                                                 "data": (at, False), "version": 3}})()

    bits, out_array, int16s, out_bits = (DeviceArray((4,), np.dtype(t), at) for t, at in
                                         ((np.uint16, ptr), (np.float32, out), (np.int16, ptr), (np.uint16, out)))
    caller(bits, out_array)
    caller(foreign("<u2", ptr), foreign("<f4", out))
    assert calls == [(ptr, out)] * 2
    for wrong in (int16s, foreign("<f2", ptr)):
        with pytest.raises(TypeError, match="parameter 'x' expects bfloat16, got an array of "):
            caller(wrong, out_array)
    with pytest.raises(TypeError, match="parameter 'out' expects float32, got an array of uint16"):
        caller(bits, out_bits)
    read_only_bits = np.zeros(4, np.uint16)
    read_only_bits.flags.writeable = False
    caller(read_only_bits, out_array)  # staged as a copy: a read-only input is fine, as for any dtype
    calls.pop()
    with pytest.raises(TypeError, match="parameter 'out' expects float32, got an array of uint16"):
        caller(np.zeros(4, np.uint16), np.zeros(4, np.uint16))  # bits are bf16's only, numpy's too
    for wrong in (np.int16, np.float16):
        with pytest.raises(TypeError, match=f"parameter 'x' expects bfloat16, got an array of {np.dtype(wrong)}"):
            caller(np.zeros(4, wrong), out_array)
    assert len(calls) == 2
    for array in (bits, out_array, int16s, out_bits):
        array.ptr = 0  # the fake device owns the buffers


with hidet.script_module():

    @hidet.script
    def fill(out: f32[2, 3]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 6
        attrs.cuda.grid_dim = 1
        out[threadIdx.x / 3, threadIdx.x % 3] = 1.0


@pytest.mark.parametrize(("strides", "contiguous"), [(None, True), ((12, 4), True), ((4, 8), False),
                                                      ((16, 4), False), ((12, 8), False)], ids=str)
def test_cuda_array_interface_strides_must_be_row_major(device, strides: tuple[int, int] | None,
                                                         contiguous: bool) -> None:
    """A CUDA-array-interface object may state its strides in bytes: (12, 4) is [2, 3] float32 in row-major order;
    a transposed, padded or spread one is refused."""
    calls = []
    caller = make_caller(fill.ir, lambda *args: calls.append(args), None, on_gpu=True)
    ptr = device.alloc(64)
    interface = {"shape": (2, 3), "typestr": "<f4", "data": (ptr, False), "version": 3, "strides": strides}
    foreign = type("Foreign", (), {"__cuda_array_interface__": interface})()
    if contiguous:
        caller(foreign)
        assert calls == [(ptr,)]
    else:
        with pytest.raises(ValueError, match="parameter 'out' must be a C-contiguous device array"):
            caller(foreign)
        assert calls == []
