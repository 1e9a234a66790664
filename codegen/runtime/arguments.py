"""Argument checking and marshalling for host calls of compiled functions.

For each host-callable function a small Python caller is generated once, specialised to its parameters:
it checks every argument (count, scalar kind, array type, dtype, shape, contiguity) and passes raw values and
data pointers to the C function through ctypes. The checks run before any C code, and a failure is a
`TypeError`/`ValueError` that names the parameter.
"""

from __future__ import annotations

import ctypes
import keyword
import math
import operator
from collections.abc import Callable, Mapping, MutableMapping
from types import CodeType
from typing import Any

import numpy as np

from codegen.runtime import cuda_driver
from codegen.runtime.aliasing import check_no_overlap, host_or_device_address, written_array_params
from codegen.runtime.arrays import DeviceArray
from codegen.runtime.heap_guards import check_guards
from hidet_lang.errors import without_compiler_frames
from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import DataType, PointerType, TensorType

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


def _caller_parameter_names(func: Function) -> list[str]:
    """The caller's parameter names: the DSL's own (so that Python's errors and keyword arguments use them),
    or `a<i>` for one that is not a plain identifier or could clash with the caller's helpers."""
    names: list[str] = []
    for i, p in enumerate(func.params):
        name = p.name
        if not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_") or name == func.name:
            name = f"a{i}"
        names.append(name)
    if len(set(names)) != len(names):
        names = [f"a{i}" for i in range(len(func.params))]
    return names


