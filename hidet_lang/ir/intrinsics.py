"""The intrinsics of CUDA code: one table, `INTRINSICS`, says for each what it takes and returns, where it may
appear, what it does besides computing its value and how the code generators spell it; the DSL functions
(`hidet_lang.cuda`) build them through it (`intrinsic`), and the checks (`hidet_lang.passes.kind_rules`: a CUDA
intrinsic in a CPU function, one newer than the target's architecture), the passes and both CUDA emitters read it.

Adding an intrinsic is one `IntrinsicSpec` in the table, plus its two bodies in the primitives header
`codegen/include/hidet_lang/cuda_primitives.h` (a GPU one and an emulator one) and the DSL function that calls
`intrinsic`. `tests/codegen/test_intrinsic_table.py` emits, compiles and runs every entry.

The other intrinsics of the IR are operations of every target that the C emitter spells by their operands' type
(the math functions `exp`, `min`, ..., and `printf`) and the CPU's vector operations (`VECTOR_INTRINSICS`, spelled
as the helpers of `cpu_vectors.h` and typed by `hidet_lang.frontend.vectors`); they are not in the table.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from types import MappingProxyType

from hidet_lang.ir import expr as E
from hidet_lang.ir.types import (
    DataType,
    PointerType,
    Type,
    VoidType,
    float32,
    float64,
    int32,
    int64,
    uint32,
    uint64,
    void,
)

# The operations on the vector types of CPU functions (`hidet_lang.cpu`), named `<type>_<operation>` (f32x8_load):
# what each computes is documented in `hidet_lang.frontend.vectors`, which builds them.
VECTOR_LANES = (4, 8, 16)
VECTOR_OPERATIONS = ("load", "load_aligned", "store", "store_aligned", "prefetch", "broadcast", "setzero", "fma",
                     "dot_bf16", "exp", "max", "min", "reduce_sum", "reduce_max", "reduce_min")
VECTOR_INTRINSICS = frozenset(f"f32x{lanes}_{op}" for lanes in VECTOR_LANES for op in VECTOR_OPERATIONS)
_VECTOR_EFFECTS = frozenset(f"f32x{lanes}_{op}" for lanes in VECTOR_LANES for op in ("store", "store_aligned",
                                                                                     "prefetch"))


class Effect(enum.Flag):
    """What an intrinsic does besides computing its value."""

    NONE = 0
    READS_MEMORY = 1  # through a pointer operand
    WRITES_MEMORY = 2  # through a pointer operand
    BLOCK_BARRIER = 4  # waits until every thread of the block has reached it
    WARP_BARRIER = 8  # waits until the threads of the warp that its mask names have reached it
    WARP_COLLECTIVE = 16  # the lanes of a warp execute it together and exchange values
    ASYNC = 32  # starts work that completes later, or waits for such work
    SYNCHRONIZING = BLOCK_BARRIER | WARP_BARRIER | WARP_COLLECTIVE  # threads wait for each other


class ElementType:
    """The element type `T` an intrinsic is generic in: one data type wherever it appears in one use."""

    def __repr__(self) -> str:
        return "T"


T = ElementType()


@dataclass(frozen=True)
class Pointer:
    """A pointer operand or result: to `target` (a data type or `T`), or to anything (`void_p` too) when None."""

    target: DataType | ElementType | None = None

    def __repr__(self) -> str:
        return f"~{'void' if self.target is None else self.target}"


TypePattern = DataType | VoidType | ElementType | Pointer
"""An operand or result type of an intrinsic's signature."""

CUDA = "cuda"
"""The target kind of CUDA functions (the value of `TargetKind.CUDA`)."""


