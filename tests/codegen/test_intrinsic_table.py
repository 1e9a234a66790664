"""Every entry of the intrinsic table (`hidet_lang.ir.intrinsics.INTRINSICS`) emitted, compiled and run, and what
the passes derive from the table.

For each entry a kernel of one warp uses the intrinsic once for every element type it takes, on operands made
from its signature: constants, and pointers into 16-byte regions of shared memory that each lane owns. The CUDA
device emitter spells it with functions the primitives header declares for the GPU and for the emulator; NVRTC
compiles it for the entry's minimum architecture; the emulator runs it, in its checking mode too. On the same
uses: the kernels that need the emulator's fibers, the uses the simplifier may drop, the refusal in a CPU function.
"""

from __future__ import annotations

import re
from functools import cache

import pytest

from codegen.build import build_module
from codegen.emit.cuda_emitter import emit_cuda
from codegen.emit.kernel_plan import plan_module
from codegen.runtime.cuda_backend import backend
from codegen.runtime.module import CompiledModule
from codegen.toolchain import nvrtc
from codegen.toolchain.elf import STT_FUNC, read_symbols
from codegen.toolchain.headers import INCLUDE_DIR
from codegen.toolchain.source_files import SourceFiles
from hidet_lang.cuda_limits import arch_number
from hidet_lang.errors import DSLTypeError
from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.func import CudaAttrs, FuncAttrs, FuncKind, Function, IRModule
from hidet_lang.ir.functor import collect
from hidet_lang.ir.intrinsics import (
    INDEX_VARIABLES,
    INTRINSICS,
    ElementType,
    IntrinsicSpec,
    Pointer,
    TypePattern,
    intrinsic,
)
from hidet_lang.ir.layout import swizzled_layout
from hidet_lang.ir.node import at
from hidet_lang.ir.span import Span
from hidet_lang.ir.types import (
    ALL_DTYPES,
    DataType,
    PointerType,
    TensorType,
    bfloat16,
    float16,
    float32,
    float64,
    int32,
    uint32,
    uint64,
    void,
)
from hidet_lang.passes import kind_rules
from hidet_lang.passes.pipeline import lower
from hidet_lang.passes.simplify import simplify
from hidet_lang.target import Target, TargetKind

NAMES = sorted(INTRINSICS)
LANES = 32  # one full warp: the warp-collective entries need every lane
REGION_WORDS = 4  # 16 bytes a lane and pointer operand: the most an entry reads or writes through one
SLOTS = max(sum(isinstance(p, Pointer) for p in spec.operands) for spec in INTRINSICS.values())
USE_SPAN = Span("intrinsic_uses.py", 7)


def kernel_name(spec: IntrinsicSpec) -> str:
    """The name of the entry's sample kernel: `use_` and the entry's name as an identifier."""
    return "use_" + spec.name.replace(".", "_")


def elements(spec: IntrinsicSpec) -> tuple[DataType | None, ...]:
    """The types `T` is used with: each one the entry takes (None alone for an entry without `T`)."""
    generic = any(isinstance(p, ElementType) or (isinstance(p, Pointer) and isinstance(p.target, ElementType))
                  for p in (*spec.operands, spec.result))
    if not generic:
        return (None,)
    return spec.element_types if spec.element_types is not None else ALL_DTYPES


def constant(dtype: DataType) -> E.Constant:
    """A value every entry takes in an operand of `dtype`: the full warp mask for u32 (masks), 1 otherwise
    (predicates, lanes, widths, group counts, offsets, values)."""
    if dtype == uint32:
        return E.Constant(0xFFFFFFFF, uint32)
    return E.Constant(1.0 if dtype.is_float else True if dtype.is_bool else 1, dtype)


def region(buf: E.Var, slot: int, lane: E.Expr, word: int = 0) -> E.TensorElement:
    """Word `word` of lane `lane`'s region `slot` of the buffer."""
    start = E.binary("*", E.binary("+", E.Constant(slot * LANES, int32), lane), E.Constant(REGION_WORDS, int32))
    return E.TensorElement(buf, (E.binary("+", start, E.Constant(word, int32)),))


