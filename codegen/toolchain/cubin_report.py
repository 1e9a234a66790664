"""The report of a CUDA module's cubin (`CompiledModule.report()` of a CUDA module): per kernel, the registers a
thread, the bytes of spill stores and loads, the local memory (stack frame) a thread, static and dynamic shared
memory a block, the most threads a block may have, the theoretical occupancy on the target architecture and what
limits it, and the count of each SASS opcode of its code.

Registers, frame and static shared memory come from the cubin itself (`cubin_info`); spills from ptxas' verbose
log of a second compilation of the same source (`ptxas_log`); the occupancy from `occupancy`; the opcodes from a
disassembler (`sass`), where one is installed. The cubin is NVRTC's for the module's architecture whether the
module runs on a GPU or on the emulator; without NVRTC the report is empty and says why.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from hidet_lang.cuda.profile_bound import microseconds

from .cubin_info import KernelResources, kernel_resources
from .errors import CudaToolkitMissingError
from .occupancy import Occupancy, max_threads_per_block, occupancy
from .ptxas_log import FunctionProperties, parse_ptxas_log, ptxas_log
from .sass import SASS_TOOLS_MISSING, KernelSass, MainLoop, sass_of_cubin

if TYPE_CHECKING:
    from hidet_lang.cuda.profile_bound import TimeBound

__all__ = ["CubinReport", "KernelLaunch", "KernelReport", "cubin_report", "cuda_module_report"]


@dataclass(frozen=True)
class KernelLaunch:
    """What a module says about launching one kernel: its `threads` a block and `dynamic_smem` bytes a block
    (None where they depend on the launch's arguments)."""

    threads: int | None
    dynamic_smem: int | None = 0


@dataclass(frozen=True)
class KernelReport:
    """One kernel of a cubin: `registers` a thread; `spill_store_bytes` / `spill_load_bytes` (ptxas' static
    counts; None when unknown); `local_bytes`, its stack frame (local arrays and spills) a thread; `static_smem`
    and `dynamic_smem` bytes a block (dynamic: None when set at launch from arguments); `threads_per_block` (None
    when set at launch from arguments); `max_threads_per_block` the registers and launch bounds allow; its
    theoretical `occupancy` (None without a known block size); its SASS `opcodes`, counted, and its `main_loop`
    (`sass.main_loops`: the loop issuing the most tensor-core instructions, with their share of its instructions;
    None without a disassembler or without such a loop); `bound`: the lower bound on the time of its launches in a
    profile (`CubinReport.with_bounds`; None without one)."""

    name: str
    registers: int
    spill_store_bytes: int | None
    spill_load_bytes: int | None
    local_bytes: int
    static_smem: int
    dynamic_smem: int | None
    threads_per_block: int | None
    max_threads_per_block: int
    occupancy: Occupancy | None
    opcodes: Counter[str] | None
    main_loop: MainLoop | None = None
    bound: TimeBound | None = None


_COLUMNS = ("kernel", "regs", "spill st/ld B", "local B", "smem static B", "smem dyn B", "threads", "max threads",
            "blocks/SM", "warps/SM", "occupancy", "limited by")
_BOUND_COLUMNS = ("time >=", "bound by")
_LEFT = frozenset({"kernel", "limited by", "bound by"})  # the columns of words, aligned left
_BOUND_NOTE = ("time >=: a lower bound on the time of the kernel's launches in the profile, from the emulator's "
               "counts and the peak rates of {parts} (never a prediction); bound by: the resource that needs it")


def _bound_cells(kernel: KernelReport) -> tuple[str, ...]:
    """The bound's columns of a kernel: its lower-bound time and the resource that needs it ('-' without one)."""
    if kernel.bound is None:
        return ("-", "-")
    return (microseconds(kernel.bound.seconds), kernel.bound.binding)


def _row(kernel: KernelReport) -> tuple[str, ...]:
    spills = "?" if kernel.spill_store_bytes is None else f"{kernel.spill_store_bytes}/{kernel.spill_load_bytes}"
    occ = kernel.occupancy
    return (kernel.name, str(kernel.registers), spills, str(kernel.local_bytes), str(kernel.static_smem),
            "launch" if kernel.dynamic_smem is None else str(kernel.dynamic_smem),
            "launch" if kernel.threads_per_block is None else str(kernel.threads_per_block),
            str(kernel.max_threads_per_block),
            "?" if occ is None else str(occ.blocks_per_sm),
            "?" if occ is None else f"{occ.warps_per_sm}/{occ.max_warps}",
            "?" if occ is None else f"{occ.fraction:.0%}",
            "?" if occ is None else ", ".join(occ.limited_by))


@dataclass(frozen=True)
class CubinReport:
    """The kernels of a CUDA module's cubin for `arch`, and `notes` (what could not be measured, and why);
    `str()` is a table, one line per kernel, then each kernel's SASS opcodes, most frequent first, then the notes.
    `kernel(name)` looks one up."""

    arch: str
    kernels: tuple[KernelReport, ...]
    notes: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[KernelReport]:
        return iter(self.kernels)

    def __len__(self) -> int:
        return len(self.kernels)

    def kernel(self, name: str) -> KernelReport:
        """The kernel called `name`; KeyError naming the kernels there are."""
        for kernel in self.kernels:
            if kernel.name == name:
                return kernel
        raise KeyError(f"no kernel {name!r} in the report; it has: {', '.join(k.name for k in self.kernels)}")

    @staticmethod
    def combine(arch: str, parts: Sequence[tuple[str, CubinReport]]) -> CubinReport:
        """One report of several modules' `parts` (a title and a report each), each kernel named `title: kernel`
        (the title alone for a module's only kernel); their notes once each."""
        kernels = []
        for title, report in parts:
            for kernel in report.kernels:
                name = title if len(report.kernels) == 1 else f"{title}: {kernel.name}"
                kernels.append(replace(kernel, name=name))
        notes = dict.fromkeys(note for _, report in parts for note in report.notes)
        return CubinReport(arch=arch, kernels=tuple(kernels), notes=tuple(notes))

    def with_bounds(self, bounds: Mapping[str, TimeBound]) -> CubinReport:
        """This report with the lower bound on the time of each kernel named in `bounds` (`profile_bound`): its
        table gains the columns 'time >=' and 'bound by', and a note says what they are. KeyError for a name that
        is no kernel of the report."""
        names = {k.name for k in self.kernels}
        unknown = [name for name in bounds if name not in names]
        if unknown:
            raise KeyError(f"no kernel {unknown[0]!r} in the report; it has: {', '.join(sorted(names))}")
        kernels = tuple(replace(k, bound=bounds.get(k.name, k.bound)) for k in self.kernels)
        parts = ", ".join(dict.fromkeys(k.bound.part for k in kernels if k.bound is not None))
        notes = tuple(n for n in self.notes if not n.startswith("time >=")) + ((_BOUND_NOTE.format(parts=parts),)
                                                                              if parts else ())
        return replace(self, kernels=kernels, notes=notes)

    def __str__(self) -> str:
        lines = [f"CUDA kernels for {self.arch}"]
        if self.kernels:
            bounded = any(k.bound is not None for k in self.kernels)
            columns = _COLUMNS + _BOUND_COLUMNS if bounded else _COLUMNS
            rows = [columns, *(_row(k) + (_bound_cells(k) if bounded else ()) for k in self.kernels)]
            widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
            for row in rows:
                cells = [c.ljust(w) if name in _LEFT else c.rjust(w) for name, c, w in zip(columns, row, widths)]
                lines.append("  ".join(cells).rstrip())
            counted = [k for k in self.kernels if k.opcodes is not None]
            if counted:
                lines.append("SASS opcodes:")
                for kernel in counted:
                    lines.extend(_opcode_lines(kernel.name, kernel.opcodes))
                    loop = kernel.main_loop
                    if loop is not None:
                        lines.append(f"    main loop: {loop.instructions} instructions, {loop.tensor_core} on the "
                                     f"tensor cores ({loop.tensor_core_share:.1%})")
        else:
            lines.append("(no kernels)")
        lines.extend(f"note: {note}" for note in self.notes)
        return "\n".join(lines)


def _opcode_lines(name: str, opcodes: Counter[str], width: int = 116) -> list[str]:
    """`name (N instructions): OP n, OP n, ...`, most frequent first, wrapped between entries at `width`."""
    most_first = sorted(opcodes.items(), key=lambda item: (-item[1], item[0]))
    lines = [f"  {name} ({sum(opcodes.values())} instructions):"]
    for op, n in most_first:
        entry = f" {op} {n},"
        if len(lines[-1]) + len(entry) > width:
            lines.append("     ")
        lines[-1] += entry
    lines[-1] = lines[-1].rstrip(",")
    return lines


def _kernel_report(arch: str, resources: KernelResources, launch: KernelLaunch | None,
                   properties: FunctionProperties | None, sass: KernelSass | None) -> KernelReport:
    bound = math.prod(resources.max_threads) if resources.max_threads else None
    threads = launch.threads if launch is not None and launch.threads is not None else bound
    dynamic = 0 if launch is None else launch.dynamic_smem
    occ = None if threads is None else occupancy(arch, resources.registers, threads,
                                                 resources.static_smem + (dynamic or 0),
                                                 reserved_included=resources.reserved_smem_in_static)
    return KernelReport(
        name=resources.name,
        registers=resources.registers,
        spill_store_bytes=None if properties is None else properties.spill_store_bytes,
        spill_load_bytes=None if properties is None else properties.spill_load_bytes,
        local_bytes=resources.frame_bytes,
        static_smem=resources.static_smem,
        dynamic_smem=dynamic,
        threads_per_block=threads,
        max_threads_per_block=max_threads_per_block(arch, resources.registers, bound),
        occupancy=occ,
        opcodes=None if sass is None else sass.opcodes,
        main_loop=None if sass is None else sass.main_loop,
    )


def cubin_report(cubin: bytes, arch: str, launches: Mapping[str, KernelLaunch] | None = None, *,
                 ptxas: str | None = None, sass: Mapping[str, KernelSass] | None = None,
                 notes: Sequence[str] = ()) -> CubinReport:
    """The report of `cubin` (an ELF image compiled for normalized architecture `arch`): each kernel's resources,
    with `launches` (by kernel symbol; a kernel not there has no dynamic shared memory and its launch bounds for
    its block size), `ptxas`' verbose log (its spills; None: unknown) and what the SASS says by kernel (`sass`;
    None: not disassembled); `notes` are added to the report's. A kernel whose block size or dynamic shared memory
    depends on its arguments is noted."""
    launches = launches or {}
    properties = parse_ptxas_log(ptxas) if ptxas is not None else {}
    kernels = []
    notes = list(notes)
    resources_by_name = kernel_resources(cubin)
    for name, resources in resources_by_name.items():
        launch = launches.get(name)
        report = _kernel_report(arch, resources, launch, properties.get(name),
                                None if sass is None else sass.get(name, KernelSass(Counter(), None)))
        if report.threads_per_block is None:
            notes.append(f"{name}: its block size is set at launch and has no launch bound; no occupancy")
        if report.dynamic_smem is None:
            notes.append(f"{name}: its dynamic shared memory is set at launch; the occupancy counts none")
        kernels.append(report)
    if any(r.reserved_smem_in_static for r in resources_by_name.values()):
        notes.append("static shared memory counts the 1 KB a block the system reserves (on sm_90 and newer the "
                     "compiler lays it out at the start of the kernel's shared memory)")
    return CubinReport(arch=arch, kernels=tuple(kernels), notes=tuple(notes))


def cuda_module_report(source: str, cubin: Callable[[], bytes], arch: str,
                       launches: Mapping[str, KernelLaunch] | None = None, *,
                       include_dirs: Sequence[str] = ()) -> CubinReport:
    """The report of a CUDA module whose device `source` NVRTC compiles (with `include_dirs`) to `cubin()` for
    `arch`: its cubin read, the source compiled once more for ptxas' log, the cubin disassembled where a
    disassembler is installed (a note says what to install where none is). Without NVRTC, a report of no kernel
    whose note says so."""
    try:
        image = cubin()
        log = ptxas_log(source, arch, include_dirs=include_dirs)
    except CudaToolkitMissingError as exc:
        return CubinReport(arch=arch, kernels=(), notes=(f"no cubin to report on: {exc}",))
    sass = sass_of_cubin(image)
    return cubin_report(image, arch, launches, ptxas=log, sass=sass,
                        notes=() if sass is not None else (SASS_TOOLS_MISSING,))
