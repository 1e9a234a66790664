"""The caching allocator's bookkeeping (`codegen.runtime.allocator`) over a stand-in driver of Python callables:
size classes, reuse per stream and size class, statistics, `empty_cache`, and the out-of-memory path (the cache
released, one retry, then a clear error). The allocator over the real driver is tested on the (simulated) GPU by
test_device_runtime.py."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codegen.runtime.allocator import CachingAllocator, DeviceOutOfMemoryError, format_bytes, size_class


class DriverOutOfMemory(Exception):
    """What the stand-in driver raises when a request does not fit."""


class StandInDriver:
    """A device of `capacity` bytes: allocations at increasing addresses, frees checked, synchronizations counted."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.live: dict[int, int] = {}
        self.next_address = 1 << 32
        self.calls = 0
        self.synchronizations = 0

    def allocate(self, nbytes: int) -> int:
        self.calls += 1
        if sum(self.live.values()) + nbytes > self.capacity:
            raise DriverOutOfMemory(nbytes)
        address = self.next_address
        self.next_address += nbytes
        self.live[address] = nbytes
        return address

    def free(self, address: int) -> None:
        del self.live[address]

    def synchronize(self) -> None:
        self.synchronizations += 1

    def allocator(self) -> CachingAllocator:
        return CachingAllocator(self.allocate, self.free, lambda e: isinstance(e, DriverOutOfMemory),
                                self.synchronize, lambda: (self.capacity - sum(self.live.values()), self.capacity))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 1 << 40))
def test_a_size_class_serves_its_request_within_a_quarter(n: int) -> None:
    size = size_class(n)
    assert size >= n
    assert size % 512 == 0
    if n > 512:  # up to 1 MiB: the next multiple of 512; beyond, at most a quarter more
        assert size - n < 512 if n <= 1 << 20 else size <= n * 1.25
    assert size_class(size) == size  # a class is its own class


def test_size_classes_at_their_boundaries() -> None:
    assert [size_class(n) for n in (1, 512, 513, 1 << 20)] == [512, 512, 1024, 1 << 20]
    mib = 1 << 20
    assert [size_class(n) for n in (mib + 1, 1280 * 1024, 1280 * 1024 + 1, 2 * mib, 2 * mib + 1)] == \
        [1280 * 1024, 1280 * 1024, 1536 * 1024, 2 * mib, 2560 * 1024]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 5000), st.sampled_from([0, 7])), min_size=1, max_size=30))
def test_freed_blocks_are_reused_for_their_size_class_on_their_stream(requests: list[tuple[int, int]]) -> None:
    driver = StandInDriver(1 << 30)
    allocator = driver.allocator()
    first = [(allocator.allocate(n, s), n, s) for n, s in requests]
    assert driver.calls == len(requests)
    assert len({ptr for ptr, _, _ in first}) == len(first)
    for ptr, _, _ in first:
        allocator.free(ptr)
    assert allocator.stats.allocated == 0
    assert allocator.stats.reserved == sum(size_class(n) for n, _ in requests)
    again = [(allocator.allocate(n, s), n, s) for n, s in requests]
    assert driver.calls == len(requests)  # every request was served from the cache
    by_address = {ptr: (size_class(n), s) for ptr, n, s in first}
    for ptr, n, s in again:
        assert by_address[ptr] == (size_class(n), s)  # the same size class, the same stream
    assert allocator.stats.requests == 2 * len(requests)
    assert allocator.stats.driver_allocations == len(requests)


def test_a_block_is_not_reused_on_another_stream() -> None:
    driver = StandInDriver(1 << 30)
    allocator = driver.allocator()
    a = allocator.allocate(1000, stream=0)
    allocator.free(a)
    b = allocator.allocate(1000, stream=5)
    assert b != a and driver.calls == 2
    assert allocator.allocate(1000, stream=0) == a and driver.calls == 2


def test_a_retired_streams_blocks_go_to_the_default_stream() -> None:
    driver = StandInDriver(1 << 30)
    allocator = driver.allocator()
    blocks = [allocator.allocate(n, stream=9) for n in (100, 100, 70_000)]
    for ptr in blocks:
        allocator.free(ptr)
    allocator.retire_stream(9)
    assert sorted(allocator.allocate(n, stream=0) for n in (100, 100, 70_000)) == sorted(blocks)
    assert driver.calls == 3
    assert allocator.allocate(100, stream=9) not in blocks


