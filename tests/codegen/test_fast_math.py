"""Fast math: `attrs.fast_math = True` for one function, `module.build(fast_math=True)` for all of them.

Fast-math kernels agree with numpy within a tolerance that allows reassociated sums and the vector math functions;
a strict function beside a fast one in the same module keeps its exact results (a sequential float sum, the C
library's correctly rounded `expf`), and a fast one really reorders its sum (it differs from the sequential one on
data chosen so that any other order rounds differently). On CUDA, a fast-math device function calls the
approximate intrinsics (run by the emulator here) and the build option compiles the kernels with NVRTC's fast math.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from hidet_lang import attrs, f32, grid, i32
from hidet_lang.cuda import blockIdx
from hidet_lang.testing import example_count

SETTINGS = settings(max_examples=example_count(12), deadline=None)

# A fast-math sum of n float32 terms may be computed in any order: its error is within n * 2^-24 of the sum of
# the magnitudes (plus the terms' own rounding); the vector exp, erf and friends of libmvec are within 4 ulp of the
# correctly rounded result (glibc's documented bound), 1e-6 relative after the division of softmax.
SUM_ULPS = 2.0**-24
FUNCTION_RTOL = 4 * 2.0**-23


@hidet.script
def one_row(i: i32, m: i32, n: i32, x: f32[m, n], s: f32[m, n], r: f32[m, n], g: f32[m, n]):  # noqa: F821
    """Row i: softmax into s, a normalization into r, gelu into g."""
    attrs.fast_math = True
    row_max: f32 = x[i, 0]
    total: f32 = 0.0
    squares: f32 = 0.0
    for j in range(n):
        row_max = max(row_max, x[i, j])
        squares += x[i, j] * x[i, j]
    for j in range(n):
        s[i, j] = math.exp(x[i, j] - row_max)
        total += s[i, j]
    for j in range(n):
        s[i, j] = s[i, j] / total
        r[i, j] = x[i, j] / math.sqrt(squares / n + 1e-5)
        g[i, j] = 0.5 * x[i, j] * (1.0 + math.erf(x[i, j] * 0.7071067811865476))


def rows_module(target: str) -> hidet.ScriptModule:
    """`one_row` of every row of `x`: on the CPU (parallel rows; a cpu_internal function there), or on CUDA (a
    block a row; a cuda_internal one there)."""
    with hidet.script_module() as module:
        if target == "cpu":

            @hidet.script
            def rows(m: i32, n: i32, x: f32[m, n], s: f32[m, n], r: f32[m, n], g: f32[m, n]):  # noqa: F821
                attrs.func_kind = "public"
                for i in grid(m, attrs="p"):
                    one_row(i, m, n, x, s, r, g)
        else:

            @hidet.script
            def rows(m: i32, n: i32, x: f32[m, n], s: f32[m, n], r: f32[m, n], g: f32[m, n]):  # noqa: F821
                attrs.cuda.grid_dim = m
                attrs.cuda.block_dim = 1
                one_row(blockIdx.x, m, n, x, s, r, g)

    return module


_ROWS = {target: rows_module(target) for target in ("cpu", "cuda")}


@pytest.mark.parametrize("target", ["cpu", "cuda"])
@SETTINGS
@given(m=st.integers(1, 9), n=st.integers(1, 70), seed=st.integers(0, 2**32 - 1),
       scale=st.sampled_from([0.1, 1.0, 8.0]))
def test_fast_math_kernels_agree_with_numpy(target: str, m: int, n: int, seed: int, scale: float) -> None:
    x = (np.random.default_rng(seed).standard_normal((m, n)) * scale).astype(np.float32)
    s, r, g = (np.empty_like(x) for _ in range(3))
    _ROWS[target].build()(m, n, x, s, r, g)
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=1, keepdims=True))
    softmax = e / e.sum(axis=1, keepdims=True)
    norm = x64 / np.sqrt((x64 * x64).sum(axis=1, keepdims=True) / n + 1e-5)
    gelu = 0.5 * x64 * (1.0 + np.vectorize(math.erf)(x64 / math.sqrt(2.0)))
    # sums of n positive terms, reordered: n ulps relative; then a function and a division, a few ulps more
    rtol = n * SUM_ULPS + 4 * FUNCTION_RTOL
    np.testing.assert_allclose(s, softmax, rtol=rtol, atol=1e-30)
    np.testing.assert_allclose(r, norm, rtol=rtol, atol=1e-30)
    # 1 + erf(v) cancels for negative v: erf's error (a few ulp of 1) scaled by 0.5 * |x| bounds gelu's
    gelu_error = np.abs(g - gelu) - 4 * FUNCTION_RTOL * np.abs(gelu) - 0.5 * np.abs(x64) * 8 * 2.0**-24
    assert (gelu_error <= 0).all(), float(gelu_error.max())


def sums_module() -> hidet.ScriptModule:
    """The same sequential sum and exp twice, once strict and once fast-math, in one module."""
    with hidet.script_module() as module:

        @hidet.script
        def strict_sum(n: i32, x: f32[n], e: f32[n], out: f32[1]):  # noqa: F821
            attrs.func_kind = "public"
            total: f32 = 0.0
            for i in range(n):
                total += x[i]
                e[i] = math.exp(x[i])
            out[0] = total

        @hidet.script
        def fast_sum(n: i32, x: f32[n], e: f32[n], out: f32[1]):  # noqa: F821
            attrs.func_kind = "public"
            attrs.fast_math = True
            total: f32 = 0.0
            for i in range(n):
                total += x[i]
                e[i] = math.exp(x[i])
            out[0] = total

    return module


def strict_exp_module() -> hidet.ScriptModule:
    """The strict exp alone in its module: what the C library's expf gives."""
    with hidet.script_module() as module:

        @hidet.script
        def exp_only(n: i32, x: f32[n], e: f32[n]):  # noqa: F821
            attrs.func_kind = "public"
            for i in range(n):
                e[i] = math.exp(x[i])

    return module


