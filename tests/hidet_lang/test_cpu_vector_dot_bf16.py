"""`f32x16_dot_bf16`, the bfloat16 pairs' dot product into f32 lanes, against the exact arithmetic it documents:
lane i is `(acc[i] + pair[1] * b[2i + 1]) + pair[0] * b[2i]`, each addition rounded once. Drawn values stay within
magnitudes where float64 holds every sum exactly (so rounding it to f32 is the one rounding) and clear of
subnormals (which AVX512-BF16 flushes); the checking mode covers both pointers' elements; the op is refused on other
vector widths and on pointers to other types."""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, bf16, f32, i32
from hidet_lang import cpu as V
from hidet_lang.errors import DSLError
from hidet_lang.testing import example_count


@functools.cache
def dot_module(check: bool = False) -> object:
    """`out = f32x16_dot_bf16(acc, pair[i:], b[j:])` over one vector."""
    with hidet.script_module() as module:
        @hidet.script
        def dot(i: i32, j: i32, acc: f32[16], pair: bf16[2], b: bf16[32], out: f32[16]):
            attrs.func_kind = "public"
            V.f32x16_store(~out[0], V.f32x16_dot_bf16(V.f32x16_load(~acc[0]), ~pair[i], ~b[j]))

    return module.build(target="cpu", check=check)


def _machine_has_avx512f() -> None:
    from codegen.toolchain.cpu_features import machine_cpu_features

    if "avx512f" not in machine_cpu_features():
        pytest.skip("f32x16 needs AVX-512F, which this machine's C compiler (-march=native) does not enable")


def _moderate(count: int) -> st.SearchStrategy[np.ndarray]:
    """`count` values of magnitude 2^-6 to 2^6 (or zero), either sign: every sum below is exact in float64."""
    value = st.one_of(st.just(0.0), st.floats(2.0**-6, 2.0**6), st.floats(-(2.0**6), -(2.0**-6)))
    return st.lists(value, min_size=count, max_size=count).map(np.array)


@settings(max_examples=example_count(40), deadline=None)
@given(acc=_moderate(16), pair=_moderate(2), b=_moderate(32))
def test_the_pairs_products_are_added_in_order_each_sum_rounded_once(acc: np.ndarray, pair: np.ndarray,
                                                                     b: np.ndarray) -> None:
    _machine_has_avx512f()
    acc32 = acc.astype(np.float32)
    pair16, b16 = pair.astype(ml_dtypes.bfloat16), b.astype(ml_dtypes.bfloat16)
    out = np.full(16, np.nan, np.float32)
    dot_module()["dot"](0, 0, acc32, pair16, b16, out)
    p, q = pair16.astype(np.float64), b16.astype(np.float64).reshape(16, 2)
    first = (acc32.astype(np.float64) + p[1] * q[:, 1]).astype(np.float32)  # exact in f64, rounded once
    expected = (first.astype(np.float64) + p[0] * q[:, 0]).astype(np.float32)
    np.testing.assert_array_equal(out, expected)


def test_checking_mode_covers_the_pair_and_every_lanes_pair() -> None:
    _machine_has_avx512f()
    built = dot_module(check=True)["dot"]
    acc, out = np.zeros(16, np.float32), np.zeros(16, np.float32)
    pair, b = np.ones(2, ml_dtypes.bfloat16), np.ones(32, ml_dtypes.bfloat16)
    built(0, 0, acc, pair, b, out)
    np.testing.assert_array_equal(out, 2.0)
    with pytest.raises(IndexError, match=r"index 2 is out of bounds for 'pair', which has 2 elements"):
        built(1, 0, acc, pair, b, out)  # the pair's second value past the end
    with pytest.raises(IndexError, match=r"index 32 is out of bounds for 'b', which has 32 elements"):
        built(0, 2, acc, pair, b, out)  # the last lane's pair past the end


def test_other_widths_and_pointers_are_refused_at_the_users_line() -> None:
    with pytest.raises(DSLError, match="f32x8_dot_bf16: the bfloat16 dot product is an f32x16 operation"):
        @hidet.script
        def narrow(acc: f32[8], pair: bf16[2], b: bf16[16], out: f32[8]):
            attrs.func_kind = "public"
            V.f32x8_store(~out[0], V.f32x8_dot_bf16(V.f32x8_load(~acc[0]), ~pair[0], ~b[0]))
    with pytest.raises(DSLError, match="f32x16_dot_bf16 needs a pointer to bfloat16"):
        @hidet.script
        def floats(acc: f32[16], pair: f32[2], b: bf16[32], out: f32[16]):
            attrs.func_kind = "public"
            V.f32x16_store(~out[0], V.f32x16_dot_bf16(V.f32x16_load(~acc[0]), ~pair[0], ~b[0]))
