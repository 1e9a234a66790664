"""The SASS (machine code) of a cubin, disassembled, and each kernel's opcodes counted.

The disassembler is `nvdisasm` (pip package `nvidia-cuda-nvdisasm`), or `cuobjdump -sass` (`nvidia-cuda-cuobjdump`)
where only that is installed, found through the installed packages by `cuda.pathfinder` (which also looks in a
conda environment and under `CUDA_PATH` / `CUDA_HOME`), else on `PATH`. Without either, `sass_opcode_counts`
returns None and `SASS_TOOLS_MISSING` says what to install.

An instruction's opcode is its mnemonic without modifiers (`HMMA.16816.F32` counts as `HMMA`, `LDGSTS.E.BYPASS.128`
as `LDGSTS`); a predicate guard (`@P0`, `@!UPT`) is skipped. The `NOP`s that pad a kernel's code to its alignment
after its last instruction are not counted.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter

__all__ = ["SASS_TOOLS_MISSING", "disassemble", "disassembler", "opcode_counts", "sass_opcode_counts"]

SASS_TOOLS_MISSING = ("no SASS disassembler (nvdisasm or cuobjdump) is installed; "
                      "`pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump` adds the opcode counts")
"""What the report says where neither disassembler is installed."""

_TIMEOUT_S = 120

# the start of a kernel's code: nvdisasm's section banner, or cuobjdump's `Function : name`
_KERNEL_RE = re.compile(r"^\s*(?://-+\s+\.text\.(?P<section>\S+)\s+-+|Function\s*:\s*(?P<function>\S+))\s*$")
# an instruction: `/*0a80*/  @!P0 HMMA.16816.F32 R4, R8, R12, R4 ;` (cuobjdump's older listings open with `{`)
_INSTRUCTION_RE = re.compile(r"^\s*/\*[0-9a-fA-F]+\*/\s+(?:\{\s*)?(?:@!?U?P(?:T|\d+)\s+)?(?P<opcode>[A-Z][A-Z0-9_]*)")


def find_tool(name: str) -> str | None:
    """The path of the CUDA binary utility `name`, from the installed packages, else from PATH."""
    try:
        from cuda.pathfinder import find_nvidia_binary_utility
    except ImportError:  # a cuda.pathfinder before 1.3 has no binary utilities
        return shutil.which(name)
    try:
        return find_nvidia_binary_utility(name) or shutil.which(name)
    except Exception:  # an unsupported layout of the utilities means "not found"
        return shutil.which(name)


def disassembler() -> tuple[str, ...] | None:
    """The command that prints a cubin's SASS (the cubin's path to be appended): `nvdisasm -c`, else
    `cuobjdump -sass`; None when neither is installed."""
    nvdisasm = find_tool("nvdisasm")
    if nvdisasm:
        return (nvdisasm, "-c")
    cuobjdump = find_tool("cuobjdump")
    return (cuobjdump, "-sass") if cuobjdump else None


def disassemble(cubin: bytes, command: tuple[str, ...]) -> str:
    """The SASS listing of `cubin` printed by `command` (from `disassembler`). RuntimeError naming the tool when
    it fails."""
    with tempfile.TemporaryDirectory(prefix="hidet_lang_sass_") as directory:
        path = os.path.join(directory, "module.cubin")
        with open(path, "wb") as file:
            file.write(cubin)
        try:
            done = subprocess.run([*command, path], capture_output=True, text=True, timeout=_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise RuntimeError(f"{os.path.basename(command[0])} could not disassemble the cubin: {exc}") from None
    if done.returncode != 0:
        raise RuntimeError(f"{os.path.basename(command[0])} could not disassemble the cubin "
                           f"(exit status {done.returncode}): {done.stderr.strip()}")
    return done.stdout


def opcode_counts(listing: str) -> dict[str, Counter[str]]:
    """The opcodes of each kernel of a SASS `listing` (nvdisasm's or cuobjdump's), counted, by kernel name."""
    kernels: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in listing.splitlines():
        kernel = _KERNEL_RE.match(line)
        if kernel:
            current = kernels.setdefault(kernel["section"] or kernel["function"], [])
            continue
        instruction = _INSTRUCTION_RE.match(line)
        if instruction and current is not None:
            current.append(instruction["opcode"])
    counts = {}
    for name, opcodes in kernels.items():
        while opcodes and opcodes[-1] == "NOP":  # the alignment padding after the last instruction
            opcodes.pop()
        counts[name] = Counter(opcodes)
    return counts


def sass_opcode_counts(cubin: bytes) -> dict[str, Counter[str]] | None:
    """The opcodes of each kernel of `cubin`, counted, by kernel name; None when no disassembler is installed."""
    command = disassembler()
    return None if command is None else opcode_counts(disassemble(cubin, command))
