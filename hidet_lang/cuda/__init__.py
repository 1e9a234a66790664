"""CUDA primitives for kernels: thread and block indices, barriers, warp operations, atomics, shared memory.

Use them inside `cuda_kernel` / `cuda_internal` functions (`from hidet_lang.cuda import threadIdx, ...`).
Each evaluates, while the kernel is parsed, to an IR intrinsic that only the CUDA code generator (and the
CUDA emulator) can lower; using one in a CPU function is an error at that line. The intrinsics' names, types,
minimum architectures and spellings are the table `hidet_lang.ir.intrinsics.INTRINSICS`; the functions here check
and convert their arguments and build the table's intrinsic.
"""

from __future__ import annotations

from typing import Any

from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import LocalTensorRequest, _pointer_to, local_tensor_request, printf, register_tensor
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir import expr as E
from hidet_lang.ir.intrinsics import CP_ASYNC_BYTES, CUDA_INTRINSICS, cp_async_name, intrinsic
from hidet_lang.ir.layout import Layout
from hidet_lang.ir.stmt import DeclScope
from hidet_lang.ir.types import DataType, PointerType, float32, int32, uint32
from hidet_lang.lazy import homes_of, lazy_attributes

FULL_MASK = 0xFFFFFFFF
# Element types of the tensor-core fragment registers: 32-bit words, or the 16-bit halves two of them hold.
_HALF_FRAGMENT_DTYPES = ("uint32", "int32", "float16", "bfloat16", "uint16", "int16")
_TF32_FRAGMENT_DTYPES = ("float32", "uint32", "int32")


