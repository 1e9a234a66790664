"""The profile of CUDA kernels run on the emulator: per DSL line, what each memory instruction touched, and per kernel
what it executed, with a lower bound on its time (`profile_bound`).

`with hidet.cuda.profile() as p:` (the code generator's `codegen.runtime.profiling.profile`) collects the counts of
every launch inside into a `Profile`:
- `p.lines()`: one `LineRecord` a DSL line, memory space ('global' / 'shared') and kind ('load' / 'store'), with
  its warp-level requests and, for global memory, the 32-byte sectors they touched, for shared memory the
  wavefronts they took (bank conflicts take more), each beside its ideal (the fewest that hold the bytes asked for);
- `p.kernels()`: one `KernelRecord` a kernel: launches, blocks, warp instructions by class, divergent branches,
  barrier waits, its memory totals and `bound()`;
- `print(p)`: the lines sorted by waste (how many times the ideal they moved), with their source text, then the
  kernels.
"""

from __future__ import annotations

import linecache
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hidet_lang.cuda.profile_bound import TimeBound, time_bound

__all__ = ["KernelRecord", "LineRecord", "Profile", "tensor_flops"]

_SHAPE_RE = re.compile(r"^(?:mma|wgmma)\.m(\d+)n(\d+)k(\d+)$")
_FIELDS = ("requests", "lanes", "units", "ideal", "bytes", "moved")
"""The counts of a site, in the order the emulator gives them (PC_* in emulator_profile.h)."""
_SPACES = {1: "global", 2: "shared"}
_Site = tuple[str | None, int | None, str, str, Sequence[tuple[str, int]], str | None, str | None]
_LineKey = tuple[str | None, int | None, str | None, str | None, str, str]


def tensor_flops(op_class: str) -> int:
    """The floating-point operations of one warp's share of a tensor-core instruction of class `op_class`
    ('mma.m16n8k16': 2 * 16 * 8 * 16; a warpgroup MMA's, 'wgmma.m64nNk16', is a quarter of 2 * 64 * N * 16); 0 for
    other classes."""
    match = _SHAPE_RE.match(op_class)
    if match is None:
        return 0
    m, n, k = (int(g) for g in match.groups())
    return 2 * m * n * k // (4 if op_class.startswith("wgmma") else 1)


@dataclass(frozen=True)
class LineRecord:
    """The memory instructions of one DSL line in one space and direction. `requests`: warp-level instructions
    executed (a TMA copy or a warpgroup MMA is one); `sectors` (global) or `wavefronts` (shared) what they took,
    None for the other space; `ideal`: the fewest sectors or wavefronts that would hold the bytes each request asked
    for; `bytes_requested` by the threads and `bytes_moved` (sectors or wavefronts times 32 or 128 bytes);
    `instructions`: which ('element', 'vector', 'cp.async', 'ldmatrix', 'tma', 'wgmma'). Code without a DSL line
    (the rule-based scheduler's kernels) has no `file` and `line`: its `function` and the first line of its IR
    `statement` name it instead."""

    file: str | None
    line: int | None
    space: str
    kind: str
    requests: int
    sectors: int | None
    wavefronts: int | None
    ideal: int
    bytes_requested: int
    bytes_moved: int
    instructions: tuple[str, ...]
    function: str | None = None
    statement: str | None = None

    @property
    def where(self) -> str:
        """Where the line is: 'file.py:line', or for code without a DSL line the function it is in."""
        if self.file is None or self.line is None:
            return self.function or "?"
        return f"{os.path.basename(self.file)}:{self.line}"

    @property
    def units(self) -> int:
        """The sectors or wavefronts taken."""
        return self.sectors if self.sectors is not None else self.wavefronts or 0

    @property
    def per_request(self) -> float:
        """Sectors (or wavefronts) a request."""
        return self.units / self.requests if self.requests else 0.0

    @property
    def ideal_per_request(self) -> float:
        """The ideal sectors (or wavefronts) a request."""
        return self.ideal / self.requests if self.requests else 0.0

    @property
    def waste(self) -> float:
        """How many times its ideal the line took: 1.0 is perfect; for shared memory, the conflict ways."""
        return self.units / self.ideal if self.ideal else 1.0

    @property
    def text(self) -> str:
        """The line's source text (empty when the file cannot be read); for code without a DSL line, its IR
        statement."""
        if self.file is None or self.line is None:
            return self.statement or ""
        return linecache.getline(self.file, self.line).strip()


