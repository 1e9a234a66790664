"""Hopper's warpgroup MMA (PTX `wgmma`, sm_90a) and warpgroup register reallocation (`setmaxnreg`) in DSL kernels.

A warpgroup (4 warps, 128 consecutive threads from a multiple of 128: `warp_groups` in `hidet_lang.cuda.contexts`)
computes D (64xN, f32) = A (64x16) @ B (16xN) + D with one `wgmma_mma_async`, N a multiple of 8 from 8 to 256,
f16 or bf16 inputs. B, and A unless it comes from registers, lie in shared memory, described by 64-bit matrix
descriptors (`wgmma_descriptor` makes one from a shared tensor). The operation is asynchronous:

    wgmma_fence()                      # before the first mma_async, and after writing its registers
    wgmma_mma_async(acc, desc_a, desc_b)
    wgmma_commit_group()               # closes the group of this thread's mma_async since the last commit
    wgmma_wait_group(0)                # at most 0 groups pending: acc holds the result

The accumulator is a register tensor of N / 2 floats a thread (`wgmma_accumulator(n)`), whose layout maps
(row, column) of the 64xN tile to the register of the thread holding it: thread t of the warpgroup (warp
w = t // 32, g = t % 32 // 4, q = t % 4) holds register r = D[16w + g + 8 (r // 2 % 2), 8 (r // 4) + 2q + r % 2]
(`wgmma_accumulator_row` / `_col` give them). On the CUDA emulator the operation reads shared memory through the
descriptors as the GPU does (a wrong descriptor or swizzle gives the same wrong answer); its checking mode reports
registers touched while their operation is in flight, a missing fence and misaligned descriptors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hidet_lang.frontend import semantics
from hidet_lang.frontend.builtins import LocalTensorRequest, _pointer_to, register_tensor
from hidet_lang.frontend.builtins import _as_dtype as as_dtype
from hidet_lang.ir import expr as E
from hidet_lang.ir.intrinsics import WGMMA_TYPES, intrinsic
from hidet_lang.ir.layout import (
    ComposedLayout,
    ConcatLayout,
    Layout,
    SwizzledLayout,
    local_layout,
    row_major,
    swizzle_alignment,
)
from hidet_lang.ir.types import DataType, PointerType, TensorType, float32, int32, uint32, uint64

WGMMA_M, WGMMA_K = 64, 16
"""The rows of A and D and the depth of one warpgroup MMA (16-bit inputs)."""
WGMMA_N_VALUES = tuple(range(8, 257, 8))
"""The widths N of B and D an m64nNk16 instruction has."""
WGMMA_SWIZZLES = (0, 32, 64, 128)
"""The swizzle modes of a matrix descriptor, in bytes (0: none)."""
_ELEMENT_BYTES = 2
_CORE_ROW_BYTES = 16  # a row of a core matrix: 8 16-bit elements


def wgmma_accumulator_row(thread: Any, register: Any) -> Any:
    """The row of the 64xN accumulator tile that register `register` of thread `thread` (its index in the
    warpgroup, 0-127) holds: 16 (t // 32) + t % 32 // 4 + 8 (r // 2 % 2). Python ints give an int, IR values IR."""
    return _add(_add(_mul(_div(thread, 32), 16), _div(_mod(thread, 32), 4)), _mul(_mod(_div(register, 2), 2), 8))


def wgmma_accumulator_col(thread: Any, register: Any) -> Any:
    """The column of the 64xN accumulator tile that register `register` of thread `thread` holds:
    8 (r // 4) + 2 (t % 4) + r % 2."""
    return _add(_add(_mul(_div(register, 4), 8), _mul(_mod(thread, 4), 2)), _mod(register, 2))


def wgmma_a_fragment_row(thread: Any, element: Any) -> Any:
    """The row of the 64x16 A tile that 16-bit element `element` (0-7; two to a 32-bit register, the lower in bits
    0-15) of thread `thread`'s A fragment holds: 16 (t // 32) + t % 32 // 4 + 8 (e // 2 % 2)."""
    return wgmma_accumulator_row(thread, element)


def wgmma_a_fragment_col(thread: Any, element: Any) -> Any:
    """The column (k) of the A tile that element `element` of thread `thread`'s A fragment holds:
    2 (t % 4) + e % 2 + 8 (e // 4)."""
    return _add(_add(_mul(_mod(thread, 4), 2), _mod(element, 2)), _mul(_div(element, 4), 8))


def wgmma_accumulator_layout(n: int) -> Layout:
    """The layout of a thread's accumulator registers over the 64xN tile: (row, column) -> its register, the
    dims spread over the warpgroup's threads local (`register_tensor(f32, layout=wgmma_accumulator_layout(n))`
    is indexed by tile coordinates, each thread at its own)."""
    _check_n(n)
    inner = local_layout(8, 1) * row_major(1, 2)  # g, the two columns of a register pair
    middle = row_major(2, 1) * local_layout(1, 4)  # rows g and g + 8, q
    outer = local_layout(4, 1) * row_major(1, n // 8)  # the warp, the groups of 8 columns
    return outer * middle * inner


def wgmma_accumulator(n: int) -> LocalTensorRequest:
    """A thread's accumulator of an m64nNk16 MMA: a register tensor of f32 over the 64xN tile, laid out by
    `wgmma_accumulator_layout(n)` (n // 2 registers a thread)."""
    return register_tensor(float32, layout=wgmma_accumulator_layout(n))


def wgmma_descriptor(tile: Any, swizzle: int | None = None, *, k: Any = 0, mn: int = 0,
                     transposed: bool = False) -> E.Expr:
    """The 64-bit matrix descriptor (u64) of a wgmma operand in the shared tensor `tile` (or a `view` of shared
    memory as a tensor of some layout, e.g. core matrices: `row_major(mn // 8, k // 8) * row_major(8, 8)`): the
    16-deep slice from `k` (a multiple of 16: a Python int or an IR value) and the rows of A or columns of B from
    `mn`.

    `tile` is [MN, K] (K-major: A as [64, K] row-major, B as [N, K]), or with `transposed` [K, MN] (MN-major:
    B as the usual row-major [K, N]); its elements are f16 or bf16. The swizzle is the tile's layout's
    (`swizzled_layout(shape, 2, 128)`, or swizzled atoms tiled by an outer layout such as
    `row_major(1, 2) * swizzled_layout([64, 64], 2, 128)` for a [64, 128] tile: 128; any other layout: none);
    `swizzle`, when given, must agree. The layout must be one of PTX's canonical layouts for that swizzle, from
    which the leading and stride byte offsets are read: unswizzled, core matrices of 8 rows of 16 contiguous bytes;
    swizzled, rows of exactly the swizzle's bytes in atoms of 8 rows. A layout that is not is refused, naming the
    element that does not fit. The tile's storage must be aligned to
    its swizzle's period, as a shared tensor of a `swizzled_layout` is (a `view` of one for other layouts)."""
    e = E.convert(tile)
    t = e.type.base if isinstance(e.type, PointerType) else e.type  # a tensor, or a view of shared memory
    if not isinstance(t, TensorType) or len(t.shape) != 2:
        raise TypeError(f"wgmma_descriptor takes a 2-D shared tensor or a view of one (its layout gives the "
                        f"descriptor's strides), got {semantics.describe(e)}")
    if t.dtype.name not in ("float16", "bfloat16"):
        raise TypeError(f"wgmma_descriptor: wgmma reads f16 or bf16 operands, and the tile holds {t.dtype}")
    layout = t.layout if t.layout is not None else row_major(*t.shape)
    mode = _swizzle_of(layout)
    if swizzle is not None and swizzle not in WGMMA_SWIZZLES:
        raise ValueError(f"wgmma_descriptor: swizzle is one of {list(WGMMA_SWIZZLES)} (bytes), got {swizzle!r}")
    if swizzle is not None and swizzle != mode:
        raise ValueError(f"wgmma_descriptor: the tile's layout ({layout}) is {_swizzle_name(mode)}, and the "
                         f"descriptor asks for {_swizzle_name(swizzle)}; the hardware would read other elements "
                         f"than the layout wrote")
    mn_extent, k_extent = (t.shape[1], t.shape[0]) if transposed else (t.shape[0], t.shape[1])
    if isinstance(mn, bool) or not isinstance(mn, int) or not 0 <= mn < mn_extent or mn % 8:
        raise ValueError(f"wgmma_descriptor: mn is a Python int, a multiple of 8 within the tile's {mn_extent} "
                         f"rows of MN, got {mn!r}")
    if k_extent < WGMMA_K or k_extent % WGMMA_K:
        raise ValueError(f"wgmma_descriptor: the tile's K extent ({k_extent}) is not a multiple of {WGMMA_K}")
    origin = _plain_offset(layout, (0, 0))  # where the tile's address points

    def offset(mn_index: int, k_index: int) -> int:  # bytes from the tile's address, before the swizzle
        indices = (k_index, mn_index) if transposed else (mn_index, k_index)
        return _ELEMENT_BYTES * (_plain_offset(layout, indices) - origin)

    run_time_k = not isinstance(k, int) or isinstance(k, bool)
    if not run_time_k and not (0 <= k <= k_extent - WGMMA_K and k % WGMMA_K == 0):
        raise ValueError(f"wgmma_descriptor: k is a multiple of {WGMMA_K} from 0 to {k_extent - WGMMA_K}, got {k!r}")
    slices = range(0, k_extent, WGMMA_K) if run_time_k else [k]
    strides = {canonical_strides(lambda i, j, s=s: offset(mn + i, s + j) - offset(mn, s), mn_extent - mn, mode,
                                 transposed) for s in slices}
    if len(strides) > 1:
        raise ValueError(f"wgmma_descriptor: the tile's 16-deep slices have different strides {sorted(strides)}; "
                         f"one descriptor cannot describe them all for a run-time k")
    lbo, sbo = strides.pop()
    k_index = semantics.cast(k, int32) if run_time_k else k
    start = _plain_offset(layout, (k_index, mn) if transposed else (mn, k_index))
    byte_offset = _mul(_add(start, -origin), _ELEMENT_BYTES)  # IR for a run-time k
    base = e if isinstance(e.type, PointerType) else _pointer_to(e, "wgmma_descriptor")
    return intrinsic("wgmma_make_descriptor", base, semantics.cast(byte_offset, int32), E.Constant(lbo, int32),
                     E.Constant(sbo, int32), E.Constant(mode, int32))


def _swizzle_of(layout: Layout) -> int:
    """The swizzle of the swizzled tiles (atoms) a 16-bit layout is built of, 0 for none; ValueError where a
    descriptor cannot describe it: atoms of several swizzles, a swizzled outer layout, or atoms whose bytes are not
    a multiple of their pattern's period (then the layout's swizzle is not the address's)."""
    parts: list[Layout] = []
    if isinstance(layout, SwizzledLayout):
        return layout.swizzle
    if isinstance(layout, ComposedLayout):
        parts = [layout.outer, layout.inner]
    elif isinstance(layout, ConcatLayout):
        parts = [layout.a, layout.b]
    if not parts:
        return 0
    outer, inner = (_swizzle_of(part) for part in parts)
    if outer:
        raise ValueError(f"wgmma_descriptor: in the tile's layout {layout}, swizzled tiles must be the innermost "
                         f"part (the atoms the outer part arranges)")
    if inner and parts[1].size * _ELEMENT_BYTES % swizzle_alignment(inner):
        raise ValueError(f"wgmma_descriptor: the swizzled atoms of the tile's layout {layout} span "
                         f"{parts[1].size * _ELEMENT_BYTES} bytes, not a multiple of the {inner}-byte swizzle's "
                         f"period of {swizzle_alignment(inner)}")
    return inner


def _plain_offset(layout: Layout, indices: tuple[Any, ...]) -> Any:
    """The storage offset of `indices` in `layout` before the swizzle of its swizzled atoms (their row-major
    offset): a Python int of ints, else IR."""
    if isinstance(layout, SwizzledLayout):
        return row_major(*layout.shape)(*indices)
    if isinstance(layout, ComposedLayout):
        tile = layout.inner.shape
        outer = _plain_offset(layout.outer, tuple(_div(i, t) for i, t in zip(indices, tile)))
        inner = _plain_offset(layout.inner, tuple(_mod(i, t) for i, t in zip(indices, tile)))
        return _add(_mul(outer, layout.inner.size), inner)
    if isinstance(layout, ConcatLayout):
        n = layout.a.ndim
        return _add(_mul(_plain_offset(layout.a, indices[:n]), layout.b.size), _plain_offset(layout.b, indices[n:]))
    return layout(*indices)


def canonical_strides(offset: Callable[[int, int], int], rows: int, swizzle: int, mn_major: bool) -> tuple[int, int]:
    """The leading and stride byte offsets of an operand slice whose element (mn, k) (mn < `rows`, k < 16) lies
    `offset(mn, k)` bytes from its start (before the swizzle), if it has the canonical layout of a descriptor of
    `swizzle` bytes, K-major or `mn_major`; ValueError naming the first element that does not fit."""
    width = swizzle // _ELEMENT_BYTES if swizzle else 8  # elements of MN in an atom row (MN-major)
    if not mn_major:
        row_bytes = swizzle or _CORE_ROW_BYTES
        lbo = 16 if swizzle else offset(0, 8)  # K-major swizzled: the two core matrices are adjacent in a row
        sbo = offset(8, 0) if rows > 8 else 0

        def expected(m: int, kk: int) -> int:
            return (m % 8) * row_bytes + (m // 8) * sbo + (kk % 8) * 2 + (kk // 8) * (16 if swizzle else lbo)
    elif not swizzle:
        sbo = offset(8, 0) if rows > 8 else 0
        lbo = offset(0, 8)

        def expected(m: int, kk: int) -> int:
            return (m % 8) * 2 + (m // 8) * sbo + (kk % 8) * _CORE_ROW_BYTES + (kk // 8) * lbo
    else:
        lbo = offset(width, 0) if rows > width else 0
        sbo = offset(0, 8)

        def expected(m: int, kk: int) -> int:
            return (m % width) * 2 + (m // width) * lbo + (kk % 8) * swizzle + (kk // 8) * sbo
    for name, value in (("leading", lbo), ("stride", sbo)):
        if value < 0 or value % 16 or value >= 1 << 18:
            raise ValueError(f"wgmma_descriptor: the tile's {name} byte offset would be {value}; a descriptor holds "
                             f"multiples of 16 from 0 below 2^18 ({_major(mn_major)}, {_swizzle_name(swizzle)})")
    for m in range(rows):
        for kk in range(WGMMA_K):
            if offset(m, kk) != expected(m, kk):
                raise ValueError(
                    f"wgmma_descriptor: the tile's layout is not a canonical {_major(mn_major)} layout "
                    f"{_swizzle_name(swizzle)}: element (mn={m}, k={kk}) of the slice lies {offset(m, kk)} bytes "
                    f"from its start, and a descriptor would read it at {expected(m, kk)} ("
                    + ("rows of exactly the swizzle's bytes in atoms of 8 rows" if swizzle
                       else "core matrices of 8 rows of 16 contiguous bytes") + ")")
    return lbo, sbo


def wgmma_mma_async(acc: Any, a: Any, b: Any, *, dtype: DataType | str = "float16", trans_a: bool = False,
                    trans_b: bool = False, scale_d: Any = 1, n: int | None = None) -> E.Intrinsic:
    """Start D = A @ B + (scale_d ? D : 0) on the warpgroup's tensor cores: PTX
    `wgmma.mma_async.sync.aligned.m64nNk16.f32.<dtype>.<dtype>` (sm_90a), executed by all 128 threads of the
    warpgroup together.

    `acc`: the accumulator, an f32 register tensor of N / 2 elements (`wgmma_accumulator(n)`; N follows from
    it), or its address with `n`. `a`: A's descriptor (a u64 from `wgmma_descriptor`), or A's fragment in
    registers (four u32, or eight f16 / bf16: element e of thread t is A[wgmma_a_fragment_row(t, e),
    wgmma_a_fragment_col(t, e)]). `b`: B's descriptor. `dtype`: f16 or bf16. `trans_a` / `trans_b`: the operand
    is MN-major (a `transposed` descriptor); A from registers is never transposed. `scale_d`: 0 overwrites D,
    1 accumulates (a Python int or an i32 value). The result is in `acc` only after `wgmma_commit_group()` and a
    `wgmma_wait_group` covering it; `wgmma_fence()` must precede the first mma_async and follow any write of its
    registers."""
    element = as_dtype(dtype)
    if element.name not in ("float16", "bfloat16"):
        raise TypeError(f"wgmma_mma_async multiplies f16 or bf16, got {element}")
    type_name = WGMMA_TYPES[("float16", "bfloat16").index(element.name)]
    acc_ptr, width = _accumulator(acc, n)
    b_desc = _descriptor(b, "b")
    scale = semantics.cast(scale_d, int32)
    a_e = E.convert(a)
    if isinstance(a_e.type, DataType):
        a_desc = _descriptor(a_e, "a")
        return intrinsic(f"wgmma_mma_async_{type_name}_ss", _flag(width), _flag(trans_a), _flag(trans_b), a_desc,
                         b_desc, acc_ptr, scale)
    if trans_a:
        raise ValueError("wgmma_mma_async: A from registers is not transposed (trans_a applies to a descriptor)")
    regs = _fragment(a_e, element)
    return intrinsic(f"wgmma_mma_async_{type_name}_rs", _flag(width), _flag(trans_b), regs, b_desc, acc_ptr, scale)


def wgmma_fence() -> E.Intrinsic:
    """PTX `wgmma.fence.sync.aligned`: this thread's register accesses before it are ordered before the
    following `wgmma_mma_async` (needed before the first one, and after writing an accumulator or A fragment)."""
    return intrinsic("wgmma_fence")


def wgmma_commit_group() -> E.Intrinsic:
    """PTX `wgmma.commit_group.sync.aligned`: close the group of this thread's `wgmma_mma_async` operations
    started since the last commit."""
    return intrinsic("wgmma_commit_group")


def wgmma_wait_group(n: int, acc: Any = None) -> E.Intrinsic:
    """PTX `wgmma.wait_group.sync.aligned n`: wait until at most `n` (a Python int, 0 to 7) of this thread's
    committed groups are pending; the accumulators of the others then hold their results. With `acc` (an
    accumulator tensor, as `wgmma_mma_async` takes it), its registers are tied to the wait on the GPU, so that the
    CUDA compiler moves no read of them above it: pass the accumulator that the code after the wait reads."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= 7:
        raise ValueError(f"wgmma_wait_group takes a Python int from 0 to 7, got {n!r}")
    if acc is None:
        return intrinsic("wgmma_wait_group", E.Constant(n, int32))
    acc_ptr, width = _accumulator(acc, None)
    return intrinsic("wgmma_wait_group_registers", E.Constant(n, int32), E.Constant(width, int32), acc_ptr)


def setmaxnreg_inc(registers: int) -> E.Intrinsic:
    """PTX `setmaxnreg.inc.sync.aligned.u32`: raise the register budget of each thread of the warpgroup to
    `registers` (a Python int, 24 to 256, a multiple of 8), e.g. for the consumer warpgroups of a warp-specialized
    kernel. A no-op on the emulator."""
    return intrinsic("setmaxnreg_inc", _register_count(registers, "setmaxnreg_inc"))


def setmaxnreg_dec(registers: int) -> E.Intrinsic:
    """PTX `setmaxnreg.dec.sync.aligned.u32`: lower the register budget of each thread of the warpgroup to
    `registers` (24 to 256, a multiple of 8), e.g. for a producer warpgroup. A no-op on the emulator."""
    return intrinsic("setmaxnreg_dec", _register_count(registers, "setmaxnreg_dec"))


# ------------------------------------------------------------------------------------------------------ helpers


def _check_n(n: Any) -> int:
    if isinstance(n, bool) or n not in WGMMA_N_VALUES:
        raise ValueError(f"a warpgroup MMA's N is a multiple of 8 from 8 to 256, got {n!r}")
    return n


def _flag(value: Any) -> E.Constant:
    """A Python int or bool as an i32 constant (a template argument)."""
    if not isinstance(value, int):
        raise TypeError(f"wgmma_mma_async: the shape and transpose bits are Python values, got {value!r}")
    return E.Constant(int(value), int32)


def _accumulator(acc: Any, n: int | None) -> tuple[E.Expr, int]:
    """The address of the accumulator registers and N."""
    e = E.convert(acc)
    t = e.type
    if isinstance(t, TensorType):
        if t.dtype != float32 or t.storage_size is None:
            raise TypeError(f"wgmma_mma_async: the accumulator is an f32 register tensor, got "
                            f"{semantics.describe(e)}")
        width = _check_n(2 * t.storage_size)
        if n is not None and n != width:
            raise ValueError(f"wgmma_mma_async: n={n!r}, and the accumulator holds {t.storage_size} registers "
                             f"(N = {width})")
        return semantics.first_element_address(e), width
    if not isinstance(t, PointerType) or t.dtype != float32:
        raise TypeError(f"wgmma_mma_async: the accumulator is an f32 register tensor or its address, got "
                        f"{semantics.describe(e)}")
    if n is None:
        raise ValueError("wgmma_mma_async: give n= with an accumulator's address (or pass the tensor itself)")
    return e, _check_n(n)


def _descriptor(value: Any, what: str) -> E.Expr:
    e = E.convert(value)
    if e.type != uint64:
        raise TypeError(f"wgmma_mma_async: {what} is a matrix descriptor (a u64 from wgmma_descriptor), got "
                        f"{semantics.describe(e)}")
    return e


def _fragment(e: E.Expr, element: DataType) -> E.Expr:
    """A's fragment as a pointer to its four u32 registers."""
    p = _pointer_to(e, "wgmma_mma_async (a)")
    t = p.type
    assert isinstance(t, PointerType)
    if t.dtype.name not in ("uint32", element.name):
        raise TypeError(f"wgmma_mma_async: A's fragment holds u32 or {element} registers, got a pointer to {t.dtype}")
    return p if t.dtype == uint32 else E.Reinterpret(p, PointerType(uint32))


def _register_count(registers: Any, what: str) -> E.Constant:
    if isinstance(registers, bool) or not isinstance(registers, int) or not 24 <= registers <= 256 or registers % 8:
        raise ValueError(f"{what} takes a Python int from 24 to 256, a multiple of 8, got {registers!r}")
    return E.Constant(registers, int32)


def _swizzle_name(swizzle: int) -> str:
    return f"swizzled by {swizzle} bytes" if swizzle else "not swizzled"


def _major(mn_major: bool) -> str:
    return "MN-major" if mn_major else "K-major"


def _arith(op: str, python: Callable[[int, int], int]) -> Callable[[Any, Any], Any]:
    """`op` on two indices: a Python int of two ints, else IR."""

    def apply(a: Any, b: Any) -> Any:
        if all(isinstance(x, int) and not isinstance(x, bool) for x in (a, b)):
            return python(a, b)
        return semantics.binary(op, a, b)

    return apply


_add = _arith("+", lambda a, b: a + b)
_mul = _arith("*", lambda a, b: a * b)
_div = _arith("/", lambda a, b: a // b)  # indices are non-negative: C's truncation is floor division
_mod = _arith("%", lambda a, b: a % b)


__all__ = [
    "WGMMA_K", "WGMMA_M", "WGMMA_N_VALUES", "WGMMA_SWIZZLES", "canonical_strides", "setmaxnreg_dec",
    "setmaxnreg_inc", "wgmma_a_fragment_col", "wgmma_a_fragment_row", "wgmma_accumulator", "wgmma_accumulator_col",
    "wgmma_accumulator_layout", "wgmma_accumulator_row", "wgmma_commit_group", "wgmma_descriptor", "wgmma_fence",
    "wgmma_mma_async", "wgmma_wait_group",
]