@dataclass(frozen=True)
class IntrinsicSpec:
    """One intrinsic: its signature, where it may appear, its effects and its spellings.

    - `operands`, `result`: the signature, in data types, `T` and `Pointer`s; `element_types` are the data types
      `T` may be (None: any).
    - `targets`: the target kinds whose functions may contain it; `min_arch`: the oldest CUDA architecture that
      has it ('sm_80'; an architecture-specific one, 'sm_90a', is that architecture only), None for every one.
    - `cuda`: its CUDA C text, a `str.format` template of fields `{0}`, `{1}`, ... (the operands' text),
      `{args}` (all of them, comma-separated), `{type}` (the result's C type), `{dynamic_smem}` (the block's
      dynamic shared memory, a `char *`), `{threadIdx.x}` ... `{gridDim.z}` (the thread and block indices and
      extents) and `{where}` (the DSL line, a C string); every function it calls is declared by the primitives
      header. The emulator compiles the same text against the header's emulator bodies, except that in its checking
      mode it prints `emulator_checked` where that is set (a variant whose memory accesses the checks see)."""

    name: str
    operands: tuple[TypePattern, ...]
    result: TypePattern
    cuda: str
    effects: Effect = Effect.NONE
    element_types: tuple[DataType, ...] | None = None
    min_arch: str | None = None
    targets: frozenset[str] = frozenset({CUDA})
    emulator_checked: str | None = None

    @property
    def has_effects(self) -> bool:
        """Whether it does something besides computing its value and reading memory (then a use is never dropped;
        an unused read may be)."""
        return bool(self.effects & ~Effect.READS_MEMORY)

    @property
    def synchronizes(self) -> bool:
        """Whether threads wait for each other at it (a barrier, or an operation of all lanes of a warp)."""
        return bool(self.effects & Effect.SYNCHRONIZING)

    def result_type(self, operand_types: Sequence[Type], element: DataType | None = None) -> Type:
        """The result type of a use on operands of `operand_types`, with `T` = `element` where the operands do not
        fix it (`dynamic_shared_memory`'s pointer); TypeError where they do not fit the signature."""
        if len(operand_types) != len(self.operands):
            raise TypeError(f"{self.name} takes {len(self.operands)} operand(s), got {len(operand_types)}")
        for pattern, t in zip(self.operands, operand_types):
            element = self._bind(pattern, t, element)
        result = self.result.target if isinstance(self.result, Pointer) else self.result
        if isinstance(result, ElementType):
            if element is None:
                raise TypeError(f"{self.name} needs its element type")
            result = element
        if isinstance(self.result, Pointer):
            return PointerType(void if result is None else result)
        return result

    def _bind(self, pattern: TypePattern, t: Type, element: DataType | None) -> DataType | None:
        """`element` (the `T` found so far) after matching operand type `t` against `pattern`; TypeError if it
        does not match."""
        if not isinstance(pattern, Pointer):
            return self._bind_data(pattern, t, element, t)
        if not isinstance(t, PointerType) or (pattern.target is not None and t.is_void):
            raise self._mismatch(t)
        return element if pattern.target is None else self._bind_data(pattern.target, t.dtype, element, t)

    def _bind_data(self, pattern: TypePattern, t: Type, element: DataType | None, operand: Type) -> DataType | None:
        """`_bind` for a pattern that is not a pointer, matched by `t` (an operand of type `operand`, or what it
        points at)."""
        if isinstance(pattern, ElementType):
            if not isinstance(t, DataType) or (element is not None and t != element):
                raise self._mismatch(operand)
            if self.element_types is not None and t not in self.element_types:
                raise TypeError(f"{self.name} is not available for {t}")
            return t
        if t != pattern:
            raise self._mismatch(operand)
        return element

    def _mismatch(self, t: Type) -> TypeError:
        signature = ", ".join(map(str, self.operands))
        return TypeError(f"{self.name} takes ({signature}); an operand of type {t} does not fit")


def _call(function: str) -> str:
    """The spelling of a call of `function` (of the primitives header) on the operands."""
    return f"{function}({{args}})"


INDEX_VARIABLES = ("threadIdx", "blockIdx", "blockDim", "gridDim")
"""CUDA's built-in index variables; `threadIdx.x` ... are intrinsics (i32)."""

CP_ASYNC_BYTES = (4, 8, 16)
"""The sizes of `cp_async`'s copies, each its own intrinsic (`cp_async_name`)."""


def cp_async_name(nbytes: int) -> str:
    """The intrinsic that copies `nbytes` bytes asynchronously ('cp_async_16')."""
    return f"cp_async_{nbytes}"


_ATOMIC_TYPES = (int32, uint32, int64, uint64, float32, float64)
_ATOMIC_INTEGERS = (int32, uint32, int64, uint64)
_READ_WRITE = Effect.READS_MEMORY | Effect.WRITES_MEMORY
_TENSOR_CORE = _READ_WRITE | Effect.WARP_COLLECTIVE


TMA_RANKS = (2, 3, 4, 5)
"""The ranks of TMA's tiled copies, each its own pair of intrinsics (`tma_load_2d`, `tma_store_2d`, ...)."""


