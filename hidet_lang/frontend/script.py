"""`@hidet.script`, script functions and script modules.

A decorated function is parsed at once (so errors point at the definition), into an IR function. Names in
the kernel resolve to its closure, then to the locals of the scope that defines it (names used only in
string annotations, under `from __future__ import annotations`, are in no closure), then its globals. Inside a
`with hidet.script_module() as module:` block, every decorated function joins the module; the functions they
call join it automatically. `module.build()` compiles the module for the target its function kinds imply.
"""

from __future__ import annotations

import ast
import dis
import inspect
import linecache
import sys
import textwrap
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from hidet_lang.builder import installed_builder
from hidet_lang.errors import DSLError, DSLSyntaxError, without_compiler_frames
from hidet_lang.frontend.annotation_names import bind_placeholders, unbind_placeholders
from hidet_lang.frontend.parsed_function import ParsedFunction
from hidet_lang.frontend.parser import Parser
from hidet_lang.frontend.python_ast import parse_python
from hidet_lang.ir.func import Function, IRModule
from hidet_lang.target import Target


class _ModuleStack(threading.local):
    """The `script_module` blocks open in this thread, innermost last (threads build modules independently)."""

    def __init__(self) -> None:
        self.blocks: list[ScriptModule] = []


_OPEN_MODULES = _ModuleStack()

# The function that compiles an IRModule. The frontend does not import the code generator; the package's facade
# (hidet_lang/__init__.py) installs codegen's `build_module` here.
class ScriptFunction(ParsedFunction):
    """A parsed `@hidet.script` function: its IR and the script functions it calls, built and called from Python."""

    def __init__(self, py_func: Callable[..., Any], ir: Function, callees: list[ScriptFunction]) -> None:
        super().__init__(py_func, ir, callees)
        self._single_module: ScriptModule | None = None

    def build(self, target: Target | str | None = None, **options: Any) -> Any:
        """Build a module holding this function (and its callees) for `target`, as `ScriptModule.build` does."""
        if self._single_module is None:
            self._single_module = ScriptModule()
            self._single_module.add(self)
        return self._single_module.build(target, **options)

    def __call__(self, *args: Any) -> Any:
        """Called from Python (outside a kernel): build once, then run."""
        return self.build()(*args)


class ScriptModule:
    """The functions compiled together; `build()` gives a callable compiled module."""

    def __init__(self) -> None:
        self.functions: list[ScriptFunction] = []
        self._built: dict[tuple[Any, ...], Any] = {}
        self._placeholders: tuple[dict[str, Any], dict[str, Any]] = ({}, {})

    def __enter__(self) -> ScriptModule:
        frame = sys._getframe(1)
        self._placeholders = (frame.f_globals, bind_placeholders(frame))
        _OPEN_MODULES.blocks.append(self)
        return self

    def __exit__(self, *exc: Any) -> None:
        _OPEN_MODULES.blocks.remove(self)
        unbind_placeholders(*self._placeholders)

    def add(self, func: ScriptFunction) -> None:
        """Add a script function (and, transitively, those it calls)."""
        for callee in func.callees:
            self.add(callee)
        if func not in self.functions:
            names = {f.name: f for f in self.functions}
            if func.name in names:
                raise ValueError(f"the module already has a function named '{func.name}'")
            self.functions.append(func)
            self._built.clear()

    def ir_module(self) -> IRModule:
        """The module's IR, callees before callers."""
        return IRModule(tuple(f.ir for f in self.functions))

    def build(self, target: Target | str | None = None, **options: Any) -> Any:
        """Compile the module for `target` (a `Target`, or 'cpu', 'cuda' or 'cuda:sm_XY'; inferred from the function
        kinds when omitted); `check=True` builds the checking mode."""
        target = None if target is None else Target.of(target)
        key = (target, tuple(sorted(options.items())))
        built = self._built.get(key)
        if built is None:
            builder = installed_builder()
            try:
                built = builder(self.ir_module(), target, **options)
            except Exception as e:  # noqa: BLE001 - every build error is re-raised as is, without our frames
                raise without_compiler_frames(e) from None
            self._built[key] = built
        return built


def script_module() -> ScriptModule:
    """A new module; use it as `with hidet.script_module() as module:`."""
    return ScriptModule()


def script(py_func: Callable[..., Any]) -> ScriptFunction:
    """Parse a Python function into a DSL function (and add it to the enclosing `script_module`)."""
    try:
        func = _parse(py_func, _defining_locals(py_func))
    except Exception as e:  # noqa: BLE001 - DSL errors and parse errors reach the user without our frames
        host_error = e.__cause__ if isinstance(e, DSLError) else None  # what the user's Python code raised
        raise without_compiler_frames(e) from host_error
    if _OPEN_MODULES.blocks:
        _OPEN_MODULES.blocks[-1].add(func)
    return func


