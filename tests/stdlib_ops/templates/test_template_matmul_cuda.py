"""The CUDA-core matmul template against numpy, on the emulator's checking mode (no race, no out-of-bounds access,
no uninitialized shared-memory read): symbolic sizes (one build serves every shape, 16-byte copies taken or not at
run time), sizes known at build time, every tile of the size-chosen defaults, three shared buffers, half-precision
inputs, and schedule parameters it refuses."""

from __future__ import annotations

import math
from functools import cache

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, assert_sum_close, data, sizes

import stdlib_ops as ops
from hidet_lang.ir.types import TensorType
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.matmul_cuda import (
    MATMUL_CUDA_SPACE,
    TILES,
    default_tiles,
    matmul_cuda,
)
from stdlib_ops.templates.params import ScheduleError


@cache
def symbolic_matmul(dtype: str = "float32", stages: int = 2):
    return matmul_cuda("batch", "m", "n", "k", dtype, stages=stages).build(check=True)


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, unit: float = 2.0**-24, absolute: float = 0.0) -> None:
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), a.shape[-1], unit, absolute)


@settings(max_examples=example_count(12), deadline=None)
@given(st.data())
def test_symbolic_sizes_match_numpy(draw: st.DataObject) -> None:
    # 128 x 128 tiles (the sizes are symbolic); k and n multiples of 4 half of the time: 16-byte copies
    batch, m, n, k = draw.draw(sizes(3)), draw.draw(sizes(160)), draw.draw(sizes(160)), draw.draw(sizes(96))
    if draw.draw(st.booleans()):
        n, k = -(-n // 4) * 4, -(-k // 4) * 4
    a = data(draw.draw, (batch, m, k))
    b = data(draw.draw, (batch, k, n))
    c = np.full((batch, m, n), np.nan, np.float32)
    symbolic_matmul()(batch, m, k, n, a, b, c)  # sizes in order of appearance in a, b
    check(c, a, b)


@settings(max_examples=example_count(4), deadline=None)
@given(st.data())
def test_three_shared_buffers_match_numpy(draw: st.DataObject) -> None:
    batch, m, n, k = 1, draw.draw(sizes(140)), draw.draw(sizes(140)), draw.draw(sizes(64))
    a = data(draw.draw, (batch, m, k))
    b = data(draw.draw, (batch, k, n))
    c = np.full((batch, m, n), np.nan, np.float32)
    symbolic_matmul(stages=3)(batch, m, k, n, a, b, c)
    check(c, a, b)


@cache
def constant_matmul(batch: int, m: int, n: int, k: int, tile: tuple[int, ...] | None, block_k: int = 8):
    tiles = {} if tile is None else dict(zip(("block_m", "block_n", "thread_m", "thread_n"), tile))
    return matmul_cuda(batch, m, n, k, **tiles, block_k=block_k).build(check=True)


@pytest.mark.parametrize(("shape", "tile", "block_k"), [
    ((2, 33, 7, 257), (32, 32, 2, 4), 16),  # k and n not multiples of 4: element copies only
    ((2, 36, 20, 24), (32, 32, 4, 4), 8),  # multiples of 4: 16-byte copies, known at build time
    ((3, 70, 68, 12), None, 8),  # the tile chosen by size
    ((1, 129, 131, 9), (64, 64, 4, 8), 16),
], ids=["unaligned", "aligned", "by-size", "64x64"])
def test_constant_sizes_match_numpy(shape: tuple[int, int, int, int], tile: tuple[int, ...] | None,
                                    block_k: int) -> None:
    batch, m, n, k = shape
    rng = np.random.default_rng(sum(shape))
    a = rng.uniform(-1, 1, (batch, m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (batch, k, n)).astype(np.float32)
    c = np.full((batch, m, n), np.nan, np.float32)
    constant_matmul(batch, m, n, k, tile, block_k)(a, b, c)
    check(c, a, b)


def test_default_tiles_are_the_largest_that_fill_the_gpu() -> None:
    assert default_tiles("batch", "m", "n") == TILES[0]
    assert default_tiles(1, 4096, 4096) == TILES[0]  # 1024 blocks of 128 x 128
    assert default_tiles(1, 512, 512) == TILES[2]  # 16 and 64 blocks of 128 and 64; 256 of 32 x 32
    assert default_tiles(1, 1024, 1024) == TILES[1]  # 64 of 128 x 128, 256 of 64 x 64
    assert default_tiles(4, 512, 512) == TILES[1]  # the batch entries count
    assert default_tiles(1, 1, 1) == TILES[-1]
    assert default_tiles(4096, 20, 20) == TILES[-1]  # many blocks either way: the tile that fits the product
    assert default_tiles(64, 200, 100) == TILES[1]  # 128 rows would fit the product, 128 columns would not
    for tile in TILES:
        assert (tile[0] // tile[2]) * (tile[1] // tile[3]) <= 256


def test_the_tuning_space_holds_the_size_chosen_default_and_explicit_tiles() -> None:
    points = MATMUL_CUDA_SPACE.points()
    assert points[0] == MATMUL_CUDA_SPACE.default and points[0]["block_m"] is None
    explicit = [p for p in points if p["block_m"] is not None]
    assert {(p["block_m"], p["block_n"], p["thread_m"], p["thread_n"]) for p in explicit} >= set(TILES)
    for point in points[::max(1, len(points) // 6)]:  # points across the space instantiate (parsing takes time)
        matmul_cuda(1, "m", "n", "k", **point)


@settings(max_examples=example_count(4), deadline=None)
@given(st.data(), st.just("float16"))
def test_half_inputs_accumulate_in_f32(draw: st.DataObject, dtype: str) -> None:
    batch, m, n, k = 1, draw.draw(sizes(40)), draw.draw(sizes(40)), draw.draw(sizes(96))
    a = data(draw.draw, (batch, m, k), dtype)
    b = data(draw.draw, (batch, k, n), dtype)
    c = np.zeros((batch, m, n), dtype)
    symbolic_matmul(dtype)(batch, m, k, n, a, b, c)
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    # products of halves (and of bf16s) are exact in f32 and summed in f32 (k * 2^-24); the result is rounded
    # once to the output's type (2^-11 of its magnitude for f16, 2^-8 for bf16, below that of the sum of
    # absolute values; f16's subnormal step where it is tiny)
    rounding = 2.0**-11 if dtype == "float16" else 2.0**-8
    check(c.astype(np.float32), a32, b32, unit=2.0**-24 + rounding / (k + 1), absolute=F16_HALF_SUBNORMAL_STEP)


@cache
def bias_gelu_graph(k: int, n: int, seed: int):
    rng = np.random.default_rng(seed)
    w = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    bias = rng.uniform(-1, 1, n).astype(np.float32)
    x = ops.symbol(["tokens", k], dtype="float32")
    graph = ops.optimize(ops.trace_from(ops.gelu(ops.matmul(x, ops.asarray(w)) + ops.asarray(bias)), inputs=[x]))
    return graph.build(target="cuda"), w, bias


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_a_bias_and_gelu_epilogue_fuse_into_one_kernel(draw: st.DataObject) -> None:
    k, n = 40, 36  # rows of 16 bytes: the copies of x and w are 16-byte cp_async through the views
    compiled, w, bias = bias_gelu_graph(k, n, 0)
    assert len(compiled.kernels) == 1
    x = data(draw.draw, (draw.draw(sizes(70)), k))
    y = compiled(x)
    y = (y[0] if isinstance(y, (list, tuple)) else y).numpy()
    z = x.astype(np.float64) @ w + bias
    expected = 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    # the matmul's f32 sum (k * 2^-24 of the sum of absolute values, gelu's slope is at most 1.13), the bias
    # added and gelu evaluated in f32 (a few ulps)
    magnitude = np.abs(x.astype(np.float64)) @ np.abs(w) + np.abs(bias)
    bound = 1.13 * (k + 2) * 2.0**-24 * magnitude + 8 * 2.0**-24 * np.abs(expected) + 2.0**-126
    assert (np.abs(y - expected) <= bound).all()


@settings(max_examples=example_count(3), deadline=None)
@given(st.data())
def test_batched_and_broadcast_operands_on_cuda(draw: st.DataObject) -> None:
    m, n, k = draw.draw(sizes(40)), draw.draw(sizes(40)), draw.draw(sizes(40))
    a = data(draw.draw, (2, 1, m, k))
    b = data(draw.draw, (3, k, n))
    c = ops.matmul(ops.asarray(a, device="cuda"), ops.asarray(b, device="cuda")).numpy()
    assert c.shape == (2, 3, m, n)
    a64, b64 = np.broadcast_to(a, (2, 3, m, k)).astype(np.float64), np.broadcast_to(b, (2, 3, k, n))
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), k)


def test_symbolic_sizes_are_parameters_in_order_of_appearance() -> None:
    kernel = matmul_cuda(4, "rows", "cols", "rows").ir_module().functions[-1]
    names = [p.name for p in kernel.params]
    assert names == ["rows", "cols", "a", "b", "c"]
    a_type = kernel.params[2].var_type
    assert isinstance(a_type, TensorType) and str(a_type.shape[0]) == "4"


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="all four tile sizes"):
        matmul_cuda(1, 8, 8, 8, block_m=64)
    with pytest.raises(ScheduleError, match="thread tiles must divide"):
        matmul_cuda(1, 8, 8, 8, block_m=30, block_n=32, thread_m=4, thread_n=4)
    with pytest.raises(ScheduleError, match="multiples of 4"):
        matmul_cuda(1, 8, 8, 8, block_m=32, block_n=32, thread_m=2, thread_n=2)
    with pytest.raises(ScheduleError, match="2048 threads"):
        matmul_cuda(1, 8, 8, 8, block_m=256, block_n=128, thread_m=2, thread_n=8)
    with pytest.raises(ScheduleError, match="shared memory"):
        matmul_cuda(1, 8, 8, 8, block_m=128, block_n=128, thread_m=8, thread_n=8, block_k=32, stages=3)
    with pytest.raises(ScheduleError, match="stages"):
        matmul_cuda(1, 8, 8, 8, stages=1)
    with pytest.raises(ScheduleError, match="dtype int32 is not supported"):
        matmul_cuda(1, 8, 8, 8, dtype="int32")
    with pytest.raises(ValueError, match="size 'k' must be positive"):
        matmul_cuda(1, 8, 8, 0)
