"""The CUDA row templates' 16-byte vector accesses (`row_chunks`): rows of whole aligned vectors, odd rows and
misaligned views (which take element accesses in the same kernel), f16 / bf16 / f32, against float64 numpy on the
emulator's checking mode (a misaligned vector access is an error there); fused prologues and epilogues over them;
and the SASS NVRTC builds for an H100/H200: 128-bit loads and stores, one exponential a value."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from collections import Counter
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import SUBNORMAL, U, assert_softmax_close, data

import stdlib_ops as ops
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.toolchain import nvrtc
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.sass import find_tool
from hidet_lang.ir.types import bfloat16, float16, float32
from hidet_lang.passes.pipeline import lower
from hidet_lang.target import Target, TargetKind
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.normalization_cuda import (
    MAX_CACHED,
    SHARED_ROW_BYTES,
    layer_norm_cuda,
    shared_row_bytes,
    softmax_cuda,
)
from stdlib_ops.templates.kernels.reduction_cuda import reduce_rows_cuda
from stdlib_ops.templates.kernels.row_chunks import RowChunks, vector_lanes
from stdlib_ops.templates.kernels.row_views import whole_vectors
from stdlib_ops.templates.registry import choose_schedule

DTYPES = {"float32": (np.float32, U), "float16": (np.float16, 2.0**-11), "bfloat16": (ml_dtypes.bfloat16, 2.0**-8)}
"""Each dtype's numpy type and unit roundoff (the error of rounding an f32 result to it)."""
THREADS = 64  # small blocks: a row of a few hundred columns already spans several chunks a thread
# rows of whole vectors for every dtype (multiples of 8), odd rows, and one past the registers of 64 threads
COLS = st.sampled_from([8, 64, 136, 1024, 7, 33, 257, 1030, THREADS * MAX_CACHED + 8, THREADS * MAX_CACHED + 3])


