"""IR expressions.

Integer `/` and `%` follow C: the quotient is truncated toward zero and the remainder has the sign of the
dividend. Python operators on expressions build IR (`a + 1`), so host helper functions can compute with IR
values; `==`, `!=` and truth testing are not overloaded (equality of nodes is structural; `Var` is identity).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from hidet_lang.ir.node import Node
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    TensorType,
    Type,
    VectorType,
    boolean,
    element_type,
    float32,
    int32,
    int64,
    promote,
)

COMPARISON_OPS = frozenset({"<", "<=", ">", ">=", "==", "!="})
LOGICAL_OPS = frozenset({"&&", "||"})
BOOL_CLOSED_OPS = frozenset({"&", "|", "^"})
"""The operators that give a bool on two bools; any other operator computes bools as i32 values, as C and Python
do (`True + True == 2`, `-True == -1`, `True << 1 == 2`)."""


def _computed_type(t: Type) -> Type:
    """The type an arithmetic operator computes in, given its operands' (promoted) type `t`: i32 for bool (C's
    integer promotion), `t` otherwise."""
    return int32 if t == boolean else t


class Expr(Node):
    """Base of IR expressions; arithmetic operators build IR."""

    __slots__ = ()

    @property
    def type(self) -> Type:
        raise NotImplementedError

    def __bool__(self) -> bool:
        raise TypeError(
            "an IR value has no truth value while the kernel is being parsed; "
            "use it in the kernel's own `if`/`while`, or `x if c else y`"
        )

    def __add__(self, other: Any) -> Expr:
        return binary("+", self, other)

    def __radd__(self, other: Any) -> Expr:
        return binary("+", other, self)

    def __sub__(self, other: Any) -> Expr:
        return binary("-", self, other)

    def __rsub__(self, other: Any) -> Expr:
        return binary("-", other, self)

    def __mul__(self, other: Any) -> Expr:
        return binary("*", self, other)

    def __rmul__(self, other: Any) -> Expr:
        return binary("*", other, self)

    def __truediv__(self, other: Any) -> Expr:
        return binary("/", self, other)

    def __rtruediv__(self, other: Any) -> Expr:
        return binary("/", other, self)

    def __floordiv__(self, other: Any) -> Expr:
        return binary("/", self, other)

    def __rfloordiv__(self, other: Any) -> Expr:
        return binary("/", other, self)

    def __mod__(self, other: Any) -> Expr:
        return binary("%", self, other)

    def __rmod__(self, other: Any) -> Expr:
        return binary("%", other, self)

    def __lt__(self, other: Any) -> Expr:
        return binary("<", self, other)

    def __le__(self, other: Any) -> Expr:
        return binary("<=", self, other)

    def __gt__(self, other: Any) -> Expr:
        return binary(">", self, other)

    def __ge__(self, other: Any) -> Expr:
        return binary(">=", self, other)

    def __and__(self, other: Any) -> Expr:
        return binary("&", self, other)

    def __or__(self, other: Any) -> Expr:
        return binary("|", self, other)

    def __xor__(self, other: Any) -> Expr:
        return binary("^", self, other)

    def __lshift__(self, other: Any) -> Expr:
        return binary("<<", self, other)

    def __rshift__(self, other: Any) -> Expr:
        return binary(">>", self, other)

    def __neg__(self) -> Expr:
        return UnaryOp("-", self)

    def __getitem__(self, indices: Any) -> Expr:
        indices = indices if isinstance(indices, tuple) else (indices,)
        return TensorElement(self, tuple(convert(i) for i in indices))

    def __setitem__(self, indices: Any, value: Any) -> None:
        """`x[i] = v` in a Python helper that a kernel calls while it is parsed: handed to the store handler
        of `element_stores` (the parser's, which makes it a store of the kernel); TypeError outside one."""
        store = _element_store.get()
        if store is None:
            raise TypeError("a store into an IR tensor (x[i] = v) happens only in a helper called by a kernel")
        store(self, indices if isinstance(indices, tuple) else (indices,), value)


# Who receives `x[i] = v` on IR values in Python code run while a kernel is parsed (see `element_stores`).
_element_store: ContextVar[Callable[[Expr, tuple[Any, ...], Any], None] | None] = ContextVar(
    "hidet_lang_element_store", default=None)


@contextmanager
def element_stores(store: Callable[[Expr, tuple[Any, ...], Any], None]) -> Iterator[None]:
    """Inside the block, `x[i] = v` on an IR value `x` calls `store(x, (i,), v)`."""
    token = _element_store.set(store)
    try:
        yield
    finally:
        _element_store.reset(token)


@dataclass(frozen=True, slots=True, eq=False)
class Var(Expr):
    """A variable: a parameter, a local scalar, a local array or a loop variable. Equality is identity."""

    name: str
    var_type: Type

    @property
    def type(self) -> Type:
        return self.var_type

    __eq__ = object.__eq__
    __hash__ = object.__hash__


@dataclass(frozen=True, slots=True)
class Constant(Expr):
    """A scalar constant of a data type."""

    value: int | float | bool
    dtype: DataType

    @property
    def type(self) -> Type:
        return self.dtype


@dataclass(frozen=True, slots=True)
class StringLiteral(Expr):
    """A string, only as the format argument of `printf` or an assertion message."""

    value: str

    @property
    def type(self) -> Type:
        return PointerType(boolean)


@dataclass(frozen=True, slots=True)
class BinaryOp(Expr):
    """`a op b`; `op` is one of the C operators (`&&`/`||` for Python's `and`/`or`)."""

    op: str
    a: Expr
    b: Expr

    @property
    def type(self) -> Type:
        if self.op in COMPARISON_OPS or self.op in LOGICAL_OPS:
            return boolean
        ta, tb = self.a.type, self.b.type
        if self.op in ("<<", ">>"):
            return _computed_type(ta)
        if isinstance(ta, PointerType) or isinstance(tb, PointerType):
            return ta if isinstance(ta, PointerType) else tb
        if isinstance(ta, VectorType):
            return ta  # lane-wise, on two vectors of one type (the frontend checks that)
        t = promote(element_type(ta), element_type(tb))
        return t if self.op in BOOL_CLOSED_OPS else _computed_type(t)


@dataclass(frozen=True, slots=True)
class UnaryOp(Expr):
    """`-a`, `!a` (logical not) or `~a` (bitwise not)."""

    op: str
    a: Expr

    @property
    def type(self) -> Type:
        return boolean if self.op == "!" else _computed_type(self.a.type)


@dataclass(frozen=True, slots=True)
class Cast(Expr):
    """Conversion of a value to a scalar type (C conversion rules)."""

    expr: Expr
    dtype: DataType

    @property
    def type(self) -> Type:
        return self.dtype


@dataclass(frozen=True, slots=True)
class Reinterpret(Expr):
    """A pointer (or a tensor's address) viewed as a pointer of another type, e.g. `~f16` or `~f32[4, 4]`."""

    expr: Expr
    target: PointerType

    @property
    def type(self) -> Type:
        return self.target


@dataclass(frozen=True, slots=True)
class IfThenElse(Expr):
    """`then_expr if cond else else_expr`."""

    cond: Expr
    then_expr: Expr
    else_expr: Expr

    @property
    def type(self) -> Type:
        ta, tb = self.then_expr.type, self.else_expr.type
        if isinstance(ta, DataType) and isinstance(tb, DataType):
            return promote(ta, tb)
        return ta


@dataclass(frozen=True, slots=True)
class Call(Expr):
    """A call of another function of the module, by name."""

    func_name: str
    args: tuple[Expr, ...]
    ret_type: Type

    @property
    def type(self) -> Type:
        return self.ret_type


@dataclass(frozen=True, slots=True)
class Intrinsic(Expr):
    """A built-in operation the code generator maps per target: `exp`, `min`, `printf`, ..."""

    name: str
    args: tuple[Expr, ...]
    ret_type: Type

    @property
    def type(self) -> Type:
        return self.ret_type


@dataclass(frozen=True, slots=True)
class TensorElement(Expr):
    """`base[i, j, ...]` on a tensor, or `base[i]` on a pointer."""

    base: Expr
    indices: tuple[Expr, ...]

    @property
    def type(self) -> Type:
        return element_type(self.base.type)


@dataclass(frozen=True, slots=True)
class Address(Expr):
    """The address of an element or a variable (`~x[i]` in the DSL). A vector variable's address is its first
    lane's (pointers hold scalars only), so its lanes can be read and written one by one through it."""

    expr: Expr

    @property
    def type(self) -> Type:
        t = self.expr.type
        if isinstance(t, TensorType):
            return PointerType(element_type(t))
        return PointerType(t.dtype) if isinstance(t, VectorType) else PointerType(t)


@dataclass(frozen=True, slots=True)
class Dereference(Expr):
    """The value a pointer points at."""

    expr: Expr

    @property
    def type(self) -> Type:
        return element_type(self.expr.type)


def convert(value: Any) -> Expr:
    """An IR expression for `value`: IR expressions pass through, Python scalars become constants."""
    if isinstance(value, Expr):
        return value
    if isinstance(value, bool):
        return Constant(value, boolean)
    if isinstance(value, int):
        return Constant(value, int32 if -(2**31) <= value < 2**31 else int64)
    if isinstance(value, float):
        return Constant(value, float32)
    raise TypeError(f"cannot use a {type(value).__name__} ({value!r}) as an IR value")


def binary(op: str, a: Any, b: Any) -> Expr:
    """`a op b` as IR, with Python scalars converted (a Python float takes the other side's float type)."""
    if isinstance(a, float) and isinstance(b, Expr) and _is_float(b):
        a = Constant(a, element_type(b.type))
    if isinstance(b, float) and isinstance(a, Expr) and _is_float(a):
        b = Constant(b, element_type(a.type))
    return BinaryOp(op, convert(a), convert(b))


def _is_float(e: Expr) -> bool:
    t = e.type
    return isinstance(t, DataType) and t.is_float
