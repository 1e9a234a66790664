"""The runtime's arrays: `hidet.asarray(x, device=...)`, `hidet.empty`, `hidet.zeros`, `hidet.ones`, `hidet.full`,
`hidet.randn`, `hidet.rand`, `.numpy()`.

'cpu' arrays are numpy arrays (of a subclass that adds Hidet's `.numpy()`), passed to kernels without a copy. Those
the allocation functions make have slack and a canary after them (`codegen.runtime.heap_guards`), checked after each
call of a compiled function; `asarray` views the caller's memory where it can, which is not guarded. Every function
takes a dtype as a DSL data type (`hidet.float32`, `hidet.i32`), a name numpy or the DSL knows ('float32', 'f32'),
or a numpy dtype (`numpy_dtypes.numpy_dtype_of`). The operators of `hidet.ops` take these arrays as they take their
own tensors.

On a GPU a `DeviceArray` owns a block of device memory from the caching allocator (`codegen.runtime.allocator`),
allocated for the current stream (`codegen.runtime.streams`) and given back to the cache when the array is
collected. Where CUDA modules run on the emulator, a 'cuda' array lives in host memory (it wraps a numpy array),
so a program written for a GPU runs unchanged. Other libraries' GPU arrays are accepted through
`__cuda_array_interface__`, and ours expose it with the stream their data is ready on (the current stream), as
version 3 of the interface asks.
"""

from __future__ import annotations

import abc
import math
from typing import Any

import numpy as np

from codegen.runtime import cuda_driver, dlpack, streams
from codegen.runtime.allocator import device_allocator
from codegen.runtime.cuda_backend import uses_gpu
from codegen.runtime.heap_guards import guarded_empty
from codegen.runtime.numpy_dtypes import numpy_dtype_of
from codegen.runtime.tensor_methods import TensorMethods


class DeviceArray(TensorMethods):
    """A C-contiguous array in CUDA device memory (or in host memory on the emulator), with torch's conversion
    methods (`.to(...)`, `.cpu()`, `.float()`, `.item()`, ...: `codegen.runtime.tensor_methods`)."""

    __slots__ = ("shape", "dtype", "ptr", "host", "base", "owner", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, ptr: int = 0, host: np.ndarray | None = None,
                 base: DeviceArray | None = None, owner: object = None):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.ptr = ptr
        self.host = host
        self.base = base  # the array whose memory this one views (kept alive by the view; it frees the memory)
        self.owner = owner  # another library's object owning the memory (kept alive; it frees the memory)

    def reshape(self, shape: tuple[int, ...]) -> DeviceArray:
        """A view of the same memory with another shape of the same size."""
        shape = tuple(int(d) for d in shape)
        if int(np.prod(shape, dtype=np.int64)) != int(np.prod(self.shape, dtype=np.int64)):
            raise ValueError(f"cannot reshape a DeviceArray of shape {self.shape} into shape {shape}")
        host = None if self.host is None else self.host.reshape(shape)
        return DeviceArray(shape, self.dtype, self.ptr, host, self.base or self, self.owner)

    @property
    def on_gpu(self) -> bool:
        """True when the data is in GPU memory (False on the emulator)."""
        return self.host is None

    @property
    def nbytes(self) -> int:
        """The size of the data in bytes."""
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def device(self) -> str:
        """Always 'cuda'."""
        return "cuda"

    def numpy(self) -> np.ndarray:
        """A numpy copy of the data."""
        if self.host is not None:
            return self.host.copy()
        out = np.empty(self.shape, self.dtype)
        cuda_driver.copy_to_host(out, self.ptr)
        return out

    def converted(self, device: str, dtype: np.dtype) -> HostArray | DeviceArray:
        """A copy on `device` ('cpu': in host memory, Hidet's `tensor.cpu()`) with elements of `dtype`; a GPU's
        data is converted on the host."""
        values = self.numpy().astype(dtype, copy=False)  # `numpy()` copies already
        return values.view(HostArray) if device == "cpu" else to_device(values)

    def torch(self) -> Any:
        """A torch tensor sharing the data (Hidet's `tensor.torch()`): a CUDA tensor on a GPU; on the emulator,
        whose device memory is host memory, a CPU tensor."""
        import torch

        if self.host is not None:
            return torch.from_numpy(self.host)
        return torch.as_tensor(self, device="cuda")

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.host is not None:
            raise AttributeError("an emulated CUDA array lives in host memory; use .numpy() or pass it to a kernel")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None, "stream": streams.current_stream().interface_number}

    def __dlpack__(self, stream: int | None = None, **kwargs: Any) -> Any:
        """A DLPack capsule of the data, without a copy (`codegen.runtime.dlpack`): on a GPU, of device memory,
        with the consumer's `stream` ordered after the current stream; on the emulator, of host memory."""
        if self.host is not None:
            return self.host.__dlpack__(**kwargs)
        return dlpack.export(self, stream)

    def __dlpack_device__(self) -> tuple[int, int]:
        """(kDLCUDA, 0) on a GPU; (kDLCPU, 0) on the emulator, whose 'cuda' arrays live in host memory."""
        return (2, 0) if self.host is None else (1, 0)

    def __repr__(self) -> str:
        where = "gpu" if self.on_gpu else "emulator"
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device='cuda' ({where}))"

    def __del__(self) -> None:
        if self.host is None and self.base is None and self.owner is None and self.ptr:
            try:
                device_allocator().free(self.ptr)
            except Exception:  # noqa: BLE001 - never raise from a finalizer (e.g. at interpreter exit)
                pass
            self.ptr = 0


