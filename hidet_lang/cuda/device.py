"""The GPU's runtime, as `hidet.cuda` offers it: streams (`Stream`, `current_stream`, `with stream(s):`,
`synchronize`) and the caching allocator's memory (`memory_stats`, `empty_cache`, `reset_peak_memory_stats`).

Kernel launches of CUDA modules, eager operators and compiled graphs go to the calling thread's current stream;
device arrays come from the caching allocator. On the CUDA emulator streams are names only and the statistics
stay zero ('cuda' arrays live in host memory there).
"""

from __future__ import annotations

from codegen.runtime.allocator import DeviceOutOfMemoryError, empty_cache, memory_stats, reset_peak_memory_stats
from codegen.runtime.streams import Stream, current_stream, default_stream, stream, synchronize

__all__ = ["DeviceOutOfMemoryError", "Stream", "current_stream", "default_stream", "empty_cache", "memory_stats",
           "reset_peak_memory_stats", "stream", "synchronize"]