def operand(pattern: TypePattern, element: DataType | None, buf: E.Var, slot: int, lane: E.Expr) -> E.Expr:
    """An operand of type `pattern` (with `T` = `element`): a pointer one points at the lane's region `slot`."""
    if not isinstance(pattern, Pointer):
        assert isinstance(pattern, DataType | ElementType)
        return constant(element if isinstance(pattern, ElementType) else pattern)
    address = E.Address(region(buf, slot, lane))
    target = element if isinstance(pattern.target, ElementType) else pattern.target
    return address if target in (None, uint32) else E.Reinterpret(address, PointerType(target))


def use(spec: IntrinsicSpec, element: DataType | None, buf: E.Var, lane: E.Expr) -> E.Intrinsic:
    """The entry on operands of its signature (`T` = `element`), built through the table."""
    slots = iter(range(SLOTS))
    operands = [operand(p, element, buf, next(slots) if isinstance(p, Pointer) else 0, lane) for p in spec.operands]
    return intrinsic(spec.name, *operands, element=element)


def needs_initialized_barrier(spec: IntrinsicSpec) -> bool:
    """Whether the entry uses an mbarrier (its first operand, in slot 0) that must be initialized first."""
    return spec.name.startswith("mbarrier_") and spec.name != "mbarrier_init"


# The TMA copies take a tensor map, which only a kernel parameter holds: tests/codegen/test_hopper_tma.py runs them.
NEEDS_TENSOR_MAP = frozenset(name for name in NAMES if name.startswith(("tma_load_", "tma_store_")) and
                             name[-2:] in ("2d", "3d", "4d", "5d"))
# The entries that name another block of a cluster (the sample's lane as its rank): tests/codegen/test_hopper_cluster.py
# runs them in clusters.
NAMES_A_BLOCK_RANK = frozenset({"cluster_map_shared", "mbarrier_arrive_cluster"})


def uses(spec: IntrinsicSpec, buf: E.Var, lane: E.Expr) -> list[S.Stmt]:
    """A statement (at `USE_SPAN`) for each element type of the entry: a void use evaluated, another one's value
    kept in a variable."""
    statements = []
    with at(USE_SPAN):
        for number, element in enumerate(elements(spec)):
            e = use(spec, element, buf, lane)
            statements.append(S.EvaluateStmt(e) if e.type == void else S.DeclareStmt(E.Var(f"r{number}", e.type), e))
    return statements


def buffer() -> E.Var:
    """The buffer that pointer operands point into: `SLOTS` regions for each lane (128-byte aligned, as TMA's
    shared tiles are and mbarriers need at least 8)."""
    words = SLOTS * LANES * REGION_WORDS
    return E.Var("buf", TensorType(uint32, (words,), swizzled_layout([words], uint32, swizzle=0)))


def sample_kernel(spec: IntrinsicSpec, runnable: bool = False) -> Function:
    """A kernel of one warp that clears its regions of a shared buffer (the checking mode reports a read of
    uninitialized shared memory), then uses the entry; `runnable`: first initializes the mbarrier an entry may
    need, as a kernel that runs must."""
    if spec.name in WARPGROUP_ENTRIES:
        return warpgroup_sample_kernel(spec, runnable)
    buf, lane = buffer(), intrinsic("threadIdx.x")
    clear = [S.BufferStoreStmt(buf, region(buf, slot, lane, word).indices, E.Constant(0, uint32))
             for slot in range(SLOTS) for word in range(REGION_WORDS)]
    if runnable and needs_initialized_barrier(spec):  # an mbarrier of count 1 in slot 0
        bar = E.Reinterpret(E.Address(region(buf, 0, lane)), PointerType(uint64))
        clear.append(S.EvaluateStmt(intrinsic("mbarrier_init", bar, E.Constant(1, int32))))
    body = S.seq([S.DeclareStmt(buf, scope=S.DeclScope.SHARED), *clear, *uses(spec, buf, lane)])
    launch = CudaAttrs((E.Constant(1, int32),), (E.Constant(LANES, int32),), E.Constant(16, int32))
    return Function(kernel_name(spec), (), void, body, FuncAttrs(FuncKind.CUDA_KERNEL, launch))


