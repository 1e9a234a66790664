"""The emulator's fast path for barrier-free kernels: one block function per kernel runs every thread of a block
in a loop, with the thread indices as loop variables. Everything that reads thread state must give what the
one-thread-at-a-time run gives: the indices (also in device functions), early returns, dynamic and static shared
memory, printf, device assertions, and the reports of out-of-bounds stores (block and thread)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from codegen.cuda_build import CHECK_ENV_VAR
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.runtime.cuda_backend import backend
from codegen.toolchain.headers import INCLUDE_DIR
from hidet_lang import attrs, f32, i32, meta, printf
from hidet_lang.cuda import blockDim, blockIdx, dynamic_shared_memory, gridDim, shared_tensor, syncthreads, threadIdx
from hidet_lang.passes.pipeline import lower

on_emulator = pytest.mark.skipif(backend() != "emulator", reason="the fast path is the emulator's")
fast_path_on = pytest.mark.skipif(backend() != "emulator" or os.environ.get(CHECK_ENV_VAR, "") not in ("", "0"),
                                  reason="the fast path is the emulator's, outside checking mode")

SOURCE = Path(__file__).read_text().splitlines()
LAUNCH_HEADER = (INCLUDE_DIR / "hidet_lang" / "cuda_launch.h").read_text()


def line_of(marker: str) -> str:
    """`test_emulator_fast_path.py:<line>` of the line carrying `# MARK: <marker>`."""
    number = next(i for i, text in enumerate(SOURCE, 1) if f"# MARK: {marker}" in text)
    return f"test_emulator_fast_path.py:{number}"


def emulator_sources(module, check: bool = False) -> tuple[str, str]:
    return emit_cuda(plan_module(lower(module.ir_module())), emulator=True, check=check)


def block_function(module, kernel: str) -> str:
    """The text of `kernel`'s block function in the emulator variant of the device source ('' if none)."""
    device, _ = emulator_sources(module)
    start = device.find(f'extern "C" void {kernel}__block(')
    return "" if start < 0 else device[start:device.index("\n}\n", start) + 3]


# ------------------------------------------------------------------------------------------------------------
# Thread and block indices, 2-D and 3-D, with constant and runtime block dimensions

def thread_state() -> tuple:
    """threadIdx, blockIdx, blockDim and gridDim, x y z each, as the 12 columns a kernel below stores."""
    return tuple(getattr(v, axis) for v in (threadIdx, blockIdx, blockDim, gridDim) for axis in "xyz")


