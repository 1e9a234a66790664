"""The tensor-core matmul template (f16 and bf16 inputs, f32 accumulation) against numpy, on the emulator's checking
mode (no race, no out-of-bounds access, no uninitialized shared-memory read, ldmatrix rows and cp.async copies
included): odd and aligned shapes (the element copies and the 16-byte cp_async copies), batches, several pipeline
stages, both tile shapes, a fused epilogue; and its machine code: NVRTC's cubins for sm_80 and sm_90 issue HMMA,
LDSM (.MT88 for the transposed B fragments) and LDGSTS, with no local memory and few enough registers for two
blocks of 256 threads an SM. Every module built here is also compiled by NVRTC for sm_80 and sm_90a (the suite's
conftest)."""

from __future__ import annotations

import math
import re
import subprocess
from functools import cache
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from template_checks import F16_HALF_SUBNORMAL_STEP, assert_sum_close, sizes

import stdlib_ops as ops
from codegen.toolchain.sass import find_tool
from hidet_lang.ir import expr as E
from hidet_lang.ir.functor import collect
from hidet_lang.testing import example_count
from stdlib_ops.templates.kernels.matmul_cuda_f16_mma import TILES, default_tiles, matmul_cuda_f16_mma
from stdlib_ops.templates.params import ScheduleError

U = 2.0**-24  # f32's unit roundoff
ROUNDING = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": U}  # unit roundoff of each output type
NUMPY = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
SMALL_TILE = dict(zip(("block_m", "block_n", "warp_m", "warp_n"), TILES[-1]))


@cache
def built(*args, **kwargs):
    return matmul_cuda_f16_mma(*args, **kwargs).build(check=True)