def empty_device(shape: Any, dtype: Any = "float32") -> DeviceArray:
    """An uninitialized 'cuda' array."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dtype = np.dtype(dtype)
    if not uses_gpu():
        host = np.empty(shape, dtype)
        return DeviceArray(shape, dtype, host.ctypes.data, host)
    array = DeviceArray(shape, dtype)
    array.ptr = device_allocator().allocate(array.nbytes, streams.current_stream_handle())
    return array


def to_device(x: Any) -> DeviceArray:
    """A 'cuda' copy of array-like `x`."""
    host = np.asarray(x, order="C")  # 0-d arrays stay 0-d (np.ascontiguousarray makes them 1-d)
    if not uses_gpu():
        host = host.copy()
        return DeviceArray(host.shape, host.dtype, host.ctypes.data, host)
    array = empty_device(host.shape, host.dtype)
    cuda_driver.copy_to_device(array.ptr, host)
    return array


def from_dlpack_device(x: Any) -> DeviceArray:
    """A 'cuda' array viewing the GPU memory of DLPack object `x` (its `__dlpack_device__` is a CUDA device),
    without a copy; `x` is asked for its data on the current stream."""
    capsule = x.__dlpack__(stream=streams.current_stream().interface_number)
    ptr, shape, dtype, owner = dlpack.import_capsule(capsule)
    return DeviceArray(shape, dtype, ptr, owner=owner)


class HostArray(np.ndarray, TensorMethods):
    """A numpy array with Hidet's tensor method `.numpy()` and torch's conversion methods (`.to(...)`, `.cuda()`,
    `.float()`, ...: `codegen.runtime.tensor_methods`); kernels take it like any numpy array, and its operators,
    `.item()` and `.tolist()` are numpy's."""

    @property
    def device(self) -> str:
        """Always 'cpu'."""
        return "cpu"

    def numpy(self) -> np.ndarray:
        """A plain numpy copy."""
        return np.array(self)

    def converted(self, device: str, dtype: np.dtype) -> HostArray | DeviceArray:
        """A copy on `device` ('cuda': a GPU, or the emulator) with elements of `dtype`."""
        values = np.asarray(self).astype(dtype, copy=device == "cpu")  # `to_device` copies
        return values.view(HostArray) if device == "cpu" else to_device(values)

    def torch(self) -> Any:
        """A torch CPU tensor sharing the data (Hidet's `tensor.torch()`)."""
        import torch

        return torch.from_numpy(np.asarray(self))


