"""The Hopper matmul template (TMA, mbarriers, warp-specialized wgmma; f16 and bf16 inputs, f32 accumulation) for
'cuda:sm_90a' against the float64 product of the rounded inputs, on the emulator's checking mode (no race, no
out-of-bounds access, no uninitialized shared-memory read, no wgmma register touched in flight): odd m, k and n
that are not multiples of the tiles, batches, both consumer counts and every tile width, a persistent grid with
fewer blocks than tiles (the ring's phases run on across tiles), a fused bias and gelu epilogue in its stores, a
prologue refused (it cannot ride TMA), the parameters it refuses; clusters of two blocks sharing b's tiles through
multicast on odd sizes (a unit of two tile rows past m, one cluster walking every unit); the matmul adapter's choice
(this template on sm_90a where TMA can read the task's tensors, the sm_80 tensor-core template elsewhere and where a
prologue is fused), a graph's bias and gelu fused on both; and its machine code: NVRTC's sm_90a
cubin issues HGMMA and UTMALDG and has no local memory, and the cluster build's b loads are multicast UTMALDGs."""

from __future__ import annotations

import importlib.util
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
from template_checks import F16_HALF_SUBNORMAL_STEP, assert_sum_close

import stdlib_ops as ops
from codegen.backends import with_device_arch
from codegen.build import build_module
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.runtime.arrays import uses_gpu
from codegen.toolchain import nvrtc
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.sass import find_tool, read_sass
from hidet_lang.ir import expr as E
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import TensorType, float32, int32
from hidet_lang.passes.pipeline import lower
from hidet_lang.target import Target, TargetKind
from hidet_lang.testing import example_count
from stdlib_ops.fusion import fuse
from stdlib_ops.fusion.contract import FusionContractError, the_kernel
from stdlib_ops.fusion.spec import Epilogue, Prologue, Store
from stdlib_ops.templates.kernels.matmul_cuda_sm90 import default_block_n, matmul_cuda_sm90
from stdlib_ops.templates.params import ScheduleError
from stdlib_ops.templates.registry import choose_schedule

TARGET = "cuda:sm_90a"
U = 2.0**-24  # f32's unit roundoff
ROUNDING = {"float16": 2.0**-11, "bfloat16": 2.0**-8, "float32": U}  # unit roundoff of each output type
NUMPY = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "float32": np.float32}
SYMBOLIC = ("batch", "m", "n", "k")


@cache
def built(sizes: tuple[int | str, ...], out_dtype: str, **params: object):
    """The template's module for `sizes`, built for sm_90a in the checking mode."""
    return matmul_cuda_sm90(*sizes, out_dtype, **params).build(target=TARGET, check=True)


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


