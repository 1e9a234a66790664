"""The TF32 tensor-core matmul template (f32 inputs rounded to TF32, f32 accumulation) against the float64 product
of the TF32-rounded inputs, on the emulator's checking mode (no race, no out-of-bounds access, no uninitialized
shared-memory read, cp.async copies included): odd and aligned shapes (element copies and 16-byte cp_async
copies), batches, pipeline stages, both tiles, a fused epilogue; `hidet.option.allow_tf32`, off by default (f32
matmuls stay on the CUDA cores, exact to f32) and on (this template chosen, eager calls included); and its machine
code: NVRTC's cubin for sm_80 issues HMMA.1688.F32.TF32 and LDGSTS, with no local memory."""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import assert_sum_close, sizes

import hidet_lang as hidet
import stdlib_ops as ops
from codegen.toolchain.sass import find_tool
from hidet_lang.ir import expr as E
from hidet_lang.ir.functor import collect
from hidet_lang.target import Target
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.matmul_cuda_tf32 import matmul_cuda_tf32
from stdlib_ops.templates.params import ScheduleError
from stdlib_ops.templates.registry import choose_schedule

U = 2.0**-24  # f32's unit roundoff: the accumulation's
SMALL_TILE = {"block_m": 64, "block_n": 64, "warp_m": 32, "warp_n": 32}
SMALL = {"stages": 2, **SMALL_TILE}  # the small tile, 2 buffers (the default's 3: the large tile's and the adapter's)
CUOBJDUMP = find_tool("cuobjdump")


@cache
def built(*args, **kwargs):
    return matmul_cuda_tf32(*args, **kwargs).build(check=True)


@pytest.fixture
def tf32_allowed() -> Iterator[None]:
    """TF32 allowed for the test, forbidden again after it."""
    hidet.option.allow_tf32(True)
    yield
    hidet.option.allow_tf32(False)


def tf32(x: np.ndarray) -> np.ndarray:
    """Normal f32 values (and zeros) rounded to 11 significant bits, nearest with ties away from zero, in float64:
    the value cvt.rna.tf32.f32 gives."""
    x = x.astype(np.float64)
    exponent = np.floor(np.log2(np.where(x == 0, 1.0, np.abs(x))))
    scale = np.ldexp(1.0, (10 - exponent).astype(np.int64))
    return np.sign(x) * np.floor(np.abs(x) * scale + 0.5) / scale


