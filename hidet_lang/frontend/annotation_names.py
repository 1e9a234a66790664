"""Parameter names that annotations use before Python can find them: `def k(n: i32, a: f32[n])`.

Python before 3.14 evaluates annotations when `def` runs, before the decorator sees the function, so in
`f32[n]` the name `n` (an earlier parameter) is looked up in the enclosing scopes and fails. Inside a
`with hidet.script_module():` block, such names are bound to placeholders in the defining module's globals
for the duration of the block: only names of parameters that a later parameter's annotation mentions, and
only where the name is defined neither there nor in builtins. The parser reads annotations from the source, so
the placeholders' values never matter; they are removed when the block ends.

Outside a block, the lookup of the decorator itself binds them (`hidet.script` and `from hidet_lang import
script` go through the package's `__getattr__`, which Python calls before it evaluates the annotations of the
`def` that follows); those stay bound, since no hook runs after the last `def` of a file.
"""

from __future__ import annotations

import ast
import builtins
import functools
import linecache
import os
from types import FrameType
from typing import Any

from hidet_lang.frontend.python_ast import parse_python


class ParameterPlaceholder:
    """Stands for a parameter in an eagerly evaluated annotation; absorbs arithmetic and indexing."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name

    def _same(self, *args: Any) -> ParameterPlaceholder:
        return self

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _same
    __floordiv__ = __rfloordiv__ = __truediv__ = __rtruediv__ = __mod__ = __rmod__ = __neg__ = _same


@functools.lru_cache(maxsize=64)
def _names_in_file(filename: str, stamp: tuple[int, int]) -> frozenset[str]:
    source = "".join(linecache.getlines(filename))
    try:
        tree = parse_python(source)
    except (SyntaxError, ValueError):
        return frozenset()
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            params = [a.arg for a in node.args.args]
            for i, a in enumerate(node.args.args):
                if a.annotation is None:
                    continue
                used = {n.id for n in ast.walk(a.annotation) if isinstance(n, ast.Name)}
                names.update(used & set(params[:i]))
    return frozenset(names)


def annotation_parameter_names(filename: str) -> frozenset[str]:
    """Names of parameters used in later parameters' annotations, over every function in `filename`."""
    try:
        st = os.stat(filename)
    except OSError:
        return frozenset()
    return _names_in_file(filename, (st.st_mtime_ns, st.st_size))


def bind_placeholders(frame: FrameType) -> dict[str, ParameterPlaceholder]:
    """Bind placeholders for the names annotations of `frame`'s file need; returns what was bound."""
    glob = frame.f_globals
    bound = {}
    for name in annotation_parameter_names(frame.f_code.co_filename):
        if name not in glob and name not in frame.f_locals and not hasattr(builtins, name):
            bound[name] = glob[name] = ParameterPlaceholder(name)
    return bound


def unbind_placeholders(frame_globals: dict[str, Any], bound: dict[str, ParameterPlaceholder]) -> None:
    """Remove the placeholders `bind_placeholders` added (unless the program rebound those names)."""
    for name, placeholder in bound.items():
        if frame_globals.get(name) is placeholder:
            del frame_globals[name]
