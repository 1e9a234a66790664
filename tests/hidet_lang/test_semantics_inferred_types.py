"""A variable typed by its first value (`acc = 0` is an i32) refuses later values it cannot hold exactly: `acc = 0`
then `acc += a[i]` with a float `a` is an error at that line, not a sum in i32. Stores that lose nothing stay
allowed, integer literals do not widen what they meet (`c += 1` keeps a u8), and a variable declared with a type
(`acc: i32 = 0`) converts what it is given as C does.
"""

import inspect
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from semantics_checks import assert_error_at_marker

import hidet_lang as hidet
from codegen.runtime.module import CompiledModule
from hidet_lang import attrs, f32, f64, i8, i16, i32, i64, u8, u32
from hidet_lang.errors import DSLTypeError
from hidet_lang.frontend.semantics import holds_every_value
from hidet_lang.ir import types as T
from hidet_lang.testing import arrays, example_count


def float_into_int() -> None:
    @hidet.script
    def k(n: i32, a: f32[n], b: f32[1]):  # noqa: F821 - earlier parameters
        acc = 0  # FIRST
        for i in range(n):
            acc += a[i]  # ERROR
        b[0] = acc


def double_into_float() -> None:
    @hidet.script
    def k(n: i32, a: f64[n], b: f64[1]):  # noqa: F821 - earlier parameters
        acc = 0.0  # FIRST
        for i in range(n):
            acc = acc + a[i]  # ERROR
        b[0] = acc


def wide_into_narrow_int() -> None:
    @hidet.script
    def k(n: i64, b: i64[1]):
        last = 0  # FIRST
        for i in range(n):
            last = i  # ERROR
        b[0] = last


def signed_into_unsigned() -> None:
    @hidet.script
    def k(n: i32, b: u32[1]):
        u = u32(0)  # FIRST
        for i in range(n):
            u = i  # ERROR
        b[0] = u


def int_into_narrow_float() -> None:
    @hidet.script
    def k(n: i32, b: f32[1]):
        x = 0.0  # FIRST
        for i in range(n):
            x = i  # ERROR
        b[0] = x


def inexact_literal() -> None:
    @hidet.script
    def k(b: i32[1]):
        x = 0  # FIRST
        x = 2.5  # ERROR
        b[0] = x


def literal_out_of_range() -> None:
    @hidet.script
    def k(b: u8[1]):
        c = u8(0)  # FIRST
        c = 300  # ERROR
        b[0] = c


REFUSED: list[tuple[Callable[[], None], str]] = [
    (float_into_int, "'acc' is i32, the type of its first value (line {first}), so this f32 value would be converted "
                     "to i32 and could lose information. Give 'acc' the type it needs where it is first assigned "
                     "(e.g. `acc = 0.0` or `acc = f32(0)`), or convert here explicitly (i32(...)), or declare "
                     "`acc: i32 = ...` to keep i32"),
    (double_into_float, "'acc' is f32, the type of its first value (line {first}), so this f64 value would be "
                        "converted to f32 and could lose information. Give 'acc' the type it needs where it is first "
                        "assigned (e.g. `acc = f64(0)`)"),
    (wide_into_narrow_int, "'last' is i32, the type of its first value (line {first}), so this i64 value"),
    (signed_into_unsigned, "'u' is u32, the type of its first value (line {first}), so this i32 value"),
    (int_into_narrow_float, "'x' is f32, the type of its first value (line {first}), so this i32 value"),
    (inexact_literal, "'x' is i32, the type of its first value (line {first}), so this f32 value"),
    (literal_out_of_range, "'c' is u8, the type of its first value (line {first}), so this i32 value"),
]


@pytest.mark.parametrize(("factory", "message"), REFUSED, ids=[f.__name__ for f, _ in REFUSED])
def test_a_store_that_could_lose_information_is_refused_at_its_line(factory: Callable[[], None],
                                                                   message: str) -> None:
    lines, start = inspect.getsourcelines(factory)
    first = start + next(i for i, text in enumerate(lines) if "# FIRST" in text)
    assert_error_at_marker(factory, DSLTypeError, message.format(first=first))


