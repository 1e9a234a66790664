"""The operations of the vector types of CPU functions (`f32x4`, `f32x8`, `f32x16`): what each accepts and computes.

Each function takes the vector type first and builds the intrinsic `<type>_<operation>` (`f32x8_load`; the list
is `hidet_lang.ir.intrinsics.VECTOR_INTRINSICS`); `hidet_lang.cpu` binds them to one name per type. Raised
errors are plain `TypeError`s, which the parser reports at the user's line. A pointer argument is a pointer to
f32 (`~a[i]`, a `~f32` parameter, pointer arithmetic) or an f32 tensor (its first element).

- `load(t, p)`: the lanes `p[0] ... p[lanes - 1]`; `load_aligned` the same from an address that is a multiple of
  the vector's size in bytes (16, 32, 64), which it may assume (a misaligned one is undefined and may fault).
- `store(t, p, v)`, `store_aligned(t, p, v)`: writes the lanes of `v` to `p[0] ... p[lanes - 1]`.
- `prefetch(t, p)`: no value; asks the caches to bring in the line holding `p[0]`, for a read soon (a hint: it
  never faults, whatever `p`; the program computes the same without it).
- `broadcast(t, x)`: every lane `x`, a scalar (converted to f32) or, as in Hidet, a pointer to one f32.
- `setzero(t)`: every lane +0.0.
- `fma(t, a, b, c)`: `a * b + c` lane by lane, fused: rounded once. `a * b + c` written with operators is
  rounded twice, as on scalars (the C code is compiled with `-ffp-contract=off`, so the compiler never fuses it).
- `dot_bf16(t, acc, pair, b)` (f32x16 only): lane `i` is `(acc[i] + pair[1] * b[2i + 1]) + pair[0] * b[2i]`,
  where `pair` points to two bfloat16 values (the same two in every lane) and `b` to `2 * lanes` of them (lane `i`
  takes the `i`-th pair): the products are exact in f32, each addition is rounded once, to nearest even. With
  AVX512-BF16 it is one `vdpbf16ps`, which treats subnormal inputs and results as zero; elsewhere (AVX-512F) the
  pairs are widened to f32 and added by two fused multiply-adds, the same bits but for subnormals. The reduction
  of a matmul's k two at a time (`matmul_cpu`'s bf16 micro-kernel).
- `exp(t, v)`: e to the power of each lane, within 1 ulp of the exact value (at most 1 ulp from the correctly
  rounded result; results below f32's normal range within 1 ulp of their spacing 2^-149); +inf above about 88.72,
  +0.0 below about -103.97 and for -inf, NaN for NaN. Computed by `cpu_vectors.h` from the vector's own
  operations (a range reduction, a polynomial, a scaling by the exponent bits), so the lanes agree exactly for
  every width, but they may differ from the C library's scalar `expf` in the last bit.
- `maximum(t, a, b)` / `minimum(t, a, b)` (also Python's `max(a, b)` / `min(a, b)`): per lane `a > b ? a : b` /
  `a < b ? a : b`, the rule of the scalar `max`/`min` (`b` where the lanes compare equal or unordered, NaN).
- `reduce_sum(t, v)`: the f32 sum of the lanes, as a tree: lane `i` plus lane `i + lanes/2`, halving until one
  is left (for f32x4: `(v0 + v2) + (v1 + v3)`); each addition rounds, so it may differ from a left-to-right sum.
- `reduce_max(t, v)`: the largest lane, by the same tree with the `max` rule; `reduce_min(t, v)` the smallest.
- `arithmetic(t, op, a, b)`: `a op b` for `+ - *` (Hidet's `avx_f32x8_add` and friends); the operators do the
  same.

Which instruction set each needs (SSE for f32x4, AVX for f32x8, AVX-512F for f32x16, FMA too for the `fma` and
the `exp` of the first two: `exp` is made of fused multiply-adds) is checked when the module is built
(`hidet_lang.passes.vector_rules`).
"""

from __future__ import annotations

from typing import Any

from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import _pointer_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import PointerType, VectorType, bfloat16, void


def _vector(t: VectorType, operation: str, value: Any) -> E.Expr:
    """`value` as an IR vector of type `t`, or a TypeError naming the operation."""
    e = E.convert(value)
    if e.type != t:
        raise TypeError(f"{t}_{operation} takes {t} vectors, got {semantics.describe(e)}")
    return e


def _f32_pointer(t: VectorType, operation: str, value: Any) -> E.Expr:
    """`value` as a pointer to the vector's element type (f32), or a TypeError naming the operation."""
    p = _pointer_to(value, f"{t}_{operation}")
    pointee = p.type.dtype if isinstance(p.type, PointerType) else None
    if pointee != t.dtype:
        raise TypeError(f"{t}_{operation} needs a pointer to {t.dtype} (e.g. ~a[i] of an {t.dtype} tensor), got a "
                        f"pointer to {pointee}")
    return p


def _bf16_pointer(t: VectorType, operation: str, value: Any) -> E.Expr:
    """`value` as a pointer to bfloat16, or a TypeError naming the operation."""
    p = _pointer_to(value, f"{t}_{operation}")
    pointee = p.type.dtype if isinstance(p.type, PointerType) else None
    if pointee != bfloat16:
        raise TypeError(f"{t}_{operation} needs a pointer to bfloat16 (e.g. ~a[i] of a bfloat16 tensor), got a "
                        f"pointer to {pointee}")
    return p


