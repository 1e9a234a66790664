"""Tensor arguments of a GPU call: device pointers of 'cuda' arrays, or numpy arrays staged through the device."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from codegen.runtime import cuda_driver
from codegen.runtime.arguments import as_array, check_array, check_dtype_and_shape, read_only_message
from codegen.runtime.arrays import DeviceArray


def device_argument(value: Any, func: str, param: str, dtype: np.dtype, shape: tuple[int, ...] | None,
                    written: bool) -> int | np.ndarray:
    """`value` checked for a tensor parameter of a GPU call: its device address ('cuda' arrays and objects with
    `__cuda_array_interface__`), or the numpy array that `stage` will copy to the device; read-only memory only for
    a parameter that the function never writes (not `written`). Nothing is allocated here, so that a bad argument
    is refused before any device memory is used."""
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
        return int(address)
    array = value.host if isinstance(value, DeviceArray) else as_array(value, func, param, dtype)
    if (array.dtype != dtype or (shape is not None and array.shape != shape) or not array.flags.c_contiguous
            or (written and not array.flags.writeable)):
        check_array(func, param, array, dtype, shape, written)
    return array


def stage(staged: list[tuple[np.ndarray, int, bool]], arguments: tuple[int | np.ndarray, ...],
          written: tuple[bool, ...]) -> tuple[int, ...]:
    """The device addresses of checked tensor `arguments`: each numpy array is copied to a new device buffer,
    recorded in `staged` for `release`, which copies back those the kernel may write (`written`, one flag an
    argument). One array passed twice is staged once, so that an in-place call (the same array as input and
    output) gets its result back rather than the input's untouched copy."""
    pointers = []
    by_identity: dict[int, int] = {}  # id of a staged array -> its index in `staged`
    for argument, writes in zip(arguments, written, strict=True):
        if isinstance(argument, np.ndarray):
            index = by_identity.get(id(argument))
            if index is None:
                index = by_identity[id(argument)] = len(staged)
                staged.append((argument, cuda_driver.mem_alloc(argument.nbytes), writes))
                cuda_driver.copy_to_device(staged[index][1], argument)
            elif writes:
                staged[index] = (argument, staged[index][1], True)
            argument = staged[index][1]
        pointers.append(argument)
    return tuple(pointers)


def release(staged: list[tuple[np.ndarray, int, bool]], copy_back: bool) -> None:
    """Copy the staged numpy arrays the kernel may write back from the device (when `copy_back`) and free every
    device buffer. Every buffer is freed even when a copy fails (after a fault in a kernel, each call reports it);
    the first failure is raised."""
    first: cuda_driver.CudaDriverError | None = None
    while staged:
        array, ptr, written = staged.pop()
        if copy_back and written and first is None:
            first = _attempt(cuda_driver.copy_to_host, array, ptr)
        freed = _attempt(cuda_driver.mem_free, ptr)
        first = first or freed
    if first is not None:
        raise first


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