def test_statistics_follow_allocations_peaks_and_frees() -> None:
    driver = StandInDriver(1 << 30)
    allocator = driver.allocator()
    a = allocator.allocate(3000)
    b = allocator.allocate(100_000)
    assert allocator.stats.allocated == size_class(3000) + size_class(100_000)
    allocator.free(b)
    stats = allocator.stats.as_dict()
    assert stats["allocated"] == size_class(3000)
    assert stats["reserved"] == stats["peak_allocated"] == stats["peak_reserved"] == size_class(3000) + \
        size_class(100_000)
    assert stats["cached"] == size_class(100_000)
    allocator.free(a)
    assert allocator.stats.allocated == 0


def test_empty_cache_releases_cached_blocks_after_a_synchronization_and_keeps_those_in_use() -> None:
    driver = StandInDriver(1 << 30)
    allocator = driver.allocator()
    kept = allocator.allocate(700)
    for n in (10, 2000, 5_000_000):
        allocator.free(allocator.allocate(n))
    released = allocator.empty_cache()
    assert released == size_class(10) + size_class(2000) + size_class(5_000_000)
    assert driver.synchronizations == 1
    assert list(driver.live) == [kept]
    assert allocator.stats.reserved == allocator.stats.allocated == size_class(700)
    assert allocator.empty_cache() == 0 and driver.synchronizations == 1  # nothing cached: no synchronization


def test_freeing_an_unknown_or_freed_address_is_refused() -> None:
    allocator = StandInDriver(1 << 20).allocator()
    a = allocator.allocate(10)
    allocator.free(a)
    with pytest.raises(ValueError, match="not a block of the caching allocator in use"):
        allocator.free(a)
    with pytest.raises(ValueError, match="0x1234"):
        allocator.free(0x1234)


def test_out_of_memory_releases_the_cache_and_retries_once() -> None:
    driver = StandInDriver(10 << 20)
    allocator = driver.allocator()
    allocator.free(allocator.allocate(6 << 20))  # cached: the driver holds 6 MiB
    big = allocator.allocate(7 << 20)  # fits only once the cache is released
    assert driver.live == {big: 7 << 20}
    assert allocator.stats.cache_releases == 1
    assert allocator.stats.reserved == allocator.stats.allocated == 7 << 20


def test_out_of_memory_after_the_retry_names_the_request_and_what_is_held() -> None:
    driver = StandInDriver(10 << 20)
    allocator = driver.allocator()
    allocator.allocate(6 << 20)
    allocator.free(allocator.allocate(1 << 20))
    with pytest.raises(DeviceOutOfMemoryError) as excinfo:
        allocator.allocate(5 << 20, stream=0xAB)
    message = str(excinfo.value)
    assert "a request of 5.00 MiB (5242880 bytes" in message
    assert "on stream 0xab" in message
    assert "arrays in use hold 6.00 MiB (1 block)" in message
    assert "the device has 4.00 MiB free of 10.00 MiB" in message  # the cached 1 MiB was released
    assert isinstance(excinfo.value, MemoryError)
    assert allocator.stats.allocated == 6 << 20  # the failed request holds nothing


def test_other_driver_errors_pass_through_without_a_retry() -> None:
    def failing(nbytes: int) -> int:
        raise RuntimeError("CUDA_ERROR_INVALID_CONTEXT")

    allocator = CachingAllocator(failing, lambda p: None, lambda e: False, lambda: None, lambda: (0, 0))
    with pytest.raises(RuntimeError, match="INVALID_CONTEXT"):
        allocator.allocate(10)
    assert allocator.stats.cache_releases == 0 and allocator.stats.allocated == 0


def test_bytes_are_formatted_in_binary_units() -> None:
    assert [format_bytes(n) for n in (0, 1023, 1024, 1536 * 1024, 3 << 30)] == \
        ["0 B", "1023 B", "1.00 KiB", "1.50 MiB", "3.00 GiB"]