def operands(seed: int, batch: int, m: int, n: int, k: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """`a [batch, m, k]` and `b [batch, k, n]` uniform in [-1, 1], rounded to `dtype`."""
    rng = np.random.default_rng(seed)
    return (rng.uniform(-1, 1, (batch, m, k)).astype(NUMPY[dtype]),
            rng.uniform(-1, 1, (batch, k, n)).astype(NUMPY[dtype]))


def check(c: np.ndarray, a: np.ndarray, b: np.ndarray, out_dtype: str) -> None:
    # the float64 product of the rounded inputs: their products are exact in f32; the sum of k of them in f32 is
    # off by at most (k + 1) 2^-24 of the sum of their sizes, and the result is rounded once to the output type
    # (its unit roundoff of that sum; an f16 result below f16's normal range by half its spacing there)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    k = a.shape[-1]
    absolute = F16_HALF_SUBNORMAL_STEP if out_dtype == "float16" else 0.0
    assert_sum_close(c, a64 @ b64, np.abs(a64) @ np.abs(b64), k, U + ROUNDING[out_dtype] / (k + 1), absolute)


@settings(max_examples=example_count(6), deadline=None)
@given(st.data(), st.sampled_from([("float16", "float16"), ("bfloat16", "bfloat16"), ("float16", "float32"),
                                   ("bfloat16", "float32")]))
def test_symbolic_sizes_match_numpy(draw: st.DataObject, dtypes: tuple[str, str]) -> None:
    # symbolic sizes: the 128 x 128 tile of 8 warps; rows of a and b 16-byte multiples or not, as drawn
    dtype, out_dtype = dtypes
    batch, m, n, k = draw.draw(sizes(2)), draw.draw(sizes(140)), draw.draw(sizes(140)), draw.draw(sizes(80))
    a, b = operands(draw.draw(st.integers(0, 2**32 - 1)), batch, m, n, k, dtype)
    c = np.full((batch, m, n), np.nan, NUMPY[out_dtype])
    built("batch", "m", "n", "k", out_dtype, dtype=dtype)(batch, m, k, n, a, b, c)  # sizes in order of appearance
    check(c, a, b, out_dtype)


@pytest.mark.parametrize(("batch", "m", "n", "k", "dtype"), [(2, 45, 29, 37, "float16"), (1, 64, 72, 96, "bfloat16"),
                                                       (3, 17, 8, 8, "bfloat16"), (1, 1, 1, 1, "float16"),
                                                       (2, 600, 136, 24, "float16")])
def test_every_fragment_element_lands_in_its_place(batch: int, m: int, n: int, k: int, dtype: str) -> None:
    # small integers: every product and sum is exact, so a misplaced fragment or swizzled chunk is an exact mismatch;
    # 600 rows are 10 tile rows, a group of 8 and one of 2 in the blocks' order
    a = (np.arange(batch * m * k).reshape(batch, m, k) % 13 - 6).astype(NUMPY[dtype])
    b = (np.arange(batch * k * n).reshape(batch, k, n) % 11 - 5).astype(NUMPY[dtype])
    c = np.full((batch, m, n), np.nan, np.float32)
    built(batch, m, n, k, "float32", dtype=dtype)(a, b, c)  # sizes known: the 64 x 64 tile of 4 warps
    np.testing.assert_array_equal(c, a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("stages", [2, 3])
def test_the_pipeline_wraps_around_its_buffers(stages: int) -> None:
    # 9 k steps of 32 (the last one partial) pass through every buffer of the ring several times
    a, b = operands(stages, 1, 40, 24, 280, "float16")
    c = np.full((1, 40, 24), np.nan, np.float32)
    built(1, 40, 24, 280, "float32", stages=stages, **SMALL_TILE)(a, b, c)
    check(c, a, b, "float32")


def test_the_large_tile_with_its_16_byte_copies() -> None:
    a, b = operands(7, 1, 136, 144, 72, "bfloat16")
    c = np.full((1, 136, 144), np.nan, ml_dtypes.bfloat16)
    built(1, 136, 144, 72, "bfloat16", block_m=128, block_n=128, warp_m=64, warp_n=32)(a, b, c)
    check(c, a, b, "bfloat16")


def test_a_fused_scale_bias_and_gelu_land_in_the_copies_and_stores_of_the_tensor_core_kernel() -> None:
    # rows of 64 and 48 halves: the template copies both tiles with cp_async, which the scale prologue turns into
    # element copies of x * 0.5; the bias and gelu epilogue lands in the stores of the accumulators
    x, w, bias = ops.symbol(["m", 64], "float16"), ops.symbol([64, 48], "float16"), ops.symbol([48], "float16")
    y = ops.gelu(ops.matmul(x * 0.5, w) + bias)
    compiled = ops.optimize(ops.trace_from(y, [x, w, bias])).build("cuda")
    assert compiled.kernels == ["mul + matmul* + add + gelu"]
    (module,) = compiled.ir_modules
    assert "mma_m16n8k16_f16_f32" in {i.name for f in module.functions for i in collect(f.body, E.Intrinsic)}
    rng = np.random.default_rng(3)
    xs, ws, bs = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((37, 64), (64, 48), (48,)))
    got = compiled(xs, ws, bs).numpy().astype(np.float64)
    exact = (xs.astype(np.float64) * 0.5) @ ws.astype(np.float64) + bs
    gelu = 0.5 * exact * (1 + np.vectorize(math.erf)(exact / np.sqrt(2)))
    # x * 0.5 is exact but where it falls below f16's normal range (half a spacing there, 2^-25, times |w|);
    # the product rounds to f16 before the add (2^-11 of |x| |w|, which gelu's slope, at most 1.13, carries), the
    # add and gelu round to f16 again (2^-11 each, of a value at most 64): a few f16 roundings of the magnitude
    magnitude = np.abs(xs.astype(np.float64)) @ np.abs(ws.astype(np.float64)) + np.abs(bs)
    assert (np.abs(got - gelu) <= 4 * 2.0**-11 * (magnitude + 1)).all()


def test_tiles_follow_the_problem_size() -> None:
    assert default_tiles(1, 4096, 4096) == (128, 128, 64, 32)
    assert default_tiles(1, 256, 256) == (64, 64, 32, 32)  # 4 large tiles would leave most SMs idle
    assert default_tiles(64, 256, 256) == (128, 128, 64, 32)
    assert default_tiles("batch", 256, 256) == (128, 128, 64, 32)
    # many batch entries of small products: the tile that fits them, not one of idle rows and columns
    assert default_tiles(65537, 1, 1) == default_tiles(512, 48, 200) == (64, 64, 32, 32)
    assert default_tiles("batch", 8, "n") == (64, 64, 32, 32)


def test_schedule_parameters_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="4096 threads"):
        matmul_cuda_f16_mma(1, 8, 8, 8, block_m=256, block_n=256, warp_m=16, warp_n=32)
    with pytest.raises(ScheduleError, match="multiples of 16"):
        matmul_cuda_f16_mma(1, 8, 8, 8, block_m=128, block_n=128, warp_m=64, warp_n=8)
    with pytest.raises(ScheduleError, match="all four tile sizes"):
        matmul_cuda_f16_mma(1, 8, 8, 8, block_m=128)
    with pytest.raises(ScheduleError, match="dtype float32 is not supported"):
        matmul_cuda_f16_mma(1, 8, 8, 8, dtype="float32")
    with pytest.raises(ScheduleError, match="stages"):
        matmul_cuda_f16_mma(1, 8, 8, 8, stages=1)


def cuobjdump() -> str | None:
    """The cuobjdump of the pip package nvidia-cuda-cuobjdump (or one on the PATH), if there is one."""
    return find_tool("cuobjdump")


