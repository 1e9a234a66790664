"""The lowering pipeline: the single place that lists the passes, in order.

`HIDET_LANG_DUMP_IR=<dir>` writes the IR after every step to `<dir>/<module>/<NN>_<step>.txt`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path

from hidet_lang.ir.func import Function, IRModule
from hidet_lang.ir.stmt import Stmt
from hidet_lang.ir.verify import verify
from hidet_lang.passes.flatten_tensor_access import flatten_tensor_access
from hidet_lang.passes.lower_task_mappings import lower_task_mappings, worker_bounds
from hidet_lang.passes.simplify import simplify

# (name, the function's new body, stage the IR is in afterwards)
STEPS: tuple[tuple[str, Callable[[Function], Stmt], str], ...] = (
    ("lower_task_mappings", lambda f: lower_task_mappings(f.body, worker_bounds(f)), "mappings_lowered"),
    ("flatten_tensor_access", lambda f: flatten_tensor_access(f.body), "flattened"),
    ("simplify", lambda f: simplify(f.body), "flattened"),
)


def lower(module: IRModule, *, check: bool = False) -> IRModule:
    """Run every step of the pipeline on every function; with `check`, verify the IR after each step."""
    dump_dir = os.environ.get("HIDET_LANG_DUMP_IR")
    if check:
        verify(module, "parsed")
    _dump(dump_dir, module, 0, "parsed")
    for number, (name, rewrite, stage) in enumerate(STEPS, start=1):
        module = IRModule(tuple(dataclasses.replace(f, body=rewrite(f)) for f in module.functions))
        if check:
            verify(module, stage)
        _dump(dump_dir, module, number, name)
    return module


def _dump(dump_dir: str | None, module: IRModule, number: int, name: str) -> None:
    if not dump_dir:
        return
    folder = Path(dump_dir) / "_".join(f.name for f in module.functions)[:80]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{number:02d}_{name}.txt").write_text(str(module) + "\n")
