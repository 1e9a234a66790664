"""The emulator sizes each thread's stack from the kernel's local arrays, and a stack overflow is a launch error
naming the kernel and HIDET_LANG_EMU_STACK_KB, never a crash."""

from __future__ import annotations

import numpy as np
import pytest
from emulator_harness import EmulatorLaunchError, EmulatorModule, build_module

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f32, register_tensor
from hidet_lang.cuda import blockIdx, syncthreads, threadIdx


def big_local_array_module(elements: int):
    """32 threads a block, each filling a local array of `elements` floats, then a barrier."""
    with hidet.script_module() as module:

        @hidet.script
        def big_locals(out: f32[64]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 2
            buf = register_tensor(f32, [elements])
            for i in range(elements):
                buf[i] = f32(i + threadIdx.x)
            syncthreads()
            out[blockIdx.x * 32 + threadIdx.x] = buf[elements - 1 - threadIdx.x]
    return module


@pytest.mark.parametrize("stack_kb", [None, "16"])
def test_a_64_kib_local_array_with_a_barrier_runs(monkeypatch: pytest.MonkeyPatch, stack_kb: str | None) -> None:
    if stack_kb is None:
        monkeypatch.delenv("HIDET_LANG_EMU_STACK_KB", raising=False)
    else:
        monkeypatch.setenv("HIDET_LANG_EMU_STACK_KB", stack_kb)  # the frames' share; the array comes on top
    out = np.zeros(64, np.float32)
    big_local_array_module(16384).build()(out)
    np.testing.assert_array_equal(out, np.full(64, 16383, np.float32))


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's stack limit")
def test_local_arrays_larger_than_a_stack_may_be_are_a_launch_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA's largest local array (512 KiB, larger ones are build errors) with more room for frames than is left."""
    monkeypatch.setenv("HIDET_LANG_EMU_STACK_KB", "600")
    with pytest.raises(RuntimeError, match=r"kernel 'big_locals': its local arrays \(512 KiB\) and "
                                           r"HIDET_LANG_EMU_STACK_KB=600 need more than"):
        big_local_array_module(131072).build()(np.zeros(64, np.float32))


RECURSION_SRC = r"""
#include "hidet_lang/cuda_primitives.h"

static __noinline__ int deep(int n) {
    volatile char frame[4096];
    frame[0] = (char)n;
    if (n == 0) return 0;
    return deep(n - 1) + frame[0];
}

extern "C" __global__ void recurse(int32_t depth, int32_t *out) {
    int r = deep(depth);
    __syncthreads();
    out[threadIdx.x] = r;
}
"""


@pytest.fixture(scope="module")
def recursion(tmp_path_factory: pytest.TempPathFactory) -> EmulatorModule:
    return build_module(RECURSION_SRC, tmp_path_factory.mktemp("emu_recursion"), "recursion")


@pytest.mark.parametrize("blocks", [1, 4], ids=["calling-thread", "workers"])
@pytest.mark.parametrize("threads", [1, 32], ids=["plain", "fibers"])
def test_a_stack_overflow_is_a_launch_error_and_the_process_lives_on(recursion: EmulatorModule, threads: int,
                                                                     blocks: int) -> None:
    out = np.zeros(32, np.int32)
    for _ in range(3):
        with pytest.raises(EmulatorLaunchError, match=r"kernel 'recurse', block \(\d, 0, 0\): thread 0: stack "
                                                      r"overflow: .*HIDET_LANG_EMU_STACK_KB"):
            recursion.launch("recurse", blocks, threads, 1000, out)  # 4 MB of frames
        recursion.launch("recurse", blocks, threads, 4, out)  # the worker and its stacks are fine
        assert (out[:threads] == 4 + 3 + 2 + 1).all()