@dataclass
class KernelRecord:
    """One kernel's totals over the launches profiled: `launches`, `blocks` (all launches), `threads_per_block`;
    `instructions`: warp-level instructions executed by class ('fma', 'fp32', 'sfu', 'barrier', 'branch', tensor
    shapes such as 'mma.m16n8k16', and the memory instructions as 'global.load', 'shared.store', ...);
    `divergent_branches`: branches whose lanes went both ways; `global_sectors` and `distinct_sectors` (each sector
    once), `shared_wavefronts`; `tensor_flops` and `fp32_flops` (an FMA counts 2); `arch`: the architecture its
    module was built for; `module`: the compiled module that launched it (kernels of the same name in different
    modules have records of their own)."""

    name: str
    arch: str | None = None
    module: Any = field(default=None, repr=False, compare=False)
    launches: int = 0
    blocks: int = 0
    threads_per_block: int = 0
    instructions: dict[str, int] = field(default_factory=dict)
    divergent_branches: int = 0
    global_sectors: int = 0
    distinct_sectors: int = 0
    shared_wavefronts: int = 0
    tensor_flops: int = 0
    fp32_flops: int = 0

    @property
    def barrier_waits(self) -> int:
        """Warp-level barrier instructions executed."""
        return self.instructions.get("barrier", 0)

    @property
    def fp32_warp_instructions(self) -> int:
        """Warp-level f32 instructions of the FMA pipe (FMA, add, multiply)."""
        return self.instructions.get("fma", 0) + self.instructions.get("fp32", 0)

    def bound(self, arch: str | None = None) -> TimeBound:
        """The lower bound on the time of its launches on `arch` (its module's architecture by default)."""
        chosen = arch or self.arch
        if chosen is None:
            raise ValueError(f"kernel {self.name!r}: name the architecture to bound its time on (e.g. 'sm_90')")
        return time_bound(self, chosen)


