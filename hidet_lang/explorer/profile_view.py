"""The profile of a run on the CUDA emulator as the page shows it (`hidet_lang.cuda.profile_report`): the memory
counters of each line of the program, to stand beside that line (sectors a request of global memory, wavefronts a
request of shared memory and the conflict ways they mean, each against the ideal), the lines of other files (the
library's templates, the rule-based scheduler's kernels) in a table, and each kernel's totals and lower bound on
its time."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from codegen.runtime.profiling import profile
from hidet_lang.cuda.profile_report import KernelRecord, LineRecord, Profile
from hidet_lang.explorer.program import Workspace


def counters_text(record: LineRecord) -> str:
    """One record's counters in words: 'global load: 4.0 sectors/request (ideal 4.0)', or for shared memory
    'shared load: 2.0 wavefronts/request (ideal 1.0): 2.0-way bank conflicts'."""
    unit = "sectors" if record.space == "global" else "wavefronts"
    text = (f"{record.space} {record.kind}: {record.per_request:.1f} {unit}/request "
            f"(ideal {record.ideal_per_request:.1f})")
    if record.waste > 1:
        text += f": {record.waste:.1f}-way bank conflicts" if record.space == "shared" else \
            f": {record.waste:.1f}x the sectors needed"
    return text


def _record_json(record: LineRecord) -> dict[str, Any]:
    return {"space": record.space, "kind": record.kind, "requests": record.requests,
            "per_request": record.per_request, "ideal_per_request": record.ideal_per_request, "waste": record.waste,
            "instructions": list(record.instructions), "text": counters_text(record)}


def _kernel_json(kernel: KernelRecord) -> dict[str, Any]:
    counted = ", ".join(f"{name} {count}" for name, count in sorted(kernel.instructions.items()))
    return {"name": kernel.name, "launches": kernel.launches, "blocks": kernel.blocks,
            "threads_per_block": kernel.threads_per_block, "instructions": counted,
            "divergent_branches": kernel.divergent_branches,
            "bound": str(kernel.bound()) if kernel.arch is not None else ""}


def profile_view(p: Profile, workspace: Workspace) -> dict[str, Any]:
    """`p` as the page shows it: `lines` (by line of the program, as a string key: its records, the most wasteful
    first), `elsewhere` (the records of other files, with where they are and their source text, the most wasteful
    first) and `kernels`."""
    program = workspace.program.resolve()
    lines: dict[str, list[dict[str, Any]]] = {}
    elsewhere = []
    for record in sorted(p.lines(), key=lambda r: (-r.waste, -r.bytes_moved)):
        entry = _record_json(record)
        if record.file is not None and record.line is not None and Path(record.file).resolve() == program:
            lines.setdefault(str(record.line), []).append(entry)
        else:
            elsewhere.append({**entry, "where": record.where, "source": record.text})
    return {"lines": lines, "elsewhere": elsewhere, "kernels": [_kernel_json(k) for k in p.kernels()]}


def profiled_call(call: Callable[[], Any], workspace: Workspace) -> dict[str, Any]:
    """Call `call` (which launches emulated CUDA kernels) once inside a profile; the profile as the page shows it."""
    with profile() as p:
        call()
    return profile_view(p, workspace)
