"""The CPU matmul template (packed panels, a register-blocked micro-kernel of SIMD vectors) against numpy.

Error bound, from the arithmetic: each entry of `c` is a sum of k products accumulated in f32, each step one
fused multiply-add (the product and the sum rounded once; in the path for products of fewer rows than a micro-tile,
a product and a sum rounded apart), in an order the blocking decides. Any such order is within k * u * (|a| @ |b|)
of the exact sum, to first order (u = 2^-24, f32's unit roundoff; the standard bound of a dot product of k terms,
gamma_k, whatever the order of the sums), which `assert_sum_close` checks with k + 1 to cover the second-order
term; an f16 result adds one rounding to f16 (2^-11 of the magnitude) and, below f16's normal range, its absolute
step.

Sizes of every kind run: 1, 3, 17, 255 and 1000 in every combination (one build with symbolic sizes serves them),
sizes known at build time, batches, half precision, bfloat16 pairs multiplied by AVX512-BF16's dot product, every
vector width the machine has (16, 8 and 4 lanes), small
blocks (many edge panels and tiles), the benchmark sizes, and a relu(x @ w + b) graph fused into one kernel. The
small cases run in the checking mode (every element access of the packing and the stores bounds-checked)."""

from __future__ import annotations

import itertools
from functools import cache

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, assert_sum_close, data, sizes

import stdlib_ops as ops
from hidet_lang.ir import expr as E
from hidet_lang.ir.functor import collect
from hidet_lang.testing import example_count
from stdlib_ops.templates.cpu_lanes import LANE_FEATURES, machine_lanes
from stdlib_ops.templates.kernels import matmul_cpu as matmul_cpu_module
from stdlib_ops.templates.kernels.matmul_cpu import DEFAULT_BLOCKS, matmul_cpu
from stdlib_ops.templates.params import ScheduleError

F16_UNIT = 2.0**-11
"""The relative rounding of a result stored as f16."""


def lanes_available(lanes: int) -> None:
    """Skip unless the machine's C compiler enables the instruction sets of the `lanes`-wide vectors."""
    from codegen.toolchain.cpu_features import machine_cpu_features

    missing = LANE_FEATURES[lanes] - machine_cpu_features()
    if missing:
        pytest.skip(f"{lanes} lanes need {', '.join(sorted(missing))}, which this machine's C compiler lacks")


LANES = [pytest.param(w, id=f"{w}-lanes") for w in sorted(DEFAULT_BLOCKS, reverse=True)]
SMALL_BLOCKS = {16: dict(mr=3, nr=16, mc=6, nc=32, kc=5), 8: dict(mr=2, nr=8, mc=4, nc=32, kc=3),
                4: dict(mr=5, nr=4, mc=5, nc=32, kc=7)}
"""Blocks far smaller than the defaults: many tiles, panels and k blocks, most of them at an edge (and several
micro-panels in a packed panel of b, which is 32 columns wide)."""


@cache
def built_matmul(batch, m, n, k, dtype: str = "float32", check: bool = True, **params: int):
    return matmul_cpu(batch, m, n, k, dtype, **params).build(check=check)


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, f16: bool = False) -> None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[-1]
    unit = 2.0**-24 + F16_UNIT / (k + 1) if f16 else 2.0**-24
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), k, unit, F16_HALF_SUBNORMAL_STEP if f16 else 0.0)


def run(module: object, a: np.ndarray, b: np.ndarray, *symbolic: int) -> np.ndarray:
    c = np.full((a.shape[0], a.shape[1], b.shape[2]), np.nan, a.dtype)
    module(*symbolic, a, b, c)
    return c