class AnyTensor(abc.ABC):
    """Hidet's `hidet.Tensor`, as a type to test values against: the runtime's arrays (`HostArray`, `DeviceArray`,
    which `hidet.empty`, `hidet.randn` and the other allocation functions make) and the operator library's tensors
    (`stdlib_ops.Tensor`, which `hidet.ops` returns and which registers itself) are its instances. Every operator
    takes either kind, and compiled functions take both."""

    @abc.abstractmethod
    def numpy(self) -> np.ndarray:
        """The data as a numpy array (what every kind of tensor gives)."""


AnyTensor.register(HostArray)
AnyTensor.register(DeviceArray)


def _check_device(device: str) -> str:
    if device not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda', got {device!r}")
    return device


def asarray(x: Any, dtype: Any = None, device: str = "cpu") -> HostArray | DeviceArray:
    """`x` (array-like, or a 'cuda' array) as an array on `device` (a copy only where needed)."""
    if isinstance(x, DeviceArray):
        x = x.host if x.host is not None else x.numpy()
    host = np.asarray(x, dtype=None if dtype is None else numpy_dtype_of(dtype), order="C")
    if _check_device(device) == "cuda":
        return to_device(host)
    return host.view(HostArray)


def _shape(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def empty(shape: Any, dtype: Any = "float32", device: str = "cpu") -> HostArray | DeviceArray:
    """An uninitialized array (on 'cpu', with slack and a canary after it: `codegen.runtime.heap_guards`)."""
    if _check_device(device) == "cuda":
        return empty_device(shape, numpy_dtype_of(dtype))
    return guarded_empty(_shape(shape), numpy_dtype_of(dtype), HostArray)


def full(shape: Any, fill_value: Any, dtype: Any = "float32", device: str = "cpu") -> HostArray | DeviceArray:
    """An array with every element `fill_value`."""
    if _check_device(device) == "cuda":
        return to_device(np.full(_shape(shape), fill_value, numpy_dtype_of(dtype)))
    out = guarded_empty(_shape(shape), numpy_dtype_of(dtype), HostArray)
    out.fill(fill_value)  # in place: no array of the full size besides
    return out


def zeros(shape: Any, dtype: Any = "float32", device: str = "cpu") -> HostArray | DeviceArray:
    """An array of zeros."""
    return full(shape, 0, dtype, device)


def ones(shape: Any, dtype: Any = "float32", device: str = "cpu") -> HostArray | DeviceArray:
    """An array of ones."""
    return full(shape, 1, dtype, device)


def randn(shape: Any, dtype: Any = "float32", mean: float = 0.0, stddev: float = 1.0,
          device: str = "cpu") -> HostArray | DeviceArray:
    """Normally distributed random values (Hidet's parameters, in Hidet's order)."""
    return copy_of(np.random.normal(mean, stddev, _shape(shape)).astype(numpy_dtype_of(dtype)), device)


def rand(shape: Any, dtype: Any = "float32", device: str = "cpu") -> HostArray | DeviceArray:
    """Random values uniform in [0, 1)."""
    return copy_of(np.random.random_sample(_shape(shape)).astype(numpy_dtype_of(dtype)), device)


def copy_of(values: np.ndarray, device: str = "cpu") -> HostArray | DeviceArray:
    """An array of `device` holding a copy of `values` (on 'cpu', guarded and cache line aligned: `heap_guards`)."""
    if _check_device(device) == "cuda":
        return to_device(values)
    out = guarded_empty(values.shape, values.dtype, HostArray)
    out[...] = values
    return out