def _hopper_async_specs() -> tuple[IntrinsicSpec, ...]:
    """Hopper: mbarrier and TMA. An mbarrier is a `u64` of shared memory; a tensor map is the address of a
    tensor-map kernel parameter; counts, byte counts, parities and coordinates are i32 (TMA's innermost first)."""
    bar = Pointer(uint64)
    hopper = {"min_arch": "sm_90"}

    def checked(function: str) -> str:
        return f"hl_emu_{function}({{where}}, {{args}})"

    def mbarrier(name: str, operands: tuple[TypePattern, ...], result: TypePattern, effects: Effect) -> IntrinsicSpec:
        return IntrinsicSpec(name, operands, result, _call(f"hl_{name}"), effects,
                             emulator_checked=checked(name), **hopper)

    waits = _READ_WRITE | Effect.ASYNC | Effect.BLOCK_BARRIER  # a wait blocks until other threads arrive
    specs = [
        mbarrier("mbarrier_init", (bar, int32), void, Effect.WRITES_MEMORY),
        mbarrier("mbarrier_arrive", (bar,), uint64, _READ_WRITE),
        mbarrier("mbarrier_arrive_expect_tx", (bar, int32), uint64, _READ_WRITE),
        mbarrier("mbarrier_expect_tx", (bar, int32), void, _READ_WRITE),
        mbarrier("mbarrier_try_wait_parity", (bar, int32), int32, waits),
        mbarrier("mbarrier_wait_parity", (bar, int32), void, waits),
        IntrinsicSpec("fence_mbarrier_init", (), void, _call("hl_fence_mbarrier_init"), Effect.WRITES_MEMORY, **hopper),
        IntrinsicSpec("fence_proxy_async_shared", (), void, _call("hl_fence_proxy_async_shared"),
                      Effect.WRITES_MEMORY, **hopper),
        IntrinsicSpec("tma_store_commit_group", (), void, _call("hl_tma_store_commit_group"), Effect.ASYNC, **hopper),
        # the group count is an immediate of the PTX instruction: a template argument
        IntrinsicSpec("tma_store_wait_group", (int32,), void, "hl_tma_store_wait_group<{0}>()", Effect.ASYNC,
                      **hopper),
    ]
    for rank in TMA_RANKS:
        coords = (int32,) * rank
        specs.append(IntrinsicSpec(f"tma_load_{rank}d", (Pointer(), Pointer(), bar, *coords), void,
                                   _call(f"hl_tma_load_{rank}d"), _READ_WRITE | Effect.ASYNC,
                                   emulator_checked=checked(f"tma_load_{rank}d"), **hopper))
        specs.append(IntrinsicSpec(f"tma_store_{rank}d", (Pointer(), Pointer(), *coords), void,
                                   _call(f"hl_tma_store_{rank}d"), _READ_WRITE | Effect.ASYNC,
                                   emulator_checked=checked(f"tma_store_{rank}d"), **hopper))
    return tuple(specs)


WGMMA_TYPES = ("f16", "bf16")
"""The input types of the warpgroup MMA intrinsics (`wgmma_mma_async_f16_ss`, ...), each its own pair."""


