"""The vector exp of CPU functions (`f32x4_exp`, `f32x8_exp`, `f32x16_exp`) against a correctly rounded reference:
float64 exp rounded to f32 (wrong only where e^x lies within 2^-53 of the midpoint of two floats, which no
tested value comes near enough to change the bound). Errors are counted in ulps as the distance between bit
patterns, which for positive floats is the number of floats between the two; below f32's normal range that unit
is the subnormal spacing 2^-149. The documented bound is 1 ulp everywhere (measured exhaustively, over all 2^32
inputs, when the header was written); here a dense sweep of the whole f32 range (every 1021st bit pattern, so the
low mantissa bits vary) and hypothesis-drawn values check it for every width."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_cpu_vectors import LANES, _machine_has, _ops

import hidet_lang as hidet
from hidet_lang import attrs, f32, i32, register_tensor
from hidet_lang.testing import example_count

MAX_ULPS = 1
"""The documented bound of the vector exp, for normal and subnormal results alike."""

SWEEP_STRIDE = 1021
"""The step between the bit patterns of the dense sweep: 4.2 million inputs, every exponent, varied mantissas."""


@functools.cache
def exp_module(lanes: int) -> object:
    """A kernel `vexp(n, x, y)`: `y = exp(x)` by whole vectors, the tail padded into one vector's worth."""
    op = _ops(lanes)
    load, store, vexp = op["load"], op["store"], op["exp"]
    W = lanes  # noqa: N806 - the width, a Python int while parsing

    with hidet.script_module() as module:
        @hidet.script
        def vexp_kernel(n: i32, x: ~f32, y: ~f32):
            attrs.func_name = "vexp"
            attrs.func_kind = "public"
            i = 0
            while i + W <= n:
                store(~y[i], vexp(load(~x[i])))
                i += W
            if i < n:
                pad = register_tensor(f32, [W])
                for k in range(W):
                    pad[k] = x[i + k] if i + k < n else 0.0
                store(~pad[0], vexp(load(~pad[0])))
                for k in range(n - i):
                    y[i + k] = pad[k]

    return module.build()


def vector_exp(lanes: int, x: np.ndarray) -> np.ndarray:
    """exp of every element of the f32 array `x` by the `lanes`-wide vector exp."""
    y = np.full_like(x, np.nan)
    exp_module(lanes)["vexp"](x.size, x, y)
    return y


def reference(x: np.ndarray) -> np.ndarray:
    """e^x correctly rounded to f32 (through float64, see the module docstring)."""
    with np.errstate(over="ignore", invalid="ignore"):  # inf, and NaN cast to f32
        return np.exp(x.astype(np.float64)).astype(np.float32)


def assert_within_ulps(got: np.ndarray, x: np.ndarray) -> None:
    """`got` within MAX_ULPS of the correctly rounded exp of `x`, with inf, 0 and NaN exactly where it has them."""
    want = reference(x)
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all()
    got, want, x = got[~nan], want[~nan], x[~nan]
    exact = np.isinf(want) | (want == 0)  # overflow and underflow to zero are exact: +inf and +0.0
    bad = exact & (got.view(np.uint32) != want.view(np.uint32))
    assert not bad.any(), f"exp({x[bad][0]!r}) = {got[bad][0]!r}, not {want[bad][0]!r}"
    ulps = np.abs(got.view(np.int32).astype(np.int64) - want.view(np.int32).astype(np.int64))
    worst = int(np.argmax(ulps)) if ulps.size else 0
    assert ulps.size == 0 or ulps[worst] <= MAX_ULPS, \
        f"exp({x[worst]!r}) = {got[worst]!r}, {ulps[worst]} ulps from {want[worst]!r}"


def sweep() -> np.ndarray:
    """Every SWEEP_STRIDE-th f32 bit pattern: both signs, every exponent, NaNs and infinities included."""
    return np.arange(0, 2**32, SWEEP_STRIDE, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("lanes", LANES)
def test_a_dense_sweep_of_the_f32_range_is_within_one_ulp(lanes: int) -> None:
    _machine_has(lanes)
    x = sweep()
    got = vector_exp(lanes, x)
    assert_within_ulps(got, x)
    normal = reference(x) >= np.finfo(np.float32).tiny
    assert normal.sum() > 1_000_000 and (~normal & (reference(x) > 0)).sum() > 1000  # both ranges are covered


@pytest.mark.parametrize("lanes", LANES)
def test_special_values_and_the_edges_of_the_range(lanes: int) -> None:
    _machine_has(lanes)
    f = np.float32
    largest_finite = f(88.72283172607421875)  # the largest x whose e^x rounds to a finite float
    smallest_nonzero = f(-103.97207641601562)  # the smallest x whose e^x rounds to the smallest subnormal
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1.0, -1.0, largest_finite, np.nextafter(largest_finite, f(99)),
                  smallest_nonzero, np.nextafter(smallest_nonzero, f(-999)), -87.33654, -87.33655, 1e-30, -1e-30,
                  3e38, -3e38, 89.0, -104.0], np.float32)
    got = vector_exp(lanes, x)
    assert got[0] == np.inf and got[1] == 0.0 and np.isnan(got[2]) and got[3] == 1.0 and got[4] == 1.0
    assert np.isfinite(got[7]) and got[8] == np.inf and got[9] == f(2.0**-149) and got[10] == 0.0
    assert_within_ulps(got, x)


@pytest.mark.parametrize("lanes", LANES)
@settings(max_examples=example_count(30), deadline=None)
@given(x=hnp.arrays(np.float32, st.integers(1, 70), elements=st.one_of(
    st.floats(width=32), st.floats(-110, 95, width=32))))
def test_drawn_values_are_within_one_ulp(lanes: int, x: np.ndarray) -> None:
    _machine_has(lanes)
    assert_within_ulps(vector_exp(lanes, x), x)


def test_every_width_computes_the_same_bits() -> None:
    widths = [lanes for lanes in LANES if _available(lanes)]
    x = np.ascontiguousarray(sweep()[::7])
    results = {lanes: vector_exp(lanes, x).view(np.uint32) for lanes in widths}
    for lanes in widths[1:]:
        np.testing.assert_array_equal(results[lanes], results[widths[0]])


def _available(lanes: int) -> bool:
    """Whether the `lanes`-wide type (and FMA) is enabled by this machine's C compiler."""
    try:
        _machine_has(lanes)
    except pytest.skip.Exception:
        return False
    return True