def uniform(seed: int, shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(dtype)


# ------------------------------------------------------------------------------------------- sizes and widths


EDGE_SIZES = (1, 3, 17, 255, 1000)


@pytest.mark.parametrize("m", EDGE_SIZES)
def test_every_combination_of_edge_sizes(m: int) -> None:
    """One build with symbolic sizes, every (m, n, k) of 1, 3, 17, 255 and 1000; checking mode where small."""
    fast = built_matmul(1, "m", "n", "k", check=False)
    checked = built_matmul(1, "m", "n", "k")
    for n, k in itertools.product(EDGE_SIZES, EDGE_SIZES):
        a, b = uniform(m + 7 * n, (1, m, k)), uniform(k + 11 * n, (1, k, n))
        module = checked if m * n * k <= 255**2 * 17 else fast
        check(run(module, a, b, m, k, n), a, b)  # the sizes in order of appearance: m, k, n


@pytest.mark.parametrize("lanes", LANES)
@settings(max_examples=example_count(8), deadline=None)
@given(st.data())
def test_every_vector_width_with_default_and_small_blocks(lanes: int, draw: st.DataObject) -> None:
    lanes_available(lanes)
    blocks = draw.draw(st.sampled_from([{}, SMALL_BLOCKS[lanes]]))
    batch, m, n, k = draw.draw(sizes(3)), draw.draw(sizes(300)), draw.draw(sizes(300)), draw.draw(sizes(300))
    a, b = data(draw.draw, (batch, m, k)), data(draw.draw, (batch, k, n))
    check(run(built_matmul("batch", "m", "n", "k", lanes=lanes, **blocks), a, b, batch, m, k, n), a, b)


@pytest.mark.parametrize("lanes", LANES)
def test_sizes_known_at_build_time_with_a_batch(lanes: int) -> None:
    lanes_available(lanes)
    a, b = uniform(1, (3, 33, 257)), uniform(2, (3, 257, 47))
    check(run(built_matmul(3, 33, 47, 257, lanes=lanes), a, b), a, b)


@settings(max_examples=example_count(6), deadline=None)
@given(st.data())
def test_half_precision_accumulates_in_f32(draw: st.DataObject) -> None:
    batch, m, n, k = draw.draw(sizes(2)), draw.draw(sizes(64)), draw.draw(sizes(80)), draw.draw(sizes(600))
    a, b = data(draw.draw, (batch, m, k), "float16"), data(draw.draw, (batch, k, n), "float16")
    c = run(built_matmul("batch", "m", "n", "k", "float16"), a, b, batch, m, k, n)
    assert c.dtype == np.float16
    check(c, a, b, f16=True)


BF16_UNIT = 2.0**-8
"""The relative rounding of a result stored as bfloat16."""


@settings(max_examples=example_count(8), deadline=None)
@given(st.data())
def test_bfloat16_pairs_accumulate_in_f32(draw: st.DataObject) -> None:
    # bf16 operands packed as they are, two steps of k a row, multiplied by f32x16_dot_bf16 (the pairs' exact
    # products added in f32, each sum rounded once): the f32 bound of k terms, then one rounding to bf16; odd k
    # ends in a pair half zero. Forced here, so that a machine with AVX-512F but not AVX512-BF16 runs it too (the
    # dot product's two fused multiply-adds); drawn data hold no subnormals, which AVX512-BF16 flushes.
    lanes_available(16)
    blocks = draw.draw(st.sampled_from([{}, {**SMALL_BLOCKS[16], "kc": 6}]))
    batch, m, n, k = draw.draw(sizes(2)), draw.draw(sizes(200)), draw.draw(sizes(200)), draw.draw(sizes(300))
    a, b = data(draw.draw, (batch, m, k), ml_dtypes.bfloat16), data(draw.draw, (batch, k, n), ml_dtypes.bfloat16)
    c = run(built_matmul("batch", "m", "n", "k", "bfloat16", bf16_pairs=True, **blocks), a, b, batch, m, k, n)
    assert c.dtype == ml_dtypes.bfloat16
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), k, 2.0**-24 + BF16_UNIT / (k + 1))


@pytest.mark.parametrize("pays", [True, False])
def test_bfloat16_takes_the_pairs_where_the_dot_product_outruns_the_fmas(monkeypatch: pytest.MonkeyPatch,
                                                                         pays: bool) -> None:
    import codegen.toolchain

    monkeypatch.setattr(codegen.toolchain, "machine_cpu_features",
                        lambda: frozenset({"sse", "avx", "fma", "avx512f", "avx512bf16"}))
    monkeypatch.setattr(matmul_cpu_module, "bf16_dot_pays", lambda: pays)
    ir = matmul_cpu(1, "m", "n", "k", "bfloat16").ir_module()
    dots = [e for f in ir.functions for e in collect(f.body, E.Intrinsic) if e.name == "f32x16_dot_bf16"]
    assert bool(dots) == pays
    f32_ir = matmul_cpu(1, "m", "n", "k", "float32").ir_module()
    assert not [e for f in f32_ir.functions for e in collect(f.body, E.Intrinsic) if e.name == "f32x16_dot_bf16"]