def multiple_of_8(limit: int) -> st.SearchStrategy[int]:
    """A size TMA takes for a row (a multiple of 8 halves: 16 bytes) from 8 to `limit`, rarely a tile multiple."""
    return st.integers(1, limit // 8).map(lambda x: 8 * x)


SCHEDULES = [
    dict(consumers=2, block_n=128, stages=4),  # the default: 128 x 128 tiles, 3 warpgroups
    dict(consumers=1, block_n=64, stages=2, blocks=5),  # 64 x 64 tiles, the ring wraps every other step, 5 blocks
]


@settings(max_examples=example_count(5), deadline=None)
@given(st.data(), st.sampled_from([("float16", "float32", 0), ("bfloat16", "bfloat16", 1), ("float16", "float16", 1)]))
def test_symbolic_sizes_match_numpy(draw: st.DataObject, case: tuple[str, str, int]) -> None:
    dtype, out_dtype, schedule = case  # three builds: each schedule, each input type, each output type
    batch = draw.draw(st.integers(1, 2), label="batch")
    m = draw.draw(st.integers(1, 150), label="m")
    n, k = draw.draw(multiple_of_8(200), label="n"), draw.draw(multiple_of_8(200), label="k")
    a, b = operands(draw.draw(st.integers(0, 2**32 - 1)), batch, m, n, k, dtype)
    c = np.full((batch, m, n), np.nan, NUMPY[out_dtype])
    built(SYMBOLIC, out_dtype, dtype=dtype, **SCHEDULES[schedule])(batch, m, k, n, a, b, c)  # order of appearance
    check(c, a, b, out_dtype)


@pytest.mark.parametrize(("sizes", "params"), [
    ((2, 45, 72, 136), dict(consumers=2, block_n=256, stages=3, blocks=1)),  # one block walks both batch entries
    ((1, 200, 136, 40), None),  # symbolic sizes, SCHEDULES[1]: 12 tiles over 5 blocks, each walking two or three
    ((3, 17, 8, 8), dict(consumers=2, block_n=192, stages=2, blocks=2)),  # one k step, a sliver of every tile
    # clusters of two: one cluster walks every unit (45 rows: the second block of each unit is past m), ...
    ((2, 45, 72, 136), dict(cluster=2, consumers=2, block_n=128, stages=3, blocks=2)),
    # ... and 3 clusters over 2 units of 2 x 64 rows (200 rows: the last tile row ragged) and 3 tile columns
    ((1, 200, 136, 40), dict(cluster=2, consumers=1, block_n=64, stages=2, blocks=7)),
    # ping-pong: each consumer its own 128-row tiles in turn (one block: 12 tiles, six each, the ring of 3 stages
    # shared; two blocks of 5 and 4 tiles: the first block's second consumer takes one fewer)
    ((2, 300, 136, 200), dict(schedule="pingpong", stages=3, blocks=1)),
    ((1, 300, 136, 200), dict(schedule="pingpong", block_n=64, stages=2, blocks=2)),
], ids=["256-wide-one-block", "persistent", "tiny", "cluster-one-walks-all", "cluster-persistent", "pingpong",
        "pingpong-odd"])
def test_every_accumulator_lands_in_its_place(sizes: tuple[int, ...], params: dict[str, int] | None) -> None:
    # small integers: every product and sum (at most 1200) is exact in f32 and f16, so a misplaced accumulator, a
    # swizzle read wrongly or a stage read in the wrong phase is an exact mismatch
    batch, m, n, k = sizes
    a = (np.arange(batch * m * k).reshape(batch, m, k) % 13 - 6).astype(np.float16)
    b = (np.arange(batch * k * n).reshape(batch, k, n) % 11 - 5).astype(np.float16)
    expected = a.astype(np.float32) @ b.astype(np.float32)
    if params is None:  # the hypothesis test's f16 build: symbolic sizes, three-dimensional tensor maps
        c = np.full((batch, m, n), np.nan, np.float16)
        built(SYMBOLIC, "float16", dtype="float16", **SCHEDULES[1])(batch, m, k, n, a, b, c)
    else:
        c = np.full((batch, m, n), np.nan, np.float32)
        if batch == 1:  # one batch entry known at build time: the tensor maps are two-dimensional
            a, b = a[0], b[0]
        built(sizes, "float32", **params)(a, b, c)
    np.testing.assert_array_equal(c, expected.astype(c.dtype))


def gelu_tanh(x: E.Expr) -> E.Expr:
    """gelu's tanh form, 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), as IR."""
    inner = E.Constant(math.sqrt(2 / math.pi), float32) * (x + E.Constant(0.044715, float32) * x * x * x)
    return E.Constant(0.5, float32) * x * (E.Constant(1.0, float32) + E.Intrinsic("tanh", (inner,), float32))


def test_a_bias_and_gelu_epilogue_fuses_into_the_stores() -> None:
    n_var = E.Var("n", int32)
    bias = E.Var("bias", TensorType(float32, (n_var,)))
    y = E.Var("y", TensorType(float32, (E.Var("batch", int32), E.Var("m", int32), n_var)))
    epilogue = Epilogue((y,), lambda idx, v: [Store(y, idx, gelu_tanh(v + bias[idx[2]]))], inputs=(bias,))
    module = matmul_cuda_sm90(*SYMBOLIC, "float32", consumers=1, block_n=64, stages=2).ir_module()
    fused = build_module(fuse(module, {}, {"c": epilogue}), TARGET, check=True)
    batch, m, n, k = 2, 37, 72, 48
    a, b = operands(5, batch, m, n, k, "float16")
    bias_np = np.random.default_rng(6).uniform(-1, 1, n).astype(np.float32)
    out = np.full((batch, m, n), np.nan, np.float32)
    fused(batch, m, k, n, a, b, bias_np, out)
    x = a.astype(np.float64) @ b.astype(np.float64) + bias_np
    expected = 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))
    # the f32 sum of 48 products (error (k + 1) 2^-24 of at most 48) carried through gelu's slope (at most 1.13),
    # then f32 arithmetic and tanh in f32 (a few ulps of values below 8)
    np.testing.assert_allclose(out, expected, rtol=0, atol=1e-5)