def _warpgroup_mma_specs() -> tuple[IntrinsicSpec, ...]:
    """Hopper: warpgroup MMA (codegen/include/hidet_lang/hopper_wgmma.h). The shape's N, the transpose bits, the
    group count and the register count are immediates of the PTX instructions: template arguments (i32 constants
    the DSL functions check). A descriptor is a `u64`; accumulators are f32 registers, A's fragment four `u32`."""
    hopper = {"min_arch": "sm_90a"}
    mma = _READ_WRITE | Effect.WARP_COLLECTIVE | Effect.ASYNC
    specs = [IntrinsicSpec("wgmma_make_descriptor", (Pointer(), int32, int32, int32, int32), uint64,
                           _call("hl_wgmma_make_desc"), **hopper)]
    for t in WGMMA_TYPES:
        ss = f"ss_{t}<{{0}}, {{1}}, {{2}}>({{3}}, {{4}}, {{5}}, {{6}})"
        rs = f"rs_{t}<{{0}}, {{1}}>({{2}}, {{3}}, {{4}}, {{5}})"
        # checking mode: the DSL line in reports, and the operation's shared-memory reads checked
        specs.append(IntrinsicSpec(f"wgmma_mma_async_{t}_ss", (int32, int32, int32, uint64, uint64,
                                                               Pointer(float32), int32), void,
                                   f"hl_wgmma_{ss}", mma, emulator_checked=f"hl_emu_wgmma_site({{where}}).{ss}",
                                   **hopper))
        specs.append(IntrinsicSpec(f"wgmma_mma_async_{t}_rs", (int32, int32, Pointer(uint32), uint64,
                                                               Pointer(float32), int32), void,
                                   f"hl_wgmma_{rs}", mma, emulator_checked=f"hl_emu_wgmma_site({{where}}).{rs}",
                                   **hopper))
    specs += [
        IntrinsicSpec("wgmma_fence", (), void, _call("hl_wgmma_fence"), Effect.ASYNC, **hopper),
        IntrinsicSpec("wgmma_commit_group", (), void, _call("hl_wgmma_commit_group"), Effect.ASYNC, **hopper),
        IntrinsicSpec("wgmma_wait_group", (int32,), void, "hl_wgmma_wait_group<{0}>()", Effect.ASYNC, **hopper),
        # the wait, then the N / 2 accumulators tied to it (no read of them is moved above it)
        IntrinsicSpec("wgmma_wait_group_registers", (int32, int32, Pointer(float32)), void,
                      "hl_wgmma_wait_group_registers<{0}, {1}>({2})", _READ_WRITE | Effect.ASYNC, **hopper),
        *(IntrinsicSpec(f"setmaxnreg_{way}", (int32,), void, f"hl_setmaxnreg_{way}<{{0}}>()",
                        Effect.WARP_COLLECTIVE, **hopper) for way in ("inc", "dec")),
    ]
    return tuple(specs)


# ---- Vector accesses of global memory ----------------------------------------------------------------------
# `copy_vector_<n>(dst, src)` copies n bytes from `src` to `dst` as one access (a 128-bit LDG.E.128 / STG.E.128
# for 16 bytes; both addresses n-byte aligned, or the GPU faults): between a tensor's element and a local array
# it loads or stores a whole vector of elements. `address_aligned(p, n)` is 1 when address `p` is a multiple of
# n (a power of two), else 0: the test a kernel makes before taking its vector path. The fusion rewrite turns a
# vector load from an anchor input into element copies of the prologue's values (as it does a cp_async), a
# vector store to an anchor output into element stores, and the alignment test of a fused tensor into 1.
VECTOR_COPY_BYTES = (4, 8, 16)
"""The sizes of `copy_vector`'s accesses, each its own intrinsic (`copy_vector_name`)."""

ADDRESS_ALIGNED = "address_aligned"
"""The alignment test of an address (`address_aligned(p, 16)`)."""


def copy_vector_name(nbytes: int) -> str:
    """The intrinsic that copies `nbytes` bytes as one vector access ('copy_vector_16')."""
    return f"copy_vector_{nbytes}"


def _vector_access_specs() -> tuple[IntrinsicSpec, ...]:
    """The vector copies and the alignment test (checking mode: a misaligned copy is reported at its DSL line)."""
    copies = tuple(IntrinsicSpec(copy_vector_name(n), (Pointer(), Pointer()), void, _call(f"hl_copy_vector_{n}"),
                                 _READ_WRITE,
                                 emulator_checked=f"hl_emu_copy_vector_checked({{0}}, {{1}}, {n}, {{where}})")
                   for n in VECTOR_COPY_BYTES)
    return (*copies, IntrinsicSpec(ADDRESS_ALIGNED, (Pointer(), int32), int32, _call("hl_address_aligned")))


VECTOR_COPIES = MappingProxyType({copy_vector_name(n): n for n in VECTOR_COPY_BYTES})
"""The vector copies (`copy_vector_16(dst, src)` ...) and the bytes each copies."""