def sample_module(names: list[str], runnable: bool = False) -> IRModule:
    """The sample kernels of the entries `names`, in one module (see `sample_kernel` for `runnable`)."""
    return IRModule(tuple(sample_kernel(INTRINSICS[name], runnable) for name in names))


def arch_of(spec: IntrinsicSpec) -> str:
    """The architecture the entry is built for: its minimum, or the oldest this NVRTC compiles for."""
    return spec.min_arch or nvrtc.supported_archs()[0]


def arch_module(arch: str) -> IRModule:
    """The sample kernels of the entries that `arch_of` builds for `arch`."""
    return sample_module([name for name in NAMES if arch_of(INTRINSICS[name]) == arch], runnable=True)


@cache
def device_source(arch: str) -> str:
    """The CUDA C of `arch_module(arch)`, naming the program's file as a user reads it (`SourceFiles.resolve`)."""
    files = SourceFiles()
    return files.resolve(emit_cuda(plan_module(lower(arch_module(arch), cuda_target(arch))), files=files)[0])


@cache
def cubin_functions(arch: str) -> set[str]:
    """The functions of the cubin NVRTC compiles `device_source(arch)` to, for `arch`."""
    cubin = nvrtc.compile_cubin(device_source(arch), arch, include_dirs=[str(INCLUDE_DIR)])
    return {s.name for s in read_symbols(cubin) if s.type == STT_FUNC}


@cache
def emulated(arch: str, check: bool) -> CompiledModule:
    """`arch_module(arch)` built for the emulator (in its checking mode with `check`)."""
    return build_module(arch_module(arch), f"cuda:{arch}", check=check)


def cuda_target(arch: str) -> Target:
    """The CUDA target of architecture `arch`."""
    return Target(TargetKind.CUDA, arch)


def kernel_text(source: str, spec: IntrinsicSpec) -> str:
    """The definition of the entry's sample kernel in `source` (up to the next kernel's)."""
    start = re.search(rf"void {kernel_name(spec)}\([^)]*\)\s*{{", source).start()
    end = source.find('extern "C"', start)
    return source[start:end if end >= 0 else len(source)]


def called(spelling: str) -> set[str]:
    """The functions a spelling calls (its fields taken out): the primitives' `hl_*` and CUDA's `__*`."""
    return set(re.findall(r"\b(?:hl_\w+|__\w+)\b", re.sub(r"\{[^}]*\}", "", spelling)))


def code_of(header: str) -> str:
    """The text of a header without its comments."""
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", header, flags=re.DOTALL)


def emulator_and_gpu_branches(header: str) -> tuple[str, str]:
    """The two branches of the header's `#ifdef HIDET_LANG_EMULATOR` (the conditionals nested in them kept)."""
    lines = header.splitlines()
    start = lines.index("#ifdef HIDET_LANG_EMULATOR")
    middle, depth = None, 0
    for i in range(start + 1, len(lines)):
        directive = lines[i].strip()
        if directive.startswith("#if"):
            depth += 1
        elif directive.startswith("#else") and depth == 0:
            middle = i
        elif directive.startswith("#endif") and depth == 0:
            assert middle is not None, "the primitives header has no GPU branch"
            return "\n".join(lines[start + 1:middle]), "\n".join(lines[middle + 1:i])
        elif directive.startswith("#endif"):
            depth -= 1
    raise AssertionError("the primitives header's #ifdef HIDET_LANG_EMULATOR has no #endif")