def test_a_prologue_cannot_ride_tma_and_is_refused() -> None:
    # a and b are read only by TMA copies: there is no element read to inject a prologue into
    source = E.Var("x", TensorType(float32, (E.Var("batch", int32), E.Var("m", int32), E.Var("k", int32))))
    scale = Prologue((source,), lambda idx: source[idx] * E.Constant(0.5, float32))
    module = matmul_cuda_sm90(*SYMBOLIC, "float32").ir_module()
    with pytest.raises(FusionContractError, match="'a'"):
        fuse(module, {"a": scale}, {})


def test_schedule_parameters_and_sizes_it_cannot_honour_are_refused() -> None:
    with pytest.raises(ScheduleError, match="k=36: TMA needs rows of a multiple of 16 bytes"):
        matmul_cuda_sm90(1, 8, 8, 36)
    with pytest.raises(ScheduleError, match="n=7"):
        matmul_cuda_sm90(1, 8, 7, 8)
    with pytest.raises(ScheduleError, match="block_n"):
        matmul_cuda_sm90(1, 8, 8, 8, block_n=96)
    with pytest.raises(ScheduleError, match="consumers"):
        matmul_cuda_sm90(1, 8, 8, 8, consumers=3)
    with pytest.raises(ScheduleError, match="stages"):
        matmul_cuda_sm90(1, 8, 8, 8, stages=1)
    with pytest.raises(ScheduleError, match="shared memory"):
        matmul_cuda_sm90(1, 8, 8, 8, block_n=256, stages=5)
    with pytest.raises(ScheduleError, match="dtype float32 is not supported"):
        matmul_cuda_sm90(1, 8, 8, 8, dtype="float32")
    with pytest.raises(ScheduleError, match="cluster must be 1 or 2"):
        matmul_cuda_sm90(1, 8, 8, 8, cluster=4)
    with pytest.raises(ScheduleError, match="blocks must be at least the cluster's 2"):
        matmul_cuda_sm90(1, 8, 8, 8, cluster=2, blocks=1)
    with pytest.raises(ScheduleError, match="schedule must be one of"):
        matmul_cuda_sm90(1, 8, 8, 8, schedule="stream-k")
    with pytest.raises(ScheduleError, match="two consumers and blocks of their own"):
        matmul_cuda_sm90(1, 8, 8, 8, schedule="pingpong", cluster=2)
    with pytest.raises(ScheduleError, match="up to block_n=128"):
        matmul_cuda_sm90(1, 8, 8, 8, schedule="pingpong", block_n=256)


def test_an_unaligned_runtime_size_is_refused_at_the_launch() -> None:
    a, b = operands(1, 1, 16, 16, 12, "float16")  # rows of 12 halves: 24 bytes
    c = np.zeros((1, 16, 16), np.float32)
    with pytest.raises(RuntimeError, match="TMA needs the byte strides to be multiples of 16"):
        built(SYMBOLIC, "float32", consumers=1, block_n=64, stages=2)(1, 16, 12, 16, a, b, c)


@pytest.mark.skipif(uses_gpu(), reason="a GPU call copies numpy arguments to aligned device memory")
def test_an_output_off_a_16_byte_boundary_is_refused_at_the_launch() -> None:
    # c is stored by 16-byte vectors alone: a c that is not 16-byte aligned is named at the launch, at the store
    a, b = operands(1, 1, 16, 16, 16, "float16")
    storage = np.zeros(1 + 16 * 16 + 8, np.float32)
    start = next(s for s in range(1, 5) if (storage.ctypes.data + 4 * s) % 16 != 0)
    c = storage[start:start + 16 * 16].reshape(1, 16, 16)
    with pytest.raises(RuntimeError, match=r"argument 'c' is at .*copy_vector.*must be 16-byte aligned"):
        built(SYMBOLIC, "float32", consumers=1, block_n=64, stages=2)(1, 16, 16, 16, a, b, c)



