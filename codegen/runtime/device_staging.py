"""Tensor arguments of a GPU call: device pointers of 'cuda' arrays (and of other libraries' GPU arrays, whose
stream the current stream waits on), or numpy arrays staged through the device in blocks of the caching
allocator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from codegen.runtime import cuda_driver, streams
from codegen.runtime.allocator import device_allocator
from codegen.runtime.argument_checks import as_array, check_array, check_dtype_and_shape, read_only_message
from codegen.runtime.arrays import DeviceArray, from_dlpack_device


def device_argument(value: Any, func: str, param: str, dtype: np.dtype, shape: tuple[int, ...] | None,
                    written: bool) -> int | np.ndarray:
    """`value` checked for a tensor parameter of a GPU call: its device address ('cuda' arrays, objects with
    `__cuda_array_interface__`, and GPU tensors through DLPack), or the numpy array that `stage` will copy to the
    device; read-only memory only for a parameter that the function never writes (not `written`). Nothing is
    allocated here, so that a bad argument is refused before any device memory is used. An interface that names
    the stream its data is produced on (version 3's "stream") has the current stream wait on that stream's work;
    a DLPack tensor is asked for its data on the current stream."""
    if isinstance(value, DeviceArray) and value.on_gpu:
        check_dtype_and_shape(func, param, value.dtype, value.shape, dtype, shape)
        return value.ptr
    interface = getattr(value, "__cuda_array_interface__", None) if not isinstance(value, np.ndarray) else None
    if interface is not None:
        got = np.dtype(interface["typestr"])
        check_dtype_and_shape(func, param, got, interface["shape"], dtype, shape)
        strides = interface.get("strides")
        if strides is not None and tuple(strides) != _contiguous_strides(interface["shape"], got.itemsize):
            raise ValueError(f"{func}(): parameter '{param}' must be a C-contiguous device array")
        address, read_only = interface["data"]
        if written and read_only:
            raise ValueError(read_only_message(func, param))
        producer = interface.get("stream")
        if producer is not None:
            wait_for_producer(int(producer))
        return int(address)
    if _on_a_gpu_by_dlpack(value):  # e.g. a JAX array: its memory, without a copy
        shared = from_dlpack_device(value)
        check_dtype_and_shape(func, param, shared.dtype, shared.shape, dtype, shape)
        return shared.ptr
    array = value.host if isinstance(value, DeviceArray) else as_array(value, func, param, dtype)
    if (array.dtype != dtype or (shape is not None and array.shape != shape) or not array.flags.c_contiguous
            or (written and not array.flags.writeable)):
        check_array(func, param, array, dtype, shape, written)
    return array


def stage(staged: list[tuple[np.ndarray, int, bool]], arguments: tuple[int | np.ndarray, ...],
          written: tuple[bool, ...]) -> tuple[int, ...]:
    """The device addresses of checked tensor `arguments`: each numpy array is copied to a new device buffer,
    recorded in `staged` for `release`, which copies back those the kernel may write (`written`, one flag an
    argument). The buffers come from the caching allocator, for the current stream. One array passed twice is
    staged once, so that an in-place call (the same array as input and output) gets its result back rather than
    the input's untouched copy."""
    pointers = []
    by_identity: dict[int, int] = {}  # id of a staged array -> its index in `staged`
    for argument, writes in zip(arguments, written, strict=True):
        if isinstance(argument, np.ndarray):
            index = by_identity.get(id(argument))
            if index is None:
                index = by_identity[id(argument)] = len(staged)
                ptr = device_allocator().allocate(argument.nbytes, streams.current_stream_handle())
                staged.append((argument, ptr, writes))
                cuda_driver.copy_to_device(staged[index][1], argument)
            elif writes:
                staged[index] = (argument, staged[index][1], True)
            argument = staged[index][1]
        pointers.append(argument)
    return tuple(pointers)


def release(staged: list[tuple[np.ndarray, int, bool]], copy_back: bool) -> None:
    """Copy the staged numpy arrays the kernel may write back from the device (when `copy_back`) and free every
    device buffer (back to the allocator's cache). Every buffer is freed even when a copy fails (after a fault in
    a kernel, each call reports it); the first failure is raised."""
    first: cuda_driver.CudaDriverError | None = None
    while staged:
        array, ptr, written = staged.pop()
        if copy_back and written and first is None:
            first = _attempt(cuda_driver.copy_to_host, array, ptr)
        device_allocator().free(ptr)
    if first is not None:
        raise first


def wait_for_producer(producer: int) -> None:
    """Order the current stream after the work issued so far to stream `producer` (a CUDA array interface's
    stream number: 1 for the legacy default stream, else a CUstream handle); nothing when they are the same."""
    current = streams.current_stream_handle()
    handle = 0 if producer == streams.LEGACY_DEFAULT_STREAM else producer
    if handle != current:
        cuda_driver.stream_wait(current, handle)


def _on_a_gpu_by_dlpack(value: Any) -> bool:
    """Whether `value` (no numpy or device array) says through DLPack that its data is in GPU memory."""
    if isinstance(value, (np.ndarray, DeviceArray)):
        return False
    device = getattr(value, "__dlpack_device__", None)
    return device is not None and hasattr(value, "__dlpack__") and device()[0] in (2, 13)  # kDLCUDA(Managed)


def _attempt(call: Callable[..., None], *args: Any) -> cuda_driver.CudaDriverError | None:
    try:
        call(*args)
    except cuda_driver.CudaDriverError as e:
        return e
    return None


def _contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for d in reversed(shape):
        strides.append(step)
        step *= d
    return tuple(reversed(strides))
