"""`@hidet.jit`: a kernel built on its first call, for the types and shapes of the arguments it is called with.

The one-decorator path, as Numba's and Triton's `@jit`: no `script_module()` block and no `build()` call. A
parameter written without an annotation takes its type from the call's argument (an array or tensor of float32
and shape (4, 8) gives `f32[4, 8]`, a Python int `i32` (`i64` beyond its range), a float `f32`, a bool `bool`, a
numpy scalar its dtype); annotated parameters keep their annotations (`n: i32, x: f32[n]`). The body reads a
tensor's sizes as `x.shape`. A function that does not set `attrs.func_kind` is 'public' (called from Python on
the CPU). Each distinct signature (the dtypes and shapes of the arguments; the target is the build's, from the
function's kind or `target=`, whichever device the arrays are on) is parsed and built once, then reused; `builds`
counts the builds, and `specializations` holds the compiled module of each signature.
"""

from __future__ import annotations

import dataclasses
import inspect
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from hidet_lang.errors import without_compiler_frames
from hidet_lang.frontend.script import ScriptFunction, ScriptModule, _defining_locals, _parse, script_for_caller
from hidet_lang.ir.func import FuncKind
from hidet_lang.ir.types import DTYPE_BY_NAME, DataType, Type, boolean, float32, int32, int64
from hidet_lang.target import Target

Signature = tuple[tuple[Any, ...], ...]


def argument_signature(name: str, value: Any) -> tuple[Any, ...]:
    """What a specialization depends on in argument `name`: (dtype name, shape) of an array or tensor
    (anything with `dtype` and `shape`: numpy's, the project's, torch's), or the Python type of a number.
    TypeError naming the parameter for anything else."""
    if isinstance(value, (bool, int, float)):
        wide = isinstance(value, int) and not isinstance(value, bool) and not -2**31 <= value < 2**31
        return (type(value).__name__, wide)
    dtype, shape = getattr(value, "dtype", None), getattr(value, "shape", None)
    if dtype is None or shape is None:
        raise TypeError(f"argument '{name}' is {type(value).__name__!s} {value!r:.60}; a jit kernel takes arrays "
                        "or tensors (numpy's, the project's, torch's) and Python numbers")
    dtype_name = str(getattr(dtype, "name", dtype)).removeprefix("torch.")
    if dtype_name not in DTYPE_BY_NAME:
        raise TypeError(f"argument '{name}' has dtype {dtype_name}, which kernels do not take; supported: "
                        f"{', '.join(sorted(n for n in DTYPE_BY_NAME if len(n) > 3))}")
    return (dtype_name, tuple(int(d) for d in shape))


def parameter_type(signature: tuple[Any, ...]) -> Type:
    """The DSL type of a parameter whose argument has `signature` (`argument_signature`)."""
    kind = signature[0]
    if kind == "bool":
        return boolean
    if kind == "int":
        return int64 if signature[1] else int32
    if kind == "float":
        return float32  # as the project's tensors: a Python float is a float32
    dtype: DataType = DTYPE_BY_NAME[kind]
    shape = signature[1]
    return dtype[shape] if shape else dtype


class JitFunction:
    """A `@hidet.jit` kernel (see the module docstring): call it with arguments; `builds` counts its builds."""

    def __init__(self, py_func: Callable[..., Any], defining_locals: dict[str, Any], target: Target | None,
                 options: dict[str, Any]) -> None:
        self.py_func = py_func
        self.target = target
        self.options = options
        self.builds = 0
        self.specializations: dict[Signature, Any] = {}
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func
        self._defining_locals = defining_locals
        self._params = list(inspect.signature(py_func).parameters)
        self._annotated = {n for n, p in inspect.signature(py_func).parameters.items()
                           if p.annotation is not inspect.Parameter.empty}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<jit function {self.__name__} ({self.builds} builds)>"

    def __call__(self, *args: Any) -> Any:
        """Run the kernel on `args`, building it first for a signature not seen before."""
        try:
            compiled = self.compiled_for(*args)
        except Exception as e:  # noqa: BLE001 - argument and DSL errors reach the user at their call, without ours
            raise without_compiler_frames(e) from None
        return compiled(*args)

    def compiled_for(self, *args: Any) -> Any:
        """The compiled module for arguments like `args` (built on first use, then kept)."""
        if len(args) != len(self._params):
            raise TypeError(f"{self.__name__}() takes {len(self._params)} arguments ({', '.join(self._params)}), "
                            f"got {len(args)}")
        signature = tuple(() if name in self._annotated else argument_signature(name, value)
                          for name, value in zip(self._params, args))
        compiled = self.specializations.get(signature)
        if compiled is None:
            with self._lock:
                compiled = self.specializations.get(signature)
                if compiled is None:
                    compiled = self.specializations[signature] = self._build(signature)
                    self.builds += 1
        return compiled

    def _build(self, signature: Signature) -> Any:
        types = {name: parameter_type(sig) for name, sig in zip(self._params, signature) if sig}
        func = _parse(self.py_func, self._defining_locals, types)
        attrs = func.ir.attrs
        if attrs.kind_inferred and attrs.kind == FuncKind.CPU_INTERNAL:  # no func_kind: callable from Python
            ir = dataclasses.replace(func.ir, attrs=dataclasses.replace(attrs, kind=FuncKind.PUBLIC,
                                                                            kind_inferred=False))
            func = ScriptFunction(func.py_func, ir, func.callees)
        module = ScriptModule()
        module.add(func)
        return module.build(self.target, **self.options)


def jit(py_func: Callable[..., Any] | None = None, *, target: Target | str | None = None,
        **options: Any) -> Any:
    """`@hidet.jit` or `@hidet.jit(target='cpu', check=True)`: a `JitFunction`, built on each first call with new
    argument types or shapes (see the module docstring); `options` are those of `module.build()`."""
    target = None if target is None else Target.of(target)
    if py_func is None:
        return lambda f: JitFunction(f, _defining_locals(f), target, options)
    return JitFunction(py_func, _defining_locals(py_func), target, options)


def jit_for_caller(frame: FrameType) -> Callable[..., Any]:
    """`jit`, for code running in `frame` that looks it up: parameter names bound as `script_for_caller` binds
    them, so that annotations such as `x: f32[n]` evaluate."""
    script_for_caller(frame)
    return jit
