"""DLPack exchange of GPU arrays: `export` makes a 'dltensor' capsule of a device array for another library
(torch, CuPy, JAX), and `import_capsule` takes another library's GPU tensor as a device array, both without a copy.

Streams are honoured as the DLPack protocol asks: the consumer names the stream it will use the data on
(`__dlpack__(stream=...)`: None or 1 for the legacy default stream, 2 for the per-thread one, -1 for none, else
a CUstream handle), and the producer orders that stream after the work issued so far to its current stream. On
import the current stream is the one named.
"""

from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

from codegen.runtime import cuda_driver, streams

KDL_CUDA = 2
KDL_CUDA_MANAGED = 13
CAPSULE_NAME = b"dltensor"
USED_CAPSULE_NAME = b"used_dltensor"
NO_SYNCHRONIZATION = -1


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32), ("dtype", DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


_DTYPE_CODES = {"i": 0, "u": 1, "f": 2, "b": 6}  # numpy kinds -> DLPack type codes (bfloat16 is code 4)
_api = ctypes.PyDLL(None)  # the interpreter's C API, with this module's own argument types
_api.PyCapsule_New.restype = ctypes.py_object
_api.PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_api.PyCapsule_IsValid.restype = ctypes.c_int
_api.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_GetPointer.restype = ctypes.c_void_p
_api.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_api.PyCapsule_SetName.restype = ctypes.c_int
_api.PyCapsule_SetName.argtypes = [ctypes.py_object, ctypes.c_char_p]
# a capsule's destructor gets the capsule as it is deallocated: taken as an address, never as an object (which
# would count a reference to it)
_raw_is_valid = _api["PyCapsule_IsValid"]
_raw_is_valid.restype = ctypes.c_int
_raw_is_valid.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_raw_get_pointer = _api["PyCapsule_GetPointer"]
_raw_get_pointer.restype = ctypes.c_void_p
_raw_get_pointer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]

_exported: dict[int, tuple[Any, ...]] = {}  # address of a DLManagedTensor -> what must live until its deleter


def dtype_code(dtype: np.dtype) -> DLDataType:
    """The DLPack data type of a numpy dtype; BufferError for one DLPack cannot describe."""
    if dtype.name == "bfloat16":
        return DLDataType(4, 16, 1)
    code = _DTYPE_CODES.get(dtype.kind)
    if code is None:
        raise BufferError(f"DLPack has no data type for {dtype}")
    return DLDataType(code, dtype.itemsize * 8, 1)


def numpy_dtype(dl_type: DLDataType) -> np.dtype:
    """The numpy dtype of a DLPack data type; BufferError for vectors (lanes) or an unknown code."""
    if dl_type.lanes != 1:
        raise BufferError(f"DLPack vector types ({dl_type.lanes} lanes) are not supported")
    if dl_type.code == 4 and dl_type.bits == 16:
        import ml_dtypes

        return np.dtype(ml_dtypes.bfloat16)
    kinds = {code: kind for kind, code in _DTYPE_CODES.items()}
    if dl_type.code not in kinds:
        raise BufferError(f"DLPack type code {dl_type.code} is not supported")
    return np.dtype("?" if kinds[dl_type.code] == "b" else f"{kinds[dl_type.code]}{dl_type.bits // 8}")


def synchronize_consumer(stream: int | None) -> None:
    """Order the consumer's `stream` (DLPack's numbering) after the work issued so far to the current stream."""
    if stream == NO_SYNCHRONIZATION:
        return
    if stream == 0:
        raise BufferError("stream 0 is ambiguous in DLPack; use 1 for the legacy default stream")
    handle = 0 if stream in (None, streams.LEGACY_DEFAULT_STREAM) else int(stream)
    current = streams.current_stream_handle()
    if handle != current:
        cuda_driver.stream_wait(handle, current)


def _delete_exported(address: int | None) -> None:
    _exported.pop(address or 0, None)


_DELETE_EXPORTED = DELETER(_delete_exported)
_CAPSULE_DESTRUCTOR = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def _destroy_capsule(capsule: int | None) -> None:
    """A capsule no consumer took ('dltensor' still its name) frees its tensor."""
    if _raw_is_valid(capsule, CAPSULE_NAME):
        _delete_exported(_raw_get_pointer(capsule, CAPSULE_NAME))


_DESTROY_CAPSULE = _CAPSULE_DESTRUCTOR(_destroy_capsule)


def export(array: Any, stream: int | None = None) -> Any:
    """A DLPack capsule of the GPU array `array` (a `DeviceArray`), kept alive until the consumer deletes it;
    the consumer's `stream` is ordered after the current stream's work first."""
    synchronize_consumer(stream)
    shape = (ctypes.c_int64 * max(len(array.shape), 1))(*array.shape)
    managed = DLManagedTensor()
    managed.dl_tensor = DLTensor(array.ptr, DLDevice(KDL_CUDA, 0), len(array.shape), dtype_code(array.dtype),
                                 ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64)), None, 0)
    managed.deleter = _DELETE_EXPORTED
    address = ctypes.addressof(managed)
    _exported[address] = (managed, shape, array)
    return _api.PyCapsule_New(address, CAPSULE_NAME, ctypes.cast(_DESTROY_CAPSULE, ctypes.c_void_p))


class ImportedMemory:
    """Another library's tensor whose memory a device array views: its deleter is called when collected."""

    def __init__(self, managed: ctypes.POINTER(DLManagedTensor), capsule: Any) -> None:
        self.managed = managed
        self.capsule = capsule

    def __del__(self) -> None:
        deleter = self.managed.contents.deleter
        if deleter:
            deleter(ctypes.addressof(self.managed.contents))


def import_capsule(capsule: Any) -> tuple[int, tuple[int, ...], np.dtype, ImportedMemory]:
    """The device address, shape and dtype of a 'dltensor' capsule of GPU memory, and the owner that keeps it
    alive (the capsule is marked used). BufferError for host memory, another device than 0, or strides that
    are not C-contiguous."""
    if not _api.PyCapsule_IsValid(capsule, CAPSULE_NAME):
        raise BufferError("not an unused DLPack capsule ('dltensor')")
    managed = ctypes.cast(_api.PyCapsule_GetPointer(capsule, CAPSULE_NAME), ctypes.POINTER(DLManagedTensor))
    tensor = managed.contents.dl_tensor
    if tensor.device.device_type not in (KDL_CUDA, KDL_CUDA_MANAGED) or tensor.device.device_id != 0:
        raise BufferError(f"a DLPack tensor on device {(tensor.device.device_type, tensor.device.device_id)} is "
                          f"not on GPU 0")
    shape = tuple(int(tensor.shape[i]) for i in range(tensor.ndim))
    dtype = numpy_dtype(tensor.dtype)
    if tensor.strides:
        strides = tuple(int(tensor.strides[i]) for i in range(tensor.ndim))
        expected, step = [], 1
        for d in reversed(shape):
            expected.append(step)
            step *= d
        if any(s != e for s, e, d in zip(strides, reversed(expected), shape, strict=True) if d != 1):
            raise BufferError(f"a DLPack tensor with strides {strides} (in elements) is not C-contiguous")
    _api.PyCapsule_SetName(capsule, USED_CAPSULE_NAME)
    return (int(tensor.data or 0) + int(tensor.byte_offset), shape, dtype, ImportedMemory(managed, capsule))
