"""torch's conversion methods, shared by every tensor the project returns: `TensorMethods`.

The runtime's arrays (`codegen.runtime.arrays`: `HostArray`, `DeviceArray`) and the operator library's tensors
(`stdlib_ops.Tensor`) inherit it; each supplies `converted(device, dtype)` (a copy on another device or of
another dtype, in its own kind) and `numpy()`, and gets from here `.to(...)` in torch's forms, `.cpu()`,
`.cuda()`, `.float()`, `.double()`, `.half()`, `.bfloat16()`, `.int()`, `.long()`, `.bool()`, `.item()` and
`.tolist()`. As in torch, a conversion that changes nothing returns the tensor itself (`copy=True` asks for a copy).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from codegen.runtime.numpy_dtypes import numpy_dtype_of

DEVICES = ("cpu", "cuda")


def device_name(device: Any) -> str:
    """The device `device` names: 'cpu' or 'cuda' (also 'cuda:0' and torch's `torch.device`). ValueError else."""
    text = str(device)
    name, _, index = text.partition(":")
    if name not in DEVICES or index not in ("", "0"):
        raise ValueError(f"device must be 'cpu' or 'cuda' (or 'cuda:0'), got {device!r}")
    return name


def is_device(value: Any) -> bool:
    """Whether a positional argument of `.to(...)` names a device (a string such as 'cuda:0', a `torch.device`)
    rather than a dtype."""
    if type(value).__name__ == "device":  # torch.device, without importing torch
        return True
    return isinstance(value, str) and value.partition(":")[0] in DEVICES


def numpy_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype of `dtype`: what `numpy_dtypes.numpy_dtype_of` takes, or a torch dtype
    (`torch.float16`, named 'torch.float16'). TypeError for anything else."""
    text = str(dtype)
    if text.startswith("torch."):
        dtype = text[len("torch."):]
    return numpy_dtype_of(dtype)


class TensorMethods:
    """The conversion methods of every kind of tensor (see the module docstring)."""

    __slots__ = ()

    dtype: Any
    device: Any

    def converted(self, device: str, dtype: np.dtype) -> Any:
        """A copy of the tensor on `device` with elements of `dtype` (the kind's own conversion)."""
        raise NotImplementedError

    def numpy(self) -> np.ndarray:
        """The data as a numpy array."""
        raise NotImplementedError

    def to(self, *args: Any, device: Any = None, dtype: Any = None, non_blocking: bool = False,
           copy: bool = False) -> Any:
        """The tensor on `device` with elements of `dtype`, as torch's `Tensor.to`: `.to('cuda')`, `.to(dtype)`,
        `.to('cpu', 'float16')`, `.to(other_tensor)` (its device and dtype), or keywords. The tensor itself when
        nothing changes, unless `copy`; `non_blocking` is accepted and has no effect (copies are synchronous)."""
        del non_blocking
        if len(args) > 2:
            raise TypeError(f"to() takes at most 2 positional arguments ({len(args)} given)")
        for arg in args:
            if hasattr(arg, "dtype") and hasattr(arg, "device"):
                device, dtype = arg.device, arg.dtype  # another tensor (ours, numpy's or torch's)
            elif is_device(arg):
                device = arg
            else:
                dtype = arg
        target_device = self_device = device_name(self.device)
        if device is not None:
            target_device = device_name(device)
        target_dtype = self_dtype = numpy_dtype(self.dtype)
        if dtype is not None:
            target_dtype = numpy_dtype(dtype)
        if target_device == self_device and target_dtype == self_dtype and not copy:
            return self
        return self.converted(target_device, target_dtype)

    def cpu(self) -> Any:
        """The tensor on the 'cpu' device: itself if it is there, else a copy."""
        return self.to(device="cpu")

    def cuda(self) -> Any:
        """The tensor on the 'cuda' device (a GPU, or the CUDA emulator's host memory): itself if it is there,
        else a copy."""
        return self.to(device="cuda")

    def float(self) -> Any:
        """The tensor as float32."""
        return self.to(dtype="float32")

    def double(self) -> Any:
        """The tensor as float64."""
        return self.to(dtype="float64")

    def half(self) -> Any:
        """The tensor as float16."""
        return self.to(dtype="float16")

    def bfloat16(self) -> Any:
        """The tensor as bfloat16 (needs the ml_dtypes package)."""
        return self.to(dtype="bfloat16")

    def int(self) -> Any:
        """The tensor as int32."""
        return self.to(dtype="int32")

    def long(self) -> Any:
        """The tensor as int64."""
        return self.to(dtype="int64")

    def bool(self) -> Any:
        """The tensor as bool."""
        return self.to(dtype="bool")

    def item(self) -> Any:
        """The value of a one-element tensor as a Python number (int, float or bool); ValueError for any other
        size (torch's RuntimeError)."""
        values = self.numpy()
        if values.size != 1:
            raise ValueError(f"a tensor with {values.size} elements cannot be converted to a Python scalar")
        return values.reshape(()).item()

    def tolist(self) -> Any:
        """The data as nested Python lists of Python numbers (a 0-d tensor gives a number)."""
        return self.numpy().tolist()
