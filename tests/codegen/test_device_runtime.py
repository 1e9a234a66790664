"""The GPU's runtime: the caching allocator behind device arrays, eager operators and staged arguments
(`hidet.cuda.memory_stats`, `empty_cache`, the out-of-memory error), the current stream that launches of kernels,
eager operators and compiled graphs go to (`hidet.cuda.stream`), and the CUDA array interface's stream.

The tests marked `gpu` run on a GPU (the simulated one included); those that read what the driver saw (on which
stream a kernel was launched, which stream waited on which, a device with little memory) need the simulated GPU's
driver. The current stream's bookkeeping is tested everywhere."""

from __future__ import annotations

import ctypes
import gc
import threading
from collections.abc import Callable, Iterator

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
import stdlib_ops as ops
from codegen.runtime.allocator import size_class
from codegen.runtime.arrays import uses_gpu
from hidet_lang import attrs, f32, i32
from hidet_lang.cuda import blockIdx, threadIdx


def scale_module() -> hidet.ScriptModule:
    """a[i] *= 2 for i < n."""
    with hidet.script_module() as module:

        @hidet.script
        def scale(n: i32, a: f32[n]):  # noqa: F821 (parameters)
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 64
            attrs.cuda.grid_dim = (n + 63) // 64
            i = blockIdx.x * 64 + threadIdx.x
            if i < n:
                a[i] = a[i] * 2.0

    return module


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


# ---- the current stream: everywhere (on the emulator streams are names only) ----

def test_the_current_stream_is_the_default_one_outside_any_stream_block() -> None:
    assert hidet.cuda.current_stream() == hidet.cuda.default_stream()
    assert int(hidet.cuda.current_stream()) == 0
    assert hidet.cuda.default_stream().interface_number == 1  # the legacy default stream's number


def test_stream_blocks_nest_and_restore_the_previous_stream_even_on_an_exception() -> None:
    outer, inner = hidet.cuda.Stream(), hidet.cuda.Stream()
    assert outer != inner
    with hidet.cuda.stream(outer) as chosen:
        assert chosen is outer and hidet.cuda.current_stream() is outer
        with pytest.raises(KeyError), hidet.cuda.stream(inner):
            assert hidet.cuda.current_stream() is inner
            raise KeyError("inside")
        assert hidet.cuda.current_stream() is outer
    assert hidet.cuda.current_stream() == hidet.cuda.default_stream()


def test_the_current_stream_is_per_thread() -> None:
    s = hidet.cuda.Stream()
    with hidet.cuda.stream(s):
        assert in_a_new_thread(hidet.cuda.current_stream) == hidet.cuda.default_stream()
        assert hidet.cuda.current_stream() is s


class TorchLikeStream:
    def __init__(self, handle: int) -> None:
        self.cuda_stream = handle


class CupyLikeStream:
    def __init__(self, handle: int) -> None:
        self.ptr = handle


@settings(max_examples=10, deadline=None)
@given(st.integers(3, 2**48))
def test_other_libraries_streams_and_handles_are_named_without_being_owned(handle: int) -> None:
    for given_stream in (handle, TorchLikeStream(handle), CupyLikeStream(handle)):
        with hidet.cuda.stream(given_stream) as s:
            assert int(hidet.cuda.current_stream()) == handle == int(s)
    with hidet.cuda.stream(1):  # the interface number of the legacy default stream
        assert hidet.cuda.current_stream() == hidet.cuda.default_stream()


def test_a_stream_of_the_wrong_type_is_refused() -> None:
    with pytest.raises(TypeError, match="expected a hidet stream, a CUstream handle .int. or a torch/CuPy stream, "
                                        "got str"):
        with hidet.cuda.stream("fast"):
            pass
    with pytest.raises(TypeError, match="got bool"):
        hidet.cuda.stream(True).__enter__()


def test_kernels_run_inside_a_stream_block_and_synchronize_waits_for_them() -> None:
    built = scale_module().build()
    s = hidet.cuda.Stream()
    a = hidet.asarray(np.arange(100, dtype=np.float32), device="cuda")
    with hidet.cuda.stream(s):
        built(100, a)
        s.synchronize()
    hidet.cuda.synchronize()
    np.testing.assert_array_equal(a.numpy(), np.arange(100, dtype=np.float32) * 2)


@pytest.mark.skipif(uses_gpu(), reason="the emulator's runs; CUDA modules build for a GPU here")
def test_memory_statistics_stay_zero_on_the_emulator() -> None:
    a = hidet.zeros([1000], device="cuda")
    assert set(hidet.cuda.memory_stats().values()) == {0}
    assert hidet.cuda.empty_cache() == 0
    del a


