"""Hidet's `hidet.ir.module.IRModule`: a module filled function by function, then built.

    ir_module = IRModule()
    ir_module.add_function(kernel.name, kernel)   # a @hidet.script function, or an IR Function
    compiled = ir_module.build()

The functions are kept by name in the order they were added (a script function's callees before it). The IR itself
is immutable: `ir()` gives the `hidet_lang.ir.func.IRModule` node these functions make (what `script_module()`'s
`ir_module()` gives too), which is what `build()` compiles and what `str()` prints.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hidet_lang.ir import func as F

if TYPE_CHECKING:
    from hidet_lang.target import Target


class IRModule:
    """Functions compiled together, added by name (see the module docstring)."""

    def __init__(self, functions: Mapping[str, Any] | Iterable[Any] | None = None) -> None:
        self.functions: dict[str, F.Function] = {}
        items = functions.items() if isinstance(functions, Mapping) else ((None, f) for f in functions or ())
        for name, func in items:
            self.add_function(name if name is not None else _ir_of(func).name, func)

    def add_function(self, name: str, func: Any) -> str:
        """Add `func` (an IR `Function`, or a `@hidet.script` function, whose callees come along) as `name`, which
        must be its name; ValueError when the module has a function of that name already. Returns the name."""
        ir = _ir_of(func)
        if name != ir.name:
            raise ValueError(f"add_function(): the function is called '{ir.name}', not '{name}' (calls and the "
                             "compiled module name it so)")
        if name in self.functions:
            raise ValueError(f"add_function(): the module has a function named '{name}' already")
        for callee in getattr(func, "callees", ()):  # a script function's callees, as `script_module` adds them
            if callee.name not in self.functions:
                self.add_function(callee.name, callee)
        self.functions[name] = ir
        return name

    def lookup(self, name: str) -> F.Function:
        """The function called `name`; KeyError naming the module's functions otherwise."""
        return self.ir().lookup(name)

    def ir(self) -> F.IRModule:
        """The IR module of the functions, in the order they were added."""
        return F.IRModule(tuple(self.functions.values()))

    def build(self, target: Target | str | None = None, **options: Any) -> Any:
        """Compile the module, as `script_module().build()` does: for `target` (a `Target`, or 'cpu', 'cuda',
        'cuda:sm_XY';
        inferred from the function kinds when omitted), with the same options (`check=True`, ...)."""
        return self.ir().build(target, **options)

    def __str__(self) -> str:
        return str(self.ir())


def _ir_of(func: Any) -> F.Function:
    """The IR function of an IR `Function` or of a script function (its `ir`); TypeError for anything else."""
    ir = getattr(func, "ir", func)
    if not isinstance(ir, F.Function):
        raise TypeError(f"an IRModule holds IR functions and @hidet.script functions, not a {type(func).__name__}")
    return ir
