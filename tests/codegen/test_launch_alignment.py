"""A tensor argument that an asynchronous copy reads from must be aligned to the copy's size: the launcher refuses
a misaligned one with an error at the copy's DSL line (on a GPU the copy would fault; the emulator, which copies
with memcpy, would have computed what the GPU cannot)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hidet_lang as hidet
from codegen.runtime.cuda_backend import backend
from hidet_lang import attrs
from hidet_lang.cuda import blockIdx, cp_async, cp_async_wait_all, shared_tensor, syncthreads, threadIdx
from hidet_lang.types import f32

ROWS, COLS = 4, 64


def copy_module(nbytes: int) -> hidet.ScriptModule:
    """A kernel that copies a [ROWS, COLS] f32 tensor through shared memory in `nbytes`-byte asynchronous copies."""
    per_copy = nbytes // 4
    with hidet.script_module() as module:

        @hidet.script
        def copy_rows(a: f32[ROWS, COLS], b: f32[ROWS, COLS]):
            attrs.func_kind = "cuda_kernel"
            attrs.cuda.block_dim = COLS // per_copy
            attrs.cuda.grid_dim = ROWS
            row = shared_tensor(f32, [COLS])
            cp_async(~row[threadIdx.x * per_copy], ~a[blockIdx.x, threadIdx.x * per_copy], nbytes)
            cp_async_wait_all()
            syncthreads()
            for j in range(per_copy):
                b[blockIdx.x, threadIdx.x * per_copy + j] = row[threadIdx.x * per_copy + j]

    return module


def shifted(values: np.ndarray, shift_bytes: int) -> np.ndarray:
    """`values` copied into a buffer at an address `shift_bytes` past a 64-byte boundary."""
    raw = np.zeros(values.nbytes + 128, np.uint8)
    start = (-raw.ctypes.data) % 64 + shift_bytes
    placed = raw[start:start + values.nbytes].view(values.dtype).reshape(values.shape)
    placed[...] = values
    return placed


@settings(max_examples=6, deadline=None)
@given(nbytes=st.sampled_from([4, 8, 16]), shift=st.sampled_from([0, 4, 8, 12]), seed=st.integers(0, 2**32 - 1))
def test_a_copy_runs_from_an_aligned_argument_and_is_refused_from_a_misaligned_one(nbytes: int, shift: int,
                                                                                   seed: int) -> None:
    values = np.random.default_rng(seed).standard_normal((ROWS, COLS)).astype(np.float32)
    a = shifted(values, shift)
    b = np.zeros_like(values)
    kernel = copy_module(nbytes).build(target="cuda:sm_80")
    # on a GPU a numpy argument is copied into (aligned) device memory; the emulator computes in place
    if shift % nbytes == 0 or backend() != "emulator":
        kernel(a, b)
        np.testing.assert_array_equal(b, values)
        return
    with pytest.raises(RuntimeError, match=rf"test_launch_alignment.py:\d+: kernel 'copy_rows': the argument 'a' is "
                                           rf"at 0x[0-9a-f]+, which a {nbytes}-byte asynchronous copy"):
        kernel(a, b)