def script_for_caller(frame: FrameType) -> Callable[[Callable[..., Any]], ScriptFunction]:
    """`script`, for code running in `frame` that looks it up (`@hidet.script`, `from hidet_lang import script`).

    Python looks the decorator up before it evaluates the annotations of the `def` below it, so binding the
    parameter names of `frame`'s file here lets `x: f32[n]` evaluate outside a `script_module` block, as inside
    one. The placeholders stay bound (a later `def` may use them); names the program defines are never bound.
    `@hidet.script` in code without a source file (`python -c`, standard input) is refused here, before Python
    evaluates the annotations of the `def`, which would fail on such names first."""
    imported = frame.f_code.co_filename.startswith("<frozen importlib") or _importing(frame)
    while frame.f_back is not None and frame.f_code.co_filename.startswith("<frozen importlib"):
        frame = frame.f_back  # `from hidet_lang import script` through the import machinery: the importer's frame
    if not linecache.getlines(frame.f_code.co_filename):
        if imported:  # an import is no kernel yet: parsing one says why it cannot be
            return script
        raise without_compiler_frames(_no_source_error(frame.f_code.co_filename))
    bind_placeholders(frame)
    return script


def _importing(frame: FrameType) -> bool:
    """Whether `frame` is executing `from ... import` (rather than an attribute lookup such as `hidet.script`)."""
    return dis.opname[frame.f_code.co_code[frame.f_lasti]] == "IMPORT_FROM"


def _no_source_error(filename: str, name: str | None = None) -> OSError:
    """The error for a kernel (`name`, where known) defined in code whose source Python does not keep."""
    what = f"'{name}'" if name else "the functions it compiles"
    return OSError(f"@hidet.script reads the source of {what}, and Python keeps none for code run from "
                   f"{filename}: write kernels in a file and run it (`python kernels.py`), not with "
                   "`python -c`, from standard input or at the interactive prompt")


def _defining_locals(py_func: Callable[..., Any]) -> dict[str, Any]:
    """A snapshot of the locals of the function whose body defines `py_func` ({} at module level or if not found).

    The defining frame is the nearest caller whose code object holds `py_func`'s code as a constant.
    """
    code = getattr(py_func, "__code__", None)
    frame = sys._getframe(1)
    try:
        while frame is not None:
            if code is not None and code in frame.f_code.co_consts:
                return {} if frame.f_locals is frame.f_globals else dict(frame.f_locals)
            frame = frame.f_back
        return {}
    finally:
        del frame


def _parse(py_func: Callable[..., Any], defining_locals: dict[str, Any] | None = None,
           param_types: dict[str, Any] | None = None) -> ScriptFunction:
    """The script function of `py_func`; `param_types` gives the types of parameters written without an
    annotation (`hidet_lang.frontend.jit`: those of a call's arguments)."""
    if not inspect.isfunction(py_func):
        raise TypeError(f"@hidet.script decorates a Python function, not {py_func!r}")
    try:
        lines, first_line = inspect.getsourcelines(py_func)
    except OSError:
        raise _no_source_error(py_func.__code__.co_filename, py_func.__qualname__) from None
    source = "".join(lines)
    dedented = textwrap.dedent(source)
    indent = len(lines[0]) - len(lines[0].lstrip()) if lines else 0
    file = inspect.getsourcefile(py_func) or py_func.__code__.co_filename
    try:
        tree = parse_python(dedented)
    except SyntaxError as e:
        raise DSLSyntaxError(f"cannot parse the function's source: {e.msg}") from None
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise DSLSyntaxError("@hidet.script decorates a `def` function")
    lookup = _host_scope(py_func, defining_locals or {})
    if param_types:
        lookup = _annotate(fdef, param_types, lookup)
    parser = Parser(file, first_line - 1, indent, lookup)
    ir, ctx = parser.parse_function(fdef)
    return ScriptFunction(py_func, ir, ctx.callees)


def _annotate(fdef: ast.FunctionDef, param_types: dict[str, Any],
              lookup: Callable[[str], tuple[bool, Any]]) -> Callable[[str], tuple[bool, Any]]:
    """Give each parameter of `fdef` without an annotation the type `param_types` has for it (as a name at the
    parameter's position, so that errors point there); the lookup that also finds those names."""
    names: dict[str, Any] = {}
    for a in fdef.args.args:
        if a.annotation is None and a.arg in param_types:
            name = f"__type_of_{a.arg}"
            names[name] = param_types[a.arg]
            a.annotation = ast.copy_location(ast.Name(id=name, ctx=ast.Load()), a)

    def annotated(name: str) -> tuple[bool, Any]:
        return (True, names[name]) if name in names else lookup(name)

    return annotated


def _host_scope(py_func: Callable[..., Any], defining_locals: dict[str, Any]) -> Callable[[str], tuple[bool, Any]]:
    """Name lookup in the function's closure, then the locals of its defining scope, then its globals."""
    closure: dict[str, Any] = {}
    if py_func.__closure__:
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                continue  # a cell not yet filled
    glob = py_func.__globals__

    def lookup(name: str) -> tuple[bool, Any]:
        if name in closure:
            return True, closure[name]
        if name in defining_locals:
            return True, defining_locals[name]
        if name in glob:
            return True, glob[name]
        return False, None

    return lookup
