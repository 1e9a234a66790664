"""The vector types of CPU functions against numpy: every operation of `hidet_lang.cpu`, for f32x4, f32x8 and
f32x16 (where the machine's C compiler enables AVX-512F), on hypothesis-drawn data whose length is not a multiple
of the width (the kernels handle the rest with their own tails), and Hidet-spelled kernels as a Hidet user
writes them."""

from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import hidet_lang as hidet
from hidet_lang import address, attrs, cast, f32, i32, register_tensor
from hidet_lang import cpu as V
from hidet_lang.testing import example_count

LANES = (4, 8, 16)
ODD_SIZES = (1, 7, 33, 257)


def _machine_has(lanes: int) -> None:
    """Skip unless the C compiler enables the instruction set of the `lanes`-wide type (and FMA)."""
    from codegen.toolchain.cpu_features import machine_cpu_features

    needed = {4: {"sse", "fma"}, 8: {"avx", "fma"}, 16: {"avx512f"}}[lanes]
    missing = needed - machine_cpu_features()
    if missing:
        pytest.skip(f"f32x{lanes} needs {', '.join(sorted(missing))}, which this machine's C compiler "
                    "(-march=native) does not enable; the refusal is tested in test_cpu_vector_errors.py")


def _ops(lanes: int) -> dict[str, object]:
    """The operations of `hidet_lang.cpu` for the `lanes`-wide type, by operation name."""
    prefix = f"f32x{lanes}_"
    return {name[len(prefix):]: getattr(V, name) for name in V.__all__ if name.startswith(prefix)}


@functools.cache
def elementwise_module(lanes: int) -> object:
    """Kernels that run each operation over whole vectors of their inputs and the rest with scalar tails."""
    op = _ops(lanes)
    load, load_aligned, store, store_aligned = op["load"], op["load_aligned"], op["store"], op["store_aligned"]
    prefetch = op["prefetch"]
    vmax, fma, broadcast, setzero = op["max"], op["fma"], op["broadcast"], op["setzero"]
    reduce_sum, reduce_max, reduce_min = op["reduce_sum"], op["reduce_max"], op["reduce_min"]
    W = lanes  # noqa: N806 - the width, a Python int while parsing

    with hidet.script_module() as module:
        @hidet.script
        def arith(n: i32, a: ~f32, b: ~f32, add: ~f32, sub: ~f32, mul: ~f32, big: ~f32, small: ~f32):
            attrs.func_kind = "public"
            i = 0
            while i + W <= n:
                va = load(a + i)  # a pointer expression, or the address of an element
                vb = load(~b[i])
                store(~add[i], va + vb)
                store(sub + i, va - vb)
                store(~mul[i], va * vb)
                store(~big[i], vmax(va, vb))
                store(~small[i], min(va, vb))  # Python's min on vectors: the type's min
                i += W
            while i < n:
                add[i] = a[i] + b[i]
                sub[i] = a[i] - b[i]
                mul[i] = a[i] * b[i]
                big[i] = max(a[i], b[i])
                small[i] = min(a[i], b[i])
                i += 1

        @hidet.script
        def fused(n: i32, a: ~f32, b: ~f32, c: ~f32, out: ~f32, twice: ~f32):
            attrs.func_kind = "public"
            i = 0
            while i + W <= n:
                va, vb, vc = load(~a[i]), load(~b[i]), load(~c[i])
                store(~out[i], fma(va, vb, vc))
                store(~twice[i], va * vb + vc)
                i += W
            if i < n:  # the tail: padded into a local vector's worth of floats
                pa = register_tensor(f32, [W])
                pb = register_tensor(f32, [W])
                pc = register_tensor(f32, [W])
                for k in range(W):
                    pa[k] = a[i + k] if i + k < n else 0.0
                    pb[k] = b[i + k] if i + k < n else 0.0
                    pc[k] = c[i + k] if i + k < n else 0.0
                r = fma(load(~pa[0]), load(~pb[0]), load(~pc[0]))
                store(~pa[0], r)
                for k in range(n - i):
                    out[i + k] = pa[k]
                    twice[i + k] = a[i + k] * b[i + k] + c[i + k]

        @hidet.script
        def aligned_copy(n: i32, a: ~f32, out: ~f32):
            attrs.func_kind = "public"
            i = 0
            while i + W <= n:
                prefetch(a + i + 4096)  # a hint, past the array's end too: it never faults
                store_aligned(~out[i], load_aligned(~a[i]))
                i += W
            while i < n:
                out[i] = a[i]
                i += 1

        @hidet.script
        def fill(n: i32, x: f32, p: ~f32, by_value: ~f32, by_pointer: ~f32, zeros: ~f32):
            attrs.func_kind = "public"
            i = 0
            while i + W <= n:
                store(~by_value[i], broadcast(x))
                store(~by_pointer[i], broadcast(p))
                store(~zeros[i], setzero())
                i += W
            while i < n:
                by_value[i] = x
                by_pointer[i] = p[0]
                zeros[i] = 0.0
                i += 1

        @hidet.script
        def reduce(count: i32, a: ~f32, sums: ~f32, maxes: ~f32, mins: ~f32):
            attrs.func_kind = "public"
            for k in range(count):
                v = load(~a[k * W])
                sums[k] = reduce_sum(v)
                maxes[k] = reduce_max(v)
                mins[k] = reduce_min(v)

    return module.build()