class Profile:
    """Counts of emulated CUDA launches, collected by `hidet.cuda.profile()` (see the module's docstring)."""

    def __init__(self) -> None:
        self._lines: dict[_LineKey, dict[str, int]] = {}
        self._instructions: dict[_LineKey, set[str]] = {}
        self._kernels: dict[tuple[int, str], KernelRecord] = {}

    def record(self, kernel: str, site: _Site, space: int, counts: Sequence[int], module: Any = None) -> None:
        """Add one site's counts: `site` = (file, line, kind, instruction, instruction classes a thread's execution
        issues, and for code without a DSL line its function and IR statement, else None), `space` 0 (a branch or
        an execution), 1 (global) or 2 (shared), `counts` in `_FIELDS`' order; `kernel` is a kernel of `module`."""
        file, line, kind, op, ops, function, statement = site
        c = dict(zip(_FIELDS, counts))
        k = self._kernel(kernel, module)
        if kind == "branch":
            k.instructions["branch"] = k.instructions.get("branch", 0) + c["requests"]
            k.divergent_branches += c["units"]
            return
        if kind == "ops":
            for name, count in ops:
                k.instructions[name] = k.instructions.get(name, 0) + c["requests"] * count
                k.tensor_flops += c["requests"] * count * tensor_flops(name)
                if name in ("fma", "fp32"):
                    k.fp32_flops += c["lanes"] * count * (2 if name == "fma" else 1)
            return
        space_name = _SPACES[space]
        key = f"{space_name}.{kind}"
        k.instructions[key] = k.instructions.get(key, 0) + c["requests"]
        if space_name == "global":
            k.global_sectors += c["units"]
        else:
            k.shared_wavefronts += c["units"]
        line_key = (file, line, function, statement, space_name, kind)
        totals = self._lines.setdefault(line_key, dict.fromkeys(_FIELDS, 0))
        for name in _FIELDS:
            totals[name] += c[name]
        self._instructions.setdefault(line_key, set()).add(op)

    def record_kernel(self, kernel: str, arch: str | None, launches: int, blocks: int, threads: int,
                      distinct_sectors: int, module: Any = None) -> None:
        """Add the launches of kernel `kernel` of `module` (`blocks` in all, `threads` a block) and the distinct
        global sectors they touched."""
        k = self._kernel(kernel, module)
        k.arch = arch
        k.launches += launches
        k.blocks += blocks
        k.threads_per_block = threads
        k.distinct_sectors += distinct_sectors

    def _kernel(self, name: str, module: Any) -> KernelRecord:
        key = (id(module), name)
        if key not in self._kernels:
            self._kernels[key] = KernelRecord(name, module=module)
        return self._kernels[key]

    def lines(self) -> list[LineRecord]:
        """One record a DSL line, memory space and kind, in the order of file and line."""
        records = []
        for key, c in self._lines.items():
            file, line, function, statement, space, kind = key
            units = c["units"]
            records.append(LineRecord(file, line, space, kind, c["requests"],
                                      units if space == "global" else None, units if space == "shared" else None,
                                      c["ideal"], c["bytes"], c["moved"], tuple(sorted(self._instructions[key])),
                                      function, statement))
        return sorted(records, key=lambda r: (r.file or "", r.line or 0, r.function or "", r.statement or "",
                                              r.space, r.kind))

    def kernels(self, module: Any = None) -> list[KernelRecord]:
        """One record a kernel (of `module` only, where given), by name."""
        return sorted((k for k in self._kernels.values() if module is None or k.module is module),
                      key=lambda k: k.name)

    def kernel(self, name: str, module: Any = None) -> KernelRecord:
        """The record of kernel `name` (of `module`, where given); KeyError when the profile holds no launch of it,
        ValueError when kernels of several modules have that name."""
        found = [k for k in self.kernels(module) if k.name == name]
        if not found:
            launched = ", ".join(k.name for k in self.kernels(module)) or "none"
            raise KeyError(f"the profile holds no launch of kernel {name!r}"
                           + (f" of {module!r}" if module is not None else "") + f" (kernels launched: {launched})")
        if len(found) > 1:
            raise ValueError(f"kernels of {len(found)} modules are called {name!r}; name the module")
        return found[0]

    def line(self, line: int, space: str | None = None, kind: str | None = None) -> LineRecord:
        """The record of DSL line `line` (of any file) in `space` and of `kind` where given; KeyError when there is
        none, ValueError when several match."""
        found = [r for r in self.lines() if r.line == line and space in (None, r.space) and kind in (None, r.kind)]
        if not found:
            raise KeyError(f"no memory instruction of line {line} was profiled"
                           + (f" in {space} memory" if space else "") + (f" ({kind})" if kind else ""))
        if len(found) > 1:
            raise ValueError(f"line {line} has {len(found)} records ({', '.join(f'{r.space} {r.kind}' for r in found)})"
                             "; name the space and kind")
        return found[0]

    def table(self, waste_first: bool = True) -> str:
        """The lines as a table (sorted by waste, the most first, with `waste_first`), then the kernels."""
        rows = self.lines()
        if waste_first:
            rows.sort(key=lambda r: (-r.waste, -r.bytes_moved))
        width = max([24, *(len(r.where) for r in rows)])
        out = [f"{'line':<{width}} {'space':<6} {'kind':<5} {'requests':>9} {'per req':>8} {'ideal':>6} {'waste':>6}  "
               "source"]
        for r in rows:
            unit = "sect" if r.space == "global" else "wave"
            out.append(f"{r.where:<{width}} {r.space:<6} {r.kind:<5} {r.requests:>9} {r.per_request:>5.1f} {unit} "
                       f"{r.ideal_per_request:>6.1f} {r.waste:>5.1f}x  {r.text}")
        for k in self.kernels():
            counted = ", ".join(f"{name} {count}" for name, count in sorted(k.instructions.items()))
            out.append(f"kernel {k.name}: {k.launches} launch(es), {k.blocks} blocks of {k.threads_per_block} threads;"
                       f" warp instructions: {counted}; divergent branches {k.divergent_branches}")
            if k.arch is not None:
                out.append(f"  time {k.bound()}")
        return "\n".join(out)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"<Profile: {len(self._lines)} lines, {len(self._kernels)} kernels>"