with hidet.script_module() as ACCEPTED:
    @hidet.script
    def float_sum(n: i32, a: f32[n], out: f32[1]):  # noqa: F821 - earlier parameters
        attrs.func_kind = "public"
        acc = 0.0
        for i in range(n):
            acc += a[i]
        out[0] = acc

    @hidet.script
    def declared_int_sum(n: i32, a: f32[n], out: i32[1]):  # noqa: F821 - earlier parameters
        attrs.func_kind = "public"
        acc: i32 = 0
        for i in range(n):
            acc += a[i]  # declared: each step converted to i32, as C does
        out[0] = acc

    @hidet.script
    def explicit_int_sum(n: i32, a: f32[n], out: i32[1]):  # noqa: F821 - earlier parameters
        attrs.func_kind = "public"
        acc = 0
        for i in range(n):
            acc = i32(acc + a[i])
        out[0] = acc

    @hidet.script
    def byte_counter(n: i32, out: u8[1]):
        attrs.func_kind = "public"
        c = u8(0)
        for _ in range(n):
            c += 1  # a literal keeps the u8: the count wraps at 256
        out[0] = c

    @hidet.script
    def widening(n: i32, a: f32[n], small: i8[n], out: f64[4]):  # noqa: F821 - earlier parameters
        attrs.func_kind = "public"
        total = f64(0)  # f32 into f64
        wide = i64(0)  # i32 into i64
        half = i16(0)  # i8 into i16
        mixed = 0.0  # f32 arithmetic with an int operand stays f32
        for i in range(n):
            total += a[i]
            wide += i
            half = half + small[i]
            mixed = mixed + i
        out[0] = total
        out[1] = f64(wide)
        out[2] = f64(half)
        out[3] = f64(mixed)

    @hidet.script
    def literals(out: f64[3]):
        attrs.func_kind = "public"
        x = 0
        x = 2.0  # converts exactly
        h = 0.0
        h = 0.1  # a float literal rounds to the variable's float type, as `h * 0.1` would
        flag = 0
        flag = out[0] > 1.0  # bool fits everywhere
        out[0] = f64(x)
        out[1] = f64(h)
        out[2] = f64(flag)


@pytest.fixture(scope="module")
def accepted() -> CompiledModule:
    return ACCEPTED.build()


@settings(max_examples=example_count(20), deadline=None)
@given(arrays(dtype="float32", shape=st.integers(0, 40).map(lambda n: (n,)),
              elements=st.floats(-100, 100, width=32)))
def test_stores_that_lose_nothing_run_as_written(accepted: CompiledModule, a: np.ndarray) -> None:
    n = a.size
    out = np.zeros(1, np.float32)
    accepted["float_sum"](n, a, out)
    expected = np.float32(0)
    for v in a:
        expected = np.float32(expected + v)
    assert out[0] == expected

    truncated = 0
    for v in a:
        truncated = int(np.float32(np.float32(truncated) + v))  # C converts toward zero
    for name in ("declared_int_sum", "explicit_int_sum"):
        got = np.zeros(1, np.int32)
        accepted[name](n, a, got)
        assert got[0] == truncated, name

    small = (np.arange(n) % 7 - 3).astype(np.int8)
    wide = np.zeros(4, np.float64)
    accepted["widening"](n, a, small, wide)
    total = np.float64(0)
    mixed = np.float32(0)
    for i, v in enumerate(a):
        total += np.float64(v)
        mixed = np.float32(mixed + np.float32(i))
    assert wide.tolist() == [total, n * (n - 1) // 2, int(small.astype(np.int64).sum()), np.float64(mixed)]


@settings(max_examples=example_count(10), deadline=None)
@given(st.integers(0, 700))
def test_an_integer_literal_does_not_widen_a_narrow_counter(accepted: CompiledModule, n: int) -> None:
    out = np.zeros(1, np.uint8)
    accepted["byte_counter"](n, out)
    assert out[0] == n % 256


def test_literals_that_convert_exactly_are_stored(accepted: CompiledModule) -> None:
    out = np.array([2.0, 0.0, 0.0])
    accepted["literals"](out)
    assert out.tolist() == [2.0, float(np.float32(0.1)), 1.0]


@pytest.mark.parametrize(("target", "source", "holds"), [
    (i64, i32, True), (i32, i64, False), (i32, u8, True), (i32, u32, False), (u32, i32, False), (u32, T.uint16, True),
    (f32, i16, True), (f32, i32, False), (f64, i32, True), (f64, i64, False), (T.float16, i8, True),
    (T.float16, i16, False), (f64, f32, True), (f32, f64, False), (T.float16, T.bfloat16, False),
    (i32, f32, False), (T.boolean, i32, False), (i8, T.boolean, True), (f32, f32, True),
])
def test_which_types_hold_every_value_of_which(target: T.DataType, source: T.DataType, holds: bool) -> None:
    assert holds_every_value(target, source) is holds
