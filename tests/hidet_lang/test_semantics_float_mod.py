"""Float `//` and `%` follow Python and numpy: `%` takes the divisor's sign and `//` is the floored quotient that
goes with it, so `a == (a // b) * b + a % b` up to rounding; on the CPU, the CUDA emulator and in the IR evaluator.

The compiled code computes what numpy's `divmod` computes (`fmod`, then a move into the divisor's sign), in the
same precision, so `%` matches `np.mod` exactly; `//` is compared within one unit in the last place, since its
final rounding step (`floor`, then up when more than half away) can differ from numpy's by an ulp for quotients
too large to be integers exactly (float64 results equal `evaluate.floor_div`, which computes in double).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, f64, grid
from hidet_lang.ir import expr as E
from hidet_lang.ir.evaluate import floor_div, floor_mod
from hidet_lang.passes.simplify import simplify
from hidet_lang.testing import example_count

N = 64
_BUILT: dict[tuple[str, str], object] = {}


def divmod_module(dtype: str, target: str) -> object:
    """A module computing q = a // b and r = a % b elementwise on `N` values of `dtype` for `target`."""
    key = (dtype, target)
    if key not in _BUILT:
        t = f32 if dtype == "float32" else f64
        with hidet.script_module() as module:
            if target == "cpu":
                @hidet.script
                def divmod_kernel(a: t[N], b: t[N], q: t[N], r: t[N]):
                    attrs.func_kind = "cpu_kernel"
                    for i in grid(N):
                        q[i] = a[i] // b[i]
                        r[i] = a[i] % b[i]
            else:
                @hidet.script
                def divmod_kernel(a: t[N], b: t[N], q: t[N], r: t[N]):
                    attrs.cuda.grid_dim = 1
                    attrs.cuda.block_dim = N
                    i = hidet.cuda.threadIdx.x
                    q[i] = a[i] // b[i]
                    r[i] = a[i] % b[i]
        _BUILT[key] = module.build("cpu" if target == "cpu" else None)
    return _BUILT[key]


def finite(dtype: str) -> st.SearchStrategy[float]:
    width = 32 if dtype == "float32" else 64
    return st.floats(allow_nan=False, allow_infinity=False, width=width)


def operands(dtype: str) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """N dividends and N nonzero divisors (small values, integers and halves mixed in)."""
    special = st.sampled_from([-6.5, 6.5, -7.0, 7.0, 0.0, -0.0, 1.0, 0.1, -0.1, 2.0, -2.0, 1e30, -1e-30])
    a = st.lists(st.one_of(finite(dtype), special), min_size=N, max_size=N)
    b = st.lists(st.one_of(finite(dtype), special).filter(lambda v: v != 0), min_size=N, max_size=N)
    return st.tuples(a, b).map(lambda ab: (np.array(ab[0], dtype), np.array(ab[1], dtype)))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@settings(max_examples=example_count(30), deadline=None)
@given(data=st.data())
def test_float_floordiv_and_mod_match_numpy(dtype: str, target: str, data: st.DataObject) -> None:
    a, b = data.draw(operands(dtype))
    q, r = np.zeros(N, dtype), np.zeros(N, dtype)
    divmod_module(dtype, target)(a, b, q, r)
    with np.errstate(all="ignore"):
        want_q, want_r = np.floor_divide(a, b), np.mod(a, b)
    np.testing.assert_array_equal(r, want_r)
    assert np.array_equal(np.signbit(r), np.signbit(want_r))  # zeros too take the divisor's sign
    finite_q = np.isfinite(want_q)
    np.testing.assert_array_equal(np.isfinite(q), finite_q)
    np.testing.assert_array_max_ulp(q[finite_q], want_q[finite_q], maxulp=1)
    if dtype == "float64":  # the IR's reference computes in double, as the compiled float64 code does
        np.testing.assert_array_equal(q, [floor_div(float(x), float(y)) for x, y in zip(a, b)])


def test_float_mod_takes_the_divisor_sign_and_rebuilds_the_dividend() -> None:
    a = np.array([-6.5, 6.5, -6.5, 6.5, 1.0, -1.0] + [0.0] * (N - 6))
    b = np.array([2.0, -2.0, -2.0, 2.0, 0.1, 0.1] + [1.0] * (N - 6))
    q, r = np.zeros(N), np.zeros(N)
    divmod_module("float64", "cpu")(a, b, q, r)
    assert list(q[:4]) == [-4.0, -4.0, 3.0, 3.0] and list(r[:4]) == [1.5, -1.5, -0.5, 0.5]
    assert (q[4], q[5]) == (1.0 // 0.1, -1.0 // 0.1)  # Python's quotient, not floor(1.0 / 0.1) == 10
    np.testing.assert_allclose(q * b + r, a, rtol=1e-15, atol=1e-15)


@settings(max_examples=example_count(300), deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False), st.floats(allow_nan=False).filter(lambda v: v != 0))
def test_ir_evaluator_folds_float_mod_as_python(a: float, b: float) -> None:
    folded = simplify(E.BinaryOp("%", E.Constant(a, f64), E.Constant(b, f64)))
    assert isinstance(folded, E.Constant)
    want = a % b
    assert folded.value == want and math.copysign(1, folded.value) == math.copysign(1, want)
    assert floor_mod(a, b) == float(np.mod(a, b))


EDGE_VALUES = [0.0, -0.0, 1.0, -1.0, 3.5, -2.25, 1e300, math.inf, -math.inf, math.nan]


@pytest.mark.parametrize("b", EDGE_VALUES, ids=str)
def test_ir_evaluator_float_mod_and_floordiv_at_edge_values_are_numpys(b: float) -> None:
    # zeros of either sign, divisors of 1 and -1, infinities and NaN on either side: the value, NaN and the sign of
    # a zero all as numpy's remainder and floor_divide give them (NaN where C's fmod is undefined, never a raise)
    def same(got: float, want: float) -> bool:
        signs_agree = math.copysign(1, got) == math.copysign(1, want)
        return (math.isnan(got) and math.isnan(want)) or (got == want and signs_agree)

    with np.errstate(all="ignore"):
        for a in EDGE_VALUES:
            want_r, want_q = float(np.remainder(a, b)), float(np.floor_divide(a, b))
            assert same(floor_mod(a, b), want_r), (a, b, floor_mod(a, b), want_r)
            assert same(floor_div(a, b), want_q), (a, b, floor_div(a, b), want_q)