def operands(seed: int, batch: int, m: int, n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """`a [batch, m, k]` and `b [batch, k, n]`, f32 uniform in [-1, 1]."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (batch, m, k)).astype(np.float32),
            rng.uniform(-1, 1, (batch, k, n)).astype(np.float32))


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    # the float64 product of the TF32-rounded inputs: their products are exact in f32 (11-bit significands), and
    # the sum of k of them in f32, in any order, is off by at most (k + 1) 2^-24 of the sum of their sizes
    a64, b64 = tf32(a), tf32(b)
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), a.shape[-1], U)


@settings(max_examples=example_count(5), deadline=None)
@given(st.data())
def test_symbolic_sizes_match_the_product_of_tf32_inputs(draw: st.DataObject) -> None:
    batch, m, n, k = draw.draw(sizes(2)), draw.draw(sizes(70)), draw.draw(sizes(70)), draw.draw(sizes(70))
    a, b = operands(draw.draw(st.integers(0, 2**32 - 1)), batch, m, n, k)
    c = np.full((batch, m, n), np.nan, np.float32)
    built("batch", "m", "n", "k", **SMALL)(batch, m, k, n, a, b, c)  # sizes in order of appearance
    check(c, a, b)


@pytest.mark.parametrize(("batch", "m", "n", "k"), [(2, 45, 29, 37), (1, 64, 72, 96), (3, 17, 8, 8), (1, 1, 1, 1),
                                                     (1, 600, 40, 12)])
def test_every_fragment_element_lands_in_its_place(batch: int, m: int, n: int, k: int) -> None:
    # small integers (exact in TF32, every product and sum exact): a misplaced fragment element or swizzled chunk
    # is an exact mismatch; 600 rows are 10 tile rows, a group of 8 and one of 2 in the blocks' order
    a = (np.arange(batch * m * k).reshape(batch, m, k) % 13 - 6).astype(np.float32)
    b = (np.arange(batch * k * n).reshape(batch, k, n) % 11 - 5).astype(np.float32)
    c = np.full((batch, m, n), np.nan, np.float32)
    built("batch", "m", "n", "k", **SMALL)(batch, m, k, n, a, b, c)
    np.testing.assert_array_equal(c, a @ b)


def test_inputs_are_rounded_to_nearest_not_truncated() -> None:
    # 1 + 3 * 2^-12 lies 3/4 of a TF32 step (2^-10) above 1: rounded to nearest it is 1 + 2^-10, truncated it
    # would be 1; times 1, summed over k = 4
    a = np.full((1, 16, 4), 1 + 3 * 2.0**-12, np.float32)
    b = np.ones((1, 4, 8), np.float32)
    c = np.full((1, 16, 8), np.nan, np.float32)
    built("batch", "m", "n", "k", **SMALL)(1, 16, 4, 8, a, b, c)
    np.testing.assert_array_equal(c, np.float32(4 * (1 + 2.0**-10)))


def test_the_pipeline_wraps_around_its_buffers() -> None:
    # 9 k steps of 32 (the last one partial) pass through both buffers of the ring several times
    a, b = operands(2, 1, 40, 24, 280)
    c = np.full((1, 40, 24), np.nan, np.float32)
    built("batch", "m", "n", "k", **SMALL)(1, 40, 280, 24, a, b, c)
    check(c, a, b)


def test_the_large_tile_with_its_16_byte_copies() -> None:
    a, b = operands(7, 1, 136, 132, 72)
    c = np.full((1, 136, 132), np.nan, np.float32)
    built(1, 136, 132, 72, block_m=128, block_n=128, warp_m=64, warp_n=32)(a, b, c)
    check(c, a, b)


def test_default_off_keeps_f32_matmuls_exact_on_the_cuda_cores() -> None:
    assert hidet.option.allow_tf32() is False
    # 1 + 2^-20 is no TF32 value: a TF32 product would give 1
    a = np.full((3, 5), 1 + 2.0**-20, np.float32)
    b = np.eye(5, 4, dtype=np.float32)
    got = ops.matmul(ops.asarray(a, device="cuda"), ops.asarray(b, device="cuda")).numpy()
    np.testing.assert_array_equal(got, a @ b)


def test_allowing_tf32_takes_effect_for_the_next_eager_call(tf32_allowed: None) -> None:
    a = np.full((3, 5), 1 + 2.0**-20, np.float32)
    b = np.eye(5, 4, dtype=np.float32)
    got = ops.matmul(ops.asarray(a, device="cuda"), ops.asarray(b, device="cuda")).numpy()
    np.testing.assert_array_equal(got, np.ones((3, 4), np.float32))  # the inputs rounded to TF32: 1
    hidet.option.allow_tf32(False)
    got = ops.matmul(ops.asarray(a, device="cuda"), ops.asarray(b, device="cuda")).numpy()
    np.testing.assert_array_equal(got, a @ b)  # f32 again
    hidet.option.allow_tf32(True)
    x, w = operands(5, 1, 3, 4, 5)  # the kernel of the first call, on other data
    got = ops.matmul(ops.asarray(x[0], device="cuda"), ops.asarray(w[0], device="cuda")).numpy()
    check(got[None], x, w)


def intrinsics_chosen(dtype: str, target: str) -> set[str]:
    """The intrinsics of the kernel chosen for a symbolic `[m, 24] @ [24, n]` matmul of `dtype` on `target`."""
    x, w = ops.symbol(["m", 24], dtype), ops.symbol([24, "n"], dtype)
    module = choose_schedule(ops.matmul(x, w).producer.task, Target.of(target)).module
    return {i.name for f in module.functions for i in collect(f.body, E.Intrinsic)}


def test_the_option_chooses_the_template_of_f32_matmuls_only() -> None:
    assert "mma_m16n8k8_tf32_f32" not in intrinsics_chosen("float32", "cuda")  # off by default: the CUDA cores
    hidet.option.allow_tf32(True)
    try:
        assert "mma_m16n8k8_tf32_f32" in intrinsics_chosen("float32", "cuda")
        assert "mma_m16n8k8_tf32_f32" in intrinsics_chosen("float32", "cuda:sm_80")
        assert "mma_m16n8k16_f16_f32" in intrinsics_chosen("float16", "cuda")  # half precision: unchanged
    finally:
        hidet.option.allow_tf32(False)
    assert "mma_m16n8k8_tf32_f32" not in intrinsics_chosen("float32", "cuda")


def test_the_option_refuses_what_is_not_a_flag() -> None:
    with pytest.raises(TypeError, match="allow_tf32 takes True or False"):
        hidet.option.allow_tf32(1)  # type: ignore[arg-type]
    assert hidet.option.allow_tf32() is False


def test_a_fused_scale_bias_and_relu_land_in_the_copies_and_stores_of_the_tf32_kernel(tf32_allowed: None) -> None:
    # rows of 36 and 20 f32s: the template copies both tiles with cp_async, which the scale prologue turns into
    # element copies of x * 0.5 (then rounded to TF32 in shared memory); bias and relu land in the stores
    x, w, bias = ops.symbol(["m", 36], "float32"), ops.symbol([36, 20], "float32"), ops.symbol([20], "float32")
    y = ops.relu(ops.matmul(x * 0.5, w) + bias)
    compiled = ops.optimize(ops.trace_from(y, [x, w, bias])).build("cuda")
    assert compiled.kernels == ["mul + matmul* + add + relu"]
    (module,) = compiled.ir_modules
    assert "mma_m16n8k8_tf32_f32" in {i.name for f in module.functions for i in collect(f.body, E.Intrinsic)}
    rng = np.random.default_rng(3)
    xs, ws, bs = (rng.uniform(-1, 1, s).astype(np.float32) for s in ((37, 36), (36, 20), (20,)))
    got = compiled(xs, ws, bs).numpy()
    # the TF32 product off by its f32 sum's rounding ((k + 1) 2^-24 of the magnitude), then the add rounds once
    # more (2^-24 of the magnitude with the bias); relu moves no value further from the exact one
    exact = tf32(xs * 0.5) @ tf32(ws) + bs  # x * 0.5 is exact
    magnitude = np.abs(tf32(xs * 0.5)) @ np.abs(tf32(ws)) + np.abs(bs)
    assert (np.abs(got - np.maximum(exact, 0)) <= 38 * U * magnitude).all()


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="4096 threads"):
        matmul_cuda_tf32(1, 8, 8, 8, block_m=256, block_n=256, warp_m=16, warp_n=32)
    with pytest.raises(ScheduleError, match="warp_n of 8"):
        matmul_cuda_tf32(1, 8, 8, 8, block_m=128, block_n=128, warp_m=64, warp_n=4)
    with pytest.raises(ScheduleError, match="block_n at least 32"):
        matmul_cuda_tf32(1, 8, 8, 8, block_m=64, block_n=16, warp_m=16, warp_n=8)
    with pytest.raises(ScheduleError, match="all four tile sizes"):
        matmul_cuda_tf32(1, 8, 8, 8, block_m=128)
    with pytest.raises(ScheduleError, match="stages"):
        matmul_cuda_tf32(1, 8, 8, 8, stages=1)


@pytest.mark.machine_code
@pytest.mark.skipif(CUOBJDUMP is None, reason="needs cuobjdump (pip package nvidia-cuda-cuobjdump)")
def test_machine_code_uses_the_tensor_cores_without_spills(tmp_path: Path) -> None:
    cubin = tmp_path / "matmul.cubin"
    cubin.write_bytes(matmul_cuda_tf32("batch", "m", "n", "k").build(target="cuda:sm_80").cubin)
    usage = subprocess.run([CUOBJDUMP, "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"LOCAL:0\b", usage) and not re.search(r"\b(LDL|STL)\b", sass), "local memory (spills)"
    mnemonics = re.findall(r"\b([A-Z]+[A-Z0-9]*(?:\.[A-Z0-9]+)*)\b", sass)
    # a step of 32 k unrolled: 4 k steps of the 64 x 32 warp tile's 4 x 4 mma tiles
    assert mnemonics.count("HMMA.1688.F32.TF32") == 4 * 4 * 4, sorted(set(mnemonics))
    assert any(m.startswith("LDGSTS") and m.endswith(".128") for m in mnemonics), sorted(set(mnemonics))


@pytest.mark.gpu
@pytest.mark.parametrize(("m", "n", "k"), [(1024, 1024, 1024), (1000, 1016, 999)])
def test_large_products_on_the_gpu(m: int, n: int, k: int) -> None:
    # the 128 x 128 tile and the 3-stage pipeline at a size the emulator is too slow for; the second shape has rows
    # of a that are not 16-byte multiples (element copies) and rows of b that are (cp_async)
    a, b = operands(11, 1, m, n, k)
    c = np.full((1, m, n), np.nan, np.float32)
    matmul_cuda_tf32(1, m, n, k).build()(a, b, c)
    check(c, a, b)