def make_caller(func: Function, c_function: Any, after_call: Callable[[], None] | None, *, on_gpu: bool,
                functions: Mapping[str, Function] | None = None,
                written: frozenset[E.Var] | None = None,
                compiled: MutableMapping[str, CodeType] | None = None) -> Callable[..., None]:
    """A Python function with `func`'s parameters that checks its arguments and calls `c_function`.

    With `on_gpu`, tensor arguments are device pointers: 'cuda' arrays pass their own, and numpy arrays are
    copied to the device before the call and back after it. A read-only array is accepted for a parameter that
    `func` never writes (`written`, found by `written_array_params` when None, which follows calls into
    `functions`, the module's functions by name), and refused, naming the parameter, for any other.

    The caller is Python source compiled once; `compiled` (code by source text) supplies the code of a source
    compiled before and keeps what is compiled here, so that a module loaded from its record compiles nothing.
    """
    env: dict[str, Any] = {
        "_c": c_function, "_nd": np.ndarray, "_as_array": as_array, "_check": check_array, "_to_int": to_int,
        "_to_bool": to_bool, "_to_float": to_float, "_after": after_call, "_fn": func.name, "_addr": ctypes.addressof,
        "_from_buffer": ctypes.c_char.from_buffer, "_bits": BF16_BITS, "_cut": without_compiler_frames,
    }
    names = _caller_parameter_names(func)
    position = {p: names[i] for i, p in enumerate(func.params)}
    body: list[str] = []
    pass_args: list[str] = []
    tensors: list[str] = []  # with `on_gpu`: the tensor arguments, staged together
    restricted: list[tuple[str, str, bool, str]] = []  # no-alias functions: (address, parameter, written, bytes)
    guarded = False  # on the CPU: whether a tensor argument may be a guarded array, whose canary is checked
    # what the function may write: where a read-only array is refused, for the no-alias check, and on a GPU for
    # what comes back after the call
    if written is None:
        written = written_array_params(func, functions)
    written_flags: list[bool] = []  # with `on_gpu`: whether the function may write each tensor argument
    for i, (p, a) in enumerate(zip(func.params, names)):
        t = p.type
        env[f"_t{i}"] = t
        pname = p.name
        if isinstance(t, DataType):
            if t.is_bool:
                body.append(f"    if type({a}) is not bool: {a} = _to_bool({a}, _fn, {pname!r})")
                pass_args.append(a)
                continue
            conv = "_to_float" if t.is_float else "_to_int"
            fast = "float" if t.is_float else "int"
            body.append(f"    if type({a}) is not {fast}: {a} = {conv}({a}, _fn, {pname!r}, _t{i})")
            if not t.is_float:
                lo, hi = integer_range(t)
                body.append(f"    elif not {lo} <= {a} <= {hi}: {a} = _to_int({a}, _fn, {pname!r}, _t{i})")
            pass_args.append(a)
            continue
        assert isinstance(t, (TensorType, PointerType))
        dtype = numpy_dtype(t.dtype)
        env[f"_d{i}"] = dtype
        shape_expr = None  # a pointer parameter takes an array of any shape
        if isinstance(t, TensorType):
            dims = []
            for d in t.shape:
                if isinstance(d, int):
                    dims.append(str(d))
                elif isinstance(d, E.Var) and d in position:
                    dims.append(position[d])
                else:
                    dims.append(dimension_source(d, position, env, len(env)))
            shape_expr = "(" + "".join(f"{d}, " for d in dims) + ")"
            if func.attrs.no_alias:  # its address (on a GPU: a device pointer, or a numpy array's) and size in bytes
                start = f"_address({a})" if on_gpu else f"(_p{i} or 0)"
                restricted.append((start, pname, p in written, f"_prod({shape_expr}) * {dtype.itemsize}"))
        if on_gpu:
            body.append(f"    {a} = _device_argument({a}, _fn, {pname!r}, _d{i}, {shape_expr}, {p in written})")
            tensors.append(a)
            written_flags.append(p in written)
            pass_args.append(a)
            continue
        # an argument that is not a plain numpy array (a runtime array, a tensor) is held as given, with the guarded
        # buffer it may have (`heap_guards`); numpy's own arrays have none, and cost nothing more
        body.append(f"    if type({a}) is not _nd: _held += (({pname!r}, {a}),); {a} = _as_array({a}, _fn, {pname!r}, "
                    f"_d{i})")
        guarded = True
        # ml_dtypes' bfloat16 has no buffer format: a bf16 array's address through its bits (an array of bf16 bits,
        # uint16, passes `_check` and is its own view)
        address_of = f"{a}.view(_bits)" if dtype.name == "bfloat16" else a
        shape_check = [] if shape_expr is None else [f"{a}.shape != {shape_expr}"]
        writeable_check = [f"not {a}.flags.writeable"] if p in written else []
        checks = [f"{a}.dtype is not _d{i}", *shape_check, f"not {a}.flags.c_contiguous", *writeable_check]
        body.append(f"    if {' or '.join(checks)}: _check(_fn, {pname!r}, {a}, _d{i}, {shape_expr}, {p in written})")
        # `array_address`, written out: a call of it would cost the caller about 0.1 us per tensor argument; named,
        # since a no-alias function's overlap check uses it too
        address = f"_p{i} = _addr(_from_buffer({address_of})) if {a}.nbytes else None"
        if p in written:
            body.append(f"    {address}")
        else:  # ctypes takes no read-only buffer: such an array (checked above) passes its data pointer
            body.append(f"    try: {address}")
            body.append(f"    except TypeError: _p{i} = {a}.ctypes.data")
        pass_args.append(f"_p{i}")
    if any(w for _, _, w, _ in restricted):
        env.update(_no_overlap=check_no_overlap, _prod=math.prod, _address=host_or_device_address,
                   _alias_names=tuple(r[1] for r in restricted),
                   _alias_written=tuple(r[2] for r in restricted))
        spans = "".join(f"({start}, {size}), " for start, _, _, size in restricted)
        # after every argument is checked, before any is staged (on a GPU numpy arrays overlap on the host)
        body.append(f"    _no_overlap(_fn, _alias_names, _alias_written, ({spans}))")
    sig = ", ".join(names)
    call = [f"    _result = _c({', '.join(pass_args)})"]  # a 'public' function's scalar result, or None
    if on_gpu:  # the results come back before the checks, so a failed device assertion loses none of them
        from codegen.runtime.device_staging import device_argument, release, stage  # cycle: staging imports this module

        env.update(_device_argument=device_argument, _stage=stage, _release=release,
                   _ensure_current=cuda_driver.ensure_current)
        if tensors:  # every argument is checked before any is copied to the device
            listed = "".join(t + ", " for t in tensors)
            body.append(f"    {listed}= _stage(_staged, ({listed}), {tuple(written_flags)!r})")
        call.append("    _release(_staged, copy_back=True)")
    if after_call is not None:
        call.append("    _after()")
    if guarded:  # the arrays `hidet.empty` and the others allocate have a canary after them (`heap_guards`)
        env["_check_guards"] = check_guards
        body.insert(0, "    _held = ()")
        call.append("    if _held: _check_guards(_fn, _held)")
    call.append("    return _result")
    if on_gpu:
        body = ["    _ensure_current()", "    _staged = []", "    try:", *("    " + line for line in body + call),
                "    finally:", "        _release(_staged, copy_back=False)"]
        call = []
    # errors (bad arguments, launch failures, driver errors) reach the user without the runtime's frames
    lines = [f"def {func.name}({sig}):", "    try:", *("    " + line for line in [*body, *call]),
             "    except Exception as _e:", "        raise _cut(_e) from None"]
    source = "\n".join(lines)
    code = None if compiled is None else compiled.get(source)
    if code is None:
        code = compile(source, f"<hidet_lang caller of {func.name}>", "exec")
        if compiled is not None:
            compiled[source] = code
    exec(code, env)  # noqa: S102
    caller = env[func.name]
    caller.__doc__ = f"Call the compiled function {func.name}({', '.join(p.name for p in func.params)})."
    return caller


def dimension_source(dim: E.Expr, position: dict[E.Var, str], env: dict[str, Any], key: int) -> str:
    """Python source computing a tensor dimension that is an expression of earlier integer parameters (the frontend
    resolves every name in a parameter's annotation to one of them, or refuses it at the annotation)."""
    variables = list(dict.fromkeys(collect(dim, E.Var)))
    assert all(v in position for v in variables), dim
    name = f"_dim{key}"
    env[name] = lambda *values, _vars=tuple(variables): evaluate(dim, dict(zip(_vars, values)))
    return f"{name}({', '.join(position[v] for v in variables)})"