_SUMS = sums_module()
_EXP = strict_exp_module()


def reorder_sensitive(n: int) -> np.ndarray:
    """Terms whose float32 sum depends on the order: a big term then many that each round away in sequence."""
    x = np.full(n, 0.75, dtype=np.float32)
    x[0] = 2.0**25  # 0.75 added to 2^25 rounds back to 2^25 (ulp 4), but sums of 0.75 first do not vanish
    return x


def run(function: object, x: np.ndarray) -> tuple[float, np.ndarray]:
    e, out = np.empty_like(x), np.zeros(1, np.float32)
    function(len(x), x, e, out)
    return float(out[0]), e


@SETTINGS
@given(n=st.integers(1, 300), seed=st.integers(0, 2**32 - 1))
def test_a_strict_function_beside_a_fast_one_keeps_its_exact_results(n: int, seed: int) -> None:
    x = np.random.default_rng(seed).uniform(-20, 20, n).astype(np.float32)
    total, e = run(_SUMS.build()["strict_sum"], x)
    assert total == np.add.accumulate(x, dtype=np.float32)[-1]  # the sequential float32 sum, bit for bit
    expected_e = np.empty_like(x)
    _EXP.build()(n, x, expected_e)
    np.testing.assert_array_equal(e, expected_e)  # the C library's expf, as in a module without fast math
    fast_total, fast_e = run(_SUMS.build()["fast_sum"], x)
    assert abs(fast_total - x.astype(np.float64).sum()) <= n * SUM_ULPS * np.abs(x).sum() * 2 + 1e-30
    np.testing.assert_allclose(fast_e, np.exp(x.astype(np.float64)), rtol=FUNCTION_RTOL, atol=1e-37)


def test_a_fast_function_reorders_its_sum_and_a_strict_one_does_not() -> None:
    x = reorder_sensitive(4099)
    sequential = float(np.add.accumulate(x, dtype=np.float32)[-1])
    assert sequential == 2.0**25  # each 0.75 rounds away
    strict, _ = run(_SUMS.build()["strict_sum"], x)
    fast, _ = run(_SUMS.build()["fast_sum"], x)
    assert strict == sequential
    assert fast != sequential  # summed in vector lanes first: the 0.75s add up before meeting 2^25
    assert abs(fast - float(x.astype(np.float64).sum())) < abs(sequential - float(x.astype(np.float64).sum()))


def test_the_build_option_makes_every_function_fast() -> None:
    x = reorder_sensitive(4099)
    strict, _ = run(_SUMS.build()["strict_sum"], x)
    optioned, _ = run(_SUMS.build(fast_math=True)["strict_sum"], x)
    fast, _ = run(_SUMS.build()["fast_sum"], x)
    assert strict == 2.0**25
    assert optioned == fast  # the same code as the function marked fast_math


def test_cuda_fast_math_calls_the_approximate_intrinsics_and_nvrtc_takes_the_option() -> None:
    module = _ROWS["cuda"]
    source = module.build().source()
    assert "__expf(" in source and "expf(" not in source.replace("__expf(", "")  # exp: the intrinsic only
    strict_cubin = rows_module("cuda").build().cubin  # an attribute only: the kernel's other code is IEEE
    fast_cubin = module.build(fast_math=True).cubin  # NVRTC --use_fast_math: division, sqrt, denormals too
    assert fast_cubin[:4] == b"\x7fELF" and fast_cubin != strict_cubin


def test_the_ir_shows_the_flags() -> None:
    text = str(_SUMS.ir_module())
    assert "def fast_sum(" in text and "# public, fast_math" in text
    assert "def strict_sum(" in text and text.count("fast_math") == 1


def exp2_max_module() -> hidet.ScriptModule:
    """A fast-math CUDA kernel: `y[i] = exp2(max(a[i], b[i]))`."""
    with hidet.script_module() as module:

        @hidet.script
        def exp2_of_max(n: i32, a: f32[n], b: f32[n], y: f32[n]):  # noqa: F821 (parameters)
            attrs.cuda.grid_dim = n
            attrs.cuda.block_dim = 1
            attrs.fast_math = True
            y[blockIdx.x] = math.exp2(max(a[blockIdx.x], b[blockIdx.x]))

    return module


@SETTINGS
@given(st.lists(st.tuples(st.floats(-160, 120, width=32), st.floats(-160, 120, width=32)), min_size=1, max_size=40))
def test_a_fast_cuda_exp2_is_one_approximate_instruction_and_max_one_fmax(pairs: list) -> None:
    module = exp2_max_module()
    source = module.build(target="cuda").source()
    assert "hl_ex2_approx(fmaxf(" in source  # ex2.approx.ftz on the GPU, and FMNMX for the max: no NaN to keep
    a, b = (np.array(column + (-np.inf,), np.float32) for column in zip(*pairs))
    y = np.empty_like(a)
    module.build(target="cuda")(len(a), a, b, y)
    expected = np.exp2(np.maximum(a, b).astype(np.float64))
    expected[expected < 2.0**-126] = 0.0  # below the normal range the instruction flushes to zero
    # the GPU's ex2.approx is within 2 ulp of 2^x (PTX ISA); the emulator's exp2f within 1
    np.testing.assert_allclose(y, expected, rtol=2 * 2.0**-23, atol=0)
