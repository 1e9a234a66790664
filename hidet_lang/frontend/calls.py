"""Calls in a kernel: other script functions, casts, math functions, `range`, and Python helpers.

What a call means follows from what its callee evaluates to while parsing: a `@hidet.script` function becomes
an IR call checked against its parameters (in its own body, a function's name is a recursive call of it:
`RecursiveSelf`); a data type (`f32(x)`) or Python's `float`/`int`/`bool` on an IR value is a conversion; Python's
`math` functions (and `abs`, `min`, `max`, ...) on IR values are intrinsics; `range` with IR bounds is a
`RangeLoop` for a `for` loop; any other Python callable runs while parsing (host helpers compute with IR values
through their operators, and store into tensors when called as a statement of their own).
"""

from __future__ import annotations

import ast
import collections
from dataclasses import dataclass
from typing import Any

from hidet_lang.errors import DSLSyntaxError, DSLTypeError
from hidet_lang.frontend import builtins as B
from hidet_lang.frontend import semantics
from hidet_lang.frontend.core import ParserCore
from hidet_lang.frontend.loops import RangeLoop
from hidet_lang.frontend.parsed_function import ParsedFunction
from hidet_lang.ir import expr as E
from hidet_lang.ir.func import HOST_CALLABLE_KINDS
from hidet_lang.ir.types import DataType, PointerType, Type, void