@pytest.mark.machine_code
@pytest.mark.skipif(cuobjdump() is None, reason="needs cuobjdump (pip package nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize(("arch", "dtype"), [("sm_80", "float16"), ("sm_90", "bfloat16")])
def test_machine_code_uses_the_tensor_cores_without_spills(arch: str, dtype: str, tmp_path: Path) -> None:
    cubin = tmp_path / "matmul.cubin"
    cubin.write_bytes(matmul_cuda_f16_mma("batch", "m", "n", "k", dtype).build(target=f"cuda:{arch}").cubin)
    usage = subprocess.run([cuobjdump(), "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
    sass = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    registers = int(re.search(r"REG:(\d+)", usage).group(1))
    assert registers <= 128, usage  # 2 blocks of 256 threads an SM need at most 128 (65536 registers an SM)
    assert re.search(r"LOCAL:0\b", usage) and not re.search(r"\b(LDL|STL)\b", sass), "local memory (spills)"
    mnemonics = set(re.findall(r"\b([A-Z]+[A-Z0-9]*(?:\.[A-Z0-9]+)*)\b", sass))
    assert "HMMA.16816.F32" + (".BF16" if dtype == "bfloat16" else "") in mnemonics, sorted(mnemonics)
    assert {"LDSM.16.M88.4", "LDSM.16.MT88.4"} <= mnemonics, sorted(mnemonics)
    assert any(m.startswith("LDGSTS") and m.endswith(".128") for m in mnemonics), sorted(mnemonics)


@pytest.mark.gpu
@pytest.mark.parametrize(("m", "n", "k", "dtype"), [(1024, 1024, 1024, "float16"), (1000, 1016, 999, "bfloat16")])
def test_large_products_on_the_gpu(m: int, n: int, k: int, dtype: str) -> None:
    # the 128 x 128 tile and the 4-stage pipeline at a size the emulator is too slow for; the second shape has rows
    # of a that are not 16-byte multiples (element copies) and rows of b that are (cp_async)
    a, b = operands(11, 1, m, n, k, dtype)
    c = np.full((1, m, n), np.nan, np.float32)
    matmul_cuda_f16_mma(1, m, n, k, "float32", dtype=dtype).build()(a, b, c)
    check(c, a, b, "float32")


@pytest.mark.machine_code
@pytest.mark.skipif(cuobjdump() is None, reason="needs cuobjdump (pip package nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize("out_dtype", ["float16", "float32"])
def test_the_epilogue_stores_128_bit_vectors(out_dtype: str, tmp_path: Path) -> None:
    # a 64 x 32 warp tile: 8 vectors of 8 f16 (16 of 4 f32) a lane, STG.E.128 in the loop over them; the element
    # stores left are those of the vectors at an edge (8 f16, or twice 4 f32 where the loop is unrolled twice), not
    # the 64 cells a lane holds
    cubin = tmp_path / "matmul.cubin"
    cubin.write_bytes(matmul_cuda_f16_mma(1, 4096, 4096, 4096, out_dtype).build(target="cuda:sm_80").cubin)
    sass = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    stores = re.findall(r"\bSTG\.E(?:\.[A-Z0-9]+)*\b", sass)
    assert "STG.E.128" in stores, stores
    assert len([s for s in stores if s != "STG.E.128"]) <= 8, stores
    assert not re.search(r"\b(LDL|STL)\b", sass), "local memory (spills)"


@pytest.mark.machine_code
@pytest.mark.skipif(cuobjdump() is None, reason="needs cuobjdump (pip package nvidia-cuda-cuobjdump)")
@pytest.mark.parametrize(("block_m", "block_n", "warp_m", "warp_n", "stages"),
                         [(128, 256, 64, 32, 4), (256, 128, 64, 32, 3), (128, 256, 64, 64, 3), (256, 128, 64, 64, 4)])
def test_the_wide_tuning_points_compile_without_spills(block_m: int, block_n: int, warp_m: int, warp_n: int,
                                                       stages: int, tmp_path: Path) -> None:
    # 16 warps of 64 x 32, or 8 of 64 x 64 (128 accumulators a thread, one block an SM): HMMA a k step of 32 for
    # each of a warp's mma tiles, no local memory
    cubin = tmp_path / "matmul.cubin"
    module = matmul_cuda_f16_mma(1, 4096, 4096, 4096, block_m=block_m, block_n=block_n, warp_m=warp_m,
                                 warp_n=warp_n, stages=stages)
    cubin.write_bytes(module.build(target="cuda:sm_80").cubin)
    usage = subprocess.run([cuobjdump(), "-res-usage", str(cubin)], capture_output=True, text=True, check=True).stdout
    sass = subprocess.run([cuobjdump(), "-sass", str(cubin)], capture_output=True, text=True, check=True).stdout
    assert re.search(r"LOCAL:0\b", usage) and not re.search(r"\b(LDL|STL)\b", sass), "local memory (spills)"
    assert len(re.findall(r"\bHMMA\.16816\.F32\b", sass)) == 2 * (warp_m // 16) * (warp_n // 8)
    assert "STG.E.128" in sass


def test_a_tile_whose_stages_exceed_an_sm_80_blocks_shared_memory_is_refused() -> None:
    # 256 x 256 tiles, 6 stages: 6 x 32 KB = 192 KB, above the 163 KB an sm_80 block may have
    with pytest.raises(ScheduleError, match=r"196608 bytes of shared memory \(at most 163 KB\)"):
        matmul_cuda_f16_mma(1, 512, 512, 512, block_m=256, block_n=256, warp_m=64, warp_n=64, stages=6)
