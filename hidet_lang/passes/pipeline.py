"""The lowering pipeline: the single place that lists the steps from parsed IR to what an emitter accepts.

`lower(module, target)` runs, in order: the module steps that settle and check the program (every error a
program can have is raised here, at the user's line, never by an emitter), then the function passes that
lower it. `HIDET_LANG_DUMP_IR=<dir>` writes the IR after every step to `<dir>/<module>/<NN>_<step>.txt`;
`HIDET_LANG_VERIFY_IR=1` (or `verify_ir=True`) runs `verify` after every step.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from hidet_lang.ir.func import Function, IRModule
from hidet_lang.ir.stmt import Stmt
from hidet_lang.ir.types import int64
from hidet_lang.ir.verify import verify
from hidet_lang.passes.flatten_tensor_access import flatten_tensor_access
from hidet_lang.passes.kind_rules import (
    check_entry_points,
    check_kind_rules,
    check_module_rules,
    check_target_support,
    resolve_inferred_kinds,
)
from hidet_lang.passes.lower_task_mappings import lower_task_mappings, worker_bounds
from hidet_lang.passes.parallel_reductions import resolve_parallel_reductions
from hidet_lang.passes.return_flow import check_returns
from hidet_lang.passes.simplify import simplify
from hidet_lang.passes.vector_rules import check_vector_support
from hidet_lang.passes.view_bounds import check_view_bounds
from hidet_lang.target import Target, TargetKind, implied_target_kind

VERIFY_ENV_VAR = "HIDET_LANG_VERIFY_IR"
DUMP_ENV_VAR = "HIDET_LANG_DUMP_IR"


def _checked(check: Callable[[IRModule], None]) -> Callable[[IRModule, Target], IRModule]:
    def step(module: IRModule, target: Target) -> IRModule:
        check(module)
        return module

    return step


def _check_target(module: IRModule, target: Target) -> IRModule:
    check_target_support(module, target)
    return module


def _check_vectors(module: IRModule, target: Target) -> IRModule:
    check_vector_support(module, target)
    return module


def _per_function(rewrite: Callable[[Function], Stmt]) -> Callable[[IRModule, Target], IRModule]:
    def step(module: IRModule, target: Target) -> IRModule:
        return IRModule(tuple(dataclasses.replace(f, body=rewrite(f)) for f in module.functions))

    return step


def _flatten(module: IRModule, target: Target) -> IRModule:
    """`flatten_tensor_access`, with offsets in int64 on the CPU (in the indices' own type on CUDA)."""
    offset_type = int64 if target.kind == TargetKind.CPU else None
    return _per_function(lambda f: flatten_tensor_access(f.body, offset_type))(module, target)


# (name, step, the stage `verify` checks afterwards); checks return the module unchanged or raise a DSL error.
STEPS: tuple[tuple[str, Callable[[IRModule, Target], IRModule], str], ...] = (
    ("check_entry_points", _checked(check_entry_points), "parsed"),
    ("resolve_inferred_kinds", lambda m, t: resolve_inferred_kinds(m), "parsed"),
    ("check_kind_rules", _checked(check_kind_rules), "parsed"),
    ("check_module_rules", _checked(check_module_rules), "parsed"),
    ("check_target_support", _check_target, "parsed"),
    ("check_vector_support", _check_vectors, "parsed"),
    ("check_returns", _checked(check_returns), "parsed"),
    ("check_view_bounds", _checked(check_view_bounds), "parsed"),
    ("resolve_parallel_reductions", lambda m, t: resolve_parallel_reductions(m), "parsed"),
    ("lower_task_mappings", _per_function(lambda f: lower_task_mappings(f.body, worker_bounds(f))),
     "mappings_lowered"),
    ("flatten_tensor_access", _flatten, "flattened"),
    ("simplify", _per_function(lambda f: simplify(f.body)), "flattened"),
)


@dataclass(frozen=True, slots=True)
class LoweredModule(IRModule):
    """A module `lower` checked and lowered for `target`: the only input the emitters accept (a part of one, such
    as its device functions, is made with `dataclasses.replace(lowered, functions=...)`)."""

    target: Target


def require_lowered(module: IRModule) -> LoweredModule:
    """`module` itself if `lower` made it (the emitters' entry check); TypeError otherwise."""
    if not isinstance(module, LoweredModule):
        raise TypeError(f"emitters take a module lowered by hidet_lang.passes.pipeline.lower, got a "
                        f"{type(module).__name__}")
    return module


def lowering_is_observed() -> bool:
    """Whether the environment asks to see every lowering (`HIDET_LANG_VERIFY_IR`, `HIDET_LANG_DUMP_IR`): a build
    then lowers even a module whose build it could reuse."""
    return os.environ.get(VERIFY_ENV_VAR, "") not in ("", "0") or bool(os.environ.get(DUMP_ENV_VAR))


def lower(module: IRModule, target: Target | None = None, *, verify_ir: bool = False) -> LoweredModule:
    """Check `module` and lower it for `target` (None: the target its function kinds imply, on a GPU).

    Raises the program's first error (a DSL error at the user's line, or ValueError for a module that cannot
    be built at all). With `verify_ir` or `HIDET_LANG_VERIFY_IR=1`, `verify` checks the IR after every step."""
    target = target or Target(implied_target_kind(module))
    verify_ir = verify_ir or os.environ.get(VERIFY_ENV_VAR, "") not in ("", "0")
    dump_dir = os.environ.get(DUMP_ENV_VAR)
    if verify_ir:
        verify(module, "parsed")
    _dump(dump_dir, module, 0, "parsed")
    for number, (name, step, stage) in enumerate(STEPS, start=1):
        module = step(module, target)
        if verify_ir:
            verify(module, stage)
        _dump(dump_dir, module, number, name)
    return LoweredModule(module.functions, target)


def _dump(dump_dir: str | None, module: IRModule, number: int, name: str) -> None:
    if not dump_dir:
        return
    folder = Path(dump_dir) / "_".join(f.name for f in module.functions)[:80]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{number:02d}_{name}.txt").write_text(str(module) + "\n")


__all__ = ["STEPS", "LoweredModule", "Target", "TargetKind", "lower", "require_lowered"]