class _Dim3:
    """`threadIdx`, `blockIdx`, `blockDim`, `gridDim`: `.x`, `.y`, `.z` are i32 IR values."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def _axis(self, axis: str) -> E.Intrinsic:
        return intrinsic(f"{self.name}.{axis}")

    @property
    def x(self) -> E.Intrinsic:
        return self._axis("x")

    @property
    def y(self) -> E.Intrinsic:
        return self._axis("y")

    @property
    def z(self) -> E.Intrinsic:
        return self._axis("z")

    def __repr__(self) -> str:
        return self.name


threadIdx = _Dim3("threadIdx")
blockIdx = _Dim3("blockIdx")
blockDim = _Dim3("blockDim")
gridDim = _Dim3("gridDim")


def _scalar(value: Any, what: str) -> E.Expr:
    e = E.convert(value)
    semantics.scalar_type(e, what)
    return e


def _mask(mask: Any) -> E.Expr:
    return semantics.cast(mask, uint32)


def syncthreads() -> E.Intrinsic:
    """Barrier for all threads of the block (`__syncthreads`)."""
    return intrinsic("syncthreads")


def syncthreads_and(predicate: Any) -> E.Intrinsic:
    """Barrier; nonzero iff the predicate is nonzero for every thread of the block."""
    return intrinsic("syncthreads_and", semantics.cast(predicate, int32))


def syncthreads_or(predicate: Any) -> E.Intrinsic:
    """Barrier; nonzero iff the predicate is nonzero for some thread of the block."""
    return intrinsic("syncthreads_or", semantics.cast(predicate, int32))


def syncthreads_count(predicate: Any) -> E.Intrinsic:
    """Barrier; the number of threads of the block whose predicate is nonzero."""
    return intrinsic("syncthreads_count", semantics.cast(predicate, int32))


def syncwarp(mask: Any = FULL_MASK) -> E.Intrinsic:
    """Barrier for the threads of the warp named in `mask`."""
    return intrinsic("syncwarp", _mask(mask))


def _shuffle(kind: str, mask: Any, value: Any, lane: Any, width: Any) -> E.Intrinsic:
    return intrinsic(kind, _mask(mask), _scalar(value, kind), semantics.cast(lane, int32), semantics.cast(width, int32))


def shfl_sync(mask: Any, value: Any, src_lane: Any, width: int = 32) -> E.Intrinsic:
    """`value` as held by lane `src_lane` of the warp (within groups of `width` lanes)."""
    return _shuffle("shfl_sync", mask, value, src_lane, width)


def shfl_up_sync(mask: Any, value: Any, delta: Any, width: int = 32) -> E.Intrinsic:
    """`value` from the lane `delta` below this one (this lane's own value where there is none)."""
    return _shuffle("shfl_up_sync", mask, value, delta, width)


def shfl_down_sync(mask: Any, value: Any, delta: Any, width: int = 32) -> E.Intrinsic:
    """`value` from the lane `delta` above this one (this lane's own value where there is none)."""
    return _shuffle("shfl_down_sync", mask, value, delta, width)


def shfl_xor_sync(mask: Any, value: Any, lane_mask: Any, width: int = 32) -> E.Intrinsic:
    """`value` from the lane whose index is this lane's xor `lane_mask`."""
    return _shuffle("shfl_xor_sync", mask, value, lane_mask, width)


def ballot_sync(mask: Any, predicate: Any) -> E.Intrinsic:
    """A bit mask of the lanes in `mask` whose predicate is nonzero."""
    return intrinsic("ballot_sync", _mask(mask), semantics.cast(predicate, int32))


def any_sync(mask: Any, predicate: Any) -> E.Intrinsic:
    """Nonzero iff the predicate is nonzero for some lane in `mask`."""
    return intrinsic("any_sync", _mask(mask), semantics.cast(predicate, int32))


def all_sync(mask: Any, predicate: Any) -> E.Intrinsic:
    """Nonzero iff the predicate is nonzero for every lane in `mask`."""
    return intrinsic("all_sync", _mask(mask), semantics.cast(predicate, int32))


def _atomic(kind: str, address: Any, *values: Any) -> E.Intrinsic:
    """The atomic `kind` on `*address`; the table's element types say which pointees it takes."""
    addr = E.convert(address)
    t = addr.type
    if not isinstance(t, PointerType):
        raise TypeError(f"{kind} needs an address, e.g. {kind}(~hist[k], 1); got {semantics.describe(addr)}")
    return intrinsic(kind, addr, *(semantics.cast(v, t.dtype) for v in values))


def atomic_add(address: Any, value: Any) -> E.Intrinsic:
    """Atomically add `value` to `*address`; the old value."""
    return _atomic("atomic_add", address, value)


def atomic_sub(address: Any, value: Any) -> E.Intrinsic:
    """Atomically subtract `value` from `*address`; the old value."""
    return _atomic("atomic_sub", address, value)


def atomic_min(address: Any, value: Any) -> E.Intrinsic:
    """Atomically store min(*address, value); the old value (integers)."""
    return _atomic("atomic_min", address, value)


def atomic_max(address: Any, value: Any) -> E.Intrinsic:
    """Atomically store max(*address, value); the old value (integers)."""
    return _atomic("atomic_max", address, value)


def atomic_exchange(address: Any, value: Any) -> E.Intrinsic:
    """Atomically store `value`; the old value."""
    return _atomic("atomic_exchange", address, value)


def atomic_cas(address: Any, compare: Any, value: Any) -> E.Intrinsic:
    """Atomically store `value` if `*address == compare`; the old value."""
    return _atomic("atomic_cas", address, compare, value)


def _operand_pointer(value: Any, what: str, dtypes: tuple[str, ...], as_dtype_: DataType) -> E.Expr:
    """`value` (a pointer, `~t[i]`, or a tensor) as a pointer of `as_dtype_`; its elements must be of `dtypes`."""
    e = _pointer_to(value, what)
    t = e.type
    assert isinstance(t, PointerType)
    if t.dtype.name not in dtypes:
        raise TypeError(f"{what} needs a pointer to {' or '.join(dtypes)}, got a pointer to {t.dtype}")
    if isinstance(t.base, DataType) and t.base == as_dtype_:
        return e
    return E.Reinterpret(e, PointerType(as_dtype_))


def mma_m16n8k16_f16_f32(a: Any, b: Any, c: Any) -> E.Intrinsic:
    """Tensor-core matrix multiply-accumulate of one warp: C (16x8, f32) += A (16x16, f16) @ B (16x8, f16), PTX
    `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32` (sm_80+; the emulator gives the same fragments).

    Call it with the addresses of each lane's fragment registers, e.g.
    `a = register_tensor(u32, [4]); b = register_tensor(u32, [2]); c = register_tensor(f32, [4])` and
    `mma_m16n8k16_f16_f32(~a[0], ~b[0], ~c[0])` (`a` and `b` may also be f16 tensors of 8 and 4 halves; `c` is
    updated in place). Lane `l`, with g = l // 4 and t = l % 4, holds (a 32-bit register holds two halves, the
    lower-indexed element in bits 0-15; as f16 tensors, element 2r and 2r+1 of register r):
    - a[0] = A[g, 2t:2t+2], a[1] = A[g+8, 2t:2t+2], a[2] = A[g, 2t+8:2t+10], a[3] = A[g+8, 2t+8:2t+10];
    - b[0] = B[2t:2t+2, g], b[1] = B[2t+8:2t+10, g];
    - c[0], c[1] = C[g, 2t], C[g, 2t+1]; c[2], c[3] = C[g+8, 2t], C[g+8, 2t+1].
    Warp-collective: all 32 lanes of a full warp must execute it together (the emulator reports a partial warp).
    The emulator multiplies halves exactly in f32 and accumulates in f32 in k order; the GPU's accumulation order
    is unspecified, so results may differ from it in the last bits of f32."""
    return intrinsic("mma_m16n8k16_f16_f32",
                     _operand_pointer(a, "mma_m16n8k16_f16_f32 (a)", _HALF_FRAGMENT_DTYPES, uint32),
                     _operand_pointer(b, "mma_m16n8k16_f16_f32 (b)", _HALF_FRAGMENT_DTYPES, uint32),
                     _operand_pointer(c, "mma_m16n8k16_f16_f32 (c)", ("float32",), float32))


def mma_m16n8k8_tf32_f32(a: Any, b: Any, c: Any) -> E.Intrinsic:
    """Tensor-core matrix multiply-accumulate of one warp on f32 data read as TF32: C (16x8, f32) += A (16x8) @
    B (8x8), PTX `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32` (sm_80+; the emulator gives the same
    fragments).

    `a`, `b` and `c` are the addresses of each lane's fragment registers, e.g. `a = register_tensor(f32, [4]);
    b = register_tensor(f32, [2]); c = register_tensor(f32, [4])` (`a` and `b` may also be u32 tensors of the
    bits). Lane `l`, with g = l // 4 and t = l % 4, holds a[0..3] = A[g, t], A[g+8, t], A[g, t+4], A[g+8, t+4];
    b[0..1] = B[t, g], B[t+4, g]; c as for `mma_m16n8k16_f16_f32` (updated in place). The tensor cores read each
    operand's sign, exponent and upper 10 mantissa bits, dropping the lower 13 (truncation), and so does the
    emulator: round the operands first with `cvt_rna_tf32_f32` for round-to-nearest. Products of TF32 values are
    exact in f32; the emulator adds them to C in k order in f32 (the GPU's order is unspecified: results may
    differ in the last bits of f32). Warp-collective: all 32 lanes of a full warp."""
    return intrinsic("mma_m16n8k8_tf32_f32",
                     _operand_pointer(a, "mma_m16n8k8_tf32_f32 (a)", _TF32_FRAGMENT_DTYPES, uint32),
                     _operand_pointer(b, "mma_m16n8k8_tf32_f32 (b)", _TF32_FRAGMENT_DTYPES, uint32),
                     _operand_pointer(c, "mma_m16n8k8_tf32_f32 (c)", ("float32",), float32))


def cvt_rna_tf32_f32(x: Any) -> E.Intrinsic:
    """`x` (f32) rounded to TF32 (10 mantissa bits) to nearest, ties away from zero, PTX `cvt.rna.tf32.f32`
    (sm_80+): an f32 whose lower 13 mantissa bits are zero, the operand `mma_m16n8k8_tf32_f32` reads exactly. NaN
    and infinity are kept; a value within half a TF32 step of f32's largest rounds to infinity."""
    return intrinsic("cvt_rna_tf32_f32", semantics.cast(x, float32))


def ldmatrix_x4(regs: Any, smem_row: Any) -> E.Intrinsic:
    """Load four 8x8 matrices of 16-bit elements from shared memory into one warp's registers, PTX
    `ldmatrix.sync.aligned.m8n8.x4.shared.b16` (sm_80+ here; the emulator gives the same fragments).

    `regs`: the address of this lane's 4 registers (`~r[0]` with `r = register_tensor(u32, [4])`, or an f16
    tensor of 8). `smem_row`: the shared-memory address of one 16-byte (8-element, 16-byte aligned) row: lane `l`
    gives row `l % 8` of matrix `l // 8`. Lane `l` receives in register `i` elements 2t and 2t+1 (t = l % 4; the
    lower in bits 0-15) of row `l // 4` of matrix `i`. Loading a 16x16 row-major A tile with lane `l` pointing at
    row `l % 8 + 8 * (l // 8 % 2)`, column `8 * (l // 16)` gives exactly the `a` fragment of
    `mma_m16n8k16_f16_f32`. Warp-collective: all 32 lanes of a full warp."""
    return intrinsic("ldmatrix_x4", _operand_pointer(regs, "ldmatrix_x4 (regs)", _HALF_FRAGMENT_DTYPES, uint32),
                     _pointer_to(smem_row, "ldmatrix_x4"))


def mma_m16n8k16_bf16_f32(a: Any, b: Any, c: Any) -> E.Intrinsic:
    """`mma_m16n8k16_f16_f32` with bf16 inputs: C (16x8, f32) += A (16x16, bf16) @ B (16x8, bf16), PTX
    `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32` (sm_80+), with the same fragment layouts (`a` and `b`
    may also be bf16 tensors of 8 and 4 elements). Products of bf16s are exact in f32, as those of halves."""
    return intrinsic("mma_m16n8k16_bf16_f32",
                     _operand_pointer(a, "mma_m16n8k16_bf16_f32 (a)", _HALF_FRAGMENT_DTYPES, uint32),
                     _operand_pointer(b, "mma_m16n8k16_bf16_f32 (b)", _HALF_FRAGMENT_DTYPES, uint32),
                     _operand_pointer(c, "mma_m16n8k16_bf16_f32 (c)", ("float32",), float32))


def ldmatrix_x4_trans(regs: Any, smem_row: Any) -> E.Intrinsic:
    """`ldmatrix_x4` with each 8x8 matrix transposed, PTX `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`
    (sm_80+; the emulator gives the same fragments). Lane `l` gives the address of row `l % 8` of matrix `l // 8`
    as for `ldmatrix_x4`, and receives in register `i` element `l // 4` of rows 2t and 2t+1 (t = l % 4; row 2t in
    bits 0-15) of matrix `i`. Loading a 16x16 block of a row-major k x n tile with lane `l` pointing at row
    `l % 16`, column `8 * (l // 16)` gives the `b` fragments of two `mma_m16n8k16` n-tiles: registers 0-1 the
    first (columns 0-7), registers 2-3 the second (columns 8-15). Warp-collective: all 32 lanes of a full warp."""
    return intrinsic("ldmatrix_x4_trans",
                     _operand_pointer(regs, "ldmatrix_x4_trans (regs)", _HALF_FRAGMENT_DTYPES, uint32),
                     _pointer_to(smem_row, "ldmatrix_x4_trans"))


def cp_async(dst_shared: Any, src_global: Any, nbytes: int) -> E.Intrinsic:
    """Asynchronously copy `nbytes` (4, 8 or 16, a Python int; both addresses aligned to it) from global to
    shared memory: PTX `cp.async.ca.shared.global` (4, 8) or `cp.async.cg.shared.global` (16), sm_80+. The data
    is only guaranteed in place after `cp_async_commit_group()` and `cp_async_wait_all()` /
    `cp_async_wait_group(n)` (and a barrier before other threads read it). On the emulator the copy is
    synchronous and commit / wait are no-ops: correct for every kernel that waits before reading."""
    if isinstance(nbytes, bool) or nbytes not in CP_ASYNC_BYTES:
        raise ValueError(f"cp_async copies 4, 8 or 16 bytes (a Python int), got {nbytes!r}")
    return intrinsic(cp_async_name(nbytes), _pointer_to(dst_shared, "cp_async (dst)"),
                     _pointer_to(src_global, "cp_async (src)"))


def cp_async_commit_group() -> E.Intrinsic:
    """Close the group of this thread's `cp_async` copies issued since the last commit (PTX
    `cp.async.commit_group`; a no-op on the emulator)."""
    return intrinsic("cp_async_commit_group")


def cp_async_wait_group(n: int) -> E.Intrinsic:
    """Wait until at most `n` (a Python int, 0 to 7) of this thread's committed `cp_async` groups are pending (PTX
    `cp.async.wait_group n`; a no-op on the emulator, whose copies are synchronous)."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 7:
        raise ValueError(f"cp_async_wait_group takes a Python int from 0 to 7, got {n!r}")
    return intrinsic("cp_async_wait_group", E.Constant(n, int32))


def cp_async_wait_all() -> E.Intrinsic:
    """Wait for all of this thread's `cp_async` copies (PTX `cp.async.wait_all`; a no-op on the emulator)."""
    return intrinsic("cp_async_wait_all")


def shared_tensor(dtype: DataType | str, shape: Any = None, layout: Layout | None = None) -> LocalTensorRequest:
    """A tensor in the block's shared memory (constant shape); `layout` as in `register_tensor` (the shape
    follows from it when omitted; e.g. `strided_layout([64, 8], strides=[9, 1])` pads each row)."""
    return local_tensor_request(dtype, shape, layout, DeclScope.SHARED, "shared_tensor")


def dynamic_shared_memory(byte_offset: Any, dtype: DataType | str) -> E.Intrinsic:
    """A pointer of `dtype` into the block's dynamic shared memory, `byte_offset` bytes from its start."""
    return intrinsic("dynamic_shared_memory", semantics.cast(byte_offset, int32), element=as_dtype(dtype))


def lane_id() -> E.Expr:
    """The thread's lane in its warp: threadIdx.x % 32 (for one-dimensional blocks)."""
    return semantics.binary("%", threadIdx.x, 32)


def warp_id() -> E.Expr:
    """The thread's warp in its block: threadIdx.x / 32 (for one-dimensional blocks)."""
    return semantics.binary("/", threadIdx.x, 32)


__all__ = [
    "cp_async", "cp_async_commit_group", "cp_async_wait_all", "cp_async_wait_group", "ldmatrix_x4",
    "ldmatrix_x4_trans", "mma_m16n8k16_bf16_f32", "mma_m16n8k16_f16_f32", "mma_m16n8k8_tf32_f32", "cvt_rna_tf32_f32",
    "all_sync", "any_sync", "atomic_add", "atomic_cas", "atomic_exchange", "atomic_max", "atomic_min", "atomic_sub",
    "CUDA_INTRINSICS", "ballot_sync", "blockDim", "blockIdx", "dynamic_shared_memory", "gridDim", "lane_id", "printf",
    "register_tensor", "shared_tensor", "shfl_down_sync", "shfl_sync", "shfl_up_sync", "shfl_xor_sync",
    "syncthreads", "syncthreads_and", "syncthreads_count", "syncthreads_or", "syncwarp", "threadIdx", "warp_id",
]

# Hopper: mbarrier and TMA
from hidet_lang.cuda.mbarrier import (  # noqa: E402
    fence_mbarrier_init,
    mbarrier_arrive,
    mbarrier_arrive_expect_tx,
    mbarrier_expect_tx,
    mbarrier_init,
    mbarrier_try_wait,
    mbarrier_wait,
)
from hidet_lang.cuda.tma import (  # noqa: E402
    TensorMap,
    fence_proxy_async_shared,
    tma_box_bytes,
    tma_load,
    tma_store,
    tma_store_commit_group,
    tma_store_wait_group,
)
from hidet_lang.ir.layout import swizzled_layout  # noqa: E402

__all__ += [
    "TensorMap", "fence_mbarrier_init", "fence_proxy_async_shared", "mbarrier_arrive", "mbarrier_arrive_expect_tx",
    "mbarrier_expect_tx", "mbarrier_init", "mbarrier_try_wait", "mbarrier_wait", "swizzled_layout", "tma_box_bytes",
    "tma_load", "tma_store", "tma_store_commit_group", "tma_store_wait_group",
]

# Hopper: warpgroup MMA and register reallocation
from hidet_lang.cuda.wgmma import (  # noqa: E402
    setmaxnreg_dec,
    setmaxnreg_inc,
    wgmma_a_fragment_col,
    wgmma_a_fragment_row,
    wgmma_accumulator,
    wgmma_accumulator_col,
    wgmma_accumulator_layout,
    wgmma_accumulator_row,
    wgmma_commit_group,
    wgmma_descriptor,
    wgmma_fence,
    wgmma_mma_async,
    wgmma_wait_group,
)

__all__ += [
    "setmaxnreg_dec", "setmaxnreg_inc", "wgmma_a_fragment_col", "wgmma_a_fragment_row", "wgmma_accumulator",
    "wgmma_accumulator_col", "wgmma_accumulator_layout", "wgmma_accumulator_row", "wgmma_commit_group",
    "wgmma_descriptor", "wgmma_fence", "wgmma_mma_async", "wgmma_wait_group",
]

# Hopper: thread block clusters
from hidet_lang.cuda.cluster import (  # noqa: E402
    cluster_arrive,
    cluster_map_shared,
    cluster_rank,
    cluster_size,
    cluster_sync,
    cluster_wait,
    mbarrier_arrive_cluster,
    tma_load_multicast,
)

__all__ += [
    "cluster_arrive", "cluster_map_shared", "cluster_rank", "cluster_size", "cluster_sync", "cluster_wait",
    "mbarrier_arrive_cluster", "tma_load_multicast",
]

# vector accesses of global memory
from hidet_lang.cuda.vector_access import address_aligned, copy_vector  # noqa: E402

__all__ += ["address_aligned", "copy_vector"]

# The GPU's runtime, given on first use (the language imports no code generator): streams (`Stream`,
# `current_stream`, `with stream(s):`, `synchronize`), the caching allocator's memory (`memory_stats`,
# `empty_cache`, `reset_peak_memory_stats`) and `record_stream`, which keeps a buffer used on another stream from
# being reused before that stream's work is done. Not DSL functions: they are called from Python around kernels.
# Kernel launches go to the calling thread's current stream; device arrays come from the caching allocator. On the
# CUDA emulator streams are names only and the statistics stay zero ('cuda' arrays live in host memory there).
_RUNTIME_HOMES = {
    **homes_of("codegen.runtime.allocator", "DeviceOutOfMemoryError", "empty_cache", "memory_stats",
               "reset_peak_memory_stats"),
    **homes_of("codegen.runtime.streams", "Stream", "current_stream", "default_stream", "record_stream", "stream",
               "synchronize"),
    **homes_of("codegen.runtime.profiling", "profile"),  # counts of emulated kernels (hidet_lang.cuda.profile_report)
}
__all__ += sorted(_RUNTIME_HOMES)
__getattr__, __dir__ = lazy_attributes(__name__, _RUNTIME_HOMES)
