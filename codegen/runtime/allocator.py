"""The caching allocator of device memory: every device buffer (arrays, compiled graphs' buffers, staged
arguments) comes from here, and a freed buffer is kept for the next request of its size class on its stream.

A request is rounded up to a size class (multiples of 512 bytes up to 1 MiB, then four classes per power of two,
so at most a quarter is wasted); a freed block goes back to the free list of its (stream, size class), and the
next request of that class on that stream takes it without a driver call. Reuse stays on the stream the block was
allocated on: work issued there before the free is ordered before any later use of the block, so no wait is
needed. A block used on another stream as well is recorded as such (`record_stream`): when it is freed, an event is
recorded on each of those streams, and the block is reused only once every one of them has completed (the
allocator looks at them when it is asked for a block, without waiting).

When the driver is out of memory, the cache is released (after the device has finished its work) and the request
retried once; if it still fails, `DeviceOutOfMemoryError` names the request and what is held.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass

from codegen.runtime import cuda_driver

SMALL_GRANULE = 512
SMALL_LIMIT = 1 << 20
CLASS_BITS = 2  # each power-of-two range (2^k, 2^(k+1)] is divided into 2^CLASS_BITS size classes


def size_class(nbytes: int) -> int:
    """The bytes a request of `nbytes` is served with: a multiple of 512 up to 1 MiB, then the next of the four
    sizes a power-of-two range is divided into (so that a block serves requests within 25% of its size)."""
    nbytes = max(int(nbytes), 1)
    if nbytes <= SMALL_LIMIT:
        return -(-nbytes // SMALL_GRANULE) * SMALL_GRANULE
    step = 1 << ((nbytes - 1).bit_length() - 1 - CLASS_BITS)
    return -(-nbytes // step) * step


class DeviceOutOfMemoryError(MemoryError):
    """The device had no memory for a request, even after the cache of freed blocks was released."""


@dataclass
class MemoryStats:
    """What the allocator holds, in bytes and counts. `allocated`: blocks in use (by size class); `reserved`:
    blocks held from the driver (in use or cached); the peaks since the start or `reset_peaks`; `requests`:
    allocations asked for; `driver_allocations`: those the cache could not serve; `cache_releases`: times the
    cache was released (by `empty_cache` or to retry a request the driver refused)."""

    allocated: int = 0
    reserved: int = 0
    peak_allocated: int = 0
    peak_reserved: int = 0
    requests: int = 0
    driver_allocations: int = 0
    cache_releases: int = 0

    @property
    def cached(self) -> int:
        """Bytes held in freed blocks, ready for reuse."""
        return self.reserved - self.allocated

    def as_dict(self) -> dict[str, int]:
        """The statistics by name, `cached` included."""
        return {**self.__dict__, "cached": self.cached}


@dataclass(frozen=True)
class StreamEvents:
    """The driver's event calls that order a block's reuse after other streams' work: `record(stream)` a new event
    recorded on `stream` (completed when the work issued there so far is), `done(event)` whether it has completed,
    `destroy(event)`."""

    record: Callable[[int], object]
    done: Callable[[object], bool]
    destroy: Callable[[object], None]


class CachingAllocator:
    """A size-class cache over the driver's allocation calls: `allocate(nbytes, stream)` an address, `free(ptr)`.

    `driver_allocate(nbytes)` and `driver_free(ptr)` are the driver's calls; `is_out_of_memory(error)` says whether
    an exception of `driver_allocate` means the device has no memory left; `synchronize()` waits for the device
    (before cached blocks go back to the driver); `memory_info()` gives the device's (free, total) bytes for the
    message of an out-of-memory error; `events` the driver's event calls (without them a block used on other
    streams is freed after a `synchronize()`).
    """

    def __init__(self, driver_allocate: Callable[[int], int], driver_free: Callable[[int], None],
                 is_out_of_memory: Callable[[Exception], bool], synchronize: Callable[[], None],
                 memory_info: Callable[[], tuple[int, int]], events: StreamEvents | None = None) -> None:
        self._driver_allocate = driver_allocate
        self._driver_free = driver_free
        self._is_out_of_memory = is_out_of_memory
        self._synchronize = synchronize
        self._memory_info = memory_info
        self._free: dict[tuple[int, int], list[int]] = {}  # (stream, size class) -> cached block addresses
        self._live: dict[int, tuple[int, int]] = {}  # address -> (stream, size class) of each block in use
        self._lock = threading.RLock()  # a finalizer may free a block while this thread allocates
        self.stats = MemoryStats()
        self._events = events
        self._used_on: dict[int, set[int]] = {}  # address -> the other streams a block in use is used on
        # freed blocks waiting for other streams' work: (address, (stream, size class), the events recorded there)
        self._pending: list[tuple[int, tuple[int, int], list[object]]] = []

    def allocate(self, nbytes: int, stream: int = 0) -> int:
        """The address of a block of at least `nbytes` (at least one) for use on `stream`: a cached block of its
        size class when there is one, else a new one from the driver. DeviceOutOfMemoryError when the device
        has no room even after the cache is released."""
        size = size_class(nbytes)
        key = (stream, size)
        with self._lock:
            stats = self.stats
            stats.requests += 1
            if self._pending:
                self._reuse_completed()
            cached = self._free.get(key)
            if cached:
                ptr = cached.pop()
            else:
                ptr = self._from_driver(nbytes, size, stream)
                stats.reserved += size
                stats.driver_allocations += 1
                if stats.reserved > stats.peak_reserved:
                    stats.peak_reserved = stats.reserved
            self._live[ptr] = key
            stats.allocated += size
            if stats.allocated > stats.peak_allocated:
                stats.peak_allocated = stats.allocated
            return ptr

    def free(self, ptr: int) -> None:
        """Return the block at `ptr` (from `allocate`) to the cache of its stream and size class; ValueError for
        an address that is not a block in use."""
        with self._lock:
            key = self._live.pop(ptr, None)
            if key is None:
                raise ValueError(f"device address {ptr:#x} is not a block of the caching allocator in use")
            self.stats.allocated -= key[1]
            streams = self._used_on.pop(ptr, None)
            if streams and self._events is not None:
                self._pending.append((ptr, key, [self._events.record(s) for s in streams]))
                return
            if streams:
                self._synchronize()
            self._free.setdefault(key, []).append(ptr)

    def record_stream(self, ptr: int, stream: int) -> None:
        """Say that the block in use at `ptr` is used by work issued to `stream` too: once freed, it is reused
        only after the work issued to `stream` by then has completed. ValueError for an address that is not a
        block in use."""
        with self._lock:
            key = self._live.get(ptr)
            if key is None:
                raise ValueError(f"device address {ptr:#x} is not a block of the caching allocator in use")
            if stream != key[0]:
                self._used_on.setdefault(ptr, set()).add(stream)

    def _reuse_completed(self, wait: bool = False) -> None:
        """Move the freed blocks whose other streams' work has completed (every one when `wait`: the device has
        finished its work) to the cache."""
        events = self._events
        assert events is not None  # blocks wait only with event calls
        waiting = []
        for ptr, key, recorded in self._pending:
            if wait or all(events.done(e) for e in recorded):
                for e in recorded:
                    events.destroy(e)
                self._free.setdefault(key, []).append(ptr)
            else:
                waiting.append((ptr, key, recorded))
        self._pending = waiting

    def empty_cache(self) -> int:
        """Give every cached block back to the driver (once the device has finished the work that may still use
        them); the bytes released. Blocks in use stay."""
        with self._lock:
            waited = bool(self._pending)
            if waited:  # the blocks waiting for other streams' work are cached once the device is done
                self._synchronize()
                self._reuse_completed(wait=True)
            blocks = [(ptr, size) for (_, size), ptrs in self._free.items() for ptr in ptrs]
            self._free.clear()
            self.stats.cache_releases += 1
            if not blocks:
                return 0
            if not waited:
                self._synchronize()
            released = 0
            for ptr, size in blocks:
                self._driver_free(ptr)
                self.stats.reserved -= size
                released += size
            return released

    def retire_stream(self, stream: int) -> None:
        """Hand the cached blocks of `stream` (whose work has completed: it is about to be destroyed) to the
        default stream, so that they stay reusable when the stream is gone."""
        with self._lock:
            for key in [k for k in self._free if k[0] == stream and stream != 0]:
                self._free.setdefault((0, key[1]), []).extend(self._free.pop(key))
            if stream != 0:
                self._pending = [(ptr, (0, key[1]) if key[0] == stream else key, recorded)
                                 for ptr, key, recorded in self._pending]

    def owns(self, ptr: int) -> bool:
        """Whether `ptr` is a block in use from this allocator."""
        return ptr in self._live

    def _from_driver(self, nbytes: int, size: int, stream: int) -> int:
        """A new block of `size` bytes from the driver; on out-of-memory, the cache released and one retry."""
        try:
            return self._driver_allocate(size)
        except Exception as first:
            if not self._is_out_of_memory(first):
                raise
        self.empty_cache()
        try:
            return self._driver_allocate(size)
        except Exception as second:
            if not self._is_out_of_memory(second):
                raise
            raise DeviceOutOfMemoryError(self._out_of_memory_message(nbytes, size, stream)) from None

    def _out_of_memory_message(self, nbytes: int, size: int, stream: int) -> str:
        try:
            free, total = self._memory_info()
            device = f"; the device has {format_bytes(free)} free of {format_bytes(total)}"
        except Exception:  # noqa: BLE001 - the message is what matters here
            device = ""
        where = f" on stream {stream:#x}" if stream else ""
        blocks = f"{len(self._live)} block" + ("" if len(self._live) == 1 else "s")
        return (f"out of device memory: a request of {format_bytes(nbytes)} ({nbytes} bytes, served as "
                f"{format_bytes(size)}){where} failed after the allocator's cache was released and the request "
                f"retried; arrays in use hold {format_bytes(self.stats.allocated)} ({blocks}){device}. Free "
                f"arrays you no longer need (del them), or use smaller shapes")


def format_bytes(n: int) -> str:
    """`n` bytes in the largest binary unit that keeps it at least 1 (e.g. '1.50 GiB')."""
    value, unit = float(n), "B"
    for next_unit in ("KiB", "MiB", "GiB", "TiB"):
        if value < 1024:
            break
        value, unit = value / 1024, next_unit
    return f"{int(value)} B" if unit == "B" else f"{value:.2f} {unit}"


@functools.cache
def device_allocator() -> CachingAllocator:
    """The process's allocator of GPU memory (over the CUDA driver)."""

    def is_out_of_memory(error: Exception) -> bool:
        return isinstance(error, cuda_driver.CudaDriverError) and error.name == cuda_driver.OUT_OF_MEMORY

    events = StreamEvents(cuda_driver.event_record, cuda_driver.event_done, cuda_driver.event_destroy)
    return CachingAllocator(cuda_driver.mem_alloc, cuda_driver.mem_free, is_out_of_memory,
                            cuda_driver.synchronize, cuda_driver.mem_get_info, events)


def memory_stats() -> dict[str, int]:
    """The GPU memory the caching allocator holds (`MemoryStats`, by name, with `cached`); zeros on the CUDA
    emulator and before any GPU allocation."""
    if device_allocator.cache_info().currsize == 0:
        return MemoryStats().as_dict()
    return device_allocator().stats.as_dict()


def empty_cache() -> int:
    """Give the caching allocator's freed GPU blocks back to the driver; the bytes released (0 on the emulator)."""
    if device_allocator.cache_info().currsize == 0:
        return 0
    return device_allocator().empty_cache()


def reset_peak_memory_stats() -> None:
    """Start the peaks of `memory_stats` again from what is held now."""
    if device_allocator.cache_info().currsize:
        stats = device_allocator().stats
        stats.peak_allocated, stats.peak_reserved = stats.allocated, stats.reserved