def placed(a: np.ndarray, misaligned: bool) -> np.ndarray:
    """A contiguous copy of `a` whose first element is 16-byte aligned, or (`misaligned`) is not."""
    buffer = np.empty(a.size + 64 // a.itemsize, a.dtype)
    skip = (-buffer.ctypes.data % 16) // a.itemsize + (1 if misaligned else 0)
    out = buffer[skip:skip + a.size].reshape(a.shape)
    out[...] = a
    assert (out.ctypes.data % 16 == 0) != misaligned
    return out


@cache
def built(template, dtype: str, **options):
    return template("rows", "cols", dtype=dtype, threads=THREADS, **options).build(check=True)


def case(draw: st.DataObject, dtype: str, scale: float) -> tuple[np.ndarray, bool]:
    rows = draw.draw(st.sampled_from([1, 3, 5]), label="rows")
    cols = draw.draw(COLS, label="cols")
    x = data(draw.draw, (rows, cols), scale=scale).astype(DTYPES[dtype][0])
    return x, draw.draw(st.booleans(), label="misaligned")


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@settings(max_examples=example_count(4), deadline=None)
@given(draw=st.data())
def test_softmax_rows_in_vectors_and_elements(dtype: str, draw: st.DataObject) -> None:
    x, misaligned = case(draw, dtype, 20.0)
    x, y = placed(x, misaligned), placed(np.full_like(x, np.nan), draw.draw(st.booleans(), label="y misaligned"))
    built(softmax_cuda, dtype)(*x.shape, x, y)
    # f32 arithmetic on the stored values, then one rounding to the dtype (half-precision subnormals: 2^-25)
    assert_softmax_close(y.astype(np.float32), x.astype(np.float32), extra_rtol=DTYPES[dtype][1],
                         atol=SUBNORMAL if dtype != "float16" else 2.0**-25)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@settings(max_examples=example_count(4), deadline=None)
@given(draw=st.data())
def test_layer_norm_rows_in_vectors_and_elements(dtype: str, draw: st.DataObject) -> None:
    x, misaligned = case(draw, dtype, 3.0)
    cols = x.shape[1]
    w, b = (placed(data(draw.draw, (cols,)).astype(x.dtype), draw.draw(st.booleans())) for _ in range(2))
    x, y = placed(x, misaligned), placed(np.zeros_like(x), False)
    built(layer_norm_cuda, dtype)(*x.shape, x, w, b, y)
    x64, w64, b64 = (t.astype(np.float64) for t in (x, w, b))
    inv_std = 1 / np.sqrt(x64.var(1, keepdims=True) + 1e-5)
    expected = (x64 - x64.mean(1, keepdims=True)) * inv_std * w64 + b64
    # f32 statistics off by cols * 2^-24 of max |x| (scaled by 1/std; normalized values reach sqrt(cols)), then
    # one rounding of the result to the dtype
    magnitude = np.abs(x64).max(1, keepdims=True) * inv_std * np.abs(w64) * (1 + np.sqrt(cols)) + np.abs(b64)
    bound = 8 * (cols + 2) * U * magnitude + DTYPES[dtype][1] * np.abs(expected) + 2.0**-24
    assert (np.abs(y.astype(np.float64) - expected) <= bound).all()


@pytest.mark.parametrize(("kind", "dtype"), [("var", "float16"), ("argmax", "bfloat16"), ("max", "float32")])
@settings(max_examples=example_count(4), deadline=None)
@given(draw=st.data())
def test_row_reductions_in_vectors_and_elements(kind: str, dtype: str, draw: st.DataObject) -> None:
    x, misaligned = case(draw, dtype, 4.0)
    x = placed(x, misaligned)
    reduce = reduce_rows_cuda("outer", "extent", kind, dtype, threads=THREADS).build(check=True)
    y = np.zeros(x.shape[0], np.int64 if kind == "argmax" else x.dtype)
    reduce(*x.shape, x, y)
    x64 = x.astype(np.float64)
    if kind == "argmax":
        np.testing.assert_array_equal(y, x64.argmax(1))
    elif kind == "max":
        np.testing.assert_array_equal(y, x.max(1))
    else:
        # an f32 mean and sum of squares off by cols * 2^-24 of their terms' magnitudes, then an f16 rounding
        variance = x64.var(1)
        bound = 4 * (x.shape[1] + 2) * U * (np.abs(x64).max(1) ** 2) + 2.0**-11 * variance + 2.0**-24
        assert (np.abs(y.astype(np.float64) - variance) <= bound).all()


def test_the_vector_layout_of_a_row() -> None:
    assert [vector_lanes(t) for t in (float16, bfloat16, float32)] == [8, 8, 4]
    chunks = RowChunks(float16, 32)
    assert chunks.lanes == 8 and chunks.chunks(32) == 4 and chunks.chunks(3) == 1
    assert RowChunks(float16, 32, vectorize=False).lanes == 1
    assert RowChunks(float16, 32, vectorize=False).vectors(64, ()) is False
    # one axis, or an innermost axis of whole vectors; not [.., 6, 4] halves (a fused lane would index past 4)
    assert whole_vectors((100,), "float16") and whole_vectors((3, 16), "float16") and whole_vectors((3, 4), "float32")
    assert not whole_vectors((6, 4), "float16") and not whole_vectors((6, 4), "bfloat16")


def test_a_long_softmax_row_keeps_its_exponentials_in_shared_memory_where_they_fit() -> None:
    span = THREADS * 8  # a round of f16 chunks
    capacity = THREADS * MAX_CACHED
    assert shared_row_bytes(capacity, capacity, span) == 0  # in registers
    assert shared_row_bytes(capacity + 1, capacity, span) == -(-(capacity + 1) // span) * span * 4
    assert shared_row_bytes(SHARED_ROW_BYTES // 4 + 1, capacity, span) == 0  # too long: computed again
    rng = np.random.default_rng(5)
    softmax = built(softmax_cuda, "float16")
    for cols in (capacity + 8, capacity + 3, SHARED_ROW_BYTES // 4 + 8):
        x = (rng.standard_normal((2, cols)) * 4).astype(np.float16)
        y = np.full_like(x, np.nan)
        softmax(*x.shape, x, y)
        assert_softmax_close(y.astype(np.float32), x.astype(np.float32), extra_rtol=2.0**-11, atol=2.0**-25)


def test_fused_prologue_and_epilogue_over_vector_rows() -> None:
    # f16 rows of 64 (whole vectors): the prologue's input is loaded in vectors, the epilogue stores by element
    xs = ops.symbol([5, 64], "float16")
    compiled = ops.optimize(ops.trace_from(ops.relu(ops.softmax(xs * 2.0, axis=-1)) + 1.0, [xs])).build("cuda")
    assert len(compiled.kernels) == 1
    x = np.random.default_rng(8).uniform(-3, 3, (5, 64)).astype(np.float16)
    z = x.astype(np.float64) * 2
    expected = np.exp(z - z.max(1, keepdims=True))
    expected = expected / expected.sum(1, keepdims=True) + 1
    np.testing.assert_allclose(compiled(x).numpy().astype(np.float64), expected, rtol=2 * 2.0**-11)


def test_a_norm_over_axes_whose_innermost_is_not_whole_vectors_fuses_by_element() -> None:
    # [6, 4] halves: 24 columns (whole vectors) over an innermost axis of 4, so the template takes no vectors and the
    # fused epilogue stores each element where it lies (the emulator's checking mode reports any access past it)
    xs = ops.symbol([3, 6, 4], "float16")
    compiled = ops.optimize(ops.trace_from(ops.layer_norm(xs, [6, 4]) * 2.0, [xs])).build("cuda")
    assert len(compiled.kernels) == 1
    x = np.random.default_rng(9).uniform(-2, 2, (3, 6, 4)).astype(np.float16)
    flat = x.reshape(3, 24).astype(np.float64)
    expected = (flat - flat.mean(1, keepdims=True)) / np.sqrt(flat.var(1, keepdims=True) + 1e-5) * 2
    np.testing.assert_allclose(compiled(x).numpy().reshape(3, 24).astype(np.float64), expected, rtol=2.0**-9,
                               atol=2.0**-10)


CUOBJDUMP = find_tool("cuobjdump")


def sass_counts(tensor: ops.Tensor, tmp_path: Path) -> Counter:
    """The global loads and stores, exponentials and local-memory accesses in the SASS of the kernel the library
    chooses for `tensor`'s operator on an H100/H200 (sm_90)."""
    choice = choose_schedule(tensor.producer.task, Target.of("cuda:sm_90"))
    source = emit_cuda(plan_module(lower(choice.module, Target(TargetKind.CUDA, "sm_90"))))[0]
    cubin = tmp_path / "rows.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(source, "sm_90", include_dirs=[str(INCLUDE_DIR)]))
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    return Counter(re.findall(r"\b(LDG\.E(?:\.\w+)?|STG\.E(?:\.\w+)?|MUFU\.EX2|LDL|STL)\b", sass))


needs_nvrtc = pytest.mark.skipif(CUOBJDUMP is None or importlib.util.find_spec("cuda") is None,
                                 reason="cuobjdump (pip nvidia-cuda-cuobjdump) or NVRTC (pip cuda-python) is missing")


@pytest.mark.machine_code
@needs_nvrtc
@pytest.mark.parametrize("op", ["softmax", "layer_norm", "rms_norm"])
def test_half_precision_rows_load_and_store_128_bits(op: str, tmp_path: Path) -> None:
    # [rows, 4096] halves: a block of 128 threads a row, 4 chunks of 8 halves a thread: 4 LDG.E.128 for the row
    # (and 4 a parameter), 4 STG.E.128; the element accesses of the same kernel serve odd or misaligned rows
    x, w, b = ops.symbol(["rows", 4096], "float16"), ops.symbol([4096], "float16"), ops.symbol([4096], "float16")
    tensor = {"softmax": lambda: ops.softmax(x, axis=-1), "layer_norm": lambda: ops.layer_norm(x, [4096], w, b),
              "rms_norm": lambda: ops.rms_norm(x, [4096], w)}[op]()
    counts = sass_counts(tensor, tmp_path)
    params = {"softmax": 0, "layer_norm": 2, "rms_norm": 1}[op]
    assert counts["LDG.E.128"] == 4 * (1 + params) and counts["STG.E.128"] == 4
    assert counts["LDL"] == counts["STL"] == 0  # the row stays in registers
    if op == "softmax":
        assert counts["MUFU.EX2"] == 32  # one exponential for each of a thread's 32 values, kept for the output


@pytest.mark.machine_code
@needs_nvrtc
def test_a_half_precision_row_reduction_loads_128_bits(tmp_path: Path) -> None:
    # sum over rows of 4096 halves: 256 threads a row, 2 chunks of 8 halves a thread (the loop unrolled), each one
    # LDG.E.128; 8 element loads a chunk serve the rows that are not aligned vectors
    counts = sass_counts(ops.sum(ops.symbol(["rows", 4096], "float16"), axis=-1), tmp_path)
    assert counts["LDG.E.128"] == 2 and counts["LDG.E.U16"] == 16
