"""Arrays on the CUDA device: `hidet.asarray(x, device='cuda')`, `hidet.empty(shape, device='cuda')`, `.numpy()`.

On a GPU a `DeviceArray` owns device memory (freed when the array is collected). Where CUDA modules run on the
emulator, a 'cuda' array lives in host memory (it wraps a numpy array), so a program written for a GPU runs
unchanged. Other libraries' GPU arrays are accepted through `__cuda_array_interface__`, and ours expose it.
"""

from __future__ import annotations

from typing import Any

import numpy as np


class DeviceArray:
    """A C-contiguous array in CUDA device memory (or in host memory on the emulator)."""

    __slots__ = ("shape", "dtype", "ptr", "host", "__weakref__")

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, ptr: int = 0, host: np.ndarray | None = None):
        self.shape = tuple(int(d) for d in shape)
        self.dtype = np.dtype(dtype)
        self.ptr = ptr
        self.host = host

    @property
    def on_gpu(self) -> bool:
        """True when the data is in GPU memory (False on the emulator)."""
        return self.host is None

    @property
    def nbytes(self) -> int:
        """The size of the data in bytes."""
        return int(np.prod(self.shape, dtype=np.int64)) * self.dtype.itemsize

    @property
    def device(self) -> str:
        """Always 'cuda'."""
        return "cuda"

    def numpy(self) -> np.ndarray:
        """A numpy copy of the data."""
        if self.host is not None:
            return self.host.copy()
        from codegen import cuda_driver

        out = np.empty(self.shape, self.dtype)
        cuda_driver.copy_to_host(out, self.ptr)
        return out

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        if self.host is not None:
            raise AttributeError("an emulated CUDA array lives in host memory; use .numpy() or pass it to a kernel")
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False), "version": 3,
                "strides": None}

    def __repr__(self) -> str:
        where = "gpu" if self.on_gpu else "emulator"
        return f"DeviceArray(shape={self.shape}, dtype={self.dtype}, device='cuda' ({where}))"

    def __del__(self) -> None:
        if self.host is None and self.ptr:
            try:
                from codegen import cuda_driver

                cuda_driver.mem_free(self.ptr)
            except Exception:  # noqa: BLE001 - never raise from a finalizer (e.g. at interpreter exit)
                pass
            self.ptr = 0


def uses_gpu() -> bool:
    """Whether CUDA modules and 'cuda' arrays use a real GPU (else the emulator); see `codegen.cuda_backend`."""
    from codegen.cuda_backend import backend

    return backend() == "gpu"


def empty(shape: Any, dtype: Any = "float32") -> DeviceArray:
    """An uninitialized 'cuda' array."""
    shape = (shape,) if isinstance(shape, int) else tuple(shape)
    dtype = np.dtype(dtype)
    if not uses_gpu():
        host = np.empty(shape, dtype)
        return DeviceArray(shape, dtype, host.ctypes.data, host)
    from codegen import cuda_driver

    array = DeviceArray(shape, dtype)
    array.ptr = cuda_driver.mem_alloc(array.nbytes)
    return array


def to_device(x: Any) -> DeviceArray:
    """A 'cuda' copy of array-like `x`."""
    host = np.ascontiguousarray(x)
    if not uses_gpu():
        host = host.copy()
        return DeviceArray(host.shape, host.dtype, host.ctypes.data, host)
    from codegen import cuda_driver

    array = empty(host.shape, host.dtype)
    cuda_driver.copy_to_device(array.ptr, host)
    return array
