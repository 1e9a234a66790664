"""bfloat16 computed through float, for C with no bf16 arithmetic (the CPU target's; `hidet_lang/cpu_bfloat16.h`).

The C emitter stores a bf16 as `hl_bf16`, its 16 bits in a struct, and computes every operation on bf16 values in
float: `through_float` rewrites such an operation with its bf16 operands converted to f32 (exact) and, where its
result is a bf16, the f32 result converted back (rounded to nearest, ties to even). One bf16 operation is then one
rounding of the exact f32 result of f32 operands, as torch computes bf16 on the CPU.
"""

from __future__ import annotations

import dataclasses
import math
import struct

from hidet_lang.ir.expr import BinaryOp, Cast, Expr, Intrinsic, UnaryOp
from hidet_lang.ir.types import DataType, Type, bfloat16, float32

BF16_STRUCT = "hl_bf16"
"""The C type of a bf16 where C has no bf16 arithmetic."""


def is_bf16(t: Type) -> bool:
    """Whether `t` is the bf16 scalar type."""
    return isinstance(t, DataType) and t == bfloat16


def through_float(e: Expr) -> Expr | None:
    """`e` computed in f32 where it is an arithmetic, comparison or math operation with a bf16 operand or result
    (the result converted back to bf16 where it is one); None for any other expression."""
    if isinstance(e, BinaryOp):
        operands = (e.a, e.b)
    elif isinstance(e, UnaryOp) and e.op == "-":
        operands = (e.a,)
    elif isinstance(e, Intrinsic):
        operands = e.args
    else:
        return None
    if not is_bf16(e.type) and not any(is_bf16(x.type) for x in operands):
        return None
    wide = tuple(Cast(x, float32) if is_bf16(x.type) else x for x in operands)
    if isinstance(e, BinaryOp):
        computed: Expr = dataclasses.replace(e, a=wide[0], b=wide[1])
    elif isinstance(e, UnaryOp):
        computed = dataclasses.replace(e, a=wide[0])
    else:
        computed = dataclasses.replace(e, args=wide, ret_type=float32 if is_bf16(e.ret_type) else e.ret_type)
    return Cast(computed, bfloat16) if is_bf16(e.type) else computed


def bf16_bits(value: float) -> int:
    """The bits of `value` rounded to bf16 through f32 (to nearest, ties to even; NaN is 0x7FC0), as
    `hl_f32_to_bf16` rounds."""
    if math.isnan(value):
        return 0x7FC0
    try:
        (u,) = struct.unpack("<I", struct.pack("<f", value))
    except OverflowError:  # beyond f32: infinity of its sign
        return 0x7F80 if value > 0 else 0xFF80
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16) & 0xFFFF
