"""The library's CUDA templates profiled on the emulator (`hidet.cuda.profile`): their swizzled shared tiles are read
without bank conflicts (ldmatrix, warpgroup MMA) and written whole by TMA, and element-wise kernels move no more
global sectors than the bytes they ask for. A regression in a template's swizzle or access pattern fails here, with
no GPU."""

from __future__ import annotations

import numpy as np
import pytest

import hidet_lang as hidet
from stdlib_ops.templates.kernels.matmul_cuda_sm90 import matmul_cuda_sm90

pytestmark = pytest.mark.filterwarnings("ignore")
ops = hidet.ops


def _lines(p, instruction: str, space: str) -> list:
    found = [r for r in p.lines() if instruction in r.instructions and r.space == space]
    assert found, (instruction, space, p)
    return found


def test_elementwise_f32_moves_what_it_asks_for():
    rng = np.random.default_rng(0)
    x, y = (ops.asarray(rng.random((64, 256), dtype=np.float32), device="cuda") for _ in range(2))
    with hidet.cuda.profile() as p:
        z = ops.relu(x + y)
    np.testing.assert_allclose(z.numpy(), np.maximum(x.numpy() + y.numpy(), 0))
    records = [r for r in p.lines() if r.space == "global"]
    assert {r.kind for r in records} == {"load", "store"}
    for r in records:  # every lane's f32s are consecutive: 4 sectors a request for each 4 bytes a lane
        lane_bytes = r.bytes_requested / (32 * r.requests)
        assert r.waste == 1 and r.per_request == 32 * lane_bytes / 32
    kernel = p.kernels()[0]
    assert kernel.distinct_sectors * 32 == 3 * 64 * 256 * 4  # two inputs and the output, once each
    # the rule-based scheduler's kernels have no DSL lines: their records name the kernel and the IR statement
    names = {k.name for k in p.kernels()}
    assert all(r.file is None and r.where == r.function and r.function in names and "copy_vector" in r.text
               for r in records)


def test_mma_matmul_reads_its_swizzled_tiles_without_conflicts():
    rng = np.random.default_rng(1)
    a = ops.asarray(rng.random((128, 128)).astype(np.float16), device="cuda")
    b = ops.asarray(rng.random((128, 128)).astype(np.float16), device="cuda")
    with hidet.cuda.profile() as p:
        c = ops.matmul(a, b)
    np.testing.assert_allclose(c.numpy(), a.numpy().astype(np.float32) @ b.numpy().astype(np.float32), rtol=2e-2)
    for r in _lines(p, "ldmatrix", "shared"):
        assert r.ideal_per_request == 4 and r.waste == 1, r  # 4 phases of 8 rows, one wavefront each
    for r in _lines(p, "cp.async", "shared"):
        assert r.waste == 1, r
    for r in _lines(p, "cp.async", "global"):
        assert r.per_request == 16 and r.waste == 1, r  # 32 lanes x 16 bytes, consecutive
    kernel = p.kernels()[0]
    assert kernel.tensor_flops == 2 * 128 * 128 * 128
    assert kernel.bound().seconds > 0


def test_hopper_matmul_tma_and_wgmma_without_conflicts():
    module = matmul_cuda_sm90("batch", "m", "n", "k", "float32", consumers=1, block_n=64, stages=2).build(
        target="cuda:sm_90a")
    rng = np.random.default_rng(2)
    a = rng.uniform(-1, 1, (1, 128, 64)).astype(np.float16)
    b = rng.uniform(-1, 1, (1, 64, 128)).astype(np.float16)
    with hidet.cuda.profile() as p:
        module(1, 128, 64, 128, a, b, np.zeros((1, 128, 128), np.float32))
    wgmma = _lines(p, "wgmma", "shared")
    assert all(r.waste == 1 for r in wgmma), wgmma  # each core matrix of both operands in one wavefront
    tma = _lines(p, "tma", "shared")
    assert all(r.waste == 1 and r.kind == "store" for r in tma)
    loads = _lines(p, "tma", "global")
    # 2 x 2 blocks of 64 x 64, each reading its 64 x 64 tiles of a and b (f16) once
    assert sum(r.bytes_requested for r in loads) == 4 * (64 * 64 + 64 * 64) * 2
    assert all(r.waste == 1 for r in loads)
    kernel = p.kernels()[0]
    assert kernel.tensor_flops == 2 * 128 * 128 * 64
    assert kernel.instructions["wgmma.m64n64k16"] == 4 * 4 * 4  # 4 blocks, 4 k slices, 4 warps a warpgroup
