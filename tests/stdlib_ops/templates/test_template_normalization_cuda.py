"""The row-wise CUDA templates (softmax, log-softmax, layer norm, RMS norm) against float64 numpy references, on
the emulator's checking mode (no race, no out-of-bounds access, no uninitialized shared-memory read). Errors
are bounded by what f32 arithmetic allows: a sum of n terms is off by about n * 2^-24 of the sum of their
magnitudes, and exp, log and rsqrt by a few ulps."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from functools import cache
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import SUBNORMAL, H, U, assert_softmax_close, data, sizes, softmax_reference

import stdlib_ops as ops
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.toolchain import nvrtc
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.sass import find_tool
from hidet_lang.passes.pipeline import lower
from hidet_lang.target import Target, TargetKind
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.normalization_cuda import (
    layer_norm_cuda,
    log_softmax_cuda,
    rms_norm_cuda,
    softmax_cuda,
)
from stdlib_ops.templates.registry import choose_schedule


@cache
def built(template, *args, **kwargs):
    return template(*args, **kwargs).build(check=True)


def rows_and_cols(draw: st.DataObject) -> tuple[int, int]:
    return draw.draw(sizes(40), label="rows"), draw.draw(sizes(300), label="cols")


@settings(max_examples=example_count(10), deadline=None)
@given(st.data(), st.sampled_from([1.0, 100.0]))
def test_softmax_matches_numpy(draw: st.DataObject, scale: float) -> None:
    rows, cols = rows_and_cols(draw)
    x = data(draw.draw, (rows, cols), scale=scale)  # exp(100) overflows f32: only a max-shifted softmax passes
    y = np.full_like(x, np.nan)
    built(softmax_cuda, "rows", "cols")(rows, cols, x, y)
    assert_softmax_close(y, x)


@settings(max_examples=example_count(8), deadline=None)
@given(st.data())
def test_log_softmax_matches_numpy(draw: st.DataObject) -> None:
    rows, cols = rows_and_cols(draw)
    x = data(draw.draw, (rows, cols), scale=10.0)
    y = np.full_like(x, np.nan)
    built(log_softmax_cuda, "rows", "cols")(rows, cols, x, y)
    _, shifted, log_total = softmax_reference(x)
    # x - max - log(sum): two roundings of the terms' size, and log of a sum off by cols * 2^-24 relative
    bound = 4 * U * (np.abs(x) + np.abs(shifted) + np.abs(log_total)) + (cols + 8) * U
    assert (np.abs(y - (shifted - log_total)) <= bound).all()


@settings(max_examples=example_count(8), deadline=None)
@given(st.data())
def test_layer_norm_matches_numpy(draw: st.DataObject) -> None:
    rows, cols = rows_and_cols(draw)
    x = data(draw.draw, (rows, cols), scale=3.0) + np.float32(draw.draw(st.sampled_from([0.0, 5.0])))
    weight, bias = data(draw.draw, (cols,)), data(draw.draw, (cols,))
    y = np.full_like(x, np.nan)
    built(layer_norm_cuda, "rows", "cols", eps=1e-5)(rows, cols, x, weight, bias, y)
    x64 = x.astype(np.float64)
    inv_std = 1 / np.sqrt(x64.var(axis=1, keepdims=True) + 1e-5)
    expected = (x64 - x64.mean(axis=1, keepdims=True)) * inv_std * weight + bias
    # the mean is off by cols * 2^-24 of max |x|; that error, and the variance's, are scaled by 1/std, and the
    # normalized value |x - mean| / std is at most sqrt(cols)
    magnitude = np.abs(x64).max(axis=1, keepdims=True) * inv_std * np.abs(weight) * (1 + np.sqrt(cols)) + np.abs(bias)
    assert (np.abs(y - expected) <= 8 * (cols + 2) * U * magnitude).all()


@settings(max_examples=example_count(8), deadline=None)
@given(st.data())
def test_rms_norm_matches_numpy(draw: st.DataObject) -> None:
    rows, cols = rows_and_cols(draw)
    x = data(draw.draw, (rows, cols), scale=3.0)
    weight = data(draw.draw, (cols,))
    y = np.full_like(x, np.nan)
    built(rms_norm_cuda, "rows", "cols", eps=1e-6)(rows, cols, x, weight, y)
    x64 = x.astype(np.float64)
    inv_rms = 1 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6)
    # the mean of squares is off by cols * 2^-24 relative (positive terms); rsqrt and two products add a few ulps
    np.testing.assert_allclose(y, x64 * inv_rms * weight, rtol=(cols + 8) * U, atol=SUBNORMAL)


@settings(max_examples=example_count(4), deadline=None)
@given(st.data())
def test_half_precision_softmax_and_rms_norm_compute_in_f32(draw: st.DataObject) -> None:
    rows = draw.draw(sizes(16))
    x = data(draw.draw, (rows, 33), "float16", scale=8.0)
    y = np.zeros_like(x)
    built(softmax_cuda, "rows", 33, "float16")(rows, x, y)
    # f32 arithmetic as above, then one rounding to f16 (2^-11 relative; subnormal halves have 2^-24 spacing)
    assert_softmax_close(y.astype(np.float32), x, extra_rtol=H, atol=2.0**-24)
    weight = data(draw.draw, (33,), "float16")
    built(rms_norm_cuda, "rows", 33, dtype="float16")(rows, x, weight, y)
    x64 = x.astype(np.float64)
    reference = x64 / np.sqrt((x64 * x64).mean(axis=1, keepdims=True) + 1e-6) * weight
    np.testing.assert_allclose(y, reference, rtol=H + 41 * U, atol=2.0**-24)


def test_one_thread_block_per_row_with_other_block_sizes() -> None:
    x = np.random.default_rng(1).standard_normal((3, 1000)).astype(np.float32)
    for threads in (32, 256):
        y = np.full_like(x, np.nan)
        built(softmax_cuda, 3, 1000, threads=threads)(x, y)
        assert_softmax_close(y, x)


CUOBJDUMP = find_tool("cuobjdump")


@pytest.mark.machine_code
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
def test_the_operators_softmax_computes_each_exponential_once(tmp_path: Path) -> None:
    # ops.softmax over rows of 4096 halves for an H100/H200: a block of 128 threads a row, 32 values a thread kept in
    # registers, so 32 exponentials a thread (MUFU.EX2), not 64 (one for the sum, one for the output)
    x = ops.symbol(["rows", 4096], "float16")
    choice = choose_schedule(ops.softmax(x, axis=-1).producer.task, Target.of("cuda:sm_90"))
    source = emit_cuda(plan_module(lower(choice.module, Target(TargetKind.CUDA, "sm_90"))))[0]
    cubin = tmp_path / "softmax.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(source, "sm_90", include_dirs=[str(INCLUDE_DIR)]))
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    assert len(re.findall(r"MUFU\.EX2", sass)) == 32
    assert not re.search(r"\b(LDL|STL)\b", sass)  # the row stays in registers: no local memory
