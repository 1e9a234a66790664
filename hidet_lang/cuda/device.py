"""The GPU's runtime, as `hidet.cuda` offers it: streams (`Stream`, `current_stream`, `with stream(s):`,
`synchronize`), the caching allocator's memory (`memory_stats`, `empty_cache`, `reset_peak_memory_stats`) and
`record_stream`, which keeps a buffer used on another stream from being reused before that stream's work is done.

Kernel launches of CUDA modules, eager operators and compiled graphs go to the calling thread's current stream;
device arrays come from the caching allocator. On the CUDA emulator streams are names only and the statistics
stay zero ('cuda' arrays live in host memory there).
"""

from __future__ import annotations

from typing import Any

from codegen.runtime.allocator import (
    DeviceOutOfMemoryError,
    device_allocator,
    empty_cache,
    memory_stats,
    reset_peak_memory_stats,
)
from codegen.runtime.streams import Stream, as_stream, current_stream, default_stream, stream, synchronize


def record_stream(tensor: Any, on: Any) -> None:
    """Say that work issued to stream `on` (a `Stream`, or a CUstream handle) uses `tensor`'s device memory (a
    'cuda' array or tensor, or a view of one): when the memory is freed, the caching allocator reuses it only once
    the work issued to `on` by then has completed, as torch's `Tensor.record_stream` does. Nothing to do on the
    emulator, for memory another library owns, or for the stream the memory was allocated on."""
    array = getattr(tensor, "storage", tensor)  # a tensor holds its runtime array
    if getattr(array, "device", None) != "cuda" or not hasattr(array, "on_gpu"):
        raise TypeError(f"record_stream takes a 'cuda' array or tensor, not {type(tensor).__name__}")
    root = array.base or array
    if not root.on_gpu or root.owner is not None:
        return
    device_allocator().record_stream(root.ptr, int(as_stream(on)))


__all__ = ["DeviceOutOfMemoryError", "Stream", "current_stream", "default_stream", "empty_cache", "memory_stats",
           "record_stream", "reset_peak_memory_stats", "stream", "synchronize"]
