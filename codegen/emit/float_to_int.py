"""Float -> integer conversions in generated C: the helpers of `hidet_lang/float_to_int.h` where C's cast could be
undefined.

C leaves converting a float the integer type cannot hold (out of range, an infinity, NaN) undefined; the helpers
define it as the GPU's `cvt.rzi.sat` does (`hidet_lang.ir.evaluate.float_to_int`: rounded toward zero, saturating,
NaN to 0). A conversion whose value is known to fit (a constant, or an integer converted to a float on the way)
stays a plain C cast.
"""

from __future__ import annotations

from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import float_fits, int_range, round_float
from hidet_lang.ir.types import DataType, Type


def is_float_to_int(source: Type, target: DataType) -> bool:
    """Whether converting a value of type `source` to `target` is a float converted to an integer type."""
    return isinstance(source, DataType) and source.is_float and target.is_integer


def known_to_fit(value: E.Expr, target: DataType) -> bool:
    """Whether the float `value` is known to convert to integer type `target` exactly as a C cast does: a constant
    `target` holds, or an integer of a type whose every value, rounded to the float type, `target` holds."""
    if isinstance(value, E.Constant):
        return float_fits(float(value.value), target)
    if isinstance(value, E.Cast) and isinstance(value.expr.type, DataType) and value.expr.type.is_integer:
        assert isinstance(value.type, DataType)
        return all(float_fits(round_float(float(end), value.type), target) for end in int_range(value.expr.type))
    return False


def float_to_int_call(source: DataType, target: DataType, text: str, where: str | None = None,
                      warn: str = "") -> str:
    """The C call converting `text`, a value of float type `source`, to integer type `target` with the header's
    defined result; with `where` (checking mode) a value `target` cannot hold first calls `warn` (a C function
    taking the location, the two types' names and the value)."""
    helper = f"hl_cvt_{source.short_name}_{target.short_name}"
    if where is None:
        return f"{helper}({text})"
    return f"{helper}_checked({text}, {where}, {warn})"