# ---- the GPU (the simulated one included) ----

@pytest.fixture
def fake_driver() -> ctypes.CDLL:
    """The simulated GPU's driver library, with its controls for the harness."""
    lib = ctypes.CDLL("libcuda.so.1")
    if not hasattr(lib, "fake_cuda_last_launch_stream"):
        pytest.skip("reads what the simulated GPU's driver saw")
    lib.fake_cuda_last_launch_stream.restype = ctypes.c_void_p
    lib.fake_cuda_waits.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    lib.fake_cuda_set_total_memory.argtypes = [ctypes.c_size_t]
    lib.fake_cuda_live_allocations.restype = ctypes.c_int
    return lib


def last_launch_stream(fake: ctypes.CDLL) -> int:
    return fake.fake_cuda_last_launch_stream() or 0


@pytest.fixture
def small_device(fake_driver: ctypes.CDLL) -> Iterator[None]:
    """The simulated device shrunk to 64 MiB more than what is held when the test starts (the allocator's cache
    released first); its size is restored after."""
    from codegen.runtime import cuda_driver

    gc.collect()
    hidet.cuda.empty_cache()
    free, total = cuda_driver.mem_get_info()
    fake_driver.fake_cuda_set_total_memory(total - free + (64 << 20))
    yield
    fake_driver.fake_cuda_set_total_memory(total)
    gc.collect()
    hidet.cuda.empty_cache()


@pytest.mark.gpu
def test_a_freed_array_is_reused_without_a_driver_call() -> None:
    a = ops.empty([1000, 1001], device="cuda")
    ptr = a.storage.ptr
    before = hidet.cuda.memory_stats()
    del a
    gc.collect()
    assert hidet.cuda.memory_stats()["allocated"] == before["allocated"] - size_class(1000 * 1001 * 4)
    b = ops.empty([1001, 1000], device="cuda")
    assert b.storage.ptr == ptr
    after = hidet.cuda.memory_stats()
    assert after["driver_allocations"] == before["driver_allocations"]
    assert after["requests"] == before["requests"] + 1
    assert after["allocated"] == before["allocated"]


@pytest.mark.gpu
def test_repeated_eager_operators_allocate_from_the_cache() -> None:
    x = ops.asarray(np.random.rand(37, 19).astype(np.float32), device="cuda")
    y = ops.asarray(np.random.rand(37, 19).astype(np.float32), device="cuda")
    expected = x.numpy() + y.numpy()
    np.testing.assert_array_equal((x + y).numpy(), expected)
    gc.collect()
    driver_allocations = hidet.cuda.memory_stats()["driver_allocations"]
    for _ in range(5):
        np.testing.assert_array_equal((x + y).numpy(), expected)
    assert hidet.cuda.memory_stats()["driver_allocations"] == driver_allocations


@pytest.mark.gpu
def test_statistics_count_what_arrays_hold_and_their_peak() -> None:
    gc.collect()
    hidet.cuda.empty_cache()
    hidet.cuda.reset_peak_memory_stats()
    base = hidet.cuda.memory_stats()
    assert base["cached"] == 0 and base["peak_allocated"] == base["allocated"]
    arrays = [hidet.empty([n], device="cuda") for n in (10, 3000, 700_000)]  # f32: 40 B, 12000 B, 2.8 MB
    held = 512 + 12288 + (3 << 20)  # their size classes
    assert held == sum(size_class(4 * n) for n in (10, 3000, 700_000))
    stats = hidet.cuda.memory_stats()
    assert stats["allocated"] - base["allocated"] == held
    assert stats["reserved"] - base["reserved"] == held
    del arrays
    gc.collect()
    stats = hidet.cuda.memory_stats()
    assert stats["allocated"] == base["allocated"]
    assert stats["cached"] == held
    assert stats["peak_allocated"] - base["allocated"] == held
    assert hidet.cuda.empty_cache() == held
    assert hidet.cuda.memory_stats()["reserved"] == base["reserved"]


@pytest.mark.gpu
def test_empty_cache_gives_the_memory_back_to_the_driver(fake_driver: ctypes.CDLL) -> None:
    gc.collect()
    hidet.cuda.empty_cache()
    before = fake_driver.fake_cuda_live_allocations()
    for n in (5, 500, 50_000):
        hidet.zeros([n], device="cuda")  # made and collected at once: its block is cached
    gc.collect()
    assert fake_driver.fake_cuda_live_allocations() == before + 3
    hidet.cuda.empty_cache()
    assert fake_driver.fake_cuda_live_allocations() == before


