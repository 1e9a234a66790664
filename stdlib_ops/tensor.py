"""`Tensor`: the value operators take and return, concrete (holding data) or symbolic (a graph placeholder).

A concrete tensor stores its data in one of the runtime's arrays (`codegen.runtime.arrays`: a `HostArray` on 'cpu', a
`DeviceArray` on 'cuda'), the same arrays `hidet.asarray/empty/zeros/ones/full/randn/rand` make; operators on it run
at once. Those arrays are operands of every operator as they are (`tensor_of_runtime_array` wraps one without a
copy), and `hidet.Tensor` (`codegen.runtime.arrays.AnyTensor`) is the type of both. A dtype is a numpy name, a numpy
dtype, or a DSL data type or name (`hidet.int32`, 'f16').
A symbolic tensor (`symbol`) has no data and may have string dimensions ('batch'); an operator on it records
an `Operator` as the producer of its outputs, from which `trace_from` builds a graph.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

import codegen.runtime as runtime
from codegen.runtime import TensorMethods
from hidet_lang.ir.types import DTYPE_BY_NAME, DataType
from stdlib_ops.dims import check_name

if TYPE_CHECKING:
    from stdlib_ops.operators.base import Operator

Dim = int | str
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64", "bfloat16")


class Tensor(TensorMethods):
    """A tensor: `shape` (ints, or strings for symbolic dimensions), `dtype` (a numpy name), `device`.

    torch's conversion methods (`.to(...)`, `.cuda()`, `.cpu()`, `.float()`, `.half()`, `.item()`, `.tolist()`,
    ...) come from `codegen.runtime.tensor_methods`, which the runtime's arrays share; `//` and `%` are torch's
    (`floor_divide`, `remainder`: floored, the remainder with the divisor's sign)."""

    __slots__ = ("shape", "dtype", "device", "storage", "producer", "output_index", "address", "__weakref__")

    def __init__(self, shape: tuple[Dim, ...], dtype: str, device: str = "cpu", storage: Any = None,
                 producer: Operator | None = None, output_index: int = 0) -> None:
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = device
        self.storage = storage
        self.producer = producer
        self.output_index = output_index
        self.address: int | None = None  # of the data of a 'cpu' tensor, once a kernel has taken it (eager calls)

    @property
    def is_symbolic(self) -> bool:
        """True for a tensor without data (an input of a graph, or an operator's result on one)."""
        return self.storage is None

    @property
    def ndim(self) -> int:
        """The number of dimensions."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements (concrete shapes only)."""
        return int(np.prod(self.shape, dtype=np.int64))

    def numpy(self) -> np.ndarray:
        """A numpy copy of the data."""
        if self.storage is None:
            raise ValueError(f"a symbolic tensor (shape {list(self.shape)}) holds no data; build its graph and run it")
        return np.array(self.storage.numpy(), copy=False).reshape(self.shape)

    def record_stream(self, stream: Any) -> None:
        """Say that work issued to `stream` uses this 'cuda' tensor's memory: once freed, the memory is reused only
        after that work has completed (`hidet_lang.cuda.record_stream`, as torch's `Tensor.record_stream`)."""
        runtime.record_stream(self, stream)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self.numpy()
        return out if dtype is None else out.astype(dtype)

    def __dlpack__(self, stream: Any = None, **kwargs: Any) -> Any:
        """The data, without a copy, for `torch.from_dlpack` and `np.from_dlpack`: host memory for 'cpu' tensors
        and 'cuda' tensors on the CUDA emulator; device memory on a GPU, the consumer's `stream` ordered after
        the current stream's work."""
        if self.storage is None:
            raise BufferError("a symbolic tensor holds no data; build its graph and run it")
        if getattr(self.storage, "on_gpu", False):
            return self.storage.reshape(self.shape).__dlpack__(stream=stream)
        host = self.storage.host if isinstance(self.storage, runtime.DeviceArray) else self.storage.view(np.ndarray)
        # the consumer's `max_version` passes on: a versioned capsule says the data is writeable (an old one does not,
        # and numpy views it read-only), so that a compiled function can write a tensor it is given
        return host.reshape(self.shape).__dlpack__(**kwargs, **({"stream": stream} if stream is not None else {}))

    def __dlpack_device__(self) -> tuple[int, int]:
        return (2, 0) if getattr(self.storage, "on_gpu", False) else (1, 0)

    def __repr__(self) -> str:
        if self.storage is None:
            return f"Tensor(shape={list(self.shape)}, dtype={self.dtype}, device={self.device!r}, symbolic)"
        return f"Tensor({self.numpy()!r}, device={self.device!r})"

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        if not isinstance(self.shape[0], int):
            raise TypeError(f"len() of a tensor whose first dimension is symbolic ({self.shape[0]!r})")
        return self.shape[0]

    def astype(self, dtype: str) -> Tensor:
        """The tensor converted to `dtype`."""
        return _ops().cast(self, dtype)

    def converted(self, device: str, dtype: np.dtype) -> Tensor:
        """The tensor with elements of `dtype` (the `cast` operator, symbolic tensors included), copied to `device`
        (concrete tensors only: a symbolic one lives on its graph's target)."""
        name = _check_dtype(dtype)
        if name == self.dtype:
            out = self
        else:
            out = _ops().cast(self, name)
        if out is not self and device == self.device:
            return out
        if out.storage is None:
            raise ValueError(f"a symbolic tensor has no data to copy and stays on its device ({self.device!r}); "
                             f"build its graph for target {device!r} instead")
        return wrap(out.storage.to(device=device, copy=True), device)

    def reshape(self, *shape: Any) -> Tensor:
        """The tensor with a new shape (one entry may be -1)."""
        return _ops().reshape(self, shape[0] if len(shape) == 1 and isinstance(shape[0], (tuple, list)) else shape)

    def transpose(self, *axes: Any) -> Tensor:
        """The tensor with its axes permuted (reversed when none are given)."""
        return _ops().transpose(self, axes[0] if len(axes) == 1 and isinstance(axes[0], (tuple, list)) else
                                (axes or None))

    @property
    def T(self) -> Tensor:  # noqa: N802 - numpy's name
        """The tensor with its axes reversed."""
        return _ops().transpose(self)

    def __getitem__(self, index: Any) -> Tensor:
        return _ops().getitem(self, index)

    def __add__(self, other: Any) -> Tensor:
        return _ops().add(self, other)

    def __radd__(self, other: Any) -> Tensor:
        return _ops().add(other, self)

    def __sub__(self, other: Any) -> Tensor:
        return _ops().sub(self, other)

    def __rsub__(self, other: Any) -> Tensor:
        return _ops().sub(other, self)

    def __mul__(self, other: Any) -> Tensor:
        return _ops().mul(self, other)

    def __rmul__(self, other: Any) -> Tensor:
        return _ops().mul(other, self)

    def __truediv__(self, other: Any) -> Tensor:
        return _ops().div(self, other)

    def __rtruediv__(self, other: Any) -> Tensor:
        return _ops().div(other, self)

    def __floordiv__(self, other: Any) -> Tensor:
        return _ops().floor_divide(self, other)

    def __rfloordiv__(self, other: Any) -> Tensor:
        return _ops().floor_divide(other, self)

    def __mod__(self, other: Any) -> Tensor:
        return _ops().remainder(self, other)

    def __rmod__(self, other: Any) -> Tensor:
        return _ops().remainder(other, self)

    def __pow__(self, other: Any) -> Tensor:
        return _ops().pow(self, other)

    def __rpow__(self, other: Any) -> Tensor:
        return _ops().pow(other, self)

    def __matmul__(self, other: Any) -> Tensor:
        return _ops().matmul(self, other)

    def __rmatmul__(self, other: Any) -> Tensor:
        return _ops().matmul(other, self)

    def __neg__(self) -> Tensor:
        return _ops().neg(self)

    def __abs__(self) -> Tensor:
        return _ops().abs(self)

    def __lt__(self, other: Any) -> Tensor:
        return _ops().less(self, other)

    def __le__(self, other: Any) -> Tensor:
        return _ops().less_equal(self, other)

    def __gt__(self, other: Any) -> Tensor:
        return _ops().greater(self, other)

    def __ge__(self, other: Any) -> Tensor:
        return _ops().greater_equal(self, other)

    def __eq__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _ops().equal(self, other)

    def __ne__(self, other: Any) -> Tensor:  # type: ignore[override]
        return _ops().not_equal(self, other)

    __hash__ = object.__hash__


runtime.AnyTensor.register(Tensor)  # `hidet.Tensor` (`isinstance(x, hidet.Tensor)`) takes the operators' tensors too


_operators: Any = None  # the operators module, which gives itself here as it loads (`use_operators`)


def use_operators(operators: Any) -> None:
    """Give the tensor methods (`+`, `reshape`, `cast`, ...) the operators module they call: `stdlib_ops.operators`
    calls this as it loads (it builds on this module), and the package `stdlib_ops` loads it, so every tensor has
    them."""
    global _operators
    _operators = operators


def _ops() -> Any:
    """The operators module (`use_operators`)."""
    if _operators is None:
        raise RuntimeError("the tensor methods call the operators, which are not loaded; import stdlib_ops")
    return _operators


def _check_dtype(dtype: Any) -> str:
    try:
        return _DTYPE_NAMES[dtype]
    except (KeyError, TypeError):  # not seen yet, or unhashable
        pass
    dsl = DTYPE_BY_NAME.get(dtype) if isinstance(dtype, str) else dtype if isinstance(dtype, DataType) else None
    name = dsl.numpy_name if dsl is not None else np.dtype(dtype).name  # a DSL type or name ('f32'), or numpy's
    if name not in DTYPES:
        raise TypeError(f"unsupported dtype {name!r}; supported: {', '.join(DTYPES)}")
    _DTYPE_NAMES[dtype] = name
    return name


_DTYPE_NAMES: dict[Any, str] = {}
"""Each dtype `_check_dtype` was given (a name, a numpy dtype or type) -> its checked name: `np.dtype(x).name`
costs microseconds, which every tensor an eager operator makes would pay."""


def _numpy_dtype(dtype: Any) -> np.dtype:
    """The numpy dtype of a tensor of `dtype` (checked); bfloat16 is `ml_dtypes.bfloat16`, which it needs."""
    name = _check_dtype(dtype)
    if name != "bfloat16":
        return np.dtype(name)
    try:
        import ml_dtypes
    except ImportError:
        raise TypeError("bfloat16 tensors need the ml_dtypes package (pip install ml_dtypes)") from None
    return np.dtype(ml_dtypes.bfloat16)


def wrap(array: Any, device: str) -> Tensor:
    """A concrete tensor around a runtime array (no copy)."""
    return Tensor(tuple(int(d) for d in array.shape), _check_dtype(array.dtype), device, array)


def tensor_of_runtime_array(value: Any) -> Any:
    """`value` as a tensor when it is one of the runtime's arrays (those `hidet.randn`, `hidet.empty` and the other
    allocation functions make, a `HostArray` or a `DeviceArray`): the tensor holds the array itself (a C-contiguous
    copy of a strided view); any other value is returned as it is."""
    if isinstance(value, runtime.HostArray):
        if not value.flags.c_contiguous:
            value = np.ascontiguousarray(value).view(runtime.HostArray)
        return wrap(value, "cpu")
    if isinstance(value, runtime.DeviceArray):
        return wrap(value, "cuda")
    return value


def asarray(data: Any, dtype: Any = None, device: str = "cpu") -> Tensor:
    """A concrete tensor with a copy of `data` (array-like, a tensor, or a DLPack object) on `device`."""
    if isinstance(data, Tensor):
        data = data.numpy()
    elif hasattr(data, "__dlpack__") and not isinstance(data, np.ndarray):
        data = np.from_dlpack(data)
    array = np.asarray(data, dtype=dtype)
    if array.dtype == np.float64 and dtype is None and not isinstance(data, np.ndarray):
        array = array.astype(np.float32)  # Python floats make float32 tensors, as in the deep-learning libraries
    _check_dtype(array.dtype)
    return wrap(runtime.copy_of(array, device), device)  # on 'cpu', cache line aligned


def from_dlpack(obj: Any, device: str = "cpu") -> Tensor:
    """A concrete tensor with the data of a DLPack object (a numpy or torch tensor, ...): a copy, but for a GPU
    tensor taken on device 'cuda', which shares its memory (asked for on the current stream)."""
    dlpack_device = getattr(obj, "__dlpack_device__", None)
    if dlpack_device is not None and dlpack_device()[0] in (2, 13):  # kDLCUDA, kDLCUDAManaged
        shared = runtime.from_dlpack_device(obj)
        return wrap(shared, "cuda") if device == "cuda" else asarray(shared.numpy(), device=device)
    return asarray(np.from_dlpack(obj), device=device)


def empty(shape: Any, dtype: Any = "float32", device: str = "cpu") -> Tensor:
    """An uninitialized tensor."""
    return wrap(runtime.empty(_shape(shape), _numpy_dtype(dtype), device), device)


def zeros(shape: Any, dtype: Any = "float32", device: str = "cpu") -> Tensor:
    """A tensor of zeros."""
    return full(shape, 0, dtype, device)


def ones(shape: Any, dtype: Any = "float32", device: str = "cpu") -> Tensor:
    """A tensor of ones."""
    return full(shape, 1, dtype, device)


def full(shape: Any, fill_value: Any, dtype: Any = "float32", device: str = "cpu") -> Tensor:
    """A tensor with every element `fill_value`."""
    return wrap(runtime.asarray(np.full(_shape(shape), fill_value, _numpy_dtype(dtype)), device=device), device)


def randn(shape: Any, dtype: Any = "float32", mean: float = 0.0, stddev: float = 1.0, device: str = "cpu") -> Tensor:
    """Normally distributed random values (Hidet's parameters, in Hidet's order)."""
    return wrap(runtime.randn(_shape(shape), _numpy_dtype(dtype), mean, stddev, device=device), device)


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, device: str = "cpu") -> Tensor:
    """`numpy.arange` as a tensor."""
    values = np.arange(start, stop, step) if stop is not None else np.arange(start)
    if dtype is not None:
        values = values.astype(dtype)
    elif values.dtype == np.float64:
        values = values.astype(np.float32)
    return wrap(runtime.asarray(values, device=device), device)


def symbol(shape: Any, dtype: Any = "float32", device: str = "cpu") -> Tensor:
    """A symbolic tensor: a graph input; string dimensions are sizes known only when the graph runs."""
    dims = tuple(check_name(d) if isinstance(d, str) else int(d) for d in _shape(shape))
    return Tensor(dims, _check_dtype(dtype), device)


def _shape(shape: Any) -> tuple:
    return (shape,) if isinstance(shape, (int, str)) else tuple(shape)