def _floats(n: int) -> st.SearchStrategy[np.ndarray]:
    """`n` finite float32 values, of magnitudes from tiny to large, zeros of both signs included."""
    return hnp.arrays(np.float32, n, elements=st.floats(-1e4, 1e4, width=32, allow_subnormal=False))


sizes = st.one_of(st.sampled_from(ODD_SIZES), st.integers(1, 300))
examples = settings(max_examples=example_count(20), deadline=None)


@pytest.mark.parametrize("lanes", LANES)
@examples
@given(data=st.data())
def test_arithmetic_min_max_and_loads_are_exact(lanes: int, data: st.DataObject) -> None:
    _machine_has(lanes)
    n = data.draw(sizes)
    a, b = data.draw(_floats(n)), data.draw(_floats(n))
    outs = [np.full(n, np.nan, np.float32) for _ in range(5)]
    elementwise_module(lanes)["arith"](n, a, b, *outs)
    add, sub, mul, big, small = outs
    np.testing.assert_array_equal(add, a + b)
    np.testing.assert_array_equal(sub, a - b)
    np.testing.assert_array_equal(mul, a * b)
    # the max/min rule, as the scalar one: `a > b ? a : b` (so max(+0.0, -0.0) is -0.0, the second)
    assert big.tobytes() == np.where(a > b, a, b).tobytes()
    assert small.tobytes() == np.where(a < b, a, b).tobytes()


def round_once(x: Fraction) -> np.float32:
    """The f32 nearest to the exact value `x` (ties to the even one): a single rounding."""
    near = np.float32(float(x))  # within an ulp of the answer (rounded twice: to f64, then f32)
    candidates = (np.nextafter(near, np.float32(-np.inf)), near, np.nextafter(near, np.float32(np.inf)))
    return min(candidates, key=lambda c: (abs(Fraction(float(c)) - x), int(c.view(np.uint32)) & 1))


def fused_reference(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """`a * b + c` computed exactly and rounded once to f32, lane by lane: what a fused multiply-add gives."""
    exact = (Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)) for x, y, z in zip(a, b, c))
    return np.array([round_once(v) for v in exact], np.float32)


@pytest.mark.parametrize("lanes", LANES)
@examples
@given(data=st.data())
def test_fma_rounds_once_and_operators_twice(lanes: int, data: st.DataObject) -> None:
    _machine_has(lanes)
    n = data.draw(sizes)
    a, b, c = (data.draw(_floats(n)) for _ in range(3))
    out, twice = np.empty(n, np.float32), np.empty(n, np.float32)
    elementwise_module(lanes)["fused"](n, a, b, c, out, twice)
    np.testing.assert_array_equal(out, fused_reference(a, b, c))
    np.testing.assert_array_equal(twice, a * b + c)  # numpy rounds the product, then the sum


