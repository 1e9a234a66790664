"""`build_module`: IR module -> lowered IR -> source -> shared library -> `CompiledModule`."""

from __future__ import annotations

from codegen.c_emitter import CEmitter
from codegen.cache import build_and_load
from codegen.compiler import DEFAULT_C_FLAGS
from codegen.module import CompiledModule, bounds_checks
from hidet_lang.ir.func import DEVICE_KINDS, HOST_CALLABLE_KINDS, IRModule
from hidet_lang.passes.kind_rules import check_module_rules, resolve_inferred_kinds
from hidet_lang.passes.pipeline import lower
from hidet_lang.version import __version__

TARGETS = ("cpu", "cuda")


def infer_target(module: IRModule) -> str:
    """The target a module's function kinds imply: 'cuda' if any function is a CUDA one, else 'cpu'."""
    return "cuda" if any(f.attrs.kind in DEVICE_KINDS for f in module.functions) else "cpu"


def build_module(module: IRModule, target: str | None = None, *, check: bool = False) -> CompiledModule:
    """Compile `module` for `target` ('cpu', 'cuda' or 'cuda:sm_XY'; inferred from the function kinds when None).

    `check` verifies the IR between passes and builds the checking mode: bounds-checked accesses on the CPU
    (an IndexError after the call), the emulator's checks for CUDA modules."""
    if not module.functions:
        raise ValueError("the module is empty: define functions with @hidet.script inside `with script_module()`")
    if not any(f.attrs.kind in HOST_CALLABLE_KINDS for f in module.functions):
        names = ", ".join(f"{f.name} ({f.attrs.kind})" for f in module.functions)
        raise ValueError(f"the module has no function callable from Python ({names}); mark the entry point with "
                         "attrs.func_kind = 'public'")
    module = resolve_inferred_kinds(module)
    check_module_rules(module)
    implied = infer_target(module)
    target = target or implied
    if target.split(":")[0] not in TARGETS:
        raise ValueError(f"unknown or unavailable target {target!r}; available: {', '.join(TARGETS)}")
    if implied == "cuda" and not target.startswith("cuda"):
        raise ValueError("the module has CUDA functions; build it for target 'cuda' (or 'cuda:sm_XY')")
    lowered = lower(module, check=check)
    if target.startswith("cuda"):
        from codegen.cuda_build import build_cuda_module

        return build_cuda_module(lowered, target.split(":", 1)[1] if ":" in target else None, check=check)
    emitter = CEmitter(check=check)
    source = emitter.emit_module(lowered)
    lib = build_and_load(source, language="c", flags=DEFAULT_C_FLAGS, version=__version__)
    return CompiledModule(lowered, lib, target, emitter.function_names, sources={"c": source},
                          after_call=[bounds_checks(lib)] if check else [])
