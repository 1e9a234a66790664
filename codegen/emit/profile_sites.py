"""The sites of the CUDA emulator's profile build: what each counted place of a module's kernels is.

The emulator's profile build (`EmulatorEmitter` with a `ProfileSites`, compiled with `-DHL_EMU_PROFILE`:
hidet_lang/emulator_profile.h) records an event at every site a thread executes; a site is a number the emitter
gives, in the order it prints them, to one of:
- a memory access of a DSL line: an element read or write of a global or shared tensor, one side of a vector copy,
  a cp.async, an ldmatrix, a TMA copy (a global and a shared site) or a warpgroup MMA's shared operands;
- a branch (an `if` whose condition is not a constant, or the condition of a loop not marked unrolled);
- a statement with arithmetic the profile counts (`statement_ops`): its instructions by class, per thread.
The table of sites stays on the Python side (`ProfileSites`): the library's counts name sites by number and
`codegen.runtime.profiling` reads them back through it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.ir import expr as E
from hidet_lang.ir import stmt as S
from hidet_lang.ir.functor import collect
from hidet_lang.ir.types import DataType, float32

__all__ = ["PROFILE_ANY", "PROFILE_GLOBAL", "PROFILE_SHARED", "ProfileSite", "ProfileSites", "SPECIAL_FUNCTIONS",
           "intrinsic_ops", "statement_ops"]

# The spaces of an access event (PROF_* in emulator_profile.h); ANY: looked up from the address at run time.
PROFILE_GLOBAL, PROFILE_SHARED, PROFILE_ANY = 1, 2, 3

SPECIAL_FUNCTIONS = frozenset({"exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "tanh",
                               "sqrt", "rsqrt", "pow", "erf", "sigmoid", "atan", "asin", "acos", "sinh", "cosh"})
"""The math functions counted as special-function instructions (the GPU's MUFU unit computes their core)."""

_TENSOR_SHAPES = {"mma_m16n8k16_f16_f32": "mma.m16n8k16", "mma_m16n8k16_bf16_f32": "mma.m16n8k16",
                  "mma_m16n8k8_tf32_f32": "mma.m16n8k8"}
_BARRIERS = frozenset({"syncthreads", "syncthreads_and", "syncthreads_or", "syncthreads_count"})


@dataclass(frozen=True)
class ProfileSite:
    """One site: the DSL line it belongs to (`file`, `line`; None for code without a span), its `kind` ('load',
    'store', 'branch' or 'ops'), the instruction `op` of an access ('element', 'vector', 'cp.async', 'ldmatrix',
    'tma', 'wgmma'), and for 'ops' the instructions one thread's execution issues, by class (`ops`: 'fma', 'fp32',
    'sfu', 'barrier', and tensor-core shapes such as 'mma.m16n8k16' or 'wgmma.m64n128k16'). Code without a span
    (the rule-based scheduler's) is named instead by its `function` and the first line of its IR `statement`."""

    file: str | None
    line: int | None
    kind: str
    op: str = ""
    ops: tuple[tuple[str, int], ...] = ()
    function: str | None = None
    statement: str | None = None


class ProfileSites:
    """The sites of one module's profile build, numbered in the order `add` is called."""

    def __init__(self) -> None:
        self.sites: list[ProfileSite] = []

    def add(self, site: ProfileSite) -> int:
        """Number `site`; returns its number."""
        self.sites.append(site)
        return len(self.sites) - 1

    def __getitem__(self, number: int) -> ProfileSite:
        return self.sites[number]

    def __len__(self) -> int:
        return len(self.sites)


def _is_f32(e: E.Expr) -> bool:
    t = e.type
    return isinstance(t, DataType) and t == float32


def _expression_ops(exprs: list[E.Expr]) -> dict[str, int]:
    """The instructions that evaluating `exprs` issues, by class: an f32 multiply feeding an f32 add or subtract is
    one 'fma', other f32 adds, subtracts and multiplies one 'fp32' each; a special function one 'sfu'; tensor-core
    operations and barriers by `intrinsic_ops`."""
    ops: dict[str, int] = {}
    binaries = [b for e in exprs for b in collect(e, E.BinaryOp) if _is_f32(b) and b.op in ("+", "-", "*")]
    fused: set[int] = set()
    fma = 0
    for b in binaries:
        if b.op == "*":
            continue
        for operand in (b.a, b.b):
            if isinstance(operand, E.BinaryOp) and operand.op == "*" and _is_f32(operand) and id(operand) not in fused:
                fused.add(id(operand))
                fma += 1
                break
    plain = len(binaries) - 2 * fma
    for name, count in (("fma", fma), ("fp32", plain)):
        if count:
            ops[name] = count
    for intrinsic in (i for e in exprs for i in collect(e, E.Intrinsic)):
        for name, count in intrinsic_ops(intrinsic).items():
            ops[name] = ops.get(name, 0) + count
    return ops


def intrinsic_ops(e: E.Intrinsic) -> dict[str, int]:
    """The counted instructions of one intrinsic: a special function, a tensor-core operation (by its shape), a
    barrier; empty for the others."""
    if e.name in SPECIAL_FUNCTIONS:
        return {"sfu": 1}
    if e.name in _TENSOR_SHAPES:
        return {_TENSOR_SHAPES[e.name]: 1}
    if e.name.startswith("wgmma_mma_async_"):
        n = e.args[0]
        return {f"wgmma.m64n{int(n.value)}k16": 1} if isinstance(n, E.Constant) else {}
    if e.name in _BARRIERS:
        return {"barrier": 1}
    return {}


def statement_ops(s: S.Stmt) -> dict[str, int]:
    """The counted instructions one execution of statement `s` issues, its own expressions only (not the bodies of
    an `if` or a loop, nor a loop's bounds)."""
    if isinstance(s, S.IfStmt):
        exprs = [s.cond]
    elif isinstance(s, S.DeclareStmt):
        exprs = [] if s.init is None else [s.init]
    elif isinstance(s, S.AssignStmt):
        exprs = [s.value]
    elif isinstance(s, S.BufferStoreStmt):
        exprs = [s.value]
    elif isinstance(s, S.EvaluateStmt):
        exprs = [s.expr]
    else:
        return {}
    return _expression_ops(exprs)