# ---- Thread block clusters ---------------------------------------------------------------------------------
def _cluster_specs() -> tuple[IntrinsicSpec, ...]:
    """Hopper: thread block clusters (codegen/include/hidet_lang/hopper_cluster.h). A rank is an i32 (0 to the
    cluster's blocks - 1), a multicast mask an i32 of which bits 0-15 name ranks. The emulator's checking-mode
    spellings name the DSL line in their reports."""
    hopper = {"min_arch": "sm_90"}
    bar = Pointer(uint64)

    def checked(function: str) -> str:
        return f"hl_emu_{function}({{where}}, {{args}})"

    # the barrier's arrive does not wait, but it is one half of a barrier of the cluster's threads: no access is
    # moved across it
    barrier = Effect.BLOCK_BARRIER | _READ_WRITE
    specs = [
        IntrinsicSpec("cluster_rank", (), int32, _call("hl_cluster_rank"), **hopper),
        IntrinsicSpec("cluster_size", (), int32, _call("hl_cluster_size"), **hopper),
        IntrinsicSpec("cluster_arrive", (), void, _call("hl_cluster_arrive"), barrier,
                      emulator_checked="hl_emu_cluster_arrive({where})", **hopper),
        IntrinsicSpec("cluster_wait", (), void, _call("hl_cluster_wait"), barrier,
                      emulator_checked="hl_emu_cluster_wait({where})", **hopper),
        IntrinsicSpec("cluster_sync", (), void, _call("hl_cluster_sync"), barrier,
                      emulator_checked="hl_emu_cluster_sync({where})", **hopper),
        IntrinsicSpec("cluster_map_shared", (Pointer(T), int32), Pointer(T), _call("hl_cluster_map_shared"),
                      emulator_checked=checked("cluster_map_shared"), **hopper),
        IntrinsicSpec("mbarrier_arrive_cluster", (bar, int32), void, _call("hl_mbarrier_arrive_cluster"),
                      _READ_WRITE, emulator_checked=checked("mbarrier_arrive_cluster"), **hopper),
    ]
    for rank in TMA_RANKS:
        coords = (int32,) * rank
        specs.append(IntrinsicSpec(f"tma_load_multicast_{rank}d", (Pointer(), Pointer(), bar, int32, *coords), void,
                                   _call(f"hl_tma_load_multicast_{rank}d"), _READ_WRITE | Effect.ASYNC,
                                   emulator_checked=checked(f"tma_load_multicast_{rank}d"), **hopper))
    return tuple(specs)


def _table(*specs: IntrinsicSpec) -> MappingProxyType[str, IntrinsicSpec]:
    """The specs by name (ValueError for a name given twice)."""
    table: dict[str, IntrinsicSpec] = {}
    for spec in specs:
        if spec.name in table:
            raise ValueError(f"the intrinsic {spec.name} is in the table twice")
        table[spec.name] = spec
    return MappingProxyType(table)


