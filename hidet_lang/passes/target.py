"""What a module is lowered for: the CPU, or CUDA (on a GPU or on the CUDA emulator)."""

from __future__ import annotations

from dataclasses import dataclass

from hidet_lang.ir.func import DEVICE_KINDS, IRModule
from hidet_lang.ir.str_enum import StrEnum


class TargetKind(StrEnum):
    """The two targets: C for the CPU, CUDA C for a GPU or the emulator."""

    CPU = "cpu"
    CUDA = "cuda"


@dataclass(frozen=True)
class Target:
    """A build target. `arch` is the CUDA architecture asked for ('sm_90'; None: the device's or a default);
    `emulated` says that CUDA code runs on the CUDA emulator rather than a GPU. `cpu_features` are the x86
    instruction-set extensions the C compiler enables for the CPU target ('sse', 'avx', 'fma', 'avx512f'), which
    the code generator asks the compiler for when it builds (`codegen.cpu_features`); None when they are not known
    (a module lowered and not built), and then no vector operation is refused for want of one."""

    kind: TargetKind
    arch: str | None = None
    emulated: bool = False
    cpu_features: frozenset[str] | None = None

    @staticmethod
    def parse(text: str | None, module: IRModule, *, emulated: bool = False) -> Target:
        """The target spelled `text` ('cpu', 'cuda' or 'cuda:sm_XY'; None: what the module's function kinds
        imply), checked against the module: one with CUDA functions builds for CUDA only. ValueError otherwise."""
        implied = implied_target_kind(module)
        kind_text, _, arch = (text or implied).partition(":")
        if kind_text not in tuple(TargetKind) or (arch and kind_text != TargetKind.CUDA):
            raise ValueError(f"unknown or unavailable target {text!r}; available: "
                             f"{', '.join(TargetKind)} (or 'cuda:sm_XY')")
        kind = TargetKind(kind_text)
        if implied == TargetKind.CUDA and kind != TargetKind.CUDA:
            raise ValueError("the module has CUDA functions; build it for target 'cuda' (or 'cuda:sm_XY')")
        return Target(kind, arch or None, emulated and kind == TargetKind.CUDA)

    def __str__(self) -> str:
        return f"{self.kind}:{self.arch}" if self.arch else str(self.kind)


def implied_target_kind(module: IRModule) -> TargetKind:
    """The target a module's function kinds imply: CUDA if any function is a CUDA one, else the CPU."""
    return TargetKind.CUDA if any(f.attrs.kind in DEVICE_KINDS for f in module.functions) else TargetKind.CPU
