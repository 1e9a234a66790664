"""Element-wise operators against numpy: every unary function (f32 and half precision), binary arithmetic with
broadcasting and Python scalars, numpy's result dtypes, comparisons, `where`, `clip`, `cast`; on cpu and cuda."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from operator_cases import DEVICES, HALF_CASES, SETTINGS, assert_ulps, data, ints, run
from references import ATOL, ULPS, UNARY

import stdlib_ops as ops


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(UNARY))
@SETTINGS
@given(st.data())
def test_unary_f32(device: str, name: str, draw: st.DataObject) -> None:
    reference, (lo, hi) = UNARY[name]
    x = draw.draw(data((7, 33), lo, hi))
    got = run(getattr(ops, name), x, device=device)
    assert got.dtype == np.float32
    assert_ulps(got, reference(x.astype(np.float64)), ULPS.get(name, 2), ATOL.get(name, 0.0))


@pytest.mark.parametrize(("device", "dtype"), HALF_CASES)
@pytest.mark.parametrize("name", ["relu", "gelu", "exp", "sqrt"])
@SETTINGS
@given(st.data())
def test_unary_half(device: str, dtype: str, name: str, draw: st.DataObject) -> None:
    reference, (lo, hi) = UNARY[name]
    x = draw.draw(data((33,), max(lo, -4), hi, dtype))
    got = run(getattr(ops, name), x, device=device)
    assert got.dtype == x.dtype
    # computed in f32 and rounded once to half precision: within one half-precision ulp of the exact value
    # (half an ulp from the rounding, plus the f32 error that may cross a rounding boundary); tiny results are
    # subnormal in f16, spaced 2**-24 apart
    assert_ulps(got, reference(x.astype(np.float64)), 1, ATOL.get(name, 0.0) + 2.0**-24)


def test_clip_and_scalars_cpu() -> None:
    x = np.array([-3.5, -1.0, 0.25, 2.0, 7.0], np.float32)
    t = ops.asarray(x)
    np.testing.assert_array_equal(ops.clip(t, -1.5, 2.5).numpy(), np.clip(x, -1.5, 2.5))
    np.testing.assert_array_equal(ops.clip(t, None, 0.5).numpy(), np.clip(x, None, 0.5))
    np.testing.assert_array_equal(ops.clip(t, 0.0).numpy(), np.clip(x, 0.0, None))
    np.testing.assert_array_equal((2 - t).numpy(), 2 - x)
    np.testing.assert_array_equal((t / 4).numpy(), x / 4)
    assert_ulps((3.0 ** (t / 4)).numpy(), 3.0 ** (x / 4).astype(np.float64), 2)  # powf: within 2 ulp


BINARY = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "maximum": np.maximum,
    "minimum": np.minimum,
}


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(a=data((3, 1, 5)), b=data((4, 1), 0.5, 4))
def test_binary_broadcast(device: str, a: np.ndarray, b: np.ndarray) -> None:
    for name, reference in BINARY.items():
        # one IEEE operation each, as numpy does it: bit-exact
        np.testing.assert_array_equal(run(getattr(ops, name), a, b, device=device), reference(a, b), err_msg=name)
    for name in ("less", "less_equal", "greater", "greater_equal", "equal", "not_equal"):
        np.testing.assert_array_equal(run(getattr(ops, name), a, b, device=device), getattr(np, name)(a, b))
    # powf against the exact power: within 2 ulp
    assert_ulps(run(ops.pow, b, a, device=device), np.power(b.astype(np.float64), a), 2)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(a=data((3, 1, 33), edges=True), b=data((4, 1), edges=True))
def test_nan_and_infinities_propagate_as_in_numpy(device: str, a: np.ndarray, b: np.ndarray) -> None:
    # maximum/minimum are NaN where either operand is, relu and clip keep a NaN (np.clip and np.maximum(x, 0) do).
    # Values only: assert_array_equal takes -0.0 == 0.0, and the sign of a zero result is not part of the
    # contract, since numpy's own maximum(-0.0, 0.0) gives +0.0 in f32 and -0.0 in f16 (its choice varies with
    # the dtype and code path); ours is the DSL's rule, the second operand
    for name, reference in (("maximum", np.maximum), ("minimum", np.minimum)):
        np.testing.assert_array_equal(run(getattr(ops, name), a, b, device=device), reference(a, b), err_msg=name)
        np.testing.assert_array_equal(run(getattr(ops, name), b, a, device=device), reference(b, a), err_msg=name)
    np.testing.assert_array_equal(run(ops.relu, a, device=device), np.maximum(a, 0), err_msg="relu")
    np.testing.assert_array_equal(run(ops.clip, a, device=device, a_min=-1.5, a_max=2.5), np.clip(a, -1.5, 2.5),
                                  err_msg="clip")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("shapes", [((7, 33), (33,)), ((1,), (1,)), ((1, 257), (7, 1))])
@SETTINGS
@given(st.data())
def test_add_broadcast_shapes(device: str, shapes: tuple, draw: st.DataObject) -> None:
    a, b = (draw.draw(data(s)) for s in shapes)
    np.testing.assert_array_equal(run(ops.add, a, b, device=device), a + b)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(c=ints((7, 1), 0, 1).map(lambda a: a.astype(bool)), a=data((7, 33)), b=data((33,)))
def test_where(device: str, c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    np.testing.assert_array_equal(run(ops.where, c, a, b, device=device), np.where(c, a, b))


@pytest.mark.parametrize("device", DEVICES)
def test_a_scalar_in_where_takes_its_dtype_from_the_other_value(device: str) -> None:
    cond = ops.asarray(np.array([True, False, True]), device=device)
    values = ops.asarray(np.array([1.5, 2.5, 3.5], np.float32), device=device)
    for got, want in ((ops.where(cond, values, 0.0), np.where(cond.numpy(), values.numpy(), np.float32(0))),
                      (ops.where(cond, 7, values), np.where(cond.numpy(), np.float32(7), values.numpy())),
                      (ops.where(cond, 1.0, 2), np.where(cond.numpy(), 1.0, 2))):
        assert got.dtype == want.dtype.name
        np.testing.assert_array_equal(got.numpy(), want)


# operand dtype pairs whose numpy result dtype differs from both or promotes (int with float, mixed widths, ...)
DTYPE_PAIRS = [("int32", "float32"), ("int8", "int16"), ("float16", "float32"), ("bool", "int8"),
               ("uint8", "int8"), ("int32", "int32")]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("pair", DTYPE_PAIRS)
@SETTINGS
@given(st.data())
def test_result_dtypes(device: str, pair: tuple[str, str], draw: st.DataObject) -> None:
    a = draw.draw(ints((5, 3), 0 if pair[0] in ("bool", "uint8") else -7, 1 if pair[0] == "bool" else 7, pair[0]))
    b = draw.draw(ints((3,), 1 if pair[1] != "bool" else 0, 1 if pair[1] == "bool" else 7, pair[1]))
    for name, reference in (("add", np.add), ("div", np.divide)):
        got = run(getattr(ops, name), a, b, device=device)
        want = reference(a, b)
        assert got.dtype == want.dtype, (name, pair, got.dtype, want.dtype)
        # small integers: exact in every dtype; the division rounds once in the result dtype
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(base=ints((9,), -5, 5, "int32"), exponent=ints((9,), 0, 4, "int32"))
def test_integer_pow(device: str, base: np.ndarray, exponent: np.ndarray) -> None:
    got = run(ops.pow, base, exponent, device=device)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, base**exponent)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", ["int32", "int8", "float16", "float64", "bool"])
@SETTINGS
@given(x=data((7, 3), -100, 100))
def test_cast(device: str, dtype: str, x: np.ndarray) -> None:
    got = ops.cast(ops.asarray(x, device=device), dtype).numpy()
    # floats convert to integers by truncation, as numpy's astype does for values in range
    want = x.astype(dtype)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
