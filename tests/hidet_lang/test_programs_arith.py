"""DSL arithmetic in every dtype, C-truncating `//` and `%`, math functions and casts, against numpy.

Each kernel is built once per dtype (the module's in-memory cache makes later `build()` calls free);
hypothesis varies the data and sizes. Runtime-sized parameters use string annotations (see
test_programs_control_flow.py for why).
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f16, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64
from hidet_lang.testing import arrays, check_kernel, example_count, int_bound, with_edge_values

SETTINGS = settings(max_examples=example_count(25), deadline=None)
ALL_DTYPES = [i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64]
INT_DTYPES = [i8, i16, i32, i64, u8, u16, u32, u64]
_MODULES: dict[tuple[str, str], hidet.ScriptModule] = {}


def sized(n: int, dtype: str, *, nonzero: bool = False, signed_range: bool = True) -> st.SearchStrategy[np.ndarray]:
    """Arrays of `n` elements of `dtype` with the default (overflow-safe) elements, optionally without zeros."""
    elements = None
    if np.dtype(dtype).kind in "iu":
        b = int_bound(dtype)
        lo = -b if np.dtype(dtype).kind == "i" and signed_range else 0
        elements = st.integers(lo, b).filter(lambda v: v != 0) if nonzero else st.integers(lo, b)
    return arrays(dtype, n, elements=elements)


def pairs(dtype: str, *, nonzero_b: bool = False) -> st.SearchStrategy[tuple[np.ndarray, np.ndarray]]:
    """Two arrays of one odd-or-even size in 1..37."""
    return st.integers(1, 37).flatmap(lambda n: st.tuples(sized(n, dtype), sized(n, dtype, nonzero=nonzero_b)))


# ------------------------------------------------------------------------------------------------ all dtypes
def arith_module(dt: hidet.ir.types.DataType) -> hidet.ScriptModule:
    """c = a * b + a - b; d = (a + b) * (a - b) (plus a bitwise mix on integers), in dtype `dt`."""
    key = ("arith", dt.name)
    if key not in _MODULES:
        with hidet.script_module() as module:
            if dt.is_float:

                @hidet.script
                def arith(n: i32, a: "dt[n]", b: "dt[n]", c: "dt[n]", d: "dt[n]"):  # noqa: F821
                    attrs.func_kind = "public"
                    for i in range(n):
                        c[i] = a[i] * b[i] + a[i] - b[i]
                        d[i] = (a[i] + b[i]) * (a[i] - b[i]) / (abs(b[i]) + dt(1.0))
            else:

                @hidet.script
                def arith(n: i32, a: "dt[n]", b: "dt[n]", c: "dt[n]", d: "dt[n]"):  # noqa: F821
                    attrs.func_kind = "public"
                    for i in range(n):
                        c[i] = a[i] * b[i] + a[i] - b[i]
                        d[i] = ((a[i] ^ b[i]) | (a[i] & b[i])) + (a[i] << dt(1)) - (b[i] >> dt(1))
        _MODULES[key] = module
    return _MODULES[key]


@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
@SETTINGS
@given(data=st.data())
def test_arithmetic_in_every_dtype(dt: hidet.ir.types.DataType, data: st.DataObject) -> None:
    a, b = data.draw(pairs(dt.name))
    npd = np.dtype(dt.name)

    def ref(n: int, a: np.ndarray, b: np.ndarray, c: np.ndarray, d: np.ndarray) -> None:
        with np.errstate(over="ignore"):  # unsigned a - b wraps around, as in C
            c[:] = a * b + a - b
            if dt.is_float:
                d[:] = (a + b) * (a - b) / (np.abs(b) + npd.type(1))
            else:
                d[:] = ((a ^ b) | (a & b)) + (a << npd.type(1)) - (b >> npd.type(1))

    # f16: C evaluates `_Float16` expressions in float and rounds once (excess precision), numpy rounds
    # after each operation; results agree to a few f16 ulps (eps 9.8e-4) on values up to 8 * 8 + 16.
    tol = {"rtol": 4e-3, "atol": 4e-3} if dt == f16 else {}
    n = len(a)
    check_kernel(arith_module(dt).build(), ref, n, a, b, np.zeros(n, npd), np.zeros(n, npd), **tol)


# ------------------------------------------------------------------------------------------------ // and %
def divmod_module(dt: hidet.ir.types.DataType) -> hidet.ScriptModule:
    """q = a // b, r = a % b with C semantics (truncation toward zero; the remainder has a's sign)."""
    key = ("divmod", dt.name)
    if key not in _MODULES:
        with hidet.script_module() as module:

            @hidet.script
            def divmod_(n: i32, a: "dt[n]", b: "dt[n]", q: "dt[n]", r: "dt[n]", q7: "dt[n]"):  # noqa: F821
                attrs.func_kind = "public"
                for i in range(n):
                    q[i] = a[i] // b[i]
                    r[i] = a[i] % b[i]
                    x = a[i]
                    x //= dt(7)  # an augmented assignment, with a constant divisor
                    q7[i] = x
        _MODULES[key] = module
    return _MODULES[key]