# ------------------------------------------------------------------------------------- the matmul adapter's choice


def chosen_kernel(y: ops.Tensor, target: str) -> str:
    """The name of the kernel the matmul producing `y` is scheduled as on `target`."""
    return the_kernel(choose_schedule(y.producer.task, Target.of(target)).module).name


@pytest.mark.parametrize(("x_shape", "y_shape", "dtype", "on_sm90a"), [
    (["m", 64], [64, 48], "float16", True),  # a linear layer: two-dimensional tensor maps
    ([3, 40, 64], [3, 64, 24], "bfloat16", True),  # equal batches: three-dimensional tensor maps
    (["m", 60], [60, 48], "float16", False),  # rows of 60 halves (120 bytes): TMA cannot read them
    ([3, 40, 64], [64, 24], "float16", False),  # the batch folds into the rows of a 2-D product
    ([3, 40, 64], [1, 64, 24], "float16", False),  # a broadcast batch
    ([64], [64, 48], "float16", False),  # a vector operand
    (["m", 64], [64, "n"], "float16", False),  # n unknown at build time: its alignment too
])
def test_the_adapter_takes_the_hopper_template_where_tma_reads_the_tensors(x_shape: list, y_shape: list, dtype: str,
                                                                           on_sm90a: bool) -> None:
    y = ops.matmul(ops.symbol(x_shape, dtype), ops.symbol(y_shape, dtype))
    assert chosen_kernel(y, "cuda:sm_90a") == ("matmul_cuda_sm90" if on_sm90a else "matmul_cuda_f16_mma")
    for target in ("cuda:sm_80", "cuda:sm_90"):  # no sm_90a: sm_90 lacks wgmma
        assert chosen_kernel(y, target) == "matmul_cuda_f16_mma"
    # 'cuda' chooses for the GPU's architecture where it runs on one (sm_90a on the simulated H200), and keeps the
    # portable choice on the emulator
    hopper = with_device_arch(Target.of("cuda")).has_arch("sm_90a")
    assert chosen_kernel(y, "cuda") == ("matmul_cuda_sm90" if on_sm90a and hopper else "matmul_cuda_f16_mma")


def intrinsics_of(compiled) -> set[str]:
    """The intrinsics the compiled graph's one kernel calls."""
    (module,) = compiled.ir_modules
    return {i.name for f in module.functions for i in collect(f.body, E.Intrinsic)}


def test_a_graph_fuses_bias_and_gelu_into_the_hopper_kernel_and_falls_back_off_sm90a() -> None:
    x, w, bias = ops.symbol(["m", 64], "float16"), ops.symbol([64, 48], "float16"), ops.symbol([48], "float16")
    graph = ops.optimize(ops.trace_from(ops.gelu(ops.matmul(x, w) + bias), [x, w, bias]))
    rng = np.random.default_rng(3)
    xs, ws, bs = (rng.uniform(-1, 1, s).astype(np.float16) for s in ((37, 64), (64, 48), (48,)))
    exact = xs.astype(np.float64) @ ws.astype(np.float64) + bs
    gelu = 0.5 * exact * (1 + np.vectorize(math.erf)(exact / np.sqrt(2)))
    magnitude = np.abs(xs.astype(np.float64)) @ np.abs(ws.astype(np.float64)) + np.abs(bs)
    for target, mma in (("cuda:sm_90a", "wgmma_mma_async_f16_ss"), ("cuda:sm_80", "mma_m16n8k16_f16_f32")):
        compiled = graph.build(target)
        assert compiled.kernels == ["matmul* + add + gelu"]
        assert mma in intrinsics_of(compiled)
        got = compiled(xs, ws, bs).numpy().astype(np.float64)
        # the product rounds to f16 before the add (2^-11 of |x| |w|, which gelu's slope, at most 1.13, carries),
        # the add and gelu round to f16 again (2^-11 each, of a value at most 64): a few f16 roundings
        assert (np.abs(got - gelu) <= 4 * 2.0**-11 * (magnitude + 1)).all(), target
        if target == "cuda:sm_90a" and CUOBJDUMP is not None:  # the report names the main loop's tensor-core share
            report = compiled.report()
            loop = report.kernels[0].main_loop
            assert loop is not None and loop.tensor_core == 4, loop  # a 64-deep k step: 4 m64n64k16 (n is 48)
            assert f"{loop.tensor_core} on the tensor cores ({loop.tensor_core_share:.1%})" in str(report)


