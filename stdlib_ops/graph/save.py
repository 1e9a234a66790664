"""Saving a compiled graph to one file and loading it back, in a new process, without compiling anything.

The file is a zip archive:

- `graph.json`: the format and package version, the graph's target as its kernels ran when saved (its spelling,
  `emulated`, the CPU features: `Target`), the printout, the kernels' titles and schedule parameters, and the run
  plan (graph inputs and outputs with their symbolic dimensions, buffers and their slots, launches) as plain data;
- `kernel<k>.ir.json`: kernel k's IR module before lowering (`hidet_lang.ir.serialize`), with its resolved target;
- `kernel<k>.entry<j>.src` / `.bin` (+ what built it, in `graph.json`): the compilation-cache entries kernel k
  loads: its shared library on the CPU and on the emulator, the host library and the cubin on a GPU;
- `const<k>.npy`: the constants (read with `allow_pickle=False`).

Loading (`stdlib_ops.load`, which makes the graph of what `read_saved` reads) checks the format and the package
version (a file of another version is refused with an error naming both; a file of format 2, which wrote each target
as its spelling and where CUDA ran beside it, is read), and loads each kernel with `CompiledModule.load`: its cache
entries go into the compilation cache under the key that a build of the kernel's IR looks up here (the cache's trust
rules hold, the library is loaded from the private cache directory), then the kernel is built from its IR, which
finds its entries and invokes no compiler. Where the saved entries do not apply here (CUDA saved on a GPU and loaded
where the emulator runs it or the reverse, or a library compiled for another CPU), a warning says so and the kernels
are built from their IR again, which needs the compilers. Nothing is unpickled or evaluated: the archive holds data
only. It does hold machine code, which `load` runs: load only files you trust, as you would a shared library.
"""

from __future__ import annotations

import dataclasses
import io
import json
import warnings
import zipfile
import zlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from codegen import CompiledModule, PortableEntry, build_module, resolve_target
from codegen.runtime import copy_of
from hidet_lang.ir.serialize import SerializationError, from_json, to_json
from hidet_lang.target import Target
from hidet_lang.version import __version__
from stdlib_ops.graph.memory_plan import Launch, Plan, Ref, SlotKind, TensorSpec

if TYPE_CHECKING:
    from stdlib_ops.graph.compiled import CompiledGraph

FORMAT = "hidet_lang-compiled-graph"
FORMAT_VERSION = 3
READABLE_FORMAT_VERSIONS = (2, FORMAT_VERSION)
"""The formats `load` reads: this one, and format 2 (targets as their spellings, and where CUDA ran)."""
GRAPH_FILE = "graph.json"


class SavedGraphError(ValueError):
    """A file that is not a compiled graph this version can load: corrupt, truncated, or of another version."""


def save_compiled(compiled: CompiledGraph, path: str | Path) -> None:
    """Write `compiled` to the file `path` (a zip archive; see the module docstring)."""
    if len(compiled.ir_modules) != len(compiled.modules):
        raise ValueError("save: this compiled graph does not hold its kernels' IR (it was not made by build)")
    kernels = []
    files: dict[str, bytes] = {}
    for k, (ir, module) in enumerate(zip(compiled.ir_modules, compiled.modules)):
        files[f"kernel{k}.ir.json"] = to_json(ir).encode()
        entries = []
        try:
            exported = module.export()
        except ValueError:  # its entries left the cache since it was built: a build publishes them again
            exported = build_module(ir, module.target).export()
        for j, entry in enumerate(exported):
            files[f"kernel{k}.entry{j}.src"] = entry.source.encode()
            files[f"kernel{k}.entry{j}.bin"] = entry.data
            entries.append({"artifact": entry.artifact, "meta": entry.meta})
        kernels.append({"target": _target_data(module.target), "entries": entries})
    for k, constant in enumerate(compiled.constants):
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(constant.numpy(), order="C"), allow_pickle=False)
        files[f"const{k}.npy"] = buffer.getvalue()
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "package_version": __version__,
              "target": _target_data(compiled.target), "description": compiled.description,
              "titles": compiled.titles, "schedules": compiled.kernel_schedules, "kernels": kernels,
              "constants": len(compiled.constants),
              "plan": _plan_data(compiled.plan)}
    tmp = Path(f"{path}.tmp")
    with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(GRAPH_FILE, json.dumps(header, indent=1))
        for name, data in files.items():
            archive.writestr(name, data)
    tmp.replace(path)


def read_saved(path: str | Path) -> dict[str, Any]:
    """The arguments of the `CompiledGraph` saved at `path` (by name; `compiled.load` makes it); SavedGraphError
    for a corrupt or truncated file or one of another version (see the module docstring for what is compiled, and
    when)."""
    try:
        with zipfile.ZipFile(path) as archive:
            return _load(archive, str(path))
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise SavedGraphError(f"{path} is not a saved compiled graph, or it is corrupt or truncated ({exc})") from None
    except (SerializationError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, SavedGraphError):
            raise
        raise SavedGraphError(f"{path} is a damaged saved compiled graph ({type(exc).__name__}: {exc})") from None


