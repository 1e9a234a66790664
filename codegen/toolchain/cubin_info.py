"""What a cubin says about each of its kernels: registers a thread, the stack frame (local memory) a thread,
static shared memory, launch bounds and barriers, read from the ELF image NVRTC produced.

A cubin describes its kernels in three places:
- `.nv.info`, attributes of the whole image keyed by a function's symbol index: its register count
  (`EIATTR_REGCOUNT`), stack frame size (`EIATTR_FRAME_SIZE`) and minimum stack size (`EIATTR_MIN_STACK_SIZE`);
- `.nv.info.<kernel>`, attributes of one kernel: its launch bounds (`EIATTR_MAX_THREADS`, present when the source
  declares `__launch_bounds__`, as the project's kernels do), its named barriers (`EIATTR_NUM_BARRIERS`), its
  register limit (`EIATTR_MAXREG_COUNT`);
- `.nv.shared.<kernel>`, a section that occupies no file space and whose size is the kernel's static shared memory.

Each attribute is a 4-byte header (format, attribute code, a 16-bit field) followed, for the sized format, by as
many bytes as the 16-bit field says; for the other formats the field is the value itself.

On sm_90 and newer the compiler lays the 1 KB of shared memory the system reserves for each block at the start of
the shared window of a kernel that uses shared memory, and counts it in that kernel's `.nv.shared.<kernel>`
section (a kernel with a 1200-byte array reports 2224 bytes, and its SASS addresses the array at offset 0x400);
the image then holds a `.nv.shared.reserved.<n>` section. `KernelResources.reserved_smem_in_static` says so, and
the occupancy does not count that kilobyte twice.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from .elf import read_sections, read_symbols

__all__ = ["KernelResources", "kernel_resources", "read_attributes"]

_EIFMT_SVAL = 4  # the attribute's 16-bit field is the size of the value that follows it

EIATTR_MAX_THREADS = 0x05
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_REGCOUNT = 0x2F
EIATTR_NUM_BARRIERS = 0x4C

_INFO = ".nv.info"
_SHARED = ".nv.shared."
_RESERVED_SHARED = ".nv.shared.reserved."


@dataclass(frozen=True)
class KernelResources:
    """One kernel of a cubin: `registers` a thread, `frame_bytes` (its stack frame: local memory a thread, local
    arrays and spills), `static_smem` (bytes of static shared memory, the reserved kilobyte included where
    `reserved_smem_in_static`), `max_threads` (its launch bounds (x, y, z); None without), `barriers` (named
    barriers it uses) and `register_limit` (the most registers ptxas could give a thread)."""

    name: str
    registers: int
    frame_bytes: int
    static_smem: int
    max_threads: tuple[int, int, int] | None
    barriers: int
    register_limit: int | None
    reserved_smem_in_static: bool


def read_attributes(section: bytes) -> list[tuple[int, int | bytes]]:
    """The (attribute code, value) pairs of an `.nv.info` section: the value is the bytes of a sized attribute,
    else the 16-bit field. ValueError when an attribute runs past the section's end."""
    attributes: list[tuple[int, int | bytes]] = []
    offset = 0
    while offset + 4 <= len(section):
        fmt, code, field = struct.unpack_from("<BBH", section, offset)
        offset += 4
        if fmt == _EIFMT_SVAL:
            if offset + field > len(section):
                raise ValueError(f"the .nv.info attribute 0x{code:x} runs past its section's end")
            attributes.append((code, section[offset : offset + field]))
            offset += field
        else:
            attributes.append((code, field))
    return attributes


def kernel_resources(cubin: bytes) -> dict[str, KernelResources]:
    """The resources of every kernel (a function with an `.nv.info.<name>` section) of the ELF image `cubin`,
    by kernel name, in the order of their sections. ValueError for an image that is not a well-formed ELF64."""
    sections = read_sections(cubin)
    symbols = read_symbols(cubin)
    by_symbol: dict[str, dict[int, int]] = {}
    for section in sections:
        if section.name != _INFO:
            continue
        for code, value in read_attributes(section.data):
            if isinstance(value, bytes) and len(value) == 8 and code in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE,
                                                                         EIATTR_MIN_STACK_SIZE):
                index, amount = struct.unpack("<II", value)
                if index < len(symbols):
                    by_symbol.setdefault(symbols[index].name, {})[code] = amount
    shared = {s.name[len(_SHARED):]: s.size for s in sections if s.name.startswith(_SHARED)}
    has_reserved = any(s.name.startswith(_RESERVED_SHARED) for s in sections)
    kernels: dict[str, KernelResources] = {}
    for section in sections:
        if not section.name.startswith(_INFO + "."):
            continue
        name = section.name[len(_INFO) + 1:]
        own = dict(read_attributes(section.data))
        image = by_symbol.get(name, {})
        bounds = own.get(EIATTR_MAX_THREADS)
        limit = own.get(EIATTR_MAXREG_COUNT)
        barriers = own.get(EIATTR_NUM_BARRIERS, 0)
        kernels[name] = KernelResources(
            name=name,
            registers=image.get(EIATTR_REGCOUNT, 0),
            frame_bytes=image.get(EIATTR_FRAME_SIZE, 0),
            static_smem=shared.get(name, 0),
            max_threads=struct.unpack("<III", bounds) if isinstance(bounds, bytes) and len(bounds) == 12 else None,
            barriers=barriers if isinstance(barriers, int) else 0,
            register_limit=limit if isinstance(limit, int) else None,
            reserved_smem_in_static=has_reserved and name in shared,
        )
    return kernels