def test_a_prologue_takes_the_tensor_core_template_which_reads_elements() -> None:
    # no prologue can ride a TMA copy: with one to fuse, the chooser takes the binding's fallback, and the graph
    # stays one kernel
    x, w = ops.symbol(["m", 64], "float16"), ops.symbol([64, 48], "float16")
    y = ops.matmul(x * 0.5, w)
    task = y.producer.task
    hopper = Target.of("cuda:sm_90a")
    assert the_kernel(choose_schedule(task, hopper).module).name == "matmul_cuda_sm90"
    assert the_kernel(choose_schedule(task, hopper, prologue=True).module).name == "matmul_cuda_f16_mma"
    compiled = ops.optimize(ops.trace_from(y, [x, w])).build("cuda:sm_90a")
    assert compiled.kernels == ["mul + matmul*"]
    assert "mma_m16n8k16_f16_f32" in intrinsics_of(compiled)
    rng = np.random.default_rng(4)
    xs, ws = rng.uniform(-1, 1, (21, 64)).astype(np.float16), rng.uniform(-1, 1, (64, 48)).astype(np.float16)
    got = compiled(xs, ws).numpy()
    check(got[None], (xs * np.float16(0.5))[None], ws[None], "float16")


@pytest.mark.machine_code
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
@pytest.mark.parametrize(("dtype", "params"), [("float16", {}), ("bfloat16", dict(block_n=256, stages=3))])
def test_the_sm90a_cubin_issues_hgmma_and_utmaldg_without_local_memory(dtype: str, params: dict[str, int]) -> None:
    report = matmul_cuda_sm90(*SYMBOLIC, "float16", dtype=dtype, **params).build(target=TARGET).report()
    kernel = report.kernel("matmul")
    assert kernel.local_bytes == 0 and kernel.spill_store_bytes == 0 and kernel.spill_load_bytes == 0
    if kernel.opcodes is None:
        pytest.skip("nvdisasm or cuobjdump (pip nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump) is not installed: "
                    "the SASS opcodes cannot be read")
    b_tiles = params.get("block_n", default_block_n("n")) // 64
    assert kernel.opcodes["HGMMA"] == 4  # four 16-deep slices of a k step, one wgmma of the tile's width each
    assert kernel.opcodes["UTMALDG"] >= 1 + b_tiles  # a stage's a tile and b tiles
    assert kernel.opcodes["USETMAXREG"] == 2  # the producer's and the consumers' register budgets
    assert not any(op.startswith(("LDL", "STL")) for op in kernel.opcodes)


@settings(max_examples=example_count(3), deadline=None)
@given(st.integers(1, 2), st.integers(1, 200), multiple_of_8(160), multiple_of_8(160), st.integers(0, 2**32 - 1))
def test_a_cluster_of_two_blocks_sharing_b_matches_numpy_on_symbolic_sizes(batch: int, m: int, n: int, k: int,
                                                                            seed: int) -> None:
    a, b = operands(seed, batch, m, n, k, "bfloat16")
    c = np.full((batch, m, n), np.nan, np.float32)
    built(SYMBOLIC, "float32", dtype="bfloat16", cluster=2, consumers=1, block_n=64, stages=3, blocks=4)(
        batch, m, k, n, a, b, c)
    check(c, a, b, "float32")


CUOBJDUMP = find_tool("cuobjdump")


@pytest.mark.machine_code
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
def test_the_cluster_build_multicasts_its_b_loads_and_spills_nothing(tmp_path: Path) -> None:
    ir = matmul_cuda_sm90(*SYMBOLIC, "float16", cluster=2).ir_module()
    source = emit_cuda(plan_module(lower(ir, Target(TargetKind.CUDA, "sm_90a"))))[0]
    cubin = tmp_path / "matmul.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(source, "sm_90a", include_dirs=[str(INCLUDE_DIR)]))
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    loads = re.findall(r"UTMALDG\.\w+(\.MULTICAST)?", sass)
    assert loads.count(".MULTICAST") == default_block_n("n") // 64  # a stage's b tiles, half of each from either block
    assert loads.count("") == 1  # its a tile, this block's own
    assert "UCGABAR_ARV" in sass and "UCGABAR_WAIT" in sass  # the cluster barrier at the start and the end
    assert not re.search(r"\b(LDL|STL)\b", sass)  # no local memory: no spills


