"""The SASS (machine code) of a cubin, disassembled, and each kernel's opcodes counted.

The disassembler is `nvdisasm` (pip package `nvidia-cuda-nvdisasm`), or `cuobjdump -sass` (`nvidia-cuda-cuobjdump`)
where only that is installed, found through the installed packages by `cuda.pathfinder` (which also looks in a
conda environment and under `CUDA_PATH` / `CUDA_HOME`), else on `PATH`. Without either, `sass_of_cubin`
returns None and `SASS_TOOLS_MISSING` says what to install.

An instruction's opcode is its mnemonic without modifiers (`HMMA.16816.F32` counts as `HMMA`, `LDGSTS.E.BYPASS.128`
as `LDGSTS`); a predicate guard (`@P0`, `@!UPT`) is skipped. The `NOP`s that pad a kernel's code to its alignment
after its last instruction are not counted.

A kernel's main loop (`main_loops`) is read from its branches: a branch back to an earlier instruction closes a loop
from that instruction to the branch; of the loops that issue tensor-core instructions (`TENSOR_CORE_OPCODES`), the
main one issues the most of them (the shortest such loop where several issue as many: the innermost). Its share of
tensor-core instructions says how much of the loop's issue feeds the tensor cores.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass

__all__ = ["SASS_TOOLS_MISSING", "TENSOR_CORE_OPCODES", "KernelSass", "MainLoop", "disassemble", "disassembler",
           "main_loops", "opcode_counts", "read_sass", "sass_of_cubin"]

SASS_TOOLS_MISSING = ("no SASS disassembler (nvdisasm or cuobjdump) is installed; "
                      "`pip install nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump` adds the opcode counts")
"""What the report says where neither disassembler is installed."""

_TIMEOUT_S = 120

# the start of a kernel's code: nvdisasm's section banner, or cuobjdump's `Function : name`
_KERNEL_RE = re.compile(r"^\s*(?://-+\s+\.text\.(?P<section>\S+)\s+-+|Function\s*:\s*(?P<function>\S+))\s*$")
# an instruction: `/*0a80*/  @!P0 HMMA.16816.F32 R4, R8, R12, R4 ;` (cuobjdump's older listings open with `{`)
_INSTRUCTION_RE = re.compile(r"^\s*/\*(?P<address>[0-9a-fA-F]+)\*/\s+(?:\{\s*)?(?:@!?U?P(?:T|\d+)\s+)?"
                             r"(?P<opcode>[A-Z][A-Z0-9_]*)(?P<rest>[^;]*)")
# a label of nvdisasm's (`.L_x_17:`), and a branch's target: nvdisasm's label or cuobjdump's address
_LABEL_RE = re.compile(r"^(?P<label>\.L\w+):\s*$")
_TARGET_RE = re.compile(r"`\((?P<label>\.L\w+)\)|\b0x(?P<address>[0-9a-fA-F]+)\b")
_BRANCHES = frozenset({"BRA", "BRX", "JMP"})

TENSOR_CORE_OPCODES = frozenset({"HMMA", "HGMMA", "IMMA", "IGMMA", "DMMA", "BMMA", "BGMMA", "QGMMA", "OMMA"})
"""The opcodes that issue work to the tensor cores (mma.sync's `HMMA`/`IMMA`/`DMMA`/`BMMA`, wgmma's `*GMMA`)."""


@dataclass(frozen=True)
class MainLoop:
    """A kernel's main loop: its `instructions` from the first to the branch back, `tensor_core` of them
    tensor-core instructions."""

    instructions: int
    tensor_core: int

    @property
    def tensor_core_share(self) -> float:
        """The tensor-core instructions as a share of the loop's."""
        return self.tensor_core / self.instructions


@dataclass(frozen=True)
class KernelSass:
    """What the SASS of one kernel says: its `opcodes`, counted, and its `main_loop` (None where no loop issues
    tensor-core instructions)."""

    opcodes: Counter[str]
    main_loop: MainLoop | None


@dataclass(frozen=True)
class _Instruction:
    address: int
    opcode: str
    target: str | None  # a branch's target: a label, or `0x<address>`


def _kernel_instructions(listing: str) -> dict[str, tuple[list[_Instruction], dict[str, int]]]:
    """Each kernel's instructions, in order, and its labels' addresses (a label names the next instruction), by
    kernel name; the `NOP`s padding a kernel after its last instruction are dropped."""
    kernels: dict[str, tuple[list[_Instruction], dict[str, int]]] = {}
    current: tuple[list[_Instruction], dict[str, int]] | None = None
    pending: list[str] = []  # labels waiting for their instruction
    for line in listing.splitlines():
        kernel = _KERNEL_RE.match(line)
        if kernel:
            current = kernels.setdefault(kernel["section"] or kernel["function"], ([], {}))
            pending = []
            continue
        label = _LABEL_RE.match(line.strip())
        if label:
            pending.append(label["label"])
            continue
        instruction = _INSTRUCTION_RE.match(line)
        if instruction and current is not None:
            address = int(instruction["address"], 16)
            target = None
            if instruction["opcode"] in _BRANCHES:
                found = _TARGET_RE.search(instruction["rest"])
                target = None if found is None else found["label"] or f"0x{found['address']}"
            current[0].append(_Instruction(address, instruction["opcode"], target))
            current[1].update(dict.fromkeys(pending, address))
            pending = []
    for instructions, _ in kernels.values():
        while instructions and instructions[-1].opcode == "NOP":  # the alignment padding after the last one
            instructions.pop()
    return kernels


def _main_loop(instructions: list[_Instruction], labels: dict[str, int]) -> MainLoop | None:
    """The main loop of one kernel's `instructions` (see the module's docstring), or None."""
    best: MainLoop | None = None
    for end, branch in enumerate(instructions):
        if branch.target is None:
            continue
        target = labels.get(branch.target) if branch.target.startswith(".") else int(branch.target, 16)
        if target is None or target > branch.address:
            continue
        body = [i for i in instructions[:end + 1] if i.address >= target]
        loop = MainLoop(len(body), sum(i.opcode in TENSOR_CORE_OPCODES for i in body))
        if loop.tensor_core and (best is None or (loop.tensor_core, -loop.instructions)
                                 > (best.tensor_core, -best.instructions)):
            best = loop
    return best


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


def read_sass(listing: str) -> dict[str, KernelSass]:
    """What each kernel of a SASS `listing` (nvdisasm's or cuobjdump's) says, by kernel name."""
    return {name: KernelSass(Counter(i.opcode for i in instructions), _main_loop(instructions, labels))
            for name, (instructions, labels) in _kernel_instructions(listing).items()}


def opcode_counts(listing: str) -> dict[str, Counter[str]]:
    """The opcodes of each kernel of a SASS `listing`, counted, by kernel name."""
    return {name: kernel.opcodes for name, kernel in read_sass(listing).items()}


def main_loops(listing: str) -> dict[str, MainLoop | None]:
    """The main loop of each kernel of a SASS `listing` (None for a kernel without one), by kernel name."""
    return {name: kernel.main_loop for name, kernel in read_sass(listing).items()}


def sass_of_cubin(cubin: bytes) -> dict[str, KernelSass] | None:
    """What the SASS of each kernel of `cubin` says, by kernel name; None when no disassembler is installed."""
    command = disassembler()
    return None if command is None else read_sass(disassemble(cubin, command))
