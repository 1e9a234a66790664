"""What code is built for: a `Target` names the kind of machine (the CPU, or CUDA on a GPU or the CUDA emulator),
the CUDA architecture (`sm_80`, `sm_90a`, ...) and the features that follow from it.

Targets are spelled `'cpu'`, `'cuda'` and `'cuda:<arch>'`; the public entry points (`build_module`, a graph's
`build`, `tune`, ...) read a spelling once with `Target.of` (which passes a `Target` through), and every layer past
them takes a `Target`; `str(target)` gives the spelling back, which keys caches and goes into files. An
architecture with the `a` suffix (`sm_90a`) enables the features specific to that architecture (Hopper's
warpgroup MMA and tensor memory accelerator), which run on that architecture only; `f` (`sm_100f`) a family's.
"""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.cuda_limits import arch_number, normalize_arch, shared_memory_per_block
from hidet_lang.ir.func import DEVICE_KINDS, IRModule
from hidet_lang.ir.str_enum import StrEnum


class TargetKind(StrEnum):
    """The two kinds of target: C for the CPU, CUDA C for a GPU or the emulator."""

    CPU = "cpu"
    CUDA = "cuda"


@dataclass(frozen=True)
class Target:
    """A build target. `arch` is the CUDA architecture asked for, normalized ('sm_90a'; None: the device's, or a
    default); `emulated` says that CUDA code runs on the CUDA emulator rather than a GPU. `cpu_features` are the x86
    instruction-set extensions the C compiler enables for the CPU target ('sse', 'avx', 'fma', 'avx512f'), which
    the code generator asks the compiler for when it builds (`codegen.toolchain.cpu_features`); None when they are not
    known (a module lowered and not built), and then no vector operation is refused for want of one."""

    kind: TargetKind
    arch: str | None = None
    emulated: bool = False
    cpu_features: frozenset[str] | None = None

    @staticmethod
    def of(target: Target | str) -> Target:
        """`target` itself, or the target it spells ('cpu', 'cuda' or 'cuda:<arch>'); ValueError otherwise."""
        if isinstance(target, Target):
            return target
        if not isinstance(target, str):
            raise TypeError(f"a target is 'cpu', 'cuda', 'cuda:<arch>' or a Target, got {target!r}")
        kind_text, colon, arch = target.strip().partition(":")
        if kind_text not in tuple(TargetKind) or (colon and kind_text != TargetKind.CUDA):
            raise ValueError(f"unknown or unavailable target {target!r}; available: "
                             f"{', '.join(TargetKind)} (or 'cuda:<arch>', e.g. 'cuda:sm_90a')")
        return Target(TargetKind(kind_text), normalize_arch(arch) if colon else None)

    @staticmethod
    def for_device(device: str) -> Target:
        """The target that computes on arrays of `device` ('cpu' or 'cuda')."""
        return Target(TargetKind.CUDA if device == "cuda" else TargetKind.CPU)

    @staticmethod
    def parse(text: Target | str | None, module: IRModule) -> Target:
        """The target `text` names (None: what the module's function kinds imply), checked against the module:
        one with CUDA functions builds for CUDA only (ValueError otherwise). Of a `Target`, its kind and architecture
        only: what the machine adds (`emulated`, the CPU's features) a build resolves again."""
        implied = implied_target_kind(module)
        target = Target.of(text if text is not None else str(implied))
        if implied == TargetKind.CUDA and target.kind != TargetKind.CUDA:
            raise ValueError("the module has CUDA functions; build it for target 'cuda' (or 'cuda:sm_XY')")
        return Target(target.kind, target.arch)

    @property
    def device(self) -> str:
        """Where the target's arrays live: 'cuda' or 'cpu'."""
        return "cuda" if self.kind == TargetKind.CUDA else "cpu"

    @property
    def is_cuda(self) -> bool:
        """Whether the target is CUDA (a GPU or the emulator)."""
        return self.kind == TargetKind.CUDA

    @property
    def shared_memory_per_block(self) -> int:
        """The shared memory a block may have on this CUDA target's architecture, in bytes
        (`hidet_lang.cuda_limits`); ValueError for a target without an architecture."""
        if not self.is_cuda or self.arch is None:
            raise ValueError(f"target '{self}' has no CUDA architecture to limit shared memory by")
        return shared_memory_per_block(self.arch)

    def has_arch(self, minimum: str) -> bool:
        """Whether code needing CUDA architecture `minimum` runs on this target: its compute capability is at
        least `minimum`'s, and an architecture-specific minimum (`sm_90a`) is this very architecture. False for the
        CPU and for a CUDA target without a known architecture."""
        if not self.is_cuda or self.arch is None:
            return False
        needed = normalize_arch(minimum)
        if needed.endswith("a"):
            return self.arch == needed
        return arch_number(self.arch) >= arch_number(needed)

    def __str__(self) -> str:
        return f"{self.kind}:{self.arch}" if self.arch else str(self.kind)


def implied_target_kind(module: IRModule) -> TargetKind:
    """The target a module's function kinds imply: CUDA if any function is a CUDA one, else the CPU."""
    return TargetKind.CUDA if any(f.attrs.kind in DEVICE_KINDS for f in module.functions) else TargetKind.CPU