class CallParser(ParserCore):
    """The parser's `expr_Call`: evaluates the callee and the arguments, then calls."""

    def expr_Call(self, node: ast.Call) -> Any:
        """`f(a, *values, k=v)`."""
        func = self.visit_expr(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                value = self.visit_expr(a.value)
                if not isinstance(value, (tuple, list)):
                    raise self.error(a, "only a Python tuple or list can be unpacked with *", DSLTypeError)
                args.extend(value)
            else:
                args.append(self.visit_expr(a))
        kwargs = {}
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(node, "**kwargs is not supported in a kernel call", DSLSyntaxError)
            kwargs[kw.arg] = self.visit_expr(kw.value)
        return self.call(node, func, args, kwargs)

    def call(self, node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """Call `func`: another script function, a cast, a math function, range, or a Python helper."""
        any_ir = any(isinstance(a, E.Expr) for a in [*args, *kwargs.values()])
        if isinstance(func, ParsedFunction):
            assert self.ctx is not None
            if func not in self.ctx.callees:
                self.ctx.callees.append(func)
            return self.call_script(node, func.ir.name, func.ir.params, func.ir.ret_type, args, kwargs)
        if isinstance(func, RecursiveSelf):
            return self.call_self(node, func, args, kwargs)
        if func is range:
            if kwargs or not 1 <= len(args) <= 3:
                raise self.error(node, "range() takes 1 to 3 positional arguments", DSLTypeError)
            if not any_ir:
                return self.host_call(node, range, *args)
            if len(args) == 1:
                return RangeLoop(0, args[0], 1)
            return RangeLoop(args[0], args[1], args[2] if len(args) == 3 else 1)
        if isinstance(func, DataType):
            if len(args) != 1 or kwargs:
                raise self.error(node, f"{func}() converts one value", DSLTypeError)
            return self.host_call(node, semantics.cast, args[0], func)
        if isinstance(func, PointerType):  # void_p(p), (~f32)(p): the cast Hidet spells as a call of the type
            if len(args) != 1 or kwargs:
                raise self.error(node, f"{func}() converts one value", DSLTypeError)
            return self.host_call(node, B.cast, args[0], func)
        builtin = _hashable(func)  # a Python builtin the DSL maps (int, float, math.exp, ...) is hashable
        if builtin and func in B.PYTHON_CASTS and any_ir:
            if len(args) != 1 or kwargs:
                raise self.error(node, f"{func.__name__}() converts one value", DSLTypeError)
            return self.host_call(node, semantics.cast, args[0], B._as_dtype(B.PYTHON_CASTS[func]))
        if builtin and func in B.PYTHON_MATH and any_ir:
            if kwargs:
                raise self.error(node, f"{B.PYTHON_MATH[func]}() takes no keyword arguments here", DSLTypeError)
            return self.host_call(node, semantics.math_call, B.PYTHON_MATH[func], *args)
        if func is print:
            raise self.error(node, "print() does not exist in a kernel; use printf(format, ...)", DSLSyntaxError)
        if not callable(func):
            raise self.error(node, f"{semantics.describe(func)} is not callable")
        if any_ir and _is_numpy(func):
            raise self.error(node, _numpy_call_message(func), DSLTypeError)
        receiver = _changed_container(node, func)
        if receiver is not None:
            self.check_host_change(node, receiver, f"`{ast.unparse(node.func)}(...)`")
        return self.helper_call(node, func, args, kwargs)

    def helper_call(self, node: ast.Call, func: Any, args: list[Any], kwargs: dict[str, Any]) -> Any:
        """A Python helper, run while parsing. Its stores into IR tensors (`buf[i] = v`) become stores of the
        kernel when the call is a statement of its own; inside an expression they are refused, since they would
        run before the rest of the expression and whatever its `and`/`or`/`if` decide."""
        def store(base: E.Expr, indices: tuple[Any, ...], value: Any) -> None:
            if node is not self.statement_call:
                raise self.error(node, f"the helper {getattr(func, '__name__', 'called here')}() stores into a "
                                       "tensor, so it must be called as a statement of its own, not inside an "
                                       "expression")
            self.store_element(node, base, indices, value)

        with E.element_stores(store):
            return self.host_call(node, func, *args, **kwargs)

    def call_self(self, node: ast.Call, func: RecursiveSelf, args: list[Any], kwargs: dict[str, Any]) -> E.Expr:
        """A recursive call of the function being parsed: its return type must be annotated (the body that
        would infer it is not parsed yet); `check_kind_rules` checks that its kind allows recursion."""
        assert self.ctx is not None
        ret = self.ctx.declared_return
        if ret is None and self.ctx.kind in HOST_CALLABLE_KINDS:
            ret = void  # what these kinds return
        if ret is None:
            raise self.error(node, f"'{func.name}' calls itself: annotate its return type for the recursive call, "
                                   f"e.g. `def {func.name}(...) -> i32:` (or `-> None`)")
        return self.call_script(node, func.name, func.params, ret, args, kwargs)

    def call_script(self, node: ast.Call, name: str, params: tuple[E.Var, ...], ret_type: Type, args: list[Any],
                    kwargs: dict[str, Any]) -> E.Expr:
        """A call of the `@hidet.script` function `name`: the arguments checked against its parameters."""
        names = [p.name for p in params]
        if len(args) > len(params):
            raise self.error(node, f"{name}() takes {len(params)} argument(s) but {len(args)} were given")
        bound = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise self.error(node, f"{name}() has no parameter '{k}'; its parameters: {', '.join(names)}")
            if k in bound:
                raise self.error(node, f"{name}() got parameter '{k}' twice")
            bound[k] = v
        missing = [n for n in names if n not in bound]
        if missing:
            raise self.error(node, f"{name}() is missing argument(s): {', '.join(missing)}")
        converted = []
        for p in params:
            try:
                converted.append(semantics.argument(p.type, bound[p.name], f"parameter '{p.name}'"))
            except TypeError as e:
                raise self.error(node, f"{name}(): {e}") from None
        return E.Call(name, tuple(converted), ret_type)


@dataclass(frozen=True)
class RecursiveSelf:
    """What the name of the function being parsed means in its own body: a recursive call of it."""

    name: str
    params: tuple[E.Var, ...]


# The methods that change a Python container in place.
_LIST_CHANGES = frozenset({"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "__setitem__",
                           "__delitem__", "__iadd__", "__imul__"})
_CHANGING_METHODS: dict[type, frozenset[str]] = {
    list: _LIST_CHANGES,
    bytearray: _LIST_CHANGES,
    collections.deque: _LIST_CHANGES | {"appendleft", "extendleft", "popleft", "rotate"},
    dict: frozenset({"update", "pop", "popitem", "setdefault", "clear", "__setitem__", "__delitem__", "__ior__"}),
    set: frozenset({"add", "discard", "remove", "pop", "clear", "update", "difference_update", "__ior__",
                    "intersection_update", "symmetric_difference_update", "__iand__", "__isub__", "__ixor__"}),
}


def _changed_container(node: ast.Call, func: Any) -> str | None:
    """The name the call `xs.append(v)` (or `d['k'].update(...)`, ...) changes a Python container through: the
    root name of the receiver when `func` is a method that changes a list, dict, set, bytearray or deque."""
    owner = getattr(func, "__self__", None)
    changing = next((names for kind, names in _CHANGING_METHODS.items() if isinstance(owner, kind)), frozenset())
    if getattr(func, "__name__", None) not in changing or not isinstance(node.func, ast.Attribute):
        return None
    root = node.func.value
    while isinstance(root, (ast.Attribute, ast.Subscript)):
        root = root.value
    return root.id if isinstance(root, ast.Name) else None


# What a kernel calls instead of numpy's functions of the same meaning.
_NUMPY_INSTEAD = {
    "exp": "hidet.exp(x) or math.exp(x)", "sqrt": "hidet.sqrt(x) or math.sqrt(x)", "maximum": "max(a, b)",
    "minimum": "min(a, b)", "abs": "abs(x)", "absolute": "abs(x)", "fabs": "abs(x)", "power": "a ** b or math.pow",
    "where": "`a if cond else b`", "float32": "f32(x)", "float64": "f64(x)", "float16": "f16(x)", "int32": "i32(x)",
    "int64": "i64(x)", "int8": "i8(x)", "int16": "i16(x)", "uint8": "u8(x)", "uint16": "u16(x)", "uint32": "u32(x)",
    "uint64": "u64(x)", "bool_": "bool(x)", "fmax": "max(a, b)", "fmin": "min(a, b)",
}


def _is_numpy(func: Any) -> bool:
    """Whether `func` is one of numpy's functions, ufuncs or scalar types."""
    module = getattr(func, "__module__", None) or type(func).__module__
    return isinstance(module, str) and (module == "numpy" or module.startswith("numpy."))


def _numpy_call_message(func: Any) -> str:
    """Why numpy's `func` cannot take kernel values, and what to write instead."""
    name = getattr(func, "__name__", "function")
    instead = _NUMPY_INSTEAD.get(name)
    if instead is None and name in B.PYTHON_MATH.values():
        instead = f"math.{name}(x)"
    use = f"; use {instead}" if instead else "; use the kernel's own math functions (math.<name>, hidet.exp, ...)"
    return (f"numpy.{name}() cannot compute with kernel values: numpy runs in Python while the kernel compiles, "
            f"not in the kernel{use}")


def _hashable(x: Any) -> bool:
    """Whether `x` can be looked up in a dict."""
    try:
        hash(x)
    except TypeError:
        return False
    return True