@pytest.mark.gpu
def test_out_of_memory_releases_the_cache_and_retries(small_device: None) -> None:
    cached = hidet.empty([40 << 20], "uint8", device="cuda")
    del cached
    gc.collect()
    releases = hidet.cuda.memory_stats()["cache_releases"]
    data = np.arange(48 << 20, dtype=np.uint8)
    big = hidet.asarray(data, device="cuda")  # 48 MiB: fits only once the cached 40 MiB block goes back
    assert hidet.cuda.memory_stats()["cache_releases"] == releases + 1
    np.testing.assert_array_equal(big.numpy(), data)


@pytest.mark.gpu
def test_out_of_memory_is_a_clear_error_at_the_users_line(small_device: None) -> None:
    held = hidet.empty([40 << 20], "uint8", device="cuda")
    with pytest.raises(hidet.cuda.DeviceOutOfMemoryError) as excinfo:
        hidet.empty([30 << 20], "float32", device="cuda")  # 120 MiB
    message = str(excinfo.value)
    assert "out of device memory: a request of 120.00 MiB (125829120 bytes" in message
    assert "arrays in use hold 40.00 MiB" in message
    assert "the device has 24.00 MiB free of" in message
    assert excinfo.traceback[0].frame.code.name == "test_out_of_memory_is_a_clear_error_at_the_users_line"
    assert isinstance(excinfo.value, MemoryError)
    del held


@pytest.mark.gpu
def test_a_request_beyond_any_device_is_refused_as_out_of_memory() -> None:
    with pytest.raises(hidet.cuda.DeviceOutOfMemoryError, match=r"a request of 64.00 TiB"):
        hidet.empty([1 << 44], "float32", device="cuda")


@pytest.mark.gpu
def test_launches_go_to_the_current_stream(fake_driver: ctypes.CDLL) -> None:
    built = scale_module().build()
    a = hidet.zeros([10], device="cuda")
    s, t = hidet.cuda.Stream(), hidet.cuda.Stream()
    with hidet.cuda.stream(s):
        built(10, a)
        assert last_launch_stream(fake_driver) == int(s)
        with hidet.cuda.stream(t):
            built(10, a)
            assert last_launch_stream(fake_driver) == int(t)
        built(10, a)
        assert last_launch_stream(fake_driver) == int(s)
        in_a_new_thread(lambda: built(10, a))  # another thread's current stream is its own: the default one
        assert last_launch_stream(fake_driver) == 0
    built(10, a)
    assert last_launch_stream(fake_driver) == 0


@pytest.mark.gpu
def test_eager_operators_and_compiled_graphs_launch_on_the_current_stream(fake_driver: ctypes.CDLL) -> None:
    x = ops.asarray(np.random.rand(5, 7).astype(np.float32), device="cuda")
    s = hidet.cuda.Stream()
    with hidet.cuda.stream(s):
        y = ops.relu(x)
        assert last_launch_stream(fake_driver) == int(s)
    np.testing.assert_array_equal(y.numpy(), np.maximum(x.numpy(), 0))
    symbol = ops.symbol([5, 7], "float32", device="cuda")
    graph = ops.trace_from(ops.relu(symbol) * 2.0, [symbol]).build("cuda")
    with hidet.cuda.stream(s):
        out = graph(x)
        assert last_launch_stream(fake_driver) == int(s)
    out = out[0] if isinstance(out, (list, tuple)) else out
    np.testing.assert_allclose(out.numpy(), np.maximum(x.numpy(), 0) * 2, rtol=0, atol=0)


@pytest.mark.gpu
def test_a_destroyed_streams_cached_blocks_serve_the_default_stream() -> None:
    s = hidet.cuda.Stream()
    with hidet.cuda.stream(s):
        ptr = hidet.empty([23456], device="cuda").ptr  # freed at once: cached for s
    gc.collect()
    del s
    gc.collect()
    assert hidet.empty([23456], device="cuda").ptr == ptr


@pytest.mark.gpu
def test_a_block_freed_on_one_stream_is_not_reused_on_another() -> None:
    s = hidet.cuda.Stream()
    with hidet.cuda.stream(s):
        a = hidet.empty([12345], device="cuda")
    ptr = a.ptr
    del a
    gc.collect()
    b = hidet.empty([12345], device="cuda")  # the default stream: s's work may still use the block
    assert b.ptr != ptr
    with hidet.cuda.stream(s):
        assert hidet.empty([12345], device="cuda").ptr == ptr


class ForeignArray:
    """A device array of another library: its memory, and the stream its data is produced on."""

    def __init__(self, array: hidet.DeviceArray, stream: int | None) -> None:
        self.keep = array
        interface = dict(array.__cuda_array_interface__)
        if stream is None:
            del interface["stream"]
        else:
            interface["stream"] = stream
        self.__cuda_array_interface__ = interface