@pytest.mark.parametrize("lanes", LANES)
def test_fma_and_multiply_add_differ_where_the_rounding_shows(lanes: int) -> None:
    _machine_has(lanes)
    n = 2 * lanes + 3
    a = np.full(n, 1 + 2.0 ** -12, np.float32)  # a * a = 1 + 2^-11 + 2^-24: its last bit is lost when rounded
    c = np.full(n, -(1 + 2.0 ** -11), np.float32)
    out, twice = np.empty(n, np.float32), np.empty(n, np.float32)
    elementwise_module(lanes)["fused"](n, a, a, c, out, twice)
    np.testing.assert_array_equal(out, np.float32(2.0 ** -24))
    np.testing.assert_array_equal(twice, np.float32(0.0))  # `a * b + c` of vectors is not contracted


def _aligned(values: np.ndarray, alignment: int) -> np.ndarray:
    """A copy of `values` whose first element is at an address that is a multiple of `alignment` bytes."""
    raw = np.empty(values.size + alignment // 4, np.float32)
    skip = (-raw.ctypes.data % alignment) // 4
    out = raw[skip:skip + values.size]
    out[:] = values
    assert out.ctypes.data % alignment == 0
    return out


@pytest.mark.parametrize("lanes", LANES)
@examples
@given(data=st.data())
def test_aligned_loads_and_stores(lanes: int, data: st.DataObject) -> None:
    _machine_has(lanes)
    n = data.draw(sizes)
    a = _aligned(data.draw(_floats(n)), 4 * lanes)
    out = _aligned(np.zeros(n, np.float32), 4 * lanes)
    module = elementwise_module(lanes)
    module["aligned_copy"](n, a, out)
    assert out.tobytes() == a.tobytes()
    assert f"hl_f32x{lanes}_prefetch(" in module.source()  # the hint is kept: it has no value to be used


@pytest.mark.parametrize("lanes", LANES)
@examples
@given(n=sizes, x=st.floats(width=32, allow_nan=False), y=st.floats(width=32, allow_nan=False))
def test_broadcast_from_a_value_and_a_pointer_and_setzero(lanes: int, n: int, x: float, y: float) -> None:
    _machine_has(lanes)
    outs = [np.full(n, np.nan, np.float32) for _ in range(3)]
    elementwise_module(lanes)["fill"](n, x, np.array([y], np.float32), *outs)
    assert outs[0].tobytes() == np.full(n, x, np.float32).tobytes()  # -0.0 stays -0.0
    assert outs[1].tobytes() == np.full(n, y, np.float32).tobytes()
    assert outs[2].tobytes() == np.zeros(n, np.float32).tobytes()  # +0.0


def tree(values: np.ndarray, combine: object) -> np.float32:
    """The lanes of one vector combined as the documented tree: lane i with lane i + half, halving."""
    t = [np.float32(v) for v in values]
    width = len(t) // 2
    while width:
        t = [combine(t[i], t[i + width]) for i in range(width)]  # type: ignore[operator]
        width //= 2
    return t[0]


@pytest.mark.parametrize("lanes", LANES)
@examples
@given(data=st.data())
def test_reductions_follow_the_documented_tree(lanes: int, data: st.DataObject) -> None:
    _machine_has(lanes)
    count = data.draw(st.integers(1, 12))
    a = data.draw(_floats(count * lanes))
    sums, maxes, mins = (np.empty(count, np.float32) for _ in range(3))
    elementwise_module(lanes)["reduce"](count, a, sums, maxes, mins)
    rows = a.reshape(count, lanes)
    expected_sums = [tree(r, lambda x, y: np.float32(x + y)) for r in rows]
    assert sums.tobytes() == np.array(expected_sums, np.float32).tobytes()
    np.testing.assert_array_equal(maxes, rows.max(axis=1))
    np.testing.assert_array_equal(mins, rows.min(axis=1))
    # and the tree sum is a sum of the lanes: within the error bound of any order of f32 additions
    exact = rows.astype(np.float64).sum(axis=1)
    bound = (lanes - 1) * np.finfo(np.float32).eps * np.abs(rows).astype(np.float64).sum(axis=1)
    assert np.all(np.abs(sums - exact) <= bound + 1e-30)


# ------------------------------------------------------------------------------------------------------------
# Kernels written as a Hidet user writes them: only the import line differs from `hidet.lang.cpu`.

@functools.cache
def hidet_spelled_module() -> object:
    from hidet_lang.cpu import (
        avx_f32x8_broadcast,
        avx_f32x8_fmadd,
        avx_f32x8_load,
        avx_f32x8_max,
        avx_f32x8_scalar_max,
        avx_f32x8_setzero,
        avx_f32x8_store,
        avx_f32x8_sum,
        f32x8,
    )

    with hidet.script_module() as module:
        @hidet.script
        def dot(n: i32, a: ~f32, b: ~f32, out: ~f32):
            attrs.func_kind = "public"
            acc: f32x8 = avx_f32x8_setzero()
            i = 0
            while i + 8 <= n:
                acc = avx_f32x8_fmadd(avx_f32x8_load(~a[i]), avx_f32x8_load(~b[i]), acc)
                i += 8
            total = avx_f32x8_sum(acc)
            while i < n:
                total += a[i] * b[i]
                i += 1
            out[0] = total

        @hidet.script
        def saxpy(n: i32, alpha: ~f32, x: ~f32, y: ~f32):
            attrs.func_kind = "public"
            va = avx_f32x8_broadcast(alpha)  # a pointer to one float, as Hidet's broadcast takes
            i = 0
            while i + 8 <= n:
                avx_f32x8_store(~y[i], avx_f32x8_fmadd(va, avx_f32x8_load(~x[i]), avx_f32x8_load(~y[i])))
                i += 8
            while i < n:
                y[i] = alpha[0] * x[i] + y[i]
                i += 1

        @hidet.script
        def row_max(rows: i32, cols: i32, a: ~f32, out: ~f32):
            attrs.func_kind = "public"
            for r in range(rows):
                row = a + r * cols
                best = row[0]
                j = 0
                if cols >= 8:
                    m = avx_f32x8_load(row)
                    j = 8
                    while j + 8 <= cols:
                        m = avx_f32x8_max(m, avx_f32x8_load(~row[j]))
                        j += 8
                    best = avx_f32x8_scalar_max(m)
                while j < cols:
                    best = max(best, row[j])
                    j += 1
                out[r] = best

    return module.build()


@examples
@given(data=st.data())
def test_a_hidet_spelled_dot_product(data: st.DataObject) -> None:
    _machine_has(8)
    n = data.draw(sizes)
    a, b = data.draw(_floats(n)), data.draw(_floats(n))
    out = np.empty(1, np.float32)
    hidet_spelled_module()["dot"](n, a, b, out)
    products = a.astype(np.float64) * b
    # Each of the n products and sums is rounded once (the fused ones together): relative error at most
    # (n + 1) * eps of the sum of |products|, whatever the order the eight lanes and the tail add in; a rounding
    # to a subnormal result is off by up to half its spacing, 2^-150, instead.
    bound = (n + 1) * (np.finfo(np.float32).eps * np.abs(products).sum() + 2.0**-150)
    assert abs(float(out[0]) - products.sum()) <= bound


@examples
@given(data=st.data())
def test_a_hidet_spelled_saxpy(data: st.DataObject) -> None:
    _machine_has(8)
    n = data.draw(sizes)
    x, y = data.draw(_floats(n)), data.draw(_floats(n))
    alpha = np.array([data.draw(st.floats(-100, 100, width=32))], np.float32)
    expected = np.empty(n, np.float32)
    whole = n - n % 8
    expected[:whole] = fused_reference(np.full(whole, alpha[0]), x[:whole], y[:whole])  # fused in the vectors
    expected[whole:] = alpha[0] * x[whole:] + y[whole:]  # two roundings in the scalar tail
    hidet_spelled_module()["saxpy"](n, alpha, x, y)
    np.testing.assert_array_equal(y, expected)


@examples
@given(data=st.data())
def test_a_hidet_spelled_row_max(data: st.DataObject) -> None:
    _machine_has(8)
    rows, cols = data.draw(st.integers(1, 6)), data.draw(sizes)
    a = data.draw(_floats(rows * cols))
    out = np.empty(rows, np.float32)
    hidet_spelled_module()["row_max"](rows, cols, a, out)
    np.testing.assert_array_equal(out, a.reshape(rows, cols).max(axis=1))


@functools.cache
def lane_address_module(lanes: int) -> object:
    """Lanes of a vector variable read and written through its address (`~v`, `address(v)`)."""
    op = _ops(lanes)
    load, store = op["load"], op["store"]
    W = lanes  # noqa: N806 - the width, a Python int while parsing

    with hidet.script_module() as module:
        @hidet.script
        def set_lane_and_reverse(count: i32, a: ~f32, lane: ~i32, x: ~f32, out: ~f32, reversed_lanes: ~f32):
            attrs.func_kind = "public"
            for k in range(count):
                v = load(~a[k * W])
                p = ~v  # the address of its first lane, a ~f32
                p[lane[k]] = x[k]
                store(~out[k * W], v)  # the vector holds what was written through the pointer
                q = cast(address(v), ~f32)
                for j in range(W):
                    reversed_lanes[k * W + j] = q[W - 1 - j]

    return module.build()


@pytest.mark.parametrize("lanes", LANES)
@examples
@given(data=st.data())
def test_the_lanes_of_a_vector_variable_through_its_address(lanes: int, data: st.DataObject) -> None:
    _machine_has(lanes)
    count = data.draw(st.integers(1, 5))
    a = data.draw(_floats(count * lanes))
    lane = np.array(data.draw(st.lists(st.integers(0, lanes - 1), min_size=count, max_size=count)), np.int32)
    x = data.draw(_floats(count))
    out, reversed_lanes = np.empty_like(a), np.empty_like(a)
    lane_address_module(lanes)["set_lane_and_reverse"](count, a, lane, x, out, reversed_lanes)
    expected = a.reshape(count, lanes).copy()
    expected[np.arange(count), lane] = x
    assert out.tobytes() == expected.tobytes()
    assert reversed_lanes.tobytes() == expected[:, ::-1].tobytes()


def test_the_vector_helpers_are_included_only_where_used() -> None:
    _machine_has(8)
    # first, so that the compiler may read it precompiled (codegen.toolchain.precompiled_headers)
    assert hidet_spelled_module().source().startswith('#include "hidet_lang/cpu_vectors.h"\n')
    with hidet.script_module() as module:
        @hidet.script
        def plain(a: f32[4]):
            attrs.func_kind = "public"
            a[0] = math.sqrt(a[1])

    assert "cpu_vectors.h" not in module.build().source()


@functools.cache
def lane_checks_module(lanes: int) -> object:
    """A vector load at `a[i]` and a store at `out[j]`, both of known size, for checking mode."""
    op = _ops(lanes)
    load, store = op["load"], op["store"]

    with hidet.script_module() as module:
        @hidet.script
        def shifted_copy(i: i32, j: i32, a: f32[32], out: f32[32]):
            attrs.func_kind = "public"
            store(~out[j], load(~a[i]))

    return module


@pytest.mark.parametrize("lanes", LANES)
def test_checking_mode_covers_every_lane_of_a_vector_access(lanes: int) -> None:
    _machine_has(lanes)
    built = lane_checks_module(lanes).build(check=True)
    a = np.arange(32, dtype=np.float32)
    out = np.zeros(32, np.float32)
    built(32 - lanes, 32 - lanes, a, out)  # the last whole vector of each: in bounds
    np.testing.assert_array_equal(out[32 - lanes:], a[32 - lanes:])
    # a load whose first lane is in bounds and the rest not: the first index outside is reported
    with pytest.raises(IndexError, match=r"index 32 is out of bounds for 'a', which has 32 elements"):
        built(33 - lanes, 0, a, out)
    # a store running past the end writes nothing outside `out` (the guard sends the whole vector elsewhere)
    guarded = np.zeros(64, np.float32)
    out = guarded[:32]
    with pytest.raises(IndexError, match=r"index 32 is out of bounds for 'out', which has 32 elements"):
        built(0, 33 - lanes, a, out)
    np.testing.assert_array_equal(guarded, 0)
    with pytest.raises(IndexError, match=r"index -1 is out of bounds for 'a'"):
        built(-1, 0, a, out)
