"""CUDA graphs: kernel launches captured once on a stream and replayed later as one launch of the driver.

`CudaGraph.capture(work)` runs `work()` with the calling thread's current stream set to a capture stream of its
own (a non-blocking stream, since the legacy default stream cannot be captured): the kernel launches `work`
issues there are recorded by the driver, with their arguments' values as they were at capture (device addresses
included, so a captured kernel always reads and writes the same buffers), and nothing runs. `graph.launch()` then
issues all of them to the current stream at the cost of one launch. Work that cannot be captured (a synchronous
copy, such as a check that reads a device assertion's flag after a launch) makes the capture fail with
`CaptureFailedError`; the caller runs the work plainly instead. Graphs exist on a GPU only: on the CUDA emulator
kernels run as they are called (`capture_supported()` is False).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from codegen.runtime import cuda_driver, streams
from codegen.runtime.cuda_backend import uses_gpu


class CaptureFailedError(RuntimeError):
    """The work given to `CudaGraph.capture` did something a stream capture cannot record (nothing of it ran)."""


def capture_supported() -> bool:
    """Whether CUDA graphs can be captured here: CUDA modules run on a GPU (not on the emulator)."""
    return uses_gpu()


_thread = threading.local()


def _capture_stream() -> int:
    """The calling thread's capture stream (made on first use and kept for the thread's captures)."""
    handle = getattr(_thread, "capture_stream", None)
    if handle is None:
        handle = _thread.capture_stream = cuda_driver.capture_stream_create()
    return handle


class CudaGraph:
    """An executable CUDA graph made by `capture`; `launch()` replays its kernels on the current stream. The
    driver's graph is destroyed when this object is collected."""

    __slots__ = ("_executable",)

    def __init__(self, executable: Any) -> None:
        self._executable = executable

    @classmethod
    def capture(cls, work: Callable[[], None]) -> CudaGraph:
        """The graph of the kernel launches `work()` issues to the current stream (which is a capture stream
        while it runs). CaptureFailedError, with nothing launched, when the driver refused part of the work."""
        stream = _capture_stream()
        with streams.stream(streams.Stream.wrap(stream)):
            cuda_driver.begin_capture(stream)
            try:
                work()
            except BaseException as failure:  # an interrupt too: the thread must not be left capturing
                _abandon_capture(stream)
                if not isinstance(failure, Exception):
                    raise
                raise CaptureFailedError(f"the launches could not be captured: {failure}") from failure
            try:
                graph = cuda_driver.end_capture(stream)
            except cuda_driver.CudaDriverError as failure:
                raise CaptureFailedError(f"the launches could not be captured: {failure}") from failure
        try:
            executable = cuda_driver.graph_instantiate(graph)
        finally:
            cuda_driver.graph_destroy(graph)
        return cls(executable)

    def launch(self) -> None:
        """Issue the graph's kernels to the calling thread's current stream, as one driver launch."""
        cuda_driver.graph_launch(self._executable, streams.current_stream_handle())

    def __del__(self) -> None:
        executable, self._executable = getattr(self, "_executable", None), None
        if executable is not None:
            try:
                cuda_driver.graph_exec_destroy(executable)
            except Exception:  # noqa: BLE001 - never raise from a finalizer (e.g. at interpreter exit)
                pass


def _abandon_capture(stream: int) -> None:
    """End a capture whose work failed, discarding whatever it recorded."""
    try:
        graph = cuda_driver.end_capture(stream)
    except cuda_driver.CudaDriverError:  # the failure invalidated the capture: there is no graph
        return
    cuda_driver.graph_destroy(graph)
