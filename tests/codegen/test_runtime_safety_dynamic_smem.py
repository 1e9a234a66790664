"""The emulator checks the dynamic shared memory like a `shared_tensor`, against the launch's dynamic size: a store
past it stops the launch (checking mode or not) instead of corrupting the process, and checking mode finds reads
of bytes no thread wrote."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs, f32
from hidet_lang.cuda import dynamic_shared_memory, syncthreads, threadIdx

pytestmark = pytest.mark.skipif(backend() != "emulator", reason="the emulator's checking mode")

LINES = Path(__file__).read_text().splitlines()


def line_of(marker: str) -> str:
    """`test_runtime_safety_dynamic_smem.py:<line>` of the line carrying `# MARK: <marker>`."""
    number = next(i for i, text in enumerate(LINES, 1) if f"# MARK: {marker}" in text)
    return f"test_runtime_safety_dynamic_smem.py:{number}"


def staging_module(store_offset: int, load_offset: int, barrier: bool = True):
    """32 threads store at `[threadIdx.x + store_offset]` of 256 bytes of dynamic shared memory, then read
    `[threadIdx.x + load_offset]` into `out`."""
    with hidet.script_module() as module:

        @hidet.script
        def stage(out: f32[32]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = 32
            attrs.cuda.grid_dim = 2
            attrs.cuda.dynamic_smem_bytes = 256
            buf = dynamic_shared_memory(0, f32)
            buf[threadIdx.x + store_offset] = f32(threadIdx.x)  # MARK: store
            if barrier:
                syncthreads()
            out[threadIdx.x] = buf[threadIdx.x + load_offset]  # MARK: load
    return module


@pytest.mark.parametrize("check", [False, True], ids=["guard", "checking"])
@pytest.mark.parametrize("barrier", [False, True], ids=["fast-path", "fibers"])
def test_a_store_past_the_dynamic_shared_memory_stops_the_launch(check: bool, barrier: bool) -> None:
    out = np.zeros(32, np.float32)
    staging_module(32, 32, barrier).build(check=check)(out)  # the last 32 of its 64 floats: fine
    np.testing.assert_array_equal(out, np.arange(32))
    pattern = rf"thread 0: out-of-bounds access: writes buf\[100\], 400 bytes from the start of " \
              rf"'dynamic_shared_memory', which has 256 bytes, at .*{line_of('store')}"
    for _ in range(3):  # and the process lives on
        with pytest.raises(RuntimeError, match=pattern):
            staging_module(100, 0, barrier).build(check=check)(out)


def test_checking_mode_finds_an_uninitialized_read_of_dynamic_shared_memory() -> None:
    pattern = rf"reads dynamic_shared_memory\[\d+\] \(shared, .*\), which no thread of the block has written: " \
              rf"uninitialized shared memory, at .*{line_of('load')}"
    with pytest.raises(RuntimeError, match=pattern):
        staging_module(0, 32).build(check=True)(np.zeros(32, np.float32))