def _load(archive: zipfile.ZipFile, path: str) -> dict[str, Any]:
    header = json.loads(archive.read(GRAPH_FILE))
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise SavedGraphError(f"{path} is not a saved compiled graph (no '{FORMAT}' header)")
    if header["format_version"] not in READABLE_FORMAT_VERSIONS or header["package_version"] != __version__:
        raise SavedGraphError(f"{path} was saved by version {header['package_version']} of the package (format "
                              f"{header['format_version']}); this is version {__version__} (format "
                              f"{FORMAT_VERSION}): save it again with this version")
    emulated = header.get("backend") == "emulator"  # format 2 wrote where CUDA ran beside the targets
    saved = _target_of(header["target"], emulated)
    here = resolve_target(saved)
    same = here.emulated == saved.emulated
    if not same:
        warnings.warn(f"{path} was saved where CUDA kernels ran on the {_runs_on(saved)}; here they run on the "
                      f"{_runs_on(here)}: its kernels are built again from their IR", RuntimeWarning, stacklevel=4)
    modules, irs = [], []
    for k, kernel in enumerate(header["kernels"]):
        ir = from_json(archive.read(f"kernel{k}.ir.json"))
        target = _target_of(kernel["target"], emulated)
        if same:
            entries = [PortableEntry(entry["artifact"], archive.read(f"kernel{k}.entry{j}.src").decode(),
                                     dict(entry["meta"]), archive.read(f"kernel{k}.entry{j}.bin"))
                       for j, entry in enumerate(kernel["entries"])]
            modules.append(CompiledModule.load(ir, target, entries, source=f"{path}: kernel {k}"))
        else:
            modules.append(build_module(ir, target))
        irs.append(ir)
    constants = [copy_of(np.load(io.BytesIO(archive.read(f"const{k}.npy")), allow_pickle=False), here.device)
                 for k in range(header["constants"])]  # on 'cpu', cache line aligned, as when built
    return {"target": here, "plan": _plan_of(header["plan"]), "kernels": modules, "titles": header["titles"],
            "constants": constants, "description": header["description"], "ir_modules": irs,
            "kernel_schedules": header["schedules"]}


def _target_data(target: Target) -> dict[str, Any]:
    """`target` as JSON data: its spelling, whether it is emulated, and its CPU features (sorted; None: unknown)."""
    features = None if target.cpu_features is None else sorted(target.cpu_features)
    return {"target": str(target), "emulated": target.emulated, "cpu_features": features}


def _target_of(data: Any, emulated: bool) -> Target:
    """The target `_target_data` wrote, each field checked; or, from a file of format 2, the target `data` spells,
    `emulated` (where CUDA ran when it was saved) if it is CUDA."""
    if isinstance(data, str):
        target = Target.of(data)
        return dataclasses.replace(target, emulated=emulated and target.is_cuda)
    emulated, features = data["emulated"], _checked(data["cpu_features"], list | type(None))
    if not isinstance(emulated, bool):
        raise TypeError(f"expected a boolean 'emulated', got {emulated!r}")
    return dataclasses.replace(Target.of(_checked(data["target"], str)), emulated=emulated,
                               cpu_features=None if features is None else frozenset(_checked(f, str) for f in features))


def _runs_on(target: Target) -> str:
    """Where a CUDA target's kernels run, as a message says it: 'GPU' or 'CUDA emulator'."""
    return "CUDA emulator" if target.emulated else "GPU"


def _plan_data(plan: Plan) -> dict[str, Any]:
    """`plan` as JSON data."""
    return {
        "inputs": [_spec_data(s) for s in plan.inputs],
        "input_names": list(plan.input_names),
        "buffers": [[_spec_data(s), slot] for s, slot in plan.buffers],
        "slots": [[s.dtype, s.factor, list(s.symbols)] for s in plan.slots],
        "launches": [[launch.kernel, [list(a) for a in launch.args], launch.flops] for launch in plan.launches],
        "outputs": [[list(ref), _spec_data(s)] for ref, s in plan.outputs],
    }


def _plan_of(data: dict[str, Any]) -> Plan:
    """The plan `_plan_data` wrote, each field checked to be of its type."""
    return Plan(
        inputs=tuple(_spec_of(s) for s in data["inputs"]),
        input_names=tuple(_checked(n, str) for n in data["input_names"]),
        buffers=tuple((_spec_of(s), _checked(slot, int)) for s, slot in data["buffers"]),
        slots=tuple(SlotKind(_checked(dtype, str), _checked(factor, int), tuple(_checked(x, str) for x in symbols))
                    for dtype, factor, symbols in data["slots"]),
        launches=tuple(_launch_of(launch) for launch in data["launches"]),
        outputs=tuple((_ref_of(ref), _spec_of(s)) for ref, s in data["outputs"]),
    )


def _launch_of(data: list[Any]) -> Launch:
    """The launch `_plan_data` wrote: kernel, arguments and (from this version on) its operations or None."""
    kernel, args, *rest = data
    flops = rest[0] if rest else None
    return Launch(_checked(kernel, int), tuple(_ref_of(a) for a in args),
                  None if flops is None else tuple(_checked(f, int | str) for f in flops))


def _spec_data(spec: TensorSpec) -> list[Any]:
    return [list(spec.shape), spec.dtype]


def _spec_of(data: list[Any]) -> TensorSpec:
    shape, dtype = data
    return TensorSpec(tuple(_checked(d, int | str) for d in shape), _checked(dtype, str))


def _ref_of(data: list[Any]) -> Ref:
    role, which = data
    if role not in ("input", "const", "buffer", "output", "size"):
        raise ValueError(f"unknown argument role {role!r}")
    return (role, _checked(which, str if role == "size" else int))


def _checked(value: Any, kind: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, kind):
        raise TypeError(f"expected {kind}, got {value!r}")
    return value