def names(function: str, code: str) -> bool:
    """Whether header code names `function`: itself, or the family of macro-made functions it belongs to
    (`hl_cp_async_##N` makes `hl_cp_async_16`)."""
    return re.search(rf"\b{function}\b", code) is not None or f"{function.rsplit('_', 1)[0]}_##" in code


PRIMITIVES = code_of((INCLUDE_DIR / "hidet_lang" / "cuda_primitives.h").read_text())
EMULATOR_BODIES, GPU_BODIES = emulator_and_gpu_branches(PRIMITIVES)
# the headers of primitives that cuda_primitives.h includes, with an emulator and a GPU branch each
for _header in ("hopper_wgmma.h", "vector_access.h", "hopper_cluster.h"):
    assert f'#include "{_header}"' in PRIMITIVES
    _emulator, _gpu = emulator_and_gpu_branches(code_of((INCLUDE_DIR / "hidet_lang" / _header).read_text()))
    EMULATOR_BODIES, GPU_BODIES = EMULATOR_BODIES + "\n" + _emulator, GPU_BODIES + "\n" + _gpu
EMULATOR_HEADERS = code_of("\n".join(p.read_text() for p in sorted((INCLUDE_DIR / "hidet_lang").glob("emulator_*.h"))))


# ---------------------------------------------------------------------------------------------- emitted, compiled, run


@pytest.mark.parametrize("name", NAMES)
def test_entry_is_emitted_with_names_the_primitives_header_declares(name: str) -> None:
    spec = INTRINSICS[name]
    kernel = kernel_text(device_source(arch_of(spec)), spec)
    emitted = kernel[kernel.index(f"// {USE_SPAN.file}:{USE_SPAN.line}"):]
    for function in called(spec.cuda):
        assert emitted.count(function) >= len(elements(spec)), f"not every use of {name} calls {function}"
    found = set(re.findall(rf"\b(?:hl_\w+|__\w+|{'|'.join(INDEX_VARIABLES)})\b", emitted))
    assert found, f"the uses of {name} name nothing of the primitives header"
    for identifier in found:
        if identifier.startswith("hl_"):
            assert names(identifier, GPU_BODIES), f"cuda_primitives.h has no GPU body of {identifier}"
            assert names(identifier, EMULATOR_BODIES), f"cuda_primitives.h has no emulator body of {identifier}"
        else:  # CUDA's own (NVRTC has it): the emulator defines it
            assert names(identifier, EMULATOR_HEADERS), f"the emulator's headers lack {identifier}"


@pytest.mark.parametrize("check", [False, True], ids=["plain", "checking"])
@pytest.mark.parametrize("name", NAMES)
def test_emulator_prints_the_cuda_spelling_and_in_checking_mode_the_checked_one(name: str, check: bool) -> None:
    spec = INTRINSICS[name]
    plan = plan_module(lower(sample_module([name])))
    device, _ = emit_cuda(plan.without_fast_paths() if check else plan, emulator=True, check=check)
    spelling = spec.emulator_checked if check and spec.emulator_checked is not None else spec.cuda
    kernel = kernel_text(device, spec)
    for function in called(spelling):
        assert f"{function}(" in kernel or f"{function}<" in kernel
        assert names(function, EMULATOR_HEADERS + "\n" + EMULATOR_BODIES), f"the emulator's headers lack {function}"
    for function in called(spec.cuda) - called(spelling):
        assert f"{function}(" not in kernel


@pytest.mark.parametrize("name", NAMES)
def test_entry_compiles_with_nvrtc_for_its_minimum_architecture(name: str) -> None:
    spec = INTRINSICS[name]
    assert kernel_name(spec) in cubin_functions(arch_of(spec))


