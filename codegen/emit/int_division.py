"""Integer `/` and `%` in generated C: the guarded helpers of `hidet_lang/int_division.h` where C could trap.

C leaves a division by zero and `MIN / -1` undefined (x86 traps: SIGFPE kills the process); the helpers define
them (`a / 0 == -1`, `a % 0 == a`, `MIN / -1 == MIN`, `MIN % -1 == 0`, as the header says). A divisor that is a
constant other than 0 and -1 needs no guard, so the usual `i // 4`, `i % 16` stay plain C, which the compiler
turns into shifts and multiplications.
"""

from __future__ import annotations

from hidet_lang.ir import expr as E
from hidet_lang.ir.types import DataType


def needs_guard(t: DataType, divisor: E.Expr) -> bool:
    """True when an integer division or modulo of type `t` by `divisor` needs the guarded helper."""
    if t.kind not in ("int", "uint"):
        return False
    return not (isinstance(divisor, E.Constant) and int(divisor.value) not in (0, -1))


def guarded_division(op: str, t: DataType, a: str, b: str, where: str | None = None, fail: str = "") -> str:
    """The C call computing `a op b` (`op`: "/" or "%") of integer type `t` with the header's defined results;
    with `where` (checking mode) a zero divisor first calls `fail(where)` (a C function taking the C string)."""
    helper = f"hl_{'div' if op == '/' else 'mod'}_{t.short_name}"
    if where is None:
        return f"{helper}({a}, {b})"
    return f"{helper}_checked({a}, {b}, {where}, {fail})"
