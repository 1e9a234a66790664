"""Every compilation stage of the modules and graphs a program defines, from the project's own views of them: the
IR after each lowering step (`HIDET_LANG_DUMP_IR`), the generated source (`source()`), NVRTC's PTX, the module's
`report()` (the vectorization report on the CPU; registers, shared memory and occupancy for CUDA), a graph's
printout and `to_dot()` drawing."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from hidet_lang.cuda_limits import normalize_arch
from hidet_lang.explorer.dot_svg import dot_to_svg
from hidet_lang.explorer.program import PROGRAM_FILE, Workspace
from hidet_lang.explorer.ptx import compile_ptx, ptx_dsl_lines
from hidet_lang.explorer.source_lines import dsl_lines
from hidet_lang.target import Target, TargetKind, implied_target_kind


def ir_stages(dumps: Path, line_maps: dict[str, dict[str, list[int | None]]]) -> list[dict[str, Any]]:
    """The IR dumps under `dumps`, one entry per lowered module: its name and its steps in order, each with its
    text, the unified diff from the step before (empty where the step changed nothing) and, where `line_maps` has
    the module's folder, the DSL line of each line of the text."""
    modules = []
    for folder in sorted(p for p in dumps.iterdir() if p.is_dir()) if dumps.is_dir() else []:
        steps, previous = [], None
        for path in sorted(folder.glob("*.txt")):
            text = path.read_text()
            diff = "" if previous is None else "".join(difflib.unified_diff(
                previous.splitlines(keepends=True), text.splitlines(keepends=True), "before", "after", n=2))
            lines = line_maps.get(folder.name, {}).get(path.stem)
            steps.append({"name": path.stem, "text": text, "diff": diff,
                          "lines": lines if lines is not None and len(lines) == len(text.splitlines()) else None})
            previous = text
        modules.append({"module": folder.name, "steps": steps})
    return modules


def dump_folder(module: Any) -> str:
    """The folder name `HIDET_LANG_DUMP_IR` gives a module (`hidet_lang.passes.pipeline`): its functions' names."""
    return "_".join(f.name for f in module.functions)[:80]


def module_stages(name: str, built: Any, workspace: Workspace) -> dict[str, Any]:
    """A built module's generated sources (each with the DSL line of every line), its PTX (CUDA) and its report,
    the workspace's paths in them (the `// file:line` markers, the report's lines) written as the page's file
    names."""
    cuda = built.target.is_cuda
    sources = []
    for which in (("cuda", "host") if cuda else ("c",)):
        text = workspace.shorten(built.source(which))
        sources.append({"name": {"cuda": "CUDA C (device)", "host": "CUDA C (host)", "c": "C"}[which],
                        "text": text, "lines": dsl_lines(text, PROGRAM_FILE)})
    entry: dict[str, Any] = {"name": name, "target": str(built.target), "sources": sources, "ptx": "", "ptx_lines": [],
                             "report": ""}
    if cuda:
        try:
            entry["ptx"] = compile_ptx(built.source("cuda"), built.target.arch)
            entry["ptx_lines"] = ptx_dsl_lines(entry["ptx"], sources[0]["lines"])
        except Exception as error:  # the page shows why there is no PTX; the other stages stand
            entry["ptx"] = workspace.shorten(f"no PTX: {error}")
    try:
        entry["report"] = workspace.shorten(str(built.report()))
    except Exception as error:  # the report needs the C compiler's remarks or NVRTC; say why it is missing
        entry["report"] = workspace.shorten(f"no report: {error}")
    return entry


def graph_stages(name: str, graph: Any, compiled: Any) -> dict[str, Any]:
    """A graph's fused groups (its printout), its DOT text drawn as SVG, and the kernels it compiled to."""
    dot = graph.to_dot()
    return {"name": name, "text": str(graph), "dot": dot, "svg": dot_to_svg(dot),
            "kernels": list(compiled.kernels), "target": str(compiled.target)}


def module_target(module: Any, arch: str) -> Target:
    """The target a script module is built for: the kind its functions imply, for a CUDA module the architecture
    `arch` the page chose ('' for the default)."""
    kind = implied_target_kind(module.ir_module())
    return Target(kind, normalize_arch(arch) if kind == TargetKind.CUDA and arch else None)


def workspace_dumps(workspace: Workspace, line_maps: dict[str, dict[str, list[int | None]]] | None = None
                    ) -> list[dict[str, Any]]:
    """The IR stages of everything built in `workspace` (with `line_maps`, by dump folder and step, the DSL line of
    each line of the IR), paths shortened to the page's file names."""
    stages = ir_stages(workspace.dumps, line_maps or {})
    for module in stages:
        for step in module["steps"]:
            step["text"], step["diff"] = workspace.shorten(step["text"]), workspace.shorten(step["diff"])
    return stages