@pytest.mark.skipif(backend() != "emulator", reason="the emulator's runs; CUDA modules build for a GPU here")
@pytest.mark.parametrize("check", [False, True], ids=["plain", "checking"])
@pytest.mark.parametrize("name", [name for name in NAMES if name not in NEEDS_TENSOR_MAP | NAMES_A_BLOCK_RANK])
def test_entry_runs_on_the_emulator(name: str, check: bool) -> None:
    spec = INTRINSICS[name]
    emulated(arch_of(spec), check)[kernel_name(spec)]()


# ---------------------------------------------------------------------------------------------- derived


@pytest.mark.parametrize("name", NAMES)
def test_a_kernel_runs_its_threads_as_fibers_exactly_when_its_intrinsic_synchronizes(name: str) -> None:
    spec = INTRINSICS[name]
    plan = plan_module(lower(sample_module([name])))
    assert plan.kernel_plans[kernel_name(spec)].needs_fibers == spec.synchronizes


def integer_result(spec: IntrinsicSpec) -> bool:
    """Whether the entry's result is an integer (with `T` = i32 where it is generic)."""
    if isinstance(spec.result, ElementType):
        return spec.element_types is None or int32 in spec.element_types
    return isinstance(spec.result, DataType) and spec.result.is_integer


@pytest.mark.parametrize("name", [name for name in NAMES if integer_result(INTRINSICS[name])])
def test_the_simplifier_drops_a_product_by_zero_only_of_an_intrinsic_without_effects(name: str) -> None:
    spec = INTRINSICS[name]
    e = use(spec, int32 if elements(spec) != (None,) else None, buffer(), E.Var("lane", int32))
    product = S.EvaluateStmt(E.binary("*", e, E.Constant(0, e.type)))
    kept = [i for i in collect(simplify(product), E.Intrinsic) if i.name == name]
    assert bool(kept) == spec.has_effects


@pytest.mark.parametrize("name", [name for name in NAMES if "cpu" not in INTRINSICS[name].targets])
def test_a_cuda_intrinsic_in_a_cpu_function_is_refused_at_its_statement(name: str) -> None:
    spec = INTRINSICS[name]
    buf = buffer()
    body = S.seq([S.DeclareStmt(buf), *uses(spec, buf, E.Constant(0, int32))])
    function = Function("on_the_cpu", (), void, body, FuncAttrs(FuncKind.CPU_KERNEL))
    with pytest.raises(DSLTypeError) as excinfo:
        lower(IRModule((function,)))
    assert excinfo.value.message.startswith(f"{name} is a CUDA construct and 'on_the_cpu' is a 'cpu_kernel' function")
    assert excinfo.value.span == USE_SPAN


@pytest.mark.parametrize("name", [name for name in NAMES if INTRINSICS[name].min_arch is not None])
def test_an_intrinsic_is_refused_below_its_minimum_architecture_at_its_statement(name: str) -> None:
    spec = INTRINSICS[name]
    assert spec.min_arch is not None
    older = max((a for a in nvrtc.supported_archs() if arch_number(a) < arch_number(spec.min_arch)), key=arch_number)
    module = sample_module([name])
    lower(module, cuda_target(spec.min_arch))
    with pytest.raises(DSLTypeError) as excinfo:
        lower(module, cuda_target(older))
    needed = spec.min_arch if spec.min_arch.endswith("a") else f"{spec.min_arch} or later"  # sm_90a: itself
    assert excinfo.value.message == (f"{name} needs CUDA architecture {needed}, and the module is "
                                     f"built for {older}; build it with target='cuda:{spec.min_arch}'")
    assert excinfo.value.span == USE_SPAN