@pytest.mark.machine_code
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_the_operators_4096_cubed_matmul_issues_wide_wgmma_with_one_arrival_a_warpgroup(dtype: str,
                                                                                        tmp_path: Path) -> None:
    # the kernel `ops.matmul` takes for cuda:sm_90a, not a hand-picked point: one m64nNk16 wgmma a 16-deep slice
    # with N >= 128, so that a consumer reads its slice of `a` from shared memory once for the tile's width; a
    # stage's empty barrier expects one arrival a consumer warpgroup (an elected thread's), not one a thread
    x, w = ops.symbol([4096, 4096], dtype), ops.symbol([4096, 4096], dtype)
    choice = choose_schedule(ops.matmul(x, w).producer.task, Target.of("cuda:sm_90a"))
    kernel = the_kernel(choice.module)
    assert kernel.name == "matmul_cuda_sm90"
    counts = {i.args[1].value for i in collect(kernel.body, E.Intrinsic) if i.name == "mbarrier_init"}
    assert counts == {1, 2}, counts  # full: the producer's arrival; empty: the two consumer warpgroups'
    source = emit_cuda(plan_module(lower(choice.module, Target(TargetKind.CUDA, "sm_90a"))))[0]
    cubin = tmp_path / "matmul.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(source, "sm_90a", include_dirs=[str(INCLUDE_DIR)]))
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    widths = [int(n) for n in re.findall(r"HGMMA\.64x(\d+)x16", sass)]
    assert len(widths) == 4 and min(widths) >= 128, widths
    assert not re.search(r"\b(LDL|STL)\b", sass)  # no local memory: no spills
    loop = read_sass(sass)[kernel.name].main_loop  # a consumer's k step: its 4 wgmma in under 100 instructions
    assert loop is not None and loop.tensor_core == 4 and loop.instructions < 100, loop
    # the epilogue stores through shared memory: a warp's 16 x 64 f16 a pass, as 4 vectors of 16 bytes a lane, four
    # passes across the 256 columns, and nothing else: no element stores at all
    stores = re.findall(r"\bSTG\.E(\.\w+)?\b", sass)
    assert stores == [".128"] * 16, stores
    assert len(re.findall(r"\bLDS\.128\b", sass)) == 16


@pytest.mark.machine_code
@pytest.mark.skipif(CUOBJDUMP is None, reason="cuobjdump (pip nvidia-cuda-cuobjdump) is not installed")
@pytest.mark.skipif(importlib.util.find_spec("cuda") is None, reason="NVRTC (pip cuda-python) is not installed")
def test_the_pingpong_build_issues_two_wide_wgmma_a_slice_and_spills_nothing(tmp_path: Path) -> None:
    # a ping-pong consumer's 128 x 128 tile: two m64n128k16 a 16-deep slice (its two 64-row halves), 128
    # accumulators a thread, as many as a cooperative consumer's 64 x 256
    ir = matmul_cuda_sm90(1, 4096, 4096, 4096, schedule="pingpong").ir_module()
    source = emit_cuda(plan_module(lower(ir, Target(TargetKind.CUDA, "sm_90a"))))[0]
    cubin = tmp_path / "matmul.cubin"
    cubin.write_bytes(nvrtc.compile_cubin(source, "sm_90a", include_dirs=[str(INCLUDE_DIR)]))
    sass = subprocess.run([CUOBJDUMP, "-sass", str(cubin)], check=True, capture_output=True, text=True).stdout
    assert re.findall(r"HGMMA\.64x(\d+)x16", sass) == ["128"] * 8
    assert not re.search(r"\b(LDL|STL)\b", sass)  # no local memory: no spills
    assert len(re.findall(r"\bSTG\.E\.128\b", sass)) == 16  # a warp's 16 x 128 f16 rows twice, 16-byte vectors