def c_divmod(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """C's truncated quotient and remainder, exactly (numpy's // and % floor instead)."""
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    q = np.sign(a64) * np.sign(b64) * (np.abs(a64) // np.abs(b64))
    return q.astype(a.dtype), (a64 - q * b64).astype(a.dtype)


@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
@SETTINGS
@given(data=st.data())
def test_integer_floordiv_and_mod_truncate_like_c(dt: hidet.ir.types.DataType, data: st.DataObject) -> None:
    a, b = data.draw(pairs(dt.name, nonzero_b=True))

    def ref(n: int, a: np.ndarray, b: np.ndarray, q: np.ndarray, r: np.ndarray, q7: np.ndarray) -> None:
        q[:], r[:] = c_divmod(a, b)
        q7[:] = c_divmod(a, np.full_like(a, 7))[0]

    n = len(a)
    z = np.zeros(n, np.dtype(dt.name))
    check_kernel(divmod_module(dt).build(), ref, n, a, b, z, z.copy(), z.copy())


def test_negative_division_is_truncation_not_floor() -> None:
    a = np.array([-7, 7, -7, 7, -1, 0], np.int32)
    b = np.array([2, -2, -2, 2, 3, -5], np.int32)
    q, r, q7 = (np.zeros(6, np.int32) for _ in range(3))
    divmod_module(i32).build()(6, a, b, q, r, q7)
    np.testing.assert_array_equal(q, [-3, -3, 3, 3, 0, 0])
    np.testing.assert_array_equal(r, [-1, 1, -1, 1, -1, 0])
    np.testing.assert_array_equal(q7, [-1, 1, -1, 1, 0, 0])


# ------------------------------------------------------------------------------------------------ augmented ops
with hidet.script_module() as aug_module:

    @hidet.script
    def augmented(n: i32, a: "i32[n]", b: "i32[n]", s: i32[1]):  # noqa: F821
        attrs.func_kind = "public"
        total = 0
        for i in range(n):
            a[i] += 3  # on elements
            a[i] *= 5
            a[i] -= b[i]
            a[i] %= 11
            a[i] <<= 2
            a[i] >>= 1
            a[i] |= 64
            a[i] &= 0x5F
            a[i] ^= 3
            v = b[i]  # on a variable
            v //= 3
            v **= 2
            v -= 1
            b[i] = v
            total += a[i] + v
        s[0] = total


def augmented_ref(n: int, a: np.ndarray, b: np.ndarray, s: np.ndarray) -> None:
    x = (a + 3) * 5 - b
    x = c_divmod(x, np.full_like(x, 11))[1]
    a[:] = (((x << 2) >> 1) | 64) & 0x5F ^ 3
    b[:] = c_divmod(b, np.full_like(b, 3))[0] ** 2 - 1
    s[0] = a.sum() + b.sum()


@SETTINGS
@given(pairs("int32"))
def test_augmented_assignment_on_elements_and_variables(ab: tuple[np.ndarray, np.ndarray]) -> None:
    a, b = ab
    check_kernel(aug_module.build(), augmented_ref, len(a), a, b, np.zeros(1, np.int32))


# ------------------------------------------------------------------------------------------------ tuple assignment
with hidet.script_module() as tuple_module:

    @hidet.script
    def rotate(n: i32, a: "f32[n]", b: "f32[n]", c: "f32[n]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            x, y, z = a[i], b[i], c[i]
            x, y, z = y, z, x  # every right-hand value is read before any store
            a[i], b[i] = b[i], a[i]  # a swap of elements
            a[i], (b[i], c[i]) = a[i] + x, (y, z)  # nested targets


def rotate_ref(n: int, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    x, y, z = b.copy(), c.copy(), a.copy()
    a_new = b + x
    a[:], b[:], c[:] = a_new, y, z


@SETTINGS
@given(st.integers(1, 20).flatmap(lambda n: st.tuples(*(arrays("float32", n) for _ in range(3)))))
def test_tuple_unpacking_reads_everything_before_storing(abc: tuple[np.ndarray, ...]) -> None:
    a, b, c = abc
    check_kernel(tuple_module.build(), rotate_ref, len(a), a, b, c)


# ------------------------------------------------------------------------------------------------ math
def math_module(dt: hidet.ir.types.DataType) -> hidet.ScriptModule:
    """Every supported math function of x (and y) into a row of `out`."""
    key = ("math", dt.name)
    if key not in _MODULES:
        with hidet.script_module() as module:

            @hidet.script
            def maths(n: i32, x: "dt[n]", y: "dt[n]", out: "dt[13, n]"):  # noqa: F821
                attrs.func_kind = "public"
                for i in range(n):
                    v = x[i]
                    w = y[i]
                    out[0, i] = math.exp(v)
                    out[1, i] = math.log(abs(v) + dt(1.0))
                    out[2, i] = math.sqrt(abs(v))
                    out[3, i] = math.sin(v)
                    out[4, i] = math.cos(v)
                    out[5, i] = math.tanh(v)
                    out[6, i] = math.erf(v)
                    out[7, i] = math.floor(v)
                    out[8, i] = math.ceil(v)
                    out[9, i] = math.pow(abs(v), w)
                    out[10, i] = hidet.rsqrt(abs(v) + dt(0.5))
                    out[11, i] = min(v, w) - max(v, w, dt(0.0))
                    out[12, i] = abs(v) + v**2
        _MODULES[key] = module
    return _MODULES[key]


@pytest.mark.parametrize("dt", [f32, f64], ids=str)
@SETTINGS
@given(data=st.data())
def test_math_functions(dt: hidet.ir.types.DataType, data: st.DataObject) -> None:
    npd = np.dtype(dt.name)
    x, y = data.draw(st.integers(1, 29).flatmap(lambda n: st.tuples(
        arrays(dt.name, n, elements=st.floats(-6, 6, width=npd.itemsize * 8)),
        arrays(dt.name, n, elements=st.floats(-2, 2, width=npd.itemsize * 8)))))

    def ref(n: int, x: np.ndarray, y: np.ndarray, out: np.ndarray) -> None:
        one = npd.type(1)
        out[0] = np.exp(x)
        out[1] = np.log(np.abs(x) + one)
        out[2] = np.sqrt(np.abs(x))
        out[3] = np.sin(x)
        out[4] = np.cos(x)
        out[5] = np.tanh(x)
        out[6] = [math.erf(float(v)) for v in x]  # numpy has no erf: the float64 value, rounded to dt
        out[7] = np.floor(x)
        out[8] = np.ceil(x)
        with np.errstate(divide="ignore", over="ignore"):  # 0 ** negative is inf on both sides
            out[9] = np.power(np.abs(x), y)
        out[10] = one / np.sqrt(np.abs(x) + npd.type(0.5))
        out[11] = np.minimum(x, y) - np.maximum(np.maximum(x, y), 0)
        out[12] = np.abs(x) + x * x

    # The kernel calls the C library (expf, tanhf, ...) and numpy its own implementations; both are within
    # an ulp or two of the exact value, so the results differ in the last bits. For f32 that needs
    # rtol 1e-5 (about 80 ulps: pow with exponents up to 2 amplifies the relative error), for f64 the
    # check_kernel default 1e-12 already allows it.
    n = len(x)
    check_kernel(math_module(dt).build(), ref, n, x, y, np.zeros((13, n), npd))


# ------------------------------------------------------------------------------------------------ casts
with hidet.script_module() as cast_module:

    @hidet.script
    def casts(n: i32, a: "f32[n]", k: "i64[n]", as_int: "i32[n]", as_f64: "f64[n]", mix: "f32[n]"):  # noqa: F821
        attrs.func_kind = "public"
        for i in range(n):
            as_int[i] = int(a[i])  # truncation toward zero
            as_f64[i] = float(k[i]) + f64(a[i])  # float() is f32; f64() widens
            mix[i] = f32(i32(a[i] * 3.0)) + i32(k[i]) / 2  # i32 / int: integer division, then promoted


def casts_ref(n: int, a: np.ndarray, k: np.ndarray, as_int: np.ndarray, as_f64: np.ndarray, mix: np.ndarray) -> None:
    as_int[:] = np.trunc(a).astype(np.int32)
    as_f64[:] = k.astype(np.float32).astype(np.float64) + a.astype(np.float64)
    half = c_divmod(k.astype(np.int32), np.full(n, 2, np.int32))[0]
    mix[:] = np.trunc(a * np.float32(3)).astype(np.int32).astype(np.float32) + half.astype(np.float32)


@SETTINGS
@given(st.integers(1, 30).flatmap(lambda n: st.tuples(arrays("float32", n), sized(n, "int64"))))
def test_casts(ak: tuple[np.ndarray, np.ndarray]) -> None:
    a, k = ak
    n = len(a)
    check_kernel(cast_module.build(), casts_ref, n, a, k, np.zeros(n, np.int32), np.zeros(n, np.float64),
                 np.zeros(n, np.float32))


# -------------------------------------------------------------------------------- integers at and past their limits
def wrap_module(dt: hidet.ir.types.DataType, target: str) -> hidet.ScriptModule:
    """Sums, differences, products, negation and shifts in dtype `dt` whose results may leave its range: a CPU
    function, or a CUDA kernel of one thread running the same loop (the device code generator's arithmetic)."""
    key = ("wrap", dt.name, target)
    if key not in _MODULES:
        with hidet.script_module() as module:

            @hidet.script
            def wrap(n: i32, a: "dt[n]", b: "dt[n]", s: "dt[n]", out: "dt[7, n]"):  # noqa: F821
                if target == "cpu":
                    attrs.func_kind = "public"
                else:
                    attrs.cuda.grid_dim = 1
                    attrs.cuda.block_dim = 1
                for i in range(n):
                    out[0, i] = a[i] + b[i]
                    out[1, i] = a[i] - b[i]
                    out[2, i] = a[i] * b[i]
                    out[3, i] = -a[i]
                    out[4, i] = (a[i] * b[i]) / dt(3)  # the product wraps first, then divides
                    out[5, i] = a[i] << s[i]
                    out[6, i] = a[i] >> s[i]

        _MODULES[key] = module
    return _MODULES[key]


def wrapped(values: list[int], dtype: np.dtype) -> np.ndarray:
    """`values` (exact Python integers) reduced into `dtype` by two's-complement wrap-around."""
    info, bits = np.iinfo(dtype), 8 * np.dtype(dtype).itemsize
    return np.array([(v - info.min) % 2**bits + info.min for v in values], dtype)


def limit_values(dtype: np.dtype) -> st.SearchStrategy[int]:
    """Any value of `dtype`, its limits and their neighbours often."""
    info = np.iinfo(dtype)
    edges = [info.min, info.min + 1, -1, 0, 1, info.max - 1, info.max]
    return st.one_of(st.sampled_from([e for e in edges if info.min <= e <= info.max]),
                     st.integers(int(info.min), int(info.max)))


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
@settings(max_examples=example_count(10), deadline=None)
@given(data=st.data())
def test_integers_wrap_around_at_their_limits_like_numpy(dt: hidet.ir.types.DataType, target: str,
                                                         data: st.DataObject) -> None:
    dtype = np.dtype(dt.name)
    bits = 8 * dtype.itemsize
    n = data.draw(st.integers(1, 9))
    a = data.draw(st.lists(limit_values(dtype), min_size=n, max_size=n))
    b = data.draw(st.lists(limit_values(dtype), min_size=n, max_size=n))
    s = data.draw(st.lists(st.integers(0, bits - 1), min_size=n, max_size=n))  # shifts within the width
    out = np.zeros((7, n), dtype)
    wrap_module(dt, target).build()(n, np.array(a, dtype), np.array(b, dtype), np.array(s, dtype), out)
    products = wrapped([x * y for x, y in zip(a, b)], dtype).tolist()
    want = [
        wrapped([x + y for x, y in zip(a, b)], dtype), wrapped([x - y for x, y in zip(a, b)], dtype),
        wrapped(products, dtype), wrapped([-x for x in a], dtype),
        np.array([abs(p) // 3 * (1 if p >= 0 else -1) for p in products], dtype),  # C truncates toward zero
        wrapped([x << k for x, k in zip(a, s)], dtype),
        np.array([x >> k for x, k in zip(a, s)], dtype),  # arithmetic for signed types, as numpy's and C's
    ]
    for k, name in enumerate(["+", "-", "*", "unary -", "(a * b) / 3", "<<", ">>"]):
        np.testing.assert_array_equal(out[k], want[k], err_msg=f"{dt} {name} on {target}: a={a} b={b} s={s}")


# ------------------------------------------------------------------------------------------------ min/max and NaN
def min_max_module(dt: hidet.ir.types.DataType, target: str) -> hidet.ScriptModule:
    """out[0] = min(a, b), out[1] = max(a, b), out[2] = max(b, a), elementwise in dtype `dt`: a CPU function, or
    a CUDA kernel of one thread running the same loop."""
    key = ("min_max", dt.name, target)
    if key not in _MODULES:
        with hidet.script_module() as module:

            @hidet.script
            def min_max(n: i32, a: "dt[n]", b: "dt[n]", out: "dt[3, n]"):  # noqa: F821
                if target == "cpu":
                    attrs.func_kind = "public"
                else:
                    attrs.cuda.grid_dim = 1
                    attrs.cuda.block_dim = 1
                for i in range(n):
                    out[0, i] = min(a[i], b[i])
                    out[1, i] = max(a[i], b[i])
                    out[2, i] = max(b[i], a[i])

        _MODULES[key] = module
    return _MODULES[key]


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("dt", [f16, f32, f64], ids=str)
@settings(max_examples=example_count(10), deadline=None)
@given(data=st.data())
def test_min_max_give_the_second_operand_for_nan_and_equal_zeros(dt: hidet.ir.types.DataType, target: str,
                                                                 data: st.DataObject) -> None:
    # the documented rule of the intrinsics on every target: min(a, b) = a < b ? a : b, max(a, b) = a > b ? a : b,
    # so a NaN operand, either one, gives b, and so do equal operands (max(-0.0, 0.0) is 0.0, max(0.0, -0.0) -0.0)
    npd = np.dtype(dt.name)
    elements = with_edge_values(st.floats(-4, 4, width=npd.itemsize * 8), one_in=2)
    a, b = data.draw(st.integers(1, 19).flatmap(lambda n: st.tuples(arrays(dt.name, n, elements=elements),
                                                                     arrays(dt.name, n, elements=elements))))
    out = np.zeros((3, a.size), npd)
    min_max_module(dt, target).build()(a.size, a, b, out)
    want = np.stack([np.where(a < b, a, b), np.where(a > b, a, b), np.where(b > a, b, a)])
    bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[npd.itemsize]
    # the very operand is returned: same bits (a NaN keeps its own, -0.0 its sign)
    np.testing.assert_array_equal(out.view(bits), want.view(bits), err_msg=f"{dt} on {target}: a={a} b={b}")


# -------------------------------------------------------------------------------- shifts by any count, as numpy's
def shift_module(dt: hidet.ir.types.DataType, target: str) -> hidet.ScriptModule:
    """`<<` and `>>` of one value of dtype `dt` by counts of `dt` and of i32 passed as scalars, and by constant
    counts past the width, at its last bit and negative: a CPU function, or a CUDA kernel of one thread (the device
    code generator's shifts). One value per call: a loop over arrays would be vectorized, and x86's vector shifts
    (`vpsllvd`, `vpsravd`) happen to give numpy's results where the scalar `shl`/`sar` take the count modulo the
    width, so a plain C shift would pass unnoticed."""
    key = ("shift", dt.name, target)
    width = 8 * dt.nbytes
    if key not in _MODULES:
        with hidet.script_module() as module:

            @hidet.script
            def shift(a: dt, s: dt, t: i32, out: "dt[8]"):  # noqa: F821
                if target == "cpu":
                    attrs.func_kind = "public"
                else:
                    attrs.func_kind = "cuda_kernel"
                    attrs.cuda.grid_dim = 1
                    attrs.cuda.block_dim = 1
                out[0] = a << s
                out[1] = a >> s
                out[2] = a << t
                out[3] = a >> t
                out[4] = a << i32(width)
                out[5] = a >> dt(width + 1)
                out[6] = a >> i32(-1)
                out[7] = a << dt(width - 1)

        _MODULES[key] = module
    return _MODULES[key]


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@pytest.mark.parametrize("dt", INT_DTYPES, ids=str)
@settings(max_examples=example_count(10), deadline=None)
@given(data=st.data())
def test_shifts_by_any_count_are_numpys(dt: hidet.ir.types.DataType, target: str, data: st.DataObject) -> None:
    """A count that is negative or not below the width gives 0 for `<<`; for `>>`, -1 for a negative value of a
    signed type (the sign fills every bit), else 0: numpy's `left_shift`/`right_shift` (a negative count of the
    value's own type is past the width for numpy too, which compares the count as unsigned)."""
    dtype = np.dtype(dt.name)
    bits, n = 8 * dtype.itemsize, 6
    counts = st.one_of(st.sampled_from([-1, 0, bits - 1, bits, bits + 1]), st.integers(-3, bits + 3))
    a = np.array(data.draw(st.lists(limit_values(dtype), min_size=n, max_size=n)), dtype)
    k = np.array(data.draw(st.lists(counts, min_size=n, max_size=n)), np.int32)
    s = k.astype(dtype)  # an unsigned type wraps the negative counts around: past the width too
    out = np.zeros((n, 8), dtype)
    built = shift_module(dt, target).build()
    for i in range(n):
        built(a[i], s[i], k[i], out[i])

    def full(count: int) -> np.ndarray:
        return np.full(n, count, np.int32).astype(dtype)

    want = [np.left_shift(a, s), np.right_shift(a, s), np.left_shift(a, s), np.right_shift(a, s),
            np.left_shift(a, full(bits)), np.right_shift(a, full(bits + 1)), np.right_shift(a, full(-1)),
            np.left_shift(a, full(bits - 1))]
    names = ["a << s", "a >> s", "a << i32 s", "a >> i32 s", "a << width", "a >> width + 1", "a >> -1",
             "a << width - 1"]
    for row, name in enumerate(names):
        np.testing.assert_array_equal(out[:, row], want[row], err_msg=f"{dt} {name} on {target}: a={a} s={k}")
