"""Vector accesses of global memory: one load or store of 4, 8 or 16 bytes (16: LDG.E.128 / STG.E.128), the
widest a thread makes, so that a memory-bound kernel moves whole vectors of elements per instruction::

    @hidet.script
    def scale(n: i32, x: f32[n, 4], y: f32[n, 4]):
        attrs.func_kind = "cuda_kernel"
        attrs.cuda.grid_dim = (n + 127) // 128
        attrs.cuda.block_dim = 128
        i = blockIdx.x * 128 + threadIdx.x
        if i < n and address_aligned(~x[0, 0], 16) and address_aligned(~y[0, 0], 16):
            v = register_tensor(f32, [4])
            copy_vector(~v[0], ~x[i, 0], 16)          # one 16-byte load
            for k in range(4):
                v[k] = v[k] * 2.0
            copy_vector(~y[i, 0], ~v[0], 16)          # one 16-byte store

Both addresses of a copy must be aligned to its width: a misaligned one faults on the GPU, and the emulator's
checking mode names its DSL line. `address_aligned` is the test a kernel makes before its vector path (the
rule-based scheduler's element-wise kernels take their element path where it fails).
"""

from __future__ import annotations

from typing import Any

from hidet_lang.frontend.builtins import _pointer_to
from hidet_lang.ir import expr as E
from hidet_lang.ir.intrinsics import ADDRESS_ALIGNED, VECTOR_COPY_BYTES, copy_vector_name, intrinsic
from hidet_lang.ir.types import int32


def copy_vector(dst: Any, src: Any, nbytes: int) -> E.Intrinsic:
    """Copy `nbytes` (4, 8 or 16, a Python int) from address `src` to address `dst` as one access of that width;
    both addresses aligned to it."""
    if isinstance(nbytes, bool) or nbytes not in VECTOR_COPY_BYTES:
        raise ValueError(f"copy_vector copies 4, 8 or 16 bytes (a Python int), got {nbytes!r}")
    return intrinsic(copy_vector_name(nbytes), _pointer_to(dst, "copy_vector (dst)"),
                     _pointer_to(src, "copy_vector (src)"))


def address_aligned(address: Any, nbytes: int) -> E.Intrinsic:
    """1 when `address` is a multiple of `nbytes` (a power of two, a Python int), else 0 (an i32)."""
    if isinstance(nbytes, bool) or not isinstance(nbytes, int) or nbytes < 1 or nbytes & (nbytes - 1):
        raise ValueError(f"address_aligned takes a power of two (a Python int), got {nbytes!r}")
    return intrinsic(ADDRESS_ALIGNED, _pointer_to(address, "address_aligned"), E.Constant(nbytes, int32))


__all__ = ["address_aligned", "copy_vector"]
