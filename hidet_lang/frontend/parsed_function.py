"""What the parser knows of a parsed `@hidet.script` function, below the parser that calls one from a kernel and
the decorator (`script.ScriptFunction`) that adds building it and calling it from Python."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hidet_lang.ir.func import Function


class ParsedFunction:
    """A parsed function: the Python function, its IR and the parsed functions it calls."""

    def __init__(self, py_func: Callable[..., Any], ir: Function, callees: list[ParsedFunction]) -> None:
        self.py_func = py_func
        self.ir = ir
        self.callees = callees
        self.__name__ = ir.name
        self.__doc__ = py_func.__doc__
        self.__wrapped__ = py_func

    @property
    def name(self) -> str:
        """The function's name in the generated code."""
        return self.ir.name

    def __repr__(self) -> str:
        return f"<script function {self.ir.name} ({self.ir.attrs.kind})>"
