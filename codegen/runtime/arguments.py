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
from collections.abc import Callable, Mapping, MutableMapping
from types import CodeType
from typing import Any

import numpy as np

from codegen.runtime import cuda_driver
from codegen.runtime.aliasing import check_no_overlap, host_or_device_address, written_array_params
from codegen.runtime.argument_checks import (
    BF16_BITS,
    as_array,
    check_array,
    integer_range,
    numpy_dtype,
    to_bool,
    to_float,
    to_int,
)
from codegen.runtime.device_staging import device_argument, release, stage
from codegen.runtime.heap_guards import check_guards
from hidet_lang.errors import without_compiler_frames
from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.func import Function
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import DataType, PointerType, TensorType


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