@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (64, 3072, 768), (512, 768, 3072)], ids=str)
def test_benchmark_sizes(shape: tuple[int, int, int]) -> None:
    m, n, k = shape
    a, b = uniform(m, (1, m, k)), uniform(n, (1, k, n))
    check(run(built_matmul(1, m, n, k, check=False), a, b), a, b)


def test_the_default_width_is_the_widest_the_machine_has() -> None:
    from codegen.toolchain.cpu_features import machine_cpu_features

    features = machine_cpu_features()
    expected = 16 if "avx512f" in features else 8 if {"avx", "fma"} <= features else 4 if "fma" in features else None
    assert machine_lanes() == expected
    if expected is not None:
        assert f"hl_f32x{expected}_fma" in matmul_cpu(1, 8, 8, 8).build().source()


# ------------------------------------------------------------------------------------------------ fusion


def test_relu_of_matmul_plus_bias_is_one_kernel() -> None:
    """The epilogue lands in the template's element stores: one kernel (on the constant weights' panels, packed when
    the graph is built), equal to numpy."""
    x, w, bias = uniform(1, (70, 300)), uniform(2, (300, 200)), uniform(3, (200,))
    xs = ops.symbol(["m", 300])
    compiled = ops.optimize(ops.trace_from(ops.relu(ops.matmul(xs, ops.asarray(w)) + ops.asarray(bias)),
                                           [xs])).build("cpu")
    assert compiled.kernels == ["matmul_packed* + add + relu"]
    got = compiled(x).numpy()
    exact = x.astype(np.float64) @ w + bias
    # the matmul's bound (as `check`), then one rounding of the bias addition; relu is exact and 1-Lipschitz
    bound = 301 * 2.0**-24 * (np.abs(x) @ np.abs(w)) + 2.0**-24 * np.abs(exact) + 1e-30
    assert (np.abs(got - np.maximum(exact, 0)) <= bound).all()


# ------------------------------------------------------------------------------------------------ refusals


def test_unsupported_parameters_are_refused() -> None:
    with pytest.raises(ScheduleError, match="dtype float64 is not supported"):
        matmul_cpu(1, 8, 8, 8, dtype="float64")
    with pytest.raises(ScheduleError, match="block sizes must be positive"):
        matmul_cpu(1, 8, 8, 8, lanes=8, kc=0)
    with pytest.raises(ScheduleError, match="lanes must be one of 16, 8, 4"):
        matmul_cpu(1, 8, 8, 8, lanes=32)
    with pytest.raises(ScheduleError, match=r"nr must be a multiple of lanes \(8\)"):
        matmul_cpu(1, 8, 8, 8, lanes=8, nr=12)
    with pytest.raises(ScheduleError, match="mc must be a multiple of mr"):
        matmul_cpu(1, 8, 8, 8, lanes=8, mr=6, mc=100)
    with pytest.raises(ScheduleError, match=r"nc must be a multiple of 48 \(nr, at least 32"):
        matmul_cpu(1, 8, 8, 8, lanes=8, nr=24, nc=72)
    with pytest.raises(ScheduleError, match="must fit in 2048 KB"):
        matmul_cpu(1, 8, 8, 8, lanes=8, mc=1200, nc=512)
    with pytest.raises(ValueError, match="symbolic size 'm' must be an identifier"):
        matmul_cpu(1, "2m", 8, 8)
    for params in ({"dtype": "float32"}, {"kc": 5}, {"lanes": 8}, {"packed": True}):
        with pytest.raises(ScheduleError, match="bf16_pairs takes bfloat16 operands, 16 lanes, an even kc"):
            matmul_cpu(1, 8, 8, 8, **{"dtype": "bfloat16", "lanes": 16, "bf16_pairs": True, **params})


def test_a_machine_without_vector_fma_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import codegen.toolchain

    monkeypatch.setattr(codegen.toolchain, "machine_cpu_features", lambda: frozenset({"sse", "avx"}))
    assert machine_lanes() is None
    with pytest.raises(ScheduleError, match="enables no vector fused multiply-add"):
        matmul_cpu(1, 8, 8, 8)
