"""What a compiled graph keeps between calls for one set of symbolic sizes: its planned intermediate buffers and,
on CUDA once captured, the CUDA graph of its launches with the fixed input and output buffers that graph reads and
writes (a CPU graph keeps its buffers and its launches prepared as direct C calls over them: `direct_launches`).

A call with sizes seen before allocates no intermediates. Its first call runs the kernels plainly (so a kernel's
first launch, which may set its attributes, happens outside any capture); then the launches are captured over
buffers of their own: one per graph input, which later calls fill by a copy ordered on the current stream (from
the device, or straight from the host for a numpy input), and one per graph output, copied into a new array that
the call returns (from the caching allocator, so a call's results stay the caller's while later calls run). A
replay is then: copy the inputs in, launch the graph, copy the outputs out.

Calls on different streams share the buffers safely: a call on another stream than the previous one makes its
stream wait for the previous stream's work first. A compiled graph keeps the workspaces of its `MAX_WORKSPACES`
most recently used sets of sizes (`Workspaces`); an older one is dropped, its blocks back in the caching
allocator once the stream they were allocated on is ordered after its last use.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codegen.runtime import (
    CudaGraph,
    DeviceArray,
    copy_device_to_device,
    copy_to_device_async,
    current_stream_handle,
    empty,
    stream_wait,
    uses_gpu,
)

MAX_WORKSPACES = 8
"""The sets of symbolic sizes whose buffers (and captured graph) a compiled graph keeps at once."""


@dataclass
class Workspace:
    """The buffers of one set of symbolic sizes (`buffers`: the plan's intermediates by their ref) and, after
    a capture, `graph` with its fixed `inputs` (by input index) and `outputs` (by output ref). `capture_failed`
    records that the launches cannot be captured, so that calls launch them plainly. On the CPU, `direct` holds the
    launches prepared as direct C calls over these buffers (`direct_launches.DirectLaunches`; None until the first
    call), dropped with them."""

    buffers: dict[Any, Any]
    inputs: dict[int, Any] = field(default_factory=dict)
    outputs: dict[Any, Any] = field(default_factory=dict)
    graph: CudaGraph | None = None
    capture_failed: bool = False
    home_stream: int = field(default_factory=current_stream_handle)  # where its blocks were allocated
    last_stream: int | None = None
    direct: Any = None

    def order_after_last_use(self) -> None:
        """Order the current stream's work after the work of the last call that used these buffers (on another
        stream), and note the current stream as their user."""
        stream = current_stream_handle()
        if self.last_stream is not None and self.last_stream != stream and uses_gpu():
            stream_wait(stream, self.last_stream)
        self.last_stream = stream

    def fill_inputs(self, hosts: list[Any]) -> None:
        """Copy each graph input (a 'cuda' array or a numpy array) into its fixed buffer."""
        stream = current_stream_handle()
        for k, target in self.inputs.items():
            value = hosts[k]
            if isinstance(value, DeviceArray) and value.on_gpu:
                copy_device_to_device(target.ptr, value.ptr, target.nbytes, stream)
            else:
                copy_to_device_async(target.ptr, np.ascontiguousarray(value), stream)

    def take_output(self, ref: Any, device: str) -> Any:
        """A new array holding the fixed output buffer `ref`'s contents (copied on the current stream)."""
        source = self.outputs[ref]
        result = empty(source.shape, source.dtype, device)
        copy_device_to_device(result.ptr, source.ptr, source.nbytes, current_stream_handle())
        return result


class Workspaces:
    """A compiled graph's workspaces by their sets of sizes, the `MAX_WORKSPACES` most recently used."""

    def __init__(self) -> None:
        self._by_sizes: OrderedDict[tuple[tuple[str, int], ...], Workspace] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_sizes)

    def get(self, key: tuple[tuple[str, int], ...]) -> Workspace | None:
        """The workspace of `key` (now the most recently used), None when there is none."""
        workspace = self._by_sizes.get(key)
        if workspace is not None:
            self._by_sizes.move_to_end(key)
        return workspace

    def add(self, key: tuple[tuple[str, int], ...], workspace: Workspace) -> None:
        """Keep `workspace` for `key`, dropping the least recently used one beyond `MAX_WORKSPACES`."""
        self._by_sizes[key] = workspace
        while len(self._by_sizes) > MAX_WORKSPACES:
            _, dropped = self._by_sizes.popitem(last=False)
            last = dropped.last_stream
            if last is not None and last != dropped.home_stream and uses_gpu():
                stream_wait(dropped.home_stream, last)  # its blocks are reused on their home stream