with hidet.script_module() as index_module:

    @hidet.script
    def indices_3d(out: i32[2 * 3 * 2 * 24, 12]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (4, 3, 2)
        attrs.cuda.grid_dim = (2, 3, 2)
        block = (blockIdx.z * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x
        t = block * 24 + (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x
        state = thread_state()
        for c in meta.range(12):
            out[t, c] = state[c]

    @hidet.script
    def indices_2d(bx: i32, by: i32, gx: i32, out: i32[2048, 12]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (bx, by)
        attrs.cuda.grid_dim = (gx, 2)
        t = ((blockIdx.y * gridDim.x + blockIdx.x) * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x
        state = thread_state()
        for c in meta.range(12):
            out[t, c] = state[c]


def expected_indices(block: tuple[int, int, int], grid: tuple[int, int, int], rows: int) -> np.ndarray:
    """Row per thread, in (block, thread) linear order: threadIdx, blockIdx, blockDim, gridDim."""
    out = np.full((rows, 12), -1, np.int32)
    t = 0
    for bz, by, bx in np.ndindex(grid[2], grid[1], grid[0]):
        for tz, ty, tx in np.ndindex(block[2], block[1], block[0]):
            out[t] = (tx, ty, tz, bx, by, bz, *block, *grid)
            t += 1
    return out


def test_3d_blocks_and_grid_read_every_index_and_dimension() -> None:
    out = np.full((2 * 3 * 2 * 24, 12), -1, np.int32)
    index_module.build()["indices_3d"](out)
    np.testing.assert_array_equal(out, expected_indices((4, 3, 2), (2, 3, 2), len(out)))


@pytest.mark.parametrize("bx, by, gx", [(8, 4, 3), (5, 7, 2), (1, 1, 1), (32, 16, 2)])
def test_2d_blocks_with_runtime_dimensions(bx: int, by: int, gx: int) -> None:
    out = np.full((2048, 12), -1, np.int32)
    index_module.build()["indices_2d"](bx, by, gx, out)
    np.testing.assert_array_equal(out, expected_indices((bx, by, 1), (gx, 2, 1), 2048))


# ------------------------------------------------------------------------------------------------------------
# A device function reading the thread state; an out-of-bounds store in a device function

with hidet.script_module() as callee_module:

    @hidet.script
    def thread_code(k: i32) -> i32:
        attrs.func_kind = "cuda_internal"
        return threadIdx.x + 10 * threadIdx.y + 100 * threadIdx.z + 1000 * blockIdx.x + 10000 * blockIdx.y + k

    @hidet.script
    def store_at(out: i32[64], index: i32, value: i32):
        attrs.func_kind = "cuda_internal"
        out[index] = value  # MARK: callee-store

    @hidet.script
    def call_thread_code(out: i32[2, 2, 2, 3, 4]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (4, 3, 2)
        attrs.cuda.grid_dim = (2, 2)
        out[blockIdx.y, blockIdx.x, threadIdx.z, threadIdx.y, threadIdx.x] = thread_code(7)

    @hidet.script
    def call_store_at(limit: i32, out: i32[64]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (8, 4)
        attrs.cuda.grid_dim = 2
        t = threadIdx.y * 8 + threadIdx.x
        if blockIdx.x == 1:
            store_at(out, t * limit, t)


def test_device_function_reads_the_indices_of_the_calling_thread() -> None:
    out = np.zeros((2, 2, 2, 3, 4), np.int32)
    callee_module.build()["call_thread_code"](out)
    by, bx, tz, ty, tx = np.indices(out.shape)
    np.testing.assert_array_equal(out, tx + 10 * ty + 100 * tz + 1000 * bx + 10000 * by + 7)


@on_emulator
def test_out_of_bounds_store_in_a_device_function_names_block_and_thread() -> None:
    # thread 22 = threadIdx (6, 2, 0) of block 1 is the first to store at 22 * 3 = 66 >= 64
    message = re.escape("kernel 'call_store_at', block (1, 0, 0): thread 22 = threadIdx (6, 2, 0): out-of-bounds "
                        "access: writes out[66], which has 64 elements, at ") + f".*{line_of('callee-store')}"
    with pytest.raises(RuntimeError, match=message):
        callee_module.build()["call_store_at"](3, np.zeros(64, np.int32))
    out = np.zeros(64, np.int32)
    callee_module.build()["call_store_at"](1, out)
    np.testing.assert_array_equal(out[:32], np.arange(32))


# ------------------------------------------------------------------------------------------------------------
# Early return; dynamic and static shared memory without barriers; printf

with hidet.script_module() as memory_module:

    @hidet.script
    def early_return(n: i32, out: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (16, 4)
        attrs.cuda.grid_dim = (n + 63) // 64
        i = blockIdx.x * 64 + threadIdx.y * 16 + threadIdx.x
        if i >= n or i % 3 == 1:
            return
        if threadIdx.y == 2:
            out[i] = -1.0
            return
        out[i] = f32(i) * 0.5

    @hidet.script
    def dynamic_slots(n: i32, x: f32[n], y: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 96
        attrs.cuda.grid_dim = (n + 95) // 96
        attrs.cuda.dynamic_smem_bytes = 2 * 96 * 4
        buf = dynamic_shared_memory(0, f32)
        upper = dynamic_shared_memory(96 * 4, f32)  # buf[96:]
        i = blockIdx.x * 96 + threadIdx.x
        if i < n:
            buf[threadIdx.x] = x[i] * 2.0
            buf[96 + threadIdx.x] = buf[threadIdx.x] + f32(blockIdx.x)
            y[i] = upper[threadIdx.x]

    @hidet.script
    def shared_slots(n: i32, x: f32[n], y: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (8, 8)
        attrs.cuda.grid_dim = (n + 63) // 64
        slots = shared_tensor(f32, [8, 8])
        i = blockIdx.x * 64 + threadIdx.y * 8 + threadIdx.x
        if i < n:
            slots[threadIdx.y, threadIdx.x] = x[i] + 1.0
            slots[threadIdx.y, threadIdx.x] = slots[threadIdx.y, threadIdx.x] * f32(threadIdx.y + 1)
            y[i] = slots[threadIdx.y, threadIdx.x]

    @hidet.script
    def say_hello(out: i32[1]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (3, 2)
        attrs.cuda.grid_dim = 2
        printf("hello from block %d thread (%d, %d)\n", blockIdx.x, threadIdx.x, threadIdx.y)
        if blockIdx.x == 1 and threadIdx.x == 2 and threadIdx.y == 1:
            out[0] = 1


def test_early_return_ends_only_the_returning_thread() -> None:
    n = 250
    out = np.full(n, 7.0, np.float32)
    memory_module.build()["early_return"](n, out)
    i = np.arange(n)
    expected = np.where(i % 64 // 16 == 2, -1.0, i * 0.5).astype(np.float32)
    expected[i % 3 == 1] = 7.0
    np.testing.assert_array_equal(out, expected)


def test_dynamic_shared_memory_slot_per_thread() -> None:
    n = 500
    x = np.random.randn(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    memory_module.build()["dynamic_slots"](n, x, y)
    np.testing.assert_array_equal(y, x * np.float32(2) + (np.arange(n) // 96).astype(np.float32))


def test_shared_array_slot_per_thread() -> None:
    n = 300
    x = np.random.randn(n).astype(np.float32)
    y = np.zeros(n, np.float32)
    memory_module.build()["shared_slots"](n, x, y)
    np.testing.assert_array_equal(y, (x + np.float32(1)) * (np.arange(n) % 64 // 8 + 1).astype(np.float32))


@on_emulator
def test_printf_prints_each_thread_once_with_its_indices(capfd: pytest.CaptureFixture[str]) -> None:
    out = np.zeros(1, np.int32)
    memory_module.build()["say_hello"](out)
    lines = [line for line in capfd.readouterr().out.splitlines() if line.startswith("hello")]
    for b in range(2):  # the blocks may run in parallel; the threads of a block run in order
        mine = [line for line in lines if line.startswith(f"hello from block {b} ")]
        assert mine == [f"hello from block {b} thread ({x}, {y})" for y in range(2) for x in range(3)]
    assert len(lines) == 12
    assert out[0] == 1


# ------------------------------------------------------------------------------------------------------------
# Out-of-bounds stores and device assertions in barrier-free kernels

with hidet.script_module() as fault_module:

    @hidet.script
    def store_out_of_bounds(n: i32, a: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = (4, 4)
        attrs.cuda.grid_dim = (2, 3)
        t = threadIdx.y * 4 + threadIdx.x
        i = ((blockIdx.y * 2 + blockIdx.x) * 16 + t) % n
        if blockIdx.x == 1 and blockIdx.y == 2 and (t == 7 or t == 13):
            i = n + t  # MARK: oob-index
        a[i] = f32(t)  # MARK: oob-store

    @hidet.script
    def assert_positive(n: i32, x: f32[n], y: f32[n]):  # noqa: F821 (parameters)
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = 1
        i = threadIdx.x
        if i < n:
            assert x[i] > 0.0, "x must be positive"  # MARK: device-assert
            y[i] = x[i] * 2.0


@on_emulator
def test_out_of_bounds_store_reports_block_and_thread_as_checking_mode_does() -> None:
    n = 96
    expected = ("CUDA emulator: kernel 'store_out_of_bounds', block (1, 2, 0): thread 7 = threadIdx (3, 1, 0): "
                "out-of-bounds access: writes a[103], which has 96 elements, at ")
    messages = []
    for check in (False, True):
        memory = np.zeros(n + 32, np.float32)
        with pytest.raises(RuntimeError) as caught:
            fault_module.build(check=check)["store_out_of_bounds"](n, memory[:n])
        messages.append(str(caught.value))
        assert (memory[n:] == 0).all(), "the guard must keep the store out of the neighbouring memory"
    fast, checked = messages
    assert expected in fast and line_of("oob-store") in fast
    assert fast == checked


@fast_path_on
def test_threads_after_a_failed_store_still_run_on_the_fast_path() -> None:
    # thread 7 of block (1, 2) fails; on the fast path the other threads of that block run (as on a GPU), and the
    # failure is reported after the block: threads 8..12 and 14..15 stored their values
    n = 96
    a = np.full(n, -1.0, np.float32)
    with pytest.raises(RuntimeError, match="thread 7 "):
        fault_module.build()["store_out_of_bounds"](n, a)
    block_slots = np.arange(5 * 16, 6 * 16)
    stored = a[block_slots]
    t = np.arange(16)
    assert (stored[(t != 7) & (t != 13)] == t[(t != 7) & (t != 13)]).all()


def test_device_assertion_fails_after_the_call_and_other_threads_finish() -> None:
    built = fault_module.build()["assert_positive"]
    x = np.ones(64, np.float32)
    x[5] = -1.0
    y = np.zeros(64, np.float32)
    with pytest.raises(AssertionError, match=rf"{line_of('device-assert')}: x must be positive"):
        built(64, x, y)
    others = np.arange(64) != 5
    np.testing.assert_array_equal(y[others], 2.0)  # the failing thread returned; the others ran
    assert y[5] == 0.0
    y2 = np.zeros(64, np.float32)
    built(64, np.ones(64, np.float32), y2)  # reported once, not carried over
    np.testing.assert_array_equal(y2, 2.0)


# ------------------------------------------------------------------------------------------------------------
# The kernels above do run on the fast path (the emulator variant of their source), and only those that can

with hidet.script_module() as barrier_module:

    @hidet.script
    def with_barrier(x: f32[64]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.block_dim = 64
        attrs.cuda.grid_dim = 1
        s = shared_tensor(f32, [64])
        s[threadIdx.x] = x[threadIdx.x]
        syncthreads()
        x[threadIdx.x] = s[63 - threadIdx.x]


REGISTER_KERNELS = [
    (index_module, "indices_3d"), (index_module, "indices_2d"), (memory_module, "early_return"),
    (memory_module, "dynamic_slots"), (memory_module, "shared_slots"), (memory_module, "say_hello"),
    (fault_module, "store_out_of_bounds"), (fault_module, "assert_positive"),
]
HEADER_KERNELS = [(callee_module, "call_thread_code"), (callee_module, "call_store_at")]


@pytest.mark.parametrize("module, kernel", REGISTER_KERNELS + HEADER_KERNELS)
def test_the_kernel_is_launched_with_its_block_function(module, kernel: str) -> None:
    device, host = emulator_sources(module)
    text = block_function(module, kernel)
    assert text, f"no block function for {kernel}"
    assert re.search(rf'hl_kernel_info info = \{{{kernel}__entry, "{kernel}", 0, {kernel}__block, \{{1, 1, 1\}}\}}',
                     host)
    assert '#include "hidet_lang/cuda_launch.h"' in host  # whose hl_launch passes the block function on
    assert "hl_emu_launch_clusters(info->entry, info->block," in LAUNCH_HEADER
    assert "threadIdx" not in text and "blockIdx" not in text, "the indices must be the loop variables"
    if (module, kernel) in HEADER_KERNELS:  # device functions read the indices from the stack's header
        assert "hl_fast_h->thread_idx = uint3{hl_fast_tx, hl_fast_ty, hl_fast_tz};" in text
        assert "omp simd" not in text
    else:
        assert "#pragma omp simd reduction(|:hl_fast_bad)" in text
        assert "hl_fast_h" not in text and "hl_emu_store_guard" not in text


def test_constant_block_dimensions_are_the_loop_bounds() -> None:
    text = block_function(index_module, "indices_3d")
    assert "hl_fast_tx < 4U" in text and "hl_fast_ty < 3U" in text and "hl_fast_tz < 2U" in text
    assert "((int)4U)" in text  # blockDim.x
    text = block_function(index_module, "indices_2d")
    assert "hl_fast_tx < hl_fast.block_dim.x" in text and "hl_fast_ty < hl_fast.block_dim.y" in text


def test_no_block_function_for_kernels_with_barriers_or_in_checking_mode() -> None:
    assert block_function(barrier_module, "with_barrier") == ""
    _, host = emulator_sources(barrier_module)
    assert '{with_barrier__entry, "with_barrier", 1, 0, {1, 1, 1}}' in host
    device, host = emulator_sources(fault_module, check=True)
    assert "__block(" not in device and "__block," not in host


def test_the_gpu_source_is_unchanged_by_the_fast_path() -> None:
    device, host = emit_cuda(plan_module(lower(fault_module.ir_module())))
    assert "__block" not in device and "hl_fast" not in device
    gpu_branch = host.split("#else\n")[-1].split("#endif")[0]  # the launcher's GPU branch
    assert 'static const hl_kernel_info info = {0, "assert_positive", 0, 0, {1, 1, 1}};' in gpu_branch


@on_emulator
@pytest.mark.parametrize("kernel", ["dynamic_slots", "shared_slots"])
def test_fast_path_and_checking_mode_give_the_same_results(kernel: str) -> None:
    # checking mode runs without the fast path, and checks the shared accesses (each thread its own slot: no race)
    x = np.random.randn(300).astype(np.float32)
    results = []
    for check in (False, True):
        y = np.zeros(300, np.float32)
        memory_module.build(check=check)[kernel](300, x, y)
        results.append(y)
    np.testing.assert_array_equal(results[0], results[1])