INTRINSICS = _table(
    *(IntrinsicSpec(f"{v}.{axis}", (), int32, f"((int){{{v}.{axis}}})") for v in INDEX_VARIABLES for axis in "xyz"),
    IntrinsicSpec("syncthreads", (), void, "__syncthreads()", Effect.BLOCK_BARRIER),
    *(IntrinsicSpec(f"syncthreads_{op}", (int32,), int32, f"__syncthreads_{op}({{0}})", Effect.BLOCK_BARRIER)
      for op in ("and", "or", "count")),
    IntrinsicSpec("syncwarp", (uint32,), void, _call("hl_syncwarp"), Effect.WARP_BARRIER),
    *(IntrinsicSpec(name, (uint32, T, int32, int32), T, _call(f"hl_{name}"), Effect.WARP_COLLECTIVE)
      for name in ("shfl_sync", "shfl_up_sync", "shfl_down_sync", "shfl_xor_sync")),
    IntrinsicSpec("ballot_sync", (uint32, int32), uint32, _call("hl_ballot_sync"), Effect.WARP_COLLECTIVE),
    IntrinsicSpec("any_sync", (uint32, int32), int32, _call("hl_any_sync"), Effect.WARP_COLLECTIVE),
    IntrinsicSpec("all_sync", (uint32, int32), int32, _call("hl_all_sync"), Effect.WARP_COLLECTIVE),
    *(IntrinsicSpec(f"atomic_{op}", (Pointer(T), T), T, _call(f"hl_atomic_{op}"), _READ_WRITE, types)
      for op, types in (("add", _ATOMIC_TYPES), ("sub", _ATOMIC_TYPES), ("min", _ATOMIC_INTEGERS),
                        ("max", _ATOMIC_INTEGERS), ("exchange", _ATOMIC_TYPES))),
    IntrinsicSpec("atomic_cas", (Pointer(T), T, T), T, _call("hl_atomic_cas"), _READ_WRITE, _ATOMIC_INTEGERS),
    IntrinsicSpec("dynamic_shared_memory", (int32,), Pointer(T), "(({type})({dynamic_smem} + {0}))"),
    IntrinsicSpec("mma_m16n8k16_f16_f32", (Pointer(uint32), Pointer(uint32), Pointer(float32)), void,
                  _call("hl_mma_m16n8k16_f16_f32"), _TENSOR_CORE, min_arch="sm_80"),
    IntrinsicSpec("mma_m16n8k16_bf16_f32", (Pointer(uint32), Pointer(uint32), Pointer(float32)), void,
                  _call("hl_mma_m16n8k16_bf16_f32"), _TENSOR_CORE, min_arch="sm_80"),
    IntrinsicSpec("mma_m16n8k8_tf32_f32", (Pointer(uint32), Pointer(uint32), Pointer(float32)), void,
                  _call("hl_mma_m16n8k8_tf32_f32"), _TENSOR_CORE, min_arch="sm_80"),
    IntrinsicSpec("cvt_rna_tf32_f32", (float32,), float32, _call("hl_cvt_rna_tf32_f32"), min_arch="sm_80"),
    IntrinsicSpec("ldmatrix_x4", (Pointer(uint32), Pointer()), void, _call("hl_ldmatrix_x4"), _TENSOR_CORE,
                  min_arch="sm_80", emulator_checked="hl_emu_ldmatrix_x4_checked({0}, {1}, {where})"),
    IntrinsicSpec("ldmatrix_x4_trans", (Pointer(uint32), Pointer()), void, _call("hl_ldmatrix_x4_trans"),
                  _TENSOR_CORE, min_arch="sm_80",
                  emulator_checked="hl_emu_ldmatrix_x4_trans_checked({0}, {1}, {where})"),
    *(IntrinsicSpec(cp_async_name(n), (Pointer(), Pointer()), void, _call(f"hl_cp_async_{n}"),
                    _READ_WRITE | Effect.ASYNC, min_arch="sm_80",
                    emulator_checked=f"hl_emu_cp_async_checked({{0}}, {{1}}, {n}, {{where}})")
      for n in CP_ASYNC_BYTES),
    IntrinsicSpec("cp_async_commit_group", (), void, _call("hl_cp_async_commit_group"), Effect.ASYNC,
                  min_arch="sm_80"),
    # the group count is an immediate of the PTX instruction: a template argument
    IntrinsicSpec("cp_async_wait_group", (int32,), void, "hl_cp_async_wait_group<{0}>()", Effect.ASYNC,
                  min_arch="sm_80"),
    IntrinsicSpec("cp_async_wait_all", (), void, _call("hl_cp_async_wait_all"), Effect.ASYNC, min_arch="sm_80"),
    # Hopper: mbarrier and TMA (mbarrier.* exists from sm_80; expect_tx, complete_tx and TMA need sm_90). The
    # emulator's checking-mode spellings name the DSL line in their reports.
    *_hopper_async_specs(),
    # Hopper: warpgroup MMA (wgmma from shared-memory descriptors or registers, its fence, groups and waits) and
    # warpgroup register reallocation
    *_warpgroup_mma_specs(),
    # Hopper: thread block clusters (ranks, the cluster barrier, other blocks' shared memory, TMA multicast)
    *_cluster_specs(),
    # vector accesses of global memory and the alignment test of their vector paths
    *_vector_access_specs(),
)
"""Every intrinsic of CUDA code, by name."""

CUDA_INTRINSICS = frozenset(name for name, spec in INTRINSICS.items() if spec.targets == {CUDA})
"""The intrinsics only CUDA functions may contain."""

CP_ASYNC_COPIES = MappingProxyType({cp_async_name(n): n for n in CP_ASYNC_BYTES})
"""The asynchronous copies (`cp_async_4(dst, src)` ...) and the bytes each copies."""


def intrinsic(name: str, *operands: E.Expr, element: DataType | None = None) -> E.Intrinsic:
    """The intrinsic `name` of the table applied to `operands`, its type from the table's signature (`element`:
    `T` where no operand fixes it); TypeError where the operands do not fit."""
    spec = INTRINSICS[name]
    return E.Intrinsic(name, operands, spec.result_type([e.type for e in operands], element))


def has_effects(name: str) -> bool:
    """Whether intrinsic `name` does something besides computing its value (an expression holding one is never
    dropped): a table entry with effects other than reading memory, `printf`, a vector store or a prefetch."""
    spec = INTRINSICS.get(name)
    if spec is not None:
        return spec.has_effects
    return name == "printf" or name in _VECTOR_EFFECTS


def synchronizes(name: str) -> bool:
    """Whether threads wait for each other at intrinsic `name` (see `IntrinsicSpec.synchronizes`)."""
    spec = INTRINSICS.get(name)
    return spec is not None and spec.synchronizes
