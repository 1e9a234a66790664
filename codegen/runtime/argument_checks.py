"""The checks and conversions of one argument of a host call: the ctypes type and numpy dtype of a parameter's IR
type, Python scalars of the right range, and the errors that name the parameter when an array does not fit. The
callers that `arguments.make_caller` generates, and the staging of arrays on a GPU (`device_staging`), call them."""

from __future__ import annotations

import ctypes
import operator
from typing import Any

import numpy as np

from codegen.runtime.arrays import DeviceArray
from hidet_lang.ir.types import DataType

_CTYPES = {
    "bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
    "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32,
    "uint64": ctypes.c_uint64, "float16": ctypes.c_float, "bfloat16": ctypes.c_float, "float32": ctypes.c_float,
    "float64": ctypes.c_double,
}


def ctype_of(t: Any) -> Any:
    """The ctypes type a parameter of IR type `t` is passed as (f16 scalars travel as float)."""
    if isinstance(t, DataType):
        return _CTYPES[t.name]
    return ctypes.c_void_p


def numpy_dtype(t: DataType) -> np.dtype:
    """The numpy dtype of arrays for elements of type `t`; bf16 is `ml_dtypes.bfloat16` when that package is
    installed, otherwise uint16 arrays holding the raw bits."""
    if t.name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            return np.dtype(np.uint16)
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(t.numpy_name)


BF16_BITS = np.dtype(np.uint16)
"""The dtype of bf16 bit patterns, which a bf16 parameter also takes where its arrays are ml_dtypes' bfloat16."""


def array_address(array: np.ndarray) -> int:
    """The address of the data of a C-contiguous, writeable numpy array, as a compiled function takes it (0, a null
    pointer, for an empty array); TypeError or ValueError for any other array (read-only, not contiguous, or of a
    dtype without a buffer format)."""
    return ctypes.addressof(ctypes.c_char.from_buffer(array)) if array.nbytes else 0


def read_only_message(func: str, param: str) -> str:
    """The error of a read-only array given for parameter `param`, which function `func` may write."""
    return (f"{func}(): parameter '{param}' is a read-only array, and '{func}' may write to it (it stores into it, "
            f"takes its address or passes it on); pass a writeable array, e.g. a copy")


def _describe(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"a numpy array of {value.dtype} with shape {value.shape}"
    return f"a {type(value).__name__} ({value!r})" if not hasattr(value, "__dlpack__") else type(value).__name__


def as_array(value: Any, func: str, param: str, dtype: np.dtype) -> np.ndarray:
    """`value` as a numpy array without copying (numpy arrays, or objects with __dlpack__); TypeError else."""
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, DeviceArray):
        if value.host is None:
            raise TypeError(f"{func}(): parameter '{param}' got an array in GPU memory; this function runs on the "
                            "CPU: pass a numpy array (x.numpy())")
        return value.host
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (TypeError, ValueError, RuntimeError, BufferError) as e:
            raise TypeError(f"{func}(): parameter '{param}' got {type(value).__name__}, which numpy cannot view "
                            f"without a copy: {e}") from None
    raise TypeError(f"{func}(): parameter '{param}' expects an array of {dtype}, got {_describe(value)}")


def check_dtype_and_shape(func: str, param: str, dtype: np.dtype, shape: tuple[int, ...],
                          want_dtype: np.dtype, want_shape: tuple[int, ...] | None) -> None:
    """Raise the error for an array of `dtype` and `shape` given for parameter `param` that wants others."""
    if dtype != want_dtype and not (dtype == BF16_BITS and want_dtype.name == "bfloat16"):
        raise TypeError(f"{func}(): parameter '{param}' expects {want_dtype}, got an array of {dtype}")
    if want_shape is not None and tuple(shape) != want_shape:
        raise ValueError(f"{func}(): parameter '{param}' expects shape {want_shape}, got shape {tuple(shape)}")


def check_array(func: str, param: str, value: np.ndarray, dtype: np.dtype, shape: tuple[int, ...] | None,
                written: bool) -> None:
    """Raise the error that explains why array `value` does not fit parameter `param`, or return when it fits (the
    callers' quick test compares dtypes by identity: an equal dtype that is another object, one with metadata say,
    fits). A read-only array fits a parameter that the function never writes (not `written`)."""
    check_dtype_and_shape(func, param, value.dtype, value.shape, dtype, shape)
    if not value.flags.c_contiguous:
        raise ValueError(f"{func}(): parameter '{param}' must be C-contiguous; pass np.ascontiguousarray(x)")
    if written and not value.flags.writeable:
        raise ValueError(read_only_message(func, param))


def integer_range(t: DataType) -> tuple[int, int]:
    """The smallest and largest value of integer type `t`."""
    bits = t.nbytes * 8
    return (0, 2**bits - 1) if t.kind == "uint" else (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)


def to_int(value: Any, func: str, param: str, t: DataType) -> int:
    """A Python int for integer parameter `param` (numpy integers accepted; floats and bools refused)."""
    if isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{func}(): parameter '{param}' expects {t.name}, got a bool")
    try:
        v = operator.index(value)
    except TypeError:
        raise TypeError(
            f"{func}(): parameter '{param}' expects an integer ({t.name}), got {_describe(value)}"
        ) from None
    lo, hi = integer_range(t)
    if not lo <= v <= hi:
        raise ValueError(f"{func}(): parameter '{param}' = {v} does not fit in {t.name}")
    return v


def to_bool(value: Any, func: str, param: str) -> bool:
    """A Python bool for bool parameter `param`: Python's and numpy's bools, and integers (nonzero is true, as C
    converts them); anything else is refused."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    try:
        return operator.index(value) != 0
    except TypeError:
        raise TypeError(f"{func}(): parameter '{param}' expects a bool, got {_describe(value)}") from None


def to_float(value: Any, func: str, param: str, t: DataType) -> float:
    """A Python float for floating-point parameter `param`."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{func}(): parameter '{param}' expects a number ({t.name}), got {_describe(value)}")
    return float(value)
