"""Constant folding of floating-point expressions equals what the compiled code computes at run time.

`simplify` folds with `hidet_lang.ir.evaluate`, which rounds to the expression's own type after every
operation, as the target does. A CPU kernel computes the same expressions on run-time inputs (nothing to fold)
and hypothesis draws the inputs. The C compiler may contract `a * b + c` into one fused multiply-add on float32
and float64 (it rounds the product once less): there the two may differ by the product's rounding, at most one
unit in the last place of the product, plus one of the result.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f64, meta
from hidet_lang.frontend.semantics import convert_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import evaluate
from hidet_lang.ir.types import DataType, dtype_from_name, float16, float32, float64
from hidet_lang.passes.simplify import simplify
from hidet_lang.testing import example_count

OPS = ("+", "-", "*", "/")
TYPES = (float16, float32, float64)
NUMPY = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
CHAINS = [(op1, op2, t) for op1 in OPS for op2 in OPS for t in TYPES]
CASTS = [(a, b) for a in TYPES for b in TYPES]  # f64 -> a -> b, negated -> f64
N_CHAINS, N_CASTS = len(CHAINS), len(CASTS)


def chain(k: int, x: E.Expr, y: E.Expr, z: E.Expr) -> E.Expr:
    op1, op2, t = CHAINS[k]
    return E.Cast(E.BinaryOp(op2, E.BinaryOp(op1, E.Cast(x, t), E.Cast(y, t)), E.Cast(z, t)), float64)


def cast_chain(k: int, x: E.Expr) -> E.Expr:
    a, b = CASTS[k]
    return E.Cast(E.UnaryOp("-", E.Cast(E.Cast(x, a), b)), float64)


with hidet.script_module() as fold_module:

    @hidet.script
    def run_chains(xs: f64[3], chains: f64[N_CHAINS], casts: f64[N_CASTS]):
        attrs.func_kind = "public"
        for k in meta.range(N_CHAINS):
            chains[k] = chain(k, xs[0], xs[1], xs[2])
        for k in meta.range(N_CASTS):
            casts[k] = cast_chain(k, xs[0])


def _same(a: float, b: float) -> bool:
    return a == b or (np.isnan(a) and np.isnan(b))


def _contraction_slack(op1: str, op2: str, t: DataType, xs: np.ndarray, result: float) -> float:
    """How far a fused multiply-add may move `x * y op2 z` in type `t` (0 where no contraction applies)."""
    if op1 != "*" or op2 not in "+-" or t is float16:
        return 0.0
    cast = NUMPY[t.name]
    with np.errstate(all="ignore"):
        product = cast(xs[0]).astype(cast) * cast(xs[1])
        return float(np.spacing(np.abs(product))) + float(np.spacing(np.abs(cast(result))))


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6)


@settings(max_examples=example_count(150), deadline=None)
@given(st.tuples(finite, finite, finite), st.sampled_from([1.0, 1e-3, 1e3, 70000.0 / 1e6]))
def test_folded_float_expressions_equal_their_run_time_values(values: tuple[float, float, float],
                                                             scale: float) -> None:
    xs = np.array(values) * scale
    chains, casts = np.zeros(N_CHAINS), np.zeros(N_CASTS)
    with np.errstate(all="ignore"):
        fold_module.build()(xs, chains, casts)
    constants = [E.Constant(float(v), float64) for v in xs]
    for k, (op1, op2, t) in enumerate(CHAINS):
        folded = simplify(chain(k, *constants))
        assert isinstance(folded, E.Constant)
        slack = _contraction_slack(op1, op2, t, xs, chains[k])
        assert _same(folded.value, chains[k]) or abs(folded.value - chains[k]) <= slack, (op1, op2, t, xs)
        assert _same(evaluate(chain(k, *constants), {}), folded.value)  # the tree at once: `evaluate` rounds each step
    for k, (a, b) in enumerate(CASTS):
        folded = simplify(cast_chain(k, constants[0]))
        assert isinstance(folded, E.Constant) and _same(folded.value, casts[k]), (a, b, xs[0])
        assert _same(evaluate(cast_chain(k, constants[0]), {}), casts[k])


def test_the_folding_cases_that_once_computed_in_double_precision() -> None:
    f16_of = E.Cast(E.Cast(E.Constant(0.1, float64), float16), float32)
    assert simplify(f16_of).value == float(np.float32(np.float16(0.1)))  # 0.0999755859375
    overflow = E.Cast(E.Cast(E.Constant(70000.0, float64), float16), float32)
    assert simplify(overflow).value == float("inf")
    big = E.Constant(16777216.0, float32)
    one = E.Constant(1.0, float32)
    assert simplify(E.BinaryOp("+", E.BinaryOp("+", big, one), one)).value == 16777216.0


INTEGER_TYPES = [dtype_from_name(f"{kind}{bits}") for kind in ("int", "uint") for bits in (8, 16, 32, 64)]


@pytest.mark.parametrize("dtype", INTEGER_TYPES, ids=str)
def test_a_float_converted_to_an_integer_folds_to_what_every_target_computes(dtype: DataType) -> None:
    """A constant cast folds as every target converts (rounded toward zero, saturated, NaN 0: the GPU's
    `cvt.rzi.sat`), in `simplify` and in a script's constant conversion (`i8(300.0)` is 127)."""
    lo, hi = (int(v) for v in (np.iinfo(dtype.numpy_name).min, np.iinfo(dtype.numpy_name).max))
    # the ends, and the floats nearest to one past them on the inside (-128.99999999999997 and 127.99999999999999
    # truncate to -128 and 127; for 64-bit types the neighbours of -2**63 and 2**63), then one step past either
    # end, NaN and the infinities
    inside = [lo, math.nextafter(lo - 1, math.inf), math.nextafter(hi + 1, -math.inf), -0.5, 0.0]
    cases = [(float(v), int(v)) for v in inside]
    cases += [(float(hi + 1), hi), (math.nextafter(lo - 1, -math.inf), lo), (math.nan, 0), (math.inf, hi),
              (-math.inf, lo)]
    for value, expected in cases:
        folded = simplify(E.Cast(E.Constant(value, float64), dtype))
        assert isinstance(folded, E.Constant) and folded.value == expected and folded.type == dtype, (value, folded)
        assert convert_to(E.Constant(value, float64), dtype).value == expected, value