def load(t: VectorType, pointer: Any) -> E.Intrinsic:
    """The `t.lanes` floats at `pointer` (any alignment)."""
    return E.Intrinsic(f"{t}_load", (_f32_pointer(t, "load", pointer),), t)


def load_aligned(t: VectorType, pointer: Any) -> E.Intrinsic:
    """The `t.lanes` floats at `pointer`, a multiple of `t.nbytes` (a misaligned address is undefined)."""
    return E.Intrinsic(f"{t}_load_aligned", (_f32_pointer(t, "load_aligned", pointer),), t)


def store(t: VectorType, pointer: Any, value: Any) -> E.Intrinsic:
    """Write the lanes of `value` to the `t.lanes` floats at `pointer` (any alignment)."""
    return E.Intrinsic(f"{t}_store", (_f32_pointer(t, "store", pointer), _vector(t, "store", value)), void)


def store_aligned(t: VectorType, pointer: Any, value: Any) -> E.Intrinsic:
    """Write the lanes of `value` to `pointer`, a multiple of `t.nbytes` (a misaligned address is undefined)."""
    return E.Intrinsic(f"{t}_store_aligned", (_f32_pointer(t, "store_aligned", pointer),
                                              _vector(t, "store_aligned", value)), void)


def prefetch(t: VectorType, pointer: Any) -> E.Intrinsic:
    """A hint to bring the cache line holding `pointer[0]` in for a read soon; no value, never a fault."""
    return E.Intrinsic(f"{t}_prefetch", (_f32_pointer(t, "prefetch", pointer),), void)


def broadcast(t: VectorType, value: Any) -> E.Intrinsic:
    """A vector whose every lane is `value`: a scalar (converted to f32), or a pointer to one f32, as in Hidet."""
    e = E.convert(value)
    if isinstance(e.type, PointerType):
        scalar = E.Dereference(_f32_pointer(t, "broadcast", e))
    elif isinstance(e.type, VectorType):
        raise TypeError(f"{t}_broadcast takes a scalar or a pointer to one, got {semantics.describe(e)}")
    else:
        scalar = semantics.cast(e, t.dtype)
    return E.Intrinsic(f"{t}_broadcast", (scalar,), t)


def setzero(t: VectorType) -> E.Intrinsic:
    """A vector of +0.0 lanes."""
    return E.Intrinsic(f"{t}_setzero", (), t)


def fma(t: VectorType, a: Any, b: Any, c: Any) -> E.Intrinsic:
    """`a * b + c` lane by lane, rounded once (a fused multiply-add)."""
    return E.Intrinsic(f"{t}_fma", tuple(_vector(t, "fma", x) for x in (a, b, c)), t)


def dot_bf16(t: VectorType, acc: Any, pair: Any, b: Any) -> E.Intrinsic:
    """Lane i: `(acc[i] + pair[1] * b[2i + 1]) + pair[0] * b[2i]` for bfloat16 pointers `pair` (two values) and `b`
    (a pair a lane), the exact products added in f32, each sum rounded once (f32x16 only)."""
    if t.lanes != 16:
        raise TypeError(f"{t}_dot_bf16: the bfloat16 dot product is an f32x16 operation (AVX-512), not one of {t}")
    return E.Intrinsic(f"{t}_dot_bf16", (_vector(t, "dot_bf16", acc), _bf16_pointer(t, "dot_bf16", pair),
                                         _bf16_pointer(t, "dot_bf16", b)), t)


def exp(t: VectorType, value: Any) -> E.Intrinsic:
    """e to the power of each lane, within 1 ulp (overflow +inf, underflow and -inf +0.0, NaN stays NaN)."""
    return E.Intrinsic(f"{t}_exp", (_vector(t, "exp", value),), t)


def maximum(t: VectorType, a: Any, b: Any) -> E.Expr:
    """Per lane `a > b ? a : b`, as the scalar `max`."""
    return semantics.math_call("max", _vector(t, "max", a), _vector(t, "max", b))


def minimum(t: VectorType, a: Any, b: Any) -> E.Expr:
    """Per lane `a < b ? a : b`, as the scalar `min`."""
    return semantics.math_call("min", _vector(t, "min", a), _vector(t, "min", b))


def reduce_sum(t: VectorType, value: Any) -> E.Intrinsic:
    """The f32 sum of the lanes, added as a tree (lane i plus lane i + lanes/2, halving until one is left)."""
    return E.Intrinsic(f"{t}_reduce_sum", (_vector(t, "reduce_sum", value),), t.dtype)


def reduce_max(t: VectorType, value: Any) -> E.Intrinsic:
    """The largest lane, by the tree of `reduce_sum` with the `max` rule."""
    return E.Intrinsic(f"{t}_reduce_max", (_vector(t, "reduce_max", value),), t.dtype)


def reduce_min(t: VectorType, value: Any) -> E.Intrinsic:
    """The smallest lane, by the tree of `reduce_sum` with the `min` rule."""
    return E.Intrinsic(f"{t}_reduce_min", (_vector(t, "reduce_min", value),), t.dtype)


_ARITHMETIC_NAMES = {"+": "add", "-": "subtract", "*": "multiply"}


def arithmetic(t: VectorType, op: str, a: Any, b: Any) -> E.Expr:
    """`a op b` (`+`, `-` or `*`) on two vectors of type `t`, as the operators compute it."""
    name = _ARITHMETIC_NAMES[op]
    return semantics.binary(op, _vector(t, name, a), _vector(t, name, b))