@pytest.mark.gpu
def test_a_foreign_arrays_stream_is_waited_on_by_the_current_stream(fake_driver: ctypes.CDLL) -> None:
    built = scale_module().build()
    data = hidet.asarray(np.arange(10, dtype=np.float32), device="cuda")
    producer, consumer = hidet.cuda.Stream(), hidet.cuda.Stream()
    waits = fake_driver.fake_cuda_waits(int(consumer), int(producer))
    with hidet.cuda.stream(consumer):
        built(10, ForeignArray(data, int(producer)))
    assert fake_driver.fake_cuda_waits(int(consumer), int(producer)) == waits + 1
    with hidet.cuda.stream(consumer):  # the legacy default stream (1): the consumer waits on the default stream
        built(10, ForeignArray(data, 1))
    assert fake_driver.fake_cuda_waits(int(consumer), 0) >= 1
    with hidet.cuda.stream(producer):  # the same stream, or no stream named: nothing to wait for
        built(10, ForeignArray(data, int(producer)))
        built(10, ForeignArray(data, None))
    assert fake_driver.fake_cuda_waits(int(producer), int(producer)) == 0
    np.testing.assert_array_equal(data.numpy(), np.arange(10, dtype=np.float32) * 16)


@pytest.mark.gpu
def test_our_array_interface_names_the_current_stream() -> None:
    a = hidet.zeros([3], device="cuda")
    assert a.__cuda_array_interface__["stream"] == 1
    s = hidet.cuda.Stream()
    with hidet.cuda.stream(s):
        assert a.__cuda_array_interface__["stream"] == int(s)


class DLPackOnly:
    """Another library's GPU tensor that offers DLPack alone (no array interface), as JAX's do."""

    def __init__(self, source: object) -> None:
        self.source = source

    def __dlpack__(self, stream: int | None = None, **kwargs: object) -> object:
        return self.source.__dlpack__(stream=stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.source.__dlpack_device__()


@pytest.mark.gpu
def test_gpu_tensors_go_through_dlpack_without_a_copy() -> None:
    from codegen.runtime import dlpack

    exported = len(dlpack._exported)
    data = np.random.rand(6, 5).astype(np.float32)
    t = ops.asarray(data, device="cuda")
    assert t.__dlpack_device__() == (2, 0)
    shared = ops.from_dlpack(DLPackOnly(t), device="cuda")
    assert shared.storage.ptr == t.storage.ptr and shared.shape == (6, 5) and shared.dtype == "float32"
    np.testing.assert_array_equal(shared.numpy(), data)
    np.testing.assert_array_equal(ops.from_dlpack(DLPackOnly(t)).numpy(), data)  # 'cpu': a copy
    scale_module().build()(30, DLPackOnly(t.storage.reshape((30,))))  # a kernel writes the memory it names
    np.testing.assert_array_equal(t.numpy(), data * 2)
    del shared
    gc.collect()
    assert len(dlpack._exported) == exported  # every consumer's deleter ran
    t.__dlpack__()  # a capsule nobody takes: its destructor frees it
    gc.collect()
    assert len(dlpack._exported) == exported


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "int16", "uint8", "int64", "bool"])
def test_dlpack_carries_every_dtype(dtype: str) -> None:
    data = (np.arange(7) % 2).astype(ops.empty([1], dtype).storage.dtype)
    t = ops.asarray(data, device="cuda")
    back = ops.from_dlpack(DLPackOnly(t), device="cuda")
    assert back.dtype == dtype
    np.testing.assert_array_equal(back.numpy(), data)


@pytest.mark.gpu
def test_a_dlpack_consumers_stream_waits_on_the_producers(fake_driver: ctypes.CDLL) -> None:
    t = ops.asarray(np.ones(4, np.float32), device="cuda")
    producer, consumer = hidet.cuda.Stream(), hidet.cuda.Stream()
    waits = fake_driver.fake_cuda_waits(int(consumer), int(producer))
    with hidet.cuda.stream(producer):
        t.__dlpack__(stream=int(consumer))
        assert fake_driver.fake_cuda_waits(int(consumer), int(producer)) == waits + 1
        t.__dlpack__(stream=-1)  # the consumer asks for no synchronization
        t.__dlpack__(stream=int(producer))  # the same stream: nothing to wait for
        assert fake_driver.fake_cuda_waits(int(consumer), int(producer)) == waits + 1
        with pytest.raises(BufferError, match="stream 0 is ambiguous"):
            t.__dlpack__(stream=0)
    with hidet.cuda.stream(consumer):  # importing asks the producer for the data on the current stream
        ops.from_dlpack(DLPackOnly(t), device="cuda")
