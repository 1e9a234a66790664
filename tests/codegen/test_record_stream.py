"""`record_stream`: a device buffer used on another stream is reused by the caching allocator only once the work
that stream had been given when the buffer was freed has completed (events), in the allocator with fake driver
calls, and through `hidet.cuda.record_stream` on the simulated GPU (whose driver holds a stream's work in flight
on request)."""

from __future__ import annotations

import ctypes
import gc
from collections.abc import Iterator

import numpy as np
import pytest

import hidet_lang as hidet
import stdlib_ops as ops
from codegen.runtime.allocator import CachingAllocator, StreamEvents
from codegen.runtime.arrays import uses_gpu
from hidet_lang.cuda import record_stream

SIDE = 7  # a stream handle other than the default stream's (0)


class FakeDevice:
    """Driver calls of a device whose streams' work completes when the test says so."""

    def __init__(self) -> None:
        self.next_address = 0x1000
        self.busy: set[int] = set()  # streams whose work issued so far has not completed
        self.events: dict[int, tuple[int, bool]] = {}  # event -> (stream, done)
        self.synchronized = 0

    def allocate(self, nbytes: int) -> int:
        self.next_address += 1 << 20
        return self.next_address

    def record(self, stream: int) -> int:
        event = len(self.events) + 1
        self.events[event] = (stream, stream not in self.busy)
        return event

    def done(self, event: int) -> bool:
        return self.events[event][1]

    def destroy(self, event: int) -> None:
        del self.events[event]

    def finish(self, stream: int) -> None:
        """The work issued to `stream` so far completes."""
        self.busy.discard(stream)
        self.events = {e: (s, done or s == stream) for e, (s, done) in self.events.items()}

    def synchronize(self) -> None:
        self.synchronized += 1
        for s in list(self.busy):
            self.finish(s)

    def allocator(self) -> CachingAllocator:
        return CachingAllocator(self.allocate, lambda ptr: None, lambda error: False, self.synchronize,
                                lambda: (0, 0), StreamEvents(self.record, self.done, self.destroy))


def test_a_block_used_on_another_stream_waits_for_its_work() -> None:
    device = FakeDevice()
    allocator = device.allocator()
    block = allocator.allocate(1000)
    device.busy.add(SIDE)
    allocator.record_stream(block, SIDE)
    allocator.free(block)
    other = allocator.allocate(1000)
    assert other != block  # the side stream may still read it
    assert device.synchronized == 0  # no wait: the allocator asks the events
    device.finish(SIDE)
    assert allocator.allocate(1000) == block
    assert device.events == {}  # the event recorded at the free is gone with the wait


def test_a_block_whose_other_streams_were_done_at_the_free_is_reused_at_once() -> None:
    device = FakeDevice()
    allocator = device.allocator()
    block = allocator.allocate(1000)
    allocator.record_stream(block, SIDE)
    allocator.free(block)
    device.busy.add(SIDE)  # work issued after the free does not hold the block
    assert allocator.allocate(1000) == block


def test_the_allocation_stream_itself_needs_no_event() -> None:
    device = FakeDevice()
    allocator = device.allocator()
    block = allocator.allocate(1000, stream=SIDE)
    device.busy.add(SIDE)
    allocator.record_stream(block, SIDE)
    allocator.free(block)
    assert device.events == {} and allocator.allocate(1000, stream=SIDE) == block


def test_empty_cache_waits_for_the_recorded_work_then_releases_the_block() -> None:
    device = FakeDevice()
    allocator = device.allocator()
    block = allocator.allocate(1 << 16)
    device.busy.add(SIDE)
    allocator.record_stream(block, SIDE)
    allocator.free(block)
    assert allocator.stats.cached == 1 << 16
    assert allocator.empty_cache() == 1 << 16
    assert device.synchronized == 1 and device.events == {} and allocator.stats.reserved == 0


def test_a_retired_stream_hands_its_waiting_blocks_to_the_default_stream() -> None:
    device = FakeDevice()
    allocator = device.allocator()
    block = allocator.allocate(1000, stream=SIDE)
    device.busy.add(3)
    allocator.record_stream(block, 3)
    allocator.free(block)
    allocator.retire_stream(SIDE)
    device.finish(3)
    assert allocator.allocate(1000) == block


def test_record_stream_refuses_an_address_not_in_use() -> None:
    allocator = FakeDevice().allocator()
    block = allocator.allocate(10)
    allocator.free(block)
    with pytest.raises(ValueError, match="not a block of the caching allocator in use"):
        allocator.record_stream(block, SIDE)


def test_record_stream_refuses_what_is_not_a_cuda_array() -> None:
    with pytest.raises(TypeError, match="record_stream takes a 'cuda' array or tensor"):
        record_stream(np.zeros(3), hidet.cuda.default_stream())


@pytest.fixture
def fake_driver() -> Iterator[ctypes.CDLL]:
    """The simulated GPU's driver with its control of streams' completion; no stream held after the test."""
    if not uses_gpu():
        pytest.skip("the allocator's events are the GPU's (this runs on the simulated GPU)")
    lib = ctypes.CDLL("libcuda.so.1")
    if not hasattr(lib, "fake_cuda_hold_stream"):
        pytest.skip("holds a stream's work in flight, which only the simulated GPU's driver does")
    lib.fake_cuda_hold_stream.argtypes = [ctypes.c_void_p, ctypes.c_int]
    yield lib
    lib.fake_cuda_hold_stream(None, 0)


def test_a_freed_array_used_on_another_stream_is_reused_after_its_work(fake_driver: ctypes.CDLL) -> None:
    side = hidet.cuda.Stream()
    a = ops.asarray(np.ones(1000, np.float32), device="cuda")
    address = a.storage.ptr
    fake_driver.fake_cuda_hold_stream(int(side), 1)
    a.record_stream(side)
    del a
    gc.collect()
    b = hidet.zeros([1000], device="cuda")
    assert b.ptr != address  # the side stream's work may still use it
    fake_driver.fake_cuda_hold_stream(int(side), 0)
    c = hidet.zeros([1000], device="cuda")
    assert c.ptr == address
    del b, c


def test_record_stream_of_a_view_records_the_memory_it_views(fake_driver: ctypes.CDLL) -> None:
    side = hidet.cuda.Stream()
    a = hidet.zeros([1000], device="cuda")
    address = a.ptr
    fake_driver.fake_cuda_hold_stream(int(side), 1)
    record_stream(a.reshape((10, 100)), side)
    del a
    gc.collect()
    assert hidet.zeros([1000], device="cuda").ptr != address
