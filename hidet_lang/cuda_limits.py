"""The hardware limits of CUDA, beside the `Target` that names an architecture: the one place the checks (kind
rules), the emitters (launchers) and `Target.shared_memory_per_block` read them.

Fixed limits hold on every architecture the project targets; the shared memory a block may have depends on the
architecture and is what the runtime checks before a launch where no device can be asked.
"""

from __future__ import annotations

import re

ARCH_FORM = "'sm_XY', 'sm_XYa' (XY >= 90), 'sm_XYf' (XY >= 100) or 'XY', e.g. 'sm_80', 'sm_90a' or '90'"
"""The spellings of a CUDA architecture, as error messages list them."""

MAX_BLOCK_DIM = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024
MAX_GRID_DIM = (2**31 - 1, 65535, 65535)
MAX_STATIC_SHARED_BYTES = 48 * 1024  # more shared memory is dynamic and opted into per kernel
MAX_LOCAL_BYTES_PER_THREAD = 512 * 1024  # a thread's local memory (register tensors spill there)
MAX_CLUSTER_SIZE = 8  # blocks of a thread block cluster (sm_90 and later; the portable size)
MIN_CLUSTER_ARCH = 90  # the compute capability that has clusters

# Shared memory a block may have (static + dynamic, after opting in), by compute capability.
_SHARED_MEMORY_PER_BLOCK = {
    70: 96 * 1024, 72: 96 * 1024, 75: 64 * 1024, 80: 163 * 1024, 86: 99 * 1024, 87: 163 * 1024, 89: 99 * 1024,
    90: 227 * 1024, 100: 227 * 1024, 101: 227 * 1024, 103: 227 * 1024, 110: 227 * 1024, 120: 99 * 1024,
    121: 99 * 1024,
}


def normalize_arch(arch: str | int) -> str:
    """`arch` in the form `sm_XY[a|f]` ("80" -> "sm_80"); ValueError naming the accepted forms. Only the spelling
    is checked (`codegen.toolchain.nvrtc.compile_cubin` also checks that NVRTC supports the architecture)."""
    spelled = str(arch).strip() if isinstance(arch, str | int) else ""
    match = re.fullmatch(r"(?:sm_)?([1-9][0-9]{1,2})([af]?)", spelled)
    if match is None:
        raise ValueError(f"invalid CUDA architecture {arch!r}; expected {ARCH_FORM}")
    number, suffix = int(match[1]), match[2]
    if (suffix == "a" and number < 90) or (suffix == "f" and number < 100):
        raise ValueError(f"invalid CUDA architecture {arch!r}: no such variant; expected {ARCH_FORM}")
    return f"sm_{number}{suffix}"


def arch_number(arch: str) -> int:
    """The compute capability number of a normalized architecture ("sm_90a" -> 90)."""
    return int(arch[3:].rstrip("af"))


def shared_memory_per_block(arch: str) -> int:
    """The shared memory a block may have on normalized architecture `arch` (e.g. 'sm_90a'), in bytes; for an
    architecture not in the table, that of the closest older one."""
    capability = arch_number(arch)
    known = [c for c in _SHARED_MEMORY_PER_BLOCK if c <= capability]
    return _SHARED_MEMORY_PER_BLOCK[max(known)] if known else MAX_STATIC_SHARED_BYTES
