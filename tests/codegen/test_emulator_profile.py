"""The CUDA emulator's profile build (`hidet.cuda.profile`): planted kernels whose requests, sectors and shared-memory
wavefronts are known by hand, branches (an `if`'s and a loop's) and instruction classes, and the lower bound's
arithmetic."""

from __future__ import annotations

import numpy as np
import pytest

import hidet_lang as hidet
from hidet_lang import attrs, f16, f32, f64, u32
from hidet_lang.cuda import blockIdx, copy_vector, ldmatrix_x4, shared_tensor, syncthreads, threadIdx
from hidet_lang.cuda.profile_bound import peaks, time_bound
from hidet_lang.cuda.profile_report import KernelRecord, Profile

pytestmark = pytest.mark.filterwarnings("ignore")


def _line(text: str) -> int:
    """The line of the planted kernels (above the tests) holding `text` (exactly once)."""
    end = next(i for i, line in enumerate(_SOURCE) if line.startswith("def test_"))
    found = [i + 1 for i, line in enumerate(_SOURCE[:end]) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


_SOURCE = open(__file__).read().splitlines()


@pytest.fixture(scope="module")
def planted():
    """One module of planted kernels (one compilation), each warp's accesses known by hand."""
    with hidet.script_module() as module:
        @hidet.script
        def global_loads(a: f32[1024], b: f32[32768], h: f16[1024], out: f32[1024]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 128
            attrs.cuda.grid_dim = 8
            i = blockIdx.x * 128 + threadIdx.x
            coalesced = a[i]
            strided = b[i * 32]
            half = h[i]
            out[i] = coalesced + strided + f32(half)

        @hidet.script
        def shared_reads(out: f32[1024]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            tile = shared_tensor(f32, [32, 32])
            padded = shared_tensor(f32, [32, 33])
            wide = shared_tensor(f64, [64])
            t = threadIdx.x
            for j in range(32):
                tile[t, j] = f32(j)
                padded[t, j] = f32(j)
            wide[t] = f64(t)
            wide[t + 32] = f64(t)
            syncthreads()
            column = tile[0, t] + tile[t, 0]
            column2 = padded[t, 0]
            broadcast = tile[0, 0]
            pair = f32(wide[t])
            pair_strided = f32(wide[2 * t])
            out[t] = column + column2 + broadcast + pair + pair_strided

        @hidet.script
        def vector_reads(out: f32[128]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            rows = shared_tensor(f32, [256])
            regs = hidet.register_tensor(f32, [4])
            t = threadIdx.x
            for j in range(8):
                rows[t * 8 + j] = f32(j)
            syncthreads()
            copy_vector(~regs[0], ~rows[4 * t], 16)
            copy_vector(~out[4 * t], ~regs[0], 16)

        @hidet.script
        def swizzles(out: u32[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 1
            tile = shared_tensor(f16, [32, 64])  # rows of 128 bytes: eight 16-byte chunks
            regs = hidet.register_tensor(u32, [4])
            t = threadIdx.x
            for j in range(64):
                tile[t, j] = f16(j)
            syncthreads()
            ldmatrix_x4(regs, ~tile[t, 0])  # no swizzle: a matrix's 8 rows on the same 4 banks
            acc = regs[0]
            ldmatrix_x4(regs, ~tile[t, 8 * (t % 8)])  # the 128-byte swizzle: chunk ^ (row % 8)
            acc = acc + regs[0]
            ldmatrix_x4(regs, ~tile[t, 8 * (t % 4)])  # a 64-byte swizzle's rows on 128-byte rows: chunk ^ (row % 4)
            out[t] = acc + regs[0]

        @hidet.script
        def branches(a: f32[64], out: f32[64]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 64
            attrs.cuda.grid_dim = 1
            t = threadIdx.x
            v = a[t]
            if t % 2 == 0:
                v = v * 2.0 + 1.0
            if t < 32:
                v = v + 3.0
            out[t] = v

        @hidet.script
        def loops(a: f32[64], out: f32[64]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 64
            attrs.cuda.grid_dim = 1
            t = threadIdx.x
            acc = 0.0
            for j in range(t % 4):
                acc += a[j]
            out[t] = acc

    m = module.build(target="cuda")
    with hidet.cuda.profile() as p:
        m["global_loads"](np.ones(1024, np.float32), np.ones(32768, np.float32), np.ones(1024, np.float16),
                          np.zeros(1024, np.float32))
        m["shared_reads"](np.zeros(1024, np.float32))
        m["vector_reads"](np.zeros(128, np.float32))
        m["branches"](np.ones(64, np.float32), np.zeros(64, np.float32))
        m["swizzles"](np.zeros(32, np.uint32))
        m["loops"](np.ones(64, np.float32), np.zeros(64, np.float32))
    return p


def _record(p: Profile, text: str, space: str, kind: str = "load"):
    return p.line(_line(text), space, kind)


def test_global_sectors(planted):
    coalesced = _record(planted, "coalesced = a[i]", "global")
    assert (coalesced.requests, coalesced.sectors, coalesced.ideal) == (32, 128, 128)  # 4 sectors a request
    assert coalesced.bytes_requested == coalesced.bytes_moved == 32 * 128
    strided = _record(planted, "strided = b[i * 32]", "global")
    assert strided.per_request == 32 and strided.ideal_per_request == 4 and strided.waste == 8
    assert strided.bytes_moved == 32 * 32 * 32
    half = _record(planted, "half = h[i]", "global")
    assert half.per_request == 2 and half.waste == 1  # 32 f16 lanes: 64 bytes, two sectors
    store = _record(planted, "out[i] = coalesced", "global", "store")
    assert store.per_request == 4 and store.wavefronts is None


def test_shared_wavefronts(planted):
    column = _record(planted, "column = tile[0, t] + tile[t, 0]", "shared")
    # two requests: a row (1 wavefront) and a column of float[32][32] (32 lanes on one bank: 32)
    assert (column.requests, column.wavefronts, column.ideal) == (2, 33, 2)
    padded = _record(planted, "column2 = padded[t, 0]", "shared")
    assert (padded.requests, padded.wavefronts, padded.waste) == (1, 1, 1)
    broadcast = _record(planted, "broadcast = tile[0, 0]", "shared")
    assert (broadcast.wavefronts, broadcast.ideal) == (1, 1)
    pair = _record(planted, "pair = f32(wide[t])", "shared")  # 64-bit: two half-warps, one wavefront each
    assert (pair.wavefronts, pair.ideal, pair.waste) == (2, 2, 1)
    pair_strided = _record(planted, "pair_strided = f32(wide[2 * t])", "shared")  # every other 8 bytes: 2-way
    assert (pair_strided.wavefronts, pair_strided.ideal) == (4, 2)
    writes = _record(planted, "tile[t, j] = f32(j)", "shared", "store")  # a row a thread: 32-way, 32 times
    assert (writes.requests, writes.wavefronts) == (32, 32 * 32)


def test_vector_accesses(planted):
    vector = _record(planted, "copy_vector(~regs[0], ~rows[4 * t], 16)", "shared")
    # 128-bit: four quarter-warps of 8 lanes, 128 contiguous bytes each
    assert (vector.requests, vector.wavefronts, vector.ideal) == (1, 4, 4)
    stored = _record(planted, "copy_vector(~out[4 * t], ~regs[0], 16)", "global", "store")
    assert (stored.requests, stored.sectors) == (1, 16)
    assert all(r.space in ("global", "shared") for r in planted.lines())  # local arrays are not counted


def test_ldmatrix_swizzles(planted):
    """ldmatrix: four phases of 8 rows of 16 bytes; ideal 4 wavefronts a request."""
    plain = _record(planted, "ldmatrix_x4(regs, ~tile[t, 0])", "shared")
    assert (plain.requests, plain.wavefronts, plain.ideal, plain.waste) == (1, 32, 4, 8)  # 8-way
    swizzled = _record(planted, "ldmatrix_x4(regs, ~tile[t, 8 * (t % 8)])", "shared")
    assert (swizzled.wavefronts, swizzled.waste) == (4, 1)
    mismatched = _record(planted, "ldmatrix_x4(regs, ~tile[t, 8 * (t % 4)])", "shared")
    assert (mismatched.wavefronts, mismatched.waste) == (8, 2)  # rows r and r + 4 share banks: 2-way
    assert plain.instructions == ("ldmatrix",)


def test_branches_and_instructions(planted):
    kernel = next(k for k in planted.kernels() if "branches" in k.name)
    assert kernel.launches == 1 and kernel.blocks == 1 and kernel.threads_per_block == 64
    assert kernel.instructions["branch"] == 4  # two branches, two warps
    assert kernel.divergent_branches == 2  # `t % 2` diverges in both warps; `t < 32` in neither
    assert kernel.instructions["fma"] == 2  # one FMA, executed by both warps (each has lanes taking it)
    assert kernel.instructions["fp32"] == 1  # `v + 3.0`: the first warp only
    assert kernel.fp32_flops == 32 * 2 + 32
    shared = next(k for k in planted.kernels() if "shared_reads" in k.name)
    assert shared.barrier_waits == 1


def test_each_test_of_a_loops_condition_is_a_branch(planted):
    """Lanes run `t % 4` iterations (0 to 3): a warp tests the condition 4 times; the first three tests go both
    ways (some lanes stop), the last (lanes with 3 iterations) one way."""
    kernel = next(k for k in planted.kernels() if "loops" in k.name)
    assert kernel.instructions["branch"] == 2 * 4 and kernel.divergent_branches == 2 * 3


def test_table_sorted_by_waste(planted):
    text = str(planted)
    lines = text.splitlines()
    assert "tile[t, j] = f" in lines[1] and "32.0x" in lines[1]  # 32-way row writes: the most wasteful first
    wastes = [float(line.split("x  ")[0].split()[-1]) for line in lines[1:] if "x  " in line]
    assert wastes == sorted(wastes, reverse=True)
    assert "strided = b[i * 32]" in text and "kernel " in text and "bound on" in text


def test_bound_arithmetic():
    """A kernel of 1000 blocks moving 2**20 distinct sectors with 2**20 FMA warp instructions, on sm_80 (A100: 108
    SMs at 1.41 GHz, 64 f32 lanes an SM, 2.039 TB/s)."""
    kernel = KernelRecord("k", arch="sm_80", launches=1, blocks=1000, threads_per_block=256,
                          instructions={"fma": 2**20, "global.load": 2**15}, global_sectors=2**20,
                          distinct_sectors=2**20)
    bound = kernel.bound()
    cycles = 108 * 1.41e9
    assert bound.resources["fma"] == pytest.approx(2**20 * 32 / (64 * cycles))
    assert bound.resources["dram"] == pytest.approx(2**25 / 2.039e12)
    assert bound.resources["l1"] == pytest.approx(2**20 / (4 * cycles))
    assert bound.resources["issue"] == pytest.approx((2**20 + 2**15) / (4 * cycles))
    assert bound.binding == "dram" and bound.seconds == bound.resources["dram"] > bound.resources["fma"]
    few = KernelRecord("k", launches=2, blocks=4, instructions={"fma": 1000})  # 2 blocks a launch: 2 SMs
    assert time_bound(few, "sm_90a").resources["fma"] == pytest.approx(1000 * 32 / (128 * 2 * 1.83e9))
    assert peaks("sm_89").part == "RTX 4090" and peaks("sm_100").part == "H100 SXM5"
    with pytest.raises(ValueError, match="no peak rates"):
        peaks("sm_75")
    with pytest.raises(ValueError, match="architecture"):
        KernelRecord("k").bound()


def test_profile_off_and_gpu_refusal(tmp_path):
    """Outside a profile nothing is counted; a profile records nothing of a CPU module."""
    p = Profile()
    assert p.lines() == [] and p.kernels() == []
    with pytest.raises(KeyError, match="line 3"):
        p.line(3)