def test_an_architecture_specific_intrinsic_runs_on_that_architecture_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry of minimum architecture sm_90a (Hopper's own features) is refused on sm_90 and on sm_100."""
    hopper = IntrinsicSpec("hopper_only", (), void, "hl_hopper_only()", min_arch="sm_90a")
    monkeypatch.setattr(kind_rules, "INTRINSICS", {**INTRINSICS, hopper.name: hopper})
    with at(USE_SPAN):
        body = S.EvaluateStmt(E.Intrinsic(hopper.name, (), void))
    launch = CudaAttrs((E.Constant(1, int32),), (E.Constant(LANES, int32),))
    module = IRModule((Function("hopper", (), void, body, FuncAttrs(FuncKind.CUDA_KERNEL, launch)),))
    lower(module, cuda_target("sm_90a"))
    for arch in ("sm_90", "sm_100"):
        with pytest.raises(DSLTypeError) as excinfo:
            lower(module, cuda_target(arch))
        assert excinfo.value.message == (f"hopper_only needs CUDA architecture sm_90a, and the module is built for "
                                         f"{arch}; build it with target='cuda:sm_90a'")
        assert excinfo.value.span == USE_SPAN


# ---------------------------------------------------------------------------------------------- the typing rule


def pointer_to(dtype: DataType) -> E.Var:
    """A pointer variable to `dtype`."""
    return E.Var("p", PointerType(dtype))


@pytest.mark.parametrize(("name", "operands", "element", "result"), [
    ("shfl_xor_sync", (E.Constant(1, uint32), E.Var("v", float16), E.Constant(1, int32), E.Constant(32, int32)),
     None, float16),
    ("atomic_cas", (pointer_to(uint32), E.Constant(1, uint32), E.Constant(2, uint32)), None, uint32),
    ("atomic_add", (pointer_to(float64), E.Constant(1.0, float64)), None, float64),
    ("dynamic_shared_memory", (E.Constant(0, int32),), bfloat16, PointerType(bfloat16)),
    ("ballot_sync", (E.Constant(1, uint32), E.Constant(1, int32)), None, uint32),
    ("ldmatrix_x4", (pointer_to(uint32), pointer_to(float16)), None, void),
    ("blockDim.y", (), None, int32),
])
def test_the_signature_gives_the_result_type(name: str, operands: tuple[E.Expr, ...], element: DataType | None,
                                             result: object) -> None:
    assert intrinsic(name, *operands, element=element).type == result


@pytest.mark.parametrize(("name", "operands", "element", "message"), [
    ("syncwarp", (E.Constant(1, int32),), None, "syncwarp takes (u32); an operand of type i32 does not fit"),
    ("atomic_min", (pointer_to(float32), E.Constant(1.0, float32)), None, "atomic_min is not available for f32"),
    ("atomic_cas", (pointer_to(float64), E.Constant(1.0, float64), E.Constant(1.0, float64)), None,
     "atomic_cas is not available for f64"),
    ("atomic_add", (pointer_to(float32), E.Constant(1.0, float64)), None,
     "atomic_add takes (~T, T); an operand of type f64 does not fit"),
    ("mma_m16n8k16_f16_f32", (pointer_to(uint32), pointer_to(uint32), pointer_to(float16)), None,
     "mma_m16n8k16_f16_f32 takes (~u32, ~u32, ~f32); an operand of type ~f16 does not fit"),
    ("shfl_sync", (E.Constant(1, uint32), E.Constant(1, int32)), None, "shfl_sync takes 4 operand(s), got 2"),
    ("dynamic_shared_memory", (E.Constant(0, int32),), None, "dynamic_shared_memory needs its element type"),
])
def test_operands_that_do_not_fit_the_signature_are_refused(name: str, operands: tuple[E.Expr, ...],
                                                            element: DataType | None, message: str) -> None:
    with pytest.raises(TypeError) as excinfo:
        intrinsic(name, *operands, element=element)
    assert str(excinfo.value) == message


# ---------------------------------------------------------------------------------------------- Hopper: warpgroup MMA
# The warpgroup MMA entries run in a whole warpgroup (128 threads), on operands only some values fit (N and the
# register counts are immediates; a descriptor names a tile aligned to its swizzle atom): each has its own sample
# kernel, with a zeroed 128B-swizzled f16 tile, the entry's use at USE_SPAN on the operands below and, to run, a
# barrier and the fence before an mma_async and the commit and wait after it. tests/codegen/test_hopper_wgmma.py
# checks results.

WARPGROUP_ENTRIES = frozenset(name for name in NAMES if name.startswith(("wgmma_", "setmaxnreg_")))
WARPGROUP_THREADS = 128


def warpgroup_operands(spec: IntrinsicSpec, tile: E.Var, acc: E.Var, frag: E.Var) -> list[E.Expr]:
    """Operands a warpgroup entry takes: N = 8, no transposes, scale-d 0, descriptors of the tile, 240 and 40
    registers, waits for all groups."""
    i32 = [E.Constant(v, int32) for v in (0, 8, 16, 1024, 128)]
    zero, eight = i32[0], i32[1]
    tile_start = E.Address(E.TensorElement(tile, (zero, zero)))
    desc = intrinsic("wgmma_make_descriptor", tile_start, zero, *i32[2:])
    acc_start, frag_start = E.Address(E.TensorElement(acc, (zero,))), E.Address(E.TensorElement(frag, (zero,)))
    if spec.name == "wgmma_make_descriptor":
        return [tile_start, zero, *i32[2:]]
    if spec.name.endswith("_ss"):
        return [eight, zero, zero, desc, desc, acc_start, zero]
    if spec.name.endswith("_rs"):
        return [eight, zero, frag_start, desc, acc_start, zero]
    if spec.name == "wgmma_wait_group_registers":
        return [zero, E.Constant(8, int32), acc_start]
    if spec.name.startswith("setmaxnreg_"):
        return [E.Constant(240 if spec.name.endswith("inc") else 40, int32)]
    return [zero] * len(spec.operands)  # the fence, the commit, the wait for all groups


def warpgroup_sample_kernel(spec: IntrinsicSpec, runnable: bool) -> Function:
    """A kernel of one warpgroup that zeroes a shared tile, then uses the warpgroup entry `spec`."""
    tile = E.Var("tile", TensorType(float16, (64, 64), swizzled_layout([64, 64], 2, 128)))
    acc, frag = E.Var("acc", TensorType(float32, (4,))), E.Var("frag", TensorType(uint32, (4,)))
    thread = intrinsic("threadIdx.x")
    body: list[S.Stmt] = [S.DeclareStmt(tile, scope=S.DeclScope.SHARED), S.DeclareStmt(acc), S.DeclareStmt(frag)]
    for i in range(64 * 64 // WARPGROUP_THREADS):
        element = E.binary("+", thread, E.Constant(WARPGROUP_THREADS * i, int32))
        row, col = E.binary("/", element, E.Constant(64, int32)), E.binary("%", element, E.Constant(64, int32))
        body.append(S.BufferStoreStmt(tile, (row, col), E.Constant(0.0, float16)))
    body += [S.BufferStoreStmt(frag, (E.Constant(i, int32),), E.Constant(0, uint32)) for i in range(4)]
    mma = spec.name.startswith("wgmma_mma_async")
    if runnable and mma:  # the tile written by every thread before any reads it; then the fence
        body += [S.EvaluateStmt(intrinsic("syncthreads")), S.EvaluateStmt(intrinsic("wgmma_fence"))]
    with at(USE_SPAN):
        e = intrinsic(spec.name, *warpgroup_operands(spec, tile, acc, frag))
        body.append(S.EvaluateStmt(e) if e.type == void else S.DeclareStmt(E.Var("r0", e.type), e))
    if runnable and mma:
        body += [S.EvaluateStmt(intrinsic("wgmma_commit_group")),
                 S.EvaluateStmt(intrinsic("wgmma_wait_group", E.Constant(0, int32)))]
    launch = CudaAttrs((E.Constant(1, int32),), (E.Constant(WARPGROUP_THREADS, int32),), E.Constant(16, int32))
    return Function(kernel_name(spec), (), void, S.seq(body), FuncAttrs(FuncKind.CUDA_KERNEL, launch))
