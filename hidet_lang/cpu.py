"""SIMD vectors for CPU functions: the types `f32x4`, `f32x8`, `f32x16` and their operations, one name per type.

`from hidet_lang.cpu import f32x8, f32x8_load, f32x8_fma, ...` inside `public`, `cpu_kernel` and `cpu_internal`
functions. For each type `T` (`f32x4`, `f32x8`, `f32x16`): `T_load(p)`, `T_load_aligned(p)`, `T_store(p, v)`,
`T_store_aligned(p, v)`, `T_prefetch(p)` (a cache hint), `T_broadcast(x)` (a scalar, or a pointer to one f32),
`T_setzero()`, `T_fma(a, b, c)` (fused: one rounding), `f32x16_dot_bf16(acc, pair, b)` (bfloat16 pairs' exact
products added to f32 lanes: AVX512-BF16's dot product), `T_exp(v)` (e^v lane by lane, within 1 ulp),
`T_max(a, b)`, `T_min(a, b)`, `T_reduce_sum(v)`, `T_reduce_max(v)` and `T_reduce_min(v)` (f32 results); `+ - *` and
Python's `max`/`min` work on two vectors of one type. What each computes, exactly, is documented in
`hidet_lang.frontend.vectors`.

Hidet's spellings (`hidet.lang.cpu`) are here too, so a Hidet CPU kernel ports by changing its import line:
`avx_T_load` and `avx_T_store` (unaligned, as in Hidet), `avx_T_load_aligned`, `avx_T_store_aligned`,
`avx_T_broadcast`, `avx_T_fmadd`, `avx_T_exp`, `avx_T_setzero`, and `avx_T_add`, `avx_T_subtract`,
`avx_T_multiply`, `avx_T_max`, `avx_T_sum`, `avx_T_scalar_max` of Hidet's primitives. The types are also
`float32x4` ... `float32x16`.

f32x4 needs SSE (every x86-64 CPU), f32x8 needs AVX, f32x16 AVX-512F, and the `fma` of f32x4 and f32x8 FMA: a
program using one that the machine's C compiler (`-march=native`) does not enable is refused when it is built,
at the line that uses it (`T_exp` of f32x4 and f32x8 needs FMA too). CUDA functions have no vector types.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from hidet_lang.frontend import vectors
from hidet_lang.ir import expr as E
from hidet_lang.ir.types import VECTOR_TYPES, VectorType, float32x4, float32x8, float32x16

f32x4, f32x8, f32x16 = float32x4, float32x8, float32x16


def _bind(t: VectorType, build: Callable[..., E.Expr], name: str, *fixed: Any) -> Callable[..., E.Expr]:
    """`build` with its vector type (and any `fixed` arguments after it) bound, as the public function `name`."""
    params = list(inspect.signature(build).parameters.values())[1 + len(fixed):]
    signature = inspect.Signature(params)

    def operation(*args: Any) -> E.Expr:
        try:
            signature.bind(*args)
        except TypeError as e:
            raise TypeError(f"{name}(): {e}") from None
        return build(t, *fixed, *args)

    operation.__name__ = operation.__qualname__ = name
    operation.__doc__ = f"{t}: {build.__doc__}"
    operation.__signature__ = signature  # type: ignore[attr-defined]
    return operation


_OPERATIONS: dict[str, Callable[..., E.Expr]] = {  # the name after the type prefix: its builder
    "load": vectors.load, "load_aligned": vectors.load_aligned, "store": vectors.store,
    "store_aligned": vectors.store_aligned, "prefetch": vectors.prefetch, "broadcast": vectors.broadcast,
    "setzero": vectors.setzero, "fma": vectors.fma, "dot_bf16": vectors.dot_bf16, "exp": vectors.exp,
    "max": vectors.maximum, "min": vectors.minimum,
    "reduce_sum": vectors.reduce_sum, "reduce_max": vectors.reduce_max, "reduce_min": vectors.reduce_min,
}
_HIDET_SPELLINGS: dict[str, str] = {  # Hidet's name after `avx_<type>_`: the operation above it stands for
    "load": "load", "load_aligned": "load_aligned", "store": "store", "store_aligned": "store_aligned",
    "broadcast": "broadcast", "fmadd": "fma", "exp": "exp", "setzero": "setzero", "max": "max", "sum": "reduce_sum",
    "scalar_max": "reduce_max",
}
_HIDET_ARITHMETIC = {"add": "+", "subtract": "-", "multiply": "*"}

__all__ = ["f32x4", "f32x8", "f32x16", "float32x4", "float32x8", "float32x16"]
for _t in VECTOR_TYPES:
    _names = {f"{_t}_{name}": (build, ()) for name, build in _OPERATIONS.items()}
    _names.update({f"avx_{_t}_{hidet}": (_OPERATIONS[ours], ()) for hidet, ours in _HIDET_SPELLINGS.items()})
    _names.update({f"avx_{_t}_{hidet}": (vectors.arithmetic, (op,)) for hidet, op in _HIDET_ARITHMETIC.items()})
    for _name, (_build, _fixed) in _names.items():
        globals()[_name] = _bind(_t, _build, _name, *_fixed)
        __all__.append(_name)
del _t, _names, _name, _build, _fixed
